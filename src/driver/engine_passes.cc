// engine_pass_context (see engine_passes.h).
#include "driver/engine_passes.h"

#include <string>

#include "kernels/x86/s8_gemm.h"

namespace kiln {

PassContext engine_pass_context() {
  PassContext ctx;
  const std::string int8 = kernels::s8_gemm_kernel_name();
  ctx.int8_gemm = int8 == "avx512vnni" ? Int8Gemm::kFull : int8 == "avx2" ? Int8Gemm::kSevenBit : Int8Gemm::kNone;
  return ctx;
}

}  // namespace kiln
