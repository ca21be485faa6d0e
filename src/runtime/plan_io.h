// The serialized form of the ExecPlans (runtime/exec_plan.h) that ahead-of-time compiled models
// embed: one per input-shape signature the library was compiled for, then the plans of If
// branches (each after the plan whose kIf steps refer to it). A 64-byte header, the kernel names
// (one table for every plan: kernels with dim params serve several signatures), the plans
// (slots, steps with their GemmDescs, arena offsets) and one table of constants, each 64-byte
// aligned, so that a loaded model uses the weights in place and the plans share them.
// Little-endian, host layout; the format version is checked on load.
// Tests: tests/capi/test_c_api.cc (round trip through an AOT model)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/exec_plan.h"

namespace kiln {

inline constexpr uint32_t kPlanBlobVersion = 16;  // 2: GemmDesc fused epilogue, 3: its activation, 4: input scale, 5: max pool, 6: ConvTranspose, 7: RNN/LSTM/GRU, 8: their clip, 9: NhwcConv, 10: kernel scalars (symbolic dims), 11: several plans, shared kernel names and constants, 12: If branches as plans (kIf), recurrent steps returning their final states too, 13: MatMulInteger/ConvInteger steps (kinds 8, 9) and their requantizing epilogue, 14: the dequantizing epilogue's run-time scale factor, 15: tuned kernel choices (GemmDesc::choice), 16: external-backend regions (kExternal steps, ExecPlan::externals)

// Writes the blob of `plans` (their kernel pointers and GemmOps are not needed) to `path`: the
// first `signatures` are the entry plans, the others If branches (PlanStep::branches index
// `plans`; a branch comes after its plan). Every plan must have the same kernel_names (kUsage
// otherwise); constants that are the same tensor (storage, dtype, dims) in several plans are
// written once. Returns the blob size in bytes.
uint64_t write_plan_blob(const std::vector<const ExecPlan*>& plans, size_t signatures, const std::string& path);
inline uint64_t write_plan_blob(const ExecPlan& plan, const std::string& path) {
  return write_plan_blob(std::vector<const ExecPlan*>{&plan}, 1, path);
}

struct PlanBlob {
  std::vector<ExecPlan> plans;  // ExecPlan::linked of each points into this vector
  size_t signatures = 0;        // plans[0, signatures) are the entry plans
};

// Reads a blob that starts 64-byte aligned at `data` and stays alive (and unchanged) as long as
// the plans: constants are views into it. Throws kInvalidModel for a truncated or corrupt blob.
// The plans' kernels, GemmOps and arenas are not set up (see ExecPlan).
PlanBlob read_plan_blobs(const void* data, size_t size);
// The blob of one plan (kInvalidModel when it holds several).
ExecPlan read_plan_blob(const void* data, size_t size);

}  // namespace kiln
