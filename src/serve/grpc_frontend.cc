// gRPC calls of the KServe v2 protocol, translated to and from the server's protocol-neutral
// requests (serve/inference.h).
#include "serve/grpc_frontend.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "kserve_v2.grpc.pb.h"
#include "serve/inference.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

grpc::Status to_grpc(const std::exception& e) {
  switch (status_of(e)) {
    case ServeStatus::kBadRequest: return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
    case ServeStatus::kNotFound: return {grpc::StatusCode::NOT_FOUND, e.what()};
    case ServeStatus::kUnavailable: return {grpc::StatusCode::UNAVAILABLE, e.what()};
    case ServeStatus::kTimeout: return {grpc::StatusCode::DEADLINE_EXCEEDED, e.what()};
    case ServeStatus::kInternal: return {grpc::StatusCode::INTERNAL, e.what()};
  }
  return {grpc::StatusCode::INTERNAL, e.what()};
}

template <class F>
grpc::Status guarded(F&& body) {
  try {
    body();
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return to_grpc(e);
  }
}

[[noreturn]] void bad(const std::string& m) { throw ServeError(ServeStatus::kBadRequest, m); }

// Typed contents (when a client sends no raw bytes): the field the protocol assigns to `t`'s
// dtype, converted element by element.
template <class T, class Field>
void copy_contents(Tensor& t, const Field& values, const std::string& where) {
  if (static_cast<int64_t>(values.size()) != t.numel())
    bad(where + ": " + std::to_string(values.size()) + " values for a shape of " + std::to_string(t.numel()) + " elements");
  T* dst = t.data<T>();
  for (int i = 0; i < values.size(); ++i) dst[i] = static_cast<T>(values[i]);
}

void fill_typed(Tensor& t, const inference::InferTensorContents& c, const std::string& where) {
  switch (t.dtype()) {
    case DType::kBool: return copy_contents<bool>(t, c.bool_contents(), where);
    case DType::kInt8: return copy_contents<int8_t>(t, c.int_contents(), where);
    case DType::kInt16: return copy_contents<int16_t>(t, c.int_contents(), where);
    case DType::kInt32: return copy_contents<int32_t>(t, c.int_contents(), where);
    case DType::kInt64: return copy_contents<int64_t>(t, c.int64_contents(), where);
    case DType::kUInt8: return copy_contents<uint8_t>(t, c.uint_contents(), where);
    case DType::kUInt16: return copy_contents<uint16_t>(t, c.uint_contents(), where);
    case DType::kUInt32: return copy_contents<uint32_t>(t, c.uint_contents(), where);
    case DType::kUInt64: return copy_contents<uint64_t>(t, c.uint64_contents(), where);
    case DType::kFloat32: return copy_contents<float>(t, c.fp32_contents(), where);
    case DType::kFloat64: return copy_contents<double>(t, c.fp64_contents(), where);
    default: bad(where + ": FP16/BF16 tensors travel in raw_input_contents");
  }
}

InferRequest from_proto(const inference::ModelInferRequest& p, const RequestLimits& limits) {
  InferRequest r;
  r.id = p.id();
  if (auto it = p.parameters().find("timeout"); it != p.parameters().end()) {
    const auto& v = it->second;
    if (v.has_int64_param() && v.int64_param() >= 0) r.timeout_us = v.int64_param();
    else if (v.has_uint64_param()) r.timeout_us = static_cast<int64_t>(std::min<uint64_t>(v.uint64_param(), uint64_t{1} << 40));
    else bad("parameters.timeout: expected microseconds >= 0");
  }
  const bool raw = p.raw_input_contents_size() > 0;
  if (raw && p.raw_input_contents_size() != p.inputs_size())
    bad(std::to_string(p.raw_input_contents_size()) + " raw_input_contents for " + std::to_string(p.inputs_size()) +
        " inputs: give one per input, or none");
  for (int i = 0; i < p.inputs_size(); ++i) {
    const auto& in = p.inputs(i);
    const std::string where = "inputs[" + std::to_string(i) + "] ('" + in.name() + "')";
    std::optional<DType> dt = dtype_of_kserve(in.datatype());
    if (!dt) bad(where + ".datatype: '" + in.datatype() + "' is not supported (BYTES is not)");
    std::vector<int64_t> dims(in.shape().begin(), in.shape().end());
    check_shape(dims, where + ".shape", limits);
    const uint64_t nbytes = static_cast<uint64_t>(element_count(dims)) * dtype_size(*dt);
    if (raw) {
      const std::string& bytes = p.raw_input_contents(i);
      if (bytes.size() != nbytes)
        bad(where + ": raw_input_contents holds " + std::to_string(bytes.size()) + " bytes, the shape needs " +
            std::to_string(nbytes));
      Tensor t = Tensor::uninitialized(*dt, dims);
      if (nbytes) std::memcpy(t.raw(), bytes.data(), nbytes);
      r.inputs.emplace_back(in.name(), std::move(t));
    } else {
      if (static_cast<uint64_t>(element_count(dims)) > static_cast<uint64_t>(p.ByteSizeLong()) + 1)
        bad(where + ": the shape holds more values than the request carries");
      Tensor t = Tensor::uninitialized(*dt, dims);
      fill_typed(t, in.contents(), where);
      r.inputs.emplace_back(in.name(), std::move(t));
    }
  }
  for (const auto& o : p.outputs()) r.outputs.push_back({o.name(), true});
  return r;
}

