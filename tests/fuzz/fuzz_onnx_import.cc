// libFuzzer target for the ONNX importer: parses arbitrary bytes as a ModelProto, imports it and
// builds the reference interpreter (so schema checks run). kiln::Error is the expected way to
// reject bad input; any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#ifdef KILN_FUZZ_WITH_INTERPRETER
#include "runtime/interpreter.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
