// RNN, LSTM and GRU (f32, default activations) for the compiled executor: the input
// projection of every step at once as one GEMM (X W^T + biases, W packed once), then per step
// the recurrent product H R^T (a packed-weight GEMV at batch 1, else a GEMM on R packed once)
// and the gates on the AVX-512 sigmoid/tanh. Built from a GemmDesc only, so ahead-of-time
// compiled models can rebuild it. Tests: tests/runtime/test_recurrent.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::rnn_ops {

// The op for a recurrent descriptor (GemmKind::kRnn/kLstm/kGru) with f32 operands, constant W,
// R, B and peepholes, default activations, sequence_lens (int32/int64, constant or at run time)
// and clip / input_forget as the node has them; null otherwise (the reference kernel runs
// those). A sequence length outside [0, S] throws kBadInput, as the reference kernel does.
std::unique_ptr<gemm_ops::GemmOp> make_recurrent_op(const gemm_ops::GemmDesc& d);

}  // namespace kiln::rnn_ops