void to_proto(const ServedModel& m, const InferRequest& req, const std::vector<Tensor>& outputs,
              inference::ModelInferResponse& p) {
  p.set_model_name(m.name());
  p.set_model_version(m.version());
  p.set_id(req.id);
  for (size_t k = 0; k < m.outputs().size(); ++k) {
    if (!req.outputs.empty() && std::none_of(req.outputs.begin(), req.outputs.end(),
                                             [&](const RequestedOutput& o) { return o.name == m.outputs()[k].name; }))
      continue;
    const Tensor& t = outputs[k];
    auto* o = p.add_outputs();
    o->set_name(m.outputs()[k].name);
    o->set_datatype(kserve_datatype(t.dtype()).value_or("UNSUPPORTED"));
    for (int64_t d : t.dims()) o->add_shape(d);
    p.add_raw_output_contents(static_cast<const char*>(t.raw()), t.nbytes());
  }
}

void fill_metadata(const TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* p) {
  p->set_name(t.name);
  p->set_datatype(kserve_datatype(t.dtype).value_or("UNSUPPORTED"));
  for (int64_t d : t.shape) p->add_shape(d);
}

inference::DataType config_type(DType t) {
  inference::DataType out = inference::TYPE_INVALID;
  std::optional<std::string> n = kserve_datatype(t);
  if (n) inference::DataType_Parse("TYPE_" + *n, &out);
  return out;
}

void fill_config(const ServedModel& m, inference::ModelConfig* c) {
  const ModelConfig& mc = m.config();
  c->set_name(m.name());
  c->set_platform("onnx");
  c->set_backend("kiln");
  c->set_max_batch_size(static_cast<int32_t>(mc.max_batch_size));
  const size_t skip = mc.max_batch_size > 0 ? 1 : 0;
  for (const TensorMetadata& t : m.inputs()) {
    auto* in = c->add_input();
    in->set_name(t.name);
    in->set_data_type(config_type(t.dtype));
    for (size_t d = skip; d < t.shape.size(); ++d) in->add_dims(t.shape[d]);
  }
  for (const TensorMetadata& t : m.outputs()) {
    auto* out = c->add_output();
    out->set_name(t.name);
    out->set_data_type(config_type(t.dtype));
    for (size_t d = skip; d < t.shape.size(); ++d) out->add_dims(t.shape[d]);
  }
  auto* g = c->add_instance_group();
  g->set_count(mc.instances);
  g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  if (mc.dynamic_batching.enabled) {
    auto* b = c->mutable_dynamic_batching();
    for (int64_t s : mc.dynamic_batching.preferred_batch_size) b->add_preferred_batch_size(static_cast<int32_t>(s));
    b->set_max_queue_delay_microseconds(static_cast<uint64_t>(mc.dynamic_batching.max_queue_delay_us));
  }
}

}  // namespace

