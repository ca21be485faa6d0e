// Recurrent layers RNN, LSTM and GRU: every direction, activation list, clip, sequence_lens,
// initial states, peepholes and both layouts. Projections run through gemm_ref.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "ops/families.h"
#include "ops/gemm_ref.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

enum class Cell { kRnn, kLstm, kGru };

int gate_count(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kLstm ? 4 : 3; }
int activation_count(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kLstm ? 3 : 2; }

// ---- activations ---------------------------------------------------------------------------

enum class Act {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
  kElu, kSoftsign, kSoftplus
};

struct Activation {
  Act kind = Act::kTanh;
  double alpha = 0, beta = 0;

  template <class T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case Act::kRelu: return x > T(0) ? x : T(0);
      case Act::kTanh: return std::tanh(x);
      case Act::kSigmoid:
        // Split by sign so that exp never overflows.
        if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
        return std::exp(x) / (T(1) + std::exp(x));
      case Act::kAffine: return a * x + b;
      case Act::kLeakyRelu: return x >= T(0) ? x : a * x;
      case Act::kThresholdedRelu: return x > a ? x : T(0);
      case Act::kScaledTanh: return a * std::tanh(b * x);
      case Act::kHardSigmoid: return std::clamp(a * x + b, T(0), T(1));
      case Act::kElu: return x >= T(0) ? x : a * (std::exp(x) - T(1));
      case Act::kSoftsign: return x / (T(1) + std::abs(x));
      case Act::kSoftplus: return x > T(30) ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActInfo {
  const char* name;
  Act kind;
  int n_alpha, n_beta;
  double alpha, beta;  // defaults
};

constexpr ActInfo kActs[] = {
    {"relu", Act::kRelu, 0, 0, 0, 0},
    {"tanh", Act::kTanh, 0, 0, 0, 0},
    {"sigmoid", Act::kSigmoid, 0, 0, 0, 0},
    {"affine", Act::kAffine, 1, 1, 1.0, 0.0},
    {"leakyrelu", Act::kLeakyRelu, 1, 0, 0.01, 0},
    {"thresholdedrelu", Act::kThresholdedRelu, 1, 0, 1.0, 0},
    {"scaledtanh", Act::kScaledTanh, 1, 1, 1.0, 1.0},
    {"hardsigmoid", Act::kHardSigmoid, 1, 1, 0.2, 0.5},
    {"elu", Act::kElu, 1, 0, 1.0, 0},
    {"softsign", Act::kSoftsign, 0, 0, 0, 0},
    {"softplus", Act::kSoftplus, 0, 0, 0, 0},
};

// Parses `activations` with activation_alpha/beta consumed in order by the functions that take
// them (as onnxruntime does); missing values take the function's default. Returns
// activation_count * num_dir entries (a single-direction list is reused for both directions).
std::vector<Activation> read_activations(const AttrReader& at, Cell cell, int num_dir) {
  const int per_dir = activation_count(cell);
  std::vector<std::string> names;
  if (at.has_attr("activations")) names = at.attr_strings("activations");
  if (names.empty()) {
    if (cell == Cell::kRnn)
      names = {"Tanh"};
    else if (cell == Cell::kLstm)
      names = {"Sigmoid", "Tanh", "Tanh"};
    else
      names = {"Sigmoid", "Tanh"};
  }
  const std::vector<float> alphas = at.attr_floats("activation_alpha");
  const std::vector<float> betas = at.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const ActInfo* info = nullptr;
    for (const ActInfo& a : kActs)
      if (lower == a.name) info = &a;
    if (!info) at.fail(ErrorKind::kUnsupported, "unknown activation function '" + name + "'");
    Activation act;
    act.kind = info->kind;
    act.alpha = info->alpha;
    act.beta = info->beta;
    if (info->n_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->n_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    acts.push_back(act);
  }
  const size_t want = static_cast<size_t>(per_dir * num_dir);
  if (acts.size() == static_cast<size_t>(per_dir) && num_dir == 2)
    acts.insert(acts.end(), acts.begin(), acts.end());
  if (acts.size() != want)
    at.fail(ErrorKind::kInvalidModel, "expected " + std::to_string(want) + " activations for " +
                                          std::to_string(num_dir) + " direction(s), got " +
                                          std::to_string(names.size()));
  return acts;
}

// ---- setup ---------------------------------------------------------------------------------

int direction_count(const AttrReader& at) {
  const std::string dir = at.attr_string("direction", "forward");
  if (dir == "forward" || dir == "reverse") return 1;
  if (dir == "bidirectional") return 2;
  at.fail(ErrorKind::kInvalidModel,
          "direction should be forward, reverse or bidirectional, got '" + dir + "'");
}

struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int num_dir = 1;
  int gates = 1;
  bool batch_first = false;
  bool reverse_only = false;
};

