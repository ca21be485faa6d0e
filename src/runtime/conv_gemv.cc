// Single-pixel Conv as a GEMV (see conv_gemv.h): the weight [Co, C] packed for the GEMV kernel,
// run by the shared GEMV op (runtime/matmul_batched.h) with one row per image.
#include "runtime/conv_gemv.h"

#include <utility>

#include "kernels/x86/f32_gemv.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_op_util.h"
#include "runtime/matmul_batched.h"

namespace kiln::conv_ops {

bool gemv_conv_covers(const gemm_ops::GemmDesc& d) {
  std::optional<ConvGeom> g = conv_geom(d);
  return g && g->group == 1 && d.input_scale < 0 && g->h == 1 && g->w == 1 && g->kh == 1 && g->kw == 1 &&
         g->ho == 1 && g->wo == 1 && g->pt == 0 && g->pl == 0;
}

std::unique_ptr<gemm_ops::GemmOp> make_gemv_conv_op(const gemm_ops::GemmDesc& d) {
  if (!gemv_conv_covers(d) || !d.operands[1].constant) return nullptr;
  std::optional<ConvGeom> g = conv_geom(d);
  const Tensor* w = d.operands[1].constant;
  if (w->dtype() != DType::kFloat32 || w->numel() != g->co * g->c) return nullptr;
  const gemm_ops::Operand* b = d.operands.size() > 2 && d.operands[2].present ? &d.operands[2] : nullptr;
  if (b && gemm_ops::numel(b->dims) != g->co) return nullptr;
  // W [Co, C] is op(B) transposed: y[co] = sum_c x[c] * W[co][c]; the bias is C with beta 1.
  kernels::PackedGemvB packed =
      kernels::pack_gemv_b(true, g->c, g->co, w->data<float>(), g->c, gemm_ops::pool_parallel());
  return gemm_ops::make_gemv_op(std::move(packed), 1.0f, 1.0f, b, {g->n, g->co, 1, 1}, g->n);
}

}  // namespace kiln::conv_ops
