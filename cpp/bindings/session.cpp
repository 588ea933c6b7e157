#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fastonnx/session.h"

namespace py = pybind11;

namespace fastonnx::bindings {
namespace {

// A graph value referenced from an FX node's arguments.
struct ValueRef {
  uint32_t id;
};

TensorMeta to_meta(Session& s, int dtype, const py::list& shape) {
  TensorMeta meta;
  meta.dtype = scalar_type_from_code(dtype);
  meta.shape.reserve(shape.size());
  for (py::handle d : shape) {
    if (py::isinstance<py::str>(d)) {
      meta.shape.push_back(Dim{-1, s.intern(d.cast<std::string>())});
    } else {
      meta.shape.push_back(Dim{d.cast<int64_t>(), 0});
    }
  }
  return meta;
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
    a.i = h.cast<int64_t>();
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
    throw ConvertError("an FX argument of type " + std::string(py::str(py::type::handle_of(h).attr("__name__"))) +
                       " cannot be converted");
  }
  return a;
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
  // Native conversion errors are fastonnx.ConversionError (an ExportError) in Python.
  py::register_exception<ConvertError>(m, "ConvertError",
                                       py::module_::import("fastonnx.errors").attr("ConversionError"));

  py::class_<ValueRef>(m, "ValueRef").def(py::init<uint32_t>()).def_readonly("id", &ValueRef::id);

  py::class_<Model>(m, "Model")
      .def_property_readonly("nbytes", [](const Model& md) { return md.proto.size(); })
      .def("to_bytes", [](const Model& md) { return py::bytes(md.proto.to_string()); })
      .def(
          "write",
          [](const Model& md, const std::string& path) {
            py::gil_scoped_release no_gil;
            std::FILE* f = std::fopen(path.c_str(), "wb");
            if (f == nullptr) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
            const bool ok = md.proto.write(f);
            const int err = errno;
            if (std::fclose(f) != 0 || !ok) {
              throw std::runtime_error("writing " + path + " failed: " + std::strerror(ok ? errno : err));
            }
          },
          py::arg("path"))
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
            unpacked.reserve(args.size());
            for (py::handle a : args) unpacked.push_back(to_arg(a));
            std::vector<TensorMeta> out_metas;
            out_metas.reserve(metas.size());
            for (py::handle meta : metas) {
              if (meta.is_none()) {
                out_metas.emplace_back();
              } else {
                auto t = meta.cast<py::tuple>();
                out_metas.push_back(to_meta(s, t[0].cast<int>(), t[1].cast<py::list>()));
              }
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
