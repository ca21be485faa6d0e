// One function per pass file returning its PassInfo; registered_passes() lists them in
// default-pipeline order (pass_registry.cc).
#pragma once

#include <vector>

#include "pass/pass.h"

namespace kiln {

PassInfo shape_inference_pass();     // pass/shape_inference.cc
PassInfo constant_folding_pass();    // pass/constant_folding.cc
PassInfo qdq_to_integer_pass();     // pass/qdq_to_integer.cc (the engine's pipeline; not kiln optimize's output)
PassInfo fold_dequantize_pass();     // pass/constant_folding.cc (the engine's pipeline; not kiln optimize's output)
PassInfo dead_code_elimination_pass();  // pass/dead_code_elimination.cc
PassInfo dead_code_elimination_pass_again();
PassInfo cse_pass();                 // pass/common_subexpression.cc
PassInfo simplify_pass();            // pass/algebraic_simplify.cc
PassInfo einsum_to_matmul_pass();    // pass/einsum_to_matmul.cc
PassInfo conv1d_to_conv2d_pass();    // pass/conv1d_to_conv2d.cc
PassInfo conv3d_to_conv2d_pass();    // pass/conv3d_to_conv2d.cc
PassInfo fold_batchnorm_pass();      // pass/fold_batchnorm.cc
PassInfo fold_scale_bias_pass();     // pass/fold_scale_bias.cc
PassInfo fuse_composites_pass();     // pass/fuse_composites.cc
PassInfo fuse_attention_pass();      // pass/fuse_composites.cc (same matcher; not in the default pipeline)
PassInfo annotate_external_pass();   // pass/annotate_external.cc
PassInfo merge_composites_pass();    // pass/merge_composites.cc
PassInfo partition_external_pass();  // pass/partition_external.cc
PassInfo external_codegen_pass();    // pass/external_codegen.cc
PassInfo assign_layouts_pass();      // pass/assign_layouts.cc
PassInfo fusion_pass();              // pass/fusion.cc
PassInfo fuse_epilogues_pass();      // pass/fuse_epilogues.cc
PassInfo upgrade_opset13_pass();     // pass/upgrade_opset13.cc (not in the default pipeline)

std::vector<PassInfo> registered_passes();

}  // namespace kiln
