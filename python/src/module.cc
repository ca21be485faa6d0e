// kiln._kiln: the pybind11 extension under the `kiln` Python package. It binds the driver
// (Session, inspect, optimize), converts NumPy arrays to kiln Tensors and back without copies
// where it can, and maps kiln::Error onto the Python exception classes it creates.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/run_control.h"
#include "driver/aot.h"
#include "driver/inspect_report.h"
#include "driver/optimize_model.h"
#include "tune/records.h"
#include "driver/quantize/quantize_model.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// ---------------------------------------------------------------------------------------------
// Exceptions: kiln.Error and one subclass per ErrorKind, each also deriving from the builtin
// that Python code would catch for that kind of failure.

struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* internal = nullptr;
  PyObject* usage = nullptr;
  PyObject* invalid_model = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* bad_input = nullptr;
  PyObject* cancelled = nullptr;
  PyObject* timeout = nullptr;
  PyObject* resource_limit = nullptr;
};
ErrorClasses g_errors;

PyObject* new_exception(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("kiln.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // steals nothing: add_object increfs
  return cls;
}

void register_errors(py::module_& m) {
  g_errors.base = new_exception(m, "Error", PyExc_Exception,
                                "Base of every kiln error; str(e) is the message the kiln CLI prints.");
  auto with = [](PyObject* a, PyObject* b) { return py::make_tuple(py::handle(a), py::handle(b)).release().ptr(); };
  g_errors.internal = new_exception(m, "InternalError", with(g_errors.base, PyExc_RuntimeError),
                                    "A bug in kiln (CLI exit code 1).");
  g_errors.usage = new_exception(m, "UsageError", with(g_errors.base, PyExc_ValueError),
                                 "Bad arguments or API misuse (CLI exit code 2).");
  g_errors.invalid_model = new_exception(m, "InvalidModelError", with(g_errors.base, PyExc_ValueError),
                                         "A malformed model or graph (CLI exit code 3).");
  g_errors.unsupported = new_exception(m, "UnsupportedError", with(g_errors.base, PyExc_NotImplementedError),
                                       "A valid model using something kiln does not support (CLI exit code 3).");
  g_errors.bad_input = new_exception(m, "BadInputError", with(g_errors.base, PyExc_ValueError),
                                     "Input data that does not fit the model (CLI exit code 4).");
  g_errors.cancelled = new_exception(m, "CancelledError", with(g_errors.base, PyExc_RuntimeError),
                                     "The run was cancelled by Session.cancel() (CLI exit code 5).");
  g_errors.timeout = new_exception(m, "RunTimeoutError", with(g_errors.base, PyExc_TimeoutError),
                                   "The run took longer than its timeout (CLI exit code 5).");
  g_errors.resource_limit = new_exception(m, "ResourceLimitError", with(g_errors.base, PyExc_MemoryError),
                                          "The model or its inputs need more than max_memory (CLI exit code 5).");
}

PyObject* class_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return g_errors.usage;
    case ErrorKind::kInvalidModel: return g_errors.invalid_model;
    case ErrorKind::kUnsupported: return g_errors.unsupported;
    case ErrorKind::kBadInput: return g_errors.bad_input;
    case ErrorKind::kCancelled: return g_errors.cancelled;
    case ErrorKind::kTimeout: return g_errors.timeout;
    case ErrorKind::kResourceLimit: return g_errors.resource_limit;
    case ErrorKind::kInternal: return g_errors.internal;
  }
  return g_errors.base;
}

// Raises the Python exception for `e`: the message is e.what() (what the CLI prints after
// "kiln: "); kind, exit_code and the location fields are attributes.
void set_python_error(const Error& e) {
  py::gil_scoped_acquire gil;
  PyObject* cls = class_for(e.kind());
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", e.what()));
  if (!exc) return;  // the call set its own error
  exc.attr("kind") = std::string(error_kind_name(e.kind()));
  exc.attr("exit_code") = exit_code(e.kind());
  exc.attr("message") = e.message();
  const ErrorLocation& w = e.where();
  auto opt = [](const std::string& s) -> py::object { return s.empty() ? py::none() : py::object(py::str(s)); };
  exc.attr("file") = opt(w.file);
  exc.attr("node") = opt(w.node);
  exc.attr("op") = opt(w.op);
  exc.attr("pass_name") = opt(w.pass);
  PyErr_SetObject(cls, exc.ptr());
}

