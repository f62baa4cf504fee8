// python/src/bind_bias.cc: the attention-side biases in posenc._posenc:
// ALiBi (posenc/alibi.h), T5 buckets and bias table (posenc/t5.h), relative
// position matrices (posenc/relative.h), DeBERTa buckets (posenc/deberta.h).
// Formulas and conventions: those headers. The Python API is posenc.alibi_*,
// posenc.t5_*, posenc.relative_matrix, posenc.deberta_* (posenc/_bias.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/relative.h"
#include "posenc/t5.h"

namespace posenc::python {
namespace {

py::array_t<double> ToArray(const std::vector<double>& v) {
  return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
}

// An int64 numpy array of `shape` holding `values` (copied).
py::array_t<std::int64_t> ToArray(const std::vector<std::int64_t>& values,
                                  std::vector<py::ssize_t> shape) {
  py::array_t<std::int64_t> a(shape);
  std::copy(values.begin(), values.end(), a.mutable_data());
  return a;
}

// Relative positions are validated here because the bucketers' Bucket() is
// the unchecked per-cell form: |r| <= kMaxPosition like every position.
void CheckRelative(const IntArray& rel) {
  for (std::size_t i = 0; i < rel.values.size(); ++i) {
    const std::int64_t r = rel.values[i];
    RequireAt(r >= -kMaxPosition && r <= kMaxPosition, "relative_position",
              static_cast<std::int64_t>(i), r, "a relative position in [-(2^24 - 1), 2^24 - 1]");
  }
}

AlibiParams MakeAlibi(std::int64_t num_heads, double max_bias, const std::string& convention,
                      py::handle slopes) {
  AlibiParams p;
  p.num_heads = num_heads;
  p.max_bias = max_bias;
  p.convention = ParseAlibiSlopeConvention(convention, "convention");
  if (!slopes.is_none()) {
    HeldView s = ViewOf(slopes, "slopes", Access::kRead);
    Require(s.view.rank == 1, "slopes.ndim", s.view.rank, "1");
    for (std::int64_t i = 0; i < s.view.shape[0]; ++i) {
      p.slopes.push_back(LoadAsDouble(s.view.data, s.view.dtype, i * s.view.strides[0]));
    }
  }
  ValidateAlibiParams(p);
  return p;
}

T5BucketParams MakeT5(std::int64_t num_buckets, std::int64_t max_distance,
                      const std::string& direction) {
  T5BucketParams p;
  p.num_buckets = num_buckets;
  p.max_distance = max_distance;
  p.direction = ParseT5Direction(direction, "direction");
  ValidateT5BucketParams(p);
  return p;
}

void BindAlibi(py::module_& m) {
  m.def(
      "alibi_slopes",
      [](std::int64_t num_heads, double max_bias, const std::string& convention) {
        return ToArray(AlibiSlopes(MakeAlibi(num_heads, max_bias, convention, py::none())));
      },
      py::arg("num_heads"), py::arg("max_bias"), py::arg("convention"));
  m.def(
      "alibi_bias",
      [](py::handle out, std::int64_t num_heads, double max_bias, const std::string& convention,
         py::handle slopes, std::int64_t query_len, std::int64_t key_len, const std::string& form,
         py::handle ctx) {
        const std::vector<double> s =
            AlibiSlopes(MakeAlibi(num_heads, max_bias, convention, slopes));
        AlibiGeometry g;
        g.query_len = query_len;
        g.key_len = key_len;
        g.form = ParseAlibiForm(form, "form");
        const ContextHold c = ContextOf(ctx);
        HeldView o = ViewOf(out, "out", Access::kWrite);
        py::gil_scoped_release release;
        AlibiBiasMatrix(s, g, o.view, c);
      },
      py::arg("out"), py::arg("num_heads"), py::arg("max_bias"), py::arg("convention"),
      py::arg("slopes"), py::arg("query_len"), py::arg("key_len"), py::arg("form"), py::arg("ctx"));
  m.def(
      "bloom_alibi_tensor",
      [](py::handle out, py::handle attention_mask, std::int64_t num_heads, double max_bias,
         const std::string& convention, py::handle slopes) {
        const std::vector<double> s =
            AlibiSlopes(MakeAlibi(num_heads, max_bias, convention, slopes));
        IntArray mask = IntsOf(attention_mask, "attention_mask");
        Require(mask.shape.size() == 2, "attention_mask.ndim", mask.shape.size(),
                "2 ([batch, seq])");
        HeldView o = ViewOf(out, "out", Access::kWrite);
        py::gil_scoped_release release;
        BloomAlibiTensor(s, mask.values.data(), mask.shape[0], mask.shape[1], o.view);
      },
      py::arg("out"), py::arg("attention_mask"), py::arg("num_heads"), py::arg("max_bias"),
      py::arg("convention"), py::arg("slopes"));
}

void BindT5(py::module_& m) {
  m.def(
      "t5_bucket",
      [](py::handle relative_position, std::int64_t num_buckets, std::int64_t max_distance,
         const std::string& direction) {
        const T5Bucketer bucketer(MakeT5(num_buckets, max_distance, direction));
        IntArray rel = IntsOf(relative_position, "relative_position");
        CheckRelative(rel);
        std::vector<std::int64_t> out(rel.values.size());
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = bucketer.Bucket(rel.values[i]);
        return ToArray(out, std::vector<py::ssize_t>(rel.shape.begin(), rel.shape.end()));
      },
      py::arg("relative_position"), py::arg("num_buckets"), py::arg("max_distance"),
      py::arg("direction"));

  // The table is owned by Python (a [num_buckets, heads] array or tensor,
  // e.g. an nn.Parameter's data); these wrap T5BiasTable around a copy.
  m.def(
      "t5_bias",
      [](py::handle out, py::handle table, std::int64_t num_buckets, std::int64_t max_distance,
         const std::string& direction, py::handle query_positions, std::int64_t query_offset,
         std::int64_t query_len, std::int64_t key_len, py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView t = ViewOf(table, "table", Access::kRead);
        Require(t.view.rank == 2, "table.ndim", t.view.rank, "2 ([num_buckets, heads])");
        Require(t.view.shape[0] == num_buckets, "table.shape[0]", t.view.shape[0],
                "num_buckets (" + std::to_string(num_buckets) + ")");
        T5BiasTable bias(MakeT5(num_buckets, max_distance, direction), t.view.shape[1]);
        for (std::int64_t b = 0; b < t.view.shape[0]; ++b) {
          for (std::int64_t h = 0; h < t.view.shape[1]; ++h) {
            bias.data()[b * t.view.shape[1] + h] = static_cast<float>(LoadAsDouble(
                t.view.data, t.view.dtype, b * t.view.strides[0] + h * t.view.strides[1]));
          }
        }
        IntArray storage;
        const Positions pos =
            PositionsOf(query_positions, query_offset, "query_positions", storage);
        HeldView o = ViewOf(out, "out", Access::kWrite);
        py::gil_scoped_release release;
        bias.FillBias(pos, query_len, key_len, o.view, c);
      },
      py::arg("out"), py::arg("table"), py::arg("num_buckets"), py::arg("max_distance"),
      py::arg("direction"), py::arg("query_positions"), py::arg("query_offset"),
      py::arg("query_len"), py::arg("key_len"), py::arg("ctx") = py::none());
  m.def(
      "t5_bias_grad",
      [](py::handle d_table, py::handle d_bias, std::int64_t num_buckets, std::int64_t max_distance,
         const std::string& direction, std::int64_t heads, py::handle query_positions,
         std::int64_t query_offset, const std::string& write) {
        const T5BiasTable bias(MakeT5(num_buckets, max_distance, direction), heads);
        IntArray storage;
        const Positions pos =
            PositionsOf(query_positions, query_offset, "query_positions", storage);
        HeldView dt = ViewOf(d_table, "d_table", Access::kWrite);
        HeldView db = ViewOf(d_bias, "d_bias", Access::kRead);
        const BiasWrite w = ParseBiasWrite(write, "write");
        py::gil_scoped_release release;
        bias.AccumulateGrad(pos, db.view, dt.view, w);
      },
      py::arg("d_table"), py::arg("d_bias"), py::arg("num_buckets"), py::arg("max_distance"),
      py::arg("direction"), py::arg("heads"), py::arg("query_positions"), py::arg("query_offset"),
      py::arg("write"));
}

void BindRelative(py::module_& m) {
  m.def(
      "relative_matrix",
      [](std::int64_t query_len, std::int64_t key_len, std::int64_t query_offset,
         const std::string& sign) {
        RelativeMatrixParams p;
        p.query_len = query_len;
        p.key_len = key_len;
        p.query_offset = query_offset;
        p.sign = ParseRelativeSign(sign, "sign");
        return ToArray(RelativePositionMatrix(p), {query_len, key_len});
      },
      py::arg("query_len"), py::arg("key_len"), py::arg("query_offset"), py::arg("sign"));
}

void BindDeberta(py::module_& m) {
  m.def(
      "deberta_bucket",
      [](py::handle relative_position, std::int64_t bucket_size, std::int64_t max_position) {
        const DebertaBucketer bucketer(DebertaBucketParams{bucket_size, max_position});
        IntArray rel = IntsOf(relative_position, "relative_position");
        CheckRelative(rel);
        std::vector<std::int64_t> out(rel.values.size());
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = bucketer.Bucket(rel.values[i]);
        return ToArray(out, std::vector<py::ssize_t>(rel.shape.begin(), rel.shape.end()));
      },
      py::arg("relative_position"), py::arg("bucket_size"), py::arg("max_position"));
  m.def(
      "deberta_relative_position",
      [](std::int64_t query_size, std::int64_t key_size, std::int64_t bucket_size,
         std::int64_t max_position) {
        return ToArray(BuildRelativePosition(query_size, key_size,
                                             DebertaBucketParams{bucket_size, max_position}),
                       {query_size, key_size});
      },
      py::arg("query_size"), py::arg("key_size"), py::arg("bucket_size"), py::arg("max_position"));
}

}  // namespace

void BindBias(py::module_& m) {
  BindAlibi(m);
  BindT5(m);
  BindRelative(m);
  BindDeberta(m);
}

}  // namespace posenc::python
