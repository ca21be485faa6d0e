// Control-flow ops that run nested graphs: If, Loop, Scan (opset 8 batched form and 9+).
// Also registers the random, detection/sampling (misc) op families, which live in their own files.
#include <algorithm>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

// Defined in ops/sequence.cc.
void copy_elements(const Tensor& src, int64_t src_off, const Tensor& dst, int64_t dst_off,
                   int64_t n);
Tensor slice_along_axis(const Tensor& t, int64_t axis, int64_t start, int64_t len);
Tensor concat_tensors(const AttrReader& at, const std::vector<Tensor>& items, int64_t axis,
                      bool new_axis);
DType innermost_dtype(const Type& t);
// Defined in ops/random.cc and ops/misc.cc.
void register_random_ops(OpRegistry& r);
void register_misc_ops(OpRegistry& r);

namespace {

bool scalar_truth(const KernelContext& ctx, const RtValue& v, const char* what) {
  if (!v.is_tensor() || v.tensor.numel() != 1 || v.tensor.dtype() == DType::kString)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be a single-element bool tensor");
  return v.tensor.get_double(0) != 0.0;
}

Tensor bool_scalar(bool b) {
  Tensor t(DType::kBool, {});
  t.data<bool>()[0] = b;
  return t;
}

Tensor int64_scalar(int64_t v) {
  Tensor t(DType::kInt64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

// Stacks per-iteration outputs along a new axis. With no iterations the result has a zero-size
// stacking axis and the element shape of the body output when that shape is static.
Tensor stack_outputs(const KernelContext& ctx, const std::vector<Tensor>& items, int64_t axis,
                     const Value* body_out, const Value* node_out) {
  if (!items.empty()) return concat_tensors(ctx, items, axis, /*new_axis=*/true);
  DType dt = body_out ? innermost_dtype(body_out->type) : DType::kUndefined;
  if (dt == DType::kUndefined && node_out) dt = innermost_dtype(node_out->type);
  if (dt == DType::kUndefined) dt = DType::kFloat32;
  std::vector<int64_t> dims;
  if (body_out && body_out->type.kind == Type::Kind::kTensor && body_out->type.shape &&
      body_out->type.shape->is_static())
    dims = body_out->type.shape->sizes();
  const int64_t ax = normalize_axis(ctx, axis, static_cast<int64_t>(dims.size()) + 1);
  dims.insert(dims.begin() + ax, 0);
  return Tensor(dt, dims);
}

const Value* node_output(const KernelContext& ctx, size_t i) {
  const auto& outs = ctx.node().outputs;
  return i < outs.size() ? outs[i] : nullptr;
}

// Element `index` along `axis`, with that axis removed.
Tensor take_along_axis(const Tensor& t, int64_t axis, int64_t index) {
  std::vector<int64_t> d = t.dims();
  d.erase(d.begin() + axis);
  return slice_along_axis(t, axis, index, 1).reshaped(d);
}

void check_body_arity(const KernelContext& ctx, const Graph& body, size_t n_in, size_t n_out) {
  if (body.inputs.size() != n_in || body.outputs.size() != n_out)
    ctx.fail(ErrorKind::kInvalidModel, "body graph has " + std::to_string(body.inputs.size()) +
                                           " inputs and " + std::to_string(body.outputs.size()) +
                                           " outputs, expected " + std::to_string(n_in) + " and " +
                                           std::to_string(n_out));
}

// ---- If --------------------------------------------------------------------------------------

void if_kernel(KernelContext& ctx) {
  const bool cond = scalar_truth(ctx, ctx.input_value(0), "cond");
  const Graph& branch = *ctx.attr_graph(cond ? "then_branch" : "else_branch");
  std::vector<RtValue> outs = ctx.run_subgraph(branch, {});
  if (static_cast<int>(outs.size()) != ctx.num_outputs())
    ctx.fail(ErrorKind::kInvalidModel, std::string(cond ? "then" : "else") + " branch produced " +
                                           std::to_string(outs.size()) + " outputs, the node has " +
                                           std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i)
    ctx.set_output_value(static_cast<int>(i), std::move(outs[i]));
}

void infer_if(InferContext& ctx) {
  const Graph* then_g = ctx.attr_graph("then_branch");
  const Graph* else_g = ctx.attr_graph("else_branch");
  if (then_g->outputs.size() != else_g->outputs.size()) return;
  for (size_t i = 0; i < then_g->outputs.size() && static_cast<int>(i) < ctx.num_outputs(); ++i) {
    Type t = then_g->outputs[i]->type;
    const Type& e = else_g->outputs[i]->type;
    if (!(t == e)) {
      if (t.kind != Type::Kind::kTensor || e.kind != Type::Kind::kTensor) continue;
      // Branches may differ in shape; keep the dtype and the rank when both agree.
      if (t.dtype != e.dtype) t.dtype = DType::kUndefined;
      if (t.shape && e.shape && t.shape->rank() == e.shape->rank()) {
        for (size_t d = 0; d < t.shape->rank(); ++d)
          if (!(t.shape->dims[d] == e.shape->dims[d])) t.shape->dims[d] = Dim();
      } else {
        t.shape.reset();
      }
    }
    ctx.set_output_type(static_cast<int>(i), t);
  }
}

// ---- Loop ------------------------------------------------------------------------------------

void loop_kernel(KernelContext& ctx) {
  const Graph& body = *ctx.attr_graph("body");
  const int n_carried = ctx.num_inputs() - 2;
  const int n_scan = static_cast<int>(body.outputs.size()) - 1 - n_carried;
  if (n_carried < 0 || n_scan < 0)
    ctx.fail(ErrorKind::kInvalidModel, "body has " + std::to_string(body.outputs.size()) +
                                           " outputs, expected at least " +
                                           std::to_string(1 + std::max(n_carried, 0)));
  check_body_arity(ctx, body, static_cast<size_t>(2 + n_carried), body.outputs.size());
  if (ctx.num_outputs() > n_carried + n_scan)
    ctx.fail(ErrorKind::kInvalidModel, "node has " + std::to_string(ctx.num_outputs()) +
                                           " outputs, body provides " +
                                           std::to_string(n_carried + n_scan));
  const bool has_trip = ctx.has_input(0);
  int64_t trip_count = 0;
  if (has_trip) {
    const Tensor& m = ctx.input(0);
    if (m.numel() != 1 || !is_integer(m.dtype()))
      ctx.fail(ErrorKind::kBadInput, "trip count M should be an int64 scalar, got " +
                                         std::string(dtype_name(m.dtype())) +
                                         dims_to_string(m.dims()));
    trip_count = m.get_int(0);
  }
  bool cond = ctx.has_input(1) ? scalar_truth(ctx, ctx.input_value(1), "cond") : true;

  std::vector<RtValue> carried;
  for (int i = 0; i < n_carried; ++i) carried.push_back(ctx.input_value(2 + i));
  std::vector<std::vector<Tensor>> scans(static_cast<size_t>(n_scan));
  for (int64_t it = 0; cond && (!has_trip || it < trip_count); ++it) {
    std::vector<RtValue> args;
    args.reserve(carried.size() + 2);
    args.emplace_back(int64_scalar(it));
    args.emplace_back(bool_scalar(cond));
    for (const RtValue& v : carried) args.push_back(v);
    std::vector<RtValue> outs = ctx.run_subgraph(body, args);
    if (outs.size() != body.outputs.size())
      ctx.fail(ErrorKind::kInternal, "body returned the wrong number of values");
    cond = scalar_truth(ctx, outs[0], "the body's condition output");
    for (int i = 0; i < n_carried; ++i)
      carried[static_cast<size_t>(i)] = std::move(outs[1 + static_cast<size_t>(i)]);
    for (int k = 0; k < n_scan; ++k) {
      RtValue& v = outs[static_cast<size_t>(1 + n_carried + k)];
      if (!v.is_tensor())
        ctx.fail(ErrorKind::kBadInput, "scan output #" + std::to_string(k) + " should be a tensor");
      scans[static_cast<size_t>(k)].push_back(std::move(v.tensor));
    }
  }
  for (int i = 0; i < n_carried && i < ctx.num_outputs(); ++i)
    ctx.set_output_value(i, std::move(carried[static_cast<size_t>(i)]));
  for (int k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
    const size_t oi = static_cast<size_t>(n_carried + k);
    ctx.set_output(static_cast<int>(oi), stack_outputs(ctx, scans[static_cast<size_t>(k)], 0,
                                                       body.outputs[oi + 1], node_output(ctx, oi)));
  }
}

void infer_loop(InferContext& ctx) {
  const Graph* body = ctx.attr_graph("body");
  const int n_carried = ctx.num_inputs() - 2;
  for (int i = 0; i < n_carried && i < ctx.num_outputs(); ++i) {
    if (!ctx.has_input(2 + i)) continue;
    Type t = ctx.input_type(2 + i);
    // Carried tensors may change shape between iterations; keep the dtype only.
    if (t.kind == Type::Kind::kTensor) t.shape.reset();
    ctx.set_output_type(i, t);
  }
  for (int oi = std::max(n_carried, 0); oi < ctx.num_outputs(); ++oi) {
    const size_t bi = static_cast<size_t>(oi + 1);
    if (bi >= body->outputs.size()) break;
    const Type& bt = body->outputs[bi]->type;
    if (bt.kind != Type::Kind::kTensor) continue;
    Type t = Type::tensor(bt.dtype);
    if (bt.shape) {
      Shape s = *bt.shape;
      s.dims.insert(s.dims.begin(), Dim());
      t.shape = s;
    }
    ctx.set_output_type(oi, t);
  }
}

// ---- Scan ------------------------------------------------------------------------------------

std::vector<int64_t> per_scan_attr(const KernelContext& ctx, const char* name, size_t n) {
  std::vector<int64_t> v = ctx.attr_ints(name);
  if (v.empty()) v.assign(n, 0);
  if (v.size() != n)
    ctx.fail(ErrorKind::kInvalidModel, std::string("attribute '") + name + "' has " +
                                           std::to_string(v.size()) + " entries, expected " +
                                           std::to_string(n));
  return v;
}

void check_direction(const KernelContext& ctx, int64_t d) {
  if (d != 0 && d != 1)
    ctx.fail(ErrorKind::kInvalidModel, "scan direction should be 0 or 1, got " + std::to_string(d));
}

void scan9_kernel(KernelContext& ctx) {
  const Graph& body = *ctx.attr_graph("body");
  const int64_t n_scan_in = ctx.attr_int("num_scan_inputs");
  const int64_t n_in = ctx.num_inputs();
  const int64_t n_state = n_in - n_scan_in;
  if (n_scan_in <= 0 || n_state < 0)
    ctx.fail(ErrorKind::kInvalidModel, "num_scan_inputs=" + std::to_string(n_scan_in) +
                                           " does not fit the " + std::to_string(n_in) + " inputs");
  const int64_t n_scan_out = static_cast<int64_t>(body.outputs.size()) - n_state;
  if (n_scan_out < 0) ctx.fail(ErrorKind::kInvalidModel, "body has too few outputs");
  check_body_arity(ctx, body, static_cast<size_t>(n_in), body.outputs.size());
  if (ctx.num_outputs() > n_state + n_scan_out)
    ctx.fail(ErrorKind::kInvalidModel, "node has more outputs than the body");
  const auto in_axes = per_scan_attr(ctx, "scan_input_axes", static_cast<size_t>(n_scan_in));
  const auto in_dirs = per_scan_attr(ctx, "scan_input_directions", static_cast<size_t>(n_scan_in));
  const auto out_axes = per_scan_attr(ctx, "scan_output_axes", static_cast<size_t>(n_scan_out));
  const auto out_dirs =
      per_scan_attr(ctx, "scan_output_directions", static_cast<size_t>(n_scan_out));
  for (int64_t d : in_dirs) check_direction(ctx, d);
  for (int64_t d : out_dirs) check_direction(ctx, d);

  std::vector<Tensor> scan_in;
  std::vector<int64_t> axes;
  int64_t len = -1;
  for (int64_t j = 0; j < n_scan_in; ++j) {
    const Tensor& t = ctx.input(static_cast<int>(n_state + j));
    if (t.rank() == 0) ctx.fail(ErrorKind::kBadInput, "scan inputs must have rank >= 1");
    const int64_t ax = normalize_axis(ctx, in_axes[static_cast<size_t>(j)], t.rank());
    const int64_t l = t.dim(static_cast<int>(ax));
    if (len >= 0 && l != len)
      ctx.fail(ErrorKind::kBadInput, "scan inputs have different sequence lengths: " +
                                         std::to_string(len) + " and " + std::to_string(l));
    len = l;
    scan_in.push_back(t);
    axes.push_back(ax);
  }
  std::vector<RtValue> states;
  for (int64_t i = 0; i < n_state; ++i) states.push_back(ctx.input_value(static_cast<int>(i)));
  std::vector<std::vector<Tensor>> scans(static_cast<size_t>(n_scan_out));
  for (int64_t it = 0; it < len; ++it) {
    std::vector<RtValue> args = states;
    for (size_t j = 0; j < scan_in.size(); ++j) {
      const int64_t idx = in_dirs[j] == 1 ? len - 1 - it : it;
      args.emplace_back(take_along_axis(scan_in[j], axes[j], idx));
    }
    std::vector<RtValue> outs = ctx.run_subgraph(body, args);
    if (outs.size() != body.outputs.size())
      ctx.fail(ErrorKind::kInternal, "body returned the wrong number of values");
    for (int64_t i = 0; i < n_state; ++i)
      states[static_cast<size_t>(i)] = std::move(outs[static_cast<size_t>(i)]);
    for (int64_t k = 0; k < n_scan_out; ++k) {
      RtValue& v = outs[static_cast<size_t>(n_state + k)];
      if (!v.is_tensor())
        ctx.fail(ErrorKind::kBadInput, "scan output #" + std::to_string(k) + " should be a tensor");
      scans[static_cast<size_t>(k)].push_back(std::move(v.tensor));
    }
  }
  for (int64_t i = 0; i < n_state && i < ctx.num_outputs(); ++i)
    ctx.set_output_value(static_cast<int>(i), std::move(states[static_cast<size_t>(i)]));
  for (int64_t k = 0; k < n_scan_out && n_state + k < ctx.num_outputs(); ++k) {
    auto& items = scans[static_cast<size_t>(k)];
    if (out_dirs[static_cast<size_t>(k)] == 1) std::reverse(items.begin(), items.end());
    const size_t oi = static_cast<size_t>(n_state + k);
    ctx.set_output(static_cast<int>(oi), stack_outputs(ctx, items, out_axes[static_cast<size_t>(k)],
                                                       body.outputs[oi], node_output(ctx, oi)));
  }
}

// Opset 8: every input and output has a leading batch axis; scan inputs scan along axis 1.
void scan8_kernel(KernelContext& ctx) {
  const Graph& body = *ctx.attr_graph("body");
  const int64_t n_scan_in = ctx.attr_int("num_scan_inputs");
  const int64_t n_in = ctx.num_inputs() - 1;  // input 0 is sequence_lens
  const int64_t n_state = n_in - n_scan_in;
  if (n_scan_in <= 0 || n_state < 0)
    ctx.fail(ErrorKind::kInvalidModel, "num_scan_inputs=" + std::to_string(n_scan_in) +
                                           " does not fit the " + std::to_string(n_in) + " inputs");
  const int64_t n_scan_out = static_cast<int64_t>(body.outputs.size()) - n_state;
  if (n_scan_out < 0) ctx.fail(ErrorKind::kInvalidModel, "body has too few outputs");
  check_body_arity(ctx, body, static_cast<size_t>(n_in), body.outputs.size());
  if (ctx.num_outputs() > n_state + n_scan_out)
    ctx.fail(ErrorKind::kInvalidModel, "node has more outputs than the body");
  const auto dirs = per_scan_attr(ctx, "directions", static_cast<size_t>(n_scan_in));
  for (int64_t d : dirs) check_direction(ctx, d);

  std::vector<Tensor> ins;
  for (int64_t i = 0; i < n_in; ++i) {
    const Tensor& t = ctx.input(static_cast<int>(1 + i));
    const int min_rank = i < n_state ? 1 : 2;
    if (t.rank() < min_rank)
      ctx.fail(ErrorKind::kBadInput, "input #" + std::to_string(1 + i) +
                                         " needs rank >= " + std::to_string(min_rank) + " (batch" +
                                         (min_rank == 2 ? ", sequence" : "") + "), got " +
                                         dims_to_string(t.dims()));
    if (!ins.empty() && t.dim(0) != ins[0].dim(0))
      ctx.fail(ErrorKind::kBadInput, "inputs have different batch sizes");
    ins.push_back(t);
  }
  const int64_t batch = ins[0].dim(0);
  const int64_t max_len = ins[static_cast<size_t>(n_state)].dim(1);
  for (int64_t j = n_state; j < n_in; ++j)
    if (ins[static_cast<size_t>(j)].dim(1) != max_len)
      ctx.fail(ErrorKind::kBadInput, "scan inputs have different sequence lengths");
  std::vector<int64_t> seq_lens(static_cast<size_t>(batch), max_len);
  if (ctx.has_input(0)) {
    const Tensor& sl = ctx.input(0);
    if (!is_integer(sl.dtype()) || sl.numel() != batch)
      ctx.fail(ErrorKind::kBadInput, "sequence_lens should hold " + std::to_string(batch) +
                                         " integers, got " + dims_to_string(sl.dims()));
    seq_lens = sl.to_int64_vector();
    for (int64_t l : seq_lens)
      if (l < 0 || l > max_len)
        ctx.fail(ErrorKind::kBadInput, "sequence length " + std::to_string(l) + " is outside [0, " +
                                           std::to_string(max_len) + "]");
  }

  std::vector<std::vector<Tensor>> final_states(static_cast<size_t>(n_state));
  std::vector<std::vector<Tensor>> scan_results(static_cast<size_t>(n_scan_out));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<RtValue> states;
    for (int64_t i = 0; i < n_state; ++i)
      states.emplace_back(take_along_axis(ins[static_cast<size_t>(i)], 0, b));
    std::vector<Tensor> seq_in;
    for (int64_t j = n_state; j < n_in; ++j)
      seq_in.push_back(take_along_axis(ins[static_cast<size_t>(j)], 0, b));
    const int64_t len = seq_lens[static_cast<size_t>(b)];
    std::vector<std::vector<Tensor>> scans(static_cast<size_t>(n_scan_out));
    for (int64_t it = 0; it < len; ++it) {
      std::vector<RtValue> args = states;
      for (size_t j = 0; j < seq_in.size(); ++j)
        args.emplace_back(take_along_axis(seq_in[j], 0, dirs[j] == 1 ? len - 1 - it : it));
      std::vector<RtValue> outs = ctx.run_subgraph(body, args);
      if (outs.size() != body.outputs.size())
        ctx.fail(ErrorKind::kInternal, "body returned the wrong number of values");
      for (int64_t i = 0; i < n_state; ++i)
        states[static_cast<size_t>(i)] = std::move(outs[static_cast<size_t>(i)]);
      for (int64_t k = 0; k < n_scan_out; ++k) {
        RtValue& v = outs[static_cast<size_t>(n_state + k)];
        if (!v.is_tensor())
          ctx.fail(ErrorKind::kBadInput,
                   "scan output #" + std::to_string(k) + " should be a tensor");
        scans[static_cast<size_t>(k)].push_back(std::move(v.tensor));
      }
    }
    for (int64_t i = 0; i < n_state; ++i) {
      RtValue& s = states[static_cast<size_t>(i)];
      if (!s.is_tensor()) ctx.fail(ErrorKind::kBadInput, "Scan states must be tensors");
      final_states[static_cast<size_t>(i)].push_back(std::move(s.tensor));
    }
    for (int64_t k = 0; k < n_scan_out; ++k) {
      auto& items = scans[static_cast<size_t>(k)];
      // Shorter sequences are padded with zeros up to the maximum length.
      if (!items.empty())
        while (static_cast<int64_t>(items.size()) < max_len)
          items.emplace_back(items[0].dtype(), items[0].dims());
      const size_t oi = static_cast<size_t>(n_state + k);
      scan_results[static_cast<size_t>(k)].push_back(
          stack_outputs(ctx, items, 0, body.outputs[oi], nullptr));
    }
  }
  for (int64_t i = 0; i < n_state && i < ctx.num_outputs(); ++i)
    ctx.set_output(static_cast<int>(i), stack_outputs(ctx, final_states[static_cast<size_t>(i)], 0,
                                                      body.outputs[static_cast<size_t>(i)],
                                                      node_output(ctx, static_cast<size_t>(i))));
  for (int64_t k = 0; k < n_scan_out && n_state + k < ctx.num_outputs(); ++k) {
    const size_t oi = static_cast<size_t>(n_state + k);
    auto& per_batch = scan_results[static_cast<size_t>(k)];
    // A batch entry with no iterations has a [0, ...] result; pad it to the common shape.
    for (auto& t : per_batch)
      if (t.numel() == 0 && max_len > 0)
        for (const auto& o : per_batch)
          if (o.numel() > 0) {
            t = Tensor(o.dtype(), o.dims());
            break;
          }
    if (per_batch.empty()) {
      ctx.set_output(static_cast<int>(oi),
                     stack_outputs(ctx, {}, 0, body.outputs[oi], node_output(ctx, oi)));
      continue;
    }
    ctx.set_output(static_cast<int>(oi), concat_tensors(ctx, per_batch, 0, true));
  }
}

void infer_scan(InferContext& ctx) {
  // Final states keep the initial state types (the batch axis, if any, is carried along).
  const int first = ctx.opset() < 9 ? 1 : 0;
  const int64_t n_scan_in = ctx.attr_int("num_scan_inputs", 0);
  const int64_t n_state = ctx.num_inputs() - first - n_scan_in;
  for (int64_t i = 0; i < n_state && i < ctx.num_outputs(); ++i)
    if (ctx.has_input(static_cast<int>(first + i)))
      ctx.set_output_type(static_cast<int>(i), ctx.input_type(static_cast<int>(first + i)));
}

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
  r.add("If").since(1).inputs(1).outputs(1, -1).takes_subgraphs().run(if_kernel).shape(infer_if);
  r.add("Loop").since(1).inputs(2, -1).outputs(1, -1).takes_subgraphs().run(loop_kernel).shape(infer_loop);
  r.add("Scan").since(8).inputs(2, -1).outputs(1, -1).takes_subgraphs().run(scan8_kernel).shape(infer_scan);
  r.add("Scan").since(9).inputs(1, -1).outputs(1, -1).takes_subgraphs().run(scan9_kernel).shape(infer_scan);
  register_random_ops(r);
  register_misc_ops(r);
}

}  // namespace kiln
