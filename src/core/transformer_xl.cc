// Transformer-XL relative attention scores (R table, rel-shift, direct).
// Formula, paper, conventions: include/posenc/transformer_xl.h. Matches HF
// PositionalEmbedding (pos_seq descending, [sin | cos]) and
// RelPartialLearnableMultiHeadAttn._rel_shift (removed from transformers v5).
#include "posenc/transformer_xl.h"

#include <cmath>
#include <string>
#include <vector>

#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

void ValidateTransformerXLParams(const TransformerXLParams& params) {
  Require(params.dim >= 2 && params.dim <= 65536 && params.dim % 2 == 0, "dim", params.dim,
          "an even dimension in [2, 65536] (R is [sin | cos] halves)");
  Require(std::isfinite(params.base) && params.base > 1.0, "base", params.base,
          "a finite number > 1");
}

namespace {

constexpr std::int64_t kMaxLen = std::int64_t{1} << 20;

double At(const TensorView& v, std::int64_t r, std::int64_t c) {
  return LoadAsDouble(v.data, v.dtype, r * v.strides[0] + c * v.strides[1]);
}
double At1(const TensorView& v, std::int64_t e) {
  return LoadAsDouble(v.data, v.dtype, e * v.strides[0]);
}
void Put(const TensorView& v, std::int64_t r, std::int64_t c, double x) {
  StoreFromDouble(v.data, v.dtype, r * v.strides[0] + c * v.strides[1], x);
}

}  // namespace

void TransformerXLPositionEmbedding(const TransformerXLParams& params, std::int64_t klen,
                                    const TensorView& out) {
  ValidateTransformerXLParams(params);
  Require(klen >= 1 && klen <= kMaxLen, "klen", klen, "a key length in [1, 2^20]");
  ValidateView(out, "out", 2, /*writable=*/true);
  if (!(out.shape[0] == klen && out.shape[1] == params.dim)) {
    FailArgument(
        "out.shape", out.Describe(),
        "[klen, dim] = [" + std::to_string(klen) + ", " + std::to_string(params.dim) + "]");
  }
  const std::int64_t half = params.dim / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  const double log_base = std::log(params.base);
  for (std::int64_t c = 0; c < half; ++c) {
    // HF: 1 / (10000 ** (arange(0, demb, 2) / demb)).
    inv_freq[static_cast<std::size_t>(c)] =
        std::exp(-static_cast<double>(2 * c) / static_cast<double>(params.dim) * log_base);
  }
  for (std::int64_t r = 0; r < klen; ++r) {
    std::int64_t pos = klen - 1 - r;
    if (params.clamp_len > 0 && pos > params.clamp_len) pos = params.clamp_len;
    for (std::int64_t c = 0; c < half; ++c) {
      const double angle = static_cast<double>(pos) * inv_freq[static_cast<std::size_t>(c)];
      Put(out, r, c, std::sin(angle));
      Put(out, r, half + c, std::cos(angle));
    }
  }
}

namespace {

template <typename T>
void PositionTermsRow(const T* q, const T* u, const T* v, const T* k, std::int64_t ld_k,
                      const T* rw, std::int64_t ld_rw, std::int64_t d, std::int64_t qlen,
                      std::int64_t klen, std::int64_t i, T scale, T* out) {
  for (std::int64_t j = 0; j < klen; ++j) {
    const T* kj = k + j * ld_k;
    T term = 0;
    for (std::int64_t e = 0; e < d; ++e) term += u[e] * kj[e];
    const std::int64_t dist = TransformerXLDistance(qlen, klen, i, j);
    if (dist >= 0) {
      const T* r = rw + TransformerXLRow(klen, dist) * ld_rw;
      for (std::int64_t e = 0; e < d; ++e) term += (q[e] + v[e]) * r[e];
    }
    out[j] += scale * term;
  }
}

}  // namespace

void TransformerXLAddPositionTermsRow(const float* q, const float* u, const float* v,
                                      const float* k, std::int64_t ld_k, const float* rw,
                                      std::int64_t ld_rw, std::int64_t d_head, std::int64_t qlen,
                                      std::int64_t klen, std::int64_t i, float scale,
                                      float* out) noexcept {
  PositionTermsRow(q, u, v, k, ld_k, rw, ld_rw, d_head, qlen, klen, i, scale, out);
}
void TransformerXLAddPositionTermsRow(const double* q, const double* u, const double* v,
                                      const double* k, std::int64_t ld_k, const double* rw,
                                      std::int64_t ld_rw, std::int64_t d_head, std::int64_t qlen,
                                      std::int64_t klen, std::int64_t i, double scale,
                                      double* out) noexcept {
  PositionTermsRow(q, u, v, k, ld_k, rw, ld_rw, d_head, qlen, klen, i, scale, out);
}

std::string_view TransformerXLMethodName(TransformerXLMethod m) {
  switch (m) {
    case TransformerXLMethod::kDirect:
      return "direct";
    case TransformerXLMethod::kRelShift:
      return "rel_shift";
  }
  return "?";
}

TransformerXLMethod ParseTransformerXLMethod(std::string_view text, std::string_view arg) {
  if (text == "direct") return TransformerXLMethod::kDirect;
  if (text == "rel_shift") return TransformerXLMethod::kRelShift;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of direct, rel_shift"));
}

