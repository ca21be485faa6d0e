// GemmDesc from an IR Node: the IR-facing half of runtime/gemm_ops.h (the ops themselves need
// no IR, so that ahead-of-time compiled models can rebuild them from a serialized plan).
#include <cctype>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "ir/graph.h"
#include "ops/window_util.h"
#include "runtime/gemm_ops.h"

namespace kiln::gemm_ops {
namespace {

int64_t attr_int(const Node& n, const std::string& k, int64_t def) {
  const Attribute* a = n.attr(k);
  return a && a->kind == Attribute::Kind::kInt ? a->i : def;
}
float attr_float(const Node& n, const std::string& k, float def) {
  const Attribute* a = n.attr(k);
  if (a && a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  return a && a->kind == Attribute::Kind::kFloat ? a->f : def;
}
std::vector<int64_t> attr_ints(const Node& n, const std::string& k, std::vector<int64_t> def) {
  const Attribute* a = n.attr(k);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : def;
}
std::string attr_string(const Node& n, const std::string& k, const std::string& def) {
  const Attribute* a = n.attr(k);
  return a && a->kind == Attribute::Kind::kString ? a->s : def;
}

// Activation names compare case-insensitively (as the reference kernel reads them).
std::vector<std::string> lowercase(std::vector<std::string> names) {
  for (std::string& s : names)
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return names;
}

}  // namespace

bool gemm_like(const Node& n) {
  if (n.domain == "kiln") return n.op_type == "NhwcConv";
  return (n.domain.empty() || n.domain == "ai.onnx") &&
         (n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Conv" || n.op_type == "ConvTranspose" ||
          n.op_type == "RNN" || n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "MatMulInteger" ||
          n.op_type == "ConvInteger");
}

std::optional<GemmDesc> gemm_desc_from_node(const Node& n, const std::vector<Operand>& ins,
                                            const std::vector<int64_t>& out_dims, DType out_dtype, int output) {
  if (!gemm_like(n) || output < 0 || static_cast<size_t>(output) >= n.outputs.size() || !n.outputs[output])
    return std::nullopt;
  GemmDesc d;
  if (n.op_type == "RNN" || n.op_type == "LSTM" || n.op_type == "GRU") {
    d.kind = n.op_type == "RNN" ? GemmKind::kRnn : n.op_type == "LSTM" ? GemmKind::kLstm : GemmKind::kGru;
    const std::string dir = attr_string(n, "direction", "forward");
    d.rnn.direction = dir == "forward" ? 0 : dir == "reverse" ? 1 : dir == "bidirectional" ? 2 : -1;
    if (d.rnn.direction < 0) return std::nullopt;  // the reference kernel reports it
    d.rnn.layout = static_cast<int32_t>(attr_int(n, "layout", 0));
    d.rnn.linear_before_reset = static_cast<int32_t>(attr_int(n, "linear_before_reset", 0));
    d.rnn.output = output;
    d.rnn.hidden = attr_int(n, "hidden_size", 0);
    d.rnn.has_clip = n.attr("clip") != nullptr;
    d.rnn.clip = attr_float(n, "clip", 0.0f);
    d.rnn.input_forget = attr_int(n, "input_forget", 0) != 0;
    // The defaults per direction: Sigmoid for gates, Tanh for the rest (RNN: Tanh).
    if (const Attribute* a = n.attr("activations"); a && a->kind == Attribute::Kind::kStrings) {
      const std::vector<std::string> one = d.kind == GemmKind::kRnn    ? std::vector<std::string>{"Tanh"}
                                           : d.kind == GemmKind::kLstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                                                       : std::vector<std::string>{"Sigmoid", "Tanh"};
      std::vector<std::string> want = one;
      if (d.rnn.direction == 2) want.insert(want.end(), one.begin(), one.end());
      d.rnn.default_activations = lowercase(a->strings) == lowercase(want);
    } else if (n.attr("activations") || n.attr("activation_alpha") || n.attr("activation_beta")) {
      d.rnn.default_activations = false;
    }
  } else if (n.outputs.size() != 1) {
    return std::nullopt;
  } else if (n.op_type == "MatMul") {
    d.kind = GemmKind::kMatMul;
  } else if (n.op_type == "MatMulInteger") {
    d.kind = GemmKind::kMatMulInteger;
  } else if (n.op_type == "Gemm") {
    d.kind = GemmKind::kGemm;
    d.trans_a = attr_int(n, "transA", 0) != 0;
    d.trans_b = attr_int(n, "transB", 0) != 0;
    d.alpha = attr_float(n, "alpha", 1.0f);
    d.beta = attr_float(n, "beta", 1.0f);
  } else if (n.op_type == "Conv" || n.op_type == "NhwcConv" || n.op_type == "ConvInteger") {
    d.kind = n.op_type == "Conv" ? GemmKind::kConv : n.op_type == "NhwcConv" ? GemmKind::kConvNhwc : GemmKind::kConvInteger;
    d.group = attr_int(n, "group", 1);
    d.strides = attr_ints(n, "strides", {1, 1});
    d.dilations = attr_ints(n, "dilations", {1, 1});
    d.pads = attr_ints(n, "pads", {0, 0, 0, 0});
    d.auto_pad = attr_string(n, "auto_pad", "NOTSET");
  } else {
    // ConvTranspose, 2-D only. The pads are resolved here, as the reference kernel resolves them
    // (output_shape, output_padding, auto_pad), so that the op needs none of those attributes.
    if (ins.size() < 2 || ins[0].dims.size() != 4 || ins[1].dims.size() != 4) return std::nullopt;
    const std::vector<int64_t> kernel_shape = attr_ints(n, "kernel_shape", {});
    if (!kernel_shape.empty() && kernel_shape != std::vector<int64_t>{ins[1].dims[2], ins[1].dims[3]}) return std::nullopt;
    d.kind = GemmKind::kConvTranspose;
    d.group = attr_int(n, "group", 1);
    d.strides = attr_ints(n, "strides", {1, 1});
    d.dilations = attr_ints(n, "dilations", {1, 1});
    try {
      const Window w = resolve_transpose_window(AttrReader(n), {ins[0].dims[2], ins[0].dims[3]},
                                                {ins[1].dims[2], ins[1].dims[3]});
      d.pads = w.pads;
    } catch (const Error&) {
      return std::nullopt;  // malformed attributes: the reference kernel reports them
    }
  }
  d.operands = ins;
  d.out_dims = out_dims;
  d.out_dtype = out_dtype;
  return d;
}

std::unique_ptr<GemmOp> make_gemm_op(const Node& n, const std::vector<Operand>& ins,
                                     const std::vector<int64_t>& out_dims, DType out_dtype) {
  std::optional<GemmDesc> d = gemm_desc_from_node(n, ins, out_dims, out_dtype);
  return d ? make_gemm_op(*d) : nullptr;
}

namespace {

const char* const kAlgoNames[] = {"default", "gemm", "gemm-pixel-rows", "winograd2", "winograd4"};

std::string joined_dims(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

}  // namespace

std::string to_string(const KernelChoice& c) {
  if (c.is_default()) return "default";
  std::string s;
  if (c.algo != ConvAlgo::kDefault) s = "algo=" + std::string(kAlgoNames[static_cast<int>(c.algo)]);
  if (c.mr > 0) s += (s.empty() ? "" : " ") + std::string("mr=") + std::to_string(c.mr);
  if (c.chunks > 0) s += (s.empty() ? "" : " ") + std::string("split=") + std::to_string(c.chunks) + "x" + std::to_string(c.groups);
  return s;
}

bool parse_kernel_choice(const std::string& text, KernelChoice* out) {
  KernelChoice c;
  if (text == "default") {
    *out = c;
    return true;
  }
  std::istringstream in(text);
  std::string field;
  bool any = false;
  while (in >> field) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "algo") {
      int found = -1;
      for (int i = 0; i < static_cast<int>(std::size(kAlgoNames)); ++i)
        if (value == kAlgoNames[i]) found = i;
      if (found < 0) return false;
      c.algo = static_cast<ConvAlgo>(found);
    } else if (key == "mr") {
      if (value.empty() || value.size() > 3 || value.find_first_not_of("0123456789") != std::string::npos) return false;
      c.mr = std::stoi(value);
    } else if (key == "split") {
      const size_t x = value.find('x');
      const std::string a = value.substr(0, x), b = x == std::string::npos ? "" : value.substr(x + 1);
      auto small = [](const std::string& v) {
        return !v.empty() && v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
      };
      if (!small(a) || !small(b)) return false;
      c.chunks = std::stoi(a);
      c.groups = std::stoi(b);
      if (c.chunks <= 0 || c.groups <= 0) return false;
    } else {
      return false;
    }
    any = true;
  }
  if (!any || c.is_default()) return false;  // ("default" is the one spelling of the default)
  *out = c;
  return true;
}

KernelChoice tuned_choice(const TuningTable* table, const GemmDesc& d) {
  if (!table || table->empty()) return {};
  auto it = table->find(tuning_key(d));
  return it == table->end() ? KernelChoice{} : it->second;
}

std::string tuning_key(const GemmDesc& d) {
  if ((d.kind == GemmKind::kMatMul || d.kind == GemmKind::kGemm) && d.operands.size() >= 2) {
    const Operand &a = d.operands[0], &b = d.operands[1];
    return std::string(d.kind == GemmKind::kMatMul ? "MatMul " : "Gemm ") + std::string(dtype_name(b.dtype)) + " a" +
           joined_dims(a.dims) + " b" + joined_dims(b.dims) + (d.trans_a ? " tA" : "") + (d.trans_b ? " tB" : "");
  }
  if (d.kind != GemmKind::kConv || d.operands.size() < 2) return "";
  const Operand &x = d.operands[0], &w = d.operands[1];
  return "Conv " + std::string(dtype_name(w.dtype)) + " x" + joined_dims(x.dims) + " w" + joined_dims(w.dims) +
         " s" + joined_dims(d.strides) + " d" + joined_dims(d.dilations) + " p" + joined_dims(d.pads) +
         (d.auto_pad == "NOTSET" ? "" : " " + d.auto_pad) + " g" + std::to_string(d.group);
}

}  // namespace kiln::gemm_ops