void check_dims(const KernelContext& ctx, const Tensor& t, const std::vector<int64_t>& want,
                const char* what) {
  if (t.dims() != want)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should have shape " +
                                       dims_to_string(want) + ", got " + dims_to_string(t.dims()));
}

// Swaps the first two axes of a rank-3 tensor ([a, b, c] -> [b, a, c]).
template <class T>
std::vector<T> swap01(const T* src, int64_t a, int64_t b, int64_t c) {
  std::vector<T> out(static_cast<size_t>(a * b * c));
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::copy(src + (i * b + j) * c, src + (i * b + j + 1) * c, out.begin() + (j * a + i) * c);
  return out;
}

template <class T>
void run_recurrent(KernelContext& ctx, Cell cell) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  RnnDims d;
  d.num_dir = direction_count(ctx);
  d.reverse_only = ctx.attr_string("direction", "forward") == "reverse";
  d.gates = gate_count(cell);
  const int64_t layout = ctx.attr_int("layout", 0);
  if (layout != 0 && layout != 1)
    ctx.fail(ErrorKind::kInvalidModel, "layout should be 0 or 1, got " + std::to_string(layout));
  d.batch_first = layout == 1;
  if (x.rank() != 3)
    ctx.fail(ErrorKind::kBadInput, "X should be 3-D, got " + dims_to_string(x.dims()));
  if (w.rank() != 3 || r.rank() != 3)
    ctx.fail(ErrorKind::kBadInput, "W and R should be 3-D, got " + dims_to_string(w.dims()) +
                                       " and " + dims_to_string(r.dims()));
  d.seq = x.dim(d.batch_first ? 1 : 0);
  d.batch = x.dim(d.batch_first ? 0 : 1);
  d.input = x.dim(2);
  d.hidden = ctx.has_attr("hidden_size") ? ctx.attr_int("hidden_size") : r.dim(2);
  if (d.hidden <= 0)
    ctx.fail(ErrorKind::kInvalidModel,
             "hidden_size should be positive, got " + std::to_string(d.hidden));
  const int64_t H = d.hidden, N = d.batch, S = d.seq, I = d.input, D = d.num_dir;
  const int64_t GH = d.gates * H;
  check_dims(ctx, w, {D, GH, I}, "W");
  check_dims(ctx, r, {D, GH, H}, "R");
  const bool has_b = ctx.has_input(3);
  if (has_b) check_dims(ctx, ctx.input(3), {D, 2 * GH}, "B");
  std::vector<int64_t> lens(static_cast<size_t>(N), S);
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    check_dims(ctx, sl, {N}, "sequence_lens");
    for (int64_t b = 0; b < N; ++b) {
      lens[b] = sl.get_int(b);
      if (lens[b] < 0 || lens[b] > S)
        ctx.fail(ErrorKind::kBadInput, "sequence_lens[" + std::to_string(b) +
                                           "] = " + std::to_string(lens[b]) + " is outside [0, " +
                                           std::to_string(S) + "]");
    }
  }
  const std::vector<int64_t> state_dims =
      d.batch_first ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
  // Initial states normalized to [D, N, H].
  auto read_state = [&](int idx, const char* what) {
    std::vector<T> s(static_cast<size_t>(D * N * H), T(0));
    if (ctx.has_input(idx)) {
      const Tensor& t = ctx.input(idx);
      check_dims(ctx, t, state_dims, what);
      const T* p = t.data<T>();
      if (d.batch_first)
        s = swap01(p, N, D, H);
      else
        std::copy(p, p + D * N * H, s.begin());
    }
    return s;
  };
  std::vector<T> h_state = read_state(5, "initial_h");
  std::vector<T> c_state;
  const T* peep = nullptr;
  bool input_forget = false;
  if (cell == Cell::kLstm) {
    c_state = read_state(6, "initial_c");
    if (ctx.has_input(7)) {
      check_dims(ctx, ctx.input(7), {D, 3 * H}, "P");
      peep = ctx.input(7).data<T>();
    }
    input_forget = ctx.attr_int("input_forget", 0) != 0;
  }
  const bool linear_before_reset =
      cell == Cell::kGru && ctx.attr_int("linear_before_reset", 0) != 0;
  const std::vector<Activation> acts = read_activations(ctx, cell, static_cast<int>(D));
  const bool has_clip = ctx.has_attr("clip");
  const T clip = static_cast<T>(ctx.attr_float("clip", 0.f));
  if (has_clip && !(clip > T(0))) ctx.fail(ErrorKind::kInvalidModel, "clip should be positive");
  auto clipped = [&](T v) { return has_clip ? std::clamp(v, -clip, clip) : v; };

  // X as [S, N, I].
  std::vector<T> xs;
  const T* xp = x.data<T>();
  if (d.batch_first) {
    xs = swap01(xp, N, S, I);
    xp = xs.data();
  }
  std::vector<T> y(static_cast<size_t>(S * D * N * H), T(0));  // [S, D, N, H]
  std::vector<T> xw(static_cast<size_t>(S * N * GH));
  std::vector<T> hr(static_cast<size_t>(N * GH));
  std::vector<T> rh(static_cast<size_t>(N * H));   // GRU: r .* H_{t-1}
  std::vector<T> rhr(static_cast<size_t>(N * H));  // GRU: (r .* H_{t-1}) R_h^T
  std::vector<T> h_new(static_cast<size_t>(N * H));

  for (int64_t dir = 0; dir < D; ++dir) {
    const bool backward = d.reverse_only || dir == 1;
    const T* wd = w.data<T>() + dir * GH * I;
    const T* rd = r.data<T>() + dir * GH * H;
    const T* wb = has_b ? ctx.input(3).data<T>() + dir * 2 * GH : nullptr;
    const T* rb = wb ? wb + GH : nullptr;
    const Activation* act = &acts[static_cast<size_t>(dir * activation_count(cell))];
    T* hs = h_state.data() + dir * N * H;
    T* cs = cell == Cell::kLstm ? c_state.data() + dir * N * H : nullptr;
    const T* pd = peep ? peep + dir * 3 * H : nullptr;

    if (S * N > 0 && GH > 0)
      gemm_ref(false, true, S * N, GH, I, T(1), xp, I, wd, I, T(0), xw.data(), GH);
    if (wb) {
      for (int64_t row = 0; row < S * N; ++row) {
        T* p = xw.data() + row * GH;
        for (int64_t j = 0; j < GH; ++j) {
          // The GRU hidden gate's recurrent bias sits inside the reset product.
          const bool skip_rb = cell == Cell::kGru && j >= 2 * H;
          p[j] += wb[j] + (skip_rb ? T(0) : rb[j]);
        }
      }
    }
    for (int64_t step = 0; step < S; ++step) {
      if (N * H > 0) {
        // GRU without linear_before_reset needs only the z and r rows here.
        const int64_t rows = (cell == Cell::kGru && !linear_before_reset) ? 2 * H : GH;
        gemm_ref(false, true, N, rows, H, T(1), hs, H, rd, H, T(0), hr.data(), GH);
      }
      for (int64_t b = 0; b < N; ++b) {
        if (step >= lens[b]) continue;
        const int64_t t = backward ? lens[b] - 1 - step : step;
        const T* g = xw.data() + (t * N + b) * GH;
        const T* hg = hr.data() + b * GH;
        const T* hp = hs + b * H;
        T* hn = h_new.data() + b * H;
        if (cell == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = act[0](clipped(g[j] + hg[j]));
        } else if (cell == Cell::kLstm) {
          T* c = cs + b * H;
          for (int64_t j = 0; j < H; ++j) {
            const T c_prev = c[j];
            T i_pre = g[j] + hg[j];
            T f_pre = g[2 * H + j] + hg[2 * H + j];
            if (pd) {
              i_pre += pd[j] * c_prev;
              f_pre += pd[2 * H + j] * c_prev;
            }
            const T ig = act[0](clipped(i_pre));
            const T fg = input_forget ? T(1) - ig : act[0](clipped(f_pre));
            const T cg = act[1](clipped(g[3 * H + j] + hg[3 * H + j]));
            const T c_new = fg * c_prev + ig * cg;
            T o_pre = g[H + j] + hg[H + j];
            if (pd) o_pre += pd[H + j] * c_new;
            const T og = act[0](clipped(o_pre));
            c[j] = c_new;
            hn[j] = og * act[2](c_new);
          }
        } else {
          T* rr = rh.data() + b * H;
          T* zz = hn;  // z kept in h_new until the candidate is known
          for (int64_t j = 0; j < H; ++j) {
            zz[j] = act[0](clipped(g[j] + hg[j]));
            rr[j] = act[0](clipped(g[H + j] + hg[H + j]));
          }
          if (linear_before_reset) {
            for (int64_t j = 0; j < H; ++j) {
              const T rec = hg[2 * H + j] + (rb ? rb[2 * H + j] : T(0));
              rr[j] = rr[j] * rec;  // now r .* (H R_h^T + Rb_h)
            }
          } else {
            for (int64_t j = 0; j < H; ++j) rr[j] *= hp[j];
          }
        }
      }
      if (cell == Cell::kGru) {
        if (!linear_before_reset && N * H > 0)
          gemm_ref(false, true, N, H, H, T(1), rh.data(), H, rd + 2 * H * H, H, T(0), rhr.data(),
                   H);
        for (int64_t b = 0; b < N; ++b) {
          if (step >= lens[b]) continue;
          const int64_t t = backward ? lens[b] - 1 - step : step;
          const T* g = xw.data() + (t * N + b) * GH;
          const T* hp = hs + b * H;
          T* hn = h_new.data() + b * H;
          for (int64_t j = 0; j < H; ++j) {
            T pre = g[2 * H + j];
            if (linear_before_reset)
              pre += rh[b * H + j];
            else
              pre += rhr[b * H + j] + (rb ? rb[2 * H + j] : T(0));
            const T cand = act[1](clipped(pre));
            const T z = hn[j];
            hn[j] = (T(1) - z) * cand + z * hp[j];
          }
        }
      }
      for (int64_t b = 0; b < N; ++b) {
        if (step >= lens[b]) continue;
        const int64_t t = backward ? lens[b] - 1 - step : step;
        std::copy(h_new.begin() + b * H, h_new.begin() + (b + 1) * H, hs + b * H);
        std::copy(h_new.begin() + b * H, h_new.begin() + (b + 1) * H,
                  y.begin() + ((t * D + dir) * N + b) * H);
      }
    }
  }

  // Like onnxruntime, a batch entry with sequence length 0 has zero final states.
  for (int64_t b = 0; b < N; ++b) {
    if (lens[b] != 0) continue;
    for (int64_t dir = 0; dir < D; ++dir) {
      std::fill_n(h_state.begin() + (dir * N + b) * H, H, T(0));
      if (cell == Cell::kLstm) std::fill_n(c_state.begin() + (dir * N + b) * H, H, T(0));
    }
  }
  const DType dt = x.dtype();
  if (ctx.num_outputs() > 0 && ctx.wants_output(0)) {
    std::vector<int64_t> ydims =
        d.batch_first ? std::vector<int64_t>{N, S, D, H} : std::vector<int64_t>{S, D, N, H};
    Tensor yt(dt, ydims);
    T* yp = yt.data<T>();
    if (d.batch_first) {
      for (int64_t t = 0; t < S; ++t)
        for (int64_t dir = 0; dir < D; ++dir)
          for (int64_t b = 0; b < N; ++b)
            std::copy(y.begin() + ((t * D + dir) * N + b) * H,
                      y.begin() + ((t * D + dir) * N + b + 1) * H,
                      yp + ((b * S + t) * D + dir) * H);
    } else {
      std::copy(y.begin(), y.end(), yp);
    }
    ctx.set_output(0, std::move(yt));
  }
  auto emit_state = [&](int idx, const std::vector<T>& s) {
    if (ctx.num_outputs() <= idx || !ctx.wants_output(idx)) return;
    Tensor t(dt, state_dims);
    std::vector<T> v = d.batch_first ? swap01(s.data(), D, N, H) : s;
    std::copy(v.begin(), v.end(), t.data<T>());
    ctx.set_output(idx, std::move(t));
  };
  emit_state(1, h_state);
  if (cell == Cell::kLstm) emit_state(2, c_state);
}

