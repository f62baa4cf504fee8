// python/src/bindings.h: one Bind<Family>() per method family, called by
// PYBIND11_MODULE in module.cc, plus helpers shared by the binding files.
//
// Convention of the low-level module posenc._posenc: functions take their
// outputs as arguments (`out`, a writable numpy array or torch tensor) and
// never allocate tensors; the pure-Python layer (posenc/__init__.py)
// allocates with numpy or torch so that torch is imported only when the
// caller uses it. Views are built with the GIL held, kernels run with it
// released (py::gil_scoped_release), views die with it held again.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

#include "posenc/context.h"
#include "posenc/error.h"
#include "tensor_arg.h"

namespace posenc::python {

// The Context one call runs on, kept alive for the call: `ctx` (a
// posenc.Context, owned by the caller's Python object) or, for None, the
// process-wide default (posenc.set_num_threads; initially one thread per
// core available to the process, or POSENC_NUM_THREADS). Replacing the
// default while calls run is safe: each call holds the Context it started
// with. Converts to `const Context&` for the C++ API.
class ContextHold {
 public:
  explicit ContextHold(std::shared_ptr<const Context> context) : context_(std::move(context)) {}
  operator const Context&() const { return *context_; }  // NOLINT(google-explicit-constructor)
  const Context& get() const { return *context_; }

 private:
  std::shared_ptr<const Context> context_;
};
ContextHold ContextOf(py::handle ctx);

void BindSinusoidal(py::module_& m);
void BindRope(py::module_& m);
void BindBias(py::module_& m);
void BindLearned(py::module_& m);
void BindConfig(py::module_& m);
void BindAttention(py::module_& m);
void BindMultimodal(py::module_& m);

}  // namespace posenc::python
