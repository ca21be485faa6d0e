// An out-of-tree kiln backend in one file: it runs regions of element-wise float32 ops (Relu,
// Sigmoid, Tanh, Add, Mul, Sub of equal shapes) with plain loops. It shows the whole extension
// API: which nodes it takes (supports), the artifact (codegen: the region as text, one line per
// op), the module that runs it (load + run), and the plugin entry point. docs/byoc.md walks
// through it; build it with this folder's CMakeLists.txt against an installed kiln.
#include <kiln/extension.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace {

using kiln::ext::ElementType;

bool unary(const std::string& op) { return op == "Relu" || op == "Sigmoid" || op == "Tanh"; }
bool binary(const std::string& op) { return op == "Add" || op == "Mul" || op == "Sub"; }

// One op of the artifact: "Add 3 4 -> 5" (region value indices).
struct Op {
  std::string name;
  std::vector<int> in;
  int out = -1;
};

class ExampleModule : public kiln::ext::RuntimeModule {
 public:
  ExampleModule(std::vector<Op> ops, const kiln::ext::Region& r) : ops_(std::move(ops)), region_(r) {
    // Intermediate values live in buffers of this module, sized now (the dims are bound).
    for (const kiln::ext::ValueInfo& v : r.values) values_.emplace_back(static_cast<size_t>(v.elements()));
  }

  void run(const std::vector<kiln::ext::TensorRef>& inputs, const std::vector<kiln::ext::TensorRef>& outputs) override {
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::vector<float>& dst = values_[static_cast<size_t>(region_.inputs[k])];
      std::memcpy(dst.data(), inputs[k].data, dst.size() * sizeof(float));
    }
    for (const Op& op : ops_) {
      const std::vector<float>& a = values_[static_cast<size_t>(op.in[0])];
      std::vector<float>& y = values_[static_cast<size_t>(op.out)];
      for (size_t i = 0; i < y.size(); ++i) {
        const float x = a[i];
        if (op.name == "Relu") y[i] = x > 0 ? x : 0;
        else if (op.name == "Sigmoid") y[i] = 1 / (1 + std::exp(-x));
        else if (op.name == "Tanh") y[i] = std::tanh(x);
        else {
          const float b = values_[static_cast<size_t>(op.in[1])][i];
          y[i] = op.name == "Add" ? x + b : op.name == "Mul" ? x * b : x - b;
        }
      }
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::vector<float>& src = values_[static_cast<size_t>(region_.outputs[k])];
      std::memcpy(outputs[k].data, src.data(), src.size() * sizeof(float));
    }
  }

 private:
  std::vector<Op> ops_;
  kiln::ext::Region region_;
  std::vector<std::vector<float>> values_;
};

class ExampleBackend : public kiln::ext::Backend {
 public:
  std::string name() const override { return "example"; }

  bool supports(const kiln::ext::Region& r, const kiln::ext::Node& n) const override {
    if (!n.domain.empty() || (!unary(n.op) && !binary(n.op)) || n.outputs.size() != 1) return false;
    const kiln::ext::ValueInfo& out = r.values[static_cast<size_t>(n.outputs[0])];
    for (int v : n.inputs) {  // float32 of the output's shape: no broadcasting, no constants
      if (v < 0) return false;
      const kiln::ext::ValueInfo& in = r.values[static_cast<size_t>(v)];
      if (in.type != ElementType::kFloat32 || in.dims != out.dims || in.constant()) return false;
    }
    return out.type == ElementType::kFloat32;
  }

  // Any region is worth it here (a real backend sets a threshold that pays for its transfers).
  double min_region_cost() const override { return 1; }

  std::string codegen(const kiln::ext::Region& r) const override {
    std::ostringstream s;
    for (const kiln::ext::Node& n : r.nodes) {
      s << n.op;
      for (int v : n.inputs) s << " " << v;
      s << " -> " << n.outputs[0] << "\n";
    }
    return s.str();
  }

  std::unique_ptr<kiln::ext::RuntimeModule> load(const std::string& artifact, const kiln::ext::Region& r,
                                                 const kiln::ext::ModuleOptions&) const override {
    std::vector<Op> ops;
    std::istringstream lines(artifact);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      Op op;
      words >> op.name;
      for (std::string w; words >> w && w != "->";) op.in.push_back(std::stoi(w));
      words >> op.out;
      if (op.out < 0 || op.out >= static_cast<int>(r.values.size()) || op.in.empty())
        throw std::runtime_error("malformed artifact line '" + line + "'");
      ops.push_back(std::move(op));
    }
    return std::make_unique<ExampleModule>(std::move(ops), r);
  }
};

}  // namespace

KILN_EXTENSION_INIT(api_version, register_backend) {
  if (api_version != kiln::ext::kApiVersion) return 1;
  register_backend(std::make_shared<ExampleBackend>());
  return 0;
}
