// Schedule primitives (TVM style): each stage keeps its root axes, a leaf loop order and the
// split/fuse/reorder relations between loops; compute_at/compute_inline/cache_* change where
// and into what a stage computes. Every public primitive appends one TraceStep, so a schedule
// can be printed, parsed and replayed. Lowering: lower.cc. Tests: tests/te/test_te.cc.
#include <algorithm>
#include <mutex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "te/te_internal.h"

namespace kiln::te {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::kUsage, "te schedule: " + msg); }

int64_t parse_int(const std::string& s) {
  size_t pos = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos != s.size() || s.empty()) fail("expected an integer, got '" + s + "'");
  return v;
}

std::mutex& intrinsic_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, TensorIntrinsic>& intrinsics() {
  static std::map<std::string, TensorIntrinsic> r;
  return r;
}

}  // namespace

void register_tensor_intrinsic(const std::string& name, TensorIntrinsic contract) {
  std::lock_guard<std::mutex> lock(intrinsic_mutex());
  intrinsics()[name] = std::move(contract);
}

const TensorIntrinsic* find_tensor_intrinsic(const std::string& name) {
  std::lock_guard<std::mutex> lock(intrinsic_mutex());
  auto it = intrinsics().find(name);
  return it == intrinsics().end() ? nullptr : &it->second;
}

// ---- Impl -----------------------------------------------------------------------------------

Stage& Schedule::Impl::stage(const std::string& name) {
  for (Stage& s : stages)
    if (s.name == name) return s;
  fail("no stage named '" + name + "'");
}

Stage* Schedule::Impl::find_stage_of(const TensorNode* t) {
  for (Stage& s : stages)
    if (s.tensor.get() == t) return &s;
  return nullptr;
}

