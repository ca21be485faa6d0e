// ONNX files in and out: ModelProto <-> Model import and export, and TensorProto/SequenceProto/OptionalProto
// value files (.pb) used for inputs and outputs. No protobuf type leaks out of this header.
#pragma once

#include <string>

#include "core/value.h"
#include "ir/graph.h"

namespace kiln {

struct ImportOptions {
  // Folder external-data paths are resolved against (default: the model file's folder).
  std::string base_dir;
};

// Loads an ONNX model file; throws kiln::Error (kInvalidModel/kUnsupported) naming the file,
// node and op on any problem.
Model load_onnx_model(const std::string& path, const ImportOptions& opts = {});
Model load_onnx_model_from_bytes(const void* data, size_t size, const std::string& display_name,
                                 const ImportOptions& opts = {});

// Model -> ONNX ModelProto bytes (producer "kiln"; kiln.* annotations dropped, kiln composite ops
// written as standard ONNX ops or expanded into primitive ones). Throws kUnsupported for models
// over 2 GB (use save_onnx_model) and for kiln-internal ops without an ONNX form.
std::string serialize_onnx_model(const Model& m);
struct ExportOptions {
  // Main-graph initializers totalling more bytes than this are written to external data.
  size_t external_data_threshold = size_t{1800} << 20;
};
// Writes `path`; when the initializers exceed the threshold (~1.8 GB), those of 1 KiB and more go
// to `<path>.data` (ONNX external data, location relative to the model's folder).
void save_onnx_model(const Model& m, const std::string& path, const ExportOptions& opts = {});

// Reads a .pb value file. `hint` selects the proto kind (sequence/optional types read
// SequenceProto/OptionalProto; otherwise TensorProto). `name_out` receives the embedded name.
RtValue read_value_pb(const std::string& path, const Type* hint, std::string* name_out);
RtValue parse_value_pb(const std::string& bytes, const Type* hint, std::string* name_out,
                       const std::string& display_name);
// Writes a value as TensorProto / SequenceProto / OptionalProto with `name` set.
void write_value_pb(const std::string& path, const std::string& name, const RtValue& v);

}  // namespace kiln
