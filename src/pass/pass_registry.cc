// The list of passes; the default pipeline is this order.
#include "pass/passes.h"

namespace kiln {

std::vector<PassInfo> registered_passes() {
  return {
      shape_inference_pass(),
      qdq_to_integer_pass(),
      fold_dequantize_pass(),
      constant_folding_pass(),
      dead_code_elimination_pass(),
      cse_pass(),
      simplify_pass(),
      einsum_to_matmul_pass(),
      conv1d_to_conv2d_pass(),
      conv3d_to_conv2d_pass(),
      fold_batchnorm_pass(),
      fold_scale_bias_pass(),
      fuse_composites_pass(),
      fuse_attention_pass(),
      annotate_external_pass(),
      merge_composites_pass(),
      partition_external_pass(),
      external_codegen_pass(),
      assign_layouts_pass(),
      fusion_pass(),
      fuse_epilogues_pass(),
      upgrade_opset13_pass(),
  };
}

std::vector<std::string> default_pipeline() {
  std::vector<std::string> names;
  for (const auto& p : registered_passes())
    if (p.in_default_pipeline) names.push_back(p.name);
  return names;
}

}  // namespace kiln
