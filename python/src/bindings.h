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

#include "posenc/context.h"
#include "posenc/error.h"
#include "tensor_arg.h"

namespace posenc::python {

// The Context a call runs on: `ctx` (a posenc.Context) or, for None, a
// shared single-threaded Context with the auto backend.
const Context& ContextOf(py::handle ctx);

void BindSinusoidal(py::module_& m);
void BindRope(py::module_& m);
void BindBias(py::module_& m);
void BindLearned(py::module_& m);
void BindConfig(py::module_& m);
void BindAttention(py::module_& m);
void BindMultimodal(py::module_& m);

}  // namespace posenc::python
