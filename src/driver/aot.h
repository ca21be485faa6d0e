// Ahead-of-time export (`kiln compile MODEL -o model.so`): compiles the model for one or more
// input-shape signatures and writes ONE shared library holding the generated kernels
// (codegen::emit_object for the chosen target; a kernel with dim params serves every signature),
// an execution plan per signature and the weights (one 64-byte aligned blob in .rodata, used in
// place, shared by the plans), and the C API (include/kiln/c_api.h) over libkiln_runtime linked
// statically. A run picks the plan of its input shapes.
// CompiledLibrary opens such a library from C++ (as `kiln run model.so` does).
// Docs: docs/c_api.md. Tests: tests/capi/test_c_api.cc, ctest aot_resnet50.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "driver/offload.h"
#include "driver/compiled_executor.h"

namespace kiln {

inline constexpr size_t kMaxSignatures = 64;

struct AotOptions {
  // LLVM CPU of the kernels: "native" (this machine), "x86-64-v3" (AVX2), "x86-64-v4" (AVX-512).
  std::string target = "native";
  // Sizes of symbolic input dims (others: 1): the library holds a plan for every combination
  // of the listed sizes (at most kMaxSignatures) and runs exactly those input shapes.
  std::map<std::string, std::vector<int64_t>> dims;
  // Whole shapes of inputs (binds symbolic dims that have no name), the same in every signature.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Input files (.npy/.pb, by embedded name or position) for the compile run instead of random
  // values: for models whose plan depends on input values (silero-VAD's sample rate picks an
  // If branch that only works with it). The library's one signature is their shapes.
  std::vector<std::string> input_files;
  int threads = 1;                      // threads of the compile run
  // Tuned kernel choices (tune::load_tuning): kept in the library's plans.
  std::shared_ptr<const gemm_ops::TuningTable> tuning;
  // External backends (--offload): their regions are kept in the plans and the backends linked
  // into the library (built-in ones only: dnnl).
  std::vector<std::string> offload;
  double offload_min_cost = -1;
  std::shared_ptr<const OffloadTable> tuned_offload;  // tune::load_offload_choices (when `offload` is empty)
  uint64_t seed = 0;                    // seed of the random inputs of the compile run
  // libkiln_runtime.a to link: "" takes $KILN_RUNTIME_LIB, else the one this kiln was built with.
  std::string runtime_archive;
  std::string cxx;  // compiler driver for linking: "" takes $CXX, else "c++"
  bool keep_temps = false;  // keep the temporary directory (object, blob, assembler) for debugging
};

struct AotResult {
  CompileStats stats;         // of the first signature's plan
  int signatures = 0;         // entry plans in the library (one per input-shape signature)
  int branch_plans = 0;       // plans of If branches
  int kernels = 0;            // distinct kernels in the library (shared by the plans)
  uint64_t blob_bytes = 0;     // plans + constants
  uint64_t library_bytes = 0;  // the .so
  double plan_ms = 0;          // load, passes, plan (incl. the JIT of the compile run)
  double object_ms = 0;        // codegen::emit_object
  double link_ms = 0;          // blob, assembler and `c++ -shared`
  double total_ms = 0;
};

// Compiles `model_path` (ONNX) into the shared library `out_path`. If nodes become kIf steps
// with a plan per branch (the compile runs plan the branch they do not take as well, on the
// same values; a branch that fails there has no plan and fails when taken). Throws kUnsupported
// naming every node that would run on a reference kernel, Loop and Scan (those cannot be
// exported), and kUsage when the link fails (with the linker's message).
AotResult compile_shared_library(const std::string& model_path, const std::string& out_path, const AotOptions& opts);

// True when `path` is an ELF file (a compiled model library rather than an ONNX model).
bool is_shared_library_file(const std::string& path);

// A compiled model library opened with dlopen, run through its own C API.
class CompiledLibrary {
 public:
  struct Info {
    std::string name;
    DType dtype;
    std::vector<int64_t> dims;
  };
  // `max_memory_bytes` and `run_timeout_ms` as kiln_options has them (0: none).
  static std::unique_ptr<CompiledLibrary> open(const std::string& path, int threads = 1, int64_t max_memory_bytes = 0,
                                               int64_t run_timeout_ms = 0);
  ~CompiledLibrary();
  const std::vector<Info>& inputs() const { return inputs_; }
  const std::vector<Info>& outputs() const { return outputs_; }
  // The inputs of each input-shape signature the library was compiled for; a dim that differs
  // between them is -1 in inputs() and outputs().
  const std::vector<std::vector<Info>>& signatures() const { return signatures_; }
  // Inputs in input order (dtype and dims of one signature); returns fresh output tensors.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  struct Api;

 private:
  CompiledLibrary() = default;
  std::unique_ptr<Api> api_;
  void* model_ = nullptr;
  std::vector<Info> inputs_, outputs_;
  std::vector<std::vector<Info>> signatures_;
};

}  // namespace kiln