namespace {

// HF _rel_shift on a row-major [qlen, klen] buffer.
std::vector<double> RelShift(const std::vector<double>& x, std::int64_t qlen, std::int64_t klen) {
  std::vector<double> out(x.size());
  for (std::int64_t f = 0; f < qlen * klen; ++f) {
    const std::int64_t p = f + qlen;  // flat index into padded [qlen, klen + 1]
    const std::int64_t a = p / (klen + 1), b = p % (klen + 1);
    out[static_cast<std::size_t>(f)] = b == 0 ? 0.0 : x[static_cast<std::size_t>(a * klen + b - 1)];
  }
  return out;
}

}  // namespace

void TransformerXLRelShift(const TensorView& x, const TensorView& out) {
  ValidateView(x, "x", 2);
  ValidateView(out, "out", 2, /*writable=*/true);
  if (!(out.shape[0] == x.shape[0] && out.shape[1] == x.shape[1])) {
    FailArgument("out.shape", out.Describe(), "x's shape " + x.Describe());
  }
  RequireNoOverlap(out, "out", x, "x", false);
  const std::int64_t qlen = x.shape[0], klen = x.shape[1];
  std::vector<double> in(static_cast<std::size_t>(qlen * klen));
  for (std::int64_t i = 0; i < qlen; ++i)
    for (std::int64_t j = 0; j < klen; ++j)
      in[static_cast<std::size_t>(i * klen + j)] = At(x, i, j);
  const std::vector<double> shifted = RelShift(in, qlen, klen);
  for (std::int64_t i = 0; i < qlen; ++i)
    for (std::int64_t j = 0; j < klen; ++j)
      Put(out, i, j, shifted[static_cast<std::size_t>(i * klen + j)]);
}

void TransformerXLScores(const TensorView& q, const TensorView& k, const TensorView& rw,
                         const TensorView& u, const TensorView& v, double scale,
                         TransformerXLMethod method, const TensorView& out) {
  ValidateView(q, "q", 2);
  ValidateView(k, "k", 2);
  ValidateView(rw, "rw", 2);
  ValidateView(u, "u", 1);
  ValidateView(v, "v", 1);
  ValidateView(out, "out", 2, /*writable=*/true);
  const std::int64_t qlen = q.shape[0], klen = k.shape[0], d = q.shape[1];
  const std::string dim_text = "d_head = " + std::to_string(d) + " (q.shape[1])";
  Require(k.shape[1] == d, "k.shape[1]", k.shape[1], dim_text);
  Require(rw.shape[1] == d, "rw.shape[1]", rw.shape[1], dim_text);
  Require(u.shape[0] == d, "u.shape[0]", u.shape[0], dim_text);
  Require(v.shape[0] == d, "v.shape[0]", v.shape[0], dim_text);
  Require(klen <= kMaxLen, "k.shape[0]", klen, "a key length in [1, 2^20]");
  if (qlen > klen) {
    FailArgument("q.shape[0]", qlen,
                 "a query length <= the key length " + std::to_string(klen) +
                     " (queries are the last qlen keys; memory = klen - qlen)");
  }
  if (rw.shape[0] != klen) {
    FailArgument(
        "rw.shape[0]", rw.shape[0],
        "klen = " + std::to_string(klen) + " (one projected R row per distance klen-1..0)");
  }
  if (!(out.shape[0] == qlen && out.shape[1] == klen)) {
    FailArgument("out.shape", out.Describe(),
                 "[qlen, klen] = [" + std::to_string(qlen) + ", " + std::to_string(klen) + "]");
  }
  Require(std::isfinite(scale) && scale > 0.0, "scale", scale, "a finite number > 0");
  for (const auto* in : {&q, &k, &rw, &u, &v}) RequireNoOverlap(out, "out", *in, "an input", false);

  std::vector<double> ac(static_cast<std::size_t>(qlen * klen)), bd(ac.size());
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t j = 0; j < klen; ++j) {
      double a = 0.0, b = 0.0;
      for (std::int64_t e = 0; e < d; ++e) {
        a += (At(q, i, e) + At1(u, e)) * At(k, j, e);
        if (method == TransformerXLMethod::kRelShift) {
          b += (At(q, i, e) + At1(v, e)) * At(rw, j, e);  // BD_raw[i][r = j]
        } else {
          const std::int64_t dist = TransformerXLDistance(qlen, klen, i, j);
          if (dist >= 0) b += (At(q, i, e) + At1(v, e)) * At(rw, TransformerXLRow(klen, dist), e);
        }
      }
      ac[static_cast<std::size_t>(i * klen + j)] = a;
      bd[static_cast<std::size_t>(i * klen + j)] = b;
    }
  }
  if (method == TransformerXLMethod::kRelShift) bd = RelShift(bd, qlen, klen);
  for (std::int64_t i = 0; i < qlen; ++i)
    for (std::int64_t j = 0; j < klen; ++j) {
      const std::size_t f = static_cast<std::size_t>(i * klen + j);
      Put(out, i, j, (ac[f] + bd[f]) * scale);
    }
}

}  // namespace posenc
