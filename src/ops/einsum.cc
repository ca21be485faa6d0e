// Einsum: general numpy-style einsum (implicit/explicit output, repeated labels as diagonals,
// ellipsis broadcasting) as one loop over all labels; registered from register_matmul_ops.
#include <algorithm>
#include <type_traits>

#include "ops/op_util.h"

namespace kiln {

void register_einsum_ops(OpRegistry& r);

namespace {

constexpr int kLetters = 52;  // label ids: 'A'..'Z' = 0..25, 'a'..'z' = 26..51 (ASCII order)

int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

struct EinsumPlan {
  std::vector<std::vector<int>> in_labels;  // per operand, per dim
  std::vector<int> out_labels;
  std::vector<int64_t> size;  // per label id (-1 = unused)
};

// Splits a term into letters and an optional "..." marker; returns letter ids with -2 for "...".
std::vector<int> parse_term(const AttrReader& at, const std::string& term) {
  std::vector<int> out;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0 || seen_ellipsis)
        at.fail(ErrorKind::kInvalidModel, "malformed ellipsis in einsum term '" + term + "'");
      seen_ellipsis = true;
      out.push_back(-2);
      i += 2;
      continue;
    }
    int id = letter_id(c);
    if (id < 0)
      at.fail(ErrorKind::kInvalidModel, std::string("invalid character '") + c +
                                            "' in einsum term '" + term + "'");
    out.push_back(id);
  }
  return out;
}

EinsumPlan make_plan(const AttrReader& at, std::string eq,
                     const std::vector<std::vector<int64_t>>& shapes) {
  std::string clean;
  for (char c : eq)
    if (c != ' ' && c != '\t') clean += c;
  const size_t arrow = clean.find("->");
  const std::string lhs = clean.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    const size_t len = comma == std::string::npos ? std::string::npos : comma - start;
    terms.push_back(lhs.substr(start, len));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    at.fail(ErrorKind::kInvalidModel, "einsum equation '" + eq + "' has " +
                                          std::to_string(terms.size()) +
                                          " input terms but the node has " +
                                          std::to_string(shapes.size()) + " inputs");
  EinsumPlan p;
  std::vector<std::vector<int>> parsed;
  int64_t ell_rank = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    parsed.push_back(parse_term(at, terms[t]));
    int64_t letters = 0;
    bool ell = false;
    for (int id : parsed.back()) {
      if (id == -2) ell = true;
      else ++letters;
    }
    const int64_t rank = static_cast<int64_t>(shapes[t].size());
    if (ell ? letters > rank : letters != rank)
      at.fail(ErrorKind::kBadInput, "einsum term '" + terms[t] + "' does not match input #" +
                                        std::to_string(t) + " of shape " +
                                        dims_to_string(shapes[t]));
    if (ell) ell_rank = std::max(ell_rank, rank - letters);
  }
  p.size.assign(static_cast<size_t>(kLetters + ell_rank), -1);
  std::vector<int> counts(static_cast<size_t>(kLetters), 0);
  bool any_ellipsis = false;
  for (size_t t = 0; t < parsed.size(); ++t) {
    const auto& dims = shapes[t];
    const int64_t letters = static_cast<int64_t>(
        std::count_if(parsed[t].begin(), parsed[t].end(), [](int id) { return id >= 0; }));
    const int64_t own_ell = static_cast<int64_t>(dims.size()) - letters;
    std::vector<int> labels;
    for (int id : parsed[t]) {
      if (id == -2) {
        any_ellipsis = true;
        // Ellipsis dims right-align across operands, like numpy broadcasting.
        for (int64_t j = 0; j < own_ell; ++j)
          labels.push_back(static_cast<int>(kLetters + ell_rank - own_ell + j));
      } else {
        labels.push_back(id);
        ++counts[static_cast<size_t>(id)];
      }
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      int64_t& s = p.size[static_cast<size_t>(labels[d])];
      if (s < 0 || s == 1) s = dims[d];
      else if (dims[d] != 1 && dims[d] != s)
        at.fail(ErrorKind::kBadInput, "einsum dimension mismatch for input #" + std::to_string(t) +
                                          " of shape " + dims_to_string(dims) + ": size " +
                                          std::to_string(dims[d]) + " vs " + std::to_string(s));
    }
    p.in_labels.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    std::vector<bool> used(p.size.size(), false);
    for (int id : parse_term(at, clean.substr(arrow + 2))) {
      if (id == -2) {
        for (int64_t j = 0; j < ell_rank; ++j)
          p.out_labels.push_back(static_cast<int>(kLetters + j));
        continue;
      }
      if (p.size[static_cast<size_t>(id)] < 0 || used[static_cast<size_t>(id)])
        at.fail(ErrorKind::kInvalidModel, "einsum output label in '" + eq +
                                              "' is repeated or missing from the inputs");
      used[static_cast<size_t>(id)] = true;
      p.out_labels.push_back(id);
    }
  } else {
    if (any_ellipsis) {
      for (int64_t j = 0; j < ell_rank; ++j)
        p.out_labels.push_back(static_cast<int>(kLetters + j));
    }
    for (int id = 0; id < kLetters; ++id)
      if (counts[static_cast<size_t>(id)] == 1) p.out_labels.push_back(id);
  }
  return p;
}

