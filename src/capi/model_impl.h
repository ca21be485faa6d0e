// The C API's model interface (include/kiln/c_api.h is its C face): one implementation per
// kind of model (compiled plan, forwarded compiled library, ONNX through the JIT), plus the
// argument checks they share. Internal to src/capi.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/run_control.h"
#include "core/value.h"
#include "kiln/c_api.h"
#include "runtime/exec_plan.h"

namespace kiln::capi {

// An error carrying its C status (for errors that do not come from a kiln::Error).
struct StatusError {
  kiln_status status;
  std::string message;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;  // -1: symbolic
};

class ModelImpl {
 public:
  virtual ~ModelImpl() = default;
  virtual void run(const kiln_tensor* inputs, size_t num_inputs, kiln_tensor* outputs, size_t num_outputs) = 0;
  // kiln_cancel: the runs that opened their scope with `canceller` stop at their next check.
  virtual void cancel() { canceller.cancel(); }
  std::vector<TensorInfo> inputs, outputs;
  // Compiled models: the inputs of each signature the library runs (kiln_model_num_signatures).
  std::vector<std::vector<TensorInfo>> signatures;
  Canceller canceller;
  double timeout_s = 0;  // kiln_options.run_timeout_ms
};

// kiln_options fields, 0 when `o` is NULL or predates them (struct_size).
int64_t max_memory_of(const kiln_options* o);
double timeout_of(const kiln_options* o);
// kiln_options.records, or "" (absent or NULL).
std::string records_of(const kiln_options* o);

// Checks the tensor counts and each input against `info`; returns views of the caller's data.
std::vector<Tensor> input_views(const std::vector<TensorInfo>& info, const kiln_tensor* inputs, size_t num_inputs,
                                size_t num_outputs, size_t expected_outputs);
// Checks each output's dtype and data pointer; returns the buffers.
std::vector<OutputBuffer> output_buffers(const std::vector<TensorInfo>& info, kiln_tensor* outputs);
// Sets rank and dims of each output from the run's results.
void set_output_dims(const std::vector<RtValue>& results, kiln_tensor* outputs);

#ifdef KILN_CAPI_FULL
// ONNX models (onnx_model.cc, libkiln only): the compiled engine, JIT.
// `offload`: comma-separated external backends (kiln_options.offload).
std::unique_ptr<ModelImpl> load_onnx_file(const std::string& path, int threads, int64_t max_memory,
                                          const std::string& records, const std::string& offload);
std::unique_ptr<ModelImpl> load_onnx_bytes(const void* data, size_t size, int threads, int64_t max_memory,
                                           const std::string& records, const std::string& offload);
#endif

}  // namespace kiln::capi
