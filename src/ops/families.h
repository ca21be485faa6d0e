// One registration function per op family (one file each); registry.cc calls them all.
#pragma once

namespace kiln {

class OpRegistry;

void register_elementwise_ops(OpRegistry& r);   // ops/elementwise.cc: unary/binary math, logic, Cast
void register_activation_ops(OpRegistry& r);    // ops/activation.cc: Relu, Gelu, Softmax, ...
void register_nn_ops(OpRegistry& r);            // ops/nn.cc: Conv, ConvTranspose, pooling
void register_normalization_ops(OpRegistry& r); // ops/normalization.cc: BN, LayerNorm, ...
void register_matmul_ops(OpRegistry& r);        // ops/matmul.cc: MatMul, Gemm, Einsum
void register_tensor_ops(OpRegistry& r);        // ops/tensor.cc: Reshape, Transpose, Concat, ...
void register_indexing_ops(OpRegistry& r);      // ops/indexing.cc: Gather, Scatter, Slice, ...
void register_reduction_ops(OpRegistry& r);     // ops/reduction.cc: Reduce*, ArgMax, TopK, ...
void register_control_flow_ops(OpRegistry& r);  // ops/control_flow.cc: If, Loop, Scan
void register_sequence_ops(OpRegistry& r);      // ops/sequence.cc: Sequence*, Optional*
// ops/generator.cc: Range, OneHot, Trilu, ...; also losses, strings, training and ai.onnx.ml.
void register_extra_ops(OpRegistry& r);
// ops/signal.cc: DFT, STFT, windows; ops/attention.cc + transformer.cc: Attention, RMSNorm, ...
void register_signal_attention_ops(OpRegistry& r);
// ops/rnn.cc: RNN, LSTM, GRU; ops/quantize.cc: Quantize/DequantizeLinear, QLinear*, ConvInteger.
void register_rnn_quant_ops(OpRegistry& r);
// ops/qlinear_contrib.cc: ONNX Runtime's com.microsoft QLinearAdd/Mul/..., QGemm (QOperator format).
void register_qlinear_contrib_ops(OpRegistry& r);
// ops/kiln_composites.cc: kiln::Gelu, Silu, HardSwish, LayerNorm, Attention (fuse-composites).
void register_kiln_composite_ops(OpRegistry& r);
// ops/external.cc: kiln::External (regions an external backend runs; partition-external).
void register_external_ops(OpRegistry& r);

}  // namespace kiln
