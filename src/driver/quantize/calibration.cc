// Calibration: per-activation statistics over the calibration samples and the ranges the
// minmax / percentile / entropy methods take from them.
#include "driver/quantize/calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln {

CalibrationMethod parse_calibration_method(const std::string& name) {
  if (name == "minmax") return CalibrationMethod::kMinMax;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  throw Error(ErrorKind::kUsage, "--method " + name + ": expected minmax, entropy or percentile");
}

void TensorStats::grow_to(float absmax) {
  if (hist_.empty()) {
    hist_.assign(kBins, 0);
    limit_ = absmax > 0 ? absmax * (1 + 1e-6f) : 1e-30f;
  }
  while (absmax >= limit_) {  // double the range: bin pairs merge, edges stay aligned
    for (int i = 0; i < kBins / 2; ++i) hist_[i] = hist_[2 * i] + hist_[2 * i + 1];
    std::fill(hist_.begin() + kBins / 2, hist_.end(), 0);
    limit_ *= 2;
  }
}

void TensorStats::add(const float* data, int64_t n) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo, absmax = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = data[i];
    if (!std::isfinite(v)) continue;  // inf/NaN say nothing about a useful range
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    ++finite;
  }
  if (finite == 0) return;
  absmax = std::max(std::fabs(lo), std::fabs(hi));
  min_ = count_ == 0 ? lo : std::min(min_, lo);
  max_ = count_ == 0 ? hi : std::max(max_, hi);
  count_ += finite;
  grow_to(absmax);
  const double per_bin = kBins / static_cast<double>(limit_);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) continue;
    const int b = static_cast<int>(std::fabs(data[i]) * per_bin);
    ++hist_[std::min(b, kBins - 1)];
  }
}

float TensorStats::percentile_threshold(double percentile) const {
  const double target = count_ * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double seen = 0;
  for (int i = 0; i < kBins; ++i) {
    seen += static_cast<double>(hist_[i]);
    if (seen >= target) return limit_ * (i + 1) / kBins;
  }
  return limit_;
}

