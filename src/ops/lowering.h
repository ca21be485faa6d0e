// TE lowerings of ops: per op a function that builds the op's output tensors as tensor
// expressions of its input tensors. A lowering sees the concrete shapes of one call (for its
// decisions: broadcasting, which path) and the same dims as expressions (for shapes, extents and
// index arithmetic): a dim that varies with the input sizes is a variable there, so that the
// kernel serves every size (symbolic-shape kernels); a lowering that builds index arithmetic
// from the concrete sizes instead is still correct, its kernel is only specialised to them. One file per op family in ops/lower/; the table is assembled
// in ops/lower/table.cc. A lowering returns nullopt for configurations it does not handle
// (unsupported dtype, non-constant parameter, ...); the node then runs its reference kernel.
// Tests: tests/runtime/test_compiled_executor.cc (compiled vs interpreter).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/registry.h"
#include "te/te.h"

namespace kiln {

// What a lowering sees: the node (attributes), its inputs as TE tensors with concrete shapes
// and dtypes, the values of constant inputs, and the concrete output shapes and dtypes (known
// from a reference run or static shape inference). Rank-0 values appear with shape [1] (TIR
// buffers have at least one dim).
class LowerContext : public AttrReader {
 public:
  LowerContext(const Node& node, int64_t opset, std::string prefix) : AttrReader(node), opset_(opset),
                                                                      prefix_(std::move(prefix)) {}
  int64_t opset() const { return opset_; }

  std::vector<te::Tensor> inputs;                  // nullptr for omitted inputs
  std::vector<std::vector<int64_t>> input_shapes;  // parallel to inputs
  std::vector<DType> input_dtypes;
  std::vector<const Tensor*> constants;            // the value of a constant input, else nullptr
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<DType> output_dtypes;
  // The dims as expressions, parallel to input_shapes / output_shapes: an IntImm, or a dim
  // variable (a kernel scalar param) where the dim varies with the input sizes. Left empty,
  // they are the constants of the shapes.
  std::vector<std::vector<tir::Expr>> input_dims, output_dims;

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs[static_cast<size_t>(i)] != nullptr; }
  const te::Tensor& input(int i) const { return inputs[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& in_shape(int i) const { return input_shapes[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& out_shape(int i = 0) const { return output_shapes[static_cast<size_t>(i)]; }
  std::vector<tir::Expr> in_dims(int i) const;
  std::vector<tir::Expr> out_dims(int i = 0) const;
  DType in_dtype(int i) const { return input_dtypes[static_cast<size_t>(i)]; }
  DType out_dtype(int i = 0) const { return output_dtypes[static_cast<size_t>(i)]; }
  // The value of constant input i, or nullptr. Lowerings read constants only through this (and
  // constant_ints): the compiled executor reuses a kernel for a segment of the same structure
  // whose constants agree where the lowering looked (constants_read).
  const Tensor* constant(int i) const {
    if (i >= num_inputs() || i < 0) return nullptr;
    if (read_.size() < inputs.size()) read_.resize(inputs.size(), 0);
    read_[static_cast<size_t>(i)] = 1;
    return constants[static_cast<size_t>(i)];
  }
  // The inputs whose constant value (or its absence) constant() returned, in increasing order.
  std::vector<int> constants_read() const {
    std::vector<int> out;
    for (size_t i = 0; i < read_.size(); ++i)
      if (read_[i]) out.push_back(static_cast<int>(i));
    return out;
  }
  // Integer values of constant input i (any integer dtype); nullopt when not constant.
  std::optional<std::vector<int64_t>> constant_ints(int i) const;
  // A tensor name unique within the kernel: prefix + "_" + suffix.
  std::string name(const std::string& suffix) const { return prefix_ + "_" + suffix; }

 private:
  int64_t opset_;
  std::string prefix_;
  mutable std::vector<char> read_;
};

using LowerResult = std::optional<std::vector<te::Tensor>>;
using LowerFn = LowerResult (*)(const LowerContext& ctx);

// The lowering of an op (any opset), or nullptr when it has none.
LowerFn find_lowering(const std::string& domain, const std::string& op_type);

// ---- helpers shared by the lowering files ---------------------------------------------------
namespace lower {

std::vector<tir::Expr> to_exprs(const std::vector<int64_t>& dims);
// a * b and the product of dims[from, to), folding constants (so that constant dims give the
// same TIR as before symbolic dims existed).
tir::Expr mul(const tir::Expr& a, const tir::Expr& b);
tir::Expr product(const std::vector<tir::Expr>& dims, size_t from = 0, size_t to = SIZE_MAX);
// An integer dim expression as a value of float dtype `d` (a mean's element count).
tir::Expr as_float(DType d, const tir::Expr& n);
tir::DataType scalar_type(DType d);
// Supported element types of generated code (f32, f64, i32, i64, i8, u8, bool).
bool supported_dtype(DType d);
// Index of input `t` (shape `in`) for output index `idx` (shape `out`) under numpy broadcasting.
std::vector<tir::Expr> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                       const std::vector<tir::Expr>& idx);
// Constant of dtype `d` with value `v`.
tir::Expr constant(DType d, double v);
// Row-major strides and element count.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims);
int64_t numel_of(const std::vector<int64_t>& dims);
// Normalizes a possibly negative axis (throws nothing; returns -1 when out of range).
int64_t norm_axis(int64_t axis, int64_t rank);

}  // namespace lower

// Family registration functions (ops/lower/*.cc), assembled by find_lowering's table.
struct LoweringEntry {
  const char* domain;
  const char* op;
  LowerFn fn;
};
void add_unary_lowerings(std::vector<LoweringEntry>& table);      // ops/lower/unary.cc
void add_binary_lowerings(std::vector<LoweringEntry>& table);     // ops/lower/binary.cc
void add_injective_lowerings(std::vector<LoweringEntry>& table);  // ops/lower/injective.cc
void add_reduction_lowerings(std::vector<LoweringEntry>& table);  // ops/lower/reduction.cc
void add_pool_lowerings(std::vector<LoweringEntry>& table);       // ops/lower/pool.cc
void add_resize_lowerings(std::vector<LoweringEntry>& table);     // ops/lower/resize.cc
void add_quantize_lowerings(std::vector<LoweringEntry>& table);   // ops/lower/quantize.cc

}  // namespace kiln
