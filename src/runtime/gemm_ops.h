// Fast f32 paths for the compiled executor's out-fusable ops: MatMul (N-D x 2-D by flattening
// the batch into rows; batched N-D x N-D with broadcasting, e.g. attention, in matmul_batched.h;
// M = 1 as a GEMV), Gemm, and Conv 2-D (group 1 through conv_select.h: prepacked-weight GEMM with
// implicit im2col, depthwise, Winograd), ConvTranspose 2-D (conv_transpose.h), all on the f32 microkernels and the current thread
// pool. Constant weights are packed once when the op is made; biases and fused epilogues (bias,
// residual, clamp: gemm_epilogue.h) go in the GEMM's store where the op can. Anything else is
// declined (make_gemm_op returns null) and runs its reference kernel.
// A GemmOp is made from a GemmDesc, plain data without the IR (so that ahead-of-time compiled
// models rebuild their ops from a serialized plan); gemm_desc_from_node (gemm_desc.cc, the only
// IR-facing part) derives it from a Node.
// Tests: tests/runtime/test_gemm_ops.cc
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"

namespace kiln {
class Node;
}

namespace kiln::gemm_ops {

// What the plan knows about one node input (null `constant` for values computed at run time).
struct Operand {
  bool present = false;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const Tensor* constant = nullptr;
};

struct GemmDesc;

// How a conv's kernel is built, where the default rules would otherwise decide (conv_select.h):
// chosen by `kiln tune` (src/tune) and applied from its records; all zero means the default
// rules. Ahead-of-time libraries keep it in their plans (runtime/plan_io.cc).
enum class ConvAlgo : int32_t {
  kDefault = 0,
  kGemm = 1,           // the weights as GEMM rows, the pixels as columns (implicit im2col)
  kGemmPixelRows = 2,  // the pixels as GEMM rows, then transposed to NCHW
  kWinograd2 = 3,      // Winograd F(2x2, 3x3)
  kWinograd4 = 4,      // Winograd F(4x4, 3x3)
};
struct KernelChoice {
  ConvAlgo algo = ConvAlgo::kDefault;
  int32_t mr = 0;      // GEMM micro-kernel rows (one of the kernels sharing the default's NR and KC); 0: fewest padded rows
  int32_t chunks = 0;  // GEMM thread split (kernels::GemmSplit): column chunks and row groups; 0: choose_gemm_split
                       // (MatMul / Gemm take mr and the split; algo stays kDefault. Winograd takes
                       // chunks only: 1 whole blocks per task, 2 shared blocks)
  int32_t groups = 0;
  bool is_default() const { return algo == ConvAlgo::kDefault && mr == 0 && chunks == 0 && groups == 0; }
  bool operator==(const KernelChoice& o) const {
    return algo == o.algo && mr == o.mr && chunks == o.chunks && groups == o.groups;
  }
};
// "algo=winograd4", "mr=12 split=2x1" (fields that are not zero; "default" when is_default);
// parse_kernel_choice reads it back (false on anything else).
std::string to_string(const KernelChoice& c);
bool parse_kernel_choice(const std::string& text, KernelChoice* out);

class GemmOp {
 public:
  virtual ~GemmOp() = default;
  // Takes the descriptor's fused epilogue (GemmDesc::epilogue_*, clamp_*) into this op's own
  // kernels and returns true, or returns false (the default) and make_gemm_op applies it in a
  // pass over the output. Called by make_gemm_op only, while the operands' constants live.
  virtual bool take_epilogue(const GemmDesc& d) {
    (void)d;
    return false;
  }
  // `ins` parallel to the node inputs (null for absent ones); returns output 0. Uses the calling
  // thread's current pool. Not reentrant (scratch buffers are members).
  virtual Tensor run(const std::vector<const RtValue*>& ins) = 0;
  // The outputs after output 0 that the last run made (recurrent ops: GemmDesc::rnn.also_states).
  virtual std::vector<Tensor> extra_outputs() { return {}; }
  // Where run() writes its output from now on: `out` (a view of the executor's arena that no
  // input overlaps) when it has the output's dtype and dims, else a fresh tensor per run. Bound
  // once, where the plan binds its arena; ops that wrap another forward it.
  virtual void set_output(const Tensor& out) { out_ = out; }

 protected:
  // The tensor run() returns: the destination when it fits, else a new uninitialized one (the
  // op writes every element).
  Tensor output_tensor(DType dtype, const std::vector<int64_t>& dims) const {
    if (out_.defined() && out_.dtype() == dtype && out_.dims() == dims) return out_;
    return Tensor::uninitialized(dtype, dims);
  }

