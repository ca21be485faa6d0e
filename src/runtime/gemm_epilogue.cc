// Fused GEMM/conv epilogue helpers (see gemm_epilogue.h).
#include "runtime/gemm_epilogue.h"

#include <algorithm>

#include "core/shape.h"
#include "runtime/thread_pool.h"

namespace kiln::gemm_ops {

int64_t epilogue_channels(const GemmDesc& d) {
  if (d.out_dims.empty()) return 0;
  return channels_first(d.kind) ? (d.out_dims.size() > 1 ? d.out_dims[1] : 0) : d.out_dims.back();
}

bool has_epilogue(const GemmDesc& d) {
  return d.epilogue_bias >= 0 || d.epilogue_residual >= 0 || d.clamp_lo > -std::numeric_limits<float>::infinity() ||
         d.clamp_hi < std::numeric_limits<float>::infinity() || d.epilogue_activation != 0;
}

bool epilogue_valid(const GemmDesc& d) {
  const int64_t first = static_cast<int64_t>(node_arity(d.kind)), n = static_cast<int64_t>(d.operands.size());
  auto ok_index = [&](int32_t i) { return i < 0 || (i >= first && i < n); };
  if (!ok_index(d.epilogue_bias) || !ok_index(d.epilogue_residual)) return false;
  if (d.epilogue_bias >= 0 && d.epilogue_bias == d.epilogue_residual) return false;
  // An activation comes last and never together with a clamp (the executor fuses one or the other).
  if (d.epilogue_activation < 0 || d.epilogue_activation > 3) return false;
  if (d.epilogue_activation != 0 &&
      (d.clamp_lo > -std::numeric_limits<float>::infinity() || d.clamp_hi < std::numeric_limits<float>::infinity()))
    return false;
  if (d.epilogue_bias >= 0) {
    const Operand& b = d.operands[static_cast<size_t>(d.epilogue_bias)];
    if (!b.present || b.dtype != DType::kFloat32 || !b.constant || b.constant->dtype() != DType::kFloat32 ||
        b.constant->numel() != epilogue_channels(d))
      return false;
  }
  if (d.epilogue_residual >= 0) {
    const Operand& r = d.operands[static_cast<size_t>(d.epilogue_residual)];
    if (!r.present || r.dtype != DType::kFloat32 || r.dims != d.out_dims) return false;
  }
  return true;
}

void ChannelBias::init(const GemmDesc& d, const Operand* node_bias, int64_t channels, float node_scale) {
  const size_t c = static_cast<size_t>(channels);
  const bool has_node = node_bias && node_bias->present;
  node_runtime_ = has_node && !node_bias->constant;
  node_scale_ = node_scale;
  channels_ = c;
  folded_.clear();
  if (has_node && node_bias->constant) {
    const float* b = node_bias->constant->data<float>();
    folded_.assign(b, b + c);
    for (float& v : folded_) v *= node_scale;
  }
  if (d.epilogue_bias >= 0) {
    const float* e = d.operands[static_cast<size_t>(d.epilogue_bias)].constant->data<float>();
    if (folded_.empty()) folded_.assign(c, 0.0f);
    for (size_t i = 0; i < c; ++i) folded_[i] += e[i];
  }
  present_ = has_node || d.epilogue_bias >= 0;
}

const float* ChannelBias::get(const float* node_bias_rt) {
  if (!node_runtime_) return folded_.empty() ? nullptr : folded_.data();
  if (folded_.empty() && node_scale_ == 1.0f) return node_bias_rt;
  // The node's own bias plus the epilogue's (folded_ holds only the epilogue part here).
  run_.resize(channels_);
  for (size_t i = 0; i < channels_; ++i) run_[i] = node_bias_rt[i] * node_scale_ + (folded_.empty() ? 0.0f : folded_[i]);
  return run_.data();
}

void EpilogueTail::init(const GemmDesc& d) {
  residual = d.epilogue_residual;
  lo = d.clamp_lo;
  hi = d.clamp_hi;
  act = static_cast<kernels::Activation>(d.epilogue_activation);
}

bool EpilogueTail::has_clamp() const {
  return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
}

const float* EpilogueTail::residual_data(const std::vector<const RtValue*>& ins) const {
  if (residual < 0) return nullptr;
  return ins.at(static_cast<size_t>(residual))->tensor.data<float>();
}

bool fold_into_channel_kernel(const GemmDesc& d, int64_t channels, bool& has_bias, std::vector<float>& bias,
                              float& lo, float& hi, EpilogueTail& tail) {
  if (has_bias && bias.empty()) return false;  // run-time node bias: all in the generic pass
  const bool own_clamp = lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
  if (d.epilogue_residual >= 0 && own_clamp) return false;  // its clamp would come before the residual
  if (d.epilogue_bias >= 0) {
    const float* e = d.operands[static_cast<size_t>(d.epilogue_bias)].constant->data<float>();
    if (bias.empty()) bias.assign(static_cast<size_t>(channels), 0.0f);
    for (int64_t c = 0; c < channels; ++c) bias[static_cast<size_t>(c)] += e[c];
    has_bias = true;
  }
  tail.init(d);
  if (tail.residual < 0) {  // the clamp goes in the kernel; an activation stays in the pass
    lo = std::max(lo, tail.lo);
    hi = std::min(hi, tail.hi);
    tail.lo = -std::numeric_limits<float>::infinity();
    tail.hi = std::numeric_limits<float>::infinity();
  }
  return true;
}

void EpilogueTail::apply(float* y, int64_t n, const std::vector<const RtValue*>& ins) const {
  if (!any()) return;
  const float* r = residual_data(ins);
  const float l = lo, h = hi;
  const bool clamp = has_clamp();
  constexpr int64_t kChunk = 16384;
  current_thread_pool().parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c0, int64_t c1) {
    const int64_t b = c0 * kChunk, e = std::min(n, c1 * kChunk);
    add_residual_clamp_activate(y + b, r ? r + b : nullptr, e - b, clamp, l, h, act);
  });
}

