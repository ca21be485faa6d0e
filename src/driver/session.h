// A loaded model ready to run: engine selection, input binding from files, seeded random
// inputs. The CLI and (later) the Python and C APIs sit on this.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/value.h"
#include "ir/graph.h"
#include "driver/compiled_executor.h"
#include "driver/offload.h"
#include "runtime/interpreter.h"

namespace kiln {

enum class Engine { kInterp, kCompiled };
// "interp" | "compiled"; throws kUsage otherwise.
Engine parse_engine(const std::string& name);

struct SessionOptions {
  Engine engine = Engine::kInterp;
  int threads = 1;
  uint64_t seed = 0;
  bool profile = false;
  bool optimize = false;  // interp engine: run the default pass pipeline first (compiled: always)
  int64_t max_memory_bytes = 0;  // memory budget (--max-memory); 0: none
  // Tuned kernel choices (compiled engine; tune::load_tuning reads a records file into them).
  std::shared_ptr<const gemm_ops::TuningTable> tuning;
  // External backends to offload regions to, first choice first (compiled engine; --offload).
  std::vector<std::string> offload;
  double offload_min_cost = -1;  // --offload-min-cost (negative: each backend's own threshold)
  // Backends `kiln tune` measured fastest per model (tune::load_offload_choices), applied when
  // `offload` is empty.
  std::shared_ptr<const OffloadTable> tuned_offload;
};

// "512M", "2GiB", "1.5G", "1000000": a byte count for --max-memory (kUsage naming `what` otherwise).
int64_t parse_byte_size(const std::string& text, const std::string& what);

// An input read from a file: the embedded name (.pb) or empty (.npy binds by position).
struct NamedValue {
  std::string name;
  RtValue value;
  std::string source;  // file path, for messages
};

class Session {
 public:
  static std::unique_ptr<Session> load(const std::string& path, const SessionOptions& opts);
  explicit Session(Model model, const SessionOptions& opts);

  const Model& model() const { return model_; }
  // Graph inputs that callers feed: those without an initializer default.
  std::vector<Value*> feed_inputs() const;
  // Reads .pb/.npy files, typed by the model's inputs where known.
  std::vector<NamedValue> read_inputs(const std::vector<std::string>& paths) const;
  // Binds named values by name and unnamed ones by position over feed_inputs(); every feed
  // input must be bound exactly once (kBadInput naming the missing or unknown one).
  std::vector<RtValue> bind(const std::vector<NamedValue>& values) const;
  // Seeded random values for the inputs; a shape with symbolic dims takes its dims from
  // `resolve` (kUsage when there is none).
  std::vector<RtValue> random_inputs(
      uint64_t seed, const std::function<std::vector<int64_t>(const Value&)>& resolve = nullptr) const;
  // Runs with values parallel to model().graph->inputs (None for defaulted ones).
  std::vector<RtValue> run(const std::vector<RtValue>& feeds);
  const std::vector<NodeTiming>& timings() const {
    return compiled_ ? compiled_->timings() : interp_->timings();
  }
  // The compiled executor (engine kCompiled), else nullptr.
  CompiledExecutor* compiled() const { return compiled_.get(); }

 private:
  Model model_;
  SessionOptions opts_;
  std::unique_ptr<Interpreter> interp_;
  std::unique_ptr<CompiledExecutor> compiled_;
};

// Reads one value file by extension (.npy or .pb); `hint` types .pb sequence/optional files.
NamedValue read_value_file(const std::string& path, const Type* hint);
// Session::bind for `model`'s graph inputs.
std::vector<RtValue> bind_inputs(const Model& model, const std::vector<NamedValue>& values);

}  // namespace kiln
