// libFuzzer target for what reads a compiled model library before and after dlopen: the first
// byte picks the parser, the rest is its input.
//   even: check_library_image (the seal and ELF header checks every loader runs before dlopen;
//         a damaged file must be refused, never crash) — seeds: a small sealed library;
//   odd:  read_plan_blobs (the plans embedded in a library, bounds-checked field by field) —
//         seeds: plans of small models, one or several signatures, one with an external
//         (--offload dnnl) region (`kiln compile --keep-temps` leaves blob.bin; the seeds must be
//         remade when kPlanBlobVersion changes).
// kiln::Error is the expected way to reject bad input; anything else is a bug. dlopen itself is
// never called: the seal's hash cannot be forged by mutation in practice, which is the point.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "runtime/library_seal.h"
#include "runtime/plan_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    if (data[0] % 2 == 0) {
      (void)kiln::check_library_image(data + 1, size - 1);
    } else {
      kiln::PlanBlob blob = kiln::read_plan_blobs(data + 1, size - 1);
      for (kiln::ExecPlan& plan : blob.plans)
        // Offsets and sizes the blob gave must be consistent (a huge arena is a valid plan; skip it).
        if (plan.arena_bytes < (int64_t{64} << 20)) plan.allocate_arena();
    }
  } catch (const kiln::Error& e) {
    if (e.kind() == kiln::ErrorKind::kInternal) {
      std::fprintf(stderr, "internal error escaped: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
