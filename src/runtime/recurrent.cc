// RNN / LSTM / GRU on the f32 GEMM and GEMV kernels (see recurrent.h). The math follows the
// reference kernel (ops/rnn.cc) step for step (clip, peepholes, input_forget, sequence_lens
// included); only the products and the activations differ.
#include "runtime/recurrent.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemv.h"
#include "runtime/gemm_op_util.h"
#include "runtime/thread_pool.h"

namespace kiln::rnn_ops {
namespace {

using gemm_ops::GemmDesc;
using gemm_ops::GemmKind;
using gemm_ops::Operand;
using kernels::Activation;

// ONNX input indices.
enum : size_t { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kPeepholes = 7 };

bool f32_present(const std::vector<Operand>& ins, size_t i) {
  return i < ins.size() && ins[i].present && ins[i].dtype == DType::kFloat32;
}
bool absent(const std::vector<Operand>& ins, size_t i) { return i >= ins.size() || !ins[i].present; }

// A product by a constant [rows, K] matrix transposed (x [batch, K] -> [batch, rows]): a GEMV on
// its packed columns at batch 1, else a GEMM on packed B.
struct RightFactor {
  kernels::PackedB gemm;
  kernels::PackedGemvB gemv;
  int64_t rows = 0;

  void init(const float* m, int64_t rows_, int64_t K, int64_t batch) {
    rows = rows_;
    if (batch == 1)
      gemv = kernels::pack_gemv_b(true, K, rows, m, K);
    else
      gemm = kernels::pack_b(true, K, rows, m, K);
  }
  void apply(const float* x, int64_t batch, int64_t K, float* out) const {
    const auto par = gemm_ops::pool_parallel();
    if (batch == 1) return kernels::gemv_packed(x, 1.0f, gemv, nullptr, false, out, par);
    kernels::sgemm_packed(false, batch, x, K, 1.0f, gemm, 0.0f, out, rows, par, {},
                          current_thread_pool().num_threads());
  }
};

class RecurrentOp : public gemm_ops::GemmOp {
 public:
  RecurrentOp(const GemmDesc& d, int64_t seq, int64_t batch, int64_t input, int64_t hidden)
      : kind_(d.kind), rnn_(d.rnn), out_dims_(d.out_dims), S_(seq), N_(batch), I_(input), H_(hidden) {
    G_ = kind_ == GemmKind::kLstm ? 4 : kind_ == GemmKind::kGru ? 3 : 1;
    D_ = rnn_.direction == 2 ? 2 : 1;
    lbr_ = kind_ == GemmKind::kGru && rnn_.linear_before_reset != 0;
    const int64_t GH = G_ * H_;
    const float* w = d.operands[kW].constant->data<float>();
    const float* r = d.operands[kR].constant->data<float>();
    const float* b = f32_present(d.operands, kB) ? d.operands[kB].constant->data<float>() : nullptr;
    const float* peep = f32_present(d.operands, kPeepholes) ? d.operands[kPeepholes].constant->data<float>() : nullptr;
    clip_ = rnn_.has_clip ? rnn_.clip : 0.0f;
    dirs_.resize(static_cast<size_t>(D_));
    for (int64_t dir = 0; dir < D_; ++dir) {
      Direction& dd = dirs_[static_cast<size_t>(dir)];
      const float* wd = w + dir * GH * I_;
      const float* rd = r + dir * GH * H_;
      dd.w = kernels::pack_b(true, I_, GH, wd, I_);
      // GRU without linear_before_reset multiplies (r .* H) by R_h separately: z and r rows here.
      const bool split_h = kind_ == GemmKind::kGru && !lbr_;
      dd.r.init(rd, split_h ? 2 * H_ : GH, H_, N_);
      if (split_h) dd.r_h.init(rd + 2 * H_ * H_, H_, H_, N_);
      // Input and recurrent biases add up, except the GRU h gate's recurrent bias with
      // linear_before_reset, which sits inside the reset product.
      if (peep) dd.peep.assign(peep + dir * 3 * H_, peep + (dir + 1) * 3 * H_);
      dd.bias.assign(static_cast<size_t>(GH), 0.0f);
      dd.rb_h.assign(static_cast<size_t>(H_), 0.0f);
      if (b) {
        const float* wb = b + dir * 2 * GH;
        const float* rb = wb + GH;
        for (int64_t j = 0; j < GH; ++j) dd.bias[j] = wb[j] + (lbr_ && j >= 2 * H_ ? 0.0f : rb[j]);
        if (lbr_) std::copy(rb + 2 * H_, rb + 3 * H_, dd.rb_h.begin());
      }
    }
  }

