// ai.onnx.ml classic-ML ops: LabelEncoder, Binarizer, ArrayFeatureExtractor, TreeEnsemble,
// Normalizer, Scaler, Imputer, OneHotEncoder, FeatureVectorizer, LinearRegressor (registered
// from register_extra_ops in ops/generator.cc). ZipMap (maps) is registered as unsupported.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

constexpr const char* kMl = "ai.onnx.ml";

Tensor floats_tensor(const std::vector<float>& v) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
Tensor ints_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
Tensor strings_tensor(const std::vector<std::string>& v) {
  Tensor t(DType::kString, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::string>());
  return t;
}

// Element i as a lookup key: strings as they are, numbers via their double value ("n:" prefix
// keeps the two kinds apart; every NaN maps to the same key so NaN keys match NaN inputs).
std::string lookup_key(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kString) return "s:" + t.data<std::string>()[i];
  const double v = t.get_double(i);
  if (std::isnan(v)) return "n:nan";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "n:%.17g", v == 0 ? 0.0 : v);
  return buf;
}

// ---- LabelEncoder -----------------------------------------------------------------------------

void label_encoder_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor keys, values, fallback;
  if (const Tensor* kt = ctx.attr_tensor("keys_tensor")) keys = *kt;
  else if (ctx.has_attr("keys_strings")) keys = strings_tensor(ctx.attr_strings("keys_strings"));
  else if (ctx.has_attr("keys_int64s")) keys = ints_tensor(ctx.attr_ints("keys_int64s"));
  else keys = floats_tensor(ctx.attr_floats("keys_floats"));
  if (const Tensor* vt = ctx.attr_tensor("values_tensor")) {
    values = *vt;
    const Tensor* dt = ctx.attr_tensor("default_tensor");
    if (dt && dt->numel() >= 1) {
      fallback = Tensor(values.dtype(), {1});
      visit_storage(values.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (dt->dtype() != values.dtype())
          ctx.fail(ErrorKind::kInvalidModel, "default_tensor type differs from values_tensor");
        fallback.data<T>()[0] = dt->data<T>()[0];
      });
    } else if (values.dtype() == DType::kString) {
      fallback = strings_tensor({"_Unused"});
    } else {
      fallback = Tensor(values.dtype(), {1});
      fallback.set_double(0, -1.0);  // the spec's default: -1 for numbers
    }
  } else if (ctx.has_attr("values_strings")) {
    values = strings_tensor(ctx.attr_strings("values_strings"));
    fallback = strings_tensor({ctx.attr_string("default_string", "_Unused")});
  } else if (ctx.has_attr("values_int64s")) {
    values = ints_tensor(ctx.attr_ints("values_int64s"));
    fallback = ints_tensor({ctx.attr_int("default_int64", -1)});
  } else {
    values = floats_tensor(ctx.attr_floats("values_floats"));
    fallback = floats_tensor({ctx.attr_float("default_float", -0.0f)});
  }
  if (keys.numel() != values.numel())
    ctx.fail(ErrorKind::kInvalidModel, "LabelEncoder has " + std::to_string(keys.numel()) +
                                           " keys but " + std::to_string(values.numel()) +
                                           " values");
  std::map<std::string, int64_t> index;
  for (int64_t i = 0; i < keys.numel(); ++i) index.emplace(lookup_key(keys, i), i);
  Tensor y(values.dtype(), x.dims());
  visit_storage(values.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = values.data<T>();
    T* d = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = index.find(lookup_key(x, i));
      d[i] = it == index.end() ? fallback.data<T>()[0] : v[it->second];
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- Binarizer, ArrayFeatureExtractor -----------------------------------------------------------

void binarizer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double th = ctx.attr_float("threshold", 0.0f);
  Tensor y(x.dtype(), x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) y.set_double(i, x.get_double(i) > th ? 1.0 : 0.0);
  ctx.set_output(0, std::move(y));
}

void array_feature_extractor_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "X should have rank >= 1");
  const std::vector<int64_t> idx = ind.to_int64_vector();
  const int64_t last = x.dim(x.rank() - 1);
  for (int64_t i : idx)
    if (i < 0 || i >= last)
      ctx.fail(ErrorKind::kBadInput, "index " + std::to_string(i) + " is outside [0, " +
                                         std::to_string(last) + ")");
  std::vector<int64_t> dims(x.dims());
  if (x.rank() == 1) dims.insert(dims.begin(), 1);  // a vector acts as one row
  dims.back() = static_cast<int64_t>(idx.size());
  const int64_t rows = last == 0 ? 0 : x.numel() / last;
  Tensor y(x.dtype(), dims);
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data<T>();
    T* d = y.data<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < idx.size(); ++k) *d++ = s[r * last + idx[k]];
  });
  ctx.set_output(0, std::move(y));
}

