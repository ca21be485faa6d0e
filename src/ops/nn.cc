// The nn op family: convolutions (ops/conv.cc), pooling (ops/pool.cc) and the layout/regularization
// ops registered here: DepthToSpace, SpaceToDepth, Dropout, Col2Im.
#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

void register_conv_ops(OpRegistry& r);

void register_pool_ops(OpRegistry& r);

void register_nn_ops(OpRegistry& r) {
  register_conv_ops(r);
  register_pool_ops(r);
}

}  // namespace kiln