  Tensor run(const std::vector<const RtValue*>& ins) override {
    const int64_t GH = G_ * H_, NH = N_ * H_;
    Tensor y = output_tensor(DType::kFloat32, out_dims_);
    float* out = y.data<float>();
    const float* x = gemm_ops::fdata(ins[kX]);
    const float* h0 = ins.size() > kInitialH && ins[kInitialH] ? gemm_ops::fdata(ins[kInitialH]) : nullptr;
    const float* c0 = ins.size() > kInitialC && ins[kInitialC] ? gemm_ops::fdata(ins[kInitialC]) : nullptr;
    const auto par = gemm_ops::pool_parallel();
    const int threads = current_thread_pool().num_threads();
    const bool batch_first = rnn_.layout == 1;
    // Steps per batch entry: sequence_lens, or all S. Outputs past an entry's length are zero,
    // its final states those after its last step (zero for length 0).
    lens_.assign(static_cast<size_t>(N_), S_);
    const bool ragged = ins.size() > kSeqLens && ins[kSeqLens];
    if (ragged) {
      const Tensor& sl = ins[kSeqLens]->tensor;
      for (int64_t b = 0; b < N_; ++b) {
        lens_[b] = sl.dtype() == DType::kInt32 ? sl.data<int32_t>()[b] : sl.data<int64_t>()[b];
        if (lens_[b] < 0 || lens_[b] > S_)
          throw Error(ErrorKind::kBadInput, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens_[b]) +
                                                " is outside [0, " + std::to_string(S_) + "]");
      }
      if (rnn_.output == 0) std::fill(out, out + y.numel(), 0.0f);
    }
    xw_.resize(static_cast<size_t>(S_ * N_ * GH));
    hr_.resize(static_cast<size_t>(N_ * GH));
    gates_.resize(static_cast<size_t>(N_ * GH));
    h_.resize(static_cast<size_t>(NH));
    c_.resize(static_cast<size_t>(NH));
    tmp_.resize(static_cast<size_t>(NH));
    // [D, N, H] (layout 0) or [N, D, H] (layout 1) offsets of a state row.
    auto state_at = [&](int64_t dir, int64_t b) { return (batch_first ? b * D_ + dir : dir * N_ + b) * H_; };
    // The final states returned: output 0 when it is one (Y_h or Y_c), then rnn_.also_states'.
    std::vector<std::pair<float*, const float*>> states;  // destination, this direction's state
    extras_.clear();
    if (rnn_.output != 0) states.emplace_back(out, rnn_.output == 1 ? h_.data() : c_.data());
    for (int bit : {1, 2})
      if (rnn_.also_states & bit) {
        extras_.push_back(Tensor::uninitialized(DType::kFloat32, batch_first ? std::vector<int64_t>{N_, D_, H_}
                                                                            : std::vector<int64_t>{D_, N_, H_}));
        states.emplace_back(extras_.back().data<float>(), bit == 1 ? h_.data() : c_.data());
      }
    for (int64_t dir = 0; dir < D_; ++dir) {
      const Direction& dd = dirs_[static_cast<size_t>(dir)];
      const bool backward = rnn_.direction == 1 || dir == 1;
      // All steps' input projections at once, rows in X's own order ([S, N] or [N, S]).
      kernels::GemmEpilogue ep;
      ep.bias = dd.bias.data();
      kernels::sgemm_packed(false, S_ * N_, x, I_, 1.0f, dd.w, 0.0f, xw_.data(), GH, par, ep, threads);
      for (int64_t b = 0; b < N_; ++b) {
        float* h = h_.data() + b * H_;
        float* c = c_.data() + b * H_;
        if (h0) std::memcpy(h, h0 + state_at(dir, b), sizeof(float) * static_cast<size_t>(H_));
        else std::fill(h, h + H_, 0.0f);
        if (c0) std::memcpy(c, c0 + state_at(dir, b), sizeof(float) * static_cast<size_t>(H_));
        else std::fill(c, c + H_, 0.0f);
      }
      for (int64_t step = 0; step < S_; ++step) {
        dd.r.apply(h_.data(), N_, H_, hr_.data());
        const int64_t hr_cols = dd.r.rows;
        // Entries past their length keep their state: their gates are computed into scratch
        // (from any valid step's input) and not used.
        auto time_of = [&](int64_t b) { return step >= lens_[b] ? -1 : backward ? lens_[b] - 1 - step : step; };
        auto xrow = [&](int64_t b) {
          const int64_t t = std::max<int64_t>(time_of(b), 0);
          return xw_.data() + (batch_first ? b * S_ + t : t * N_ + b) * GH;
        };
        for (int64_t b = 0; b < N_; ++b) {
          if (time_of(b) < 0) continue;
          const float* xg = xrow(b);
          const float* hg = hr_.data() + b * hr_cols;
          float* g = gates_.data() + b * GH;
          for (int64_t j = 0; j < hr_cols; ++j) g[j] = xg[j] + hg[j];
          if (kind_ == GemmKind::kRnn) {
            clip(g, H_);
            kernels::apply_activation_inplace(Activation::kTanh, g, H_);
            std::copy(g, g + H_, h_.data() + b * H_);
          } else if (kind_ == GemmKind::kLstm) {
            lstm_cell(dd, g, c_.data() + b * H_, tmp_.data() + b * H_, h_.data() + b * H_);
          } else {
            // Gates z, r, h: z and r now; with linear_before_reset the candidate too.
            clip(g, 2 * H_);
            kernels::apply_activation_inplace(Activation::kSigmoid, g, 2 * H_);
            const float* h = h_.data() + b * H_;
            float* cand = tmp_.data() + b * H_;
            if (lbr_) {
              for (int64_t j = 0; j < H_; ++j) cand[j] = xg[2 * H_ + j] + g[H_ + j] * (hg[2 * H_ + j] + dd.rb_h[j]);
            } else {
              for (int64_t j = 0; j < H_; ++j) cand[j] = g[H_ + j] * h[j];  // r .* H, multiplied below
            }
          }
        }
        if (kind_ == GemmKind::kGru) {
          if (!lbr_) {
            dd.r_h.apply(tmp_.data(), N_, H_, hr_.data());  // (r .* H) R_h^T, [N, H]
            for (int64_t b = 0; b < N_; ++b) {
              if (time_of(b) < 0) continue;
              const float* xg = xrow(b);
              float* cand = tmp_.data() + b * H_;
              const float* rh = hr_.data() + b * H_;
              for (int64_t j = 0; j < H_; ++j) cand[j] = xg[2 * H_ + j] + rh[j];
            }
          }
          clip(tmp_.data(), NH);
          kernels::apply_activation_inplace(Activation::kTanh, tmp_.data(), NH);
          for (int64_t b = 0; b < N_; ++b) {
            if (time_of(b) < 0) continue;
            const float* z = gates_.data() + b * GH;
            const float* cand = tmp_.data() + b * H_;
            float* h = h_.data() + b * H_;
            for (int64_t j = 0; j < H_; ++j) h[j] = (1.0f - z[j]) * cand[j] + z[j] * h[j];
          }
        }
        if (rnn_.output == 0) {
          for (int64_t b = 0; b < N_; ++b) {
            const int64_t t = time_of(b);
            if (t < 0) continue;
            const int64_t at = (batch_first ? (b * S_ + t) * D_ + dir : (t * D_ + dir) * N_ + b) * H_;
            std::memcpy(out + at, h_.data() + b * H_, sizeof(float) * static_cast<size_t>(H_));
          }
        }
      }
      for (const auto& [dst, state] : states)
        for (int64_t b = 0; b < N_; ++b) {
          if (lens_[b] == 0)  // as the reference kernel (and onnxruntime): zero, not the initial state
            std::fill_n(dst + state_at(dir, b), H_, 0.0f);
          else
            std::memcpy(dst + state_at(dir, b), state + b * H_, sizeof(float) * static_cast<size_t>(H_));
        }
    }
    return y;
  }
  std::vector<Tensor> extra_outputs() override { return extras_; }

