#include <cerrno>
#include <cstdio>
#include <optional>
#include <system_error>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fastonnx/session.h"

namespace py = pybind11;

namespace fastonnx::bindings {
namespace {

// How much of the model is written between two checks for Ctrl-C.
constexpr size_t kWritePiece = size_t{16} << 20;

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

// A finished export: the serialized model, which borrows weights from the session's graph.
struct Model {
  std::shared_ptr<Session> session;
  ProtoMessage proto;
};

}  // namespace

void init_session(py::module_& m) {
  py::class_<ValueRef>(m, "ValueRef").def(py::init<uint32_t>()).def_readonly("id", &ValueRef::id);

  py::class_<Model>(m, "Model")
      .def_property_readonly("nbytes", [](const Model& md) { return md.proto.size(); })
      .def("to_bytes", [](const Model& md) { return py::bytes(md.proto.to_string()); })
      .def(
          "write",
          [](const Model& md, const std::string& path) {
            int err = 0;
            bool interrupted = false;
            {
              py::gil_scoped_release no_gil;
              std::FILE* f = std::fopen(path.c_str(), "wb");
              if (f == nullptr) throw std::system_error(errno, std::generic_category(), path);
              // Ctrl-C stops a long write every kWritePiece bytes, not only once it is over.
              size_t unchecked = 0;
              md.proto.for_each_piece(kWritePiece, [&](const char* data, size_t size) {
                if (std::fwrite(data, 1, size, f) != size) {
                  err = errno;
                  return false;
                }
                if ((unchecked += size) < kWritePiece) return true;
                unchecked = 0;
                py::gil_scoped_acquire gil;
                interrupted = PyErr_CheckSignals() != 0;
                return !interrupted;
              });
              if (std::fclose(f) != 0 && err == 0) err = errno;
            }
            if (interrupted || PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (err != 0) throw std::system_error(err, std::generic_category(), path);
          },
          py::arg("path"), "Write the model to `path`; an OSError or KeyboardInterrupt leaves it incomplete.")
      .def_property_readonly("num_nodes", [](const Model& md) { return md.session->num_nodes(); });

  py::class_<Session, std::shared_ptr<Session>>(m, "Session")
      .def(py::init<int>(), py::arg("opset"))
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
          "finish",
          [](const std::shared_ptr<Session>& s, const std::string& producer_version) {
            return Model{s, s->finish(producer_version)};
          },
          py::arg("producer_version"));
}

}  // namespace fastonnx::bindings
