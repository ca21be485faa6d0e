// ExecPlan <-> blob (see plan_io.h).
#include "runtime/plan_io.h"

#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>

#include "core/error.h"

namespace kiln {
namespace {

// Ahead-of-time models rebuild their GemmOps from serialized descriptors: a field added to
// GemmDesc or Operand must be written and read here (and kPlanBlobVersion bumped), else
// compiled models would silently lose it. These asserts catch additions (x86-64 layout).
// (A field can fit in tail padding: the last field's offset is checked as well as the size.)
static_assert(sizeof(gemm_ops::GemmDesc) == 280 && offsetof(gemm_ops::GemmDesc, choice) == 264 &&
                  sizeof(gemm_ops::KernelChoice) == 16 &&
                  sizeof(gemm_ops::GemmDesc::Recurrent) == 40 &&
                  offsetof(gemm_ops::GemmDesc::Recurrent, also_states) == 32 &&
                  sizeof(gemm_ops::Operand) == 40,
              "GemmDesc/Operand changed: serialize the new fields in plan_io.cc and bump kPlanBlobVersion");

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
constexpr uint64_t kAlign = 64;

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

class Writer {
 public:
  template <typename T>
  void pod(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint32_t>(static_cast<uint32_t>(s.size()));
    out += s;
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) pod<T>(x);
  }
  void strs(const std::vector<std::string>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  std::string out;
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  uint32_t count(size_t elem_bytes) {
    uint32_t k = pod<uint32_t>();
    need(static_cast<size_t>(k) * elem_bytes);  // a corrupt count cannot allocate much
    return k;
  }
  std::string str() {
    uint32_t k = count(1);
    std::string s(p_ + at_, k);
    at_ += k;
    return s;
  }
  template <typename T>
  std::vector<T> vec() {
    uint32_t k = count(sizeof(T));
    std::vector<T> v(k);
    for (auto& x : v) x = pod<T>();
    return v;
  }
  std::vector<std::string> strs() {
    uint32_t k = count(4);
    std::vector<std::string> v(k);
    for (auto& s : v) s = str();
    return v;
  }

 private:
  void need(size_t k) {
    if (k > n_ - at_) throw Error(ErrorKind::kInvalidModel, "compiled model: the plan is truncated");
  }
  const char* p_;
  size_t n_;
  size_t at_ = 0;
};

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorKind::kInvalidModel, "compiled model: corrupt plan (" + what + ")");
}

DType read_dtype(Reader& r) {
  int32_t d = r.pod<int32_t>();
  if (d != 0 && !dtype_is_valid(d)) corrupt("dtype " + std::to_string(d));  // 0: absent operands
  return static_cast<DType>(d);
}

void write_dims(Writer& w, const std::vector<int64_t>& d) { w.vec<int64_t>(d); }
std::vector<int64_t> read_dims(Reader& r) {
  auto d = r.vec<int64_t>();
  for (int64_t x : d)
    if (x < 0) corrupt("negative dim");
  return d;
}

// An external region as Backend::load sees it (its constants' data travel in the constants table).
void write_region(Writer& w, const ext::Region& r) {
  w.str(r.name);
  w.pod<uint32_t>(static_cast<uint32_t>(r.values.size()));
  for (const ext::ValueInfo& v : r.values) {
    w.str(v.name);
    w.pod<int32_t>(static_cast<int32_t>(v.type));
    write_dims(w, v.dims);
    w.pod<uint8_t>(v.known_rank ? 1 : 0);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(r.nodes.size()));
  for (const ext::Node& n : r.nodes) {
    w.str(n.op);
    w.str(n.domain);
    w.str(n.name);
    w.str(n.composite);
    w.vec<int32_t>(n.inputs);
    w.vec<int32_t>(n.outputs);
    w.pod<uint32_t>(static_cast<uint32_t>(n.attrs.size()));
    for (const auto& [key, a] : n.attrs) {
      w.str(key);
      w.pod<int32_t>(static_cast<int32_t>(a.kind));
      w.pod<int64_t>(a.i);
      w.pod<double>(a.f);
      w.str(a.s);
      w.vec<int64_t>(a.ints);
      w.vec<double>(a.floats);
      w.strs(a.strings);
    }
  }
  w.vec<int32_t>(r.inputs);
  w.vec<int32_t>(r.outputs);
}

