// libFuzzer target for the ONNX importer: parses arbitrary bytes as a ModelProto, imports it and
// builds the reference interpreter (so schema checks run); also the initializer-payload walk. kiln::Error is the expected way to
// reject bad input; any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "frontend/onnx/initializer_payloads.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/proto_util.h"
#ifdef KILN_FUZZ_WITH_INTERPRETER
#include "runtime/interpreter.h"
#endif

// The importer strips initializer payloads of 64 KiB and more (initializer_payloads.h), which
// the corpus' small inputs never reach: run the wire-format walk with a 1-byte threshold too.
// Every payload must lie inside the input, and protobuf must take the stripped bytes without a
// crash (whether it accepts them is its own business).
void check_stripping(const uint8_t* data, size_t size) {
  const char* begin = reinterpret_cast<const char*>(data);
  std::optional<kiln::StrippedModel> s = kiln::strip_initializer_payloads(begin, size, 1);
  if (!s) return;
  for (std::string_view p : s->payloads)
    if (p.data() && (p.data() < begin || p.data() + p.size() > begin + size)) {
      std::fprintf(stderr, "payload outside the input\n");
      std::abort();
    }
  onnx::ModelProto proto;
  (void)kiln::parse_proto(proto, s->bytes.data(), s->bytes.size());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_stripping(data, size);
  try {
    kiln::ImportOptions opts;
    // External data must never be read from the fuzzer's working folder.
    opts.base_dir = "/nonexistent-kiln-fuzz";
    kiln::Model m = kiln::load_onnx_model_from_bytes(data, size, "fuzz.onnx", opts);
#ifdef KILN_FUZZ_WITH_INTERPRETER
    kiln::Interpreter interp(m);  // schema and arity checks of every node
    (void)interp;
#else
    (void)m;
#endif
  } catch (const kiln::Error& e) {
    if (e.kind() == kiln::ErrorKind::kInternal) {
      std::fprintf(stderr, "internal error escaped: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
