// Sequence and Optional ops: SequenceEmpty/Construct/At/Insert/Erase/Length, SplitToSequence,
// ConcatFromSequence, SequenceMap, Optional, OptionalHasElement, OptionalGetElement.
#include <algorithm>
#include <cstring>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

// ---- Data movement helpers, also used by ops/control_flow.cc (declared there) --------------

// Copies n elements of src (from element src_off) into dst (from element dst_off); same dtype.
void copy_elements(const Tensor& src, int64_t src_off, const Tensor& dst, int64_t dst_off,
                   int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::kString) {
    std::copy_n(src.data<std::string>() + src_off, n, dst.data<std::string>() + dst_off);
    return;
  }
  // Every non-string dtype is stored as plain bytes, so a byte copy covers them all.
  const size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<size_t>(dst_off) * es,
              static_cast<const char*>(src.raw()) + static_cast<size_t>(src_off) * es,
              static_cast<size_t>(n) * es);
}

namespace {

int64_t prod(const std::vector<int64_t>& d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= d[i];
  return p;
}

}  // namespace

// Elements [start, start+len) of `t` along `axis` (the axis is kept, with size len).
Tensor slice_along_axis(const Tensor& t, int64_t axis, int64_t start, int64_t len) {
  const auto& d = t.dims();
  const size_t ax = static_cast<size_t>(axis);
  std::vector<int64_t> od = d;
  od[ax] = len;
  Tensor out(t.dtype(), od);
  const int64_t outer = prod(d, 0, ax), inner = prod(d, ax + 1, d.size());
  for (int64_t o = 0; o < outer; ++o)
    copy_elements(t, (o * d[ax] + start) * inner, out, o * len * inner, len * inner);
  return out;
}

// Concatenates `items` along `axis`; with new_axis the items are stacked along a new axis
// inserted at `axis` (which may then be in [-rank-1, rank]). All items must share dtype and
// the other dims.
Tensor concat_tensors(const AttrReader& at, const std::vector<Tensor>& items, int64_t axis,
                      bool new_axis) {
  if (items.empty()) at.fail(ErrorKind::kBadInput, "cannot concatenate an empty sequence");
  const int64_t rank = items[0].rank();
  if (!new_axis && rank == 0) at.fail(ErrorKind::kBadInput, "cannot concatenate scalars");
  const int64_t out_rank = new_axis ? rank + 1 : rank;
  const size_t ax = static_cast<size_t>(normalize_axis(at, axis, out_rank));
  std::vector<Tensor> parts;
  parts.reserve(items.size());
  for (const Tensor& t : items) {
    if (t.dtype() != items[0].dtype())
      at.fail(ErrorKind::kBadInput, "concatenated tensors have different dtypes: " +
                                        std::string(dtype_name(items[0].dtype())) + " and " +
                                        std::string(dtype_name(t.dtype())));
    if (t.rank() != rank)
      at.fail(ErrorKind::kBadInput,
              "concatenated tensors have different ranks: " + dims_to_string(items[0].dims()) +
                  " and " + dims_to_string(t.dims()));
    if (new_axis) {
      if (t.dims() != items[0].dims())
        at.fail(ErrorKind::kBadInput, "stacked tensors must have equal shapes, got " +
                                          dims_to_string(items[0].dims()) + " and " +
                                          dims_to_string(t.dims()));
      std::vector<int64_t> d = t.dims();
      d.insert(d.begin() + static_cast<std::ptrdiff_t>(ax), 1);
      parts.push_back(t.reshaped(d));
    } else {
      for (size_t i = 0; i < static_cast<size_t>(rank); ++i)
        if (i != ax && t.dims()[i] != items[0].dims()[i])
          at.fail(ErrorKind::kBadInput,
                  "concatenated tensors differ outside axis " + std::to_string(ax) + ": " +
                      dims_to_string(items[0].dims()) + " and " + dims_to_string(t.dims()));
      parts.push_back(t);
    }
  }
  std::vector<int64_t> od = parts[0].dims();
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dims()[ax];
  od[ax] = total;
  Tensor out(items[0].dtype(), od);
  const int64_t outer = prod(od, 0, ax), inner = prod(od, ax + 1, od.size());
  int64_t pos = 0;
  for (const Tensor& p : parts) {
    const int64_t len = p.dims()[ax] * inner;
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(p, o * len, out, (o * total) * inner + pos * inner, len);
    pos += p.dims()[ax];
  }
  return out;
}

// Element dtype of a (possibly nested sequence/optional) static type; kUndefined if unknown.
DType innermost_dtype(const Type& t) {
  if (t.kind == Type::Kind::kTensor) return t.dtype;
  return t.elem ? innermost_dtype(*t.elem) : DType::kUndefined;
}