[[noreturn]] void raise(ErrorKind kind, const std::string& msg) { throw Error(kind, msg); }

// ---------------------------------------------------------------------------------------------
// dtypes: kiln DType <-> NumPy dtype names.

struct DTypeName {
  DType dtype;
  const char* numpy;
};
constexpr DTypeName kNumpyNames[] = {
    {DType::kFloat32, "float32"}, {DType::kFloat64, "float64"}, {DType::kFloat16, "float16"},
    {DType::kInt8, "int8"},       {DType::kInt16, "int16"},     {DType::kInt32, "int32"},
    {DType::kInt64, "int64"},     {DType::kUInt8, "uint8"},     {DType::kUInt16, "uint16"},
    {DType::kUInt32, "uint32"},   {DType::kUInt64, "uint64"},   {DType::kBool, "bool"},
    {DType::kBFloat16, "bfloat16"},  // ml_dtypes' bfloat16, when it is installed
};

const char* numpy_name(DType t) {
  for (const auto& n : kNumpyNames)
    if (n.dtype == t) return n.numpy;
  return nullptr;
}

std::optional<DType> dtype_of_numpy_name(const std::string& name) {
  for (const auto& n : kNumpyNames)
    if (name == n.numpy) return n.dtype;
  return std::nullopt;
}

py::module_& numpy() {
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

// NumPy's dtype for kiln's `t`, or None when NumPy (with ml_dtypes for bfloat16) has none.
py::object numpy_dtype(DType t) {
  if (t == DType::kString) return numpy().attr("dtype")("O");
  const char* name = numpy_name(t);
  if (!name) return py::none();
  if (t == DType::kBFloat16) {
    try {
      return numpy().attr("dtype")(py::module_::import("ml_dtypes").attr("bfloat16"));
    } catch (const py::error_already_set&) {
      return py::none();
    }
  }
  return numpy().attr("dtype")(name);
}

// ---------------------------------------------------------------------------------------------
// Inputs: NumPy array -> Tensor. Zero-copy (Tensor::view) when the array is C-contiguous, in
// native byte order, of a dtype kiln has, and 64-byte aligned (the kernel ABI, codegen.h);
// otherwise one copy into a kiln-owned Tensor.

// The base object of arrays over kiln memory: holds a reference to the Tensor's storage and
// describes it through __array_interface__, so that numpy.asarray(owner) is an array over the
// tensor whose .base is the owner. (NumPy's own protocol rather than pybind11's py::array
// constructor, whose NumPy struct layouts before pybind11 2.12 do not match NumPy 2.)
struct TensorOwner {
  Tensor tensor;
  std::string typestr;  // NumPy array-interface type string, e.g. "<f4"
};

py::object array_over(Tensor t, py::object np_dtype) {
  TensorOwner owner{std::move(t), py::str(np_dtype.attr("str"))};
  py::object arr = numpy().attr("asarray")(py::cast(std::move(owner)));
  // Types NumPy describes only as raw bytes in the interface (ml_dtypes' bfloat16: "<V2").
  if (!np_dtype.equal(arr.attr("dtype"))) arr = arr.attr("view")(np_dtype);
  return arr;
}

struct FedArray {
  RtValue value;
  bool copied = false;
  std::pair<uintptr_t, uintptr_t> borrowed{0, 0};  // [begin, end) of memory viewed, not owned
};

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

FedArray array_to_value(const std::string& input, py::array a) {
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  // dtype facts through Python attributes: pybind11 < 2.12 reads NumPy 1.x struct layouts.
  const std::string kind_str = py::str(a.dtype().attr("kind"));
  const char kind = kind_str.empty() ? '?' : kind_str[0];
  FedArray out;
  if (kind == 'U' || kind == 'S' || kind == 'O') {
    // Strings: always a copy into std::string elements.
    py::list flat = numpy().attr("ravel")(a).attr("tolist")();
    Tensor t(DType::kString, dims);
    auto* s = t.data<std::string>();
    size_t i = 0;
    for (py::handle item : flat) {
      if (py::isinstance<py::bytes>(item)) s[i++] = item.cast<std::string>();
      else if (py::isinstance<py::str>(item)) s[i++] = item.cast<std::string>();
      else raise(ErrorKind::kBadInput, "input '" + input + "': an object array must hold str or bytes, found " +
                                           std::string(py::str(py::type::handle_of(item).attr("__name__"))));
    }
    out.value = RtValue(std::move(t));
    out.copied = true;
    return out;
  }
  const std::string name = py::str(a.dtype().attr("name"));
  auto dt = dtype_of_numpy_name(name);
  if (!dt)
    raise(ErrorKind::kBadInput, "input '" + input + "': NumPy dtype " + name + " has no kiln element type");
  const bool native = a.dtype().attr("isnative").cast<bool>();
  const bool contiguous = (a.flags() & py::array::c_style) != 0;
  const auto addr = reinterpret_cast<uintptr_t>(a.data());
  if (native && contiguous && addr % Tensor::kAlignment == 0) {
    out.value = RtValue(Tensor::view(*dt, dims, const_cast<void*>(a.data())));
    out.borrowed = {addr, addr + a.attr("nbytes").cast<uintptr_t>()};
    return out;
  }
  Tensor t(*dt, dims);
  // Let NumPy do the strided / byte-swapping copy into kiln's aligned storage.
  py::object np_dtype = a.dtype().attr("newbyteorder")("=");
  numpy().attr("copyto")(array_over(t, np_dtype), a, "unsafe");
  out.value = RtValue(std::move(t));
  out.copied = true;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Outputs: Tensor -> NumPy array that owns the Tensor's storage through a TensorOwner base.

py::object tensor_to_array(const std::string& output, Tensor t, bool must_copy) {
  if (t.dtype() == DType::kString) {
    py::list items;
    const auto* s = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) items.append(py::str(s[i]));
    py::object arr = numpy().attr("array")(items, py::arg("dtype") = "O");
    return arr.attr("reshape")(py::cast(t.dims()));
  }
  py::object dtype = numpy_dtype(t.dtype());
  if (dtype.is_none()) {
    if (t.dtype() == DType::kBFloat16) {
      // Without ml_dtypes NumPy has no bfloat16: widen to float32 (a copy).
      Tensor f(DType::kFloat32, t.dims());
      for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.get_double(i));
      t = std::move(f);
      dtype = numpy().attr("dtype")("float32");
      must_copy = false;
    } else {
      raise(ErrorKind::kUnsupported, "output '" + output + "' has element type " +
                                         std::string(dtype_name(t.dtype())) + ", which NumPy cannot hold");
    }
  }
  if (must_copy) t = t.clone();
  return array_over(std::move(t), dtype);
}

