// The server's error classes: each protocol frontend maps them to its codes (HTTP status, gRPC
// status). kiln::Error kinds from loading and running map here too (status_of).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace kiln::serve {

enum class ServeStatus {
  kBadRequest,   // malformed request, wrong dtype/shape, unknown input (HTTP 400, INVALID_ARGUMENT)
  kNotFound,     // unknown model or version (404, NOT_FOUND)
  kUnavailable,  // queue full, model not ready, shutting down (503, UNAVAILABLE)
  kTimeout,      // the request's deadline passed (504, DEADLINE_EXCEEDED)
  kInternal,     // a bug or an unexpected failure (500, INTERNAL)
};

class ServeError : public std::runtime_error {
 public:
  ServeError(ServeStatus status, const std::string& message) : std::runtime_error(message), status_(status) {}
  ServeStatus status() const { return status_; }

 private:
  ServeStatus status_;
};

// The class of any exception a request handler catches (kiln::Error kinds included).
ServeStatus status_of(const std::exception& e);
int http_status_of(ServeStatus s);
// "bad_request", "not_found", ...: the `reason` label of the failure metrics.
const char* reason_name(ServeStatus s);

}  // namespace kiln::serve