template <class T>
using EinAcc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

void einsum_kernel(KernelContext& ctx) {
  const int n = ctx.num_inputs();
  if (n < 1) ctx.fail(ErrorKind::kInvalidModel, "Einsum needs at least one input");
  std::vector<const Tensor*> ins;
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < n; ++i) {
    ins.push_back(&ctx.input(i));
    shapes.push_back(ins.back()->dims());
    if (ins.back()->dtype() != ins[0]->dtype())
      ctx.fail(ErrorKind::kBadInput, "Einsum inputs must share one dtype");
  }
  EinsumPlan p = make_plan(ctx, ctx.attr_string("equation", ""), shapes);
  // Loop order: output labels outermost, then the summed labels.
  std::vector<int> loop = p.out_labels;
  std::vector<bool> in_out(p.size.size(), false);
  for (int l : p.out_labels) in_out[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < p.size.size(); ++l)
    if (p.size[l] >= 0 && !in_out[l]) loop.push_back(static_cast<int>(l));
  std::vector<int64_t> loop_dims, out_dims;
  for (int l : loop) loop_dims.push_back(p.size[static_cast<size_t>(l)]);
  for (int l : p.out_labels) out_dims.push_back(p.size[static_cast<size_t>(l)]);
  int64_t inner = 1;
  for (size_t i = p.out_labels.size(); i < loop.size(); ++i) inner *= loop_dims[i];
  // Per operand, the stride of each loop label: repeated labels (diagonals) add up, broadcast
  // size-1 dims contribute 0.
  std::vector<std::vector<int64_t>> strides;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> cs = contiguous_strides(shapes[static_cast<size_t>(i)]);
    std::vector<int64_t> by_label(p.size.size(), 0);
    const auto& labels = p.in_labels[static_cast<size_t>(i)];
    for (size_t d = 0; d < labels.size(); ++d)
      if (shapes[static_cast<size_t>(i)][d] != 1 || p.size[static_cast<size_t>(labels[d])] == 1)
        by_label[static_cast<size_t>(labels[d])] += cs[d];
    std::vector<int64_t> s;
    for (int l : loop) s.push_back(by_label[static_cast<size_t>(l)]);
    strides.push_back(std::move(s));
  }
  Tensor y(ins[0]->dtype(), out_dims);
  visit_dtype(ins[0]->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16> ||
                  std::is_same_v<T, bool>) {
      ctx.fail(ErrorKind::kUnsupported, "Einsum does not support " +
                                            std::string(dtype_name(ins[0]->dtype())) + " here");
    } else {
      using Acc = EinAcc<T>;
      std::vector<const T*> src;
      for (const Tensor* t : ins) src.push_back(t->data<T>());
      T* dst = y.data<T>();
      Acc acc = Acc(0);
      for_each_broadcast(loop_dims, strides, [&](int64_t i, const int64_t* off) {
        Acc prod = Acc(1);
        for (int k = 0; k < n; ++k) {
          if constexpr (std::is_floating_point_v<T>) prod *= static_cast<double>(src[k][off[k]]);
          else prod *= static_cast<uint64_t>(static_cast<int64_t>(src[k][off[k]]));
        }
        acc += prod;
        if ((i + 1) % inner == 0) {
          dst[i / inner] = static_cast<T>(acc);
          acc = Acc(0);
        }
      });
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_einsum(InferContext& ctx) {
  std::vector<std::vector<int64_t>> shapes;
  DType dt = ctx.input_type(0).dtype;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.shape || !t.shape->is_static()) {
      ctx.set_output_type(0, Type::tensor(dt));
      return;
    }
    shapes.push_back(t.shape->sizes());
  }
  EinsumPlan p = make_plan(ctx, ctx.attr_string("equation", ""), shapes);
  std::vector<int64_t> out;
  for (int l : p.out_labels) out.push_back(p.size[static_cast<size_t>(l)]);
  ctx.set_output_type(0, Type::tensor(dt, Shape::of(out)));
}

}  // namespace

void register_einsum_ops(OpRegistry& r) {
  r.add("Einsum").since(12).inputs(1, -1).outputs(1).kind(PatternKind::kOpaque).run(einsum_kernel)
      .shape(infer_einsum).via_float();
}

}  // namespace kiln
