// The KServe v2 gRPC frontend (Debian's gRPC, service inference.GRPCInferenceService): health,
// metadata, model config, inference with raw or typed tensor contents, and the repository calls.
#pragma once

#include <memory>
#include <string>

#include "serve/inference.h"
#include "serve/kserve_json.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"

namespace grpc {
class Server;
}

namespace kiln::serve {

class GrpcFrontend {
 public:
  GrpcFrontend(ModelManager& models, Metrics& metrics, FrontendOptions options);
  ~GrpcFrontend();
  // Binds and starts serving; returns the port. Throws Error(kUsage) when it cannot bind.
  int start();
  // Stops taking calls; calls in flight get their answers.
  void stop();

 private:
  class Service;
  FrontendOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace kiln::serve