 private:
  struct Direction {
    kernels::PackedB w;  // W^T [I, G*H]
    RightFactor r, r_h;  // R (GRU without linear_before_reset: its z, r rows, and R_h apart)
    std::vector<float> bias, rb_h, peep;  // peep: LSTM P [p_i, p_o, p_f] (empty: none)
  };
  // One LSTM step of one batch entry from its gate pre-activations g = [i, o, f, c] (x W^T + h R^T
  // + biases): updates the cell state c and writes h; t: scratch of H. Peepholes (P = [p_i, p_o,
  // p_f]) add the old cell state to i and f and the new one to o, before the clip.
  void lstm_cell(const Direction& dd, float* g, float* c, float* t, float* h) const {
    const int64_t H = H_;
    const bool peep = !dd.peep.empty();
    if (peep) {
      for (int64_t j = 0; j < H; ++j) {
        g[j] += dd.peep[j] * c[j];
        g[2 * H + j] += dd.peep[2 * H + j] * c[j];
      }
      clip(g, H);
      clip(g + 2 * H, 2 * H);  // o is clipped once its peephole term is in
    } else {
      clip(g, 4 * H);
    }
    kernels::apply_activation_inplace(Activation::kSigmoid, g, peep ? H : 3 * H);
    if (rnn_.input_forget)
      for (int64_t j = 0; j < H; ++j) g[2 * H + j] = 1.0f - g[j];
    else if (peep)
      kernels::apply_activation_inplace(Activation::kSigmoid, g + 2 * H, H);
    kernels::apply_activation_inplace(Activation::kTanh, g + 3 * H, H);
    for (int64_t j = 0; j < H; ++j) {
      c[j] = g[2 * H + j] * c[j] + g[j] * g[3 * H + j];
      t[j] = c[j];
    }
    if (peep) {
      for (int64_t j = 0; j < H; ++j) g[H + j] += dd.peep[H + j] * c[j];
      clip(g + H, H);
      kernels::apply_activation_inplace(Activation::kSigmoid, g + H, H);
    }
    kernels::apply_activation_inplace(Activation::kTanh, t, H);
    for (int64_t j = 0; j < H; ++j) h[j] = g[H + j] * t[j];
  }