py::object value_to_python(const std::string& output, RtValue v, bool must_copy) {
  if (v.is_tensor()) return tensor_to_array(output, std::move(v.tensor), must_copy);
  if (v.is_sequence()) {
    py::list items;
    for (Tensor& t : v.sequence) items.append(tensor_to_array(output, std::move(t), must_copy));
    return items;
  }
  return py::none();  // an empty optional
}

// ---------------------------------------------------------------------------------------------
// Session

py::object dims_list(const Type& t) {
  if (t.kind != Type::Kind::kTensor || !t.shape) return py::none();
  py::list dims;
  for (const Dim& d : t.shape->dims) {
    if (d.known()) dims.append(d.value);
    else if (!d.symbol.empty()) dims.append(d.symbol);
    else dims.append(py::none());
  }
  return py::tuple(dims);
}

py::dict value_info(const Value& v) {
  py::dict d;
  d["name"] = v.name;
  const Type& t = v.type;
  d["kind"] = t.kind == Type::Kind::kTensor ? "tensor" : t.kind == Type::Kind::kSequence ? "sequence" : "optional";
  const Type* elem = &t;
  while (elem->kind != Type::Kind::kTensor && elem->elem) elem = elem->elem.get();
  const DType dt = elem->kind == Type::Kind::kTensor ? elem->dtype : DType::kUndefined;
  d["kiln_dtype"] = dt == DType::kUndefined ? py::object(py::none()) : py::object(py::str(std::string(dtype_name(dt))));
  d["dtype"] = dt == DType::kUndefined ? py::object(py::none()) : numpy_dtype(dt);
  d["shape"] = dims_list(*elem);
  d["has_default"] = v.is_graph_input && v.initializer.defined();
  return d;
}

