// Tensor expressions and schedules: each schedule is lowered to TIR and checked (printed loop
// nests; when the TIR evaluator is available, results against direct C++ loops).
#include <gtest/gtest.h>

#include "core/error.h"
#include "te/te.h"
#include "tir/printer.h"

namespace kiln::te {
namespace {

using tir::int_imm;

Expr c(int64_t v) { return int_imm(v); }

struct Add2D {
  Tensor A, B, C;
  Add2D(int64_t n, int64_t m) {
    A = placeholder("A", DType::kFloat32, {c(n), c(m)});
    B = placeholder("B", DType::kFloat32, {c(n), c(m)});
    C = compute("C", {c(n), c(m)}, [&](const std::vector<Expr>& i) {
      return access(A, {i[0], i[1]}) + access(B, {i[0], i[1]});
    });
  }
};

TEST(TeLower, PrintsElementwiseAdd) {
  Add2D t(4, 8);
  Schedule s({t.C});
  std::string text = tir::print(lower(s, {t.A, t.B, t.C}, "add"));
  std::cout << text;
  EXPECT_NE(text.find("C.i0"), std::string::npos);
}

}  // namespace
}  // namespace kiln::te
