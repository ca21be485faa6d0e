// Calibration for static quantization: the samples a model is run on, the statistics kept per
// activation (range and a histogram of |x|), and the ranges the methods derive from them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/session.h"
#include "pass/insert_qdq.h"

namespace kiln {

enum class CalibrationMethod { kMinMax, kEntropy, kPercentile };
// "minmax" | "entropy" | "percentile" (kUsage listing them otherwise).
CalibrationMethod parse_calibration_method(const std::string& name);

// min/max and a histogram of |x| over [0, limit); the limit doubles (merging bin pairs) when a
// value beyond it arrives, so one pass over the samples suffices.
class TensorStats {
 public:
  static constexpr int kBins = 2048;
  void add(const float* data, int64_t n);
  float min() const { return min_; }
  float max() const { return max_; }
  int64_t count() const { return count_; }
  // The range each method picks: minmax takes [min, max]; percentile clips |x| at the given
  // percentile of the |x| histogram; entropy clips |x| at the threshold whose 128-level
  // quantization of the histogram is closest in KL divergence (TensorRT's method). A clipped
  // range keeps the sign structure: [max(min, -t), min(max, t)].
  TensorRange range(CalibrationMethod method, double percentile) const;

 private:
  float entropy_threshold() const;
  float percentile_threshold(double percentile) const;
  void grow_to(float absmax);
  float min_ = 0, max_ = 0;
  int64_t count_ = 0;
  float limit_ = 0;  // histogram covers [0, limit_)
  std::vector<int64_t> hist_;
};

// One calibration sample: values bound by name (.pb) or position (.npy), as `kiln run -i` binds.
using CalibrationSample = std::vector<NamedValue>;

bool is_image_file(const std::string& path);
// "imagenet: RGB, ...; unit: ...": the --calibration-preprocess presets, for help texts.
std::string image_preprocess_help();

// Reads image files as samples of one image input: decoded, resized (bilinear, antialiased) to
// the input's H and W (symbolic ones from `dims`) and normalised by a preset (kUsage naming the
// input when it is not [1,3,H,W] / [1,H,W,3] float, or the preset is unknown).
class ImageSampleReader {
 public:
  ImageSampleReader(const std::string& preset, const Value& input, const std::map<std::string, int64_t>& dims);
  // kBadInput naming the file when it is not a decodable image.
  RtValue read(const std::string& path) const;

 private:
  std::shared_ptr<Model> graph_;  // the preprocessing graph (ImageDecoder ... Add)
};

// Samples from a folder: each subfolder (sorted by name) is one sample of the files it holds;
// a folder of files alone is one sample per file (single-input models); image files are read
// by `images` (kUsage when there is none). kBadInput naming the folder when there is nothing to
// read.
std::vector<CalibrationSample> read_calibration_dir(const Session& session, const std::string& dir,
                                                    const ImageSampleReader* images = nullptr);

struct CalibrationProgress {
  int done = 0, total = 0;
  double elapsed_s = 0;
};
using ProgressFn = std::function<void(const CalibrationProgress&)>;
// Draws the progress on stderr: a bar on a terminal, a line per quarter otherwise.
void print_progress(const CalibrationProgress& p);

// Runs `model` on the feeds of every sample with `tensors` (names of its main graph's values)
// as extra outputs, and returns each tensor's statistics. The compiled engine with `threads`.
std::map<std::string, TensorStats> collect_statistics(const Model& model, const std::vector<std::string>& tensors,
                                                      const std::vector<std::vector<RtValue>>& feeds, int threads,
                                                      const ProgressFn& progress);

// A copy of `model` (reloaded from its file) whose outputs also include `extra` (value names).
Model with_extra_outputs(const Model& model, const std::vector<std::string>& extra);

}  // namespace kiln
