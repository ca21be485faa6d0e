// A oneDNN region loaded for one set of input dims: every step becomes its primitive, created
// once here. Inside the region values keep the layouts the primitives choose (blocked nChw16c
// and the like); region inputs and outputs are kiln's plain row-major memory, reordered only
// where a primitive wants another layout. Intermediate buffers are reused once their values are
// dead, so a region needs about what kiln's own arena would.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <unordered_map>

#include "external/dnnl/dnnl_gomp.h"
#include "external/dnnl/dnnl_steps.h"

namespace kiln::external::dnnl_backend {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
using DT = memory::data_type;

memory::desc plain(const Dims& dims) {
  static const Tag tags[] = {Tag::a, Tag::a, Tag::ab, Tag::abc, Tag::abcd, Tag::abcde, Tag::abcdef};
  if (dims.empty()) return memory::desc({1}, DT::f32, Tag::a);
  if (dims.size() > 6) throw std::runtime_error("tensors of rank > 6 are not supported");
  return memory::desc(dims, DT::f32, tags[dims.size()]);
}
memory::desc any(const Dims& dims) { return memory::desc(dims, DT::f32, Tag::any); }

dnnl::algorithm eltwise_alg(const std::string& a) {
  static const std::map<std::string, dnnl::algorithm> algs = {
      {"relu", dnnl::algorithm::eltwise_relu},         {"logistic", dnnl::algorithm::eltwise_logistic},
      {"tanh", dnnl::algorithm::eltwise_tanh},         {"exp", dnnl::algorithm::eltwise_exp},
      {"log", dnnl::algorithm::eltwise_log},           {"sqrt", dnnl::algorithm::eltwise_sqrt},
      {"abs", dnnl::algorithm::eltwise_abs},           {"elu", dnnl::algorithm::eltwise_elu},
      {"linear", dnnl::algorithm::eltwise_linear},     {"swish", dnnl::algorithm::eltwise_swish},
      {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf}, {"gelu_tanh", dnnl::algorithm::eltwise_gelu_tanh},
      {"clip_v2", dnnl::algorithm::eltwise_clip_v2},   {"hardswish", dnnl::algorithm::eltwise_hardswish}};
  auto it = algs.find(a);
  if (it == algs.end()) throw std::runtime_error("unknown element-wise algorithm '" + a + "'");
  return it->second;
}

dnnl::algorithm binary_alg(const std::string& a) {
  static const std::map<std::string, dnnl::algorithm> algs = {
      {"add", dnnl::algorithm::binary_add}, {"sub", dnnl::algorithm::binary_sub}, {"mul", dnnl::algorithm::binary_mul},
      {"div", dnnl::algorithm::binary_div}, {"max", dnnl::algorithm::binary_max}, {"min", dnnl::algorithm::binary_min}};
  auto it = algs.find(a);
  if (it == algs.end()) throw std::runtime_error("unknown binary algorithm '" + a + "'");
  return it->second;
}

// Prepends 1s up to `rank` (numpy broadcasting as oneDNN wants it: equal ranks).
Dims padded(const Dims& d, size_t rank) {
  Dims out(rank - std::min(rank, d.size()), 1);
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

struct Free {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, Free>;

Buffer allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  return Buffer(p);
}

class DnnlModule : public ext::RuntimeModule {
 public:
  DnnlModule(const std::vector<Step>& steps, const ext::Region& r, int threads)
      : region_(r), threads_(std::max(1, threads)), mem_(r.values.size()), buffer_of_(r.values.size(), -1),
        last_use_(r.values.size(), -1), output_index_(r.values.size(), -1) {
    omp_set_num_threads(threads_);
    for (size_t k = 0; k < r.outputs.size(); ++k) output_index_[static_cast<size_t>(r.outputs[k])] = static_cast<int>(k);
    for (size_t t = 0; t < steps.size(); ++t) {
      for (int v : steps[t].inputs)
        if (v >= 0) last_use_[static_cast<size_t>(v)] = static_cast<int>(t);
      for (const PostOp& p : steps[t].post)
        if (p.src1 >= 0) last_use_[static_cast<size_t>(p.src1)] = static_cast<int>(t);
    }
    // A view's input lives as long as the view (they share the buffer).
    for (size_t t = steps.size(); t-- > 0;)
      if (steps[t].kind == "view") {
        int& in_last = last_use_[static_cast<size_t>(steps[t].inputs[0])];
        in_last = std::max(in_last, last_use_[static_cast<size_t>(steps[t].output)]);
      }
    for (size_t k = 0; k < r.inputs.size(); ++k) {
      const int v = r.inputs[k];
      memory m(plain(dims(v)), engine_, DNNL_MEMORY_NONE);
      bindings_.push_back({m, true, k});
      mem_[static_cast<size_t>(v)] = m;
    }
    for (const Step& s : steps) {  // every value a primitive reads or writes is f32
      std::vector<int> used(s.inputs.begin(), s.inputs.begin() + (s.kind == "view" ? 1 : static_cast<long>(s.inputs.size())));
      used.push_back(s.output);
      for (const PostOp& p : s.post) used.push_back(p.src1);
      for (int v : used)
        if (v >= 0 && r.values[static_cast<size_t>(v)].type != ext::ElementType::kFloat32)
          throw std::runtime_error("node '" + s.node + "': value '" + r.values[static_cast<size_t>(v)].name +
                                   "' is not float32");
    }
    for (size_t t = 0; t < steps.size(); ++t) {
      step_ = static_cast<int>(t);
      const Step& s = steps[t];
      try {
        add_step(s);
      } catch (const std::exception& e) {
        throw std::runtime_error("node '" + s.node + "' (" + s.kind + "): " + e.what());
      }
      release_dead(s);
    }
    stream_.wait();  // the weight reorders run at load
  }

  void run(const std::vector<ext::TensorRef>& inputs, const std::vector<ext::TensorRef>& outputs) override {
    if (inputs.size() != region_.inputs.size() || outputs.size() != region_.outputs.size())
      throw std::runtime_error("expected " + std::to_string(region_.inputs.size()) + " inputs and " +
                               std::to_string(region_.outputs.size()) + " outputs");
    omp_set_num_threads(threads_);
    for (Binding& b : bindings_) b.mem.set_data_handle(b.input ? inputs[b.index].data : outputs[b.index].data);
    for (Alias& a : aliases_) a.view.set_data_handle(a.base.get_data_handle());
    for (Exec& e : execs_) e.prim.execute(stream_, e.args);
    stream_.wait();
  }

 private:
  struct Binding {
    memory mem;
    bool input;
    size_t index;
  };
  struct Alias {
    memory view, base;
  };
  struct Exec {
    dnnl::primitive prim;
    std::unordered_map<int, memory> args;
  };

  Dims dims(int v) const {
    const ext::ValueInfo& info = region_.values[static_cast<size_t>(v)];
    return info.dims.empty() ? Dims{1} : Dims(info.dims.begin(), info.dims.end());
  }
  const float* constant(int v) const {
    const ext::ValueInfo& info = region_.values[static_cast<size_t>(v)];
    if (!info.constant()) throw std::runtime_error("value '" + info.name + "' should be a constant");
    return static_cast<const float*>(info.data);
  }

  // A pool buffer of at least `bytes` for value v (v < 0: a temporary of this step).
  memory pooled(const memory::desc& md, int v) {
    const size_t bytes = md.get_size();
    int best = -1;
    for (size_t b = 0; b < pool_.size(); ++b)
      if (refs_[b] == 0 && pool_bytes_[b] >= bytes && (best < 0 || pool_bytes_[b] < pool_bytes_[static_cast<size_t>(best)]))
        best = static_cast<int>(b);
    if (best < 0) {
      pool_.push_back(allocate(bytes));
      pool_bytes_.push_back(bytes);
      refs_.push_back(0);
      best = static_cast<int>(pool_.size()) - 1;
    }
    refs_[static_cast<size_t>(best)]++;
    if (v >= 0) buffer_of_[static_cast<size_t>(v)] = best;
    else temps_.push_back(best);
    return memory(md, engine_, pool_[static_cast<size_t>(best)].get());
  }

  // Owned memory for constants (weights in the primitive's layout).
  memory owned(const memory::desc& md) {
    kept_.push_back(allocate(md.get_size()));
    return memory(md, engine_, kept_.back().get());
  }

  // A constant copied (reordered) into layout `md`, once, at load.
  memory constant_as(int v, const memory::desc& src_md, const memory::desc& md) {
    memory src(src_md, engine_, const_cast<float*>(constant(v)));
    memory dst = owned(md);
    dnnl::reorder(src, dst).execute(stream_, src, dst);
    stream_.wait();
    return dst;
  }

  // Value v in layout `md`: its memory when it already is, else a reorder into a temporary run
  // before the step.
  memory as_layout(int v, const memory::desc& md) {
    const ext::ValueInfo& info = region_.values[static_cast<size_t>(v)];
    if (info.constant()) return constant_as(v, plain(dims(v)).reshape(md.dims()), md);
    memory m = mem_[static_cast<size_t>(v)];
    if (m.get_desc() == md) return m;
    memory tmp = pooled(md, -1);
    execs_.push_back({dnnl::reorder(m, tmp), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, tmp}}});
    return tmp;
  }
  memory as_plain(int v) { return as_layout(v, plain(dims(v))); }

