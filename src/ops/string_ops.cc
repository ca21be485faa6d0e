// String ops: StringNormalizer, StringSplit, StringConcat, RegexFullMatch and TfIdfVectorizer
// (registered from register_extra_ops in ops/generator.cc).
#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

void require_strings(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kString)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be a string tensor, got " +
                                       type_string(t));
}

// ASCII-only case mapping: bytes >= 0x80 (UTF-8 sequences) are kept as they are, so non-ASCII
// letters do not change case. The `locale` attribute is accepted and ignored.
std::string change_case(std::string s, bool upper) {
  for (char& c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80) c = static_cast<char>(upper ? std::toupper(u) : std::tolower(u));
  }
  return s;
}

// ---- StringNormalizer -------------------------------------------------------------------------

void string_normalizer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(ctx, x, "X");
  const std::string action = ctx.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    ctx.fail(ErrorKind::kInvalidModel,
             "case_change_action should be NONE, LOWER or UPPER, got '" + action + "'");
  const bool case_sensitive = ctx.attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stops;
  for (const std::string& w : ctx.attr_strings("stopwords"))
    stops.insert(case_sensitive ? w : change_case(w, false));
  const bool two_d = x.rank() == 2;
  if (x.rank() != 1 && !(two_d && x.dim(0) == 1))
    ctx.fail(ErrorKind::kBadInput, "X should be [C] or [1, C], got " + type_string(x));
  const std::string* s = x.data<std::string>();
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!stops.empty() && stops.count(case_sensitive ? s[i] : change_case(s[i], false))) continue;
    kept.push_back(action == "NONE" ? s[i] : change_case(s[i], action == "UPPER"));
  }
  // Removing every element leaves a single empty string, per the spec.
  if (kept.empty()) kept.emplace_back();
  const int64_t c = static_cast<int64_t>(kept.size());
  Tensor y(DType::kString, two_d ? std::vector<int64_t>{1, c} : std::vector<int64_t>{c});
  std::copy(kept.begin(), kept.end(), y.data<std::string>());
  ctx.set_output(0, std::move(y));
}

// ---- StringSplit ------------------------------------------------------------------------------

// Python's str.split semantics: with a delimiter, consecutive delimiters give empty pieces;
// without one, runs of whitespace separate and leading/trailing whitespace is dropped.
std::vector<std::string> split_string(const std::string& s, const std::string& delim,
                                      int64_t maxsplit) {
  std::vector<std::string> out;
  if (!delim.empty()) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(delim, pos);
      if (hit == std::string::npos) break;
      out.push_back(s.substr(pos, hit - pos));
      pos = hit + delim.size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t i = 0;
  while (true) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t end = s.size();
      while (end > i && is_space(s[end - 1])) --end;
      out.push_back(s.substr(i, end - i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

void string_split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(ctx, x, "X");
  const std::string delim = ctx.attr_string("delimiter", "");
  const int64_t maxsplit = ctx.has_attr("maxsplit") ? ctx.attr_int("maxsplit") : -1;
  if (ctx.has_attr("maxsplit") && maxsplit < 0)
    ctx.fail(ErrorKind::kInvalidModel, "maxsplit should be >= 0, got " + std::to_string(maxsplit));
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  int64_t width = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[static_cast<size_t>(i)] = split_string(x.data<std::string>()[i], delim, maxsplit);
    width = std::max<int64_t>(width, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
  }
  std::vector<int64_t> dims(x.dims());
  dims.push_back(width);
  Tensor y(DType::kString, dims);
  Tensor z(DType::kInt64, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto& p = parts[static_cast<size_t>(i)];
    std::copy(p.begin(), p.end(), y.data<std::string>() + i * width);
    z.data<int64_t>()[i] = static_cast<int64_t>(p.size());
  }
  ctx.set_output(0, std::move(y));
  if (ctx.num_outputs() > 1) ctx.set_output(1, std::move(z));
}

// ---- StringConcat -----------------------------------------------------------------------------

void string_concat_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_strings(ctx, a, "X");
  require_strings(ctx, b, "Y");
  const std::vector<int64_t> dims = broadcast_dims(ctx, {a.dims(), b.dims()});
  Tensor y(DType::kString, dims);
  const std::string* sa = a.data<std::string>();
  const std::string* sb = b.data<std::string>();
  std::string* d = y.data<std::string>();
  for_each_broadcast(dims, {broadcast_strides(a.dims(), dims), broadcast_strides(b.dims(), dims)},
                     [&](int64_t i, const int64_t* off) { d[i] = sa[off[0]] + sb[off[1]]; });
  ctx.set_output(0, std::move(y));
}

// ---- RegexFullMatch ---------------------------------------------------------------------------

// ONNX specifies RE2 syntax; kiln uses std::regex (ECMAScript). The common subset (classes,
// quantifiers, groups, alternation, anchors, \d\w\s) behaves the same. Differences: RE2's
// (?P<name>...) groups, \pL-style Unicode classes, inline flags like (?i) and \C are rejected
// by ECMAScript (reported as an invalid model); ECMAScript backreferences and lookaheads, which
// RE2 rejects, are accepted; matching works on bytes, not UTF-8 code points.
void regex_full_match_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(ctx, x, "X");
  const std::string pattern = ctx.attr_string("pattern", "");
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    ctx.fail(ErrorKind::kInvalidModel, "pattern '" + pattern +
                                           "' is not a valid (ECMAScript) regex: " + e.what());
  }
  Tensor y(DType::kBool, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data<bool>()[i] = std::regex_match(x.data<std::string>()[i], re);
  ctx.set_output(0, std::move(y));
}