namespace {

DType output_elem_dtype(const KernelContext& ctx, int i) {
  const auto& outs = ctx.node().outputs;
  if (i < static_cast<int>(outs.size()) && outs[static_cast<size_t>(i)])
    return innermost_dtype(outs[static_cast<size_t>(i)]->type);
  return DType::kUndefined;
}

const RtValue& sequence_input(const KernelContext& ctx, int i) {
  const RtValue& v = ctx.input_value(i);
  if (!v.is_sequence())
    ctx.fail(ErrorKind::kBadInput, "input #" + std::to_string(i) + " should be a sequence");
  return v;
}

// A scalar (or single-element) integer position input.
int64_t position_input(const KernelContext& ctx, int i) {
  const Tensor& p = ctx.input(i);
  if (p.numel() != 1 || !is_integer(p.dtype()))
    ctx.fail(ErrorKind::kBadInput, "position should be an int32/int64 scalar, got " +
                                       std::string(dtype_name(p.dtype())) +
                                       dims_to_string(p.dims()));
  return p.get_int(0);
}

// ---- Sequence ops --------------------------------------------------------------------------

void sequence_empty_kernel(KernelContext& ctx) {
  const auto dt =
      static_cast<int32_t>(ctx.attr_int("dtype", static_cast<int64_t>(DType::kFloat32)));
  if (!dtype_is_valid(dt) || dt == 0)
    ctx.fail(ErrorKind::kInvalidModel, "invalid dtype " + std::to_string(dt));
  ctx.set_output_value(0, RtValue::make_sequence({}, static_cast<DType>(dt)));
}

void sequence_construct_kernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != ctx.input(0).dtype())
      ctx.fail(ErrorKind::kBadInput, "sequence elements must share a dtype: " +
                                         std::string(dtype_name(ctx.input(0).dtype())) + " vs " +
                                         std::string(dtype_name(t.dtype())));
    items.push_back(t);
  }
  const DType dt = items.empty() ? output_elem_dtype(ctx, 0) : items[0].dtype();
  ctx.set_output_value(0, RtValue::make_sequence(std::move(items), dt));
}

void sequence_at_kernel(KernelContext& ctx) {
  const RtValue& s = sequence_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  int64_t pos = position_input(ctx, 1);
  if (pos < -n || pos >= n)
    ctx.fail(ErrorKind::kBadInput, "position " + std::to_string(pos) +
                                       " is out of range for a sequence of length " +
                                       std::to_string(n));
  if (pos < 0) pos += n;
  ctx.set_output(0, s.sequence[static_cast<size_t>(pos)]);
}

void sequence_insert_kernel(KernelContext& ctx) {
  const RtValue& s = sequence_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  if (s.elem_dtype != DType::kUndefined && t.dtype() != s.elem_dtype)
    ctx.fail(ErrorKind::kBadInput, "inserted tensor has dtype " +
                                       std::string(dtype_name(t.dtype())) + ", sequence holds " +
                                       std::string(dtype_name(s.elem_dtype)));
  int64_t pos = n;
  if (ctx.has_input(2)) {
    pos = position_input(ctx, 2);
    if (pos < -n || pos > n)
      ctx.fail(ErrorKind::kBadInput, "insert position " + std::to_string(pos) +
                                         " is out of range [-" + std::to_string(n) + ", " +
                                         std::to_string(n) + "]");
    if (pos < 0) pos += n;
  }
  std::vector<Tensor> items = s.sequence;
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(pos), t);
  ctx.set_output_value(0, RtValue::make_sequence(std::move(items), t.dtype()));
}

void sequence_erase_kernel(KernelContext& ctx) {
  const RtValue& s = sequence_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  int64_t pos = n - 1;
  if (ctx.has_input(1)) pos = position_input(ctx, 1);
  if (n == 0 || pos < -n || pos >= n)
    ctx.fail(ErrorKind::kBadInput, "erase position " + std::to_string(pos) +
                                       " is out of range for a sequence of length " +
                                       std::to_string(n));
  if (pos < 0) pos += n;
  std::vector<Tensor> items = s.sequence;
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(pos));
  ctx.set_output_value(0, RtValue::make_sequence(std::move(items), s.elem_dtype));
}

void sequence_length_kernel(KernelContext& ctx) {
  const RtValue& s = sequence_input(ctx, 0);
  Tensor out(DType::kInt64, {});
  out.data<int64_t>()[0] = static_cast<int64_t>(s.sequence.size());
  ctx.set_output(0, std::move(out));
}

