// Errors: user-facing failures carry a kind (mapped to the CLI's exit codes) and a location;
// internal invariants use KILN_CHECK, which throws an internal error naming file:line.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln {

enum class ErrorKind {
  kInternal,      // a bug in kiln (exit 1)
  kUsage,         // bad command line or API misuse (exit 2)
  kInvalidModel,  // malformed model or graph (exit 3)
  kUnsupported,   // valid model using something kiln does not support (exit 3)
  kBadInput,      // input data that does not fit the model (exit 4)
  kCancelled,     // the run was cancelled by the caller (exit 5)
  kTimeout,       // the run passed its deadline (exit 5)
  kResourceLimit, // the model or its inputs need more than a configured limit (exit 5)
};

int exit_code(ErrorKind kind);
std::string_view error_kind_name(ErrorKind kind);

// Where in a model an error happened; every field is optional.
struct ErrorLocation {
  std::string file;
  std::string node;  // node name (or "#index" when unnamed)
  std::string op;    // op type, with domain if not the default one
  std::string pass;
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, ErrorLocation where = {});
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const ErrorLocation& where() const { return where_; }
  // Returns a copy with missing location fields filled from `outer`.
  Error with_context(const ErrorLocation& outer) const;

 private:
  static std::string format(ErrorKind kind, const std::string& msg, const ErrorLocation& where);
  ErrorKind kind_;
  std::string message_;
  ErrorLocation where_;
};

// "4096 bytes", "12.5 MiB": sizes in messages.
std::string format_bytes(int64_t bytes);

[[noreturn]] void throw_internal(const char* file, int line, const std::string& what);

}  // namespace kiln

#define KILN_CHECK(cond, ...)                                                       \
  do {                                                                              \
    if (!(cond)) ::kiln::throw_internal(__FILE__, __LINE__, "check failed: " #cond); \
  } while (0)
