#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fastonnx/prefetch.h"
#include "fastonnx/session.h"

namespace py = pybind11;

namespace fastonnx::bindings {
namespace {

// protobuf refuses to parse a message of 2 GB or more.
constexpr size_t kMaxProtoBytes = (size_t{1} << 31) - 1;

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
      meta.shape.push_back(Dim{to_int64(d), 0});
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
Attrs to_attrs(const std::vector<std::tuple<std::string, std::string, py::object>>& attrs) {
  Attrs out;
  for (const auto& [name, kind, value] : attrs) {
    if (kind == "i") out.push_back(Attr::i(name, value.cast<int64_t>()));
    else if (kind == "f") out.push_back(Attr::f(name, value.cast<double>()));
    else if (kind == "s") out.push_back(Attr::s(name, value.cast<std::string>()));
    else if (kind == "ints") out.push_back(Attr::ints(name, value.cast<std::vector<int64_t>>()));
    else if (kind == "floats") out.push_back(Attr::floats(name, value.cast<std::vector<double>>()));
    else if (kind == "g") out.push_back(Attr::graph(name, value.cast<uint32_t>()));
    else throw ConvertError("attribute `" + name + "`: unknown kind " + kind);
  }
  return out;
}

Inputs to_inputs(const std::vector<std::optional<ValueRef>>& inputs) {
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

// Bytes written between two checks for Ctrl-C and calls of the progress callback.
constexpr size_t kWritePiece = size_t{16} << 20;

// Thrown from a write's sink to stop the producer: Ctrl-C (the Python error is set) or an I/O
// error (errno saved).
struct StopWriting {
  int err;
};
// Ctrl-C during a write; turned into the KeyboardInterrupt once the GIL is held again.
struct Interrupted {};

// Writes what `produce` produces to `path` in pieces of kWritePiece bytes; between pieces (with
// the GIL) it checks for Ctrl-C and calls `progress(bytes)`. An I/O error is an OSError, Ctrl-C a
// KeyboardInterrupt; either leaves the file incomplete (the caller writes to a temporary name).
void write_file(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                const py::object& progress) {
  // Not truncated on opening: ext4 (auto_da_alloc) starts flushing a file truncated to size 0
  // when it is closed, which doubled the cost of writing a large model. The caller's file is a
  // new, empty temporary; an existing longer file is cut to size at the end instead.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    throw std::system_error(err, std::generic_category(), path);
  }
  size_t unreported = 0, written = 0;
  const auto between_pieces = [&] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw StopWriting{0};
    if (!progress.is_none()) progress(unreported);
    unreported = 0;
  };
  try {
    produce([&](const void* data, size_t size) {
      const char* bytes = static_cast<const char*>(data);
      while (size > 0) {
        const size_t n = std::min(size, kWritePiece - unreported);
        if (std::fwrite(bytes, 1, n, f) != n) throw StopWriting{errno};
        written += n;
        bytes += n;
        size -= n;
        if ((unreported += n) == kWritePiece) between_pieces();
      }
    });
    if (unreported > 0) between_pieces();
  } catch (const StopWriting& stop) {
    std::fclose(f);
    if (stop.err == 0) throw Interrupted{};
    throw std::system_error(stop.err, std::generic_category(), path);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  struct stat st;
  if (std::fflush(f) != 0 || ::fstat(fd, &st) != 0 ||
      (static_cast<size_t>(st.st_size) > written && ::ftruncate(fd, static_cast<off_t>(written)) != 0)) {
    const int err = errno;
    std::fclose(f);
    throw std::system_error(err, std::generic_category(), path);
  }
  if (std::fclose(f) != 0) throw std::system_error(errno, std::generic_category(), path);
}

}  // namespace

void init_session(py::module_& m) {
  m.attr("FUNCTION_DOMAIN") = kFunctionDomain;
  py::class_<ValueRef>(m, "ValueRef").def(py::init<uint32_t>()).def_readonly("id", &ValueRef::id);

  py::class_<Model>(m, "Model")
      .def_property_readonly("weights_nbytes", [](const Model& md) { return md.session->weights_nbytes(); })
      .def("to_bytes",
           [](const Model& md) {
             const ProtoMessage proto = md.session->serialize(md.producer_version);
             if (proto.size() > kMaxProtoBytes) {
               throw std::length_error("the model is " + std::to_string(proto.size()) +
                                       " bytes with its weights, beyond protobuf's 2 GB; save it with external data");
             }
             return py::bytes(proto.to_string());
           })
      .def(
          "write",
          [](const Model& md, const std::string& path, const std::string& data_path, const std::string& location,
             const py::object& progress) {
            try {
              py::gil_scoped_release no_gil;
              if (location.empty()) {
                const ProtoMessage proto = md.session->serialize(md.producer_version);
                write_file(path, [&](const ByteSink& sink) {
                  Prefetcher ahead(proto.computed());
                  proto.produce(sink, &ahead);
                }, progress);
                return;
              }
              ExternalData external;
              external.location = location;
              const ProtoMessage proto = md.session->serialize(md.producer_version, &external);
              write_file(data_path, [&](const ByteSink& sink) {
                Prefetcher ahead(external.computed());
                write_external_data(external, sink, &ahead);
              }, progress);
              write_file(path, [&](const ByteSink& sink) { proto.produce(sink); }, progress);
            } catch (const Interrupted&) {
              throw py::error_already_set();  // the KeyboardInterrupt PyErr_CheckSignals set
            }
          },
          py::arg("path"), py::arg("data_path") = "", py::arg("location") = "", py::arg("progress") = py::none(),
          "Write the model to `path`; with `location`, initializers of 1 KiB or more go to `data_path`, which "
          "the model names `location`. `progress(n)` is called as bytes are written.")
      .def_property_readonly("num_nodes", [](const Model& md) { return md.session->num_nodes(); })
      .def_property_readonly("pass_stats", [](const Model& md) {
        py::dict d;
        d["folded"] = md.stats.folded;
        d["forwarded"] = md.stats.forwarded;
        d["composed"] = md.stats.composed;
        d["merged"] = md.stats.merged;
        d["constants_merged"] = md.stats.constants_merged;
        d["removed"] = md.stats.removed;
        return d;
      });

  py::class_<Session, std::shared_ptr<Session>>(m, "Session")
      .def(py::init<int, bool>(), py::arg("opset"), py::arg("keep_initializers_as_inputs") = false)
      .def(
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
            return ValueRef{s.add_initializer(name, meta, reinterpret_cast<const void*>(data), nbytes,
                                              keep_alive(std::move(owner)))
                                .id};
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("data_ptr"), py::arg("nbytes"),
          py::arg("owner"))
      .def(
          "convert",
          [](Session& s, int op_id, const py::list& args, const py::list& metas, const std::string& name) {
            const auto start = std::chrono::steady_clock::now();
            struct AddElapsed {  // also when the conversion throws
              Session& s;
              std::chrono::steady_clock::time_point start;
              ~AddElapsed() { s.convert_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
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
            py::list refs;
            for (Value v : s.convert(op_id, unpacked, std::move(out_metas), name)) refs.append(ValueRef{v.id});
            return refs;
          },
          py::arg("op_id"), py::arg("args"), py::arg("metas"), py::arg("name"),
          "Convert one FX node: args hold ValueRef for tensors, ... for omitted arguments.")
      .def(
          "set_outputs",
          [](Session& s, const std::vector<std::pair<ValueRef, std::string>>& outputs) {
            std::vector<std::pair<Value, std::string>> outs;
            for (const auto& [ref, name] : outputs) outs.emplace_back(Value{ref.id}, name);
            s.set_outputs(outs);
          },
          py::arg("outputs"))
      .def(
          "add_node",
          [](Session& s, const std::string& domain, const std::string& op_type, const std::vector<std::optional<ValueRef>>& inputs,
             const std::vector<std::tuple<std::string, std::string, py::object>>& attrs, int n_outputs) {
            if (std::any_of(attrs.begin(), attrs.end(), [](const auto& a) { return std::get<1>(a) == "g"; })) {
              throw ConvertError("a custom node cannot own a subgraph");
            }
            const Inputs ins = to_inputs(inputs);
            const Attrs out_attrs = to_attrs(attrs);
            py::list refs;
            for (Value v : s.custom_node(domain, op_type, ins, out_attrs, n_outputs)) refs.append(ValueRef{v.id});
            return refs;
          },
          py::arg("domain"), py::arg("op_type"), py::arg("inputs"), py::arg("attrs"), py::arg("n_outputs"),
          "Add one node (Python converters); attrs are (name, kind, value) with kind i, f, s, ints or floats.")
      .def("begin_subgraph", &Session::begin_subgraph, "Start a subgraph; nodes go to it until end_subgraph.")
      .def(
          "add_subgraph_input",
          [](Session& s, const std::string& name, int dtype, const py::list& shape) {
            return ValueRef{s.add_subgraph_input(name, to_meta(s, dtype, shape)).id};
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def(
          "end_subgraph",
          [](Session& s, const std::vector<ValueRef>& outputs) {
            std::vector<Value> outs;
            for (const ValueRef& ref : outputs) outs.push_back(Value{ref.id});
            return s.end_subgraph(outs);
          },
          py::arg("outputs"), "End the innermost subgraph with these outputs; returns its id for a `g` attribute.")
      .def(
          "control_flow",
          [](Session& s, const std::string& op_type, const std::vector<std::optional<ValueRef>>& inputs,
             const std::vector<std::tuple<std::string, std::string, py::object>>& attrs, const py::list& metas,
             const std::string& name) {
            std::vector<TensorMeta> out_metas;
            for (py::handle meta : metas) out_metas.push_back(to_out_meta(s, meta));
            py::list refs;
            for (Value v : s.control_flow(op_type, to_inputs(inputs), to_attrs(attrs), out_metas, name)) {
              refs.append(ValueRef{v.id});
            }
            return refs;
          },
          py::arg("op_type"), py::arg("inputs"), py::arg("attrs"), py::arg("metas"), py::arg("name"),
          "An If, Loop or Scan node owning the subgraphs its `g` attributes name.")
      .def(
          "set_meta",
          [](Session& s, const ValueRef& ref, int dtype, const py::list& shape) { s.set_meta(Value{ref.id}, to_meta(s, dtype, shape)); },
          py::arg("value"), py::arg("dtype"), py::arg("shape"))
      .def(
          "value_dtype", [](Session& s, const ValueRef& ref) { return static_cast<int>(s.builder().dtype(Value{ref.id})); },
          py::arg("value"))
      .def("set_domain_version", &Session::set_domain_version, py::arg("domain"), py::arg("version"))
      .def("mark_may_be_one", &Session::mark_may_be_one, py::arg("symbol"),
           "The dynamic size `symbol` may be 1 at run time (torch.export's ranges allow it).")
      .def("add_scope", &Session::add_scope, py::arg("function_name"), py::arg("module_path"), py::arg("parent"),
           "A module call whose nodes become a call of a local function; returns its scope id.")
      .def("set_scope", &Session::set_scope, py::arg("scope"), "The scope of the nodes converted from now on.")
      .def_readonly("convert_seconds", &Session::convert_seconds)
      .def(
          "finish",
          [](const std::shared_ptr<Session>& s, const std::string& producer_version) {
            const PassStats stats = s->finish();
            return Model{s, producer_version, stats};
          },
          py::arg("producer_version"));
}

}  // namespace fastonnx::bindings