// ---- post transforms ----------------------------------------------------------------------------

// Applies an ai.onnx.ml post_transform (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT) to a row.
void post_transform(const KernelContext& ctx, const std::string& mode, double* row, int64_t n) {
  if (mode == "NONE") return;
  if (mode == "LOGISTIC") {
    for (int64_t i = 0; i < n; ++i) row[i] = 1.0 / (1.0 + std::exp(-row[i]));
  } else if (mode == "SOFTMAX" || mode == "SOFTMAX_ZERO") {
    const bool zero = mode == "SOFTMAX_ZERO";
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, row[i]);
    for (int64_t i = 0; i < n; ++i) {
      row[i] = zero && row[i] == 0 ? 0.0 : std::exp(row[i] - mx);
      sum += row[i];
    }
    for (int64_t i = 0; i < n; ++i) row[i] = sum == 0 ? 0.0 : row[i] / sum;
  } else if (mode == "PROBIT") {
    // Inverse of the standard normal CDF: sqrt(2) * erfinv(2p - 1), via Newton on erf.
    for (int64_t i = 0; i < n; ++i) {
      const double p = row[i];
      if (!(p > 0 && p < 1)) {
        row[i] = p <= 0 ? -INFINITY : p >= 1 ? INFINITY : NAN;
        continue;
      }
      double z = 0;
      for (int it = 0; it < 60; ++it) {
        const double f = 0.5 * std::erfc(-z / std::sqrt(2.0)) - p;
        const double df = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
        z -= f / df;
      }
      row[i] = z;
    }
  } else {
    ctx.fail(ErrorKind::kInvalidModel, "unknown post_transform '" + mode + "'");
  }
}

