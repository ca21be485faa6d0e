// Text IR parser: a hand-written tokenizer and a recursive-descent parser for the format of
// ir/text.h. Every failure is a kiln::Error(kInvalidModel) with a line:column; recursion is
// bounded and sizes are checked before anything is allocated, so garbage input cannot crash it.
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "ir/text.h"

namespace kiln {
namespace {

constexpr int kMaxGraphDepth = 64;
constexpr int kMaxTypeDepth = 64;

enum class Tok { kEnd, kIdent, kInt, kFloat, kString, kValue, kNodeName, kGraphName, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // decoded for strings and names; raw otherwise
  int line = 1;
  int col = 1;
};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.' || c == '/' || c == '-'; }
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string pos_text(int line, int col) { return std::to_string(line) + ":" + std::to_string(col); }

std::string describe(const Token& t) {
  auto clip = [](const std::string& s) { return s.size() > 24 ? s.substr(0, 24) + "..." : s; };
  auto printable = [](std::string s) {
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return s;
  };
  switch (t.kind) {
    case Tok::kEnd: return "end of input";
    case Tok::kString: return "string \"" + printable(clip(t.text)) + "\"";
    case Tok::kValue: return "'%" + printable(clip(t.text)) + "'";
    case Tok::kNodeName: return "'#" + printable(clip(t.text)) + "'";
    case Tok::kGraphName: return "'@" + printable(clip(t.text)) + "'";
    default: return "'" + clip(t.text) + "'";
  }
}

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& file) : s_(src), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col();
      if (i_ >= s_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      lex_one(t);
      out.push_back(std::move(t));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& msg, int line, int col) const {
    ErrorLocation loc;
    loc.file = file_;
    throw Error(ErrorKind::kInvalidModel, msg + " at " + pos_text(line, col), loc);
  }
  int col() const { return static_cast<int>(i_ - line_start_) + 1; }
  char at(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool more(size_t k = 0) const { return i_ + k < s_.size(); }

  void skip_space() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') {
        ++i_;
        ++line_;
        line_start_ = i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '/' && at(1) == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        return;
      }
    }
  }

  std::string read_string() {
    const int line = line_, c0 = col();
    ++i_;  // opening quote
    std::string out;
    for (;;) {
      if (!more() || s_[i_] == '\n') fail("unterminated string", line, c0);
      char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (!more()) fail("unterminated string", line, c0);
      char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case '\'': out += '\''; break;
        case 'x': {
          int h = hex_digit(at(0)), l = hex_digit(at(1));
          if (h < 0 || l < 0) fail("'\\x' needs two hex digits", line_, col());
          out += static_cast<char>(h * 16 + l);
          i_ += 2;
          break;
        }
        default: fail("unknown escape sequence in string", line_, col() - 1);
      }
    }
  }

  void lex_one(Token& t) {
    const char c = s_[i_];
    if (c == '%' || c == '#' || c == '@') {
      t.kind = c == '%' ? Tok::kValue : c == '#' ? Tok::kNodeName : Tok::kGraphName;
      ++i_;
      if (at(0) == '"') {
        t.text = read_string();
        return;
      }
      size_t start = i_;
      while (more() && is_name_char(s_[i_])) ++i_;
      if (start == i_) fail(std::string("expected a name after '") + c + "'", t.line, t.col);
      t.text = std::string(s_.substr(start, i_ - start));
      return;
    }
    if (c == '"') {
      t.kind = Tok::kString;
      t.text = read_string();
      return;
    }
    if (c == '-' && at(1) == '>') {
      t.kind = Tok::kPunct;
      t.text = "->";
      i_ += 2;
      return;
    }
    if (is_digit(c) || (c == '-' && (is_digit(at(1)) || is_alpha(at(1))))) {
      lex_number(t);
      return;
    }
    if (is_alpha(c)) {
      size_t start = i_;
      while (more() && is_ident_char(s_[i_])) ++i_;
      t.kind = Tok::kIdent;
      t.text = std::string(s_.substr(start, i_ - start));
      return;
    }
    static const char* kPuncts[] = {"::", "...", "->", ":", "(", ")", "[", "]", "{",
                                    "}",  "<",   ">",  ",", "=", "?"};
    for (const char* p : kPuncts) {
      size_t n = std::strlen(p);
      if (s_.substr(i_, n) == p) {
        t.kind = Tok::kPunct;
        t.text = p;
        i_ += n;
        return;
      }
    }
    auto uc = static_cast<unsigned char>(c);
    std::string shown = uc >= 0x20 && uc < 0x7f ? std::string(1, c) : "\\x" + std::string(1, "0123456789abcdef"[uc >> 4]) + "0123456789abcdef"[uc & 15];
    fail("unexpected character '" + shown + "'", t.line, t.col);
  }

  void lex_number(Token& t) {
    size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (is_alpha(at(0))) {  // -inf, -nan
      size_t w = i_;
      while (more() && is_alpha(s_[i_])) ++i_;
      std::string_view word = s_.substr(w, i_ - w);
      if (word != "inf" && word != "nan") fail("malformed number", t.line, t.col);
      t.kind = Tok::kFloat;
    } else {
      bool is_float = false;
      while (more() && is_digit(s_[i_])) ++i_;
      if (at(0) == '.' && is_digit(at(1))) {
        is_float = true;
        ++i_;
        while (more() && is_digit(s_[i_])) ++i_;
      }
      if (at(0) == 'e' || at(0) == 'E') {
        size_t k = 1;
        if (at(k) == '+' || at(k) == '-') ++k;
        if (!is_digit(at(k))) fail("malformed number", t.line, t.col);
        is_float = true;
        i_ += k;
        while (more() && is_digit(s_[i_])) ++i_;
      }
      t.kind = is_float ? Tok::kFloat : Tok::kInt;
    }
    if (more() && is_ident_char(s_[i_])) fail("malformed number", t.line, t.col);
    t.text = std::string(s_.substr(start, i_ - start));
  }

  std::string_view s_;
  const std::string& file_;
  size_t i_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
};

struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(depth) { ++d; }
  ~DepthGuard() { --d; }
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string& file) : toks_(std::move(toks)), file_(file) {}

  Model model() {
    Model m;
    m.path = file_;
    if (is_word("model")) {
      take();
      expect_word("ir");
      expect("=");
      m.ir_version = int64_of(take_kind(Tok::kInt, "an integer"));
      expect_word("opsets");
      expect("=");
      expect("{");
      if (!accept("}")) {
        for (;;) {
          Token k = take_kind(Tok::kString, "a quoted domain name");
          expect(":");
          int64_t v = int64_of(take_kind(Tok::kInt, "an integer"));
          if (!m.opsets.emplace(k.text, v).second) fail(k, "duplicate opset domain \"" + k.text + "\"");
          if (!accept(",")) break;
        }
        expect("}");
      }
      if (is_word("producer")) {
        take();
        expect("=");
        m.producer_name = take_kind(Tok::kString, "a quoted producer name").text;
        if (peek().kind == Tok::kString) m.producer_version = take().text;
      }
    } else {
      m.opsets[""] = kDefaultTextOpset;
    }
    if (is_word("metadata")) {
      take();
      expect("{");
      if (!accept("}")) {
        for (;;) {
          Token k = take_kind(Tok::kString, "a quoted metadata key");
          expect(":");
          Token v = take_kind(Tok::kString, "a quoted metadata value");
          if (!m.metadata.emplace(k.text, v.text).second) fail(k, "duplicate metadata key \"" + k.text + "\"");
          if (!accept(",")) break;
        }
        expect("}");
      }
    }
    expect_word("graph");
    m.graph = graph(nullptr);
    if (peek().kind != Tok::kEnd) expected("end of input");
    return m;
  }

 private:
  // ---- token helpers ---------------------------------------------------------------------

  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  Token take() {
    Token t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool is_punct(const char* p, size_t k = 0) const {
    return peek(k).kind == Tok::kPunct && peek(k).text == p;
  }
  bool is_word(const char* w, size_t k = 0) const {
    return peek(k).kind == Tok::kIdent && peek(k).text == w;
  }
  bool accept(const char* p) {
    if (!is_punct(p)) return false;
    take();
    return true;
  }
  void expect(const char* p) {
    if (!accept(p)) expected(std::string("'") + p + "'");
  }
  void expect_word(const char* w) {
    if (!is_word(w)) expected(std::string("'") + w + "'");
    take();
  }
  Token take_kind(Tok kind, const std::string& what) {
    if (peek().kind != kind) expected(what);
    return take();
  }

  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    ErrorLocation loc;
    loc.file = file_;
    throw Error(ErrorKind::kInvalidModel, msg + " at " + pos_text(t.line, t.col), loc);
  }
  [[noreturn]] void expected(const std::string& what) const {
    const Token& t = peek();
    ErrorLocation loc;
    loc.file = file_;
    throw Error(ErrorKind::kInvalidModel,
                "expected " + what + " at " + pos_text(t.line, t.col) + " (found " + describe(t) + ")", loc);
  }

  // ---- numbers -----------------------------------------------------------------------------

  int64_t int64_of(const Token& t) const {
    int64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      fail(t, "integer " + t.text + " is out of range");
    return v;
  }
  uint64_t uint64_of(const Token& t) const {
    uint64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      fail(t, "integer " + t.text + " is out of range");
    return v;
  }
  static bool is_number(const Token& t) {
    return t.kind == Tok::kInt || t.kind == Tok::kFloat ||
           (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan"));
  }
  template <class F>
  F float_of(const Token& t) const {
    if (!is_number(t)) fail(t, "expected a number (found " + describe(t) + ")");
    F v{};
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc::result_out_of_range)
      fail(t, "number " + t.text + " is out of range for its type");
    if (r.ec != std::errc() || r.ptr != e) fail(t, "malformed number " + t.text);
    return v;
  }

  // ---- names -------------------------------------------------------------------------------

  // An identifier or a quoted string (op types, domains, attribute names).
  std::string word(const std::string& what) {
    const Token& t = peek();
    if (t.kind == Tok::kIdent || t.kind == Tok::kString) return take().text;
    expected(what);
  }

  Value* resolve(Graph& g, const Token& t) const {
    if (t.text.empty()) fail(t, "empty value name");
    Value* v = g.find(t.text);
    if (!v) fail(t, "use of undefined value %" + t.text);
    return v;
  }

  Value* define(Graph& g, const Token& t, Type type) {
    if (t.text.empty()) fail(t, "empty value name");
    if (g.find_local(t.text)) {
      auto it = def_pos_.find({&g, t.text});
      std::string first = it != def_pos_.end() ? " (first defined at " + it->second + ")" : "";
      fail(t, "redefinition of value %" + t.text + first);
    }
    def_pos_[{&g, t.text}] = pos_text(t.line, t.col);
    return g.add_value(t.text, std::move(type));
  }

  // ---- types -------------------------------------------------------------------------------

  DType dtype() {
    Token t = peek();
    if (t.kind != Tok::kIdent) expected("an element type");
    auto dt = dtype_from_name(t.text);
    if (!dt) fail(t, "unknown element type '" + t.text + "'");
    take();
    return *dt;
  }

  Type type() {
    DepthGuard guard(type_depth_);
    if (type_depth_ > kMaxTypeDepth) fail(peek(), "types nested too deeply");
    if ((is_word("seq") || is_word("opt")) && is_punct("<", 1)) {
      auto kind = take().text == "seq" ? Type::Kind::kSequence : Type::Kind::kOptional;
      take();
      Type t;
      t.kind = kind;
      if (is_punct("?") && !is_punct("[", 1))
        take();  // element type unknown
      else
        t.elem = std::make_shared<const Type>(type());
      expect(">");
      return t;
    }
    Type t;
    if (!accept("?")) t.dtype = dtype();
    expect("[");
    if (accept("...")) {
      expect("]");
      return t;
    }
    Shape s;
    if (!accept("]")) {
      for (;;) {
        const Token& d = peek();
        if (d.kind == Tok::kInt) {
          s.dims.emplace_back(int64_of(take()));
        } else if (is_punct("?")) {
          take();
          s.dims.emplace_back();
        } else if (d.kind == Tok::kIdent || d.kind == Tok::kString) {
          s.dims.push_back(Dim::named(take().text));
        } else {
          expected("a dimension");
        }
        if (!accept(",")) break;
      }
      expect("]");
    }
    t.shape = std::move(s);
    return t;
  }

  // ---- tensors -----------------------------------------------------------------------------

  static bool always_hex(DType dt) {
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

  template <class T>
  T int_in_range(const Token& t) const {
    if (t.kind != Tok::kInt) fail(t, "expected an integer (found " + describe(t) + ")");
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (!t.text.empty() && t.text[0] == '-') fail(t, "integer " + t.text + " is out of range for u64");
      return uint64_of(t);
    } else {
      int64_t v = int64_of(t);
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
        fail(t, "integer " + t.text + " is out of range for its element type");
      return static_cast<T>(v);
    }
  }

  void store(Tensor& out, int64_t i, const Token& t) const {
    void* p = out.raw();
    switch (out.dtype()) {
      case DType::kFloat32: static_cast<float*>(p)[i] = float_of<float>(t); break;
      case DType::kFloat64: static_cast<double*>(p)[i] = float_of<double>(t); break;
      case DType::kFloat16: static_cast<Float16*>(p)[i] = Float16(float_of<float>(t)); break;
      case DType::kBFloat16: static_cast<BFloat16*>(p)[i] = BFloat16(float_of<float>(t)); break;
      case DType::kInt8: static_cast<int8_t*>(p)[i] = int_in_range<int8_t>(t); break;
      case DType::kInt16: static_cast<int16_t*>(p)[i] = int_in_range<int16_t>(t); break;
      case DType::kInt32: static_cast<int32_t*>(p)[i] = int_in_range<int32_t>(t); break;
      case DType::kInt64: static_cast<int64_t*>(p)[i] = int_in_range<int64_t>(t); break;
      case DType::kUInt8: static_cast<uint8_t*>(p)[i] = int_in_range<uint8_t>(t); break;
      case DType::kUInt16: static_cast<uint16_t*>(p)[i] = int_in_range<uint16_t>(t); break;
      case DType::kUInt32: static_cast<uint32_t*>(p)[i] = int_in_range<uint32_t>(t); break;
      case DType::kUInt64: static_cast<uint64_t*>(p)[i] = int_in_range<uint64_t>(t); break;
      case DType::kBool:
        if (t.kind != Tok::kIdent || (t.text != "true" && t.text != "false"))
          fail(t, "expected true or false (found " + describe(t) + ")");
        static_cast<uint8_t*>(p)[i] = t.text == "true" ? 1 : 0;
        break;
      case DType::kString:
        if (t.kind != Tok::kString) fail(t, "expected a quoted string (found " + describe(t) + ")");
        static_cast<std::string*>(p)[i] = t.text;
        break;
      default: fail(t, "element type has no literal form; use hex\"...\"");
    }
  }

  // `f32[2,3] [1, 2, 3, 4, 5, 6]` or `f32[2,3] hex"..."`.
  Tensor tensor_literal() {
    const Token head = peek();
    DType dt = dtype();
    std::vector<int64_t> dims;
    expect("[");
    if (!accept("]")) {
      for (;;) {
        Token d = take_kind(Tok::kInt, "a non-negative integer dimension");
        int64_t v = int64_of(d);
        if (v < 0) fail(d, "negative dimension " + d.text);
        dims.push_back(v);
        if (!accept(",")) break;
      }
      expect("]");
    }
    int64_t numel = 0;
    try {
      numel = checked_numel(dims);
    } catch (const Error&) {
      fail(head, "tensor shape " + dims_to_string(dims) + " has too many elements");
    }
    const std::string type_text = std::string(dtype_name(dt)) + dims_to_string(dims);
    if (dt == DType::kString && is_word("hex")) fail(peek(), "str tensors cannot be written as hex");
    if (is_word("hex") && peek(1).kind == Tok::kString) {
      take();
      Token h = take();
      const size_t esize = dtype_size(dt);
      const size_t nbytes = h.text.size() / 2;
      if (h.text.size() % 2 != 0 || nbytes % esize != 0 ||
          static_cast<uint64_t>(numel) != nbytes / esize)
        fail(h, "hex data of " + std::to_string(h.text.size()) + " digits does not fit " + type_text +
                    " (" + std::to_string(numel) + " elements of " + std::to_string(esize) + " bytes)");
      Tensor t = make_tensor(head, dt, dims);
      auto* bytes = static_cast<unsigned char*>(t.raw());
      for (size_t i = 0; i < nbytes; ++i) {
        int hi = hex_digit(h.text[2 * i]), lo = hex_digit(h.text[2 * i + 1]);
        if (hi < 0 || lo < 0) fail(h, "invalid hex digit in tensor data");
        bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
      }
      return t;
    }
    if (!is_punct("[")) expected("'[' or hex\"...\" tensor data");
    const Token open = take();
    if (always_hex(dt)) fail(open, std::string(dtype_name(dt)) + " tensor data must be written as hex\"...\"");
    std::vector<size_t> elems;
    if (!accept("]")) {
      for (;;) {
        const Token& e = peek();
        if (!is_number(e) && e.kind != Tok::kString && !is_word("true") && !is_word("false"))
          expected("a tensor element");
        elems.push_back(pos_);
        take();
        if (!accept(",")) break;
      }
      expect("]");
    }
    if (static_cast<uint64_t>(numel) != elems.size())
      fail(open, "tensor literal has " + std::to_string(elems.size()) + " values but " + type_text +
                     " needs " + std::to_string(numel));
    Tensor t = make_tensor(head, dt, dims);
    for (size_t i = 0; i < elems.size(); ++i) store(t, static_cast<int64_t>(i), toks_[elems[i]]);
    return t;
  }

  Tensor make_tensor(const Token& at, DType dt, const std::vector<int64_t>& dims) const {
    try {
      return Tensor(dt, dims);
    } catch (const Error& e) {
      fail(at, "cannot create tensor: " + e.message());
    }
  }

  // ---- attributes --------------------------------------------------------------------------

  Attribute attr_value(Graph& g) {
    const Token& t = peek();
    if (t.kind == Tok::kInt) return Attribute::make_int(int64_of(take()));
    if (is_number(t)) return Attribute::make_float(float_of<float>(take()));
    if (t.kind == Tok::kString) return Attribute::make_string(take().text);
    if (is_word("tensor") && is_punct("<", 1)) {
      take();
      take();
      Tensor v = tensor_literal();
      expect(">");
      return Attribute::make_tensor(std::move(v));
    }
    if (is_word("graph")) {
      take();
      return Attribute::make_graph(graph(&g));
    }
    if (is_word("type") && is_punct("<", 1)) {  // `type<opt<seq<f32[...]>>>`
      take();
      take();
      Type ty = type();
      expect(">");
      return Attribute::make_type(std::move(ty));
    }
    static const std::pair<const char*, Attribute::Kind> kEmpty[] = {
        {"ints", Attribute::Kind::kInts},       {"floats", Attribute::Kind::kFloats},
        {"strings", Attribute::Kind::kStrings}, {"tensors", Attribute::Kind::kTensors},
        {"graphs", Attribute::Kind::kGraphs}};
    for (const auto& [word, kind] : kEmpty) {
      if (is_word(word) && is_punct("[", 1)) {
        take();
        take();
        expect("]");
        Attribute a;
        a.kind = kind;
        return a;
      }
    }
    if (!is_punct("[")) expected("an attribute value");
    const Token open = take();
    if (is_punct("]")) fail(open, "an empty list needs its kind, e.g. ints[] or floats[]");
    Attribute a;
    const Token& first = peek();
    if (is_number(first)) {
      std::vector<Token> items;
      bool any_float = false;
      for (;;) {
        if (!is_number(peek())) expected("a number");
        any_float |= peek().kind != Tok::kInt;
        items.push_back(take());
        if (!accept(",")) break;
      }
      if (any_float) {
        a.kind = Attribute::Kind::kFloats;
        for (const Token& it : items) a.floats.push_back(float_of<float>(it));
      } else {
        a.kind = Attribute::Kind::kInts;
        for (const Token& it : items) a.ints.push_back(int64_of(it));
      }
    } else if (first.kind == Tok::kString) {
      a.kind = Attribute::Kind::kStrings;
      for (;;) {
        a.strings.push_back(take_kind(Tok::kString, "a quoted string").text);
        if (!accept(",")) break;
      }
    } else if (is_word("tensor")) {
      a.kind = Attribute::Kind::kTensors;
      for (;;) {
        expect_word("tensor");
        expect("<");
        a.tensors.push_back(tensor_literal());
        expect(">");
        if (!accept(",")) break;
      }
    } else if (is_word("graph")) {
      a.kind = Attribute::Kind::kGraphs;
      for (;;) {
        expect_word("graph");
        a.graphs.push_back(graph(&g));
        if (!accept(",")) break;
      }
    } else {
      expected("a list element");
    }
    expect("]");
    return a;
  }

  // ---- statements and graphs ---------------------------------------------------------------

  struct OutName {
    Token tok;
    bool omitted = false;
  };

  void const_statement(Graph& g, const std::vector<OutName>& outs, std::set<Value*>& pending) {
    const Token kw = take();  // "const"
    if (outs.size() != 1 || outs[0].omitted) fail(outs[0].tok, "a const line defines exactly one value");
    Tensor t = tensor_literal();
    std::optional<Type> explicit_type;
    if (accept(":")) explicit_type = type();
    const Token& name = outs[0].tok;
    Value* existing = name.text.empty() ? nullptr : g.find_local(name.text);
    if (existing && pending.count(existing)) {
      if (explicit_type) fail(name, "the type of default input %" + name.text + " is given in the signature");
      existing->initializer = std::move(t);
      pending.erase(existing);
      return;
    }
    Type ty = explicit_type ? *explicit_type : Type::tensor(t.dtype(), Shape::of(t.dims()));
    Value* v = define(g, name, std::move(ty));
    v->initializer = std::move(t);
    g.constants.push_back(v);
    (void)kw;
  }

  void statement(Graph& g, std::set<Value*>& pending) {
    std::vector<OutName> outs;
    if (peek().kind == Tok::kValue || is_word("_")) {
      for (;;) {
        if (peek().kind == Tok::kValue)
          outs.push_back({take(), false});
        else if (is_word("_"))
          outs.push_back({take(), true});
        else
          expected("a value name or '_'");
        if (!accept(",")) break;
      }
      expect("=");
      if (is_word("const")) {
        const_statement(g, outs, pending);
        return;
      }
    }
    const Token op_tok = peek();
    if (op_tok.kind != Tok::kIdent && op_tok.kind != Tok::kString) expected("an op type or 'return'");
    std::string domain, op = word("an op type");
    if (accept("::")) {
      domain = op;
      op = word("an op type");
    }
    expect("(");
    std::vector<Value*> inputs;
    if (!accept(")")) {
      for (;;) {
        if (peek().kind == Tok::kValue)
          inputs.push_back(resolve(g, take()));
        else if (is_word("_"))
          take(), inputs.push_back(nullptr);
        else
          expected("a value name or '_'");
        if (!accept(",")) break;
      }
      expect(")");
    }
    std::map<std::string, Attribute> attrs;
    if (accept("{")) {
      if (!accept("}")) {
        for (;;) {
          const Token key_tok = peek();
          std::string key = word("an attribute name");
          expect("=");
          Attribute a = attr_value(g);
          if (!attrs.emplace(key, std::move(a)).second) fail(key_tok, "duplicate attribute '" + key + "'");
          if (!accept(",")) break;
        }
        expect("}");
      }
    }
    std::string node_name;
    if (peek().kind == Tok::kNodeName) node_name = take().text;
    size_t present = 0;
    for (const auto& o : outs) present += o.omitted ? 0 : 1;
    std::vector<Type> types(present);
    if (is_punct(":")) {
      const Token colon = take();
      if (present == 0) fail(colon, "output types given but the node has no outputs");
      for (size_t i = 0; i < present; ++i) {
        if (i) expect(",");
        types[i] = type();
      }
    }
    std::vector<Value*> outputs;
    size_t k = 0;
    for (const auto& o : outs)
      outputs.push_back(o.omitted ? nullptr : define(g, o.tok, std::move(types[k++])));
    Node* n = g.add_node(std::move(op), std::move(inputs), std::move(outputs), std::move(domain));
    n->name = std::move(node_name);
    n->attrs = std::move(attrs);
  }

  std::shared_ptr<Graph> graph(Graph* parent) {
    DepthGuard guard(graph_depth_);
    if (graph_depth_ > kMaxGraphDepth)
      fail(peek(), "graphs nested too deeply (more than " + std::to_string(kMaxGraphDepth) + " levels)");
    auto g = std::make_shared<Graph>();
    g->parent = parent;
    g->name = take_kind(Tok::kGraphName, "a graph name '@name'").text;
    expect("(");
    std::set<Value*> pending;
    std::map<Value*, Token> default_tok;
    if (!accept(")")) {
      for (;;) {
        Token name = take_kind(Tok::kValue, "an input name '%name'");
        expect(":");
        Type ty = type();
        Value* v = define(*g, name, std::move(ty));
        v->is_graph_input = true;
        g->inputs.push_back(v);
        if (accept("=")) {
          expect_word("default");
          pending.insert(v);
          default_tok[v] = name;
        }
        if (!accept(",")) break;
      }
      expect(")");
    }
    expect("->");
    expect("(");
    std::vector<std::pair<Token, Type>> sig_outputs;
    if (!accept(")")) {
      for (;;) {
        Token name = take_kind(Tok::kValue, "an output name '%name'");
        expect(":");
        sig_outputs.emplace_back(std::move(name), type());
        if (!accept(",")) break;
      }
      expect(")");
    }
    expect("{");
    while (!is_word("return")) {
      if (peek().kind == Tok::kEnd) expected("'return'");
      statement(*g, pending);
    }
    const Token ret = take();
    std::vector<Token> returned;
    if (peek().kind == Tok::kValue) {
      for (;;) {
        returned.push_back(take_kind(Tok::kValue, "a value name"));
        if (!accept(",")) break;
      }
    }
    expect("}");
    if (!pending.empty()) {
      Value* v = *pending.begin();
      for (Value* in : g->inputs)
        if (pending.count(in)) {
          v = in;
          break;
        }
      fail(default_tok[v], "input %" + v->name + " is declared '= default' but has no const line");
    }
    if (returned.size() != sig_outputs.size())
      fail(ret, "return lists " + std::to_string(returned.size()) + " values but the signature declares " +
                    std::to_string(sig_outputs.size()));
    for (size_t i = 0; i < returned.size(); ++i) {
      const auto& [sig_tok, sig_type] = sig_outputs[i];
      if (returned[i].text != sig_tok.text)
        fail(returned[i], "return value %" + returned[i].text + " does not match signature output %" + sig_tok.text);
      Value* v = resolve(*g, returned[i]);
      if (!(v->type == sig_type))
        fail(sig_tok, "output %" + sig_tok.text + " is declared as " + print_type(sig_type) +
                          " but defined as " + print_type(v->type));
      g->outputs.push_back(v);
    }
    return g;
  }

  std::vector<Token> toks_;
  const std::string& file_;
  size_t pos_ = 0;
  int graph_depth_ = 0;
  int type_depth_ = 0;
  std::map<std::pair<const Graph*, std::string>, std::string> def_pos_;
};

}  // namespace

Model parse_model(std::string_view text, const std::string& source_name) {
  Parser p(Lexer(text, source_name).run(), source_name);
  return p.model();
}

}  // namespace kiln
