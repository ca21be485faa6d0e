// The serialized form of an ExecPlan (runtime/exec_plan.h) that ahead-of-time compiled models
// embed: a 64-byte header, the plan (slots, steps with their GemmDescs, arena offsets, kernel
// names) and the constants, each 64-byte aligned, so that a loaded model uses the weights in
// place. Little-endian, host layout; the format version is checked on load.
// Tests: tests/capi/test_c_api.cc (round trip through an AOT model)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/exec_plan.h"

namespace kiln {

inline constexpr uint32_t kPlanBlobVersion = 10;  // 2: GemmDesc fused epilogue, 3: its activation, 4: input scale, 5: max pool, 6: ConvTranspose, 7: RNN/LSTM/GRU, 8: their clip, 9: NhwcConv, 10: kernel scalars (symbolic dims)

// Writes the blob of `plan` (its kernel pointers and GemmOps are not needed) to `path`.
// Returns the blob size in bytes.
uint64_t write_plan_blob(const ExecPlan& plan, const std::string& path);

// Reads a blob that starts 64-byte aligned at `data` and stays alive (and unchanged) as long as
// the plan: constants are views into it. Throws kInvalidModel for a truncated or corrupt blob.
// The plan's kernels, GemmOps and arena are not set up (see ExecPlan).
ExecPlan read_plan_blob(const void* data, size_t size);

}  // namespace kiln