// One plan without its kernel names and constants (written once for all plans); `global` maps
// the plan's constant indices to the shared table's.
void write_plan_body(Writer& w, const ExecPlan& plan, const std::vector<int32_t>& global) {
  auto constant = [&](int32_t c) { return c < 0 ? c : global[static_cast<size_t>(c)]; };
  w.pod<uint32_t>(static_cast<uint32_t>(plan.slots.size()));
  for (const auto& s : plan.slots) {
    w.pod<uint8_t>(s.tensor ? 1 : 0);
    w.pod<int32_t>(static_cast<int32_t>(s.dtype));
    write_dims(w, s.dims);
    w.pod<int32_t>(constant(s.constant));
  }
  w.vec<int32_t>(plan.inputs);
  w.vec<int32_t>(plan.outputs);
  w.strs(plan.input_names);
  w.strs(plan.output_names);
  w.pod<int64_t>(plan.arena_bytes);
  w.pod<uint32_t>(static_cast<uint32_t>(plan.steps.size()));
  for (const auto& st : plan.steps) {
    w.pod<int32_t>(static_cast<int32_t>(st.kind));
    w.str(st.name);
    w.str(st.op);
    w.pod<int32_t>(st.kernel);
    w.vec<int64_t>(st.scalars);
    w.pod<uint32_t>(static_cast<uint32_t>(st.args.size()));
    for (const auto& a : st.args) {
      w.pod<int32_t>(a.slot);
      w.pod<int32_t>(constant(a.constant));
      w.pod<uint8_t>(a.output ? 1 : 0);
      w.pod<uint8_t>(a.graph_output ? 1 : 0);
      w.pod<int64_t>(a.arena_offset);
      w.pod<int32_t>(static_cast<int32_t>(a.dtype));
      write_dims(w, a.dims);
    }
    w.vec<int32_t>(st.inputs);
    w.vec<int32_t>(st.outputs);
    w.pod<int32_t>(st.node);
    const gemm_ops::GemmDesc& g = st.gemm;
    w.pod<int32_t>(static_cast<int32_t>(g.kind));
    w.pod<uint8_t>(g.trans_a ? 1 : 0);
    w.pod<uint8_t>(g.trans_b ? 1 : 0);
    w.pod<float>(g.alpha);
    w.pod<float>(g.beta);
    w.pod<int64_t>(g.group);
    w.vec<int64_t>(g.strides);
    w.vec<int64_t>(g.dilations);
    w.vec<int64_t>(g.pads);
    w.str(g.auto_pad);
    w.pod<uint32_t>(static_cast<uint32_t>(g.operands.size()));
    for (const auto& o : g.operands) {
      w.pod<uint8_t>(o.present ? 1 : 0);
      w.pod<int32_t>(static_cast<int32_t>(o.dtype));
      write_dims(w, o.dims);
    }
    write_dims(w, g.out_dims);
    w.pod<int32_t>(static_cast<int32_t>(g.out_dtype));
    w.pod<int32_t>(g.epilogue_bias);
    w.pod<int32_t>(g.epilogue_residual);
    w.pod<float>(g.clamp_lo);
    w.pod<float>(g.clamp_hi);
    w.pod<int32_t>(g.epilogue_activation);
    w.pod<int32_t>(g.input_scale);
    w.pod<int32_t>(g.epilogue_max_pool);
    w.pod<int32_t>(g.rnn.direction);
    w.pod<int32_t>(g.rnn.layout);
    w.pod<int32_t>(g.rnn.linear_before_reset);
    w.pod<int32_t>(g.rnn.output);
    w.pod<int64_t>(g.rnn.hidden);
    w.pod<uint8_t>(g.rnn.default_activations);
    w.pod<uint8_t>(g.rnn.has_clip);
    w.pod<uint8_t>(g.rnn.input_forget);
    w.pod<float>(g.rnn.clip);
    w.pod<int32_t>(g.rnn.also_states);
    w.pod<int32_t>(g.requant_scale);
    w.pod<int32_t>(g.requant_y_scale);
    w.pod<int32_t>(g.requant_y_zero_point);
    w.pod<int32_t>(g.requant_scale_factor);
    w.pod<int32_t>(static_cast<int32_t>(g.choice.algo));
    w.pod<int32_t>(g.choice.mr);
    w.pod<int32_t>(g.choice.chunks);
    w.pod<int32_t>(g.choice.groups);
    w.vec<int32_t>(st.free_after);
    w.vec<int32_t>(st.branches);
    w.pod<uint32_t>(static_cast<uint32_t>(st.branch_feeds.size()));
    for (const auto& f : st.branch_feeds) w.vec<int32_t>(f);
    w.pod<int32_t>(st.external);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(plan.externals.size()));
  for (const PlanExternal& x : plan.externals) {
    w.str(x.backend);
    w.str(x.artifact);
    write_region(w, x.region);
    std::vector<int32_t> cs;
    for (int32_t c : x.constants) cs.push_back(constant(c));
    w.vec<int32_t>(cs);
  }
}

}  // namespace