 private:
  Tensor out_;
};

// kConvNhwc: kiln::NhwcConv, a channels-last 2-D Conv ([N, H, W, C] in, [N, Ho, Wo, M] out).
// kMatMulInteger: uint8 x int8 -> int32 (runtime/matmul_integer.h); kConvInteger: the same for
// a 2-D NCHW Conv (runtime/conv_integer.h).
enum class GemmKind : int32_t {
  kMatMul = 0, kGemm = 1, kConv = 2, kConvTranspose = 3, kRnn = 4, kLstm = 5, kGru = 6, kConvNhwc = 7,
  kMatMulInteger = 8, kConvInteger = 9
};

// RNN, LSTM, GRU (runtime/recurrent.h): GEMMs per step, no fused epilogue, one used output.
inline bool recurrent(GemmKind k) { return k == GemmKind::kRnn || k == GemmKind::kLstm || k == GemmKind::kGru; }

// MatMulInteger and ConvInteger: uint8 x int8 -> int32 sums.
inline bool integer_kind(GemmKind k) { return k == GemmKind::kMatMulInteger || k == GemmKind::kConvInteger; }

// Conv, ConvTranspose and ConvInteger outputs are NCHW: their channel axis (a per-channel epilogue bias's) is 1.
inline bool channels_first(GemmKind k) {
  return k == GemmKind::kConv || k == GemmKind::kConvTranspose || k == GemmKind::kConvInteger;
}

// One MatMul/Gemm/Conv node as make_gemm_op sees it: the op, the attributes it uses (raw, as
// the node has them; make_gemm_op validates them), the operands and the planned output.
// Ahead-of-time compiled models store it (runtime/plan_io.cc): a new field must be serialized
// there too (a static_assert there on the size reminds).
struct GemmDesc {
  GemmKind kind = GemmKind::kMatMul;
  bool trans_a = false, trans_b = false;  // Gemm transA/transB
  float alpha = 1.0f, beta = 1.0f;        // Gemm
  int64_t group = 1;                      // Conv, ConvTranspose
  // Conv: as the node has them. ConvTranspose: pads resolved (output_shape, output_padding and
  // auto_pad applied, auto_pad then "NOTSET"): pads[0], pads[1] place Y's first element in the full result.
  std::vector<int64_t> strides{1, 1}, dilations{1, 1}, pads{0, 0, 0, 0};
  std::string auto_pad = "NOTSET";
  std::vector<Operand> operands;  // parallel to the node inputs; `constant` marks plan-time weights
  std::vector<int64_t> out_dims;
  DType out_dtype = DType::kUndefined;
  // Fused epilogue (nodes after the GEMM absorbed by the compiled executor), applied in this
  // order: y = clamp(gemm + bias + residual, clamp_lo, clamp_hi). The bias and the residual are
  // extra operands after the node's own (padded to MatMul 2 / Gemm 3 / Conv 3 / ConvTranspose 3 inputs):
  // epilogue_bias: a constant with one value per output channel (Conv, ConvTranspose: dim 1; MatMul/Gemm:
  // the last dim); epilogue_residual: a tensor with exactly the output's dims. -1: none.
  int32_t epilogue_bias = -1;
  int32_t epilogue_residual = -1;
  float clamp_lo = -std::numeric_limits<float>::infinity();
  float clamp_hi = std::numeric_limits<float>::infinity();
  // An activation after the residual (never together with a clamp): kernels::Activation.
  int32_t epilogue_activation = 0;
  // Fused prologue (a Mul before a Conv absorbed by the compiled executor, e.g. the channel
  // scale of a squeeze-and-excitation block): the conv reads x * s instead of input 0 = x, s an
  // extra operand with one value per input channel ([C,1,1], [1,C,1,1]) or per image and
  // channel ([N,C,1,1]). Conv with group 1 and a constant weight only (input_scale_pays). -1: none.
  int32_t input_scale = -1;
  // 1: a 3x3 / stride 2 / pad 1 max pool (floor mode) after the whole epilogue, a MaxPool absorbed
  // by the compiled executor (ResNet's and ShuffleNet's stems): the op's output is the pooled
  // tensor (pooled_dims); out_dims stay the conv's. Stem convs only; never with a residual. 0: none.
  int32_t epilogue_max_pool = 0;
  // Recurrent kinds: the attributes as the node has them (the op declines activations other
  // than the defaults) and the node output the step produces (0: Y, 1: Y_h, 2: Y_c; the node's
  // other outputs are unused).
  struct Recurrent {
    int32_t direction = 0;  // 0 forward, 1 reverse, 2 bidirectional
    int32_t layout = 0;
    int32_t linear_before_reset = 0;
    int32_t output = 0;
    int64_t hidden = 0;  // hidden_size (0: absent, taken from R)
    uint8_t default_activations = 1, has_clip = 0, input_forget = 0;
    float clip = 0.0f;  // with has_clip: gate pre-activations clamped to [-clip, clip]
    // Final states the op returns after `output` (GemmOp::extra_outputs) when the node's other
    // outputs are used too: bit 0 Y_h (output 1), bit 1 Y_c (output 2, LSTM); in that order.
    int32_t also_states = 0;
  } rnn;
  // Integer kinds (kMatMulInteger, kConvInteger): a requantizing epilogue, the Cast -> Mul ->
  // [Add] -> [Relu] -> QuantizeLinear after the node absorbed by the compiled executor, computed as
  // those nodes compute it: y = saturate(round_half_even(relu(float(acc) * scale + bias) /
  // y_scale) + y_zero_point), uint8 out (out_dtype). Operands: requant_scale an f32 constant with
  // 1 or one value per output channel (the Mul's), epilogue_bias the Add's (per channel, as for
  // float kinds), requant_y_scale an f32 scalar constant, requant_y_zero_point a uint8 scalar
  // constant (-1: 0); clamp_lo = 0 is the Relu. -1: no requantization (int32 out).
  // A dequantizing epilogue instead (MatMulInteger: the Cast -> Mul -> [Add] after it, float out,
  // y = float(acc) * scale + bias): requant_scale set and requant_y_scale -1; the scale may be
  // the product of a run-time f32 scalar, requant_scale_factor (dynamic quantization's activation
  // scale, the Mul that makes the scale absorbed too), and the constant requant_scale.
  int32_t requant_scale = -1;
  int32_t requant_y_scale = -1;
  int32_t requant_y_zero_point = -1;
  int32_t requant_scale_factor = -1;
  // The tuned kernel choice (conv kinds; the default rules when is_default()).
  KernelChoice choice;
};

// The number of node inputs a kind's operands are padded to before the epilogue operands.
inline size_t node_arity(GemmKind k) {
  return k == GemmKind::kMatMul                                         ? 2
         : recurrent(k)                                                 ? 8
         : k == GemmKind::kMatMulInteger || k == GemmKind::kConvInteger ? 4
                                                                        : 3;
}

// Tuned kernel choices by task key (tuning_key), as `kiln tune`'s records give them for one CPU
// and thread count (tune/records.h); keys it lacks keep the default rules.
using TuningTable = std::map<std::string, KernelChoice>;

// The choice `table` holds for `d`'s task, or the default (no table, or no entry).
KernelChoice tuned_choice(const TuningTable* table, const GemmDesc& d);

// The tuning task this descriptor belongs to: the op's geometry and dtypes (not its epilogue,
// which does not change which kernel is fastest), e.g. "Conv f32 x1x64x56x56 w64x64x3x3 s1x1
// d1x1 p1x1x1x1 g1", "MatMul f32 a1x128x768 b768x3072", "Gemm f32 a1x512 b1000x512 tB"; "" for
// kinds `kiln tune` does not search (runtime/tuning_space.h narrows it further).
std::string tuning_key(const GemmDesc& d);

// True when make_gemm_op takes an input scale (GemmDesc::input_scale) for this Conv descriptor
// (group 1, constant f32 weight, 2-D) and it pays: the op scales its weights per run instead,
// which must cost no more than the pass over the input that the Mul would make
// (Co * kh * kw <= Ho * Wo per image).
bool input_scale_pays(const GemmDesc& d);

// True for the node kinds gemm_desc_from_node describes: ai.onnx MatMul, Gemm, Conv,
// ConvTranspose, RNN, LSTM, GRU, MatMulInteger and ConvInteger, and kiln::NhwcConv (the one list
// of them).
bool gemm_like(const Node& n);

// The descriptor of node `n` with these operands and output `output` (its dims and dtype), or
// nullopt when `n` is not gemm_like, has other outputs (recurrent nodes: the caller checks
// that they are unused) or is a ConvTranspose it cannot resolve.
std::optional<GemmDesc> gemm_desc_from_node(const Node& n, const std::vector<Operand>& ins,
                                            const std::vector<int64_t>& out_dims, DType out_dtype, int output = 0);

// A fast op for this descriptor (float32 operands), or null when it is not covered. Constant
// operands are packed or copied here: they need to outlive only this call.
std::unique_ptr<GemmOp> make_gemm_op(const GemmDesc& desc);

// gemm_desc_from_node + make_gemm_op.
std::unique_ptr<GemmOp> make_gemm_op(const Node& n, const std::vector<Operand>& ins,
                                     const std::vector<int64_t>& out_dims, DType out_dtype);

}  // namespace kiln::gemm_ops
