// python/src/module.cc: the posenc._posenc extension module.
//
// Error mapping (register_exception_translator): posenc::InvalidArgument ->
// ValueError; posenc::ConfigError -> posenc.ConfigError (a ValueError);
// posenc::IoError -> posenc.IoError (an OSError); any other posenc::Error or
// std::exception -> RuntimeError. The message is the library's, unchanged.
// The families are bound in bind_<family>.cc (bindings.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/version.h"

namespace posenc::python {

const Context& ContextOf(py::handle ctx) {
  static const Context kDefault(1, Backend::kAuto);
  if (ctx.is_none()) return kDefault;
  try {
    return ctx.cast<const Context&>();
  } catch (const py::cast_error&) {
    throw InvalidArgument(ArgMessage(
        "ctx", py::str(py::type::handle_of(ctx).attr("__qualname__")).cast<std::string>(),
        "None or a posenc.Context"));
  }
}

namespace {

void BindCore(py::module_& m) {
  py::class_<Context>(m, "Context", R"doc(
Execution context of posenc calls: a thread pool and a backend.

Context(threads=1, backend="auto"): threads = 0 uses one thread per hardware
thread; backend is "auto" (SIMD where a fast path exists), "scalar" (the
reference loops) or "simd". Pass it as ctx= to any function. Kernels run with
the GIL released, so several Python threads can use posenc at once.)doc")
      .def(py::init([](int threads, const std::string& backend) {
             return std::make_unique<Context>(threads, ParseBackend(backend, "backend"));
           }),
           py::arg("threads") = 1, py::arg("backend") = "auto")
      .def_property_readonly("num_threads", &Context::num_threads)
      .def_property_readonly("backend",
                             [](const Context& c) { return std::string(BackendName(c.backend())); })
      .def("__repr__", [](const Context& c) {
        return "posenc.Context(threads=" + std::to_string(c.num_threads()) + ", backend='" +
               std::string(BackendName(c.backend())) + "')";
      });
  m.def("simd_target", [] { return std::string(SimdTargetName()); },
        "Name of the SIMD target the simd backend dispatches to on this CPU.");
  m.attr("MAX_POSITION") = kMaxPosition;
}

}  // namespace
}  // namespace posenc::python

PYBIND11_MODULE(_posenc, m) {
  namespace pp = posenc::python;
  m.doc() = "posenc C++ core (low-level; use the posenc package).";
  m.attr("__version__") = POSENC_VERSION_STRING;  // the repository's VERSION file

  static pybind11::exception<posenc::ConfigError> config_error(m, "ConfigError",
                                                               PyExc_ValueError);
  static pybind11::exception<posenc::IoError> io_error(m, "IoError", PyExc_OSError);
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const posenc::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const posenc::ConfigError& e) {
      PyErr_SetString(config_error.ptr(), e.what());
    } catch (const posenc::IoError& e) {
      PyErr_SetString(io_error.ptr(), e.what());
    } catch (const posenc::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  pp::BindCore(m);
  pp::BindSinusoidal(m);
  pp::BindRope(m);
  pp::BindBias(m);
  pp::BindLearned(m);
  pp::BindConfig(m);
  pp::BindAttention(m);
  pp::BindMultimodal(m);
}