namespace {

// KL(p || q) over bins where p > 0; q's zero bins get a small floor (q is a smoothed
// expansion of p's quantization, so they are rare).
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double ps = 0, qs = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    ps += p[i];
    qs += q[i];
  }
  if (ps <= 0 || qs <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double pi = p[i] / ps, qi = std::max(q[i] / qs, 1e-12);
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

// TensorRT's entropy calibration over the |x| histogram: for each candidate threshold bin i,
// P is the histogram up to i with the clipped tail added to its last bin, Q is P merged into
// 128 levels and spread back over the non-empty bins; the threshold with the smallest
// KL(P || Q) wins.
float TensorStats::entropy_threshold() const {
  constexpr int kLevels = 128;
  double best = std::numeric_limits<double>::infinity();
  int best_i = kBins;
  std::vector<double> p, q;
  for (int i = kLevels; i <= kBins; i += 8) {
    p.assign(hist_.begin(), hist_.begin() + i);
    double tail = 0;
    for (int k = i; k < kBins; ++k) tail += static_cast<double>(hist_[k]);
    p[i - 1] += tail;
    q.assign(i, 0);
    for (int level = 0; level < kLevels; ++level) {
      const int begin = level * i / kLevels, end = (level + 1) * i / kLevels;
      double sum = 0;
      int nonzero = 0;
      for (int k = begin; k < end; ++k) {
        sum += static_cast<double>(hist_[k]);
        nonzero += hist_[k] > 0;
      }
      for (int k = begin; k < end && nonzero; ++k)
        if (hist_[k] > 0) q[k] = sum / nonzero;
    }
    const double kl = kl_divergence(p, q);
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return limit_ * best_i / kBins;
}

TensorRange TensorStats::range(CalibrationMethod method, double percentile) const {
  if (count_ == 0 || method == CalibrationMethod::kMinMax || hist_.empty()) return {min_, max_};
  const float t = method == CalibrationMethod::kEntropy ? entropy_threshold() : percentile_threshold(percentile);
  return {std::max(min_, -t), std::min(max_, t)};
}

namespace {

bool is_value_file(const std::filesystem::path& p) {
  return std::filesystem::is_regular_file(p) &&
         (p.extension() == ".npy" || p.extension() == ".pb" || is_image_file(p.string()));
}

CalibrationSample read_sample(const Session& session, const std::vector<std::string>& files,
                              const ImageSampleReader* images) {
  bool any_image = false;
  for (const auto& f : files) any_image |= is_image_file(f);
  if (!any_image) return session.read_inputs(files);
  if (!images)
    throw Error(ErrorKind::kUsage, files[0] + ": an image; give --calibration-preprocess (" + image_preprocess_help() +
                                       ")");
  if (files.size() != 1)
    throw Error(ErrorKind::kUsage, files[0] + ": image samples are one image per sample (single-input models)");
  return {NamedValue{"", images->read(files[0]), files[0]}};
}

std::vector<std::filesystem::path> sorted_entries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<CalibrationSample> read_calibration_dir(const Session& session, const std::string& dir,
                                                    const ImageSampleReader* images) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw Error(ErrorKind::kUsage, "--calibration " + dir + ": not a folder");
  std::vector<CalibrationSample> samples;
  std::vector<std::string> loose;
  for (const auto& p : sorted_entries(dir)) {
    if (fs::is_directory(p)) {
      std::vector<std::string> files;
      for (const auto& f : sorted_entries(p))
        if (is_value_file(f)) files.push_back(f.string());
      if (!files.empty()) samples.push_back(read_sample(session, files, images));
    } else if (is_value_file(p)) {
      loose.push_back(p.string());
    }
  }
  if (!samples.empty() && !loose.empty())
    throw Error(ErrorKind::kUsage, "--calibration " + dir + ": holds both sample folders and loose files (" +
                                       loose[0] + "); use one layout");
  if (!loose.empty() && session.feed_inputs().size() != 1)
    throw Error(ErrorKind::kUsage, "--calibration " + dir + ": the model has " +
                                       std::to_string(session.feed_inputs().size()) +
                                       " inputs; put each sample's files (one per input) in a subfolder");
  for (const auto& f : loose) samples.push_back(read_sample(session, {f}, images));
  if (samples.empty())
    throw Error(ErrorKind::kBadInput, "--calibration " + dir + ": no .npy, .pb or image files (a sample is a file, or a "
                                                               "subfolder of files, one per input)");
  return samples;
}

void print_progress(const CalibrationProgress& p) {
  static const bool tty = isatty(fileno(stderr));
  const double left = p.done ? p.elapsed_s / p.done * (p.total - p.done) : 0;
  std::ostringstream line;
  line << std::fixed << std::setprecision(1);
  if (tty) {
    const int width = 30, filled = p.total ? width * p.done / p.total : width;
    line << "\rcalibrating [" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << p.done << "/"
         << p.total << " samples, " << p.elapsed_s << " s, ~" << left << " s left " << (p.done == p.total ? "\n" : "");
  } else if (p.done == p.total || (p.total >= 4 && p.done % (p.total / 4) == 0)) {
    line << "calibrating: " << p.done << "/" << p.total << " samples, " << p.elapsed_s << " s\n";
  }
  std::cerr << line.str() << std::flush;
}

Model with_extra_outputs(const Model& model, const std::vector<std::string>& extra) {
  const std::string bytes = serialize_onnx_model(model);
  Model copy = load_onnx_model_from_bytes(bytes.data(), bytes.size(), model.path);
  copy.path = model.path;
  Graph& g = *copy.graph;
  for (const auto& name : extra) {
    Value* v = g.find_local(name);
    if (!v) throw Error(ErrorKind::kInternal, "calibration: no value '" + name + "' in the model");
    if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) g.outputs.push_back(v);
  }
  return copy;
}

std::map<std::string, TensorStats> collect_statistics(const Model& model, const std::vector<std::string>& tensors,
                                                      const std::vector<std::vector<RtValue>>& feeds, int threads,
                                                      const ProgressFn& progress) {
  // Graph inputs are observed from the feeds; the rest become extra outputs.
  const Graph& g0 = *model.graph;
  std::map<std::string, size_t> input_index;
  for (size_t i = 0; i < g0.inputs.size(); ++i) input_index[g0.inputs[i]->name] = i;
  std::vector<std::string> extra;
  for (const auto& t : tensors)
    if (!input_index.count(t)) extra.push_back(t);
  Model probe = with_extra_outputs(model, extra);
  const size_t first_extra = model.graph->outputs.size();
  SessionOptions so;
  so.engine = Engine::kCompiled;
  so.threads = threads;
  Session session(std::move(probe), so);
  std::map<std::string, size_t> output_index;
  const auto& outs = session.model().graph->outputs;
  for (size_t i = first_extra; i < outs.size(); ++i) output_index[outs[i]->name] = i;
  std::map<std::string, TensorStats> stats;
  auto observe = [&](const std::string& name, const RtValue& v) {
    if (v.is_tensor() && v.tensor.dtype() == DType::kFloat32)
      stats[name].add(v.tensor.data<float>(), v.tensor.numel());
  };
  const auto start = std::chrono::steady_clock::now();
  for (size_t s = 0; s < feeds.size(); ++s) {
    std::vector<RtValue> results = session.run(feeds[s]);
    for (const auto& t : tensors) {
      if (auto it = input_index.find(t); it != input_index.end()) observe(t, feeds[s][it->second]);
      else if (auto ot = output_index.find(t); ot != output_index.end()) observe(t, results[ot->second]);
    }
    if (progress) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress({static_cast<int>(s + 1), static_cast<int>(feeds.size()), el});
    }
  }
  return stats;
}

}  // namespace kiln