void split_to_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "cannot split a scalar");
  const int64_t dim = x.dim(static_cast<int>(axis));
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = ctx.attr_int("keepdims", 1) == 0;
  } else {
    const Tensor& split = ctx.input(1);
    if (!is_integer(split.dtype()) || split.rank() > 1)
      ctx.fail(ErrorKind::kBadInput, "split should be an integer scalar or 1-D tensor, got " +
                                         std::string(dtype_name(split.dtype())) +
                                         dims_to_string(split.dims()));
    std::vector<int64_t> v = split.to_int64_vector();
    if (split.rank() == 0) {
      const int64_t chunk = v.at(0);
      if (chunk <= 0 && dim > 0)
        ctx.fail(ErrorKind::kBadInput,
                 "split size should be positive, got " + std::to_string(chunk));
      for (int64_t p = 0; p < dim; p += chunk) sizes.push_back(std::min(chunk, dim - p));
    } else {
      int64_t sum = 0;
      for (int64_t s : v) {
        if (s < 0) ctx.fail(ErrorKind::kBadInput, "split sizes must be >= 0");
        sum += s;
      }
      if (sum != dim)
        ctx.fail(ErrorKind::kBadInput, "split sizes sum to " + std::to_string(sum) +
                                           ", expected the axis length " + std::to_string(dim));
      sizes = v;
    }
  }
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : sizes) {
    Tensor part = slice_along_axis(x, axis, start, len);
    if (squeeze) {
      std::vector<int64_t> d = part.dims();
      d.erase(d.begin() + axis);
      part = part.reshaped(d);
    }
    items.push_back(std::move(part));
    start += len;
  }
  ctx.set_output_value(0, RtValue::make_sequence(std::move(items), x.dtype()));
}

void concat_from_sequence_kernel(KernelContext& ctx) {
  const RtValue& s = sequence_input(ctx, 0);
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  ctx.set_output(0, concat_tensors(ctx, s.sequence, ctx.attr_int("axis"), new_axis));
}

void sequence_map_kernel(KernelContext& ctx) {
  const Graph& body = *ctx.attr_graph("body");
  const int n_in = ctx.num_inputs();
  if (static_cast<int>(body.inputs.size()) != n_in ||
      static_cast<int>(body.outputs.size()) != ctx.num_outputs())
    ctx.fail(ErrorKind::kInvalidModel, "body has " + std::to_string(body.inputs.size()) +
                                           " inputs and " + std::to_string(body.outputs.size()) +
                                           " outputs, node has " + std::to_string(n_in) + " and " +
                                           std::to_string(ctx.num_outputs()));
  const size_t len = sequence_input(ctx, 0).sequence.size();
  for (int i = 1; i < n_in; ++i) {
    const RtValue& v = ctx.input_value(i);
    if (v.is_sequence() && v.sequence.size() != len)
      ctx.fail(ErrorKind::kBadInput, "sequence input #" + std::to_string(i) + " has length " +
                                         std::to_string(v.sequence.size()) + ", expected " +
                                         std::to_string(len));
  }
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(ctx.num_outputs()));
  for (size_t it = 0; it < len; ++it) {
    std::vector<RtValue> args;
    for (int i = 0; i < n_in; ++i) {
      const RtValue& v = ctx.input_value(i);
      args.push_back(v.is_sequence() ? RtValue(v.sequence[it]) : v);
    }
    std::vector<RtValue> outs = ctx.run_subgraph(body, args);
    for (size_t k = 0; k < results.size(); ++k) {
      if (k >= outs.size() || !outs[k].is_tensor())
        ctx.fail(ErrorKind::kBadInput, "body output #" + std::to_string(k) + " should be a tensor");
      results[k].push_back(outs[k].tensor);
    }
  }
  for (size_t k = 0; k < results.size(); ++k) {
    DType dt = innermost_dtype(body.outputs[k]->type);
    if (!results[k].empty()) dt = results[k][0].dtype();
    if (dt == DType::kUndefined) dt = output_elem_dtype(ctx, static_cast<int>(k));
    ctx.set_output_value(static_cast<int>(k), RtValue::make_sequence(std::move(results[k]), dt));
  }
}

// ---- Optional ops --------------------------------------------------------------------------

void optional_kernel(KernelContext& ctx) {
  if (ctx.has_input(0)) {
    RtValue v = ctx.input_value(0);
    v.optional = true;
    ctx.set_output_value(0, std::move(v));
    return;
  }
  // An empty optional: its element type comes from the `type` attribute (TYPE_PROTO) when
  // given, else from the output's inferred type.
  const Attribute* type = ctx.node().attr("type");
  DType elem = type && type->kind == Attribute::Kind::kType ? innermost_dtype(type->tp) : DType::kUndefined;
  if (elem == DType::kUndefined) elem = output_elem_dtype(ctx, 0);
  ctx.set_output_value(0, RtValue::make_empty_optional(elem));
}

void optional_has_element_kernel(KernelContext& ctx) {
  Tensor out(DType::kBool, {});
  out.data<bool>()[0] = ctx.has_input(0);
  ctx.set_output(0, std::move(out));
}

