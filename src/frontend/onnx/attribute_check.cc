// Attribute names and types against libonnx's op schemas (frontend/onnx/attribute_check.h).
#include "frontend/onnx/attribute_check.h"

#include <onnx/defs/schema.h>

namespace kiln {
namespace {

const char* type_name(onnx::AttributeProto::AttributeType t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "float";
    case onnx::AttributeProto::INT: return "int";
    case onnx::AttributeProto::STRING: return "string";
    case onnx::AttributeProto::TENSOR: return "tensor";
    case onnx::AttributeProto::GRAPH: return "graph";
    case onnx::AttributeProto::SPARSE_TENSOR: return "sparse tensor";
    case onnx::AttributeProto::TYPE_PROTO: return "type";
    case onnx::AttributeProto::FLOATS: return "floats";
    case onnx::AttributeProto::INTS: return "ints";
    case onnx::AttributeProto::STRINGS: return "strings";
    case onnx::AttributeProto::TENSORS: return "tensors";
    case onnx::AttributeProto::GRAPHS: return "graphs";
    case onnx::AttributeProto::SPARSE_TENSORS: return "sparse tensors";
    case onnx::AttributeProto::TYPE_PROTOS: return "types";
    default: return "undefined";
  }
}

}  // namespace

std::string check_onnx_attributes(const onnx::NodeProto& n, const std::string& domain, int64_t opset) {
  const std::string onnx_domain = domain.empty() ? std::string(onnx::ONNX_DOMAIN) : domain;
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto range = ranges.find(onnx_domain);
  // A newer opset than libonnx knows may have changed the op's attributes: no verdict.
  if (range == ranges.end() || opset > range->second.second) return "";
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), onnx_domain);
  if (!schema) return "";
  const auto& allowed = schema->attributes();
  for (const auto& a : n.attribute()) {
    if (a.name().rfind("kiln.", 0) == 0) continue;
    const auto it = allowed.find(a.name());
    if (it == allowed.end()) {
      std::string names;
      for (const auto& [name, attr] : allowed) names += (names.empty() ? "" : ", ") + name;
      return "attribute '" + a.name() + "' is not defined by " + n.op_type() + " (opset " + std::to_string(opset) +
             "; its attributes: " + (names.empty() ? "none" : names) + ")";
    }
    // ref_attr_name: a function body's reference, typed where the function is called.
    if (a.type() != onnx::AttributeProto::UNDEFINED && a.ref_attr_name().empty() && a.type() != it->second.type)
      return "attribute '" + a.name() + "' should be of type " + type_name(it->second.type) + ", got " +
             type_name(a.type());
  }
  return "";
}

}  // namespace kiln
