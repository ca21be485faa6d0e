// Text IR printer. The format is described in ir/text.h; parser.cc reads it back.
#include <charconv>
#include <cstring>

#include "core/error.h"
#include "ir/text.h"

namespace kiln {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Identifier as the parser's tokenizer reads it: [A-Za-z_][A-Za-z0-9_.]*
bool is_ident(std::string_view s) {
  if (s.empty() || !is_alpha(s[0])) return false;
  for (char c : s)
    if (!is_alpha(c) && !is_digit(c) && c != '.') return false;
  return true;
}

// Op types and domains: identifiers that cannot be mistaken for a keyword at statement start.
bool is_plain_word(std::string_view s) {
  return is_ident(s) && s != "_" && s != "const" && s != "return" && s != "graph";
}

// %value, #node and @graph names: [A-Za-z0-9_./-]+
bool is_bare_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '/' && c != '-') return false;
  return true;
}

void append_quoted(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_name(std::string& out, char sigil, std::string_view name) {
  out += sigil;
  if (is_bare_name(name))
    out += name;
  else
    append_quoted(out, name);
}

void append_word(std::string& out, std::string_view w) {
  if (is_plain_word(w))
    out += w;
  else
    append_quoted(out, w);
}

void append_key(std::string& out, std::string_view k) {
  if (is_ident(k))
    out += k;
  else
    append_quoted(out, k);
}

template <class F>
void append_shortest(std::string& out, F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Float attribute: shortest round-trip text that always reads as a float (has '.', 'e', inf or nan).
void append_float_attr(std::string& out, float v) {
  size_t start = out.size();
  append_shortest(out, v);
  if (out.find_first_of(".en", start) == std::string::npos) out += ".0";
}

void append_value_ref(std::string& out, const Value* v) {
  if (!v)
    out += '_';
  else
    append_name(out, '%', v->name);
}

void append_dims(std::string& out, const std::vector<int64_t>& dims) {
  out += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(dims[i]);
  }
  out += ']';
}

void append_type(std::string& out, const Type& t) {
  switch (t.kind) {
    case Type::Kind::kSequence:
    case Type::Kind::kOptional:
      out += t.kind == Type::Kind::kSequence ? "seq<" : "opt<";
      if (t.elem)
        append_type(out, *t.elem);
      else
        out += '?';
      out += '>';
      return;
    case Type::Kind::kTensor:
      break;
  }
  if (t.dtype == DType::kUndefined)
    out += '?';
  else
    out += dtype_name(t.dtype);
  if (!t.shape) {
    out += "[...]";
    return;
  }
  out += '[';
  for (size_t i = 0; i < t.shape->dims.size(); ++i) {
    if (i) out += ',';
    const Dim& d = t.shape->dims[i];
    if (d.known())
      out += std::to_string(d.value);
    else if (d.symbol.empty())
      out += '?';
    else if (is_ident(d.symbol))
      out += d.symbol;
    else
      append_quoted(out, d.symbol);
  }
  out += ']';
}

bool always_hex(DType dt) {
  switch (dt) {
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: case DType::kUInt4: case DType::kInt4: case DType::kComplex64:
    case DType::kComplex128: case DType::kFloat4E2M1: case DType::kFloat8E8M0: case DType::kUInt2:
    case DType::kInt2:
      return true;
    default:
      return false;
  }
}

void append_element(std::string& out, const Tensor& t, int64_t i) {
  const void* p = t.raw();
  switch (t.dtype()) {
    case DType::kFloat32: append_shortest(out, static_cast<const float*>(p)[i]); break;
    case DType::kFloat64: append_shortest(out, static_cast<const double*>(p)[i]); break;
    case DType::kFloat16: append_shortest(out, static_cast<float>(static_cast<const Float16*>(p)[i])); break;
    case DType::kBFloat16: append_shortest(out, static_cast<float>(static_cast<const BFloat16*>(p)[i])); break;
    case DType::kInt8: out += std::to_string(static_cast<const int8_t*>(p)[i]); break;
    case DType::kInt16: out += std::to_string(static_cast<const int16_t*>(p)[i]); break;
    case DType::kInt32: out += std::to_string(static_cast<const int32_t*>(p)[i]); break;
    case DType::kInt64: out += std::to_string(static_cast<const int64_t*>(p)[i]); break;
    case DType::kUInt8: out += std::to_string(static_cast<const uint8_t*>(p)[i]); break;
    case DType::kUInt16: out += std::to_string(static_cast<const uint16_t*>(p)[i]); break;
    case DType::kUInt32: out += std::to_string(static_cast<const uint32_t*>(p)[i]); break;
    case DType::kUInt64: out += std::to_string(static_cast<const uint64_t*>(p)[i]); break;
    case DType::kBool: out += static_cast<const uint8_t*>(p)[i] ? "true" : "false"; break;
    case DType::kString: append_quoted(out, static_cast<const std::string*>(p)[i]); break;
    default: out += '?'; break;
  }
}

// `f32[2,2] [1, 2, 3, 4]` or `f32[64] hex"..."`.
void append_tensor(std::string& out, const Tensor& t, const PrintOptions& opts) {
  if (!t.defined()) {
    out += "<undefined tensor>";
    return;
  }
  out += dtype_name(t.dtype());
  append_dims(out, t.dims());
  out += ' ';
  const int64_t n = t.numel();
  if (opts.elide_large_constants && n > 16) {
    out += "<" + std::to_string(n) + " elements elided>";
    return;
  }
  if (always_hex(t.dtype()) || (t.dtype() != DType::kString && n > 16)) {
    static const char* kHex = "0123456789abcdef";
    const auto* bytes = static_cast<const unsigned char*>(t.raw());
    const size_t nb = t.nbytes();
    out += "hex\"";
    out.reserve(out.size() + 2 * nb + 1);
    for (size_t i = 0; i < nb; ++i) {
      out += kHex[bytes[i] >> 4];
      out += kHex[bytes[i] & 15];
    }
    out += '"';
    return;
  }
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    append_element(out, t, i);
  }
  out += ']';
}

