// Error formatting and exit codes.
#include "core/error.h"

#include <cstdio>

namespace kiln {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return 2;
    case ErrorKind::kInvalidModel: return 3;
    case ErrorKind::kUnsupported: return 3;
    case ErrorKind::kBadInput: return 4;
    case ErrorKind::kCancelled:
    case ErrorKind::kTimeout:
    case ErrorKind::kResourceLimit: return 5;
    case ErrorKind::kInternal: return 1;
  }
  return 1;
}

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return "usage error";
    case ErrorKind::kInvalidModel: return "invalid model";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kBadInput: return "bad input";
    case ErrorKind::kCancelled: return "cancelled";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kResourceLimit: return "resource limit";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

std::string format_bytes(int64_t bytes) {
  char buf[48];
  if (bytes < (1 << 20)) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

Error::Error(ErrorKind kind, std::string message, ErrorLocation where)
    : std::runtime_error(format(kind, message, where)),
      kind_(kind),
      message_(std::move(message)),
      where_(std::move(where)) {}

Error Error::with_context(const ErrorLocation& outer) const {
  ErrorLocation w = where_;
  if (w.file.empty()) w.file = outer.file;
  if (w.node.empty()) w.node = outer.node;
  if (w.op.empty()) w.op = outer.op;
  if (w.pass.empty()) w.pass = outer.pass;
  return Error(kind_, message_, w);
}

std::string Error::format(ErrorKind kind, const std::string& msg, const ErrorLocation& where) {
  std::string out(error_kind_name(kind));
  std::string loc;
  auto add = [&](const char* key, const std::string& v) {
    if (v.empty()) return;
    if (!loc.empty()) loc += ", ";
    loc += key;
    loc += v;
  };
  add("", where.file);
  add("node ", where.node);
  add("op ", where.op);
  add("pass ", where.pass);
  if (!loc.empty()) out += " (" + loc + ")";
  out += ": " + msg;
  return out;
}

void throw_internal(const char* file, int line, const std::string& what) {
  throw Error(ErrorKind::kInternal, what + " at " + file + ":" + std::to_string(line));
}

}  // namespace kiln