class PySession {
 public:
  PySession(std::unique_ptr<Session> s, std::string engine) : session_(std::move(s)), engine_(std::move(engine)) {
    const Graph& g = *session_->model().graph;
    for (const Value* v : g.constants)
      if (v->initializer.defined()) note_constant(v->initializer);
    for (const Value* v : g.inputs)
      if (v->initializer.defined()) note_constant(v->initializer);
    for (const auto& n : g.nodes)
      for (const auto& [name, attr] : n->attrs)
        if (attr.kind == Attribute::Kind::kTensor && attr.t.defined()) note_constant(attr.t);
  }

  py::list inputs() const {
    py::list out;
    for (const Value* v : session_->feed_inputs()) out.append(value_info(*v));
    return out;
  }
  py::list outputs() const {
    py::list out;
    for (const Value* v : session_->model().graph->outputs) out.append(value_info(*v));
    return out;
  }
  const std::string& engine() const { return engine_; }

  // feeds: a dict {name: array} or a sequence of arrays in the order of inputs(). The Python
  // layer has already turned DLPack producers, buffers and lists into NumPy arrays.
  // Session.cancel(): stops the runs that started before it (core/run_control.h).
  void cancel() { canceller_.cancel(); }

  py::dict run(py::object feeds, double timeout_s) {
    const auto& graph_inputs = session_->model().graph->inputs;
    std::vector<Value*> feedable = session_->feed_inputs();
    std::vector<RtValue> values(graph_inputs.size());
    std::vector<bool> given(graph_inputs.size(), false);
    std::vector<std::pair<uintptr_t, uintptr_t>> borrowed;
    std::vector<py::object> keep_alive;  // arrays viewed by the feeds, until the run returns
    std::vector<std::string> copied;
    auto index_of = [&](const std::string& name) -> int {
      for (size_t i = 0; i < graph_inputs.size(); ++i)
        if (graph_inputs[i]->name == name) return static_cast<int>(i);
      return -1;
    };
    auto input_names = [&] {
      std::string s;
      for (const Value* v : feedable) s += (s.empty() ? "" : ", ") + v->name;
      return s.empty() ? std::string("none") : s;
    };
    auto feed = [&](int idx, py::handle obj) {
      const std::string& name = graph_inputs[static_cast<size_t>(idx)]->name;
      if (given[static_cast<size_t>(idx)]) raise(ErrorKind::kBadInput, "input '" + name + "' is given twice");
      given[static_cast<size_t>(idx)] = true;
      if (obj.is_none()) return;  // defaulted / optional input left unset
      if (py::isinstance<py::list>(obj) && graph_inputs[static_cast<size_t>(idx)]->type.kind == Type::Kind::kSequence) {
        std::vector<Tensor> items;
        DType elem = DType::kUndefined;
        for (py::handle item : obj) {
          py::array a = py::reinterpret_borrow<py::array>(item);
          FedArray f = array_to_value(name, a);
          if (!f.copied) f.value.tensor = f.value.tensor.clone();  // the sequence owns its items
          elem = f.value.tensor.dtype();
          items.push_back(std::move(f.value.tensor));
        }
        const Type* t = graph_inputs[static_cast<size_t>(idx)]->type.elem.get();
        if (elem == DType::kUndefined && t) elem = t->dtype;
        values[static_cast<size_t>(idx)] = RtValue::make_sequence(std::move(items), elem);
        return;
      }
      if (!py::isinstance<py::array>(obj))
        raise(ErrorKind::kBadInput, "input '" + name + "': expected a NumPy array, got " +
                                        std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
      py::array a = py::reinterpret_borrow<py::array>(obj);
      FedArray f = array_to_value(name, a);
      if (f.copied) copied.push_back(name);
      if (f.borrowed.second > f.borrowed.first) {
        borrowed.push_back(f.borrowed);
        keep_alive.push_back(a);
      }
      values[static_cast<size_t>(idx)] = std::move(f.value);
    };
    if (py::isinstance<py::dict>(feeds)) {
      for (auto [key, obj] : py::reinterpret_borrow<py::dict>(feeds)) {
        if (!py::isinstance<py::str>(key))
          raise(ErrorKind::kUsage, "feed names must be str, got " + std::string(py::str(py::type::handle_of(key).attr("__name__"))));
        std::string name = key.cast<std::string>();
        int idx = index_of(name);
        if (idx < 0 || (graph_inputs[static_cast<size_t>(idx)]->initializer.defined() &&
                        !graph_inputs[static_cast<size_t>(idx)]->is_graph_input))
          raise(ErrorKind::kBadInput, "the model has no input named '" + name + "' (inputs: " + input_names() + ")");
        feed(idx, obj);
      }
    } else {
      py::sequence seq = py::reinterpret_borrow<py::sequence>(feeds);
      if (seq.size() > feedable.size())
        raise(ErrorKind::kBadInput, "too many inputs: the model takes " + std::to_string(feedable.size()) + " (" +
                                        input_names() + "), got " + std::to_string(seq.size()));
      for (size_t i = 0; i < seq.size(); ++i) feed(index_of(feedable[i]->name), seq[i]);
    }
    for (size_t i = 0; i < graph_inputs.size(); ++i)
      if (!given[i] && !graph_inputs[i]->initializer.defined() && graph_inputs[i]->type.kind != Type::Kind::kOptional)
        raise(ErrorKind::kBadInput, "input '" + graph_inputs[i]->name + "' (" + to_string(graph_inputs[i]->type) +
                                        ") was not given");

    std::vector<RtValue> results;
    {
      // The engines keep per-run state (plans, timings, the interpreter's RNG): one run at a
      // time per session; other Python threads run meanwhile.
      py::gil_scoped_release nogil;
      RunScope scope(&canceller_, timeout_s);  // before the lock: waiting counts, cancel() reaches waiters
      std::lock_guard<std::mutex> lock(mu_);
      results = session_->run(values);
      if (profiling_) last_timings_ = session_->timings();
      last_copied_ = copied;
      if (const CompiledExecutor* c = session_->compiled()) {
        last_stats_ = c->stats();
        last_planned_ = c->last_run_planned();
      }
    }
    py::dict out;
    const auto& graph_outputs = session_->model().graph->outputs;
    for (size_t i = 0; i < results.size() && i < graph_outputs.size(); ++i) {
      // An output that shares memory with a borrowed input (its owner is the caller's array) or
      // with a model constant (which a caller could then modify) is handed out as a copy.
      bool must_copy = false;
      auto check = [&](const Tensor& t) {
        auto b = reinterpret_cast<uintptr_t>(t.raw());
        auto e = b + t.nbytes();
        for (const auto& [lo, hi] : borrowed) must_copy |= b < hi && lo < e;
        for (const auto& [lo, hi] : constants_) must_copy |= b < hi && lo < e;
      };
      if (results[i].is_tensor()) check(results[i].tensor);
      for (const Tensor& t : results[i].sequence) check(t);
      out[py::str(graph_outputs[i]->name)] = value_to_python(graph_outputs[i]->name, std::move(results[i]), must_copy);
    }
    return out;
  }

  void set_profiling(bool on) { profiling_ = on; }
  py::list profile() const {
    if (!profiling_)
      raise(ErrorKind::kUsage, "profiling is off for this session: load the model with kiln.load(..., profile=True)");
    py::list out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const NodeTiming& t : last_timings_) {
      py::dict d;
      d["node"] = t.node;
      d["op"] = t.op;
      d["ms"] = t.ms;
      out.append(d);
    }
    return out;
  }
  std::vector<std::string> last_copied_inputs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_copied_;
  }
  py::dict plan_stats() const {
    if (!session_->compiled()) raise(ErrorKind::kUsage, "plan_stats() needs the compiled engine");
    std::lock_guard<std::mutex> lock(mu_);
    const CompileStats& s = last_stats_;
    py::dict d;
    d["planned"] = last_planned_;
    d["shapes"] = s.shapes;
    d["shapes_ms"] = s.shapes_ms;
    d["lowering_ms"] = s.lowering_ms;
    d["llvm_ms"] = s.llvm_ms;
    d["total_ms"] = s.total_ms;
    d["kernels"] = s.kernels;
    d["compiled_kernels"] = s.compiled_kernels;
    d["library_kernels"] = s.library_kernels;
    d["arena_bytes"] = s.arena_bytes;
    d["external_regions"] = s.external_regions;
    d["external_nodes"] = s.external_nodes;
    return d;
  }

 private:
  void note_constant(const Tensor& t) {
    auto b = reinterpret_cast<uintptr_t>(t.raw());
    constants_.push_back({b, b + t.nbytes()});
  }

  std::unique_ptr<Session> session_;
  std::string engine_;
  bool profiling_ = false;
  mutable std::mutex mu_;
  Canceller canceller_;
  std::vector<NodeTiming> last_timings_;
  std::vector<std::string> last_copied_;
  CompileStats last_stats_;
  bool last_planned_ = false;
  std::vector<std::pair<uintptr_t, uintptr_t>> constants_;
};