  // Gate pre-activations clamped to [-clip, clip] (the clip attribute; 0: none).
  void clip(float* v, int64_t n) const {
    if (clip_ <= 0.0f) return;
    for (int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], -clip_), clip_);
  }


  GemmKind kind_;
  GemmDesc::Recurrent rnn_;
  std::vector<int64_t> out_dims_;
  int64_t S_, N_, I_, H_, G_ = 1, D_ = 1;
  bool lbr_ = false;
  float clip_ = 0.0f;
  std::vector<Direction> dirs_;
  std::vector<int64_t> lens_;
  std::vector<float> xw_, hr_, gates_, h_, c_, tmp_;
  std::vector<Tensor> extras_;  // the last run's final states after output 0 (rnn_.also_states)
};

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_recurrent_op(const GemmDesc& d) {
  if (!gemm_ops::recurrent(d.kind) || d.out_dtype != DType::kFloat32) return nullptr;
  const GemmDesc::Recurrent& rn = d.rnn;
  if (!rn.default_activations || (rn.has_clip && !(rn.clip > 0.0f)) || (rn.input_forget && d.kind != GemmKind::kLstm) ||
      rn.layout < 0 || rn.layout > 1 ||
      rn.direction < 0 || rn.direction > 2 || rn.output < 0 || rn.output > (d.kind == GemmKind::kLstm ? 2 : 1))
    return nullptr;
  if (d.epilogue_bias >= 0 || d.epilogue_residual >= 0 || d.epilogue_activation != 0 || d.input_scale >= 0 ||
      d.epilogue_max_pool != 0 || d.clamp_lo != -std::numeric_limits<float>::infinity() ||
      d.clamp_hi != std::numeric_limits<float>::infinity())
    return nullptr;
  const std::vector<Operand>& ins = d.operands;
  if (!f32_present(ins, kX) || !f32_present(ins, kW) || !f32_present(ins, kR) || !ins[kW].constant ||
      !ins[kR].constant)
    return nullptr;
  if (!absent(ins, kB) && (!f32_present(ins, kB) || !ins[kB].constant)) return nullptr;
  if (ins.size() > 8) return nullptr;
  if (!absent(ins, kPeepholes) && (d.kind != GemmKind::kLstm || !f32_present(ins, kPeepholes) || !ins[kPeepholes].constant))
    return nullptr;
  if (!absent(ins, kSeqLens) &&
      (ins[kSeqLens].dtype != DType::kInt32 && ins[kSeqLens].dtype != DType::kInt64))
    return nullptr;
  if (!absent(ins, kInitialH) && !f32_present(ins, kInitialH)) return nullptr;
  if (!absent(ins, kInitialC) && (d.kind != GemmKind::kLstm || !f32_present(ins, kInitialC))) return nullptr;
  const std::vector<int64_t>& x = ins[kX].dims;
  const std::vector<int64_t>& w = ins[kW].dims;
  const std::vector<int64_t>& r = ins[kR].dims;
  if (x.size() != 3 || w.size() != 3 || r.size() != 3) return nullptr;
  const int64_t G = d.kind == GemmKind::kLstm ? 4 : d.kind == GemmKind::kGru ? 3 : 1;
  const int64_t D = rn.direction == 2 ? 2 : 1;
  const bool batch_first = rn.layout == 1;
  const int64_t S = x[batch_first ? 1 : 0], N = x[batch_first ? 0 : 1], I = x[2], H = r[2];
  if (rn.hidden != 0 && rn.hidden != H) return nullptr;
  if (S <= 0 || N <= 0 || I <= 0 || H <= 0) return nullptr;
  if (w != std::vector<int64_t>{D, G * H, I} || r != std::vector<int64_t>{D, G * H, H}) return nullptr;
  if (!absent(ins, kB) && ins[kB].dims != std::vector<int64_t>{D, 2 * G * H}) return nullptr;
  const std::vector<int64_t> state = batch_first ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
  for (size_t i : {size_t{kInitialH}, size_t{kInitialC}})
    if (!absent(ins, i) && ins[i].dims != state) return nullptr;
  if (!absent(ins, kPeepholes) && ins[kPeepholes].dims != std::vector<int64_t>{D, 3 * H}) return nullptr;
  if (!absent(ins, kSeqLens) && ins[kSeqLens].dims != std::vector<int64_t>{N}) return nullptr;
  const std::vector<int64_t> y = batch_first ? std::vector<int64_t>{N, S, D, H} : std::vector<int64_t>{S, D, N, H};
  if (d.out_dims != (rn.output == 0 ? y : state)) return nullptr;
  // Extra states come after output 0 and in order: Y_h only when output 0 is Y, Y_c of an LSTM.
  if (rn.also_states < 0 || rn.also_states > 3 || ((rn.also_states & 1) && rn.output != 0) ||
      ((rn.also_states & 2) && (d.kind != GemmKind::kLstm || rn.output == 2)))
    return nullptr;
  return std::make_unique<RecurrentOp>(d, S, N, I, H);
}

}  // namespace kiln::rnn_ops
