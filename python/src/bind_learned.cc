// python/src/bind_learned.cc: posenc/learned.h (LearnedTable) in
// posenc._posenc. The table's float32 storage is exposed as a writable numpy
// array that shares memory with the C++ object (`values`), so a torch
// nn.Parameter made with torch.from_numpy trains the very table the kernels
// read. The Python class posenc.LearnedTable wraps this one.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "posenc/learned.h"

namespace posenc::python {
namespace {

// Binds LearnedTable's constructors, file I/O and read-only properties
// (max_positions, dim, values) on `cls`.
void BindLearnedTableData(py::class_<LearnedTable>& cls) {
  cls.def(py::init<std::int64_t, std::int64_t>(), py::arg("max_positions"), py::arg("dim"))
      .def_static(
          "random_normal",
          [](std::int64_t max_positions, std::int64_t dim, double stddev, std::uint64_t seed) {
            LearnedInitParams p;
            p.max_positions = max_positions;
            p.dim = dim;
            p.stddev = stddev;
            p.seed = seed;
            return LearnedTable::RandomNormal(p);
          },
          py::arg("max_positions"), py::arg("dim"), py::arg("stddev"), py::arg("seed"))
      .def_static(
          "from_array",
          [](py::handle table) {
            HeldView v = ViewOf(table, "table", Access::kRead);
            return LearnedTable::FromView(v.view);
          },
          py::arg("table"))
      .def_static("load_npy", &LearnedTable::LoadNpy, py::arg("path"))
      .def("save_npy", &LearnedTable::SaveNpy, py::arg("path"))
      .def_property_readonly("max_positions", &LearnedTable::max_positions)
      .def_property_readonly("dim", &LearnedTable::dim)
      .def_property_readonly(
          "values",
          [](py::object self) {
            auto& t = self.cast<LearnedTable&>();
            TensorView v = t.MutableView();
            return py::array_t<float>({t.max_positions(), t.dim()},
                                      {t.dim() * static_cast<py::ssize_t>(sizeof(float)),
                                       static_cast<py::ssize_t>(sizeof(float))},
                                      v.As<float>(), self);
          },
          "The table, float32 [max_positions, dim], sharing memory with this object.");
}

// Binds LearnedTable's operations on `cls`: lookup, add_to, backward,
// sgd_step and resized.
void BindLearnedTableOps(py::class_<LearnedTable>& cls) {
  cls.def(
      "lookup",
      [](const LearnedTable& t, py::handle out, py::handle positions, std::int64_t offset,
         py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView o = ViewOf(out, "out", Access::kWrite);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        Require(pos.ids == nullptr || storage.shape.size() == 1, "positions.ndim",
                storage.shape.size(), "1 for lookup (use add_to for [batch, seq])");
        const std::int64_t count = pos.ids ? pos.count : o.view.shape[0];
        py::gil_scoped_release release;
        t.Lookup(pos, count, o.view, c);
      },
      py::arg("out"), py::arg("positions"), py::arg("offset"), py::arg("ctx"));
  cls.def(
      "add_to",
      [](const LearnedTable& t, py::handle x, py::handle positions, std::int64_t offset,
         py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView xv = ViewOf(x, "x", Access::kWrite);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        py::gil_scoped_release release;
        t.AddTo(xv.view, pos, c);
      },
      py::arg("x"), py::arg("positions"), py::arg("offset"), py::arg("ctx"));
  cls.def(
      "backward",
      [](const LearnedTable& t, py::handle d_out, py::handle positions, std::int64_t offset,
         py::handle grad, py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView d = ViewOf(d_out, "d_out", Access::kRead);
        HeldView g = ViewOf(grad, "grad", Access::kWrite);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        py::gil_scoped_release release;
        t.Backward(d.view, pos, g.view, c);
      },
      py::arg("d_out"), py::arg("positions"), py::arg("offset"), py::arg("grad"), py::arg("ctx"));
  cls.def(
      "sgd_step",
      [](LearnedTable& t, py::handle grad, double learning_rate) {
        HeldView g = ViewOf(grad, "grad", Access::kRead);
        t.SgdStep(g.view, learning_rate);
      },
      py::arg("grad"), py::arg("learning_rate"));
  cls.def(
      "resized",
      [](const LearnedTable& t, std::int64_t new_max_positions, const std::string& alignment) {
        return t.Resized(new_max_positions, ParseResizeAlignment(alignment, "alignment"));
      },
      py::arg("new_max_positions"), py::arg("alignment"));
}

}  // namespace

void BindLearned(py::module_& m) {
  py::class_<LearnedTable> cls(m, "LearnedTable");
  BindLearnedTableData(cls);
  BindLearnedTableOps(cls);
}

}  // namespace posenc::python
