// Shared by fold-batchnorm and fold-scale-bias: recognizing a "linear producer" (Conv,
// ConvTranspose, Gemm or MatMul with constant weights) and folding a per-output-channel affine
// map y*scale + shift that follows it into its weights and bias.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/rewrite.h"

namespace kiln {

struct LinearProducer {
  enum class Kind { kConv, kConvTranspose, kGemm, kMatMul };
  Kind kind = Kind::kConv;
  Node* node = nullptr;
  int64_t channels = 0;      // output channels
  int64_t out_rank = -1;     // rank of the output (-1 unknown)
  int64_t channel_axis = 1;  // axis of the output channels (last axis for Gemm/MatMul)
};

// `v` is output 0 of a Conv/ConvTranspose/Gemm/MatMul with constant f32/f64 weights (and
// constant bias when present), used only once (by one node, not a graph output).
std::optional<LinearProducer> match_linear_producer(const Graph& g, const UseMap& uses,
                                                    const Value* v);

// True when constant `c`, broadcast against the producer's output, is a scalar or varies only
// along the channel axis and does not change the output's shape.
bool is_per_channel(const LinearProducer& p, const Tensor& c);
// `c` (per_channel) as `channels` doubles.
std::vector<double> channel_values(const LinearProducer& p, const Tensor& c);

// Rewrites the producer so that its output becomes output*scale + shift (per channel; each
// vector has `channels` entries, shift may be empty for none). Returns the value that now
// carries the result: the producer's output, or for a MatMul with a shift a new Add's output.
// Returns nullptr (and changes nothing) when the fold is not possible.
Value* fold_affine(Graph& g, GraphEditor& ed, const LinearProducer& p,
                   const std::vector<double>& scale, const std::vector<double>& shift);

// Applies `try_fold` (true when it rerouted the node's output, leaving the node dead) to every
// node of `g` and of its subgraphs (first; they may read this graph's constants), sweeping until
// nothing folds so that chains fold completely; folded nodes and dead values are dropped after
// each sweep and the order restored (a fold may append nodes). True when anything folded.
using AffineFoldFn = std::function<bool(Graph&, GraphEditor&, const UseMap&, Node&)>;
bool fold_until_fixpoint(Graph& g, const AffineFoldFn& try_fold);

}  // namespace kiln
