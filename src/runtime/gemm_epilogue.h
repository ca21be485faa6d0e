// The fused epilogue of GEMM/conv ops (GemmDesc::epilogue_bias/epilogue_residual/clamp_*): its
// validation, the per-channel bias an op folds once, and the in-place residual + clamp pass for
// ops whose kernel does not apply those itself. Tests: tests/runtime/test_gemm_epilogue.cc.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/s8_gemm.h"
#include "runtime/gemm_ops.h"

namespace kiln::gemm_ops {

// Output channels the epilogue bias is per: Conv and ConvTranspose dim 1, MatMul/Gemm the last dim.
int64_t epilogue_channels(const GemmDesc& d);

// True when the descriptor carries a fused epilogue (bias, residual, clamp or activation).
bool has_epilogue(const GemmDesc& d);

// True when the epilogue fields are consistent: operand indices past the node's inputs and in
// range, a present f32 constant bias with one value per channel, an f32 residual with exactly
// the output's dims. Ops are only made for valid descriptors (make_gemm_op checks).
bool epilogue_valid(const GemmDesc& d);

// The op's per-channel bias: the node's own bias (constant: folded once; run-time: added per
// run) plus the epilogue bias (always constant).
class ChannelBias {
 public:
  // node_bias: the node's bias operand (null or !present: none); its values are scaled by
  // `node_scale` (Gemm's beta).
  void init(const GemmDesc& d, const Operand* node_bias, int64_t channels, float node_scale = 1.0f);
  // The bias for this run, or null when there is none. node_bias_rt: the node's bias values
  // this run (used only when it is not a constant).
  const float* get(const float* node_bias_rt);
  bool present() const { return present_; }

 private:
  bool present_ = false, node_runtime_ = false;
  float node_scale_ = 1.0f;
  size_t channels_ = 0;
  std::vector<float> folded_;  // the constant part (node bias when constant + epilogue bias)
  std::vector<float> run_;     // folded_ + the run-time node bias
};

// y = act(clamp(y + r)) over n values (r null: no residual; clamp with [lo, hi] when `clamp`):
// the tail of an epilogue that an op applies in a pass of its own.
void add_residual_clamp_activate(float* y, const float* r, int64_t n, bool clamp, float lo, float hi,
                                 kernels::Activation act);

// Residual + clamp + activation of the epilogue, applied after the kernel:
// y = act(clamp(y + residual, lo, hi)).
struct EpilogueTail {
  int32_t residual = -1;  // operand index, or -1
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  kernels::Activation act = kernels::Activation::kNone;

  void init(const GemmDesc& d);
  bool has_clamp() const;
  bool any() const { return residual >= 0 || has_clamp() || act != kernels::Activation::kNone; }
  const float* residual_data(const std::vector<const RtValue*>& ins) const;
  // In place over y's n elements (parallel on the current pool); a no-op when !any().
  void apply(float* y, int64_t n, const std::vector<const RtValue*>& ins) const;
};

// The whole fused epilogue of a conv op whose kernels apply it per output channel (GEMM conv,
// Winograd): the node's bias (constant or run-time) plus the epilogue bias, the residual, the
// clamp (a fused Clip/Relu and the descriptor's) and the activation.
class ConvEpilogue {
 public:
  // node bias: operand 2 of `d`, if any; lo/hi: the op's own fused clamp.
  void init(const GemmDesc& d, int64_t channels, float lo, float hi);
  // take_epilogue: the descriptor's epilogue fields join the op's (always taken).
  void take(const GemmDesc& d);
  // This run's epilogue for image 0 (per-channel bias; the residual, if any, with leading dim
  // `plane`); later images offset `residual` by channels * plane.
  kernels::RowEpilogue bind(const std::vector<const RtValue*>& ins, int64_t plane);

 private:
  int64_t channels_ = 0;
  Operand node_bias_;  // its `constant` is only read while the op is made
  ChannelBias bias_;
  int32_t residual_ = -1;  // operand index of the fused residual
  kernels::RowEpilogue ep_;
};

// take_epilogue of ops whose own kernel adds a per-channel bias and clamps (depthwise, Winograd):
// folds the descriptor's constant bias into `bias` (`channels` values, created as zeros when the
// op has none) and, when there is no residual, its clamp into [lo, hi]; `tail` keeps the rest for
// the op's pass (residual and the clamp after it, the activation). False (nothing changed) when
// the op cannot take the epilogue: a run-time node bias, or its own clamp before a residual.
bool fold_into_channel_kernel(const GemmDesc& d, int64_t channels, bool& has_bias, std::vector<float>& bias,
                              float& lo, float& hi, EpilogueTail& tail);

// The constants of an integer op's requantizing epilogue (GemmDesc::requant_*), per channel.
struct RequantConstants {
  std::vector<float> scale, bias;  // bias empty: none
  bool relu = false;
  float y_scale = 1.0f;
  uint8_t y_zero_point = 0;
  // The kernel's view for an input zero point zx: sums less zx * colsum[m] (the weights' sums).
  kernels::Requantize bind(uint8_t zx, const std::vector<int32_t>& colsum);

 private:
  std::vector<int32_t> correction_;
};
// d's requantizing epilogue with `channels` output channels, or nullopt when it has none or it is
// not one an op takes: constants of the documented types and sizes, no other epilogue field but
// the bias and a Relu (clamp_lo = 0), uint8 out.
std::optional<RequantConstants> requant_constants(const GemmDesc& d, int64_t channels);
// The constants of an integer op's dequantizing epilogue (GemmDesc: requant_scale without a
// y_scale; float out), per channel, and the operand of the run-time factor of the scale (-1: none).
struct DequantConstants {
  std::vector<float> scale, bias;  // bias empty: none
  int32_t scale_factor = -1;
};
// d's dequantizing epilogue with `channels` output channels, or nullopt when it has none or it is
// not one an op takes: constants of the documented types and sizes, the factor an f32 scalar, no
// other epilogue field but the bias, f32 out.
std::optional<DequantConstants> dequant_constants(const GemmDesc& d, int64_t channels);
// True when d carries a requantizing or dequantizing epilogue (make_gemm_op then needs an op that
// takes it).
inline bool has_requant(const GemmDesc& d) { return d.requant_scale >= 0; }
inline bool has_dequant(const GemmDesc& d) { return has_requant(d) && d.requant_y_scale < 0; }

}  // namespace kiln::gemm_ops