uint64_t write_plan_blob(const std::vector<const ExecPlan*>& plans, size_t signatures, const std::string& path) {
  if (signatures == 0 || signatures > plans.size()) throw Error(ErrorKind::kUsage, "write_plan_blob: no entry plan");
  // The shared constants: one entry per distinct tensor (the signatures' plans hold the same
  // initializers; what the input shapes folded differs per plan).
  std::vector<Tensor> constants;
  std::map<std::tuple<const void*, int32_t, std::vector<int64_t>>, int32_t> index_of;
  std::vector<std::vector<int32_t>> global(plans.size());
  for (size_t p = 0; p < plans.size(); ++p) {
    if (plans[p]->kernel_names != plans[0]->kernel_names)
      throw Error(ErrorKind::kUsage, "write_plan_blob: the plans have different kernel tables");
    for (const Tensor& c : plans[p]->constants) {
      auto key = std::make_tuple(c.raw(), static_cast<int32_t>(c.dtype()), c.dims());
      auto [it, fresh] = index_of.emplace(key, static_cast<int32_t>(constants.size()));
      if (fresh) constants.push_back(c);
      global[p].push_back(it->second);
    }
  }
  Writer w;
  w.strs(plans[0]->kernel_names);
  w.pod<uint32_t>(static_cast<uint32_t>(plans.size()));
  w.pod<uint32_t>(static_cast<uint32_t>(signatures));
  for (size_t p = 0; p < plans.size(); ++p) write_plan_body(w, *plans[p], global[p]);
  // Constants: a table here, the bytes after the plans at 64-byte aligned offsets.
  // Offsets are relative to the data section, which starts after the plans (header field).
  w.pod<uint32_t>(static_cast<uint32_t>(constants.size()));
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& c : constants) {
    offsets.push_back(offset);
    w.pod<int32_t>(static_cast<int32_t>(c.dtype()));
    write_dims(w, c.dims());
    w.pod<uint64_t>(offset);
    w.pod<uint64_t>(c.nbytes());
    offset = align_up(offset + c.nbytes());
  }
  const uint64_t plan_bytes = w.out.size();
  const uint64_t data_start = align_up(64 + plan_bytes);
  const uint64_t total = data_start + offset;

  std::string header(64, '\0');
  std::memcpy(header.data(), kMagic, 8);
  uint32_t version = kPlanBlobVersion;
  std::memcpy(header.data() + 8, &version, 4);
  std::memcpy(header.data() + 16, &plan_bytes, 8);
  std::memcpy(header.data() + 24, &total, 8);
  std::memcpy(header.data() + 32, &data_start, 8);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::kUsage, "cannot write '" + path + "'");
  f.write(header.data(), 64);
  f.write(w.out.data(), static_cast<std::streamsize>(plan_bytes));
  std::string pad(static_cast<size_t>(data_start - 64 - plan_bytes), '\0');
  f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
  uint64_t at = data_start;
  for (size_t i = 0; i < constants.size(); ++i) {
    const Tensor& c = constants[i];
    std::string gap(static_cast<size_t>(data_start + offsets[i] - at), '\0');
    f.write(gap.data(), static_cast<std::streamsize>(gap.size()));
    if (c.nbytes() > 0) f.write(static_cast<const char*>(c.raw()), static_cast<std::streamsize>(c.nbytes()));
    at = data_start + offsets[i] + c.nbytes();
  }
  std::string tail(static_cast<size_t>(total - at), '\0');
  f.write(tail.data(), static_cast<std::streamsize>(tail.size()));
  f.flush();
  if (!f) throw Error(ErrorKind::kUsage, "error writing '" + path + "'");
  return total;
}

