// python/src/bind_rope.cc: posenc/rope.h in posenc._posenc.
// Formulas, pairings and numerics: include/posenc/rope.h. The Python API
// (config= resolution, allocation, in place or not) is posenc.apply_rope &
// co. in posenc/__init__.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "bindings.h"
#include "posenc/rope.h"

namespace posenc::python {
namespace {

// inv_freq None: the default theta table; else explicit frequencies (any
// float array-like, e.g. from rope_inv_freq) with their attention factor.
RopeParams Params(std::int64_t head_dim, std::int64_t rotary_dim, double theta,
                  const std::string& pairing, const std::string& numerics, py::handle inv_freq,
                  double attention_factor) {
  RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.theta = theta;
  p.pairing = ParseRopePairing(pairing, "pairing");
  p.numerics = ParseRopeNumerics(numerics, "numerics");
  if (!inv_freq.is_none()) {
    HeldView f = ViewOf(inv_freq, "inv_freq", Access::kRead);
    Require(f.view.rank == 1, "inv_freq.ndim", f.view.rank, "1");
    for (std::int64_t i = 0; i < f.view.shape[0]; ++i) {
      p.frequencies.inv_freq.push_back(
          LoadAsDouble(f.view.data, f.view.dtype, i * f.view.strides[0]));
    }
    p.frequencies.attention_factor = attention_factor;
    if (p.rotary_dim == 0)
      p.rotary_dim = 2 * static_cast<std::int64_t>(p.frequencies.inv_freq.size());
  } else {
    Require(attention_factor == 1.0, "attention_factor", attention_factor,
            "1 unless explicit inv_freq is given");
  }
  ValidateRopeParams(p);
  return p;
}

RopeDirection ParseDirection(const std::string& text) {
  if (text == "forward") return RopeDirection::kForward;
  if (text == "inverse") return RopeDirection::kInverse;
  throw InvalidArgument(ArgMessage("direction", text, "forward or inverse"));
}

std::int64_t LastDim(const HeldView& v) {
  return v.view.shape[static_cast<std::size_t>(v.view.rank - 1)];
}

// Binds the frequency and table entry points: rope_default_inv_freq and
// rope_cos_sin.
void BindRopeTables(py::module_& m) {
  m.def(
      "rope_default_inv_freq",
      [](std::int64_t rotary_dim, double theta, const std::string& numerics) {
        const RopeFrequencies f =
            RopeDefaultFrequencies(rotary_dim, theta, ParseRopeNumerics(numerics, "numerics"));
        return std::make_pair(
            py::array_t<double>(static_cast<py::ssize_t>(f.inv_freq.size()), f.inv_freq.data()),
            f.attention_factor);
      },
      py::arg("rotary_dim"), py::arg("theta"), py::arg("numerics"),
      "Default frequencies theta^(-2j/rotary_dim) (float64 array) and attention factor 1.");

  m.def(
      "rope_cos_sin",
      [](py::handle cos, py::handle sin, py::handle positions, std::int64_t offset,
         std::int64_t head_dim, std::int64_t rotary_dim, double theta, const std::string& pairing,
         const std::string& numerics, py::handle inv_freq, double attention_factor,
         py::handle ctx) {
        const RopeParams p =
            Params(head_dim, rotary_dim, theta, pairing, numerics, inv_freq, attention_factor);
        const ContextHold c = ContextOf(ctx);
        HeldView cv = ViewOf(cos, "cos", Access::kWrite);
        HeldView sv = ViewOf(sin, "sin", Access::kWrite);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        const std::int64_t count = pos.ids ? pos.count : cv.view.shape[0];
        py::gil_scoped_release release;
        RopeCosSin(p, pos, count, cv.view, sv.view, c);
      },
      py::arg("cos"), py::arg("sin"), py::arg("positions"), py::arg("offset"), py::arg("head_dim"),
      py::arg("rotary_dim"), py::arg("theta"), py::arg("pairing"), py::arg("numerics"),
      py::arg("inv_freq"), py::arg("attention_factor"), py::arg("ctx"),
      "Fills cos and sin ([count, rotary_dim]) in HF's layout.");
}

// Binds the rotations applied to tensors: apply_rope and apply_rope_qk.
void BindRopeApply(py::module_& m) {
  m.def(
      "apply_rope",
      [](py::handle x, py::handle out, const std::string& layout, py::handle positions,
         std::int64_t offset, std::int64_t rotary_dim, double theta, const std::string& pairing,
         const std::string& numerics, py::handle inv_freq, double attention_factor,
         const std::string& direction, py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        const AttentionLayout lay = ParseLayout(layout, "layout");
        const RopeDirection dir = ParseDirection(direction);
        HeldView xv = ViewOf(x, "x", out.is_none() ? Access::kWrite : Access::kRead);
        Require(
            xv.view.rank == 4, "x.ndim", xv.view.rank,
            "4 ([batch, heads, seq, head_dim] for bhsd, [batch, seq, heads, head_dim] for bshd)");
        const RopeParams p =
            Params(LastDim(xv), rotary_dim, theta, pairing, numerics, inv_freq, attention_factor);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        if (out.is_none()) {
          py::gil_scoped_release release;
          ApplyRope(p, xv.view, lay, pos, dir, nullptr, c);
        } else {
          HeldView ov = ViewOf(out, "out", Access::kWrite);
          py::gil_scoped_release release;
          ApplyRope(p, xv.view, lay, pos, dir, &ov.view, c);
        }
      },
      py::arg("x"), py::arg("out"), py::arg("layout"), py::arg("positions"), py::arg("offset"),
      py::arg("rotary_dim"), py::arg("theta"), py::arg("pairing"), py::arg("numerics"),
      py::arg("inv_freq"), py::arg("attention_factor"), py::arg("direction"), py::arg("ctx"),
      "Rotates x (rank 4) into out, or in place when out is None.");

  m.def(
      "apply_rope_qk",
      [](py::handle q, py::handle k, const std::string& layout, py::handle positions,
         std::int64_t offset, std::int64_t rotary_dim, double theta, const std::string& pairing,
         const std::string& numerics, py::handle inv_freq, double attention_factor,
         const std::string& direction, py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        const AttentionLayout lay = ParseLayout(layout, "layout");
        const RopeDirection dir = ParseDirection(direction);
        HeldView qv = ViewOf(q, "q", Access::kWrite);
        HeldView kv = ViewOf(k, "k", Access::kWrite);
        Require(qv.view.rank == 4, "q.ndim", qv.view.rank, "4");
        const RopeParams p =
            Params(LastDim(qv), rotary_dim, theta, pairing, numerics, inv_freq, attention_factor);
        IntArray storage;
        const Positions pos = PositionsOf(positions, offset, "positions", storage);
        py::gil_scoped_release release;
        ApplyRopeQK(p, qv.view, kv.view, lay, pos, dir, c);
      },
      py::arg("q"), py::arg("k"), py::arg("layout"), py::arg("positions"), py::arg("offset"),
      py::arg("rotary_dim"), py::arg("theta"), py::arg("pairing"), py::arg("numerics"),
      py::arg("inv_freq"), py::arg("attention_factor"), py::arg("direction"), py::arg("ctx"),
      "Rotates q and k in place in one pass.");
}

}  // namespace

void BindRope(py::module_& m) {
  BindRopeTables(m);
  BindRopeApply(m);
}

}  // namespace posenc::python