void append_graph(std::string& out, const Graph& g, size_t indent, const PrintOptions& opts);

void append_attr(std::string& out, const Attribute& a, size_t indent, const PrintOptions& opts) {
  auto graph_or_null = [&](const std::shared_ptr<Graph>& g) {
    if (g)
      append_graph(out, *g, indent, opts);
    else
      out += "graph <null>";
  };
  auto tensor = [&](const Tensor& t) {
    out += "tensor<";
    append_tensor(out, t, opts);
    out += '>';
  };
  switch (a.kind) {
    case Attribute::Kind::kInt: out += std::to_string(a.i); return;
    case Attribute::Kind::kFloat: append_float_attr(out, a.f); return;
    case Attribute::Kind::kString: append_quoted(out, a.s); return;
    case Attribute::Kind::kTensor: tensor(a.t); return;
    case Attribute::Kind::kGraph: graph_or_null(a.g); return;
    case Attribute::Kind::kType:  // `type<opt<seq<f32[...]>>>`
      out += "type<";
      append_type(out, a.tp);
      out += '>';
      return;
    default: break;
  }
  size_t n = 0;
  const char* empty = "";
  switch (a.kind) {
    case Attribute::Kind::kInts: n = a.ints.size(); empty = "ints[]"; break;
    case Attribute::Kind::kFloats: n = a.floats.size(); empty = "floats[]"; break;
    case Attribute::Kind::kStrings: n = a.strings.size(); empty = "strings[]"; break;
    case Attribute::Kind::kTensors: n = a.tensors.size(); empty = "tensors[]"; break;
    case Attribute::Kind::kGraphs: n = a.graphs.size(); empty = "graphs[]"; break;
    default: break;
  }
  if (n == 0) {
    out += empty;
    return;
  }
  out += '[';
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    switch (a.kind) {
      case Attribute::Kind::kInts: out += std::to_string(a.ints[i]); break;
      case Attribute::Kind::kFloats: append_float_attr(out, a.floats[i]); break;
      case Attribute::Kind::kStrings: append_quoted(out, a.strings[i]); break;
      case Attribute::Kind::kTensors: tensor(a.tensors[i]); break;
      case Attribute::Kind::kGraphs: graph_or_null(a.graphs[i]); break;
      default: break;
    }
  }
  out += ']';
}