namespace {

ext::Region read_region(Reader& r) {
  ext::Region g;
  g.name = r.str();
  g.values.resize(r.count(16));
  for (ext::ValueInfo& v : g.values) {
    v.name = r.str();
    const int32_t type = r.pod<int32_t>();
    if (type != 0 && !dtype_is_valid(type)) corrupt("external value type");
    v.type = static_cast<ext::ElementType>(type);
    v.dims = read_dims(r);
    v.known_rank = r.pod<uint8_t>() != 0;
  }
  const int32_t nvalues = static_cast<int32_t>(g.values.size());
  auto check = [&](const std::vector<int32_t>& vs, bool allow_absent) {
    for (int32_t v : vs)
      if (v < (allow_absent ? -1 : 0) || v >= nvalues) corrupt("external value index");
  };
  g.nodes.resize(r.count(16));
  for (ext::Node& n : g.nodes) {
    n.op = r.str();
    n.domain = r.str();
    n.name = r.str();
    n.composite = r.str();
    n.inputs = r.vec<int32_t>();
    n.outputs = r.vec<int32_t>();
    check(n.inputs, true);
    check(n.outputs, true);
    const uint32_t nattrs = r.count(8);
    for (uint32_t k = 0; k < nattrs; ++k) {
      const std::string key = r.str();
      ext::Attr a;
      const int32_t kind = r.pod<int32_t>();
      if (kind < 0 || kind > static_cast<int32_t>(ext::Attr::Kind::kOther)) corrupt("external attribute kind");
      a.kind = static_cast<ext::Attr::Kind>(kind);
      a.i = r.pod<int64_t>();
      a.f = r.pod<double>();
      a.s = r.str();
      a.ints = r.vec<int64_t>();
      a.floats = r.vec<double>();
      a.strings = r.strs();
      n.attrs[key] = std::move(a);
    }
  }
  g.inputs = r.vec<int32_t>();
  g.outputs = r.vec<int32_t>();
  check(g.inputs, false);
  check(g.outputs, false);
  return g;
}

// One plan as write_plan_body wrote it; its kernel names are set (the kernel indices are checked
// against them), its constant indices are checked by the caller.
void read_plan_body(Reader& r, ExecPlan& p) {
  p.slots.resize(r.count(4));
  for (auto& s : p.slots) {
    s.tensor = r.pod<uint8_t>() != 0;
    int32_t d = r.pod<int32_t>();
    if (s.tensor && !dtype_is_valid(d)) corrupt("slot dtype");
    s.dtype = static_cast<DType>(d);
    s.dims = read_dims(r);
    s.constant = r.pod<int32_t>();
  }
  const int32_t nslots = static_cast<int32_t>(p.slots.size());
  auto check_slot = [&](int32_t s, bool allow_absent) {
    if (s < (allow_absent ? -1 : 0) || s >= nslots) corrupt("slot index");
  };
  p.inputs = r.vec<int32_t>();
  p.outputs = r.vec<int32_t>();
  for (int32_t s : p.inputs) check_slot(s, false);
  for (int32_t s : p.outputs) check_slot(s, false);
  p.input_names = r.strs();
  p.output_names = r.strs();
  if (p.input_names.size() != p.inputs.size() || p.output_names.size() != p.outputs.size()) corrupt("names");
  p.arena_bytes = r.pod<int64_t>();
  if (p.arena_bytes < 0) corrupt("arena size");
  p.steps.resize(r.count(4));
  for (auto& st : p.steps) {
    int32_t kind = r.pod<int32_t>();
    if (kind < 0 || kind > static_cast<int32_t>(PlanStep::Kind::kExternal)) corrupt("step kind");
    st.kind = static_cast<PlanStep::Kind>(kind);
    st.name = r.str();
    st.op = r.str();
    st.kernel = r.pod<int32_t>();
    if (st.kind == PlanStep::Kind::kKernel && (st.kernel < 0 || st.kernel >= static_cast<int32_t>(p.kernel_names.size())))
      corrupt("kernel index");
    st.scalars = r.vec<int64_t>();
    for (int64_t v : st.scalars)
      if (v < 0) corrupt("kernel scalar");
    st.args.resize(r.count(4));
    for (auto& a : st.args) {
      a.slot = r.pod<int32_t>();
      a.constant = r.pod<int32_t>();
      a.output = r.pod<uint8_t>() != 0;
      a.graph_output = r.pod<uint8_t>() != 0;
      a.arena_offset = r.pod<int64_t>();
      a.dtype = read_dtype(r);
      a.dims = read_dims(r);
      if (a.constant < 0) check_slot(a.slot, false);
    }
    st.inputs = r.vec<int32_t>();
    st.outputs = r.vec<int32_t>();
    for (int32_t s : st.inputs) check_slot(s, true);
    for (int32_t s : st.outputs) check_slot(s, true);
    st.node = r.pod<int32_t>();
    gemm_ops::GemmDesc& g = st.gemm;
    int32_t gk = r.pod<int32_t>();
    if (gk < 0 || gk > static_cast<int32_t>(gemm_ops::GemmKind::kConvInteger)) corrupt("gemm kind");
    g.kind = static_cast<gemm_ops::GemmKind>(gk);
    g.trans_a = r.pod<uint8_t>() != 0;
    g.trans_b = r.pod<uint8_t>() != 0;
    g.alpha = r.pod<float>();
    g.beta = r.pod<float>();
    g.group = r.pod<int64_t>();
    g.strides = r.vec<int64_t>();
    g.dilations = r.vec<int64_t>();
    g.pads = r.vec<int64_t>();
    g.auto_pad = r.str();
    g.operands.resize(r.count(5));
    for (auto& o : g.operands) {
      o.present = r.pod<uint8_t>() != 0;
      o.dtype = read_dtype(r);
      o.dims = read_dims(r);
    }
    g.out_dims = read_dims(r);
    g.out_dtype = read_dtype(r);
    g.epilogue_bias = r.pod<int32_t>();
    g.epilogue_residual = r.pod<int32_t>();
    g.clamp_lo = r.pod<float>();
    g.clamp_hi = r.pod<float>();
    g.epilogue_activation = r.pod<int32_t>();
    g.input_scale = r.pod<int32_t>();
    g.epilogue_max_pool = r.pod<int32_t>();
    g.rnn.direction = r.pod<int32_t>();
    g.rnn.layout = r.pod<int32_t>();
    g.rnn.linear_before_reset = r.pod<int32_t>();
    g.rnn.output = r.pod<int32_t>();
    g.rnn.hidden = r.pod<int64_t>();
    g.rnn.default_activations = r.pod<uint8_t>();
    g.rnn.has_clip = r.pod<uint8_t>();
    g.rnn.input_forget = r.pod<uint8_t>();
    g.rnn.clip = r.pod<float>();
    g.rnn.also_states = r.pod<int32_t>();
    g.requant_scale = r.pod<int32_t>();
    g.requant_y_scale = r.pod<int32_t>();
    g.requant_y_zero_point = r.pod<int32_t>();
    g.requant_scale_factor = r.pod<int32_t>();
    const int32_t algo = r.pod<int32_t>();
    if (algo < 0 || algo > static_cast<int32_t>(gemm_ops::ConvAlgo::kWinograd4)) corrupt("gemm kernel choice");
    g.choice.algo = static_cast<gemm_ops::ConvAlgo>(algo);
    g.choice.mr = r.pod<int32_t>();
    g.choice.chunks = r.pod<int32_t>();
    g.choice.groups = r.pod<int32_t>();
    if (g.choice.mr < 0 || g.choice.mr > 64 || g.choice.chunks < 0 || g.choice.groups < 0 || g.choice.chunks > 4096 ||
        g.choice.groups > 4096)
      corrupt("gemm kernel choice");
    const int32_t nops = static_cast<int32_t>(g.operands.size());
    if (g.epilogue_bias < -1 || g.epilogue_bias >= nops || g.epilogue_residual < -1 || g.epilogue_residual >= nops ||
        g.epilogue_activation < 0 || g.epilogue_activation > 4 || g.input_scale < -1 || g.input_scale >= nops ||
        g.epilogue_max_pool < 0 || g.epilogue_max_pool > 1 || g.requant_scale < -1 || g.requant_scale >= nops ||
        g.requant_y_scale < -1 || g.requant_y_scale >= nops || g.requant_y_zero_point < -1 ||
        g.requant_y_zero_point >= nops || g.requant_scale_factor < -1 || g.requant_scale_factor >= nops)
      corrupt("gemm epilogue");
    st.free_after = r.vec<int32_t>();
    for (int32_t s : st.free_after) check_slot(s, false);
    st.branches = r.vec<int32_t>();
    st.branch_feeds.resize(r.count(4));
    for (auto& f : st.branch_feeds) {
      f = r.vec<int32_t>();
      for (int32_t k : f)
        if (k < 0 || static_cast<size_t>(k) >= st.inputs.size()) corrupt("branch input");
    }
    if (st.kind == PlanStep::Kind::kIf &&
        (st.inputs.empty() || st.branches.size() != 2 || st.branch_feeds.size() != 2 || st.outputs.empty()))
      corrupt("If step");
    st.external = r.pod<int32_t>();
    const size_t gemm_outputs = 1 + static_cast<size_t>((g.rnn.also_states & 1) + ((g.rnn.also_states >> 1) & 1));
    if (st.kind == PlanStep::Kind::kGemm &&
        (st.inputs.size() != g.operands.size() || g.rnn.also_states < 0 || g.rnn.also_states > 3 ||
         st.outputs.size() != gemm_outputs))
      corrupt("gemm step");
  }
  p.externals.resize(r.count(16));
  for (PlanExternal& x : p.externals) {
    x.backend = r.str();
    x.artifact = r.str();
    x.region = read_region(r);
    x.constants = r.vec<int32_t>();
    if (x.constants.size() != x.region.values.size()) corrupt("external region constants");
  }
  for (const PlanStep& st : p.steps)
    if (st.kind == PlanStep::Kind::kExternal &&
        (st.external < 0 || static_cast<size_t>(st.external) >= p.externals.size() ||
         st.inputs.size() != p.externals[static_cast<size_t>(st.external)].region.inputs.size() ||
         st.args.size() != p.externals[static_cast<size_t>(st.external)].region.outputs.size()))
      corrupt("external step");
}

// Checks the kIf steps' branches (a plan after the step's own, fed and returning as many values
// as the step has: no cycles, no unset slots) and points every plan's `linked` at `plans`.
void link_branches(std::vector<ExecPlan>& plans) {
  for (size_t p = 0; p < plans.size(); ++p) {
    for (const PlanStep& st : plans[p].steps)
      for (size_t b = 0; b < st.branches.size(); ++b) {
        const int32_t index = st.branches[b];
        if (index == -1) continue;
        if (index < 0 || static_cast<size_t>(index) <= p || static_cast<size_t>(index) >= plans.size() ||
            st.kind != PlanStep::Kind::kIf)
          corrupt("branch plan index");
        const ExecPlan& body = plans[static_cast<size_t>(index)];
        if (body.inputs.size() != st.branch_feeds[b].size() || body.outputs.size() != st.outputs.size())
          corrupt("branch plan inputs or outputs");
      }
    plans[p].linked.clear();
    for (ExecPlan& q : plans) plans[p].linked.push_back(&q);
  }
}

}  // namespace