void recurrent_kernel(KernelContext& ctx, Cell cell) {
  const DType dt = ctx.input(0).dtype();
  for (int i : {1, 2, 3, 5, 6, 7})
    if (i < ctx.num_inputs() && ctx.has_input(i) && ctx.input(i).dtype() != dt)
      ctx.fail(ErrorKind::kBadInput, "input " + std::to_string(i) + " has dtype " +
                                         std::string(dtype_name(ctx.input(i).dtype())) +
                                         ", expected " + std::string(dtype_name(dt)));
  if (dt == DType::kFloat32)
    run_recurrent<float>(ctx, cell);
  else if (dt == DType::kFloat64)
    run_recurrent<double>(ctx, cell);
  else
    ctx.fail(ErrorKind::kUnsupported,
             "recurrent ops need float inputs, got " + std::string(dtype_name(dt)));
}

void rnn_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::kRnn); }
void lstm_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::kLstm); }
void gru_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::kGru); }

void infer_recurrent(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  const bool batch_first = ctx.attr_int("layout", 0) == 1;
  const int64_t num_dir = ctx.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  Dim seq, batch, hidden;
  if (xt.shape && xt.shape->rank() == 3) {
    seq = xt.shape->dims[batch_first ? 1 : 0];
    batch = xt.shape->dims[batch_first ? 0 : 1];
  }
  if (ctx.has_attr("hidden_size")) hidden = Dim(ctx.attr_int("hidden_size"));
  const std::vector<Dim> state = batch_first ? std::vector<Dim>{batch, Dim(num_dir), hidden}
                                             : std::vector<Dim>{Dim(num_dir), batch, hidden};
  if (ctx.num_outputs() > 0)
    ctx.set_output_type(
        0, Type::tensor(xt.dtype,
                        Shape(batch_first ? std::vector<Dim>{batch, seq, Dim(num_dir), hidden}
                                          : std::vector<Dim>{seq, Dim(num_dir), batch, hidden})));
  for (int i = 1; i < ctx.num_outputs(); ++i)
    ctx.set_output_type(i, Type::tensor(xt.dtype, Shape(state)));
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r.add("RNN").since(1).inputs(3, 6).outputs(0, 2).run(rnn_kernel).shape(infer_recurrent)
      .via_float();
  r.add("LSTM").since(1).inputs(3, 8).outputs(0, 3).run(lstm_kernel).shape(infer_recurrent)
      .via_float();
  r.add("GRU").since(1).inputs(3, 6).outputs(0, 2).run(gru_kernel).shape(infer_recurrent)
      .via_float();
}

}  // namespace kiln