void append_node(std::string& out, const Node& n, size_t indent, const PrintOptions& opts) {
  if (!n.outputs.empty()) {
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) out += ", ";
      append_value_ref(out, n.outputs[i]);
    }
    out += " = ";
  }
  if (!n.domain.empty()) {
    append_word(out, n.domain);
    out += "::";
  }
  append_word(out, n.op_type);
  out += '(';
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (i) out += ", ";
    append_value_ref(out, n.inputs[i]);
  }
  out += ')';
  if (!n.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto& [key, a] : n.attrs) {
      if (!first) out += ", ";
      first = false;
      append_key(out, key);
      out += '=';
      append_attr(out, a, indent, opts);
    }
    out += '}';
  }
  if (!n.name.empty()) {
    out += ' ';
    append_name(out, '#', n.name);
  }
  bool first = true;
  for (const Value* v : n.outputs) {
    if (!v) continue;
    out += first ? " : " : ", ";
    first = false;
    append_type(out, v->type);
  }
}

void append_const(std::string& out, const Value& v, bool with_type, const PrintOptions& opts) {
  append_name(out, '%', v.name);
  out += " = const ";
  append_tensor(out, v.initializer, opts);
  if (with_type && v.initializer.defined() &&
      !(v.type == Type::tensor(v.initializer.dtype(), Shape::of(v.initializer.dims())))) {
    out += " : ";
    append_type(out, v.type);
  }
}

// Header inline at the current position; body lines at indent + 2; closing brace at indent.
void append_graph(std::string& out, const Graph& g, size_t indent, const PrintOptions& opts) {
  out += "graph ";
  append_name(out, '@', g.name);
  out += '(';
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (i) out += ", ";
    const Value* v = g.inputs[i];
    append_value_ref(out, v);
    if (!v) continue;
    out += ": ";
    append_type(out, v->type);
    if (v->initializer.defined()) out += " = default";
  }
  out += ") -> (";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (i) out += ", ";
    const Value* v = g.outputs[i];
    append_value_ref(out, v);
    if (!v) continue;
    out += ": ";
    append_type(out, v->type);
  }
  out += ") {\n";
  const std::string pad(indent + 2, ' ');
  for (const Value* v : g.inputs) {
    if (!v || !v->initializer.defined()) continue;
    out += pad;
    append_const(out, *v, false, opts);
    out += '\n';
  }
  for (const Value* v : g.constants) {
    if (!v || v->is_graph_input) continue;
    out += pad;
    append_const(out, *v, true, opts);
    out += '\n';
  }
  for (const auto& n : g.nodes) {
    if (!n) continue;
    out += pad;
    append_node(out, *n, indent + 2, opts);
    out += '\n';
  }
  out += pad;
  out += "return";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    out += i ? ", " : " ";
    append_value_ref(out, g.outputs[i]);
  }
  out += '\n';
  out += std::string(indent, ' ');
  out += '}';
}

}  // namespace

std::string print_attribute(const Attribute& a) {
  std::string out;
  append_attr(out, a, 0, PrintOptions{});
  return out;
}

std::string print_type(const Type& t) {
  std::string out;
  append_type(out, t);
  return out;
}

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  std::string out;
  append_graph(out, g, 0, opts);
  out += '\n';
  return out;
}

std::string print_model(const Model& m, const PrintOptions& opts) {
  std::string out = "model ir=" + std::to_string(m.ir_version) + " opsets={";
  bool first = true;
  for (const auto& [domain, version] : m.opsets) {
    if (!first) out += ", ";
    first = false;
    append_quoted(out, domain);
    out += ": " + std::to_string(version);
  }
  out += '}';
  if (!m.producer_name.empty() || !m.producer_version.empty()) {
    out += " producer=";
    append_quoted(out, m.producer_name);
    out += ' ';
    append_quoted(out, m.producer_version);
  }
  out += '\n';
  if (!m.metadata.empty()) {
    out += "metadata {";
    first = true;
    for (const auto& [k, v] : m.metadata) {
      if (!first) out += ", ";
      first = false;
      append_quoted(out, k);
      out += ": ";
      append_quoted(out, v);
    }
    out += "}\n";
  }
  if (m.graph) out += print_graph(*m.graph, opts);
  return out;
}

}  // namespace kiln
