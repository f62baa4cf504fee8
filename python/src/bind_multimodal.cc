// python/src/bind_multimodal.cc: multi-stream RoPE (posenc/rope_multimodal.h)
// in posenc._posenc: M-RoPE (Qwen2-VL sectioned, Qwen3-VL interleaved) and
// 2-D axial RoPE for image patches. Formulas: that header. Python API:
// posenc.apply_mrope (posenc/_rope.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/rope_multimodal.h"

namespace posenc::python {
namespace {

// positions: integers [num_streams, count] (count = seq or batch*seq).
StreamPositions Streams(py::handle positions, int num_streams, IntArray& storage) {
  storage = IntsOf(positions, "positions");
  Require(storage.shape.size() == 2, "positions.ndim", storage.shape.size(),
          "2 ([streams, seq] or [streams, batch*seq])");
  Require(storage.shape[0] == num_streams, "positions.shape[0]", storage.shape[0],
          "the number of position streams (" + std::to_string(num_streams) + ")");
  StreamPositions s;
  s.count = storage.shape[1];
  for (int i = 0; i < num_streams; ++i)
    s.ids[static_cast<std::size_t>(i)] = storage.values.data() + i * s.count;
  return s;
}

}  // namespace

void BindMultimodal(py::module_& m) {
  m.def(
      "apply_multistream_rope",
      [](py::handle x, py::handle out, const std::string& layout, py::handle positions,
         const std::string& kind, const std::vector<std::int64_t>& mrope_section,
         std::int64_t rotary_dim, double theta, py::handle inv_freq, double attention_factor,
         const std::string& pairing, const std::string& numerics, const std::string& direction,
         py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        const AttentionLayout lay = ParseLayout(layout, "layout");
        const RopeNumerics num = ParseRopeNumerics(numerics, "numerics");
        Require(direction == "forward" || direction == "inverse", "direction", direction,
                "forward or inverse");
        const RopeDirection dir =
            direction == "forward" ? RopeDirection::kForward : RopeDirection::kInverse;
        HeldView xv = ViewOf(x, "x", out.is_none() ? Access::kWrite : Access::kRead);
        Require(xv.view.rank == 4, "x.ndim", xv.view.rank, "4");
        const std::int64_t head_dim = xv.view.shape[3];
        MultiStreamRope rope;
        if (kind == "axial2d") {
          rope = MakeAxialRope2D(head_dim, rotary_dim == 0 ? head_dim : rotary_dim, theta, num);
        } else {
          Require(kind == "mrope" || kind == "mrope_interleaved", "kind", kind,
                  "mrope, mrope_interleaved or axial2d");
          RopeFrequencies f;
          if (inv_freq.is_none()) {
            f = RopeDefaultFrequencies(rotary_dim == 0 ? head_dim : rotary_dim, theta, num);
          } else {
            HeldView fv = ViewOf(inv_freq, "inv_freq", Access::kRead);
            Require(fv.view.rank == 1, "inv_freq.ndim", fv.view.rank, "1");
            for (std::int64_t i = 0; i < fv.view.shape[0]; ++i) {
              f.inv_freq.push_back(
                  LoadAsDouble(fv.view.data, fv.view.dtype, i * fv.view.strides[0]));
            }
            f.attention_factor = attention_factor;
          }
          rope =
              MakeMRope(head_dim, f, mrope_section,
                        kind == "mrope" ? MRopeLayout::kSectioned : MRopeLayout::kInterleaved, num);
        }
        rope.pairing = ParseRopePairing(pairing, "pairing");
        IntArray storage;
        const StreamPositions sp = Streams(positions, rope.num_streams, storage);
        if (out.is_none()) {
          py::gil_scoped_release release;
          ApplyMultiStreamRope(rope, xv.view, lay, sp, dir, nullptr, c);
        } else {
          HeldView ov = ViewOf(out, "out", Access::kWrite);
          py::gil_scoped_release release;
          ApplyMultiStreamRope(rope, xv.view, lay, sp, dir, &ov.view, c);
        }
      },
      py::arg("x"), py::arg("out"), py::arg("layout"), py::arg("positions"), py::arg("kind"),
      py::arg("mrope_section"), py::arg("rotary_dim"), py::arg("theta"), py::arg("inv_freq"),
      py::arg("attention_factor"), py::arg("pairing"), py::arg("numerics"), py::arg("direction"),
      py::arg("ctx"), "Multi-stream RoPE of x (rank 4) into out, or in place when out is None.");
}

}  // namespace posenc::python