class GrpcFrontend::Service final : public inference::GRPCInferenceService::Service {
 public:
  Service(ModelManager& models, Metrics& metrics, const FrontendOptions& options)
      : models_(models), metrics_(metrics), limits_(options.limits), log_requests_(options.log_requests) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* r) override {
    r->set_ready(models_.all_ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* q,
                          inference::ModelReadyResponse* r) override {
    try {
      models_.find(q->name(), q->version());
      r->set_ready(true);
    } catch (const std::exception&) {
      r->set_ready(false);
    }
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* r) override {
    r->set_name("kiln");
    r->set_version("0.1.0");
    r->add_extensions("model_repository");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const inference::ModelMetadataRequest* q,
                             inference::ModelMetadataResponse* r) override {
    return logged("ModelMetadata", ctx, q->name(), guarded([&] {
      const ServedModel& m = *models_.find(q->name(), q->version())->model;
      r->set_name(m.name());
      r->add_versions(m.version());
      r->set_platform("onnx");
      for (const TensorMetadata& t : m.inputs()) fill_metadata(t, r->add_inputs());
      for (const TensorMetadata& t : m.outputs()) fill_metadata(t, r->add_outputs());
    }));
  }
  grpc::Status ModelConfig(grpc::ServerContext* ctx, const inference::ModelConfigRequest* q,
                           inference::ModelConfigResponse* r) override {
    return logged("ModelConfig", ctx, q->name(), guarded([&] {
                    fill_config(*models_.find(q->name(), q->version())->model, r->mutable_config());
                  }));
  }
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const inference::ModelInferRequest* q,
                          inference::ModelInferResponse* r) override {
    return logged("ModelInfer", ctx, q->model_name(), guarded([&] {
      std::shared_ptr<LoadedModel> model = find_model(models_, metrics_, q->model_name(), q->model_version());
      InferRequest req;
      try {
        req = from_proto(*q, limits_);
      } catch (const std::exception& e) {
        record_rejected(*model, e);
        throw;
      }
      InferResult result = run_inference(*model, req);
      to_proto(*model->model, req, result.outputs, *r);
    }));
  }
  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* q,
                               inference::RepositoryIndexResponse* r) override {
    for (const ModelState& s : models_.index()) {
      if (q->ready() && s.state != "READY") continue;
      auto* m = r->add_models();
      m->set_name(s.name);
      m->set_version(s.version);
      m->set_state(s.state);
      m->set_reason(s.reason);
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx, const inference::RepositoryModelLoadRequest* q,
                                   inference::RepositoryModelLoadResponse*) override {
    return logged("RepositoryModelLoad", ctx, q->model_name(), guarded([&] { models_.load(q->model_name()); }));
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx, const inference::RepositoryModelUnloadRequest* q,
                                     inference::RepositoryModelUnloadResponse*) override {
    return logged("RepositoryModelUnload", ctx, q->model_name(), guarded([&] { models_.unload(q->model_name()); }));
  }

 private:
  // The request log line of a call that names a model (--log-requests), as the REST log has.
  grpc::Status logged(const char* method, grpc::ServerContext* ctx, const std::string& model, grpc::Status status) {
    if (log_requests_) {
      nlohmann::json line = {{"grpc", method}, {"model", model}, {"code", static_cast<int>(status.error_code())},
                             {"peer", ctx->peer()}};
      std::fprintf(stderr, "%s\n", line.dump().c_str());
    }
    return status;
  }

  ModelManager& models_;
  Metrics& metrics_;
  RequestLimits limits_;
  bool log_requests_;
};

GrpcFrontend::GrpcFrontend(ModelManager& models, Metrics& metrics, FrontendOptions options)
    : options_(std::move(options)), service_(std::make_unique<Service>(models, metrics, options_)) {}

GrpcFrontend::~GrpcFrontend() { stop(); }

int GrpcFrontend::start() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.host + ":" + std::to_string(options_.port), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  const int max_message = static_cast<int>(std::min<size_t>(options_.max_request_bytes, size_t{1} << 30));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  grpc::ResourceQuota quota("kiln-serve");
  quota.SetMaxThreads(options_.threads);
  builder.SetResourceQuota(quota);
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0)
    throw Error(ErrorKind::kUsage, "cannot listen for gRPC on " + options_.host + ":" + std::to_string(options_.port) +
                                       " (in use, or not an address of this machine)");
  return port;
}

void GrpcFrontend::stop() {
  if (!server_) return;
  server_->Shutdown();  // waits for the calls in flight
  server_->Wait();
  server_.reset();
}

}  // namespace kiln::serve
