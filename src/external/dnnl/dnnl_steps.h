// The oneDNN backend's artifact: the region as a list of library calls ("steps"), each naming the
// region values (indices into ext::Region::values) it reads and writes, with the element-wise and
// binary ops that follow it fused as post-ops. Saved as JSON (format "kiln-dnnl/1").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/extension.h"

namespace kiln::external::dnnl_backend {

struct PostOp {
  // "eltwise", "binary" (dst op= src1) or "sum" (dst += src1: src1 is copied into, or already
  // is, the destination before the primitive runs)
  std::string kind;
  std::string alg;   // eltwise: "relu", "clip", ...; binary: "add", "mul", ...
  float alpha = 0, beta = 0;
  int src1 = -1;  // binary, sum: the value it reads
};

struct Step {
  // conv, matmul, inner_product, pool, eltwise, binary, softmax, bnorm, lnorm, concat, view
  std::string kind;
  std::string node;          // the ONNX node's name (messages)
  std::vector<int> inputs;   // conv: x, w[, b]; matmul: a, b[, bias]; inner_product: x, w[, b]; ...
  int output = -1;
  std::string alg;           // pool: max, avg_include, avg_exclude; eltwise / binary: the algorithm
  float alpha = 0, beta = 0, epsilon = 0;
  int64_t axis = -1, group = 1;
  bool trans_b = false, ceil_mode = false, global = false;
  std::string auto_pad;      // conv / pool: NOTSET, VALID, SAME_UPPER, SAME_LOWER
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::vector<PostOp> post;
};

std::string save_steps(const std::vector<Step>& steps);
std::vector<Step> load_steps(const std::string& artifact);  // std::runtime_error when malformed

// The region -> steps lowering (dnnl_codegen.cc).
bool supported(const ext::Region& r, const ext::Node& n);
std::vector<Step> lower_region(const ext::Region& r);

// A loaded region (dnnl_module.cc).
std::unique_ptr<ext::RuntimeModule> make_module(const std::vector<Step>& steps, const ext::Region& r, int threads);

}  // namespace kiln::external::dnnl_backend