const char* post_transform_name(int64_t code) {
  static const char* kNames[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
  return code >= 0 && code < 5 ? kNames[code] : "?";
}

// [N, F] view of X (a vector is one row).
void rows_cols(const Tensor& x, int64_t* n, int64_t* f) {
  *f = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  *n = *f == 0 ? 0 : x.numel() / *f;
}

// ---- TreeEnsemble (opset 5) ---------------------------------------------------------------------

struct TreeModel {
  std::vector<int64_t> feature, modes, true_id, false_id, true_leaf, false_leaf, missing_true;
  std::vector<double> split;
  std::vector<std::vector<double>> members;
  std::vector<int64_t> leaf_target;
  std::vector<double> leaf_weight;
};

enum TreeMode { kLeq, kLt, kGte, kGt, kEq, kNeq, kMember };

bool goes_true(const TreeModel& m, int64_t node, double v) {
  if (std::isnan(v) && m.missing_true[static_cast<size_t>(node)]) return true;
  const double s = m.split[static_cast<size_t>(node)];
  switch (m.modes[static_cast<size_t>(node)]) {
    case kLeq: return v <= s;
    case kLt: return v < s;
    case kGte: return v >= s;
    case kGt: return v > s;
    case kEq: return v == s;
    case kNeq: return v != s;
    default: {
      const auto& set = m.members[static_cast<size_t>(node)];
      return std::find(set.begin(), set.end(), v) != set.end();
    }
  }
}

void tree_ensemble_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TreeModel m;
  m.feature = ctx.attr_ints("nodes_featureids");
  m.true_id = ctx.attr_ints("nodes_truenodeids");
  m.false_id = ctx.attr_ints("nodes_falsenodeids");
  m.true_leaf = ctx.attr_ints("nodes_trueleafs");
  m.false_leaf = ctx.attr_ints("nodes_falseleafs");
  m.leaf_target = ctx.attr_ints("leaf_targetids");
  const std::vector<int64_t> roots = ctx.attr_ints("tree_roots");
  const Tensor* splits = ctx.attr_tensor("nodes_splits");
  const Tensor* modes = ctx.attr_tensor("nodes_modes");
  const Tensor* weights = ctx.attr_tensor("leaf_weights");
  if (!splits || !modes || !weights)
    ctx.fail(ErrorKind::kInvalidModel, "nodes_splits, nodes_modes and leaf_weights are required");
  const size_t nn = m.feature.size();
  for (int64_t i = 0; i < splits->numel(); ++i) m.split.push_back(splits->get_double(i));
  for (int64_t i = 0; i < modes->numel(); ++i) m.modes.push_back(modes->get_int(i));
  for (int64_t i = 0; i < weights->numel(); ++i) m.leaf_weight.push_back(weights->get_double(i));
  m.missing_true = ctx.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>(nn, 0));
  if (m.true_id.size() != nn || m.false_id.size() != nn || m.true_leaf.size() != nn ||
      m.false_leaf.size() != nn || m.split.size() != nn || m.modes.size() != nn ||
      m.missing_true.size() != nn || m.leaf_target.size() != m.leaf_weight.size())
    ctx.fail(ErrorKind::kInvalidModel, "nodes_* / leaf_* attributes differ in length");
  // Member sets, NaN-delimited, in the order the MEMBER nodes appear in nodes_modes.
  m.members.resize(nn);
  if (const Tensor* mv = ctx.attr_tensor("membership_values")) {
    int64_t p = 0;
    for (size_t i = 0; i < nn; ++i) {
      if (m.modes[i] != kMember) continue;
      for (; p < mv->numel() && !std::isnan(mv->get_double(p)); ++p)
        m.members[i].push_back(mv->get_double(p));
      ++p;
    }
  }
  for (size_t i = 0; i < nn; ++i)
    if (m.modes[i] < kLeq || m.modes[i] > kMember)
      ctx.fail(ErrorKind::kInvalidModel, "bad nodes_modes value " + std::to_string(m.modes[i]));
  const int64_t n_targets = ctx.attr_int("n_targets", 1);
  const int64_t agg = ctx.attr_int("aggregate_function", 1);
  const std::string post = post_transform_name(ctx.attr_int("post_transform", 0));
  if (agg < 0 || agg > 3)
    ctx.fail(ErrorKind::kInvalidModel, "bad aggregate_function " + std::to_string(agg));
  int64_t n, f;
  rows_cols(x, &n, &f);
  const size_t n_leaves = m.leaf_weight.size();
  for (size_t i = 0; i < nn; ++i) {
    const bool bad_t = m.true_leaf[i] ? static_cast<size_t>(m.true_id[i]) >= n_leaves
                                      : static_cast<size_t>(m.true_id[i]) >= nn;
    const bool bad_f = m.false_leaf[i] ? static_cast<size_t>(m.false_id[i]) >= n_leaves
                                       : static_cast<size_t>(m.false_id[i]) >= nn;
    if (bad_t || bad_f || m.feature[i] < 0 || m.feature[i] >= f)
      ctx.fail(ErrorKind::kInvalidModel, "tree node " + std::to_string(i) +
                                             " points outside the nodes, leaves or features");
  }
  for (int64_t t : m.leaf_target)
    if (t < 0 || t >= n_targets)
      ctx.fail(ErrorKind::kInvalidModel, "leaf target id " + std::to_string(t) + " >= n_targets");
  const double init = agg == 2 ? std::numeric_limits<double>::max()
                      : agg == 3 ? std::numeric_limits<double>::lowest() : 0.0;
  Tensor y(x.dtype(), {n, n_targets});
  std::vector<double> row(static_cast<size_t>(n_targets));
  for (int64_t r = 0; r < n; ++r) {
    std::fill(row.begin(), row.end(), init);
    for (int64_t root : roots) {
      if (root < 0 || static_cast<size_t>(root) >= nn)
        ctx.fail(ErrorKind::kInvalidModel, "tree root " + std::to_string(root) + " is invalid");
      const size_t ur = static_cast<size_t>(root);
      int64_t leaf = -1, node = root;
      // A root whose two branches are the same leaf is itself a leaf (a one-leaf tree).
      if (m.true_leaf[ur] && m.false_leaf[ur] && m.true_id[ur] == m.false_id[ur]) leaf = root;
      for (size_t steps = 0; leaf < 0; ++steps) {
        if (steps > nn) ctx.fail(ErrorKind::kInvalidModel, "the trees contain a cycle");
        const size_t u = static_cast<size_t>(node);
        const bool t = goes_true(m, node, x.get_double(r * f + m.feature[u]));
        const int64_t next = t ? m.true_id[u] : m.false_id[u];
        if (t ? m.true_leaf[u] : m.false_leaf[u]) leaf = next;
        else node = next;
      }
      if (static_cast<size_t>(leaf) >= n_leaves)
        ctx.fail(ErrorKind::kInvalidModel, "leaf index out of range");
      double& acc = row[static_cast<size_t>(m.leaf_target[static_cast<size_t>(leaf)])];
      const double w = m.leaf_weight[static_cast<size_t>(leaf)];
      if (agg == 0) acc += w / static_cast<double>(roots.size());
      else if (agg == 1) acc += w;
      else if (agg == 2) acc = std::min(acc, w);
      else acc = std::max(acc, w);
    }
    post_transform(ctx, post, row.data(), n_targets);
    for (int64_t t = 0; t < n_targets; ++t)
      y.set_double(r * n_targets + t, row[static_cast<size_t>(t)]);
  }
  ctx.set_output(0, std::move(y));
}

