// upgrade_to_opset13 (pass/upgrade_opset13.h): a model with an op that has no opset-13 form is
// left unchanged, with the reason naming the node; the golden files cover the rewrites.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "pass/upgrade_opset13.h"

namespace kiln {
namespace {

TEST(UpgradeOpset13, BlockedModelStaysUnchanged) {
  const char* text = R"(model ir=7 opsets={"": 12}
graph @main(%x: f32[2,3,4]) -> (%y: f32[2,12], %p: f32[2,3,4]) {
  %y_shape = const i64[2] [2, 12]
  %r = Reshape(%x, %y_shape) : f32[2,12]
  %y = Relu(%r) : f32[2,12]
  %p = Softmax(%x) {axis=1} #flat : f32[2,3,4]
  return %y, %p
}
)";
  Model m = parse_model(text);
  const std::string before = print_model(m);
  const std::string why = upgrade_to_opset13(m);
  EXPECT_NE(why.find("flat"), std::string::npos) << why;
  EXPECT_NE(why.find("flattened axes"), std::string::npos) << why;
  EXPECT_EQ(print_model(m), before);
  EXPECT_EQ(m.opset(""), 12);
}

TEST(UpgradeOpset13, OlderOpsetsAreNotUpgraded) {
  Model m = parse_model(R"(model ir=5 opsets={"": 10}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = Relu(%x) : f32[2]
  return %y
}
)");
  EXPECT_NE(upgrade_to_opset13(m).find("opset 10"), std::string::npos);
  EXPECT_EQ(m.opset(""), 10);
}

}  // namespace
}  // namespace kiln
