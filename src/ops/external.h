// kiln::External: a region of nodes that an external backend runs (pass/partition_external.cc
// makes them). Attributes: `backend` (its name), `body` (the region as a graph: inputs, its own
// constants, outputs), `opset` (the default domain's opset the body's nodes were imported at),
// `artifact` (what the backend's codegen made; absent before external-codegen runs).
// The reference kernel runs the body on the interpreter: the oracle the backend is tested against.
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

inline constexpr const char* kExternalOp = "External";
inline constexpr const char* kExternalDomain = "kiln";

bool is_external(const Node& n);

// Every value's type in `external`'s body with its inputs typed `inputs` (static inference of the
// body's nodes in order; values inference cannot type keep their declared type). `constants`,
// parallel to the inputs when given, are the input values known at compile time (a Reshape's
// target shape computed from the input dims).
std::unordered_map<const Value*, Type> infer_external_body(const Node& external, const std::vector<Type>& inputs,
                                                           const std::vector<const Tensor*>& constants = {});

}  // namespace kiln
