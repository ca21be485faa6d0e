// Mapping of kiln errors onto the server's error classes and HTTP codes.
#include "serve/serve_error.h"

#include "core/error.h"

namespace kiln::serve {

ServeStatus status_of(const std::exception& e) {
  if (const auto* s = dynamic_cast<const ServeError*>(&e)) return s->status();
  if (const auto* k = dynamic_cast<const Error*>(&e)) {
    switch (k->kind()) {
      case ErrorKind::kUsage:
      case ErrorKind::kBadInput:
      case ErrorKind::kInvalidModel:
      case ErrorKind::kUnsupported: return ServeStatus::kBadRequest;
      case ErrorKind::kTimeout: return ServeStatus::kTimeout;
      case ErrorKind::kCancelled:
      case ErrorKind::kResourceLimit: return ServeStatus::kUnavailable;
      default: return ServeStatus::kInternal;
    }
  }
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ServeStatus::kUnavailable;
  return ServeStatus::kInternal;
}

int http_status_of(ServeStatus s) {
  switch (s) {
    case ServeStatus::kBadRequest: return 400;
    case ServeStatus::kNotFound: return 404;
    case ServeStatus::kUnavailable: return 503;
    case ServeStatus::kTimeout: return 504;
    case ServeStatus::kInternal: return 500;
  }
  return 500;
}

const char* reason_name(ServeStatus s) {
  switch (s) {
    case ServeStatus::kBadRequest: return "bad_request";
    case ServeStatus::kNotFound: return "not_found";
    case ServeStatus::kUnavailable: return "unavailable";
    case ServeStatus::kTimeout: return "timeout";
    case ServeStatus::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace kiln::serve
