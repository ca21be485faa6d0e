// RNN, LSTM and GRU (f32, default activations, no clip) for the compiled executor: the input
// projection of every step at once as one GEMM (X W^T + biases, W packed once), then per step
// the recurrent product H R^T (a packed-weight GEMV at batch 1, else a GEMM on R packed once)
// and the gates on the AVX-512 sigmoid/tanh. Built from a GemmDesc only, so ahead-of-time
// compiled models can rebuild it. Tests: tests/runtime/test_recurrent.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::rnn_ops {

// The op for a recurrent descriptor (GemmKind::kRnn/kLstm/kGru) with f32 operands, constant W,
// R and B, no sequence_lens, no peepholes, default activations, no clip, no input_forget; null
// otherwise (the reference kernel runs those).
std::unique_ptr<gemm_ops::GemmOp> make_recurrent_op(const gemm_ops::GemmDesc& d);

}  // namespace kiln::rnn_ops