std::unique_ptr<PySession> load(py::object source, int threads, const std::string& engine, bool optimize,
                                bool profile, uint64_t seed, py::object max_memory, const std::string& records,
                                const std::vector<std::string>& offload) {
  SessionOptions opts;
  if (py::isinstance<py::str>(max_memory))
    opts.max_memory_bytes = parse_byte_size(max_memory.cast<std::string>(), "max_memory");
  else if (!max_memory.is_none())
    opts.max_memory_bytes = max_memory.cast<int64_t>();
  if (opts.max_memory_bytes < 0) raise(ErrorKind::kUsage, "max_memory must be >= 0");
  opts.engine = parse_engine(engine);
  opts.threads = threads;
  opts.optimize = optimize;
  opts.profile = profile;
  opts.seed = seed;
  opts.tuning = tune::load_tuning(records, threads);
  opts.tuned_offload = tune::load_offload_choices(records, threads);
  opts.offload = offload;
  std::unique_ptr<Session> s;
  if (py::isinstance<py::str>(source)) {
    std::string path = source.cast<std::string>();
    py::gil_scoped_release nogil;
    s = Session::load(path, opts);
  } else {
    // bytes, bytearray, memoryview, ...: an ONNX ModelProto in memory.
    py::buffer buf = py::reinterpret_borrow<py::buffer>(source);
    py::buffer_info info = buf.request();
    if (info.ndim > 1 && !PyBuffer_IsContiguous(info.view(), 'C'))
      raise(ErrorKind::kUsage, "kiln.load: the model bytes must be a contiguous buffer");
    const void* data = info.ptr;
    const auto size = static_cast<size_t>(info.size * info.itemsize);
    py::gil_scoped_release nogil;
    s = std::make_unique<Session>(load_onnx_model_from_bytes(data, size, "<bytes>"), opts);
  }
  auto py_session = std::make_unique<PySession>(std::move(s), engine);
  py_session->set_profiling(profile);
  return py_session;
}