// ---- TfIdfVectorizer --------------------------------------------------------------------------

std::string item_key(const Tensor& x, int64_t i) {
  return x.dtype() == DType::kString ? x.data<std::string>()[i] : std::to_string(x.get_int(i));
}

void tfidf_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string mode = ctx.attr_string("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    ctx.fail(ErrorKind::kInvalidModel, "mode should be TF, IDF or TFIDF, got '" + mode + "'");
  const int64_t min_n = ctx.attr_int("min_gram_length");
  const int64_t max_n = ctx.attr_int("max_gram_length");
  const int64_t max_skip = ctx.attr_int("max_skip_count");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    ctx.fail(ErrorKind::kInvalidModel, "bad gram lengths / max_skip_count");
  const std::vector<int64_t> counts = ctx.attr_ints("ngram_counts");
  const std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
  const std::vector<float> weights = ctx.attr_floats("weights");
  std::vector<std::string> pool = ctx.attr_strings("pool_strings");
  if (pool.empty())
    for (int64_t v : ctx.attr_ints("pool_int64s")) pool.push_back(std::to_string(v));
  if (indexes.empty()) ctx.fail(ErrorKind::kInvalidModel, "ngram_indexes is empty");
  const int64_t out_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < out_size)
    ctx.fail(ErrorKind::kInvalidModel, "weights has fewer entries than output columns");
  // n-gram (joined with '\0') -> output column, for the gram sizes in [min_n, max_n].
  std::map<std::string, int64_t> grams;
  size_t id = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || end < begin)
      ctx.fail(ErrorKind::kInvalidModel, "ngram_counts does not fit the pool");
    for (int64_t g = begin; g + n <= end; g += n, ++id) {
      if (id >= indexes.size()) ctx.fail(ErrorKind::kInvalidModel, "too few ngram_indexes");
      if (n < min_n || n > max_n) continue;
      std::string key;
      for (int64_t k = 0; k < n; ++k) key += pool[static_cast<size_t>(g + k)] + '\0';
      grams.emplace(key, indexes[id]);
    }
  }
  int64_t rows = 1, cols = 0;
  std::vector<int64_t> out_dims;
  if (x.rank() <= 1) {
    cols = x.rank() == 0 ? 1 : x.dim(0);
    out_dims = {out_size};
  } else if (x.rank() == 2) {
    rows = x.dim(0);
    cols = x.dim(1);
    out_dims = {rows, out_size};
  } else {
    ctx.fail(ErrorKind::kBadInput, "X should be [C] or [B, C], got " + type_string(x));
  }
  std::vector<int64_t> freq(static_cast<size_t>(rows * out_size), 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<std::string> row;
    for (int64_t c = 0; c < cols; ++c) row.push_back(item_key(x, r * cols + c));
    for (int64_t skip = 1; skip <= max_skip + 1; ++skip)
      for (int64_t start = 0; start < cols; ++start) {
        std::string key;
        for (int64_t n = 1; n <= max_n; ++n) {
          const int64_t pos = start + (n - 1) * skip;
          if (pos >= cols) break;
          key += row[static_cast<size_t>(pos)] + '\0';
          // Unigrams do not depend on the skip distance, so only the first pass counts them.
          if (n < min_n || (n == 1 && skip > 1)) continue;
          auto it = grams.find(key);
          if (it != grams.end()) ++freq[static_cast<size_t>(r * out_size + it->second)];
        }
      }
  }
  Tensor y(DType::kFloat32, out_dims);
  float* d = y.data<float>();
  for (size_t p = 0; p < freq.size(); ++p) {
    const float w = weights.empty() ? 1.0f : weights[p % static_cast<size_t>(out_size)];
    const float f = static_cast<float>(freq[p]);
    d[p] = mode == "TF" ? f : mode == "IDF" ? (freq[p] > 0 ? w : 0.0f) : w * f;
  }
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_string_ops(OpRegistry& r) {
  r.add("StringNormalizer").since(10).inputs(1).outputs(1).run(string_normalizer_kernel).dynamic_shape();
  r.add("StringSplit").since(20).inputs(1).outputs(2).run(string_split_kernel).dynamic_shape();
  r.add("StringConcat").since(20).inputs(2).outputs(1).kind(PatternKind::kBroadcast)
      .run(string_concat_kernel).shape(infer_broadcast);
  r.add("RegexFullMatch").since(20).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(regex_full_match_kernel);
  r.add("TfIdfVectorizer").since(9).inputs(1).outputs(1).run(tfidf_kernel);
}

}  // namespace kiln
