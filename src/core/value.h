// Runtime values flowing through the interpreter: a tensor, a sequence of tensors, or an
// optional (which may be empty). Mirrors ONNX's TypeProto kinds.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

struct RtValue {
  enum class Kind { kNone, kTensor, kSequence };
  Kind kind = Kind::kNone;
  bool optional = false;           // wrapped in an ONNX Optional
  Tensor tensor;                   // kTensor
  std::vector<Tensor> sequence;    // kSequence
  DType elem_dtype = DType::kUndefined;  // element type of sequences / empty optionals

  RtValue() = default;
  RtValue(Tensor t) : kind(Kind::kTensor), tensor(std::move(t)) {}  // NOLINT
  static RtValue make_sequence(std::vector<Tensor> items, DType elem) {
    RtValue v;
    v.kind = Kind::kSequence;
    v.sequence = std::move(items);
    v.elem_dtype = elem;
    return v;
  }
  static RtValue make_empty_optional(DType elem) {
    RtValue v;
    v.optional = true;
    v.elem_dtype = elem;
    return v;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_none() const { return kind == Kind::kNone; }
};

}  // namespace kiln
