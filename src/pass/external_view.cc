// node_region / body_region (see external_view.h).
#include "pass/external_view.h"

namespace kiln {
namespace {

ext::Attr to_ext(const Attribute& a) {
  ext::Attr e;
  switch (a.kind) {
    case Attribute::Kind::kInt: e.kind = ext::Attr::Kind::kInt; e.i = a.i; break;
    case Attribute::Kind::kFloat: e.kind = ext::Attr::Kind::kFloat; e.f = a.f; break;
    case Attribute::Kind::kString: e.kind = ext::Attr::Kind::kString; e.s = a.s; break;
    case Attribute::Kind::kInts: e.kind = ext::Attr::Kind::kInts; e.ints = a.ints; break;
    case Attribute::Kind::kFloats:
      e.kind = ext::Attr::Kind::kFloats;
      e.floats.assign(a.floats.begin(), a.floats.end());
      break;
    case Attribute::Kind::kStrings: e.kind = ext::Attr::Kind::kStrings; e.strings = a.strings; break;
    default: e.kind = ext::Attr::Kind::kOther; break;
  }
  return e;
}

struct RegionMaker {
  ext::Region r;
  std::unordered_map<const Value*, int> index;
  const std::unordered_map<const Value*, Type>* types = nullptr;

  int add(const Value* v) {
    if (!v) return -1;
    auto it = index.find(v);
    if (it != index.end()) return it->second;
    ext::ValueInfo info;
    info.name = v->name;
    auto t = types ? types->find(v) : std::unordered_map<const Value*, Type>::const_iterator();
    const Type& type = types && t != types->end() ? t->second : v->type;
    info.type = type.kind == Type::Kind::kTensor ? static_cast<ext::ElementType>(type.dtype) : ext::ElementType::kUndefined;
    info.known_rank = type.kind == Type::Kind::kTensor && type.shape.has_value();
    if (info.known_rank)
      for (const Dim& d : type.shape->dims) info.dims.push_back(d.known() ? d.value : -1);
    if (v->is_constant()) info.data = v->initializer.raw();
    r.values.push_back(std::move(info));
    const int k = static_cast<int>(r.values.size()) - 1;
    index[v] = k;
    return k;
  }

  void add_node(const Node& n) {
    ext::Node e;
    e.op = n.op_type;
    e.domain = n.domain;
    e.name = n.display_name();
    for (const Value* v : n.inputs) e.inputs.push_back(add(v));
    for (const Value* v : n.outputs) e.outputs.push_back(add(v));
    for (const auto& [key, a] : n.attrs) {
      if (key == "kiln.composite") e.composite = a.s;
      else if (key.rfind("kiln.", 0) != 0) e.attrs[key] = to_ext(a);
    }
    r.nodes.push_back(std::move(e));
  }
};

}  // namespace

ext::Region node_region(const Node& n) {
  RegionMaker m;
  m.r.name = n.display_name();
  m.add_node(n);
  return std::move(m.r);
}

ext::Region body_region(const Graph& body, const std::string& name,
                        const std::unordered_map<const Value*, Type>* types) {
  RegionMaker m;
  m.types = types;
  m.r.name = name;
  for (const Value* v : body.inputs) m.r.inputs.push_back(m.add(v));
  for (const auto& n : body.nodes) m.add_node(*n);
  for (const Value* v : body.outputs) m.r.outputs.push_back(m.add(v));
  return std::move(m.r);
}

}  // namespace kiln
