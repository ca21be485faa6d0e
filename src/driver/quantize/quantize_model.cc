// quantize_model_file: load → standard-ONNX clean-up passes → calibrate → insert Q/DQ (or the
// dynamic rewrite) → save, and the accuracy report that runs the float and quantized models
// side by side on the first calibration samples.
#include "driver/quantize/quantize_model.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "driver/compile_model.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"
#include "pass/quantize_dynamic.h"
#include "pass/upgrade_opset13.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Passes whose rewrites quantization profits from and whose output any runtime runs:
// BatchNormalization and scales folded into the weights before they are quantized; decomposed
// activations (HardSwish, SiLU, GELU, LayerNorm) as one op each, so that their output is what
// gets quantized, not the wide intermediates (the export writes them back as standard ops).
const std::vector<std::string> kPrepare = {"shape-inference", "constant-folding", "dce",
                                           "cse",             "simplify",         "fold-batchnorm",
                                           "fold-scale-bias", "fuse-composites",  "dce"};

std::vector<std::vector<RtValue>> calibration_feeds(const Model& m, const QuantizeModelOptions& opts) {
  std::vector<std::vector<RtValue>> feeds;
  SessionOptions so;  // interpreter: only to read and bind the samples against the inputs
  Session binder(m, so);
  for (const auto& sample : opts.samples) feeds.push_back(binder.bind(sample));
  if (!opts.calibration_dir.empty()) {
    std::unique_ptr<ImageSampleReader> images;
    if (!opts.image_preprocess.empty()) {
      if (binder.feed_inputs().size() != 1)
        throw Error(ErrorKind::kUsage, "--calibration-preprocess: the model has " +
                                           std::to_string(binder.feed_inputs().size()) +
                                           " inputs; image samples feed single-input models");
      images = std::make_unique<ImageSampleReader>(opts.image_preprocess, *binder.feed_inputs()[0], opts.dims);
    }
    for (const auto& sample : read_calibration_dir(binder, opts.calibration_dir, images.get()))
      feeds.push_back(binder.bind(sample));
  }
  for (int i = 0; i < opts.calibration_random; ++i) feeds.push_back(random_feeds(m, opts.dims, opts.seed + i));
  return feeds;
}

// Sums for SQNR and cosine similarity between a float tensor x and its quantized version y.
struct ErrorSums {
  double xx = 0, ee = 0, xy = 0, yy = 0;
  bool shape_mismatch = false;
  void add(const RtValue& x, const RtValue& y) {
    if (!x.is_tensor() || !y.is_tensor() || x.tensor.dims() != y.tensor.dims()) {
      shape_mismatch = true;
      return;
    }
    for (int64_t i = 0; i < x.tensor.numel(); ++i) {
      const double a = x.tensor.get_double(i), b = y.tensor.get_double(i);
      xx += a * a;
      yy += b * b;
      xy += a * b;
      ee += (a - b) * (a - b);
    }
  }
  double sqnr_db() const {
    if (ee == 0) return std::numeric_limits<double>::infinity();
    return xx == 0 ? -std::numeric_limits<double>::infinity() : 10 * std::log10(xx / ee);
  }
  double cosine() const { return xx == 0 || yy == 0 ? (xx == yy ? 1 : 0) : xy / std::sqrt(xx * yy); }
};

void describe_producer(const Model& m, const std::string& name, TensorAccuracy& a) {
  const Value* v = m.graph->find_local(name);
  if (v && v->producer) {
    a.node = v->producer->display_name();
    a.op = v->producer->op_type;
  }
}

// Runs the float model (with the quantized activations as extra outputs) and the quantized one
// (with their DequantizeLinear outputs) on the same feeds and compares each pair.
void measure_accuracy(const Model& float_model, const Model& quantized, const QdqResult& qdq,
                      const std::vector<std::vector<RtValue>>& feeds, const QuantizeModelOptions& opts,
                      QuantizeModelResult& r) {
  SessionOptions so;
  so.engine = Engine::kCompiled;
  so.threads = opts.threads;
  const size_t n_out = float_model.graph->outputs.size();
  Session fs(with_extra_outputs(float_model, qdq.quantized_tensors), so);
  Session qs(with_extra_outputs(quantized, qdq.dequantized_outputs), so);
  std::vector<ErrorSums> sums(n_out + qdq.quantized_tensors.size());
  const size_t n = std::min(feeds.size(), static_cast<size_t>(std::max(opts.report_samples, 1)));
  r.compared_samples = static_cast<int>(n);
  for (size_t s = 0; s < n; ++s) {
    std::vector<RtValue> a = fs.run(feeds[s]), b = qs.run(feeds[s]);
    for (size_t i = 0; i < sums.size() && i < a.size() && i < b.size(); ++i) sums[i].add(a[i], b[i]);
  }
  for (size_t i = 0; i < sums.size(); ++i) {
    TensorAccuracy acc;
    acc.name = i < n_out ? float_model.graph->outputs[i]->name : qdq.quantized_tensors[i - n_out];
    acc.sqnr_db = sums[i].sqnr_db();
    acc.cosine = sums[i].cosine();
    describe_producer(float_model, acc.name, acc);
    if (sums[i].shape_mismatch) r.notes.push_back("report: " + acc.name + " differs in shape or type; not compared");
    (i < n_out ? r.outputs : r.tensors).push_back(acc);
  }
}