void optional_get_element_kernel(KernelContext& ctx) {
  if (!ctx.has_input(0)) ctx.fail(ErrorKind::kBadInput, "the optional input is empty");
  RtValue v = ctx.input_value(0);
  v.optional = false;
  ctx.set_output_value(0, std::move(v));
}

// ---- Static inference ----------------------------------------------------------------------

Type seq_of(Type elem) { return Type::wrap(Type::Kind::kSequence, std::move(elem)); }

// The element type of a sequence-typed input; an unknown tensor type when not known.
Type seq_elem_type(const InferContext& ctx, int i) {
  const Type& t = ctx.input_type(i);
  if (t.kind == Type::Kind::kSequence && t.elem) return *t.elem;
  return Type::tensor(DType::kUndefined);
}

void infer_sequence_empty(InferContext& ctx) {
  const auto dt =
      static_cast<int32_t>(ctx.attr_int("dtype", static_cast<int64_t>(DType::kFloat32)));
  if (dtype_is_valid(dt)) ctx.set_output_type(0, seq_of(Type::tensor(static_cast<DType>(dt))));
}

void infer_sequence_construct(InferContext& ctx) {
  Type elem = ctx.input_type(0);
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (!(ctx.input_type(i) == elem)) elem.shape.reset();  // shapes differ: rank unknown
  ctx.set_output_type(0, seq_of(elem));
}

void infer_sequence_at(InferContext& ctx) { ctx.set_output_type(0, seq_elem_type(ctx, 0)); }

void infer_sequence_same(InferContext& ctx) {
  Type elem = seq_elem_type(ctx, 0);
  elem.shape.reset();  // inserting/erasing may mix shapes
  ctx.set_output_type(0, seq_of(elem));
}

void infer_sequence_length(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape::of({})));
}

void infer_split_to_sequence(InferContext& ctx) {
  ctx.set_output_type(0, seq_of(Type::tensor(ctx.input_type(0).dtype)));
}

void infer_concat_from_sequence(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(seq_elem_type(ctx, 0).dtype));
}

void infer_optional(InferContext& ctx) {
  if (ctx.has_input(0)) {
    ctx.set_output_type(0, Type::wrap(Type::Kind::kOptional, ctx.input_type(0)));
    return;
  }
  const Attribute* type = ctx.node().attr("type");
  if (type && type->kind == Attribute::Kind::kType)
    ctx.set_output_type(0, Type::wrap(Type::Kind::kOptional, type->tp));
}

void infer_optional_has_element(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::kBool, Shape::of({})));
}

void infer_optional_get_element(InferContext& ctx) {
  const Type& t = ctx.input_type(0);
  if (t.kind == Type::Kind::kOptional && t.elem) {
    ctx.set_output_type(0, *t.elem);
  } else {
    ctx.set_output_type(0, t);
  }
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
  r.add("SequenceEmpty")
      .since(11)
      .inputs(0)
      .outputs(1)
      .run(sequence_empty_kernel)
      .shape(infer_sequence_empty);
  r.add("SequenceConstruct")
      .since(11)
      .inputs(1, -1)
      .outputs(1)
      .run(sequence_construct_kernel)
      .shape(infer_sequence_construct);
  r.add("SequenceAt")
      .since(11)
      .inputs(2)
      .outputs(1)
      .run(sequence_at_kernel)
      .shape(infer_sequence_at);
  r.add("SequenceInsert")
      .since(11)
      .inputs(2, 3)
      .outputs(1)
      .run(sequence_insert_kernel)
      .shape(infer_sequence_same);
  r.add("SequenceErase")
      .since(11)
      .inputs(1, 2)
      .outputs(1)
      .run(sequence_erase_kernel)
      .shape(infer_sequence_same);
  r.add("SequenceLength")
      .since(11)
      .inputs(1)
      .outputs(1)
      .run(sequence_length_kernel)
      .shape(infer_sequence_length);
  r.add("SplitToSequence")
      .since(11)
      .inputs(1, 2)
      .outputs(1)
      .run(split_to_sequence_kernel)
      .shape(infer_split_to_sequence);
  r.add("ConcatFromSequence")
      .since(11)
      .inputs(1)
      .outputs(1)
      .run(concat_from_sequence_kernel)
      .shape(infer_concat_from_sequence);
  r.add("SequenceMap").since(17).inputs(1, -1).outputs(1, -1).takes_subgraphs().run(sequence_map_kernel);
  r.add("Optional").since(15).inputs(0, 1).outputs(1).run(optional_kernel).shape(infer_optional);
  r.add("OptionalHasElement")
      .since(15)
      .inputs(0, 1)
      .outputs(1)
      .run(optional_has_element_kernel)
      .shape(infer_optional_has_element);
  r.add("OptionalGetElement")
      .since(15)
      .inputs(1)
      .outputs(1)
      .run(optional_get_element_kernel)
      .shape(infer_optional_get_element);
}

}  // namespace kiln
