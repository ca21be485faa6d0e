// Graph passes: each pass is a plain Model -> Model rewrite in its own file with a name and a
// one-line summary; the pass manager runs a linear pipeline with verification, timing and IR
// dumps between passes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/extension.h"

namespace kiln {

struct PassStat {
  std::string pass;
  double ms = 0;
  size_t nodes_after = 0;
  std::map<std::string, int64_t> histogram_after;
};

// What the engine's int8 GEMM runs faster than float32 on this CPU (driver/engine_passes.h sets
// it from the kernels; qdq-to-integer reads it): kFull with a dot-product instruction (AVX-512
// VNNI), kSevenBit where only MatMul weights within [-64, 63] are (AVX2: vpmaddubsw), kNone
// without.
enum class Int8Gemm { kNone, kSevenBit, kFull };

// Why a node stayed native under --offload (annotate-external, partition-external), for
// `kiln inspect --offload`.
struct OffloadNote {
  std::string node, op, reason;
};

struct PassContext {
  std::set<std::string> disabled;    // pass names to skip
  bool verify = false;               // run the verifier after every pass
  bool time = false;                 // log each pass's wall time to `log`
  std::string print_ir_after;        // pass name, or "all": print the IR to `log` after it
  std::string dump_dir;              // write NN-<pass>.kir after every pass into this folder
  std::ostream* log = nullptr;       // where timing and printed IR go (default std::cerr)
  int64_t fold_max_elements = 1 << 20;  // constant folding leaves larger results unfolded
  Int8Gemm int8_gemm = Int8Gemm::kFull;
  // External backends nodes may be offloaded to, first choice first (--offload); empty: the
  // external passes (annotate-external ... external-codegen) change nothing.
  std::vector<std::shared_ptr<const ext::Backend>> offload;
  // The backend of `offload` named `name`, or null.
  const ext::Backend* offload_backend(const std::string& name) const {
    for (const auto& b : offload)
      if (b->name() == name) return b.get();
    return nullptr;
  }
  // Regions cheaper than this stay native; negative: each backend's min_region_cost.
  double offload_min_cost = -1;
  std::vector<OffloadNote> offload_notes;  // filled by the external passes
  std::vector<PassStat> stats;       // filled by run_passes, one entry per pass that ran
};

struct PassInfo {
  std::string name;
  std::string summary;
  // Rewrites the model in place; returns true when it changed something.
  bool (*run)(Model& m, PassContext& ctx) = nullptr;
  // Part of default_pipeline(); off for passes whose result no engine runs faster yet.
  bool in_default_pipeline = true;
};

// Every registered pass, in default-pipeline order first.
const std::vector<PassInfo>& all_passes();
const PassInfo* find_pass(const std::string& name);
// The default optimization pipeline (names), in order: what every entry point (CLI, bench,
// Python, C API, AOT) runs before the compiled engine.
std::vector<std::string> default_pipeline();
// "a, b,c" -> {"a", "b", "c"}: a `sep`-separated list of names, blanks trimmed, empty items
// dropped (pass lists: --passes/--disable, KILN_DISABLE_PASSES; backend lists: kiln_options.offload;
// plugin paths: KILN_BACKEND_PLUGINS with ':').
std::vector<std::string> split_names(const std::string& list, char sep = ',');
// Runs the named passes in order (unknown name -> kUsage error listing the passes).
void run_passes(Model& m, const std::vector<std::string>& names, PassContext& ctx);

// Op histogram of a graph including subgraphs (used in stats and by inspect).
std::map<std::string, int64_t> op_histogram(const Graph& g);

}  // namespace kiln
