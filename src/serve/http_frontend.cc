// REST routes of the KServe v2 protocol over cpp-httplib; each handler turns exceptions into
// the protocol's {"error": "..."} answers with the HTTP status of their class.
#include "serve/http_frontend.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "serve/inference.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
constexpr const char* kHeaderLength = "Inference-Header-Content-Length";

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), kJson);
}

void send_error(httplib::Response& res, const std::exception& e) {
  send_json(res, http_status_of(status_of(e)), {{"error", e.what()}});
}

// Runs `body`, answering its exception as a protocol error.
template <class F>
void guarded(httplib::Response& res, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    send_error(res, e);
  }
}

std::string version_of(const httplib::Request& req) { return req.matches.size() > 2 ? req.matches[2].str() : ""; }

json model_metadata(const ServedModel& m) {
  json j = {{"name", m.name()}, {"versions", {m.version()}}, {"platform", "onnx"}};
  j["inputs"] = json::array();
  for (const TensorMetadata& t : m.inputs()) j["inputs"].push_back(tensor_metadata_json(t));
  j["outputs"] = json::array();
  for (const TensorMetadata& t : m.outputs()) j["outputs"].push_back(tensor_metadata_json(t));
  return j;
}

// Triton's model-config JSON: inputs/outputs as data_type/dims (dims without the batch dim
// when the model batches).
json model_config(const ServedModel& m) {
  json j = model_config_to_json(m.config());
  j["name"] = m.name();
  auto tensors = [&](const std::vector<TensorMetadata>& list) {
    json out = json::array();
    for (const TensorMetadata& t : list) {
      std::vector<int64_t> dims = t.shape;
      if (m.config().max_batch_size > 0 && !dims.empty()) dims.erase(dims.begin());
      out.push_back({{"name", t.name}, {"data_type", "TYPE_" + kserve_datatype(t.dtype).value_or("INVALID")}, {"dims", dims}});
    }
    return out;
  };
  j["input"] = tensors(m.inputs());
  j["output"] = tensors(m.outputs());
  return j;
}

std::optional<size_t> header_length(const httplib::Request& req) {
  if (!req.has_header(kHeaderLength)) return std::nullopt;
  const std::string v = req.get_header_value(kHeaderLength);
  try {
    size_t used = 0;
    const unsigned long long n = std::stoull(v, &used);
    if (used == v.size()) return static_cast<size_t>(n);
  } catch (const std::exception&) {
  }
  throw ServeError(ServeStatus::kBadRequest, std::string(kHeaderLength) + ": '" + v + "' is not a byte count");
}

}  // namespace

HttpFrontend::HttpFrontend(ModelManager& models, Metrics& metrics, FrontendOptions options)
    : models_(models), metrics_(metrics), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  const int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server_->set_payload_max_length(options_.max_request_bytes);
  // Responses go out as two writes (headers, body): without TCP_NODELAY, Nagle's algorithm holds
  // the body until the client's delayed ACK, adding ~40 ms to every answer.
  server_->set_tcp_nodelay(true);
  // A keep-alive connection holds one of the threads while it lasts; reuse it for many requests
  // (httplib's default is 5) and let idle ones go after its 5-second keep-alive timeout.
  server_->set_keep_alive_max_count(1000);
  // httplib listens with a backlog of 5: a burst of new connections would then wait for SYN
  // retransmits (a second or more) instead of a fast answer. Keep the listening socket to
  // raise its backlog after bind (listen() again on Linux updates it).
  server_->set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = sock;
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, e);
    } catch (...) {
      send_json(res, 500, {{"error", "unknown failure"}});
    }
  });
  if (options_.log_requests)
    server_->set_logger([](const httplib::Request& req, const httplib::Response& res) {
      json line = {{"method", req.method}, {"path", req.path}, {"status", res.status}, {"remote", req.remote_addr},
                   {"request_bytes", req.body.size()}, {"response_bytes", res.body.size()}};
      std::fprintf(stderr, "%s\n", line.dump().c_str());
    });
  add_routes();
}

HttpFrontend::~HttpFrontend() { stop(); }

int HttpFrontend::bind() {
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) port = 0;
  } else if (!server_->bind_to_port(options_.host, port)) {
    port = 0;
  }
  if (port == 0)
    throw Error(ErrorKind::kUsage, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                       " (in use, or not an address of this machine)");
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return port;
}

void HttpFrontend::start() {
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void HttpFrontend::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpFrontend::add_routes() {
  httplib::Server& s = *server_;
  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    res.status = models_.all_ready() ? 200 : 503;
  });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"name", "kiln"}, {"version", "0.1.0"}, {"extensions", {"binary_tensor_data", "model_repository"}}});
  });
  const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  s.Get(model + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      models_.find(req.matches[1], version_of(req));
      res.status = 200;
    } catch (const std::exception& e) {
      send_error(res, e);
    }
  });
  s.Get(model + "/config", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { send_json(res, 200, model_config(*models_.find(req.matches[1], version_of(req))->model)); });
  });
  s.Get(model, [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { send_json(res, 200, model_metadata(*models_.find(req.matches[1], version_of(req))->model)); });
  });
  s.Post(model + "/infer", [this](const httplib::Request& req, httplib::Response& res) { infer(req, res); });
  s.Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) throw ServeError(ServeStatus::kBadRequest, "the body is not a JSON object");
      const bool ready_only = body.value("ready", false);
      json out = json::array();
      for (const ModelState& m : models_.index()) {
        if (ready_only && m.state != "READY") continue;
        json e = {{"name", m.name}, {"state", m.state}, {"reason", m.reason}};
        if (!m.version.empty()) e["version"] = m.version;
        out.push_back(e);
      }
      send_json(res, 200, out);
    });
  });
  s.Post(R"(/v2/repository/models/([^/]+)/load)", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      models_.load(req.matches[1]);
      send_json(res, 200, json::object());
    });
  });
  s.Post(R"(/v2/repository/models/([^/]+)/unload)", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      models_.unload(req.matches[1]);
      send_json(res, 200, json::object());
    });
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus_text(), "text/plain; version=0.0.4");
  });
}

void HttpFrontend::infer(const httplib::Request& req, httplib::Response& res) {
  guarded(res, [&] {
    std::shared_ptr<LoadedModel> model = find_model(models_, metrics_, req.matches[1], version_of(req));
    InferRequest r;
    try {
      r = parse_infer_request(req.body, header_length(req), options_.limits);
    } catch (const std::exception& e) {
      record_rejected(*model, e);
      throw;
    }
    InferResult result = run_inference(*model, r);
    const ServedModel& m = *model->model;
    EncodedResponse out = encode_infer_response(m.name(), m.version(), r, m.outputs(), result.outputs);
    if (out.json_length) {
      res.set_header(kHeaderLength, std::to_string(*out.json_length));
      res.set_content(std::move(out.body), "application/octet-stream");
    } else {
      res.set_content(std::move(out.body), kJson);
    }
    res.status = 200;
  });
}

}  // namespace kiln::serve
