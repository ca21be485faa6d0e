// `kiln quantize` / kiln.quantize: post-training quantization of an ONNX file into a QDQ ONNX
// file — static (calibrated activation ranges) or dynamic (weights only, activations per run) —
// with a per-tensor accuracy report against the float model.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "driver/quantize/calibration.h"
#include "pass/insert_qdq.h"

namespace kiln {

struct QuantizeModelOptions {
  bool dynamic = false;                 // MatMul/Gemm weights int8, activations quantized per run
  QdqOptions qdq;                       // activation type, per-channel weights, exclusions
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.999;           // for kPercentile
  std::string calibration_dir;          // samples (calibration.h: read_calibration_dir)
  std::string image_preprocess;         // preset for image files in calibration_dir (calibration.h)
  std::vector<CalibrationSample> samples;  // in-memory samples (the Python API), before the folder's
  int calibration_random = 0;           // or this many seeded random samples (a smoke run)
  uint64_t seed = 0;
  std::map<std::string, int64_t> dims;  // symbolic dims of random samples (others: 1)
  int threads = 1;
  std::string report_path;              // .json or .html: per-tensor SQNR / cosine vs float
  int report_samples = 8;               // calibration samples the report runs (first ones)
  ProgressFn progress;                  // calibration progress (static only)
};

// Accuracy of one quantized tensor, or of a model output, against the float model.
struct TensorAccuracy {
  std::string name;
  std::string node;     // producer (display name), empty for graph inputs
  std::string op;
  double sqnr_db = 0;   // 10 log10(sum x^2 / sum (x - xq)^2); +inf when identical
  double cosine = 1;
  TensorRange range;    // calibrated range (static)
  float scale = 0;
  int32_t zero_point = 0;
};

struct QuantizeModelResult {
  size_t nodes_before = 0, nodes_after = 0;
  int quantized_activations = 0, quantized_weights = 0, quantized_biases = 0, dynamic_nodes = 0;
  int samples = 0;           // calibration samples
  int compared_samples = 0;  // samples the report ran
  std::vector<std::string> notes;
  std::vector<TensorAccuracy> outputs;  // model outputs (report only)
  std::vector<TensorAccuracy> tensors;  // quantized activations, worst SQNR first (report only)
  std::map<std::string, QdqResult::FloatOps> float_ops;  // static: nodes left in float, by op
  double calibration_s = 0, report_s = 0, total_s = 0;
};

QuantizeModelResult quantize_model_file(const std::string& in_path, const std::string& out_path,
                                        const QuantizeModelOptions& opts);

// The report as JSON (.json) or an HTML table (any other extension); kUsage when unwritable.
void write_quantize_report(const QuantizeModelResult& r, const std::string& model_path, const std::string& path);

}  // namespace kiln
