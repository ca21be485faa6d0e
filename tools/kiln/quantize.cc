// `kiln quantize MODEL -o OUT.onnx [--calibration DIR | --calibration-random N] [--method M]
// [--per-tensor] [--activation-type u8|s8] [--exclude NODE|OP]... [--dynamic] [--report FILE]`:
// post-training quantization into a QDQ ONNX model (driver/quantize, docs/quantization.md).
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "driver/compile_model.h"
#include "driver/quantize/quantize_model.h"
#include "pass/pass.h"

namespace kiln::cli {
namespace {

struct QuantizeArgs {
  std::string model, output, calibration, preprocess, method = "minmax", activation_type = "u8", report;
  int calibration_random = 0, threads = 1, report_samples = 8;
  double percentile = 99.999;
  bool per_tensor = false, dynamic = false, quiet = false, reduce_range = false;
  uint64_t seed = 0;
  std::vector<std::string> exclude, dims;
};

DType parse_activation_type(const std::string& s) {
  if (s == "u8" || s == "uint8") return DType::kUInt8;
  if (s == "s8" || s == "int8") return DType::kInt8;
  throw Error(ErrorKind::kUsage, "--activation-type " + s + ": expected u8 or s8");
}

int quantize_command(const QuantizeArgs& a) {
  QuantizeModelOptions o;
  o.dynamic = a.dynamic;
  o.qdq.activation_dtype = parse_activation_type(a.activation_type);
  o.qdq.per_channel = !a.per_tensor;
  o.qdq.reduce_range = a.reduce_range;
  for (const auto& e : a.exclude)
    for (const auto& name : split_names(e)) o.qdq.exclude.insert(name);
  o.method = parse_calibration_method(a.method);
  o.percentile = a.percentile;
  o.calibration_dir = a.calibration;
  o.image_preprocess = a.preprocess;
  o.calibration_random = a.calibration_random;
  o.seed = a.seed;
  for (const auto& d : a.dims) o.dims.insert(parse_dim_binding(d));
  o.threads = a.threads;
  o.report_path = a.report;
  o.report_samples = a.report_samples;
  if (!a.quiet) o.progress = print_progress;
  if (a.dynamic && (!a.calibration.empty() || a.calibration_random) && a.report.empty())
    throw Error(ErrorKind::kUsage, "--dynamic needs no calibration samples (they are only read for --report)");
  QuantizeModelResult r = quantize_model_file(a.model, a.output, o);
  std::cout << "model: " << a.model << " (" << r.nodes_before << " nodes)\n";
  if (a.dynamic) {
    std::cout << "dynamic: " << r.dynamic_nodes << " MatMul/Gemm nodes with int8 weights, activations quantized per run\n";
  } else {
    std::cout << "calibration: " << r.samples << " samples, method " << a.method << ", " << std::fixed
              << std::setprecision(1) << r.calibration_s << " s\n";
    std::cout << "quantized: " << r.quantized_activations << " activations (" << a.activation_type << "), "
              << r.quantized_weights << " weights (int8, " << (a.per_tensor ? "per tensor" : "per channel") << "), "
              << r.quantized_biases << " biases (int32)\n";
  }
  if (!r.float_ops.empty()) {
    std::cout << "left float:";
    for (const auto& [op, fo] : r.float_ops) std::cout << " " << op << " x" << fo.nodes.size();
    std::cout << " (the report lists the nodes)\n";
  }
  for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  for (const auto& out : r.outputs)
    std::cout << "output " << out.name << ": SQNR " << std::setprecision(2) << out.sqnr_db << " dB, cosine "
              << std::setprecision(6) << out.cosine << "\n";
  if (!r.tensors.empty() && !a.report.empty()) {
    std::cout << "worst tensors (SQNR dB):";
    for (size_t i = 0; i < r.tensors.size() && i < 5; ++i)
      std::cout << " " << r.tensors[i].name << " " << std::setprecision(1) << r.tensors[i].sqnr_db;
    std::cout << "\nreport: " << a.report << "\n";
  }
  std::cout << "nodes: " << r.nodes_before << " -> " << r.nodes_after << "\nwrote " << a.output << "\n";
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Post-training int8 quantization into a QDQ ONNX model");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("-o,--output", args->output, "the quantized ONNX model to write")->required();
  cmd->add_option("--calibration", args->calibration,
                  "folder of calibration samples: one .npy/.pb file per sample (single-input models), or one "
                  "subfolder per sample holding a file per input (.pb binds by its embedded name, .npy by position)");
  cmd->add_option("--calibration-preprocess", args->preprocess,
                  "read image files (PNG, JPEG, BMP, PNM, TIFF, WebP) in --calibration as samples of the model's "
                  "image input, resized to its size and normalised by a preset: " + image_preprocess_help());
  cmd->add_option("--calibration-random", args->calibration_random,
                  "calibrate on N seeded random samples instead (a smoke run: real data gives real ranges)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--method", args->method, "calibration method: minmax, entropy (KL divergence) or percentile")
      ->capture_default_str();
  cmd->add_option("--percentile", args->percentile, "percentile of |x| kept by --method percentile")
      ->capture_default_str();
  cmd->add_flag("--per-tensor", args->per_tensor, "one scale per weight tensor (default: per output channel)");
  cmd->add_flag("--reduce-range", args->reduce_range,
                "7-bit weights ([-63, 63]): for ONNX Runtime on AVX2/AVX-512 CPUs without VNNI, whose u8 x s8 "
                "kernels saturate with full-range weights");
  cmd->add_option("--activation-type", args->activation_type, "activation type: u8 or s8 (both asymmetric)")
      ->capture_default_str();
  cmd->add_option("--exclude", args->exclude, "node name or op type to keep in float; repeatable, or comma-separated");
  cmd->add_flag("--dynamic", args->dynamic,
                "dynamic quantization: MatMul/Gemm weights int8, activations quantized on every run (no calibration)");
  cmd->add_option("--report", args->report,
                  "write a per-tensor accuracy report (SQNR, cosine vs the float model), .json or .html");
  cmd->add_option("--report-samples", args->report_samples, "calibration samples the report compares on")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--dim", args->dims, "NAME=VALUE: a symbolic input dim of the random samples (default 1)");
  cmd->add_option("--threads", args->threads, "worker threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", args->seed, "seed of the random samples")->capture_default_str();
  cmd->add_flag("-q,--quiet", args->quiet, "no progress output");
  cmd->callback([args, &action] { action = [args] { return quantize_command(*args); }; });
}

}  // namespace kiln::cli