std::string Schedule::Impl::unique_stage_name(const std::string& base) const {
  auto taken = [&](const std::string& n) {
    for (const Stage& s : stages)
      if (s.name == n) return true;
    return false;
  };
  if (!taken(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + std::to_string(i);
    if (!taken(n)) return n;
  }
}

Stage Schedule::Impl::make_stage(const std::string& name, const Tensor& t, std::vector<IterVar> axes,
                                 std::vector<IterVar> reduce_axes, Expr body) {
  Stage s;
  s.name = name;
  s.tensor = t;
  s.axes = std::move(axes);
  s.reduce_axes = std::move(reduce_axes);
  s.body = std::move(body);
  auto add = [&](const std::string& loop, bool reduce) {
    s.leaves.push_back(loop);
    s.loops[loop] = LoopInfo{loop, reduce, tir::ForKind::kSerial, tir::make_var(name + "." + loop)};
  };
  for (size_t i = 0; i < s.axes.size(); ++i) add("i" + std::to_string(i), false);
  for (size_t i = 0; i < s.reduce_axes.size(); ++i) add("r" + std::to_string(i), true);
  return s;
}

namespace {

size_t leaf_index(const Stage& s, const std::string& loop) {
  auto it = std::find(s.leaves.begin(), s.leaves.end(), loop);
  if (it == s.leaves.end()) fail("stage " + s.name + " has no loop '" + loop + "' in its current loop nest");
  return static_cast<size_t>(it - s.leaves.begin());
}

}  // namespace

void Schedule::Impl::split(const std::string& stage_name, const std::string& loop, int64_t factor) {
  Stage& s = stage(stage_name);
  const size_t i = leaf_index(s, loop);
  if (factor <= 0) fail("split factor must be positive, got " + std::to_string(factor));
  const bool reduce = s.loops[loop].reduce;
  const std::string outer = loop + ".outer", inner = loop + ".inner";
  if (s.loops.count(outer) || s.loops.count(inner)) fail("loop " + loop + " of " + s.name + " is already split");
  s.loops[outer] = LoopInfo{outer, reduce, tir::ForKind::kSerial, tir::make_var(s.name + "." + outer)};
  s.loops[inner] = LoopInfo{inner, reduce, tir::ForKind::kSerial, tir::make_var(s.name + "." + inner)};
  s.leaves[i] = outer;
  s.leaves.insert(s.leaves.begin() + static_cast<std::ptrdiff_t>(i) + 1, inner);
  Relation r{Relation::kSplit, loop, outer, inner, "", factor, {}};
  s.relations.push_back(r);
}

void Schedule::Impl::reorder(const std::string& stage_name, const std::vector<std::string>& order) {
  Stage& s = stage(stage_name);
  std::vector<size_t> pos;
  for (const std::string& l : order) {
    size_t p = leaf_index(s, l);
    if (std::find(pos.begin(), pos.end(), p) != pos.end()) fail("reorder names loop " + l + " twice");
    pos.push_back(p);
  }
  std::sort(pos.begin(), pos.end());
  for (size_t k = 0; k < order.size(); ++k) s.leaves[pos[k]] = order[k];
  Relation r{Relation::kReorder, "", "", "", "", 0, s.leaves};
  s.relations.push_back(r);
}

void Schedule::Impl::fuse(const std::string& stage_name, const std::string& outer, const std::string& inner) {
  Stage& s = stage(stage_name);
  const size_t i = leaf_index(s, outer), j = leaf_index(s, inner);
  if (j != i + 1) fail("fuse needs adjacent loops " + outer + " and " + inner + " (outer first) in " + s.name);
  if (s.loops[outer].reduce != s.loops[inner].reduce)
    fail("cannot fuse a spatial and a reduction loop in " + s.name);
  const std::string fused = outer + "." + inner + ".fused";
  s.loops[fused] = LoopInfo{fused, s.loops[outer].reduce, tir::ForKind::kSerial, tir::make_var(s.name + "." + fused)};
  s.leaves[i] = fused;
  s.leaves.erase(s.leaves.begin() + static_cast<std::ptrdiff_t>(j));
  Relation r{Relation::kFuse, "", outer, inner, fused, 0, {}};
  s.relations.push_back(r);
}

void Schedule::Impl::set_kind(const std::string& stage_name, const std::string& loop, tir::ForKind kind) {
  Stage& s = stage(stage_name);
  leaf_index(s, loop);
  LoopInfo& l = s.loops[loop];
  if (l.reduce && kind != tir::ForKind::kUnrolled)
    fail("cannot " + std::string(tir::for_kind_name(kind)) + " reduction loop " + loop + " of " + s.name);
  l.kind = kind;
}

// ---- Schedule -------------------------------------------------------------------------------

Schedule::Schedule(std::vector<Tensor> outputs) : impl_(std::make_shared<Impl>()) {
  impl_->outputs = outputs;
  std::set<const TensorNode*> seen;
  std::function<void(const Tensor&)> visit = [&](const Tensor& t) {
    if (!seen.insert(t.get()).second) return;
    for (const Tensor& in : t->inputs) visit(in);
    if (t->kind != OpKind::kCompute) return;
    for (const Stage& s : impl_->stages)
      if (s.name == t->name) fail("two computes are named '" + t->name + "'");
    impl_->stages.push_back(impl_->make_stage(t->name, t, t->axes, t->reduce_axes, t->body));
  };
  for (const Tensor& t : outputs) visit(t);
}

void Schedule::split(const std::string& stage, const std::string& loop, int64_t factor) {
  impl_->split(stage, loop, factor);
  trace_.push_back({"split", {stage, loop, std::to_string(factor)}});
}

void Schedule::tile(const std::string& stage, const std::string& x, const std::string& y, int64_t fx,
                    int64_t fy) {
  impl_->split(stage, x, fx);
  impl_->split(stage, y, fy);
  impl_->reorder(stage, {x + ".outer", y + ".outer", x + ".inner", y + ".inner"});
  trace_.push_back({"tile", {stage, x, y, std::to_string(fx), std::to_string(fy)}});
}

void Schedule::reorder(const std::string& stage, const std::vector<std::string>& order) {
  impl_->reorder(stage, order);
  std::vector<std::string> args{stage};
  args.insert(args.end(), order.begin(), order.end());
  trace_.push_back({"reorder", args});
}

void Schedule::fuse(const std::string& stage, const std::string& outer, const std::string& inner) {
  impl_->fuse(stage, outer, inner);
  trace_.push_back({"fuse", {stage, outer, inner}});
}

void Schedule::vectorize(const std::string& stage, const std::string& loop) {
  impl_->set_kind(stage, loop, tir::ForKind::kVectorized);
  trace_.push_back({"vectorize", {stage, loop}});
}

void Schedule::unroll(const std::string& stage, const std::string& loop) {
  impl_->set_kind(stage, loop, tir::ForKind::kUnrolled);
  trace_.push_back({"unroll", {stage, loop}});
}

void Schedule::parallel(const std::string& stage, const std::string& loop) {
  impl_->set_kind(stage, loop, tir::ForKind::kParallel);
  trace_.push_back({"parallel", {stage, loop}});
}

void Schedule::compute_at(const std::string& stage, const std::string& target_stage, const std::string& loop) {
  Stage& s = impl_->stage(stage);
  Stage& t = impl_->stage(target_stage);
  if (&s == &t) fail("compute_at of " + stage + " at itself");
  if (s.inlined) fail("compute_at of inlined stage " + stage);
  leaf_index(t, loop);
  for (const Tensor& o : impl_->outputs)
    if (o == s.tensor) fail("compute_at of output " + stage);
  s.attach_stage = target_stage;
  s.attach_loop = loop;
  trace_.push_back({"compute_at", {stage, target_stage, loop}});
}

void Schedule::compute_inline(const std::string& stage) {
  Stage& s = impl_->stage(stage);
  if (!s.reduce_axes.empty() || detail::is_reduce(s.body)) fail("cannot inline reduction " + stage);
  for (const Tensor& o : impl_->outputs)
    if (o == s.tensor) fail("cannot inline output " + stage);
  const tir::BufferNode* buf = detail::buffer_of(s.tensor).get();
  const std::vector<IterVar> axes = s.axes;
  const Expr body = s.body;
  for (Stage& c : impl_->stages) {
    if (&c == &s) continue;
    c.body = detail::rewrite_loads(c.body, [&](const Expr& load) -> Expr {
      if (load->buffer.get() != buf) return load;
      detail::VarMap m;
      for (size_t d = 0; d < axes.size(); ++d) m[axes[d]->var.get()] = load->operands[d];
      return detail::substitute(body, m);
    });
  }
  s.inlined = true;
  trace_.push_back({"compute_inline", {stage}});
}

namespace {

// Fresh root axes for a new stage over `shape`, named "<name>.i<d>".
std::vector<IterVar> fresh_axes(const std::string& name, const std::vector<Expr>& shape) {
  std::vector<IterVar> axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    auto iv = std::make_shared<IterVarNode>();
    iv->var = tir::make_var(name + ".i" + std::to_string(d));
    iv->extent = shape[d];
    axes.push_back(iv);
  }
  return axes;
}

std::vector<Expr> vars_of(const std::vector<IterVar>& axes) {
  std::vector<Expr> v;
  for (const IterVar& a : axes) v.push_back(a->var);
  return v;
}

}  // namespace

