#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fastonnx/registry.h"
#include "opsets.h"

namespace py = pybind11;

namespace fastonnx::bindings {

void init_registry(py::module_& m) {
  m.attr("MIN_OPSET") = kMinOpset;
  m.attr("MAX_OPSET") = kMaxOpset;
  m.attr("DEFAULT_OPSET") = kDefaultOpset;
  m.def(
      "op_table",
      [] {
        py::list rows;
        for (const OpEntry& e : op_table()) {
          py::list names;
          for (const char* n : e.arg_names) names.append(n);
          rows.append(py::make_tuple(e.overload, names, e.static_args));
        }
        return rows;
      },
      "(overload, [argument names], bit set of the arguments that must be known when exporting) for every "
      "mapped ATen overload, in converter-id order");
}

}  // namespace fastonnx::bindings