py::dict optimize(const std::string& in_path, const std::string& out_path, const std::vector<std::string>& passes,
                  const std::vector<std::string>& disable, bool verify) {
  OptimizeModelOptions opts;
  opts.passes = passes;
  opts.disable = disable;
  opts.verify = verify;
  OptimizeModelResult r;
  {
    py::gil_scoped_release nogil;
    r = optimize_model_file(in_path, out_path, opts);
  }
  py::dict d;
  d["nodes_before"] = r.nodes_before;
  d["nodes_after"] = r.nodes_after;
  py::list ran;
  for (const PassStat& st : r.passes) {
    py::dict p;
    p["pass"] = st.pass;
    p["ms"] = st.ms;
    p["nodes"] = st.nodes_after;
    ran.append(p);
  }
  d["passes"] = ran;
  return d;
}

std::string inspect_json(const std::string& path, const std::map<std::string, int64_t>& dims, bool compile,
                         bool passes) {
  InspectReportOptions opts;
  opts.dims = dims;
  opts.compile = compile;
  opts.passes = passes;
  py::gil_scoped_release nogil;
  return inspect_report_json(path, opts, -1);
}

// Ahead-of-time export (driver/aot.h): the model's kernels, plan and weights in one .so.
py::dict compile_library(const std::string& path, const std::string& out_path, const std::string& target,
                         const std::map<std::string, std::vector<int64_t>>& dims, int threads,
                         const std::string& runtime_archive,
                         const std::map<std::string, std::vector<int64_t>>& shapes,
                         const std::vector<std::string>& input_files) {
  AotOptions opts;
  opts.target = target;
  opts.dims = dims;
  opts.shapes = shapes;
  opts.input_files = input_files;
  opts.threads = threads;
  opts.runtime_archive = runtime_archive;
  AotResult r;
  {
    py::gil_scoped_release nogil;
    r = compile_shared_library(path, out_path, opts);
  }
  py::dict d;
  d["library_bytes"] = r.library_bytes;
  d["blob_bytes"] = r.blob_bytes;
  d["signatures"] = r.signatures;
  d["generated_nodes"] = r.stats.generated_nodes;
  d["microkernel_nodes"] = r.stats.gemm_nodes;
  d["folded_nodes"] = r.stats.folded_nodes;
  d["fallback_nodes"] = r.stats.fallback_nodes;
  d["kernels"] = r.stats.kernels;
  d["plan_ms"] = r.plan_ms;
  d["object_ms"] = r.object_ms;
  d["link_ms"] = r.link_ms;
  d["total_ms"] = r.total_ms;
  return d;
}