std::string Schedule::cache_read(const std::string& tensor, const std::string& reader) {
  Stage& r = impl_->stage(reader);
  Tensor src;
  for (const Tensor& t : detail::tensors_read(r.body))
    if (t->name == tensor) src = t;
  if (!src) fail("stage " + reader + " does not read a tensor named '" + tensor + "'");
  const std::string name = impl_->unique_stage_name(tensor + ".local");
  std::vector<IterVar> axes = fresh_axes(name, src->shape);
  Expr body = access(src, vars_of(axes));
  TensorNode n;
  n.name = name;
  n.dtype = src->dtype;
  n.shape = src->shape;
  n.kind = OpKind::kCompute;
  n.axes = axes;
  n.body = body;
  n.inputs = {src};
  Tensor cached = detail::make_tensor(std::move(n), "local");
  const tir::Buffer cbuf = detail::buffer_of(cached);
  const tir::BufferNode* sbuf = detail::buffer_of(src).get();
  r.body = detail::rewrite_loads(r.body, [&](const Expr& load) -> Expr {
    if (load->buffer.get() != sbuf) return load;
    return tir::load(cbuf, load->operands);
  });
  Stage s = impl_->make_stage(name, cached, axes, {}, body);
  impl_->stages.push_back(std::move(s));
  trace_.push_back({"cache_read", {tensor, reader}});
  return name;
}

std::string Schedule::cache_write(const std::string& stage) {
  Stage& s0 = impl_->stage(stage);
  if (!s0.relations.empty() || !s0.attach_stage.empty())
    fail("cache_write of " + stage + " must come before other primitives on it");
  const std::string name = impl_->unique_stage_name(stage + ".local");
  std::vector<IterVar> axes = fresh_axes(name, s0.tensor->shape);
  detail::VarMap m;
  for (size_t d = 0; d < axes.size(); ++d) m[s0.axes[d]->var.get()] = axes[d]->var;
  std::vector<IterVar> raxes;
  for (size_t d = 0; d < s0.reduce_axes.size(); ++d) {
    auto iv = std::make_shared<IterVarNode>(*s0.reduce_axes[d]);
    iv->var = tir::make_var(name + ".r" + std::to_string(d));
    m[s0.reduce_axes[d]->var.get()] = iv->var;
    raxes.push_back(iv);
  }
  Expr body = detail::substitute(s0.body, m);
  TensorNode n;
  n.name = name;
  n.dtype = s0.tensor->dtype;
  n.shape = s0.tensor->shape;
  n.kind = OpKind::kCompute;
  n.axes = axes;
  n.reduce_axes = raxes;
  n.body = body;
  n.inputs = detail::tensors_read(body);
  Tensor local = detail::make_tensor(std::move(n), "local");
  Stage ls = impl_->make_stage(name, local, axes, raxes, body);
  // The original stage becomes the copy-out of the local result.
  Stage copy = impl_->make_stage(s0.name, s0.tensor, s0.axes, {}, access(local, vars_of(s0.axes)));
  Stage& s = impl_->stage(stage);
  s = std::move(copy);
  impl_->stages.push_back(std::move(ls));
  trace_.push_back({"cache_write", {stage}});
  return name;
}

