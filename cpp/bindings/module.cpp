// The pybind11 module fastonnx._C: thin wrappers only. Only ints, floats, strings, lists of
// them and raw pointers cross the boundary; no Python object per ONNX node.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace fastonnx::bindings {
void init_session(py::module_& m);
void init_registry(py::module_& m);
}  // namespace fastonnx::bindings

PYBIND11_MODULE(_C, m) {
  m.doc() = "fastonnx native core";
  fastonnx::bindings::init_session(m);
  fastonnx::bindings::init_registry(m);
}
