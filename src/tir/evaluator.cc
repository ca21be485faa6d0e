// The reference TIR interpreter (see evaluator.h). Values are vectors of lanes held as int64_t
// (integers, bool) or double (floats, rounded to f32 after each f32 op).
#include "tir/evaluator.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "tir/printer.h"
#include "tir/scalar_ops.h"

namespace kiln::tir {
namespace {

struct Val {
  DataType t;
  std::vector<int64_t> i;  // integers and bool
  std::vector<double> f;   // floats
  bool is_float() const { return t.is_float(); }
  int lanes() const { return t.lanes; }
};

Val make_int(DataType t) { return Val{t, std::vector<int64_t>(t.lanes), {}}; }
Val make_float(DataType t) { return Val{t, {}, std::vector<double>(t.lanes)}; }
Val make_val(DataType t) { return t.is_float() ? make_float(t) : make_int(t); }

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::kUnsupported, "tir evaluator: " + what);
}

void check_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: case DType::kFloat64: case DType::kBool: case DType::kInt8:
    case DType::kUInt8: case DType::kInt16: case DType::kUInt16: case DType::kInt32:
    case DType::kUInt32: case DType::kInt64: case DType::kUInt64:
      return;
    default: fail(std::string("unsupported element type ") + std::string(dtype_name(d)));
  }
}