void add_residual_clamp_activate(float* y, const float* r, int64_t n, bool clamp, float lo, float hi,
                                 kernels::Activation act) {
  if (r && clamp) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i] + r[i], lo), hi);
  } else if (r) {
    for (int64_t i = 0; i < n; ++i) y[i] += r[i];
  } else if (clamp) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], lo), hi);
  }
  kernels::apply_activation_inplace(act, y, n);
}

void ConvEpilogue::init(const GemmDesc& d, int64_t channels, float lo, float hi) {
  channels_ = channels;
  node_bias_ = d.operands.size() > 2 ? d.operands[2] : Operand();
  bias_.init(d, &node_bias_, channels);
  ep_.lo = lo;
  ep_.hi = hi;
}

void ConvEpilogue::take(const GemmDesc& d) {
  bias_.init(d, &node_bias_, channels_);
  ep_.lo = std::max(ep_.lo, d.clamp_lo);
  ep_.hi = std::min(ep_.hi, d.clamp_hi);
  residual_ = d.epilogue_residual;
  ep_.act = static_cast<kernels::Activation>(d.epilogue_activation);
}

kernels::RowEpilogue ConvEpilogue::bind(const std::vector<const RtValue*>& ins, int64_t plane) {
  kernels::RowEpilogue ep = ep_;
  ep.bias = bias_.get(node_bias_.present && !node_bias_.constant ? ins[2]->tensor.data<float>() : nullptr);
  ep.residual = residual_ >= 0 ? ins[static_cast<size_t>(residual_)]->tensor.data<float>() : nullptr;
  ep.ldr = plane;
  return ep;
}

kernels::Requantize RequantConstants::bind(uint8_t zx, const std::vector<int32_t>& colsum) {
  kernels::Requantize rq;
  rq.scale = scale.data();
  rq.bias = bias.empty() ? nullptr : bias.data();
  rq.relu = relu;
  rq.y_scale = y_scale;
  rq.y_zero_point = y_zero_point;
  if (zx != 0) {
    correction_.resize(colsum.size());
    for (size_t m = 0; m < colsum.size(); ++m) correction_[m] = static_cast<int32_t>(zx) * colsum[m];
    rq.correction = correction_.data();
  }
  return rq;
}

namespace {
// Epilogue operand i (after the node's own) when it is a constant of dtype t, else null.
const Tensor* epilogue_constant(const GemmDesc& d, int32_t i, DType t) {
  if (i < static_cast<int32_t>(node_arity(d.kind)) || i >= static_cast<int32_t>(d.operands.size())) return nullptr;
  const Operand& o = d.operands[static_cast<size_t>(i)];
  return o.present && o.constant && o.dtype == t && o.constant->dtype() == t ? o.constant : nullptr;
}

// True when a constant of dims c, broadcast against the output's dims, varies at most along the
// channel axis (one value, or one per channel).
bool per_channel_dims(const std::vector<int64_t>& c, const std::vector<int64_t>& out, size_t axis) {
  if (c.size() > out.size()) return false;
  for (size_t k = 0; k < c.size(); ++k) {
    const size_t at = out.size() - c.size() + k;
    if (c[k] != 1 && !(at == axis && c[k] == out[axis])) return false;
  }
  return true;
}
}  // namespace

