// C API models from ONNX files (libkiln only): a compiled-engine Session (default pass pipeline,
// plans JIT-compiled per input-shape signature), run with caller-provided output memory.
#include <mutex>

#include "capi/model_impl.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"
#include "runtime/thread_pool.h"
#include "tune/records.h"

namespace kiln::capi {
namespace {

TensorInfo info_of(const Value& v) {
  TensorInfo t;
  t.name = v.name;
  if (v.type.kind != Type::Kind::kTensor || !v.type.shape)
    throw StatusError{KILN_ERROR_UNSUPPORTED, "the C API runs tensor inputs and outputs of known rank; '" + v.name +
                                                  "' is " + to_string(v.type)};
  t.dtype = v.type.dtype;
  for (const Dim& d : v.type.shape->dims) t.dims.push_back(d.known() ? d.value : -1);
  return t;
}

class OnnxModel : public ModelImpl {
 public:
  OnnxModel(Model model, int threads, int64_t max_memory, const std::string& records, const std::string& offload) {
    SessionOptions so;
    so.max_memory_bytes = max_memory;
    so.engine = Engine::kCompiled;  // (runs the default pass pipeline)
    so.threads = threads > 0 ? threads : ThreadPool::default_threads();
    so.tuning = tune::load_tuning(records, so.threads);
    so.tuned_offload = tune::load_offload_choices(records, so.threads);
    so.offload = split_names(offload);
    session_ = std::make_unique<Session>(std::move(model), so);
    for (const Value* v : session_->feed_inputs()) inputs.push_back(info_of(*v));
    for (const Value* v : session_->model().graph->outputs) outputs.push_back(info_of(*v));
  }
  void run(const kiln_tensor* in, size_t nin, kiln_tensor* out, size_t nout) override {
    std::vector<Tensor> views = input_views(inputs, in, nin, nout, outputs.size());
    std::vector<OutputBuffer> bufs = output_buffers(outputs, out);
    const Graph& g = *session_->model().graph;
    std::vector<RtValue> feeds(g.inputs.size());
    size_t k = 0;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (!g.inputs[i]->initializer.defined()) feeds[i] = RtValue(views[k++]);
    std::vector<RtValue> results = session_->compiled()->run(feeds, bufs);
    set_output_dims(results, out);
  }

 private:
  std::unique_ptr<Session> session_;
};

}  // namespace

std::unique_ptr<ModelImpl> load_onnx_file(const std::string& path, int threads, int64_t max_memory,
                                          const std::string& records, const std::string& offload) {
  return std::make_unique<OnnxModel>(load_onnx_model(path), threads, max_memory, records, offload);
}

std::unique_ptr<ModelImpl> load_onnx_bytes(const void* data, size_t size, int threads, int64_t max_memory,
                                           const std::string& records, const std::string& offload) {
  return std::make_unique<OnnxModel>(load_onnx_model_from_bytes(data, size, "<memory>"), threads, max_memory,
                                     records, offload);
}

}  // namespace kiln::capi
