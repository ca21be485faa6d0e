// .pb value files: TensorProto, SequenceProto and OptionalProto in and out.
#include <onnx/onnx-data_pb.h>

#include <fstream>

#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/proto_util.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln {
namespace {

RtValue value_from_sequence(const onnx::SequenceProto& s, const std::string& what);

RtValue value_from_optional(const onnx::OptionalProto& o, const std::string& what) {
  RtValue v;
  switch (o.elem_type()) {
    case onnx::OptionalProto::TENSOR:
      if (o.has_tensor_value()) v = RtValue(tensor_from_proto(o.tensor_value(), "", what));
      break;
    case onnx::OptionalProto::SEQUENCE:
      if (o.has_sequence_value()) v = value_from_sequence(o.sequence_value(), what);
      break;
    case onnx::OptionalProto::UNDEFINED:
      break;
    default:
      throw Error(ErrorKind::kUnsupported, "'" + what + "': optional of map/sparse types");
  }
  v.optional = true;
  return v;
}

RtValue value_from_sequence(const onnx::SequenceProto& s, const std::string& what) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && s.elem_type() != onnx::SequenceProto::UNDEFINED)
    throw Error(ErrorKind::kUnsupported, "'" + what + "': sequences of non-tensors");
  std::vector<Tensor> items;
  for (const auto& t : s.tensor_values()) items.push_back(tensor_from_proto(t, "", what));
  DType elem = items.empty() ? DType::kFloat32 : items[0].dtype();
  return RtValue::make_sequence(std::move(items), elem);
}

void sequence_to_proto(const RtValue& v, const std::string& name, onnx::SequenceProto* s) {
  s->set_name(name);
  s->set_elem_type(onnx::SequenceProto::TENSOR);
  for (const auto& t : v.sequence) tensor_to_proto(t, "", s->add_tensor_values());
}

}  // namespace

RtValue parse_value_pb(const std::string& bytes, const Type* hint, std::string* name_out,
                       const std::string& display_name) {
  Type::Kind kind = hint ? hint->kind : Type::Kind::kTensor;
  try {
    if (kind == Type::Kind::kSequence) {
      onnx::SequenceProto s;
      if (!parse_proto(s, bytes.data(), bytes.size()))
        throw Error(ErrorKind::kBadInput, "not a valid SequenceProto");
      if (name_out) *name_out = s.name();
      return value_from_sequence(s, display_name);
    }
    if (kind == Type::Kind::kOptional) {
      onnx::OptionalProto o;
      if (!parse_proto(o, bytes.data(), bytes.size()))
        throw Error(ErrorKind::kBadInput, "not a valid OptionalProto");
      if (name_out) *name_out = o.name();
      return value_from_optional(o, display_name);
    }
    onnx::TensorProto t;
    if (!parse_proto(t, bytes.data(), bytes.size()))
      throw Error(ErrorKind::kBadInput, "not a valid TensorProto (truncated or not a .pb tensor?)");
    if (name_out) *name_out = t.name();
    return RtValue(tensor_from_proto(t, "", t.name().empty() ? display_name : t.name()));
  } catch (const Error& e) {
    ErrorLocation loc;
    loc.file = display_name;
    // Data files are inputs: report problems as bad input data, not as a bad model.
    ErrorKind k = e.kind() == ErrorKind::kInvalidModel ? ErrorKind::kBadInput : e.kind();
    throw Error(k, e.message(), loc);
  }
}

RtValue read_value_pb(const std::string& path, const Type* hint, std::string* name_out) {
  return parse_value_pb(read_file(path, ErrorKind::kBadInput), hint, name_out, path);
}

void write_value_pb(const std::string& path, const std::string& name, const RtValue& v) {
  std::string bytes;
  if (v.optional) {
    onnx::OptionalProto o;
    o.set_name(name);
    if (v.is_tensor()) {
      o.set_elem_type(onnx::OptionalProto::TENSOR);
      tensor_to_proto(v.tensor, "", o.mutable_tensor_value());
    } else if (v.is_sequence()) {
      o.set_elem_type(onnx::OptionalProto::SEQUENCE);
      sequence_to_proto(v, "", o.mutable_sequence_value());
    } else {
      o.set_elem_type(onnx::OptionalProto::UNDEFINED);
    }
    o.SerializeToString(&bytes);
  } else if (v.is_sequence()) {
    onnx::SequenceProto s;
    sequence_to_proto(v, name, &s);
    s.SerializeToString(&bytes);
  } else {
    onnx::TensorProto t;
    tensor_to_proto(v.tensor, name, &t);
    t.SerializeToString(&bytes);
  }
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(ErrorKind::kUsage, "cannot write '" + path + "'");
}

}  // namespace kiln
