// Static quantization as a graph rewrite: QuantizeLinear/DequantizeLinear pairs on the float
// activations of quantizable nodes (ranges from calibration), int8 weights and int32 biases
// behind DequantizeLinear. The result is a standard QDQ model that any ONNX runtime runs.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct QdqOptions {
  DType activation_dtype = DType::kUInt8;  // kUInt8 or kInt8 (both asymmetric)
  bool per_channel = true;                 // weights per output channel (needs opset >= 13)
  std::set<std::string> exclude;           // node names or op types left in float
  // Weights over [-63, 63] instead of [-127, 127]: u8 x s8 products summed in pairs then fit
  // int16, which ONNX Runtime's AVX2/AVX-512 (non-VNNI) int8 kernels assume (they saturate).
  bool reduce_range = false;
  int weight_max() const { return reduce_range ? 63 : 127; }
};

// A calibrated activation range; quantization widens it to include 0.
struct TensorRange {
  float lo = 0, hi = 0;
};

// Scale and zero point of an activation range for `activation_dtype` (asymmetric, the range
// widened to include 0; an empty range gets scale 1).
struct QuantParams {
  float scale = 1;
  int32_t zero_point = 0;
};
QuantParams activation_quant_params(TensorRange r, DType activation_dtype);

// The float activations a static quantization of `m` quantizes (main graph, graph inputs then
// node order): those an op reads as int8 — the activation inputs of Conv/ConvTranspose/MatMul/
// Gemm, both inputs of an Add/Mul of two activations, and the input of a pooling or
// data-movement op whose output is quantized. Graph outputs stay float. (insert_qdq.cc: roles.)
std::vector<const Value*> qdq_candidates(const Model& m, const QdqOptions& opts);

struct QdqResult {
  std::vector<std::string> quantized_tensors;  // activations given a Q/DQ pair
  std::vector<std::string> dequantized_outputs;  // the DequantizeLinear output replacing each
  int quantized_weights = 0;
  int quantized_biases = 0;
  std::vector<std::string> notes;  // what was left in float and why
  // Nodes of the main graph that compute in float: op type -> (why, node names). Excluded
  // nodes, and ops without an int8 role (activations, normalizations, Softmax, ...).
  struct FloatOps {
    std::string why;
    std::vector<std::string> nodes;
  };
  std::map<std::string, FloatOps> float_ops;
};

// kUnsupported when `m`'s opset has no QuantizeLinear (< 10), naming what to do.
void check_qdq_opset(const Model& m);

// Rewrites `m`: each candidate with a range gets one Q/DQ pair that all its consumers read;
// constant weights of Conv/ConvTranspose/MatMul/Gemm become int8 (symmetric, per channel where
// opts and the opset allow) behind a DequantizeLinear; their biases become int32 with scale
// input_scale * weight_scale when the input is quantized. Throws kUnsupported for opset < 10.
QdqResult insert_qdq(Model& m, const std::map<std::string, TensorRange>& ranges, const QdqOptions& opts);

}  // namespace kiln
