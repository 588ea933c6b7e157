#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <tuple>

#include <fcntl.h>
#include <unistd.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fastonnx/model_file.h"
#include "fastonnx/read_pages.h"
#include "fastonnx/read_while_tracing.h"
#include "fastonnx/session.h"

namespace py = pybind11;

namespace fastonnx::bindings {
namespace {

// A graph value referenced from an FX node's arguments.
struct ValueRef {
  uint32_t id;
};

std::string type_name(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")); }

int64_t to_int64(py::handle h) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0) throw ConvertError("the int " + std::string(py::str(h)) + " does not fit in int64");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

TensorMeta to_meta(Session& s, int64_t dtype, const py::list& shape) {
  TensorMeta meta;
  meta.dtype = scalar_type_from_code(dtype);
  meta.shape.reserve(shape.size());
  for (py::handle d : shape) {
    if (py::isinstance<py::str>(d)) {
      meta.shape.push_back(Dim{-1, s.intern(d.cast<std::string>())});
    } else if (PyLong_Check(d.ptr()) && !PyBool_Check(d.ptr()) && to_int64(d) >= 0) {
      meta.shape.push_back(Dim{to_int64(d), kNoName});
    } else {
      throw ConvertError("a dimension must be a size (an int >= 0) or a symbol (a str), got " +
                         std::string(py::repr(d)));
    }
  }
  return meta;
}

// (dtype code, [dims]) as the lowering encodes a node's output metadata; None when unknown.
TensorMeta to_out_meta(Session& s, py::handle meta) {
  if (meta.is_none()) return TensorMeta{};
  if (!py::isinstance<py::tuple>(meta) || py::len(meta) != 2 || !PyLong_Check(meta[py::int_(0)].ptr()) ||
      !py::isinstance<py::list>(meta[py::int_(1)])) {
    throw ConvertError("output metadata must be None or (dtype code, [dims]), got " + std::string(py::repr(meta)));
  }
  return to_meta(s, to_int64(meta[py::int_(0)]), meta[py::int_(1)].cast<py::list>());
}

Arg to_arg(py::handle h) {
  Arg a;
  if (h.is_none()) {
    a.kind = Arg::Kind::None;
  } else if (h.ptr() == Py_Ellipsis) {
    a.kind = Arg::Kind::Missing;
  } else if (PyBool_Check(h.ptr())) {
    a.kind = Arg::Kind::Bool;
    a.i = h.ptr() == Py_True;
  } else if (PyLong_Check(h.ptr())) {
    a.kind = Arg::Kind::Int;
    a.i = to_int64(h);
  } else if (PyFloat_Check(h.ptr())) {
    a.kind = Arg::Kind::Float;
    a.f = PyFloat_AS_DOUBLE(h.ptr());
  } else if (PyUnicode_Check(h.ptr())) {
    a.kind = Arg::Kind::Str;
    a.s = h.cast<std::string>();
  } else if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    a.kind = Arg::Kind::List;
    for (py::handle item : h) a.items.push_back(to_arg(item));
  } else if (py::isinstance<ValueRef>(h)) {
    a = Arg::value(h.cast<const ValueRef&>().id);
  } else {
    throw ConvertError("expected a tensor, a number, a string, a bool, None or a list of them, got a value of type " +
                       type_name(h));
  }
  return a;
}

// (name, kind, value) attributes from Python; kind is i, f, s, ints, floats, or g (a subgraph id).
using PyAttrs = std::vector<std::tuple<std::string, std::string, py::object>>;
// Node inputs from Python; None for an omitted one.
using PyInputs = std::vector<std::optional<ValueRef>>;

Attrs to_attrs(const PyAttrs& attrs) {
  Attrs out;
  for (const auto& [name, kind, value] : attrs) {
    if (kind == "i") out.push_back(Attr::i(name, value.cast<int64_t>()));
    else if (kind == "f") out.push_back(Attr::f(name, value.cast<double>()));
    else if (kind == "s") out.push_back(Attr::s(name, value.cast<std::string>()));
    else if (kind == "ints") out.push_back(Attr::ints(name, value.cast<std::vector<int64_t>>()));
    else if (kind == "floats") out.push_back(Attr::floats(name, value.cast<std::vector<double>>()));
    else if (kind == "strings") out.push_back(Attr::strings(name, value.cast<std::vector<std::string>>()));
    else if (kind == "g") out.push_back(Attr::graph(name, GraphId{value.cast<uint32_t>()}));
    else throw ConvertError("attribute `" + name + "`: unknown kind " + kind);
  }
  return out;
}

Inputs to_inputs(const PyInputs& inputs) {
  Inputs ins;
  for (const auto& in : inputs) ins.push_back(in ? Input(Value{in->id}) : Input(std::optional<Value>{}));
  return ins;
}

// The name of argument `i` of converter `op_id`, for errors.
std::string arg_name(int op_id, size_t i) {
  const auto table = op_table();
  if (op_id >= 0 && static_cast<size_t>(op_id) < table.size() && i < table[op_id].arg_names.size()) {
    return table[op_id].arg_names[i];
  }
  return "#" + std::to_string(i);
}

// Keeps a Python object (a torch tensor) alive for as long as the graph borrows its memory.
std::shared_ptr<const void> keep_alive(py::object owner) {
  auto* held = new py::object(std::move(owner));
  return std::shared_ptr<const void>(held, [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
}

// A finished export: the session's final graph (which borrows the weights), serialized when it
// is written or asked for as bytes.
struct Model {
  std::shared_ptr<Session> session;
  std::string producer_version;
  PassStats stats;
};

// A descriptor of its own on a checkpoint file, closed with it (-1 where it cannot be opened: the
// pages are then only dropped from the process, not evicted).
struct OwnDescriptor {
  explicit OwnDescriptor(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~OwnDescriptor() {
    if (fd >= 0) ::close(fd);
  }
  OwnDescriptor(const OwnDescriptor&) = delete;
  OwnDescriptor& operator=(const OwnDescriptor&) = delete;
  int fd;
};

// A checkpoint's read-only file mapping, registered while this lives (read_pages.h). `owner`, the
// Python mmap, and the descriptor that evicts the pages the writer releases are declared first,
// so that they are released after the registration is gone: the memory is never unmapped, nor the
// descriptor closed, while registered.
struct Mapping {
  Mapping(uintptr_t address, size_t size, py::object mmap, const std::string& path)
      : owner(std::move(mmap)),
        file(path),
        registration(reinterpret_cast<const void*>(address), size, file.fd) {}  // NOLINT(performance-no-int-to-ptr)
  py::object owner;
  OwnDescriptor file;
  ReadOnlyMapping registration;
};

// Ctrl-C during a write; turned into the KeyboardInterrupt once the GIL is held again.
struct Interrupted {};

using References = std::vector<std::tuple<uintptr_t, size_t, std::string>>;

// Runs `write_files(references, between_pieces, will_write)` (model_file.h) without the GIL;
// between pieces it takes the GIL to check for Ctrl-C (a KeyboardInterrupt) and call
// `progress(bytes)`.
template <typename WriteFiles>
void write_without_gil(const WriteFiles& write_files, const py::object& progress, const References& references,
                       const py::object& total) {
  std::vector<ExternalData::Reference> refs;
  for (const auto& [address, size, file] : references) {
    // A mapped checkpoint's address, as a Python int.
    refs.push_back({reinterpret_cast<const uint8_t*>(address), size, file});  // NOLINT(performance-no-int-to-ptr)
  }
  const BetweenPieces between_pieces = [&](size_t bytes) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw Interrupted{};  // NOLINT(bugprone-std-exception-baseclass): control flow
    if (!progress.is_none()) progress(bytes);
  };
  const std::function<void(size_t)> will_write = [&](size_t bytes) {
    py::gil_scoped_acquire gil;
    if (!total.is_none()) total(bytes);
  };
  try {
    py::gil_scoped_release no_gil;
    write_files(std::move(refs), between_pieces, will_write);
  } catch (const Interrupted&) {
    throw py::error_already_set();  // the KeyboardInterrupt PyErr_CheckSignals set
  }
}

std::function<ProtoMessage(ExternalData*)> serializer(const Model& md) {
  return [&md](ExternalData* external) { return md.session->serialize(md.producer_version, external); };
}

void write(const Model& md, const std::string& path, const std::string& data_path, const std::string& location,
           const py::object& progress, const References& references, const py::object& total) {
  write_without_gil(
      [&](std::vector<ExternalData::Reference> refs, const BetweenPieces& between_pieces,
          const std::function<void(size_t)>& will_write) {
        write_model(serializer(md), path, data_path, location, between_pieces, std::move(refs), will_write);
      },
      progress, references, total);
}

void write_together(const std::vector<std::pair<const Model*, std::string>>& models, const std::string& data_path,
                    const std::string& location, const py::object& progress, const References& references,
                    const py::object& total) {
  std::vector<ModelToWrite> files;
  for (const auto& [md, path] : models) files.push_back({serializer(*md), path});
  write_without_gil(
      [&](std::vector<ExternalData::Reference> refs, const BetweenPieces& between_pieces,
          const std::function<void(size_t)>& will_write) {
        write_models(files, data_path, location, between_pieces, std::move(refs), will_write);
      },
      progress, references, total);
}

py::dict pass_stats(const PassStats& stats) {
  py::dict d;
  d["folded"] = stats.folded;
  d["forwarded"] = stats.forwarded;
  d["composed"] = stats.composed;
  d["merged"] = stats.merged;
  d["constants_merged"] = stats.constants_merged;
  d["removed"] = stats.removed;
  return d;
}

py::list refs(const std::vector<Value>& values) {
  py::list out;
  for (const Value v : values) out.append(ValueRef{v.id});
  return out;
}

// Session.convert: one FX node, its arguments and metadata unpacked from Python.
py::list convert(Session& s, int op_id, const py::list& args, const py::list& metas, const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  struct AddElapsed {  // also when the conversion throws
    Session& s;
    std::chrono::steady_clock::time_point start;
    ~AddElapsed() {
      s.convert_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } timer{s, start};
  Args unpacked;
  std::vector<TensorMeta> out_metas;
  try {
    unpacked.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      try {
        unpacked.push_back(to_arg(args[i]));
      } catch (const ConvertError& e) {
        throw ConvertError("argument `" + arg_name(op_id, i) + "`: " + e.what());
      }
    }
    out_metas.reserve(metas.size());
    for (py::handle meta : metas) out_metas.push_back(to_out_meta(s, meta));
  } catch (const ConvertError& e) {
    throw ConvertError(Session::node_label(op_id, name) + ": " + e.what());
  }
  return refs(s.convert(op_id, unpacked, std::move(out_metas), name));
}

py::list add_node(Session& s, const std::string& domain, const std::string& op_type, const PyInputs& inputs,
                  const PyAttrs& attrs, int n_outputs) {
  if (std::any_of(attrs.begin(), attrs.end(), [](const auto& a) { return std::get<1>(a) == "g"; })) {
    throw ConvertError("a custom node cannot own a subgraph");
  }
  const Inputs ins = to_inputs(inputs);
  const Attrs out_attrs = to_attrs(attrs);
  return refs(s.custom_node(domain, op_type, ins, out_attrs, n_outputs));
}

py::list control_flow(Session& s, const std::string& op_type, const PyInputs& inputs, const PyAttrs& attrs,
                      const py::list& metas, const std::string& name) {
  std::vector<TensorMeta> out_metas;
  for (py::handle meta : metas) out_metas.push_back(to_out_meta(s, meta));
  return refs(s.control_flow(op_type, to_inputs(inputs), to_attrs(attrs), out_metas, name));
}

void init_model(py::module_& m) {
  py::class_<Model>(m, "Model")
      .def_property_readonly("weights_nbytes", [](const Model& md) { return md.session->weights_nbytes(); })
      .def("to_bytes",
           [](const Model& md) { return py::bytes(model_bytes(md.session->serialize(md.producer_version))); })
      .def("write", &write, py::arg("path"), py::arg("data_path") = "", py::arg("location") = "",
           py::arg("progress") = py::none(), py::arg("references") = References{}, py::arg("total") = py::none(),
           "Write the model to `path`; with `location`, initializers of 1 KiB or more go to `data_path`, which "
           "the model names `location`, except those whose bytes lie in one of `references` (address, size, "
           "location: a file mapped whole), which the model points at there. `total(n)` is called once, before "
           "writing, with the bytes the files will hold; `progress(n)` as n more of them are written.")
      .def_property_readonly("num_nodes", [](const Model& md) { return md.session->num_nodes(); })
      .def_property_readonly("pass_stats", [](const Model& md) { return pass_stats(md.stats); })
      .def_property_readonly("rewrites", [](const Model& md) {
        const RewriteReport& r = md.session->rewrites();
        py::dict d;
        d["counts"] = r.counts;
        d["lines"] = r.lines;
        return d;
      });
}

// The values of the graph: inputs, weights, converted FX nodes, outputs and their metadata.
void def_values(py::class_<Session, std::shared_ptr<Session>>& cls) {
  cls.def(
         "add_input",
         [](Session& s, const std::string& name, int dtype, const py::list& shape) {
           return ValueRef{s.add_input(name, to_meta(s, dtype, shape)).id};
         },
         py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def(
          "add_initializer",
          [](Session& s, const std::string& name, int dtype, const py::list& shape, uintptr_t data, size_t nbytes,
             py::object owner) {
            const TensorMeta meta = to_meta(s, dtype, shape);
            // torch's data_ptr(), an address as a Python int.
            const auto* bytes = reinterpret_cast<const void*>(data);  // NOLINT(performance-no-int-to-ptr)
            return ValueRef{s.add_initializer(name, meta, bytes, nbytes, keep_alive(std::move(owner))).id};
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("data_ptr"), py::arg("nbytes"), py::arg("owner"))
      .def(
          "add_cast_initializer",
          [](Session& s, const std::string& name, int dtype, const py::list& shape, uintptr_t data, int stored,
             py::object owner) {
            const TensorMeta meta = to_meta(s, dtype, shape);
            const auto* bytes = reinterpret_cast<const void*>(data);  // NOLINT(performance-no-int-to-ptr)
            return ValueRef{
                s.add_cast_initializer(name, meta, bytes, static_cast<ScalarType>(stored), keep_alive(std::move(owner)))
                    .id};
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("data_ptr"), py::arg("stored_dtype"),
          py::arg("owner"), "A weight of `dtype` whose bytes, of dtype `stored_dtype`, are converted as written.")
      .def("convert", &convert, py::arg("op_id"), py::arg("args"), py::arg("metas"), py::arg("name"),
           "Convert one FX node: args hold ValueRef for tensors, ... for omitted arguments.")
      .def(
          "set_outputs",
          [](Session& s, const std::vector<std::pair<ValueRef, std::string>>& outputs) {
            std::vector<std::pair<Value, std::string>> outs;
            for (const auto& [ref, name] : outputs) outs.emplace_back(Value{ref.id}, name);
            s.set_outputs(outs);
          },
          py::arg("outputs"))
      .def("add_node", &add_node, py::arg("domain"), py::arg("op_type"), py::arg("inputs"), py::arg("attrs"),
           py::arg("n_outputs"),
           "Add one node (Python converters); attrs are (name, kind, value) with kind i, f, s, ints or floats.")
      .def(
          "set_meta",
          [](Session& s, const ValueRef& ref, int dtype, const py::list& shape) {
            s.set_meta(Value{ref.id}, to_meta(s, dtype, shape));
          },
          py::arg("value"), py::arg("dtype"), py::arg("shape"))
      .def(
          "value_dtype",
          [](Session& s, const ValueRef& ref) { return static_cast<int>(s.builder().dtype(Value{ref.id})); },
          py::arg("value"));
}

// Control flow's subgraphs and the nodes that own them.
void def_subgraphs(py::class_<Session, std::shared_ptr<Session>>& cls) {
  cls.def("begin_subgraph", &Session::begin_subgraph, "Start a subgraph; nodes go to it until end_subgraph.")
      .def(
          "add_subgraph_input",
          [](Session& s, const std::string& name, int dtype, const py::list& shape, std::optional<ValueRef> like) {
            const std::optional<Value> like_value = like ? std::optional<Value>(Value{like->id}) : std::nullopt;
            return ValueRef{s.add_subgraph_input(name, to_meta(s, dtype, shape), like_value).id};
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("like") = py::none(),
          "A formal input of the subgraph; `like`: the Loop state value it takes (an optional or a sequence "
          "where that is one).")
      .def(
          "end_subgraph",
          [](Session& s, const std::vector<ValueRef>& outputs) {
            std::vector<Value> outs;
            for (const ValueRef& ref : outputs) outs.push_back(Value{ref.id});
            return s.end_subgraph(outs).index;
          },
          py::arg("outputs"), "End the innermost subgraph with these outputs; returns its id for a `g` attribute.")
      .def("control_flow", &control_flow, py::arg("op_type"), py::arg("inputs"), py::arg("attrs"), py::arg("metas"),
           py::arg("name"), "An If, Loop or Scan node owning the subgraphs its `g` attributes name.");
}

}  // namespace

void init_session(py::module_& m) {
  m.attr("FUNCTION_DOMAIN") = kFunctionDomain;
  py::class_<ValueRef>(m, "ValueRef").def(py::init<uint32_t>()).def_readonly("id", &ValueRef::id);
  init_model(m);
  m.def("write_models", &write_together, py::arg("models"), py::arg("data_path"), py::arg("location"),
        py::arg("progress") = py::none(), py::arg("references") = References{}, py::arg("total") = py::none(),
        "Write each (model, path) of `models`, with the initializers of 1 KiB or more of all of them in one "
        "file, `data_path`, which they name `location`: bytes several of them hold are written once. "
        "`references`, `progress` and `total` as for Model.write.");
  py::class_<Mapping>(m, "ReadOnlyMapping",
                      "Registers a read-only mapping of a whole file (address, size, the mmap, the file's path) "
                      "whose pages the writer returns as it reads them, and evicts from the page cache once "
                      "written, while this object lives.")
      .def(py::init<uintptr_t, size_t, py::object, const std::string&>(), py::arg("address"), py::arg("size"),
           py::arg("mmap"), py::arg("path"));
  py::class_<ReadWhileTracing>(m, "ReadWhileTracing",
                               "Reads the weights at (address, size) of registered mappings into the page cache on a "
                               "thread of its own, in this order, until stop() or a quarter of the memory available.")
      .def(py::init([](const std::vector<std::pair<uintptr_t, size_t>>& order) {
             std::vector<std::span<const uint8_t>> spans;
             for (const auto& [address, size] : order) {
               // NOLINTNEXTLINE(performance-no-int-to-ptr): a mapped checkpoint's address, as a Python int
               spans.emplace_back(reinterpret_cast<const uint8_t*>(address), size);
             }
             return std::make_unique<ReadWhileTracing>(std::move(spans));
           }),
           py::arg("order"))
      .def("stop", &ReadWhileTracing::stop, py::call_guard<py::gil_scoped_release>(),
           "Stops reading (within a step); returns when the thread has ended.")
      .def_property_readonly("read", &ReadWhileTracing::read, "Bytes read so far.");
  py::class_<Session, std::shared_ptr<Session>> cls(m, "Session");
  cls.def(py::init<int, bool>(), py::arg("opset"), py::arg("keep_initializers_as_inputs") = false);
  def_values(cls);
  def_subgraphs(cls);
  cls.def("set_domain_version", &Session::set_domain_version, py::arg("domain"), py::arg("version"))
      .def(
          "add_function_proto",
          [](Session& s, const std::string& domain, const std::string& name, const py::bytes& proto) {
            return s.add_function_proto(domain, name, std::string(proto));
          },
          py::arg("domain"), py::arg("name"), py::arg("proto"),
          "A serialized FunctionProto the model carries; False when (domain, name) is there already.")
      .def("pin_weights", &Session::pin_weights,
           "Weights added from now on are never folded: the model points at their bytes where they are.")
      .def("mark_may_be_one", &Session::mark_may_be_one, py::arg("symbol"),
           "The dynamic size `symbol` may be 1 at run time (torch.export's ranges allow it).")
      .def("add_scope", &Session::add_scope, py::arg("function_name"), py::arg("module_path"), py::arg("parent"),
           "A module call whose nodes become a call of a local function; returns its scope id.")
      .def("set_scope", &Session::set_scope, py::arg("scope"), "The scope of the nodes converted from now on.")
      .def_readonly("convert_seconds", &Session::convert_seconds)
      .def(
          "finish",
          [](const std::shared_ptr<Session>& s, const std::string& producer_version, bool fuse_for_onnxruntime,
             bool share_kv_cache, int64_t rotary_positions, int quantize_bits, int64_t block_size,
             int64_t accuracy_level, int head_bits, int embedding_bits, bool dequantize_linear) {
            FinishOptions options;
            options.fuse_for_onnxruntime = fuse_for_onnxruntime;
            options.attention = {share_kv_cache, rotary_positions};
            options.quantize = {
                quantize_bits,  block_size,
                accuracy_level, head_bits,
                embedding_bits, dequantize_linear ? QuantizedForm::DequantizeLinear : QuantizedForm::MatMulNBits};
            const PassStats stats = s->finish(options);
            return Model{s, producer_version, stats};
          },
          py::arg("producer_version"), py::kw_only(), py::arg("fuse_for_onnxruntime") = false,
          py::arg("share_kv_cache") = false, py::arg("rotary_positions") = 0, py::arg("quantize_bits") = 0,
          py::arg("block_size") = 32, py::arg("accuracy_level") = 0, py::arg("head_bits") = -1,
          py::arg("embedding_bits") = -1, py::arg("dequantize_linear") = false,
          "Runs the passes (and onnxruntime's fusions and weight quantization when asked) and returns the "
          "finished Model.");
}

}  // namespace fastonnx::bindings