template <typename T>
T read_as(const void* p, int64_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + off * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void write_as(void* p, int64_t off, T v) {
  std::memcpy(static_cast<char*>(p) + off * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

void read_elem(DType d, const void* p, int64_t off, Val& out, int lane) {
  switch (d) {
    case DType::kFloat32: out.f[lane] = read_as<float>(p, off); return;
    case DType::kFloat64: out.f[lane] = read_as<double>(p, off); return;
    case DType::kBool: out.i[lane] = read_as<uint8_t>(p, off) != 0; return;
    case DType::kInt8: out.i[lane] = read_as<int8_t>(p, off); return;
    case DType::kUInt8: out.i[lane] = read_as<uint8_t>(p, off); return;
    case DType::kInt16: out.i[lane] = read_as<int16_t>(p, off); return;
    case DType::kUInt16: out.i[lane] = read_as<uint16_t>(p, off); return;
    case DType::kInt32: out.i[lane] = read_as<int32_t>(p, off); return;
    case DType::kUInt32: out.i[lane] = read_as<uint32_t>(p, off); return;
    case DType::kInt64: case DType::kUInt64: out.i[lane] = read_as<int64_t>(p, off); return;
    default: check_dtype(d);
  }
}

void write_elem(DType d, void* p, int64_t off, const Val& v, int lane) {
  switch (d) {
    case DType::kFloat32: write_as<float>(p, off, static_cast<float>(v.f[lane])); return;
    case DType::kFloat64: write_as<double>(p, off, v.f[lane]); return;
    case DType::kBool: write_as<uint8_t>(p, off, v.i[lane] != 0); return;
    case DType::kInt8: write_as<int8_t>(p, off, static_cast<int8_t>(v.i[lane])); return;
    case DType::kUInt8: write_as<uint8_t>(p, off, static_cast<uint8_t>(v.i[lane])); return;
    case DType::kInt16: write_as<int16_t>(p, off, static_cast<int16_t>(v.i[lane])); return;
    case DType::kUInt16: write_as<uint16_t>(p, off, static_cast<uint16_t>(v.i[lane])); return;
    case DType::kInt32: write_as<int32_t>(p, off, static_cast<int32_t>(v.i[lane])); return;
    case DType::kUInt32: write_as<uint32_t>(p, off, static_cast<uint32_t>(v.i[lane])); return;
    case DType::kInt64: case DType::kUInt64: write_as<int64_t>(p, off, v.i[lane]); return;
    default: check_dtype(d);
  }
}

double call_float(const std::string& n, DType t, const std::vector<double>& a) {
  const bool f32 = t == DType::kFloat32;
  auto un = [&](float (*ff)(float), double (*fd)(double)) {
    return f32 ? static_cast<double>(ff(static_cast<float>(a[0]))) : fd(a[0]);
  };
  auto need = [&](size_t k) {
    if (a.size() != k) fail("intrinsic " + n + " takes " + std::to_string(k) + " arguments");
  };
  if (n == "pow" || n == "fmod" || n == "atan2" || n == "fma" || n == "min" || n == "max" || n == "div_exact") {
    if (n == "fma") {
      need(3);
      return f32 ? std::fma(static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(a[2]))
                 : std::fma(a[0], a[1], a[2]);
    }
    need(2);
    float x = static_cast<float>(a[0]), y = static_cast<float>(a[1]);
    if (n == "pow") return f32 ? std::pow(x, y) : std::pow(a[0], a[1]);
    if (n == "div_exact") return f32 ? static_cast<double>(x / y) : a[0] / a[1];
    if (n == "fmod") return f32 ? std::fmod(x, y) : std::fmod(a[0], a[1]);
    if (n == "min") return a[0] < a[1] ? a[0] : a[1];
    if (n == "max") return a[0] > a[1] ? a[0] : a[1];
    return f32 ? std::atan2(x, y) : std::atan2(a[0], a[1]);
  }
  need(1);
  if (n == "exp") return un(std::exp, std::exp);
  if (n == "exp2") return un(std::exp2, std::exp2);
  if (n == "expm1") return un(std::expm1, std::expm1);
  if (n == "log") return un(std::log, std::log);
  if (n == "log2") return un(std::log2, std::log2);
  if (n == "log1p") return un(std::log1p, std::log1p);
  if (n == "sqrt") return un(std::sqrt, std::sqrt);
  if (n == "tanh") return un(std::tanh, std::tanh);
  if (n == "erf") return un(std::erf, std::erf);
  if (n == "sin") return un(std::sin, std::sin);
  if (n == "cos") return un(std::cos, std::cos);
  if (n == "tan") return un(std::tan, std::tan);
  if (n == "asin") return un(std::asin, std::asin);
  if (n == "acos") return un(std::acos, std::acos);
  if (n == "atan") return un(std::atan, std::atan);
  if (n == "sinh") return un(std::sinh, std::sinh);
  if (n == "cosh") return un(std::cosh, std::cosh);
  if (n == "floor") return un(std::floor, std::floor);
  if (n == "ceil") return un(std::ceil, std::ceil);
  if (n == "trunc") return un(std::trunc, std::trunc);
  if (n == "round") return un(std::nearbyint, std::nearbyint);  // half to even
  if (n == "abs" || n == "fabs") return un(std::fabs, std::fabs);
  if (n == "neg") return -a[0];
  if (n == "rsqrt") return f32 ? 1.0f / std::sqrt(static_cast<float>(a[0])) : 1.0 / std::sqrt(a[0]);
  if (n == "sigmoid")
    return f32 ? 1.0f / (1.0f + std::exp(-static_cast<float>(a[0]))) : 1.0 / (1.0 + std::exp(-a[0]));
  fail("unknown float intrinsic " + n);
}

int64_t call_int(const std::string& n, DType t, const std::vector<int64_t>& a) {
  if (n == "abs" && a.size() == 1) return scalar::wrap_int(a[0] < 0 ? -a[0] : a[0], t);
  if (n == "neg" && a.size() == 1) return scalar::wrap_int(-a[0], t);
  if (n == "min" && a.size() == 2) return a[0] < a[1] ? a[0] : a[1];
  if (n == "max" && a.size() == 2) return a[0] > a[1] ? a[0] : a[1];
  fail("unknown integer intrinsic " + n);
}

class Evaluator {
 public:
  void bind_buffer(const BufferNode* b, void* data) {
    check_dtype(b->dtype);
    Buf& buf = bufs_[b];
    buf.data = data;
    buf.dims.clear();
    for (const Expr& d : b->shape) buf.dims.push_back(scalar_int(d));
    buf.numel = 1;
    for (int64_t d : buf.dims) buf.numel *= d;
  }
  void bind_var(const Expr& v, int64_t value) {
    Val x = make_int(v->type);
    x.i[0] = scalar::wrap_int(value, v->type.dtype);
    vars_[v.get()] = x;
  }

  void run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        int64_t mn = scalar_int(s->min), ext = scalar_int(s->extent);
        for (int64_t i = mn; i < mn + ext; ++i) {
          bind_var(s->var, i);
          run(s->body);
        }
        vars_.erase(s->var.get());
        return;
      }
      case StmtKind::kLetStmt:
        vars_[s->var.get()] = eval(s->value);
        run(s->body);
        vars_.erase(s->var.get());
        return;
      case StmtKind::kStore: {
        Val v = eval(s->value);
        std::vector<int64_t> offs = offsets(s->buffer.get(), s->indices, v.lanes());
        const Buf& b = bufs_.at(s->buffer.get());
        for (int l = 0; l < v.lanes(); ++l) write_elem(s->buffer->dtype, b.data, offs[l], v, l);
        return;
      }
      case StmtKind::kAllocate: {
        int64_t numel = 1;
        for (const Expr& d : s->buffer->shape) numel *= scalar_int(d);
        check_dtype(s->buffer->dtype);
        std::vector<char> storage(static_cast<size_t>(std::max<int64_t>(numel, 1)) *
                                  dtype_size(s->buffer->dtype));
        bind_buffer(s->buffer.get(), storage.data());
        run(s->body);
        bufs_.erase(s->buffer.get());
        return;
      }
      case StmtKind::kIfThenElse:
        if (scalar_int(s->cond)) {
          run(s->then_case);
        } else if (s->else_case) {
          run(s->else_case);
        }
        return;
      case StmtKind::kSeq:
        for (const Stmt& x : s->seq) run(x);
        return;
      case StmtKind::kEvaluate:
        if (s->value->kind == ExprKind::kCall && s->value->type.dtype == DType::kUndefined)
          fail("extern call " + s->value->name + " is not available in the evaluator");
        eval(s->value);
        return;
    }
  }

 private:
  struct Buf {
    void* data = nullptr;
    std::vector<int64_t> dims;
    int64_t numel = 0;
  };

  int64_t scalar_int(const Expr& e) {
    Val v = eval(e);
    if (v.is_float() || v.lanes() != 1) fail("expected a scalar integer: " + print(e));
    return v.i[0];
  }

  // Flat element offsets of an access, one per lane, checked against the buffer's extent.
  std::vector<int64_t> offsets(const BufferNode* b, const std::vector<Expr>& indices, int lanes) {
    auto it = bufs_.find(b);
    if (it == bufs_.end()) fail("buffer " + b->name + " is not bound");
    const Buf& buf = it->second;
    std::vector<int64_t> off(lanes, 0);
    const bool multi = indices.size() > 1;
    if (multi && indices.size() != buf.dims.size())
      fail("buffer " + b->name + " accessed with a wrong number of indices");
    for (size_t k = 0; k < indices.size(); ++k) {
      Val iv = eval(indices[k]);
      for (int l = 0; l < lanes; ++l) {
        int64_t x = iv.lanes() == 1 ? iv.i[0] : iv.i[l];
        if (multi && (x < 0 || x >= buf.dims[k]))
          throw_internal(__FILE__, __LINE__,
                         "tir evaluator: index " + std::to_string(x) + " out of bounds in dim " +
                             std::to_string(k) + " of " + b->name);
        off[l] = multi ? off[l] * buf.dims[k] + x : x;
      }
    }
    if (!buf.dims.empty())
      for (int64_t o : off)
        if (o < 0 || o >= buf.numel)
          throw_internal(__FILE__, __LINE__,
                         "tir evaluator: offset " + std::to_string(o) + " out of bounds of " +
                             b->name + " (" + std::to_string(buf.numel) + " elements)");
    return off;
  }

  Val eval(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm: {
        Val v = make_int(e->type);
        v.i[0] = e->int_value;
        return v;
      }
      case ExprKind::kFloatImm: {
        Val v = make_float(e->type);
        v.f[0] = scalar::round_float(e->float_value, e->type.dtype);
        return v;
      }
      case ExprKind::kVar: {
        auto it = vars_.find(e.get());
        if (it == vars_.end()) fail("unbound var " + e->name);
        return it->second;
      }
      case ExprKind::kNot: {
        Val a = eval(e->operands[0]);
        for (auto& x : a.i) x = x == 0;
        return a;
      }
      case ExprKind::kSelect: {
        Val c = eval(e->operands[0]), t = eval(e->operands[1]), f = eval(e->operands[2]);
        for (int l = 0; l < t.lanes(); ++l) {
          if (c.i[l]) continue;
          if (t.is_float()) {
            t.f[l] = f.f[l];
          } else {
            t.i[l] = f.i[l];
          }
        }
        return t;
      }
      case ExprKind::kCast: {
        Val a = eval(e->operands[0]);
        Val r = make_val(e->type);
        DType to = e->type.dtype, from = a.t.dtype;
        check_dtype(to);
        for (int l = 0; l < r.lanes(); ++l) {
          if (a.is_float() && r.is_float()) {
            r.f[l] = scalar::round_float(a.f[l], to);
          } else if (a.is_float()) {
            r.i[l] = to == DType::kBool ? a.f[l] != 0 : scalar::float_to_int(a.f[l], to);
          } else if (r.is_float()) {
            r.f[l] = scalar::int_to_float(a.i[l], from, to);
          } else {
            r.i[l] = scalar::wrap_int(a.i[l], to);
          }
        }
        return r;
      }
      case ExprKind::kLoad: {
        Val r = make_val(e->type);
        std::vector<int64_t> offs = offsets(e->buffer.get(), e->operands, r.lanes());
        const Buf& b = bufs_.at(e->buffer.get());
        for (int l = 0; l < r.lanes(); ++l) read_elem(e->buffer->dtype, b.data, offs[l], r, l);
        return r;
      }
      case ExprKind::kCall: {
        std::vector<Val> args;
        for (const Expr& a : e->operands) args.push_back(eval(a));
        Val r = make_val(e->type);
        for (int l = 0; l < r.lanes(); ++l) {
          if (r.is_float()) {
            std::vector<double> xs;
            for (const Val& a : args) xs.push_back(a.is_float() ? a.f[a.lanes() == 1 ? 0 : l] : 0.0);
            r.f[l] = scalar::round_float(call_float(e->name, e->type.dtype, xs), e->type.dtype);
          } else {
            std::vector<int64_t> xs;
            for (const Val& a : args) xs.push_back(a.is_float() ? 0 : a.i[a.lanes() == 1 ? 0 : l]);
            r.i[l] = call_int(e->name, e->type.dtype, xs);
          }
        }
        return r;
      }
      case ExprKind::kRamp: {
        Val base = eval(e->operands[0]), stride = eval(e->operands[1]);
        Val r = make_int(e->type);
        for (int l = 0; l < r.lanes(); ++l)
          r.i[l] = scalar::wrap_int(base.i[0] + stride.i[0] * l, e->type.dtype);
        return r;
      }
      case ExprKind::kBroadcast: {
        Val v = eval(e->operands[0]);
        Val r = make_val(e->type);
        for (int l = 0; l < r.lanes(); ++l) {
          if (r.is_float()) {
            r.f[l] = v.f[0];
          } else {
            r.i[l] = v.i[0];
          }
        }
        return r;
      }
      case ExprKind::kLet: {
        const ExprNode* var = e->operands[0].get();
        auto old = vars_.find(var);
        std::optional<Val> saved;
        if (old != vars_.end()) saved = old->second;
        vars_[var] = eval(e->operands[1]);
        Val r = eval(e->operands[2]);
        if (saved) {
          vars_[var] = *saved;
        } else {
          vars_.erase(var);
        }
        return r;
      }
      default: return eval_binary(e);
    }
  }

  Val eval_binary(const Expr& e) {
    Val a = eval(e->operands[0]), b = eval(e->operands[1]);
    Val r = make_val(e->type);
    DType t = a.t.dtype;
    for (int l = 0; l < r.lanes(); ++l) {
      if (a.is_float()) {
        if (scalar::is_compare(e->kind)) {
          r.i[l] = scalar::float_compare(e->kind, a.f[l], b.f[l]);
        } else {
          r.f[l] = scalar::float_binary(e->kind, t, a.f[l], b.f[l]);
        }
      } else if (!scalar::int_binary(e->kind, t, a.i[l], b.i[l], &r.i[l])) {
        fail("integer division by zero (or overflow) in " + print(e));
      }
    }
    return r;
  }

  std::unordered_map<const ExprNode*, Val> vars_;
  std::map<const BufferNode*, Buf> bufs_;
};

}  // namespace

void evaluate(const PrimFunc& f, const std::vector<void*>& buffers,
              const std::vector<int64_t>& scalars) {
  if (buffers.size() != f.buffer_params.size() || scalars.size() != f.scalar_params.size())
    throw Error(ErrorKind::kUsage, "tir evaluator: " + f.name + " takes " +
                                       std::to_string(f.buffer_params.size()) + " buffers and " +
                                       std::to_string(f.scalar_params.size()) + " scalars");
  Evaluator ev;
  for (size_t i = 0; i < scalars.size(); ++i) ev.bind_var(f.scalar_params[i], scalars[i]);
  for (size_t i = 0; i < buffers.size(); ++i) ev.bind_buffer(f.buffer_params[i].get(), buffers[i]);
  ev.run(f.body);
}

}  // namespace kiln::tir
