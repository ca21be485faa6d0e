// einsum-to-matmul: rewrites a two-operand Einsum whose letters are each batch (both operands and
// the output), contracted (both operands only) or free (one operand and the output) into
// Transpose -> Reshape -> MatMul -> Reshape -> Transpose, leaving out the steps that change
// nothing. "bhqd,bhkd->bhqk" becomes one Transpose of the second operand and a batched MatMul,
// which the engines run on the GEMM kernels instead of the reference Einsum loop.
// Requires: static shapes (run after shape-inference), float32/float64 operands, no ellipsis,
// no letter repeated within a term, equal sizes of a letter in both operands. Anything else stays.
// Applies in every graph, If/Loop/Scan bodies included.
// Guarantees: the same values up to summation order.
// Tests: tests/pass/golden/einsum-to-matmul/*.kir
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>

#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

struct Parsed {
  std::string a, b, out;
};

std::optional<Parsed> parse_equation(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find('.') != std::string::npos) return std::nullopt;
  Parsed p;
  const size_t arrow = eq.find("->");
  const std::string lhs = arrow == std::string::npos ? eq : eq.substr(0, arrow);
  const size_t comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos) return std::nullopt;
  p.a = lhs.substr(0, comma);
  p.b = lhs.substr(comma + 1);
  if (arrow != std::string::npos) {
    p.out = eq.substr(arrow + 2);
  } else {  // implicit output: the letters that appear once, in alphabetical order
    for (char c = 'A'; c <= 'z'; ++c)
      if (std::count(lhs.begin(), lhs.end(), c) == 1) p.out += c;
  }
  for (const std::string* t : {&p.a, &p.b, &p.out})
    for (char c : *t)
      if (!std::isalpha(static_cast<unsigned char>(c)) || std::count(t->begin(), t->end(), c) != 1) return std::nullopt;
  return p;
}

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

std::optional<std::vector<int64_t>> static_dims(const Value* v) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape || !v->type.shape->is_static()) return std::nullopt;
  return v->type.shape->sizes();
}

// The steps of the rewrite, each typed and named after the Einsum's output.
class Builder {
 public:
  Builder(GraphEditor& ed, DType dt, const std::string& base) : ed_(ed), dt_(dt), base_(base) {}

  // x permuted by `perm` (nothing when it is the identity).
  Value* transpose(Value* x, std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
    std::vector<int64_t> id(perm.size());
    std::iota(id.begin(), id.end(), 0);
    if (perm == id) return x;
    std::vector<int64_t> out;
    for (int64_t p : perm) out.push_back(dims[static_cast<size_t>(p)]);
    Node* t = node("Transpose", {x}, out);
    t->attrs["perm"] = Attribute::make_ints(perm);
    dims = out;
    return t->outputs[0];
  }
  // x reshaped to `to` (nothing when it already has that shape).
  Value* reshape(Value* x, std::vector<int64_t>& dims, const std::vector<int64_t>& to) {
    if (dims == to) return x;
    dims = to;
    return node("Reshape", {x, ed_.add_ints(to, base_ + "_shape")}, to)->outputs[0];
  }
  Node* node(const std::string& op, std::vector<Value*> ins, const std::vector<int64_t>& dims) {
    return ed_.add_node(op, std::move(ins), Type::tensor(dt_, Shape::of(dims)), base_);
  }

 private:
  GraphEditor& ed_;
  DType dt_;
  std::string base_;
};

bool rewrite(GraphEditor& ed, Node& n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const Attribute* eq_attr = n.attr("equation");
  if (!eq_attr || eq_attr->kind != Attribute::Kind::kString) return false;
  std::optional<Parsed> p = parse_equation(eq_attr->s);
  Value *a = n.inputs[0], *b = n.inputs[1], *out = n.outputs[0];
  std::optional<std::vector<int64_t>> ad = static_dims(a), bd = static_dims(b);
  if (!p || !ad || !bd || !out || ad->size() != p->a.size() || bd->size() != p->b.size()) return false;
  const DType dt = a->type.dtype;
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || b->type.dtype != dt) return false;
  // Letter classes and sizes.
  std::string batch, contract, m, nn;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < p->a.size(); ++i) size[p->a[i]] = (*ad)[i];
  for (size_t i = 0; i < p->b.size(); ++i) {
    const char c = p->b[i];
    if (size.count(c) && size[c] != (*bd)[i]) return false;
    size[c] = (*bd)[i];
  }
  for (char c : p->out) {
    if (!has(p->a, c) && !has(p->b, c)) return false;
    (has(p->a, c) && has(p->b, c) ? batch : has(p->a, c) ? m : nn) += c;
  }
  for (char c : p->a) {
    if (has(p->b, c) && !has(p->out, c)) contract += c;
    if (!has(p->b, c) && !has(p->out, c)) return false;  // summed over one operand only
  }
  for (char c : p->b)
    if (!has(p->a, c) && !has(p->out, c)) return false;
  auto product = [&](const std::string& s) {
    int64_t v = 1;
    for (char c : s) v *= size[c];
    return v;
  };
  auto dims_of = [&](const std::string& s) {
    std::vector<int64_t> d;
    for (char c : s) d.push_back(size[c]);
    return d;
  };
  auto perm_to = [](const std::string& from, const std::string& to) {
    std::vector<int64_t> perm;
    for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
    return perm;
  };
  Builder build(ed, dt, out->name + "_mm");
  std::vector<int64_t> da = *ad, db = *bd;
  std::vector<int64_t> bdims = dims_of(batch);
  // A as [batch..., M, K], B as [batch..., K, N].
  Value* x = build.transpose(a, da, perm_to(p->a, batch + m + contract));
  std::vector<int64_t> to = bdims;
  to.push_back(product(m));
  to.push_back(product(contract));
  x = build.reshape(x, da, to);
  Value* y = build.transpose(b, db, perm_to(p->b, batch + contract + nn));
  to = bdims;
  to.push_back(product(contract));
  to.push_back(product(nn));
  y = build.reshape(y, db, to);
  std::vector<int64_t> dm = bdims;
  dm.push_back(product(m));
  dm.push_back(product(nn));
  Value* mm = build.node("MatMul", {x, y}, dm)->outputs[0];
  // Back to [batch..., m..., n...], then to the output's letter order.
  std::vector<int64_t> split = bdims, md = dims_of(m), nd = dims_of(nn);
  split.insert(split.end(), md.begin(), md.end());
  split.insert(split.end(), nd.begin(), nd.end());
  Value* r = build.reshape(mm, dm, split);
  r = build.transpose(r, dm, perm_to(batch + m + nn, p->out));
  ed.replace_all_uses(out, r);
  return true;
}

bool run(Model& m, PassContext&) {
  return rewrite_graphs(*m.graph, [](Graph& g) {
    GraphEditor ed(g);
    return ed.rewrite_nodes("Einsum", [&](Node& n) { return rewrite(ed, n); });
  });
}

}  // namespace

PassInfo einsum_to_matmul_pass() {
  return {"einsum-to-matmul", "rewrite two-operand Einsums into Transpose/Reshape/MatMul", run};
}

}  // namespace kiln