  // The memory a step writes value v into, in layout md: kiln's output buffer when v is a
  // region output and md is plain, else a pool buffer (copied out by finish()).
  memory destination(int v, const memory::desc& md) {
    const int out = output_index_[static_cast<size_t>(v)];
    memory m;
    if (out >= 0 && md == plain(dims(v))) {
      m = memory(md, engine_, DNNL_MEMORY_NONE);
      bindings_.push_back({m, false, static_cast<size_t>(out)});
    } else {
      m = pooled(md, v);
    }
    mem_[static_cast<size_t>(v)] = m;
    return m;
  }
  // After the step: a region output the step did not write in place is reordered into kiln's buffer.
  void finish(int v) {
    const int out = output_index_[static_cast<size_t>(v)];
    if (out < 0) return;
    memory m = mem_[static_cast<size_t>(v)];
    for (const Binding& b : bindings_)
      if (!b.input && b.index == static_cast<size_t>(out) && b.mem.get() == m.get()) return;
    memory dst(plain(dims(v)), engine_, DNNL_MEMORY_NONE);
    bindings_.push_back({dst, false, static_cast<size_t>(out)});
    execs_.push_back({dnnl::reorder(m, dst), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, dst}}});
  }

  void release_dead(const Step& s) {
    const auto drop = [&](int v) {
      if (v < 0 || last_use_[static_cast<size_t>(v)] > step_) return;
      int& b = buffer_of_[static_cast<size_t>(v)];
      if (b >= 0) refs_[static_cast<size_t>(b)]--;
      b = -1;
    };
    for (int v : s.inputs) drop(v);
    for (const PostOp& p : s.post) drop(p.src1);
    drop(s.output);  // made but never read (a region output lives in kiln's memory)
    for (int b : temps_) refs_[static_cast<size_t>(b)]--;
    temps_.clear();
  }

  dnnl::post_ops post_ops(const Step& s, const memory::desc* dst) {
    dnnl::post_ops po;
    for (const PostOp& p : s.post) {
      if (p.kind == "eltwise") po.append_eltwise(1.f, eltwise_alg(p.alg), p.alpha, p.beta);
      else if (p.kind == "sum") po.append_sum(1.f);
      else if (dst) po.append_binary(binary_alg(p.alg), *dst);
    }
    return po;
  }
  bool has_binary(const Step& s) const {
    for (const PostOp& p : s.post)
      if (p.kind == "binary") return true;
    return false;
  }
  // The binary post-ops' operands in the destination's layout `dst` (a plain `dst` of other dims
  // than the operand's, as a MatMul's folded rows: the same buffer reshaped).
  void add_binary_args(const Step& s, const memory::desc& dst, std::unordered_map<int, memory>& args) {
    for (size_t k = 0; k < s.post.size(); ++k) {
      if (s.post[k].kind != "binary") continue;
      const int v = s.post[k].src1;
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(k)) | DNNL_ARG_SRC_1] =
          dims(v) == dst.dims() ? as_layout(v, dst) : reshaped(as_plain(v), dst);
    }
  }

  // Builds the primitive descriptor with `dst` any, then, when there are binary post-ops, again
  // with the destination layout the first build chose, which their operands must have too.
  template <typename PD>
  PD with_post_ops(const Step& s, const std::function<PD(const dnnl::primitive_attr&, const memory::desc&)>& make) {
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops(s, nullptr));
    PD pd = make(attr, any(dims(s.output)));
    if (!has_binary(s)) return pd;
    const memory::desc dst = pd.dst_desc();
    attr.set_post_ops(post_ops(s, &dst));
    return make(attr, dst);
  }

  // The destination of a step with post-ops: a sum post-op's operand must be in it before the
  // primitive runs, which costs nothing when the operand dies here in the same layout (the
  // destination takes its buffer) and is a copy otherwise.
  memory post_op_destination(const Step& s, const memory::desc& md, const memory& src) {
    int residual = -1;
    for (const PostOp& p : s.post)
      if (p.kind == "sum") residual = p.src1;
    if (residual < 0) return destination(s.output, md);
    const size_t r = static_cast<size_t>(residual);
    const int b = buffer_of_[r];
    const memory res = region_.values[r].constant() ? as_plain(residual) : mem_[r];
    if (b >= 0 && refs_[static_cast<size_t>(b)] == 1 && last_use_[r] == step_ && res.get_desc() == md &&
        res.get_data_handle() != src.get_data_handle() && output_index_[static_cast<size_t>(s.output)] < 0) {
      memory dst(md, engine_, pool_[static_cast<size_t>(b)].get());
      buffer_of_[static_cast<size_t>(s.output)] = b;
      buffer_of_[r] = -1;
      mem_[static_cast<size_t>(s.output)] = dst;
      return dst;
    }
    memory dst = destination(s.output, md);
    execs_.push_back({dnnl::reorder(res, dst), {{DNNL_ARG_FROM, res}, {DNNL_ARG_TO, dst}}});
    return dst;
  }

  void add_step(const Step& s) {
    if (s.kind == "conv") add_conv(s);
    else if (s.kind == "matmul") add_matmul(s);
    else if (s.kind == "inner_product") add_inner_product(s);
    else if (s.kind == "pool") add_pool(s);
    else if (s.kind == "eltwise") add_eltwise(s);
    else if (s.kind == "binary") add_binary(s);
    else if (s.kind == "softmax") add_softmax(s);
    else if (s.kind == "bnorm") add_bnorm(s);
    else if (s.kind == "lnorm") add_lnorm(s);
    else if (s.kind == "concat") add_concat(s);
    else if (s.kind == "view") add_view(s);
    else throw std::runtime_error("unknown step kind");
    finish(s.output);
  }

  // ONNX pads (begin..., end...) for 2-D windows, auto_pad applied. oneDNN sizes outputs as
  // floor((in + pads - extent) / stride) + 1, like ONNX without ceil_mode: the explicit end pads
  // stand; with SAME or ceil_mode they are what makes the output size ONNX's.
  void window_pads(const Step& s, const Dims& in, const Dims& out, const Dims& kernel, const Dims& dilation,
                   Dims& pad_l, Dims& pad_r) {
    pad_l = {0, 0};
    pad_r = {0, 0};
    for (size_t i = 0; i < 2; ++i) {
      const int64_t stride = s.strides.size() > i ? s.strides[i] : 1;
      const int64_t extent = (kernel[i] - 1) * (dilation[i] + 1) + 1;
      const bool same = s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER";
      if (same) {
        const int64_t total = std::max<int64_t>(0, ((in[i + 2] + stride - 1) / stride - 1) * stride + extent - in[i + 2]);
        pad_l[i] = s.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (s.auto_pad != "VALID" && s.pads.size() == 4) {
        pad_l[i] = s.pads[i];
        pad_r[i] = s.pads[i + 2];
      }
      if (same || s.ceil_mode) pad_r[i] = (out[i + 2] - 1) * stride + extent - in[i + 2] - pad_l[i];
      if ((in[i + 2] + pad_l[i] + pad_r[i] - extent) / stride + 1 != out[i + 2])
        throw std::runtime_error("window sizes disagree with the output size");
    }
  }

  void add_conv(const Step& s) {
    const Dims x = dims(s.inputs[0]), w = dims(s.inputs[1]), y = dims(s.output);
    const bool bias = s.inputs.size() > 2 && s.inputs[2] >= 0;
    Dims wd = w;
    if (s.group > 1) {
      wd = {s.group, w[0] / s.group, w[1], w[2], w[3]};
    }
    const Dims strides = {s.strides[0], s.strides[1]};
    const Dims dilation = {s.dilations[0] - 1, s.dilations[1] - 1};
    Dims pad_l, pad_r;
    window_pads(s, x, y, {w[2], w[3]}, dilation, pad_l, pad_r);
    const memory::desc bias_md = bias ? memory::desc({y[1]}, DT::f32, Tag::a) : memory::desc();
    using PD = dnnl::convolution_forward::primitive_desc;
    const PD pd = with_post_ops<PD>(s, [&](const dnnl::primitive_attr& attr, const memory::desc& dst) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        any(x), any(wd), bias_md, dst, strides, dilation, pad_l, pad_r);
      return PD(d, attr, engine_);
    });
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = as_layout(s.inputs[0], pd.src_desc());
    args[DNNL_ARG_WEIGHTS] = constant_as(s.inputs[1], memory::desc(wd, DT::f32, s.group > 1 ? Tag::goihw : Tag::oihw),
                                         pd.weights_desc());
    if (bias) args[DNNL_ARG_BIAS] = constant_as(s.inputs[2], bias_md, bias_md);
    add_binary_args(s, pd.dst_desc(), args);
    args[DNNL_ARG_DST] = post_op_destination(s, pd.dst_desc(), args[DNNL_ARG_SRC]);
    execs_.push_back({dnnl::convolution_forward(pd), std::move(args)});
  }

  // MatMul. When B has no batch (a weight), A's leading dims fold into its rows: one GEMM of
  // [batch*M, K] x [K, N] instead of `batch` GEMMs (ViT's [197,1,768] x [768,2304] projection).
  void add_matmul(const Step& s) {
    const Dims y = dims(s.output);
    Dims a = padded(dims(s.inputs[0]), y.size()), b = padded(dims(s.inputs[1]), y.size()), yk = y;
    bool b_batched = false;
    for (size_t i = 0; i + 2 < b.size(); ++i) b_batched |= b[i] != 1;
    if (!b_batched && y.size() > 2) {
      int64_t rows = 1;
      for (size_t i = 0; i + 1 < y.size(); ++i) rows *= y[i];
      a = {rows, a.back()};
      b = {b[b.size() - 2], b.back()};
      yk = {rows, y.back()};
    }
    const bool b_constant = region_.values[static_cast<size_t>(s.inputs[1])].constant();
    const bool bias = s.inputs.size() > 2 && s.inputs[2] >= 0;
    Dims bias_dims(yk.size(), 1);
    bias_dims.back() = yk.back();
    const memory::desc bias_md = bias ? plain(bias_dims) : memory::desc();
    using PD = dnnl::matmul::primitive_desc;
    const PD pd = with_post_ops<PD>(s, [&](const dnnl::primitive_attr& attr, const memory::desc&) {
      dnnl::matmul::desc d(plain(a), b_constant ? any(b) : plain(b), bias_md, plain(yk));
      return PD(d, attr, engine_);
    });
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = reshaped(as_plain(s.inputs[0]), plain(a));
    args[DNNL_ARG_WEIGHTS] = b_constant ? constant_as(s.inputs[1], plain(b), pd.weights_desc())
                                        : reshaped(as_plain(s.inputs[1]), plain(b));
    if (bias) args[DNNL_ARG_BIAS] = constant_as(s.inputs[2], bias_md, bias_md);
    add_binary_args(s, plain(yk), args);
    args[DNNL_ARG_DST] = reshaped(post_op_destination(s, plain(y), args[DNNL_ARG_SRC]), plain(yk));
    execs_.push_back({dnnl::matmul(pd), std::move(args)});
  }

  // The same buffer seen with another plain shape (same element count).
  memory reshaped(const memory& m, const memory::desc& md) {
    if (m.get_desc() == md) return m;
    memory view(md, engine_, DNNL_MEMORY_NONE);
    aliases_.push_back({view, m});
    view.set_data_handle(m.get_data_handle());
    return view;
  }

  void add_inner_product(const Step& s) {
    const Dims x = dims(s.inputs[0]), w = dims(s.inputs[1]), y = dims(s.output);
    const Dims oi = {y[1], x[1]};
    const bool bias = s.inputs.size() > 2 && s.inputs[2] >= 0;
    const memory::desc bias_md = bias ? memory::desc({y[1]}, DT::f32, Tag::a) : memory::desc();
    using PD = dnnl::inner_product_forward::primitive_desc;
    const PD pd = with_post_ops<PD>(s, [&](const dnnl::primitive_attr& attr, const memory::desc&) {
      dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_inference, plain(x), any(oi), bias_md, plain(y));
      return PD(d, attr, engine_);
    });
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = as_plain(s.inputs[0]);
    args[DNNL_ARG_WEIGHTS] = constant_as(s.inputs[1], memory::desc(oi, DT::f32, s.trans_b ? Tag::ab : Tag::ba),
                                         pd.weights_desc());
    if (bias) args[DNNL_ARG_BIAS] = constant_as(s.inputs[2], bias_md, bias_md);
    add_binary_args(s, pd.dst_desc(), args);
    args[DNNL_ARG_DST] = post_op_destination(s, pd.dst_desc(), args[DNNL_ARG_SRC]);
    execs_.push_back({dnnl::inner_product_forward(pd), std::move(args)});
  }

  void add_pool(const Step& s) {
    const Dims x = dims(s.inputs[0]), y = dims(s.output);
    const Dims kernel = s.global ? Dims{x[2], x[3]} : Dims{s.kernel[0], s.kernel[1]};
    Step window = s;
    if (s.global) window.strides = {1, 1}, window.pads = {0, 0, 0, 0}, window.auto_pad = "VALID";
    Dims pad_l, pad_r;
    window_pads(window, x, y, kernel, {0, 0}, pad_l, pad_r);
    const dnnl::algorithm alg = s.alg == "max"           ? dnnl::algorithm::pooling_max
                                : s.alg == "avg_include" ? dnnl::algorithm::pooling_avg_include_padding
                                                         : dnnl::algorithm::pooling_avg_exclude_padding;
    const memory src = mem_for_read(s.inputs[0]);
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src.get_desc(), any(y),
                                  {window.strides[0], window.strides[1]}, kernel, pad_l, pad_r);
    const dnnl::pooling_forward::primitive_desc pd(d, engine_);
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = as_layout(s.inputs[0], pd.src_desc());
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    if (pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = pooled(pd.workspace_desc(), -1);
    execs_.push_back({dnnl::pooling_forward(pd), std::move(args)});
  }

  void add_eltwise(const Step& s) {
    const memory src = mem_for_read(s.inputs[0]);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, eltwise_alg(s.alg), src.get_desc(), s.alpha, s.beta);
    const dnnl::eltwise_forward::primitive_desc pd(d, engine_);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}};
    const memory dst = destination(s.output, pd.dst_desc());
    args[DNNL_ARG_DST] = dst;
    execs_.push_back({dnnl::eltwise_forward(pd), std::move(args)});
    for (const PostOp& p : s.post) {  // the rest of a chain (HardSigmoid's clip), in place
      dnnl::eltwise_forward::desc dp(dnnl::prop_kind::forward_inference, eltwise_alg(p.alg), dst.get_desc(), p.alpha, p.beta);
      const dnnl::eltwise_forward::primitive_desc pdp(dp, engine_);
      execs_.push_back({dnnl::eltwise_forward(pdp), {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}}});
    }
  }

  // Value v's memory as it is (a constant: plain, copied once).
  memory mem_for_read(int v) {
    if (region_.values[static_cast<size_t>(v)].constant()) return as_plain(v);
    return mem_[static_cast<size_t>(v)];
  }

  void add_binary(const Step& s) {
    const Dims y = dims(s.output);
    memory a = mem_for_read(s.inputs[0]);
    if (a.get_desc().dims() != y) a = reshaped(as_plain(s.inputs[0]), plain(y));
    const Dims bd = padded(dims(s.inputs[1]), y.size());
    memory b = reshaped(as_plain(s.inputs[1]), plain(bd));
    if (bd == y && b.get_desc() != a.get_desc()) {  // same dims: in src0's layout
      memory tmp = pooled(a.get_desc(), -1);
      execs_.push_back({dnnl::reorder(b, tmp), {{DNNL_ARG_FROM, b}, {DNNL_ARG_TO, tmp}}});
      b = tmp;
    }
    dnnl::binary::desc d(binary_alg(s.alg), a.get_desc(), b.get_desc(), a.get_desc());
    const dnnl::binary::primitive_desc pd(d, engine_);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}};
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    execs_.push_back({dnnl::binary(pd), std::move(args)});
  }

  void add_softmax(const Step& s) {
    const memory src = as_plain(s.inputs[0]);
    const int axis = static_cast<int>(dims(s.inputs[0]).size()) - 1;
    dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, src.get_desc(), axis);
    const dnnl::softmax_forward::primitive_desc pd(d, engine_);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}};
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    execs_.push_back({dnnl::softmax_forward(pd), std::move(args)});
  }

  void add_bnorm(const Step& s) {
    const memory src = mem_for_read(s.inputs[0]);
    const auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                       dnnl::normalization_flags::use_shift;
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, src.get_desc(), s.epsilon, flags);
    const dnnl::batch_normalization_forward::primitive_desc pd(d, engine_);
    const memory::desc c({dims(s.inputs[0])[1]}, DT::f32, Tag::a);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}};
    args[DNNL_ARG_SCALE] = constant_as(s.inputs[1], c, c);
    args[DNNL_ARG_SHIFT] = constant_as(s.inputs[2], c, c);
    args[DNNL_ARG_MEAN] = constant_as(s.inputs[3], c, c);
    args[DNNL_ARG_VARIANCE] = constant_as(s.inputs[4], c, c);
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    execs_.push_back({dnnl::batch_normalization_forward(pd), std::move(args)});
  }

  void add_lnorm(const Step& s) {
    const memory src = as_plain(s.inputs[0]);
    const bool scale = s.inputs.size() > 1 && s.inputs[1] >= 0, shift = s.inputs.size() > 2 && s.inputs[2] >= 0;
    auto flags = dnnl::normalization_flags::none;
    if (scale) flags |= dnnl::normalization_flags::use_scale;
    if (shift) flags |= dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, src.get_desc(), s.epsilon, flags);
    const dnnl::layer_normalization_forward::primitive_desc pd(d, engine_);
    const memory::desc c({dims(s.inputs[0]).back()}, DT::f32, Tag::a);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}};
    if (scale) args[DNNL_ARG_SCALE] = constant_as(s.inputs[1], c, c);
    if (shift) args[DNNL_ARG_SHIFT] = constant_as(s.inputs[2], c, c);
    for (int arg : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}) {
      const memory::desc md = pd.query_md(dnnl::query::exec_arg_md, arg);
      if (md.get_size() > 0) args[arg] = pooled(md, -1);
    }
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    execs_.push_back({dnnl::layer_normalization_forward(pd), std::move(args)});
  }

  // Concat in the inputs' layouts as they are (a conv's blocked output included); oneDNN picks
  // the destination's.
  void add_concat(const Step& s) {
    std::vector<memory::desc> srcs;
    std::unordered_map<int, memory> args;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const memory m = mem_for_read(s.inputs[k]);
      srcs.push_back(m.get_desc());
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k)] = m;
    }
    const dnnl::concat::primitive_desc pd(static_cast<int>(s.axis), srcs, engine_);
    args[DNNL_ARG_DST] = destination(s.output, pd.dst_desc());
    execs_.push_back({dnnl::concat(pd), std::move(args)});
  }

  void add_view(const Step& s) {
    const memory src = as_plain(s.inputs[0]);
    mem_[static_cast<size_t>(s.output)] = reshaped(src, plain(dims(s.output)));
    // The view keeps its buffer alive: the input's, or the plain copy this step made of it.
    const int b = buffer_of_[static_cast<size_t>(s.inputs[0])];
    if (b >= 0 && src.get() == mem_[static_cast<size_t>(s.inputs[0])].get()) {
      refs_[static_cast<size_t>(b)]++;
      buffer_of_[static_cast<size_t>(s.output)] = b;
    } else if (!temps_.empty() && src.get_data_handle() == pool_[static_cast<size_t>(temps_.back())].get()) {
      buffer_of_[static_cast<size_t>(s.output)] = temps_.back();
      temps_.pop_back();
    }
  }

  ext::Region region_;
  int threads_;
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::vector<memory> mem_;
  std::vector<int> buffer_of_, last_use_, output_index_;
  std::vector<Buffer> pool_, kept_;
  std::vector<size_t> pool_bytes_;
  std::vector<int> refs_, temps_;
  std::vector<Binding> bindings_;
  std::vector<Alias> aliases_;
  std::vector<Exec> execs_;
  int step_ = 0;
};

}  // namespace

std::unique_ptr<ext::RuntimeModule> make_module(const std::vector<Step>& steps, const ext::Region& r, int threads) {
  return std::make_unique<DnnlModule>(steps, r, threads);
}

}  // namespace kiln::external::dnnl_backend
