// python/src/bind_sinusoidal.cc: posenc/sinusoidal.h in posenc._posenc.
// Formulas and conventions: include/posenc/sinusoidal.h. The Python API
// (allocation, defaults, docstrings) is posenc.sinusoidal_table & co.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "posenc/sinusoidal.h"

namespace posenc::python {
namespace {

SinusoidalParams Params(std::int64_t dim, double base, const std::string& layout) {
  SinusoidalParams p;
  p.dim = dim;
  p.base = base;
  p.layout = ParseSinusoidalLayout(layout, "layout");
  return p;
}

}  // namespace

void BindSinusoidal(py::module_& m) {
  m.def(
      "sinusoidal_inv_freq",
      [](std::int64_t dim, double base, const std::string& layout) {
        const std::vector<double> inv = SinusoidalInvFreq(Params(dim, base, layout));
        return py::array_t<double>(static_cast<py::ssize_t>(inv.size()), inv.data());
      },
      py::arg("dim"), py::arg("base"), py::arg("layout"),
      "Frequencies (radians per position) of the column pairs, float64.");

  m.def(
      "sinusoidal_table",
      [](py::handle out, std::int64_t num_positions, std::int64_t dim, double base,
         const std::string& layout, std::int64_t offset, py::handle positions, py::handle ctx) {
        const SinusoidalParams p = Params(dim, base, layout);
        const ContextHold c = ContextOf(ctx);
        HeldView o = ViewOf(out, "out", Access::kWrite);
        if (positions.is_none()) {
          // num_positions < 0: as many rows as `out` has.
          const std::int64_t rows = num_positions >= 0 ? num_positions : o.view.shape[0];
          py::gil_scoped_release release;
          SinusoidalTable(p, offset, rows, o.view, c);
        } else {
          Require(offset == 0, "offset", offset, "0 when explicit positions are given");
          IntArray ids = IntsOf(positions, "positions");
          Require(ids.shape.size() == 1, "positions.ndim", ids.shape.size(), "1");
          py::gil_scoped_release release;
          SinusoidalTableAt(p, ids.values.data(), static_cast<std::int64_t>(ids.values.size()),
                            o.view, c);
        }
      },
      py::arg("out"), py::arg("num_positions"), py::arg("dim"), py::arg("base"), py::arg("layout"),
      py::arg("offset"), py::arg("positions"), py::arg("ctx"),
      "Fills out[r, :] with PE(offset + r) or PE(positions[r]).");

  m.def(
      "add_sinusoidal",
      [](py::handle x, std::int64_t dim, double base, const std::string& layout,
         std::int64_t offset, py::handle positions, py::handle ctx) {
        const SinusoidalParams p = Params(dim, base, layout);
        const ContextHold c = ContextOf(ctx);
        HeldView v = ViewOf(x, "x", Access::kWrite);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        py::gil_scoped_release release;
        AddSinusoidal(p, v.view, pos, c);
      },
      py::arg("x"), py::arg("dim"), py::arg("base"), py::arg("layout"), py::arg("offset"),
      py::arg("positions"), py::arg("ctx"), "x[b, s, :] += PE(pos(b, s)) in place.");
}

}  // namespace posenc::python
