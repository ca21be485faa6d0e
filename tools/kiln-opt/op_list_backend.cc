// make_op_list_backend (see op_list_backend.h).
#include "tools/kiln-opt/op_list_backend.h"

#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace kiln {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, sep);)
    if (!p.empty()) parts.push_back(p);
  return parts;
}

class OpListBackend : public ext::Backend {
 public:
  std::string name_;
  std::set<std::string> ops_;
  std::vector<ext::Composite> composites_;
  double min_cost_ = 10.0;

  std::string name() const override { return name_; }
  bool supports(const ext::Region&, const ext::Node& n) const override {
    return ops_.count(n.domain.empty() ? n.op : n.domain + "::" + n.op) > 0;
  }
  std::vector<ext::Composite> composites() const override { return composites_; }
  double min_region_cost() const override { return min_cost_; }
  std::string codegen(const ext::Region& r) const override {
    std::string s = name_ + ":";
    for (const ext::Node& n : r.nodes) s += " " + n.op + (n.composite.empty() ? "" : "[" + n.composite + "]");
    return s;
  }
  std::unique_ptr<ext::RuntimeModule> load(const std::string&, const ext::Region&, const ext::ModuleOptions&) const override {
    throw std::runtime_error("the op-list test backend does not run regions");
  }
};

}  // namespace

std::shared_ptr<const ext::Backend> make_op_list_backend(const std::string& spec) {
  auto b = std::make_shared<OpListBackend>();
  const std::vector<std::string> words = split(spec, ' ');
  if (words.empty()) throw Error(ErrorKind::kUsage, "offload spec '" + spec + "' names no backend");
  b->name_ = words[0];
  for (size_t i = 1; i < words.size(); ++i) {
    const auto eq = words[i].find('=');
    const std::string key = words[i].substr(0, eq), value = eq == std::string::npos ? "" : words[i].substr(eq + 1);
    if (key == "ops") {
      for (const std::string& op : split(value, ',')) b->ops_.insert(op);
    } else if (key == "composites") {
      for (const std::string& c : split(value, ';')) {
        const auto colon = c.find(':');
        if (colon == std::string::npos) throw Error(ErrorKind::kUsage, "composite '" + c + "' needs NAME:Op+Op");
        b->composites_.push_back({c.substr(0, colon), split(c.substr(colon + 1), '+')});
      }
    } else if (key == "min-cost") {
      b->min_cost_ = std::stod(value);
    } else {
      throw Error(ErrorKind::kUsage, "offload spec: unknown key '" + key + "' (ops, composites, min-cost)");
    }
  }
  return b;
}

}  // namespace kiln
