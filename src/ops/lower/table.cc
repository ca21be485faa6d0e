// The lowering table (op -> TE lowering) and helpers shared by the lowering families.
#include <algorithm>
#include <map>
#include <mutex>

#include "ops/lowering.h"

namespace kiln {

std::optional<std::vector<int64_t>> LowerContext::constant_ints(int i) const {
  const Tensor* t = constant(i);
  if (!t || !is_integer(t->dtype())) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t k = 0; k < t->numel(); ++k) out[static_cast<size_t>(k)] = static_cast<int64_t>(t->get_double(k));
  return out;
}

std::vector<tir::Expr> LowerContext::in_dims(int i) const {
  const size_t k = static_cast<size_t>(i);
  if (k < input_dims.size() && input_dims[k].size() == in_shape(i).size()) return input_dims[k];
  return lower::to_exprs(in_shape(i));
}

std::vector<tir::Expr> LowerContext::out_dims(int i) const {
  const size_t k = static_cast<size_t>(i);
  if (k < output_dims.size() && output_dims[k].size() == out_shape(i).size()) return output_dims[k];
  return lower::to_exprs(out_shape(i));
}

LowerFn find_lowering(const std::string& domain, const std::string& op_type) {
  static const std::map<std::pair<std::string, std::string>, LowerFn> table = [] {
    std::vector<LoweringEntry> entries;
    add_unary_lowerings(entries);
    add_binary_lowerings(entries);
    add_injective_lowerings(entries);
    add_reduction_lowerings(entries);
    add_pool_lowerings(entries);
    add_resize_lowerings(entries);
    add_quantize_lowerings(entries);
    std::map<std::pair<std::string, std::string>, LowerFn> m;
    for (const auto& e : entries) m[{e.domain, e.op}] = e.fn;
    return m;
  }();
  auto it = table.find({canonical_domain(domain), op_type});
  return it == table.end() ? nullptr : it->second;
}

namespace lower {

std::vector<tir::Expr> to_exprs(const std::vector<int64_t>& dims) {
  std::vector<tir::Expr> out;
  for (int64_t d : dims) out.push_back(tir::int_imm(d));
  return out;
}

tir::Expr mul(const tir::Expr& a, const tir::Expr& b) {
  int64_t x = 0, y = 0;
  const bool ca = tir::is_const_int(a, &x), cb = tir::is_const_int(b, &y);
  if (ca && cb) return tir::int_imm(x * y);
  if (ca && x == 1) return b;
  if (cb && y == 1) return a;
  return a * b;
}

tir::Expr product(const std::vector<tir::Expr>& dims, size_t from, size_t to) {
  tir::Expr p = tir::int_imm(1);
  for (size_t k = from; k < std::min(to, dims.size()); ++k) p = mul(p, dims[k]);
  return p;
}

tir::Expr as_float(DType d, const tir::Expr& n) {
  int64_t c = 0;
  if (tir::is_const_int(n, &c)) return constant(d, static_cast<double>(c));
  return tir::cast(scalar_type(d), n);
}

tir::DataType scalar_type(DType d) { return {d, 1}; }

bool supported_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: case DType::kFloat64: case DType::kInt32: case DType::kInt64:
    case DType::kInt8: case DType::kUInt8: case DType::kBool:
      return true;
    default:
      return false;
  }
}

std::vector<tir::Expr> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                       const std::vector<tir::Expr>& idx) {
  std::vector<tir::Expr> r;
  size_t off = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k)
    r.push_back(in[k] == 1 && out[k + off] != 1 ? tir::int_imm(0) : idx[k + off]);
  return r;
}

tir::Expr constant(DType d, double v) {
  if (is_float(d)) return tir::float_imm(v, scalar_type(d));
  return tir::int_imm(static_cast<int64_t>(v), scalar_type(d));
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t norm_axis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return axis < 0 || axis >= std::max<int64_t>(rank, 1) ? -1 : axis;
}

}  // namespace lower
}  // namespace kiln