// One calibration sample from Python: an array (a single-input model), a list of arrays (input
// order) or a dict by input name. Copied: quantize runs without the GIL.
CalibrationSample sample_from_python(py::handle item) {
  CalibrationSample sample;
  auto add = [&](const std::string& name, py::handle a) {
    RtValue v = array_to_value(name.empty() ? "calibration sample" : name, py::array::ensure(a)).value;
    if (v.is_tensor()) v.tensor = v.tensor.clone();
    sample.push_back(NamedValue{name, std::move(v), "calibration sample"});
  };
  if (py::isinstance<py::dict>(item)) {
    for (auto kv : item.cast<py::dict>()) add(py::str(kv.first), kv.second);
  } else if (py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item)) {
    for (py::handle a : item) add("", a);
  } else {
    add("", item);
  }
  return sample;
}

py::dict accuracy_dict(const TensorAccuracy& a) {
  py::dict d;
  d["name"] = a.name;
  d["node"] = a.node;
  d["op"] = a.op;
  d["sqnr_db"] = a.sqnr_db;
  d["cosine"] = a.cosine;
  d["range"] = py::make_tuple(a.range.lo, a.range.hi);
  d["scale"] = a.scale;
  d["zero_point"] = a.zero_point;
  return d;
}

// Post-training quantization (driver/quantize): the CLI's `kiln quantize`, samples also in memory.
py::dict quantize(const std::string& in_path, const std::string& out_path, py::object samples,
                  QuantizeModelOptions opts, const std::string& activation_type, const std::string& method,
                  bool progress) {
  if (!samples.is_none())
    for (py::handle item : samples) opts.samples.push_back(sample_from_python(item));
  if (activation_type == "u8" || activation_type == "uint8") opts.qdq.activation_dtype = DType::kUInt8;
  else if (activation_type == "s8" || activation_type == "int8") opts.qdq.activation_dtype = DType::kInt8;
  else raise(ErrorKind::kUsage, "activation_type '" + activation_type + "': expected u8 or s8");
  opts.method = parse_calibration_method(method);
  if (progress) opts.progress = print_progress;
  QuantizeModelResult r;
  {
    py::gil_scoped_release nogil;
    r = quantize_model_file(in_path, out_path, opts);
  }
  py::dict d;
  d["nodes_before"] = r.nodes_before;
  d["nodes_after"] = r.nodes_after;
  d["quantized_activations"] = r.quantized_activations;
  d["quantized_weights"] = r.quantized_weights;
  d["quantized_biases"] = r.quantized_biases;
  d["dynamic_nodes"] = r.dynamic_nodes;
  d["samples"] = r.samples;
  d["notes"] = r.notes;
  py::list outputs, tensors;
  for (const auto& a : r.outputs) outputs.append(accuracy_dict(a));
  for (const auto& a : r.tensors) tensors.append(accuracy_dict(a));
  d["outputs"] = outputs;
  d["tensors"] = tensors;
  py::dict float_ops;
  for (const auto& [op, fo] : r.float_ops) {
    py::dict f;
    f["why"] = fo.why;
    f["nodes"] = fo.nodes;
    float_ops[py::str(op)] = f;
  }
  d["float_ops"] = float_ops;
  d["calibration_s"] = r.calibration_s;
  d["total_s"] = r.total_s;
  return d;
}