// ---- Normalizer, Scaler, Imputer ----------------------------------------------------------------

void normalizer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string norm = ctx.attr_string("norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2")
    ctx.fail(ErrorKind::kInvalidModel, "norm should be MAX, L1 or L2, got '" + norm + "'");
  int64_t n, f;
  rows_cols(x, &n, &f);
  Tensor y(DType::kFloat32, x.dims());
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    if (norm == "MAX") {
      s = -INFINITY;
      for (int64_t j = 0; j < f; ++j) s = std::max(s, x.get_double(r * f + j));
    } else {
      for (int64_t j = 0; j < f; ++j) {
        const double v = x.get_double(r * f + j);
        s += norm == "L1" ? std::abs(v) : v * v;
      }
      if (norm == "L2") s = std::sqrt(s);
    }
    for (int64_t j = 0; j < f; ++j)
      y.data<float>()[r * f + j] = static_cast<float>(s == 0 ? x.get_double(r * f + j)
                                                             : x.get_double(r * f + j) / s);
  }
  ctx.set_output(0, std::move(y));
}

// Per-feature parameter j of a list holding one value for all features or one per feature.
double per_feature(const KernelContext& ctx, const std::vector<float>& v, int64_t j, int64_t f,
                   double fallback, const char* what) {
  if (v.empty()) return fallback;
  if (v.size() == 1) return v[0];
  if (static_cast<int64_t>(v.size()) != f)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " has " + std::to_string(v.size()) +
                                       " entries but X has " + std::to_string(f) + " features");
  return v[static_cast<size_t>(j)];
}

void scaler_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<float> offset = ctx.attr_floats("offset"), scale = ctx.attr_floats("scale");
  int64_t n, f;
  rows_cols(x, &n, &f);
  Tensor y(DType::kFloat32, x.dims());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < f; ++j)
      y.data<float>()[r * f + j] = static_cast<float>(
          (x.get_double(r * f + j) - per_feature(ctx, offset, j, f, 0, "offset")) *
          per_feature(ctx, scale, j, f, 1, "scale"));
  ctx.set_output(0, std::move(y));
}

void imputer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t n, f;
  rows_cols(x, &n, &f);
  Tensor y = x.clone();
  if (x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat64) {
    const std::vector<float> imp = ctx.attr_floats("imputed_value_floats");
    const double repl = ctx.attr_float("replaced_value_float", 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < f; ++j) {
        const double v = x.get_double(r * f + j);
        if (v == repl || (std::isnan(repl) && std::isnan(v)))
          y.set_double(r * f + j, per_feature(ctx, imp, j, f, v, "imputed_value_floats"));
      }
  } else {
    const std::vector<int64_t> imp = ctx.attr_ints("imputed_value_int64s");
    const int64_t repl = ctx.attr_int("replaced_value_int64", 0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < f; ++j)
        if (x.get_int(r * f + j) == repl) {
          if (imp.size() != 1 && static_cast<int64_t>(imp.size()) != f)
            ctx.fail(ErrorKind::kBadInput, "imputed_value_int64s does not match the features");
          y.set_double(r * f + j, static_cast<double>(imp[imp.size() == 1 ? 0 : j]));
        }
  }
  ctx.set_output(0, std::move(y));
}

// ---- OneHotEncoder, FeatureVectorizer, LinearRegressor ------------------------------------------

void one_hot_encoder_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::map<std::string, int64_t> cats;
  Tensor keys = ctx.has_attr("cats_strings") ? strings_tensor(ctx.attr_strings("cats_strings"))
                                             : ints_tensor(ctx.attr_ints("cats_int64s"));
  for (int64_t i = 0; i < keys.numel(); ++i) cats.emplace(lookup_key(keys, i), i);
  const bool zeros = ctx.attr_int("zeros", 1) != 0;
  const int64_t c = keys.numel();
  std::vector<int64_t> dims(x.dims());
  dims.push_back(c);
  Tensor y(DType::kFloat32, dims);
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto it = cats.find(lookup_key(x, i));
    if (it != cats.end()) y.data<float>()[i * c + it->second] = 1.0f;
    else if (!zeros) ctx.fail(ErrorKind::kBadInput, "value is not a known category (zeros=0)");
  }
  ctx.set_output(0, std::move(y));
}

