// python/src/module.cc: the posenc._posenc extension module.
//
// Error mapping (register_exception_translator): posenc::InvalidArgument ->
// ValueError; posenc::ConfigError -> posenc.ConfigError (a ValueError);
// posenc::IoError -> posenc.IoError (an OSError); any other posenc::Error or
// std::exception -> RuntimeError. The message is the library's, unchanged.
// The families are bound in bind_<family>.cc (bindings.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bindings.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/version.h"

namespace posenc::python {

namespace {

// Cores this process may run on (sched_getaffinity), at least 1.
int CoresAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1U, std::thread::hardware_concurrency());
}

// The initial default: POSENC_NUM_THREADS when set (validated like
// set_num_threads), else the cores available.
int InitialThreads() {
  const char* env = std::getenv("POSENC_NUM_THREADS");
  if (env == nullptr || *env == '\0') return CoresAvailable();
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  Require(*end == '\0' && n >= 0 && n <= 1024, "POSENC_NUM_THREADS", env,
          "an integer thread count in [0, 1024] (0: one per core available)");
  return n == 0 ? CoresAvailable() : static_cast<int>(n);
}

std::mutex& DefaultMutex() {
  static std::mutex mu;
  return mu;
}

std::shared_ptr<const Context>& DefaultSlot() {
  static std::shared_ptr<const Context> slot;
  return slot;
}

std::shared_ptr<const Context> DefaultContext() {
  std::lock_guard<std::mutex> lock(DefaultMutex());
  auto& slot = DefaultSlot();
  if (!slot) slot = std::make_shared<const Context>(InitialThreads(), Backend::kAuto);
  return slot;
}

void SetDefaultThreads(int threads) {
  Require(threads >= 0 && threads <= 1024, "threads", threads,
          "a thread count in [0, 1024] (0: one per core available)");
  auto context =
      std::make_shared<const Context>(threads == 0 ? CoresAvailable() : threads, Backend::kAuto);
  std::lock_guard<std::mutex> lock(DefaultMutex());
  DefaultSlot() = std::move(context);
}

}  // namespace

ContextHold ContextOf(py::handle ctx) {
  if (ctx.is_none()) return ContextHold(DefaultContext());
  try {
    // Non-owning: the caller's posenc.Context object outlives the call.
    const Context& context = ctx.cast<const Context&>();
    return ContextHold(std::shared_ptr<const Context>(std::shared_ptr<const Context>{}, &context));
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

Context(threads=1, backend="auto", workers="pool"): threads = 0 uses one
thread per hardware thread; backend is "auto" (SIMD where a fast path
exists), "scalar" (the reference loops) or "simd"; workers is "pool"
(posenc's own threads) or "openmp" (the calling thread's OpenMP team, shared
with an OpenMP host such as torch: posenc.torch uses it when torch's
parallel backend is OpenMP; see openmp_available()). Pass it as ctx= to any
function. Kernels run with the GIL released, so several Python threads can
use posenc at once. Between calls, the pool's threads poll for the next one
for 50 microseconds before they sleep; the environment variable
POSENC_POOL_SPIN_US (0 to 100000) sets that for Contexts made afterwards.)doc")
      .def(py::init([](int threads, const std::string& backend, const std::string& workers) {
             return std::make_unique<Context>(threads, ParseBackend(backend, "backend"),
                                              ParseWorkers(workers, "workers"));
           }),
           py::arg("threads") = 1, py::arg("backend") = "auto", py::arg("workers") = "pool")
      .def_property_readonly("num_threads", &Context::num_threads)
      .def_property_readonly("backend",
                             [](const Context& c) { return std::string(BackendName(c.backend())); })
      .def_property_readonly("workers",
                             [](const Context& c) { return std::string(WorkersName(c.workers())); })
      .def("__repr__", [](const Context& c) {
        return "posenc.Context(threads=" + std::to_string(c.num_threads()) + ", backend='" +
               std::string(BackendName(c.backend())) + "', workers='" +
               std::string(WorkersName(c.workers())) + "')";
      });
  m.def("openmp_available", &OpenMPAvailable,
        "Whether this build has OpenMP, i.e. Context(workers=\"openmp\") is allowed.");
  m.def("set_num_threads", &SetDefaultThreads, py::arg("threads"), R"doc(
Sets the process-wide default thread count: every posenc call made with
ctx=None runs on a shared Context of this many threads (0: one per core
available to the process). The initial default is POSENC_NUM_THREADS when
set, else the cores available. posenc.torch follows torch.get_num_threads()
instead unless given ctx=. Calls already running keep their Context.)doc");
  m.def(
      "get_num_threads", [] { return DefaultContext()->num_threads(); },
      "Thread count of the process-wide default Context (see set_num_threads).");
  m.def(
      "simd_target", [] { return std::string(SimdTargetName()); },
      "Name of the SIMD target the simd backend dispatches to on this CPU.");
  m.attr("MAX_POSITION") = kMaxPosition;
}

}  // namespace
}  // namespace posenc::python

PYBIND11_MODULE(_posenc, m) {
  namespace pp = posenc::python;
  m.doc() = "posenc C++ core (low-level; use the posenc package).";
  m.attr("__version__") = POSENC_VERSION_STRING;  // the repository's VERSION file

  static pybind11::exception<posenc::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
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
