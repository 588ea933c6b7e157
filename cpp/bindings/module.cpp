// The pybind11 module fastonnx._C: thin wrappers only. Only ints, floats, strings, lists of
// them and raw pointers cross the boundary; no Python object per ONNX node.
#include <exception>
#include <new>
#include <string>
#include <system_error>

#include <pybind11/pybind11.h>

#include "fastonnx/types.h"

namespace py = pybind11;

namespace fastonnx::bindings {
void init_session(py::module_& m);
void init_registry(py::module_& m);

namespace {
void set_error(const char* type, const std::string& message) {
  PyErr_SetString(py::module_::import("fastonnx.errors").attr(type).ptr(), message.c_str());
}

// Every native failure reaches Python as a Python exception: ConvertError as
// fastonnx.ConversionError, an I/O error as the OSError of its errno (the writer reports it as
// fastonnx.WriteError), memory exhaustion as MemoryError, and anything else, a bug, as
// fastonnx.InternalError.
void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const ConvertError& e) {
    set_error("ConversionError", e.what());
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const py::error_already_set&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::system_error& e) {
    PyErr_SetObject(PyExc_OSError, py::make_tuple(e.code().value(), e.code().message()).ptr());
  } catch (const std::exception& e) {
    set_error("InternalError", std::string("fastonnx's native core failed: ") + e.what() +
                                   " (a bug in fastonnx; please report it with the model)");
  }
}
}  // namespace
}  // namespace fastonnx::bindings

PYBIND11_MODULE(_C, m) {
  m.doc() = "fastonnx native core";
  fastonnx::bindings::init_session(m);
  fastonnx::bindings::init_registry(m);
  // Local to this module: pybind11 shares its registered translators among the extensions built
  // against the same internals (torch 2.14.1's are), and a global one turned the C++ errors of
  // torch's own bindings into fastonnx.InternalError, among them the NotImplementedError of an
  // op without a fake kernel that torch catches to decompose it (fake_quantize_per_tensor_affine:
  // "SystemError: <built-in function __import__> returned a result with an exception set").
  py::register_local_exception_translator(fastonnx::bindings::translate);
  m.attr("ConvertError") = py::module_::import("fastonnx.errors").attr("ConversionError");
}
