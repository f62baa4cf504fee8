// python/src/tensor_arg.h: Python objects -> posenc views, without copies.
//
// Float tensors become zero-copy TensorViews held by a HeldView (ViewOf:
// buffer protocol or DLPack; details above it). Integer inputs (positions,
// relative positions) are small and copied into int64 (IntArray), from any
// integer dtype, a torch tensor or a sequence. Every error is a
// posenc::InvalidArgument naming the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/positions.h"
#include "posenc/tensor.h"

namespace posenc::python {

namespace py = pybind11;

enum class Access : std::uint8_t { kRead, kWrite };

// The HeldView keeps the buffer / managed tensor alive while the view is
// used; destroy it with the GIL held (every binding does: views are made
// before py::gil_scoped_release and die after it).
struct HeldView {
  TensorView view;
  std::shared_ptr<void> keep;  // Py_buffer or DLManagedTensor owner
};

// How a 0-d tensor is taken: rejected, or as a rank-1 view of one element
// (the scalar-shaped tensor arguments of attention schemes, posenc/scheme.h).
enum class ScalarTensor : std::uint8_t { kReject, kAsShape1 };

// View of a float tensor; `arg` names it in errors. Accepted (zero-copy):
//  - objects with the buffer protocol (numpy arrays): py::buffer, formats
//    'f' float32, 'd' float64, 'e' float16 (numpy has no bfloat16);
//  - objects with __dlpack__ (torch tensors from 1.10 on, anything that
//    speaks DLPack) and raw DLPack capsules (torch.utils.dlpack.to_dlpack):
//    the capsule "dltensor" is consumed, renamed "used_dltensor" as the
//    protocol asks, and its deleter runs when the HeldView dies. float32,
//    float64, bfloat16, float16; CPU only.
HeldView ViewOf(py::handle obj, std::string_view arg, Access access,
                ScalarTensor scalar = ScalarTensor::kReject);

// An integer array copied into int64, with its shape.
struct IntArray {
  std::vector<std::int64_t> values;
  std::vector<std::int64_t> shape;
};

IntArray IntsOf(py::handle obj, std::string_view arg);

// Position ids for a [batch, seq] set of tokens: None -> offset + s, else an
// integer array of shape [seq] or [batch, seq] (copied). The Positions
// points into `storage`, which must outlive it.
Positions PositionsOf(py::handle obj, std::int64_t offset, std::string_view arg, IntArray& storage);

}  // namespace posenc::python
