// The KServe v2 gRPC frontend (Debian's gRPC, service inference.GRPCInferenceService): health,
// metadata, model config, inference with raw or typed tensor contents, and the repository calls.
#pragma once

#include <memory>
#include <string>

#include "serve/kserve_json.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"

namespace grpc {
class Server;
}

namespace kiln::serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: any free port (start() returns it)
  int threads = 64;  // RPCs served at once
  int max_message_bytes = 256 << 20;
  bool log_requests = false;  // one JSON line per call on stderr
  RequestLimits limits;
};

class GrpcFrontend {
 public:
  GrpcFrontend(ModelManager& models, Metrics& metrics, GrpcOptions options);
  ~GrpcFrontend();
  // Binds and starts serving; returns the port. Throws Error(kUsage) when it cannot bind.
  int start();
  // Stops taking calls; calls in flight get their answers.
  void stop();

 private:
  class Service;
  GrpcOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace kiln::serve