void quantize_static(Model& m, const QuantizeModelOptions& opts, const std::vector<std::vector<RtValue>>& feeds,
                     QuantizeModelResult& r, QdqResult& qdq) {
  std::vector<std::string> names;
  for (const Value* v : qdq_candidates(m, opts.qdq)) names.push_back(v->name);
  const auto t0 = Clock::now();
  std::map<std::string, TensorStats> stats = collect_statistics(m, names, feeds, opts.threads, opts.progress);
  r.calibration_s = seconds_since(t0);
  std::map<std::string, TensorRange> ranges;
  for (const auto& name : names) {
    auto it = stats.find(name);
    if (it == stats.end() || it->second.count() == 0) {
      r.notes.push_back(name + ": no finite calibration values; left float");
      continue;
    }
    ranges[name] = it->second.range(opts.method, opts.percentile);
  }
  qdq = insert_qdq(m, ranges, opts.qdq);
  for (const auto& name : qdq.quantized_tensors) {
    TensorAccuracy a;
    a.name = name;
    a.range = ranges.at(name);
    const QuantParams p = activation_quant_params(a.range, opts.qdq.activation_dtype);
    a.scale = p.scale;
    a.zero_point = p.zero_point;
    r.tensors.push_back(a);
  }
  r.quantized_activations = static_cast<int>(qdq.quantized_tensors.size());
  r.quantized_weights = qdq.quantized_weights;
  r.quantized_biases = qdq.quantized_biases;
  r.notes.insert(r.notes.end(), qdq.notes.begin(), qdq.notes.end());
  r.float_ops = qdq.float_ops;
}

}  // namespace

QuantizeModelResult quantize_model_file(const std::string& in_path, const std::string& out_path,
                                        const QuantizeModelOptions& opts) {
  const auto start = Clock::now();
  if (opts.calibration_random < 0) throw Error(ErrorKind::kUsage, "--calibration-random must be >= 0");
  if (!opts.image_preprocess.empty() && opts.calibration_dir.empty())
    throw Error(ErrorKind::kUsage, "--calibration-preprocess is for image files in --calibration DIR");
  if (!(opts.percentile > 0 && opts.percentile <= 100))
    throw Error(ErrorKind::kUsage, "--percentile must be in (0, 100]");
  Model m = load_onnx_model(in_path);
  QuantizeModelResult r;
  r.nodes_before = m.graph->node_count_recursive();
  PassContext ctx;
  run_passes(m, kPrepare, ctx);
  const int64_t opset = m.opset("");
  if (!opts.dynamic) check_qdq_opset(m);  // before calibrating
  if (!opts.dynamic && opts.qdq.per_channel && opset < 13 && opset >= 11) {
    // Per-channel DequantizeLinear needs opset 13; without it weights are per tensor.
    if (std::string why = upgrade_to_opset13(m); why.empty())
      r.notes.push_back("converted from opset " + std::to_string(opset) + " to 13 for per-channel weights");
    else
      r.notes.push_back("not converted to opset 13 (" + why + ")");
  }
  const std::vector<std::vector<RtValue>> feeds = calibration_feeds(m, opts);
  r.samples = static_cast<int>(feeds.size());
  if (!opts.dynamic && feeds.empty())
    throw Error(ErrorKind::kUsage, "static quantization needs calibration samples: --calibration DIR or "
                                   "--calibration-random N (a smoke run), or --dynamic");
  const std::string float_bytes = opts.report_path.empty() ? "" : serialize_onnx_model(m);
  QdqResult qdq;
  if (opts.dynamic) {
    DynamicQuantResult d = quantize_dynamic(m, opts.qdq);
    r.dynamic_nodes = d.quantized_nodes;
    r.quantized_weights = d.quantized_nodes;
    r.notes.insert(r.notes.end(), d.notes.begin(), d.notes.end());
  } else {
    quantize_static(m, opts, feeds, r, qdq);
  }
  if (r.quantized_weights == 0 && r.quantized_activations == 0)
    r.notes.push_back("nothing was quantized (no quantizable op outside --exclude)");
  r.nodes_after = m.graph->node_count_recursive();
  save_onnx_model(m, out_path);
  if (!opts.report_path.empty()) {
    if (feeds.empty()) throw Error(ErrorKind::kUsage, "--report needs samples: --calibration DIR or --calibration-random N");
    const auto t0 = Clock::now();
    Model float_model = load_onnx_model_from_bytes(float_bytes.data(), float_bytes.size(), in_path);
    Model quantized = load_onnx_model(out_path);
    std::vector<TensorAccuracy> calibrated = std::move(r.tensors);
    r.tensors.clear();
    measure_accuracy(float_model, quantized, qdq, feeds, opts, r);
    for (size_t i = 0; i < r.tensors.size() && i < calibrated.size(); ++i) {
      r.tensors[i].range = calibrated[i].range;
      r.tensors[i].scale = calibrated[i].scale;
      r.tensors[i].zero_point = calibrated[i].zero_point;
    }
    std::stable_sort(r.tensors.begin(), r.tensors.end(),
                     [](const TensorAccuracy& a, const TensorAccuracy& b) { return a.sqnr_db < b.sqnr_db; });
    r.report_s = seconds_since(t0);
    write_quantize_report(r, in_path, opts.report_path);
  }
  r.total_s = seconds_since(start);
  return r;
}

}  // namespace kiln
