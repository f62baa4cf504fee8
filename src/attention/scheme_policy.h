// The scheme interface of the attention kernels: one policy type per
// positional scheme (src/attention/schemes/<name>.cc), resolved once per
// call and used unchanged by the reference attention (float64 rows), the
// fused forward and the fused backward (float32 rows). The model is
// flash-attention's `alibi.h`: a small policy the kernels call for the
// position terms of a tile, never a switch over schemes inside a kernel.
// Public declarations: include/posenc/scheme.h; the recipe for adding a
// scheme: docs/ARCHITECTURE.md ("Adding a positional scheme").
// What a scheme supplies follows the terms it declares (rotation, bias /
// logit, value; all per query row of a tile): see SchemePolicy's members.
// Internal to src/attention.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attention/call_shape.h"
#include "posenc/attention.h"
#include "posenc/scheme.h"

namespace posenc::attention_internal {

// One call, as a scheme sees it when it is resolved.
struct SchemeCall {
  Dims dims{};
  AttentionMask mask = AttentionMask::kCausal;
};

// One query row against a run of keys: query row i at position p against
// keys j < nk at positions r_j.
template <typename T>
struct SchemeRow {
  std::int64_t head = 0;               // query head h
  std::int64_t qpos = 0;               // query position p
  const T* q = nullptr;                // query row (rotated for RoPE), D entries
  const std::int64_t* kpos = nullptr;  // key positions, nk entries
  std::int64_t nk = 0;
  const T* k = nullptr;       // key rows (row j at k + j * k_stride); reference only,
  std::int64_t k_stride = 0;  // null in the fused kernels (their schemes never read k)
};

// Per-worker float64 sums of the gradients of a scheme's trainable tensors,
// one row-major buffer per trainable tensor argument (declaration order).
struct SchemeGradSums {
  std::vector<std::vector<double>> tensors;
};

// A trainable tensor argument of a resolved scheme: its name and the shape
// it was given with (gradients must have the same shape).
struct TrainableTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t Elements() const;
};

class SchemePolicy {
 public:
  explicit SchemePolicy(const SchemeInfo& info) : info_(&info) {}
  virtual ~SchemePolicy() = default;
  SchemePolicy(const SchemePolicy&) = delete;
  SchemePolicy& operator=(const SchemePolicy&) = delete;

  const SchemeInfo& info() const { return *info_; }
  bool Has(SchemeTerm term) const { return info_->Has(term); }
  bool HasLogitTerms() const { return Has(SchemeTerm::kBias) || Has(SchemeTerm::kLogit); }

  // Rotation term (RoPE): the parameters the kernels rotate q and k with
  // before the dot products.
  virtual const RopeParams* rotation() const { return nullptr; }

  // Throws InvalidArgument when the visible pair (p, r) cannot be
  // represented by the scheme's tables (Transformer-XL); reference only.
  virtual void CheckPair(std::int64_t /*p*/, std::int64_t /*r*/) const {}

  // Bias / logit terms: the position terms of the logit of row i,
  //   out[j] = b_h(p, r_j) + scale * c_h(q_i, k_j, p, r_j),  j < nk.
  // Bias schemes write only BiasAt(h, p, r) and get LogitRow, the distance
  // fast path (DistanceOnly / DistanceBias below) and the backward
  // (BiasGradAt, DistanceGrad) derived by SchemeImpl.
  virtual void LogitRow(const SchemeRow<float>& row, float scale, float* out) const;
  virtual void LogitRow(const SchemeRow<double>& row, double scale, double* out) const;

  // True when the bias depends only on (h, r - p) for every query position
  // in [pmin, pmax]; DistanceBias then fills out[t] = b_h(p, p + d0 + t),
  // t < n, for any such p (the bias of a tile as a function of r - p, one
  // value per distance). Bias-only schemes.
  virtual bool DistanceOnly(std::int64_t /*pmin*/, std::int64_t /*pmax*/) const { return false; }
  virtual void DistanceBias(std::int64_t h, std::int64_t pmin, std::int64_t d0, std::int64_t n,
                            float* out) const;
  // Backward of DistanceBias: g[t] = sum of d logit over the pairs with
  // r - p = d0 + t (query positions in [pmin, pmax], DistanceOnly true).
  virtual void DistanceGrad(std::int64_t h, std::int64_t pmin, std::int64_t d0, std::int64_t n,
                            const double* g, SchemeGradSums& sums) const;

  // Value terms: acc[x] += sum_j probs[j] * a(p, r_j)[x], x < Dv.
  virtual void AddValues(const SchemeRow<float>& row, const float* probs, float* acc) const;
  virtual void AddValues(const SchemeRow<double>& row, const double* probs, double* acc) const;
  // dp[j] += dout . a(p, r_j) - delta, the difference rounded once to T.
  virtual void ValueGradRow(const SchemeRow<float>& row, const float* dout, double delta,
                            float* dp) const;
  virtual void ValueGradRow(const SchemeRow<double>& row, const double* dout, double delta,
                            double* dp) const;

