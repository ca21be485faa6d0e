// The KServe v2 REST frontend (cpp-httplib): health, server and model metadata, model config,
// inference (JSON and binary tensors), the repository extension and Prometheus /metrics.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "serve/inference.h"
#include "serve/kserve_json.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace kiln::serve {

class HttpFrontend {
 public:
  HttpFrontend(ModelManager& models, Metrics& metrics, FrontendOptions options);
  ~HttpFrontend();
  // Binds the port (throws Error(kUsage) when it cannot); returns the port bound.
  int bind();
  // Serves on a background thread until stop().
  void start();
  void stop();

 private:
  void add_routes();
  void infer(const httplib::Request& req, httplib::Response& res);
  ModelManager& models_;
  Metrics& metrics_;
  FrontendOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int listen_socket_ = -1;
};

}  // namespace kiln::serve