PlanBlob read_plan_blobs(const void* data, size_t size) {
  const char* base = static_cast<const char*>(data);
  if (size < 64 || std::memcmp(base, kMagic, 8) != 0)
    throw Error(ErrorKind::kInvalidModel, "compiled model: no kiln plan (bad magic)");
  uint32_t version;
  uint64_t plan_bytes, total, data_start;
  std::memcpy(&version, base + 8, 4);
  std::memcpy(&plan_bytes, base + 16, 8);
  std::memcpy(&total, base + 24, 8);
  std::memcpy(&data_start, base + 32, 8);
  if (version != kPlanBlobVersion)
    throw Error(ErrorKind::kInvalidModel, "compiled model: plan format " + std::to_string(version) +
                                              ", this runtime reads format " + std::to_string(kPlanBlobVersion) +
                                              " (recompile the model)");
  if (total > size || plan_bytes > size - 64 || data_start % kAlign != 0 || data_start > total) throw Error(ErrorKind::kInvalidModel, "compiled model: the plan is truncated");
  Reader r(base + 64, static_cast<size_t>(plan_bytes));
  const std::vector<std::string> kernel_names = r.strs();
  PlanBlob blob;
  std::vector<ExecPlan>& plans = blob.plans;
  plans.resize(r.count(16));
  blob.signatures = r.pod<uint32_t>();
  if (blob.signatures == 0 || blob.signatures > plans.size()) corrupt("no entry plan");
  for (ExecPlan& p : plans) {
    p.kernel_names = kernel_names;
    read_plan_body(r, p);
  }
  std::vector<Tensor> constants(r.count(4));
  for (auto& c : constants) {
    DType dt = read_dtype(r);
    std::vector<int64_t> dims = read_dims(r);
    uint64_t off = r.pod<uint64_t>(), nbytes = r.pod<uint64_t>();
    if (off % kAlign != 0 || off > total - data_start || nbytes > total - data_start - off) corrupt("constant offset");
    off += data_start;
    c = Tensor::view(dt, std::move(dims), const_cast<char*>(base + off));
    if (c.nbytes() != nbytes) corrupt("constant size");
  }
  const int32_t nconst = static_cast<int32_t>(constants.size());
  for (ExecPlan& p : plans) {
    for (const auto& s : p.slots)
      if (s.constant < -1 || s.constant >= nconst) corrupt("constant index");
    for (const auto& st : p.steps)
      for (const auto& a : st.args)
        if (a.constant < -1 || a.constant >= nconst) corrupt("constant index");
    for (const PlanExternal& x : p.externals)
      for (int32_t c : x.constants)
        if (c < -1 || c >= nconst) corrupt("constant index");
    p.constants = constants;
  }
  link_branches(plans);
  return blob;
}

ExecPlan read_plan_blob(const void* data, size_t size) {
  PlanBlob blob = read_plan_blobs(data, size);
  if (blob.plans.size() != 1)
    throw Error(ErrorKind::kInvalidModel, "compiled model: the blob holds " + std::to_string(blob.plans.size()) +
                                              " plans, one was expected");
  blob.plans[0].linked.clear();
  return std::move(blob.plans[0]);
}

}  // namespace kiln