namespace {
// The scale (requant_scale) and bias (epilogue_bias) of an integer op's epilogue as `channels`
// values each (bias empty when there is none); false when they are not f32 constants with one
// value or one per channel.
bool channel_constants(const GemmDesc& d, int64_t channels, std::vector<float>& scale, std::vector<float>& bias) {
  const Tensor* s = epilogue_constant(d, d.requant_scale, DType::kFloat32);
  const Tensor* b = d.epilogue_bias < 0 ? nullptr : epilogue_constant(d, d.epilogue_bias, DType::kFloat32);
  const size_t axis = channels_first(d.kind) ? 1 : d.out_dims.size() - 1;
  auto per_channel = [&](int32_t i) {
    return d.out_dims.size() > axis && per_channel_dims(d.operands[static_cast<size_t>(i)].dims, d.out_dims, axis);
  };
  if (!s || !per_channel(d.requant_scale) || (d.epilogue_bias >= 0 && (!b || !per_channel(d.epilogue_bias))) ||
      d.out_dims[axis] != channels)
    return false;
  auto expand = [&](const Tensor& t, std::vector<float>& out) {
    const float* v = t.data<float>();
    if (t.numel() == channels) out.assign(v, v + channels);
    else if (t.numel() == 1) out.assign(static_cast<size_t>(channels), v[0]);
    else return false;
    return true;
  };
  bias.clear();
  return expand(*s, scale) && (!b || expand(*b, bias));
}

// True when d has no epilogue field an integer op's epilogue does not take (besides a Relu when
// `relu_ok`).
bool only_integer_epilogue(const GemmDesc& d, bool relu_ok) {
  const bool relu = relu_ok && d.clamp_lo == 0.0f;
  return d.epilogue_residual < 0 && d.epilogue_activation == 0 && d.input_scale < 0 && d.epilogue_max_pool == 0 &&
         d.clamp_hi == std::numeric_limits<float>::infinity() &&
         (relu || d.clamp_lo == -std::numeric_limits<float>::infinity());
}
}  // namespace

std::optional<RequantConstants> requant_constants(const GemmDesc& d, int64_t channels) {
  if (!has_requant(d) || has_dequant(d) || d.out_dtype != DType::kUInt8 || d.requant_scale_factor >= 0 ||
      !only_integer_epilogue(d, true) || d.out_dims.empty())
    return std::nullopt;
  RequantConstants rq;
  const Tensor* y_scale = epilogue_constant(d, d.requant_y_scale, DType::kFloat32);
  const Tensor* y_zero = d.requant_y_zero_point < 0 ? nullptr : epilogue_constant(d, d.requant_y_zero_point, DType::kUInt8);
  if (!channel_constants(d, channels, rq.scale, rq.bias) || !y_scale || y_scale->numel() != 1 ||
      (d.requant_y_zero_point >= 0 && (!y_zero || y_zero->numel() != 1)))
    return std::nullopt;
  rq.relu = d.clamp_lo == 0.0f;
  rq.y_scale = y_scale->data<float>()[0];
  rq.y_zero_point = y_zero ? y_zero->data<uint8_t>()[0] : 0;
  return rq;
}

std::optional<DequantConstants> dequant_constants(const GemmDesc& d, int64_t channels) {
  if (!has_dequant(d) || d.requant_y_zero_point >= 0 || d.out_dtype != DType::kFloat32 ||
      !only_integer_epilogue(d, false) || d.out_dims.empty())
    return std::nullopt;
  DequantConstants dq;
  if (!channel_constants(d, channels, dq.scale, dq.bias)) return std::nullopt;
  if (d.requant_scale_factor >= 0) {
    const int32_t f = d.requant_scale_factor;
    if (f < static_cast<int32_t>(node_arity(d.kind)) || f >= static_cast<int32_t>(d.operands.size())) return std::nullopt;
    const Operand& o = d.operands[static_cast<size_t>(f)];
    if (!o.present || o.dtype != DType::kFloat32 || checked_numel(o.dims) != 1) return std::nullopt;
    dq.scale_factor = f;
  }
  return dq;
}

}  // namespace kiln::gemm_ops