  // Backward of the terms of row i: ds[j] = d logit_ij (0 where masked),
  // probs[j] = P_ij, dout = dO_i. Adds scale-weighted content gradients to
  // dq (D entries) and, for terms that read k, to dk rows (like row.k;
  // null in the fused kernels), and the gradients of the scheme's trainable
  // tensors to sums (float64 sums per worker, reduced and stored by
  // StoreSchemeGrads).
  virtual void BackwardRow(const SchemeRow<float>& row, const float* probs, const float* ds,
                           const float* dout, float scale, float* dq, float* dk,
                           SchemeGradSums& sums) const;
  virtual void BackwardRow(const SchemeRow<double>& row, const double* probs, const double* ds,
                           const double* dout, double scale, double* dq, double* dk,
                           SchemeGradSums& sums) const;

  // The trainable tensor arguments as resolved, and zeroed sums for them.
  std::span<const TrainableTensor> trainable() const { return trainable_; }
  SchemeGradSums NewGradSums() const;

 protected:
  // Scheme resolution records each trainable tensor it read.
  void AddTrainable(std::string_view name, const TensorView& view);
  [[noreturn]] void Unsupported(std::string_view what) const;

 private:
  const SchemeInfo* info_;
  std::vector<TrainableTensor> trainable_;
};

// Derives the float and double overloads from the scheme's templates
// (Derived::Logit<T>, BiasAt<T>, Values<T>, ValueGrad<T>, Backward<T>,
// BiasGradAt) so that each term is written once, for both precisions.
template <class Derived>
class SchemeImpl : public SchemePolicy {
 public:
  using SchemePolicy::SchemePolicy;

  void LogitRow(const SchemeRow<float>& r, float s, float* o) const final { ImplLogit(r, s, o); }
  void LogitRow(const SchemeRow<double>& r, double s, double* o) const final { ImplLogit(r, s, o); }
  void DistanceBias(std::int64_t h, std::int64_t pmin, std::int64_t d0, std::int64_t n,
                    float* out) const override {
    if constexpr (requires(const Derived& d) { d.template BiasAt<float>(0, 0, 0); }) {
      for (std::int64_t t = 0; t < n; ++t) {
        out[t] = self().template BiasAt<float>(h, pmin, pmin + d0 + t);
      }
    } else {
      SchemePolicy::DistanceBias(h, pmin, d0, n, out);
    }
  }
  void DistanceGrad(std::int64_t h, std::int64_t pmin, std::int64_t d0, std::int64_t n,
                    const double* g, SchemeGradSums& sums) const override {
    if constexpr (requires(const Derived& d, SchemeGradSums& s) {
                    d.BiasGradAt(0, 0, 0, 0.0, s);
                  }) {
      for (std::int64_t t = 0; t < n; ++t) {
        if (g[t] != 0.0) self().BiasGradAt(h, pmin, pmin + d0 + t, g[t], sums);
      }
    } else {
      SchemePolicy::DistanceGrad(h, pmin, d0, n, g, sums);
    }
  }
  void AddValues(const SchemeRow<float>& r, const float* p, float* a) const final {
    ImplValues(r, p, a);
  }
  void AddValues(const SchemeRow<double>& r, const double* p, double* a) const final {
    ImplValues(r, p, a);
  }
  void ValueGradRow(const SchemeRow<float>& r, const float* g, double d, float* dp) const final {
    ImplValueGrad(r, g, d, dp);
  }
  void ValueGradRow(const SchemeRow<double>& r, const double* g, double d, double* dp) const final {
    ImplValueGrad(r, g, d, dp);
  }
  void BackwardRow(const SchemeRow<float>& r, const float* p, const float* ds, const float* g,
                   float s, float* dq, float* dk, SchemeGradSums& sums) const final {
    ImplBack(r, p, ds, g, s, dq, dk, sums);
  }
  void BackwardRow(const SchemeRow<double>& r, const double* p, const double* ds, const double* g,
                   double s, double* dq, double* dk, SchemeGradSums& sums) const final {
    ImplBack(r, p, ds, g, s, dq, dk, sums);
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }

  template <typename T>
  void ImplLogit(const SchemeRow<T>& r, T scale, T* out) const {
    if constexpr (requires(const Derived& d) { d.template Logit<T>(r, scale, out); }) {
      self().template Logit<T>(r, scale, out);
    } else if constexpr (requires(const Derived& d) { d.template BiasAt<T>(0, 0, 0); }) {
      for (std::int64_t j = 0; j < r.nk; ++j) {
        out[j] = self().template BiasAt<T>(r.head, r.qpos, r.kpos[j]);
      }
    } else {
      SchemePolicy::LogitRow(r, scale, out);
    }
  }
  template <typename T>
  void ImplValues(const SchemeRow<T>& r, const T* p, T* acc) const {
    if constexpr (requires(const Derived& d) { d.template Values<T>(r, p, acc); }) {
      self().template Values<T>(r, p, acc);
    } else {
      SchemePolicy::AddValues(r, p, acc);
    }
  }
  template <typename T>
  void ImplValueGrad(const SchemeRow<T>& r, const T* g, double delta, T* dp) const {
    if constexpr (requires(const Derived& d) { d.template ValueGrad<T>(r, g, delta, dp); }) {
      self().template ValueGrad<T>(r, g, delta, dp);
    } else {
      SchemePolicy::ValueGradRow(r, g, delta, dp);
    }
  }
  template <typename T>
  void ImplBack(const SchemeRow<T>& r, const T* p, const T* ds, const T* g, T scale, T* dq, T* dk,
                SchemeGradSums& sums) const {
    if constexpr (requires(const Derived& d) {
                    d.template Backward<T>(r, p, ds, g, scale, dq, dk, sums);
                  }) {
      self().template Backward<T>(r, p, ds, g, scale, dq, dk, sums);
    } else if constexpr (requires(const Derived& d) { d.BiasGradAt(0, 0, 0, 0.0, sums); }) {
      for (std::int64_t j = 0; j < r.nk; ++j) {
        if (ds[j] != T(0)) self().BiasGradAt(r.head, r.qpos, r.kpos[j], double(ds[j]), sums);
      }
    }
    // Schemes without trainable position terms have no backward of their own.
  }
};

// A registered scheme: its declaration and how to resolve it for a call.
struct SchemeEntry {
  const SchemeInfo& (*info)();
  std::unique_ptr<SchemePolicy> (*resolve)(const SchemeArgs& args, const SchemeCall& call);
  // The attention scale when the caller gives none (null: 1 / sqrt(D)).
  double (*default_scale)(const SchemeArgs& args, std::int64_t head_dim) = nullptr;
};

// Defines the registry entry of scheme NAME (inside namespace
// posenc::attention_internal, in src/attention/schemes/NAME.cc); the
// registry lists NAME once (src/attention/scheme_registry.cc).
#define POSENC_REGISTER_SCHEME(NAME, ...)        \
  const SchemeEntry& SchemeEntry_##NAME() {      \
    static const SchemeEntry entry{__VA_ARGS__}; \
    return entry;                                \
  }

// Reads and validates the named arguments of one scheme against its
// declaration (unknown names, wrong types, missing required tensors);
// messages name "scheme.<scheme>.<argument>".
// "scheme.<scheme>.<arg>" in a fixed buffer (truncated past 95 characters):
// an argument's name for a message without a heap allocation, since a valid
// call builds such names and never uses them (c.h, "Memory").
class ArgName {
 public:
  ArgName(std::string_view scheme, std::string_view arg);
  operator std::string_view() const { return {buf_.data(), size_}; }  // NOLINT: implicit
  operator std::string() const { return {buf_.data(), size_}; }       // NOLINT: implicit
  std::string operator+(std::string_view rest) const {
    return std::string(buf_.data(), size_) + std::string(rest);
  }

 private:
  std::array<char, 96> buf_{};
  std::size_t size_ = 0;
};

class SchemeArgReader {
 public:
  SchemeArgReader(const SchemeInfo& info, const SchemeArgs& args);

  ArgName Name(std::string_view arg) const;              // "scheme.<scheme>.<arg>"
  const TensorView* Tensor(std::string_view arg) const;  // null when absent
  const TensorView& RequiredTensor(std::string_view arg) const;
  double Number(std::string_view arg, double fallback) const;
  std::int64_t Integer(std::string_view arg, std::int64_t fallback) const;
  std::string Text(std::string_view arg, std::string_view fallback) const;
  bool Flag(std::string_view arg, bool fallback) const;
  bool Given(std::string_view arg) const { return args_.Find(arg) != nullptr; }

  // A float64 copy of a tensor argument of exactly `shape`.
  std::vector<double> Table(std::string_view arg, std::initializer_list<std::int64_t> shape) const;

 private:
  const SchemeArgs::Value* Get(std::string_view arg, SchemeArgType type) const;
  const SchemeInfo& info_;
  const SchemeArgs& args_;
};

// Resolves the scheme of `params` for one call: the registered scheme of
// that name with its arguments. Validates the mask against the
// declaration. Throws InvalidArgument naming the argument.
std::unique_ptr<SchemePolicy> ResolveScheme(const PositionScheme& scheme, const SchemeCall& call);

// The attention scale of `scheme` when the call gives none: the scheme's
// own default (DeBERTa: 1 / sqrt(D (1 + #terms))), else 1 / sqrt(D).
double SchemeDefaultScale(const PositionScheme& scheme, std::int64_t head_dim);

// The registered name of a scheme.
std::string_view SchemeName(const PositionScheme& scheme);

// Checks every requested gradient view of the policy's trainable tensors
// (shape of the argument, writable); returns the views (null data: not
// requested), in trainable() order.
std::vector<TensorView> CheckSchemeGrads(const SchemePolicy& policy, const AttentionGrads& grads,
                                         std::vector<std::string>* labels);

// Sums the per-worker sums and stores them into the requested views.
void StoreSchemeGrads(const SchemePolicy& policy, std::span<const SchemeGradSums* const> parts,
                      std::span<const TensorView> views);

}  // namespace posenc::attention_internal