void Schedule::tensorize(const std::string& stage, const std::string& loop, const std::string& intrinsic) {
  Stage& s = impl_->stage(stage);
  leaf_index(s, loop);
  if (!find_tensor_intrinsic(intrinsic)) fail("tensorize: no tensor intrinsic named '" + intrinsic + "'");
  s.tensorize_loop = loop;
  s.tensorize_intrinsic = intrinsic;
  trace_.push_back({"tensorize", {stage, loop, intrinsic}});
}

void Schedule::replay(const std::vector<TraceStep>& trace) {
  for (const TraceStep& st : trace) {
    const auto& a = st.args;
    auto need = [&](size_t n) {
      if (a.size() != n) fail("trace step " + st.primitive + " needs " + std::to_string(n) + " arguments");
    };
    const std::string& p = st.primitive;
    if (p == "split") {
      need(3);
      split(a[0], a[1], parse_int(a[2]));
    } else if (p == "tile") {
      need(5);
      tile(a[0], a[1], a[2], parse_int(a[3]), parse_int(a[4]));
    } else if (p == "reorder") {
      if (a.empty()) fail("trace step reorder needs a stage");
      reorder(a[0], std::vector<std::string>(a.begin() + 1, a.end()));
    } else if (p == "fuse") {
      need(3);
      fuse(a[0], a[1], a[2]);
    } else if (p == "vectorize") {
      need(2);
      vectorize(a[0], a[1]);
    } else if (p == "unroll") {
      need(2);
      unroll(a[0], a[1]);
    } else if (p == "parallel") {
      need(2);
      parallel(a[0], a[1]);
    } else if (p == "compute_at") {
      need(3);
      compute_at(a[0], a[1], a[2]);
    } else if (p == "compute_inline") {
      need(1);
      compute_inline(a[0]);
    } else if (p == "cache_read") {
      need(2);
      cache_read(a[0], a[1]);
    } else if (p == "cache_write") {
      need(1);
      cache_write(a[0]);
    } else if (p == "tensorize") {
      need(3);
      tensorize(a[0], a[1], a[2]);
    } else {
      fail("unknown trace primitive '" + p + "'");
    }
  }
}

// ---- trace text: one step per line, `primitive arg arg ...`; args with spaces, quotes or
// backslashes (or empty ones) are double-quoted with backslash escapes. -----------------------

namespace {

std::string quote(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s) plain = plain && !std::isspace(static_cast<unsigned char>(c)) && c != '"' && c != '\\' && c != '#';
  if (plain) return s;
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

}  // namespace

std::string to_string(const std::vector<TraceStep>& trace) {
  std::string out;
  for (const TraceStep& st : trace) {
    out += quote(st.primitive);
    for (const std::string& a : st.args) out += " " + quote(a);
    out += "\n";
  }
  return out;
}

std::vector<TraceStep> parse_trace(const std::string& text) {
  std::vector<TraceStep> steps;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
      const char c = line[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      if (c == '#') break;  // comment to end of line
      std::string w;
      if (c == '"') {
        ++i;
        bool closed = false;
        while (i < line.size()) {
          char d = line[i++];
          if (d == '"') {
            closed = true;
            break;
          }
          if (d == '\\' && i < line.size()) {
            d = line[i++];
            if (d == 'n') d = '\n';
          }
          w += d;
        }
        if (!closed) fail("trace line " + std::to_string(line_no) + ": unterminated quote");
      } else {
        while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) w += line[i++];
      }
      words.push_back(std::move(w));
    }
    if (words.empty()) continue;
    TraceStep st;
    st.primitive = words[0];
    st.args.assign(words.begin() + 1, words.end());
    steps.push_back(std::move(st));
  }
  return steps;
}

}  // namespace kiln::te
