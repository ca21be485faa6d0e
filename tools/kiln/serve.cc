// `kiln serve --model-repository DIR [--http-port P] [--grpc-port Q] [--host ADDR] [--threads N]
//             [--http-threads N] [--max-request-size SIZE] [--repository-poll-secs S]
//             [--allow-failed-models] [--log-requests]`
// A KServe v2 (Open Inference Protocol) REST and gRPC server over a Triton-style model repository
// (docs/serving.md). SIGINT/SIGTERM stop it gracefully: no new requests, queued ones finish.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "driver/session.h"
#include "serve/grpc_frontend.h"
#include "serve/http_frontend.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"

namespace kiln::cli {
namespace {

struct ServeArgs {
  std::string repository;
  std::string host = "127.0.0.1";
  int http_port = 8000;
  int grpc_port = 8001;  // -1: no gRPC
  int threads = 0;
  int http_threads = 64;
  std::string max_request_size = "256M";
  double poll_secs = 0;
  bool allow_failed = false;
  bool log_requests = false;
};

// Waits for SIGINT/SIGTERM (blocked in every thread, so that this one takes them), polling the
// repository meanwhile when asked to.
int wait_for_stop_signal(const sigset_t& signals, double poll_secs, serve::ModelManager& models) {
  for (;;) {
    int sig = 0;
    if (poll_secs <= 0) {
      sigwait(&signals, &sig);
      return sig;
    }
    timespec wait{static_cast<time_t>(poll_secs), static_cast<long>((poll_secs - static_cast<double>(static_cast<time_t>(poll_secs))) * 1e9)};
    sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig > 0) return sig;
    models.poll();
  }
}

int serve_command(const ServeArgs& a) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts

  serve::Metrics metrics;
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  serve::ModelManager models(a.repository, threads, metrics);
  serve::FrontendOptions http;
  http.host = a.host;
  http.port = a.http_port;
  http.threads = a.http_threads;
  http.max_request_bytes = static_cast<size_t>(parse_byte_size(a.max_request_size, "--max-request-size"));
  http.log_requests = a.log_requests;
  serve::HttpFrontend frontend(models, metrics, http);
  const int port = frontend.bind();  // fail early, before minutes of compiling
  const int failed = models.load_all();
  if (failed > 0 && !a.allow_failed)
    throw Error(ErrorKind::kInvalidModel, std::to_string(failed) + " model(s) failed to load (see above); "
                                          "--allow-failed-models starts anyway and lists them UNAVAILABLE");
  frontend.start();
  serve::FrontendOptions grpc = http;
  grpc.port = a.grpc_port;
  serve::GrpcFrontend grpc_frontend(models, metrics, grpc);
  std::string grpc_line;
  if (a.grpc_port >= 0) grpc_line = ", grpc " + a.host + ":" + std::to_string(grpc_frontend.start());
  std::printf("kiln serve: listening on http://%s:%d%s (KServe v2)\n", a.host.c_str(), port, grpc_line.c_str());
  std::fflush(stdout);
  const int sig = wait_for_stop_signal(signals, a.poll_secs, models);
  std::fprintf(stderr, "kiln serve: %s: finishing queued requests, then stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  frontend.stop();   // no new connections; requests in flight get their answers
  grpc_frontend.stop();
  models.shutdown();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model repository over the KServe v2 protocol (REST and gRPC)");
  cmd->add_option("--model-repository", args->repository,
                  "folder laid out as DIR/<model>/<version>/model.onnx (+ optional DIR/<model>/config.json)")
      ->required();
  cmd->add_option("--host", args->host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--http-port", args->http_port, "REST port (default 8000; 0: any free port, printed)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", args->grpc_port, "gRPC port (default 8001; 0: any free port, printed; -1: no gRPC)")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--threads", args->threads, "threads per model instance unless its config.json says (0: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--http-threads", args->http_threads, "HTTP connections and gRPC calls served at once, each (default 64)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-request-size", args->max_request_size, "largest request body (default 256M; 413 above)");
  cmd->add_option("--repository-poll-secs", args->poll_secs,
                  "rescan the repository every S seconds: load new models and versions, unload removed ones")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_flag("--allow-failed-models", args->allow_failed,
                "start even when some models fail to load (listed UNAVAILABLE with their error)");
  cmd->add_flag("--log-requests", args->log_requests, "one JSON line per HTTP request and gRPC call on stderr");
  cmd->callback([args, &action] { action = [args] { return serve_command(*args); }; });
}

}  // namespace kiln::cli