void feature_vectorizer_kernel(KernelContext& ctx) {
  const std::vector<int64_t> widths = ctx.attr_ints("inputdimensions");
  if (static_cast<int>(widths.size()) != ctx.num_inputs())
    ctx.fail(ErrorKind::kInvalidModel, "inputdimensions should have one entry per input");
  int64_t n = -1, total = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    int64_t rn, rf;
    rows_cols(ctx.input(i), &rn, &rf);
    if (ctx.input(i).rank() <= 1) rn = 1;
    if (n >= 0 && rn != n) ctx.fail(ErrorKind::kBadInput, "inputs differ in batch size");
    n = rn;
    total += widths[static_cast<size_t>(i)];
  }
  Tensor y(DType::kFloat32, {std::max<int64_t>(n, 0), total});
  int64_t col = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t w = widths[static_cast<size_t>(i)];
    const int64_t tf = t.rank() == 0 ? 1 : t.dim(t.rank() - 1);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < std::min(w, tf); ++j)  // short inputs are zero-padded
        y.data<float>()[r * total + col + j] = static_cast<float>(t.get_double(r * tf + j));
    col += w;
  }
  ctx.set_output(0, std::move(y));
}

void linear_regressor_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<float> coef = ctx.attr_floats("coefficients");
  const std::vector<float> bias = ctx.attr_floats("intercepts");
  const int64_t targets = ctx.attr_int("targets", 1);
  const std::string post = ctx.attr_string("post_transform", "NONE");
  int64_t n, f;
  rows_cols(x, &n, &f);
  if (targets < 1 || static_cast<int64_t>(coef.size()) != targets * f)
    ctx.fail(ErrorKind::kBadInput, "coefficients should hold targets x features = " +
                                       std::to_string(targets * f) + " values, got " +
                                       std::to_string(coef.size()));
  Tensor y(DType::kFloat32, {n, targets});
  std::vector<double> row(static_cast<size_t>(targets));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t t = 0; t < targets; ++t) {
      double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(t) % bias.size()];
      for (int64_t j = 0; j < f; ++j)
        acc += coef[static_cast<size_t>(t * f + j)] * x.get_double(r * f + j);
      row[static_cast<size_t>(t)] = acc;
    }
    post_transform(ctx, post, row.data(), targets);
    for (int64_t t = 0; t < targets; ++t)
      y.data<float>()[r * targets + t] = static_cast<float>(row[static_cast<size_t>(t)]);
  }
  ctx.set_output(0, std::move(y));
}

void zipmap_kernel(KernelContext& ctx) {
  ctx.fail(ErrorKind::kUnsupported, "ZipMap produces maps, which kiln does not support");
}

}  // namespace

void register_ml_ops(OpRegistry& r) {
  r.add("LabelEncoder", kMl).since(1).inputs(1).outputs(1).run(label_encoder_kernel);
  r.add("Binarizer", kMl).since(1).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(binarizer_kernel).shape(infer_same_as_input0);
  r.add("ArrayFeatureExtractor", kMl).since(1).inputs(2).outputs(1)
      .run(array_feature_extractor_kernel);
  r.add("TreeEnsemble", kMl).since(5).inputs(1).outputs(1).run(tree_ensemble_kernel).via_float();
  r.add("Normalizer", kMl).since(1).inputs(1).outputs(1).run(normalizer_kernel);
  r.add("Scaler", kMl).since(1).inputs(1).outputs(1).run(scaler_kernel);
  r.add("Imputer", kMl).since(1).inputs(1).outputs(1).run(imputer_kernel);
  r.add("OneHotEncoder", kMl).since(1).inputs(1).outputs(1).run(one_hot_encoder_kernel);
  r.add("FeatureVectorizer", kMl).since(1).inputs(1, -1).outputs(1)
      .run(feature_vectorizer_kernel);
  r.add("LinearRegressor", kMl).since(1).inputs(1).outputs(1).run(linear_regressor_kernel);
  r.add("ZipMap", kMl).since(1).inputs(1).outputs(1).run(zipmap_kernel);
}

}  // namespace kiln