// Allocates a 64-byte aligned, zero-filled array in kiln-owned memory: feeding it is zero-copy.
py::object empty(const std::vector<int64_t>& shape, const std::string& dtype_name) {
  auto dt = dtype_of_numpy_name(dtype_name);
  if (!dt) raise(ErrorKind::kUsage, "kiln.empty: no kiln element type for NumPy dtype " + dtype_name);
  for (int64_t d : shape)
    if (d < 0) raise(ErrorKind::kUsage, "kiln.empty: negative dimension in " + shape_text(shape));
  return tensor_to_array("empty", Tensor(*dt, shape), false);
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln::python;
  namespace k = kiln;
  m.doc() = "kiln's C++ driver (see the kiln package for the documented API)";
  m.attr("__version__") = KILN_VERSION;
  register_errors(m);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const k::Error& e) {
      set_python_error(e);
    }
  });

  py::class_<TensorOwner>(m, "TensorOwner",
                          "Owns the kiln tensor memory behind an output array (the array's .base).")
      .def_property_readonly("__array_interface__",
                             [](const TensorOwner& o) {
                               py::dict d;
                               d["shape"] = py::tuple(py::cast(o.tensor.dims()));
                               d["typestr"] = o.typestr;
                               d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(o.tensor.raw()), false);
                               d["strides"] = py::none();
                               d["version"] = 3;
                               return d;
                             })
      .def_property_readonly("nbytes", [](const TensorOwner& o) { return o.tensor.nbytes(); })
      .def_property_readonly("address", [](const TensorOwner& o) { return reinterpret_cast<uintptr_t>(o.tensor.raw()); });

  py::class_<PySession>(m, "Session")
      .def_property_readonly("inputs", &PySession::inputs)
      .def_property_readonly("outputs", &PySession::outputs)
      .def_property_readonly("engine", &PySession::engine)
      .def("run", &PySession::run, py::arg("feeds"), py::arg("timeout"))
      .def("cancel", &PySession::cancel)
      .def("profile", &PySession::profile)
      .def("last_copied_inputs", &PySession::last_copied_inputs)
      .def("plan_stats", &PySession::plan_stats);

  m.def("load", &load, py::arg("source"), py::arg("threads"), py::arg("engine"), py::arg("optimize"),
        py::arg("profile"), py::arg("seed"), py::arg("max_memory"), py::arg("records"), py::arg("offload"));
  m.def("optimize", &optimize, py::arg("in_path"), py::arg("out_path"), py::arg("passes"), py::arg("disable"),
        py::arg("verify"));
  m.def("inspect_json", &inspect_json, py::arg("path"), py::arg("dims"), py::arg("compile"), py::arg("passes"));
  m.def("compile", &compile_library, py::arg("path"), py::arg("out_path"), py::arg("target"), py::arg("dims"),
        py::arg("threads"), py::arg("runtime_archive"), py::arg("shapes"), py::arg("input_files"));
  using kiln::QuantizeModelOptions;
  py::class_<QuantizeModelOptions>(m, "QuantizeOptions")
      .def(py::init<>())
      .def_readwrite("dynamic", &QuantizeModelOptions::dynamic)
      .def_readwrite("percentile", &QuantizeModelOptions::percentile)
      .def_readwrite("calibration_dir", &QuantizeModelOptions::calibration_dir)
      .def_readwrite("image_preprocess", &QuantizeModelOptions::image_preprocess)
      .def_readwrite("calibration_random", &QuantizeModelOptions::calibration_random)
      .def_readwrite("seed", &QuantizeModelOptions::seed)
      .def_readwrite("dims", &QuantizeModelOptions::dims)
      .def_readwrite("threads", &QuantizeModelOptions::threads)
      .def_readwrite("report_path", &QuantizeModelOptions::report_path)
      .def_readwrite("report_samples", &QuantizeModelOptions::report_samples)
      .def_property(
          "per_channel", [](const QuantizeModelOptions& o) { return o.qdq.per_channel; },
          [](QuantizeModelOptions& o, bool v) { o.qdq.per_channel = v; })
      .def_property(
          "reduce_range", [](const QuantizeModelOptions& o) { return o.qdq.reduce_range; },
          [](QuantizeModelOptions& o, bool v) { o.qdq.reduce_range = v; })
      .def_property(
          "exclude", [](const QuantizeModelOptions& o) { return o.qdq.exclude; },
          [](QuantizeModelOptions& o, const std::set<std::string>& v) { o.qdq.exclude = v; });
  m.def("quantize", &quantize, py::arg("in_path"), py::arg("out_path"), py::arg("samples"), py::arg("options"),
        py::arg("activation_type"), py::arg("method"), py::arg("progress"));
  m.def("empty", &empty, py::arg("shape"), py::arg("dtype"));
}
