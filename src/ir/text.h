// Text form of the graph IR: a printer and a parser that round-trip exactly
// (print_model(parse_model(print_model(m))) == print_model(m)).
//
//   model ir=8 opsets={"": 13, "ai.onnx.ml": 3} producer="pytorch" "2.1"
//   metadata {"key": "value"}
//   graph @main(%x: f32[N,3,224,224], %w2: f32[3] = default) -> (%y: f32[N,1000]) {
//     %w2 = const f32[3] [1, 2, 3]
//     %w = const f32[2,2] [1, 2, 3.5, -0]
//     %big = const f32[64,3,7,7] hex"0000803f..."
//     %c = Conv(%x, %w) {pads=[3, 3, 3, 3], strides=[2, 2]} #"conv1" : f32[N,64,112,112]
//     %a, %b = Split(%c, _) {axis=1} : f32[...], ?[...]
//     %m = ai.onnx.ml::LabelEncoder(%a) {keys_strings=["a", "b"]} : f32[?]
//     %o = If(%cond) {else_branch=graph @else() -> (%e: f32[2]) {
//       ...
//       return %e
//     }, then_branch=graph @then() -> (%t: f32[2]) { ... }} : f32[2]
//     return %y
//   }
//
// Notes on the format:
// - Whitespace and newlines are not significant; `//` starts a comment to the end of the line.
// - Types: `f32[N,3,?]` (dims: integer, symbol, `?` unknown), `f32[...]` unknown rank,
//   `?[...]` unknown dtype, `seq<T>`, `opt<T>`.
// - Names: `%name` bare when it matches [A-Za-z0-9_./-]+, otherwise `%"quoted"` with C escapes;
//   same for node names `#name` and graph names `@name`. `_` is an omitted input/output.
// - Constants print as `const` lines before the nodes, in Graph::constants order, preceded by
//   the data of graph inputs that have an initializer (`= default` in the signature). The parser
//   sets such an input's Value::initializer and does not add it to Graph::constants.
//   A const line ends with ` : type` only when the Value's type differs from the type implied by
//   its tensor.
// - Tensor data: `[v, ...]` row-major, or `hex"..."` raw little-endian bytes (used for > 16
//   elements of non-string types and always for float8, 4-bit and complex types).
// - The `model ...` header is optional for the parser; without it the model gets
//   ir_version 8 and opsets {"": kDefaultTextOpset}.
// - Subgraphs resolve a name in their own graph first, then in enclosing graphs (captures).
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace kiln {

// Default-domain opset assumed for text without a `model` header.
inline constexpr int64_t kDefaultTextOpset = 21;

struct PrintOptions {
  // Replace tensor data of more than 16 elements by `<N elements elided>`. For humans only: the
  // result does not parse.
  bool elide_large_constants = false;
};

std::string print_model(const Model& m, const PrintOptions& opts = {});
// `graph @name(...) -> (...) { ... }` followed by a newline.
std::string print_graph(const Graph& g, const PrintOptions& opts = {});
// Type in text form (same as to_string(Type) except that odd symbols are quoted).
std::string print_type(const Type& t);
// An attribute's value in text form (as it appears after `name=` in a node).
std::string print_attribute(const Attribute& a);

// Parses the text form. Throws kiln::Error(kInvalidModel) whose message gives the line:column,
// e.g. "expected ')' at 3:17 (found '}')", and whose location names `source_name`.
// The resulting Model's path is `source_name`.
Model parse_model(std::string_view text, const std::string& source_name = "<text>");

}  // namespace kiln
