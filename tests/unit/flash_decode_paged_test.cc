// Decode against a paged KV cache (FlashAttentionDecodePaged: a block table
// of page ids and a length per sequence) against the dense decode
// (FlashAttentionDecode with the same plan) on the same keys: bit-identical
// for one sequence with pages of 64 or 128 tokens, shuffled page ids and
// poison (NaN) in every page slot the sequence does not use; within float32
// rounding of each sequence's own dense decode for sequences of different
// lengths in pages of 5, 16 and 64 tokens, an HND pool (permuted strides),
// every fused scheme and float32 and bfloat16 pools; the same bits for 1
// and 2 threads; and a clear error for every bad table entry or shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
#include "posenc/t5.h"

namespace posenc {
namespace {

using Index = std::int64_t;

float Value(Index i, float scale) {
  return std::sin(static_cast<float>(i) * 0.37f + scale) * (1.0f + scale);
}

// The schemes every case runs through one plan each.
struct SchemeCase {
  std::string label;
  AttentionParams params;
  FlashAttentionOptions options;
};

// `t5`: the T5 scheme's table (the scheme views it; filled here).
std::vector<SchemeCase> Schemes(Index heads, Index head_dim, T5BiasTable& t5) {
  std::vector<SchemeCase> out;
  out.push_back({"none", AttentionParams{}, {}});
  AlibiParams alibi;
  alibi.num_heads = heads;
  SchemeCase a{"alibi", AttentionParams{}, {}};
  a.params.scheme = AlibiScheme(AlibiSlopes(alibi));
  out.push_back(a);
  RopeParams rope;
  rope.head_dim = head_dim;
  rope.theta = 500.0;
  for (const FlashRopeKeys keys : {FlashRopeKeys::kRotate, FlashRopeKeys::kPreRotated}) {
    SchemeCase r{
        keys == FlashRopeKeys::kRotate ? "rope" : "rope pre-rotated", AttentionParams{}, {}};
    r.params.scheme = RopeScheme(rope);
    r.options.rope_keys = keys;
    out.push_back(r);
  }
  for (Index i = 0; i < t5.num_buckets() * heads; ++i) t5.data()[i] = Value(i, 0.3f) * 0.5f;
  SchemeCase t{"t5", AttentionParams{}, {}};
  t.params.scheme = T5Scheme(t5);
  out.push_back(t);
  return out;
}

// A pool of pages [num_pages, page_size, Hkv, dim] (or HND in memory) in
// float32 or bfloat16, poisoned with NaN, and the sequences' keys written
// into the pages of a shuffled block table.
struct Pool {
  Index num_pages = 0, page_size = 0, hkv = 0, dim = 0, max_pages = 0;
  bool hnd = false;
  DType dtype = DType::kFloat32;
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;
  std::vector<std::int32_t> table;

  Pool(Index pages, Index ps, Index kv_heads, Index d, Index max_per_seq, Index batch, DType type,
       bool hnd_layout, unsigned seed)
      : num_pages(pages),
        page_size(ps),
        hkv(kv_heads),
        dim(d),
        max_pages(max_per_seq),
        hnd(hnd_layout),
        dtype(type) {
    const Index n = pages * ps * kv_heads * d;
    if (dtype == DType::kFloat32) {
      f32.assign(static_cast<std::size_t>(n), std::nanf(""));
    } else {
      bf16.assign(static_cast<std::size_t>(n), 0x7FC0);  // NaN
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    table.assign(static_cast<std::size_t>(batch * max_per_seq), -1);  // unused entries: -1
    for (std::size_t i = 0; i < table.size() && i < ids.size(); ++i) table[i] = ids[i];
  }
  Index Offset(Index page, Index slot, Index h, Index x) const {
    return hnd ? ((page * hkv + h) * page_size + slot) * dim + x
               : ((page * page_size + slot) * hkv + h) * dim + x;
  }
  void Set(Index b, Index j, Index h, Index x, float value) {
    const Index page = table[static_cast<std::size_t>(b * max_pages + j / page_size)];
    const auto at = static_cast<std::size_t>(Offset(page, j % page_size, h, x));
    if (dtype == DType::kFloat32) {
      f32[at] = value;
    } else {
      bf16[at] = FloatToBF16(value).bits;
    }
  }
  TensorView View() {
    void* data = dtype == DType::kFloat32 ? static_cast<void*>(f32.data()) : bf16.data();
    TensorView v = TensorView::Contiguous(data, dtype, {num_pages, page_size, hkv, dim});
    if (hnd) v.strides = {page_size * hkv * dim, dim, page_size * dim, 1};
    return v;
  }
};

// Key / value element of sequence b (its own data, independent of paging).
float KeyAt(Index b, Index j, Index h, Index x) {
  return Value(((b * 7 + j) * 3 + h) * 64 + x, 0.1f);
}
float ValAt(Index b, Index j, Index h, Index x) {
  return Value(((b * 5 + j) * 3 + h) * 64 + x, -0.2f);
}

struct PagedCase {
  Index batch, sq, heads, hkv, dim, page_size;
  std::vector<std::int32_t> lens;
  DType dtype = DType::kFloat32;
  bool hnd = false;
};

// Runs every scheme on the paged cache and on each sequence's dense cache;
// `exact`: bit-identical, else within float32 rounding.
void Check(const PagedCase& s, bool exact) {
  const Index max_len = *std::max_element(s.lens.begin(), s.lens.end());
  const Index max_pages = (max_len + s.page_size - 1) / s.page_size;
  const Index num_pages = s.batch * max_pages + 3;  // spare pages stay poisoned
  Pool kp(num_pages, s.page_size, s.hkv, s.dim, max_pages, s.batch, s.dtype, s.hnd, 7);
  Pool vp(num_pages, s.page_size, s.hkv, s.dim, max_pages, s.batch, s.dtype, s.hnd, 7);
  for (Index b = 0; b < s.batch; ++b) {
    for (Index j = 0; j < s.lens[static_cast<std::size_t>(b)]; ++j) {
      for (Index h = 0; h < s.hkv; ++h) {
        for (Index x = 0; x < s.dim; ++x) {
          kp.Set(b, j, h, x, KeyAt(b, j, h, x));
          vp.Set(b, j, h, x, ValAt(b, j, h, x));
        }
      }
    }
  }
  std::vector<float> q(static_cast<std::size_t>(s.batch * s.sq * s.heads * s.dim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = Value(static_cast<Index>(i), 0.7f);
  const TensorView qv =
      TensorView::Contiguous(q.data(), DType::kFloat32, {s.batch, s.sq, s.heads, s.dim});
  PagedKVCache cache;
  cache.k_pages = kp.View();
  cache.v_pages = vp.View();
  cache.block_table = kp.table.data();
  cache.max_pages = max_pages;
  cache.seq_lens = s.lens.data();
  T5BiasTable t5{T5BucketParams{}, s.heads};
  for (const SchemeCase& c : Schemes(s.heads, s.dim, t5)) {
    SCOPED_TRACE(c.label);
    const PreparedDecode plan(c.params, s.heads, s.dim, s.dim, c.options);
    std::vector<float> out(q.size()), lse(static_cast<std::size_t>(s.batch * s.heads * s.sq));
    FlashAttentionDecodePaged(
        plan, qv, cache,
        TensorView::Contiguous(out.data(), DType::kFloat32, {s.batch, s.sq, s.heads, s.dim}),
        TensorView::Contiguous(lse.data(), DType::kFloat32, {s.batch, s.heads, s.sq}), std::nullopt,
        std::nullopt, Context(2));
    // The same bits on one thread.
    std::vector<float> out1(out.size());
    FlashAttentionDecodePaged(
        plan, qv, cache,
        TensorView::Contiguous(out1.data(), DType::kFloat32, {s.batch, s.sq, s.heads, s.dim}),
        TensorView{}, std::nullopt, std::nullopt, Context(1));
    EXPECT_EQ(std::memcmp(out.data(), out1.data(), out.size() * sizeof(float)), 0);
    for (Index b = 0; b < s.batch; ++b) {
      const Index len = s.lens[static_cast<std::size_t>(b)];
      // The dense cache in the pool's dtype (the same kernels' paths).
      const std::size_t n = static_cast<std::size_t>(len * s.hkv * s.dim);
      std::vector<float> kd(n), vd(n);
      std::vector<std::uint16_t> kd16(n), vd16(n);
      for (Index j = 0; j < len; ++j) {
        for (Index h = 0; h < s.hkv; ++h) {
          for (Index x = 0; x < s.dim; ++x) {
            const auto at = static_cast<std::size_t>((j * s.hkv + h) * s.dim + x);
            kd[at] = KeyAt(b, j, h, x);
            vd[at] = ValAt(b, j, h, x);
            kd16[at] = FloatToBF16(kd[at]).bits;
            vd16[at] = FloatToBF16(vd[at]).bits;
          }
        }
      }
      const bool f32 = s.dtype == DType::kFloat32;
      const TensorView kdv = TensorView::Contiguous(
          f32 ? static_cast<void*>(kd.data()) : kd16.data(), s.dtype, {1, len, s.hkv, s.dim});
      const TensorView vdv = TensorView::Contiguous(
          f32 ? static_cast<void*>(vd.data()) : vd16.data(), s.dtype, {1, len, s.hkv, s.dim});
      const Index per_row = s.sq * s.heads * s.dim;
      std::vector<float> ref(static_cast<std::size_t>(per_row)),
          ref_lse(static_cast<std::size_t>(s.heads * s.sq));
      FlashAttentionDecode(
          plan,
          TensorView::Contiguous(q.data() + b * per_row, DType::kFloat32,
                                 {1, s.sq, s.heads, s.dim}),
          kdv, vdv, TensorView::Contiguous(ref.data(), DType::kFloat32, {1, s.sq, s.heads, s.dim}),
          TensorView::Contiguous(ref_lse.data(), DType::kFloat32, {1, s.heads, s.sq}), std::nullopt,
          std::nullopt, Context(2));
      for (Index i = 0; i < per_row; ++i) {
        const float got = out[static_cast<std::size_t>(b * per_row + i)];
        const float want = ref[static_cast<std::size_t>(i)];
        ASSERT_TRUE(std::isfinite(got)) << "b " << b << " i " << i;
        if (exact) {
          ASSERT_EQ(got, want) << "b " << b << " i " << i;
        } else {
          ASSERT_NEAR(got, want, 2e-6f * (1.0f + std::fabs(want))) << "b " << b << " i " << i;
        }
      }
      for (Index i = 0; i < s.heads * s.sq; ++i) {
        const float got = lse[static_cast<std::size_t>(b * s.heads * s.sq + i)];
        const float want = ref_lse[static_cast<std::size_t>(i)];
        if (exact) {
          ASSERT_EQ(got, want);
        } else {
          ASSERT_NEAR(got, want, 2e-6f * (1.0f + std::fabs(want)));
        }
      }
    }
  }
}

// One sequence, pages of 64 and 128 tokens: blocks as in the dense cache,
// so the same bits; float32 and bfloat16 pools; 1 and 2 new tokens.
TEST(FlashAttentionDecodePaged, OneSequenceBitIdenticalToDense) {
  for (const Index ps : {64, 128}) {
    for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (const Index sq : {1, 2}) {
        SCOPED_TRACE("page " + std::to_string(ps) + " " + std::string(DTypeName(dtype)) + " sq " +
                     std::to_string(sq));
        Check(PagedCase{1, sq, 8, 2, 64, ps, {1500}, dtype, false}, /*exact=*/true);
      }
    }
  }
}

// Sequences of different lengths (continuous batching) in small and odd
// pages, NHD and HND pools.
TEST(FlashAttentionDecodePaged, SequencesOfDifferentLengths) {
  for (const Index ps : {5, 16, 64}) {
    for (const bool hnd : {false, true}) {
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE("page " + std::to_string(ps) + (hnd ? " hnd " : " nhd ") +
                     std::string(DTypeName(dtype)));
        Check(PagedCase{3, 2, 4, 2, 32, ps, {700, 37, 301}, dtype, hnd}, /*exact=*/false);
      }
    }
  }
}

// Every bad table entry and shape: one InvalidArgument naming it.
TEST(FlashAttentionDecodePaged, BadInput) {
  const Index heads = 4, hkv = 2, dim = 16, ps = 8, pages = 6;
  std::vector<float> kpool(pages * ps * hkv * dim, 0.5f), vpool(kpool.size(), 0.25f);
  std::vector<float> q(2 * heads * dim, 0.1f), out(q.size());
  std::vector<std::int32_t> table = {0, 1, -1, 2, 3, 4};  // 3 entries per row; row 0 uses 2
  std::vector<std::int32_t> lens = {10, 20};
  const TensorView qv = TensorView::Contiguous(q.data(), DType::kFloat32, {2, 1, heads, dim});
  const TensorView ov = TensorView::Contiguous(out.data(), DType::kFloat32, {2, 1, heads, dim});
  const auto pool = [&](std::vector<float>& p, Index d) {
    return TensorView::Contiguous(p.data(), DType::kFloat32, {pages, ps, hkv, d});
  };
  PagedKVCache good;
  good.k_pages = pool(kpool, dim);
  good.v_pages = pool(vpool, dim);
  good.block_table = table.data();
  good.max_pages = 3;
  good.seq_lens = lens.data();
  const PreparedDecode plan(AttentionParams{}, heads, dim, dim);
  // The unused entry (-1 past row 0's 2 pages) is never read: fine.
  EXPECT_NO_THROW(
      FlashAttentionDecodePaged(plan, qv, good, ov, TensorView{}, std::nullopt, std::nullopt));
  EXPECT_FLOAT_EQ(out[0], 0.25f);  // every value is 0.25
  const auto expect = [&](PagedKVCache c, const std::vector<std::string>& needles) {
    try {
      FlashAttentionDecodePaged(plan, qv, c, ov, TensorView{}, std::nullopt, std::nullopt);
      ADD_FAILURE() << "no error for " << needles[0];
    } catch (const InvalidArgument& e) {
      for (const std::string& n : needles) {
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
      }
    }
  };
  std::vector<std::int32_t> bad = table;
  bad[4] = 6;
  PagedKVCache c = good;
  c.block_table = bad.data();
  expect(c, {"cache.block_table[1][1]", "got 6", "[0, 6)"});
  bad = table;
  bad[1] = -3;
  c.block_table = bad.data();
  expect(c, {"cache.block_table[0][1]", "got -3"});
  std::vector<std::int32_t> bad_lens = {0, 20};
  c = good;
  c.seq_lens = bad_lens.data();
  expect(c, {"cache.seq_lens[0]", "got 0", "[1, 24]"});
  bad_lens = {10, 25};
  c.seq_lens = bad_lens.data();
  expect(c, {"cache.seq_lens[1]", "got 25"});
  c = good;
  c.block_table = nullptr;
  expect(c, {"cache.block_table", "null"});
  c = good;
  c.seq_lens = nullptr;
  expect(c, {"cache.seq_lens", "null"});
  c = good;
  c.max_pages = 0;
  expect(c, {"cache.max_pages", "got 0"});
  std::vector<float> small(kpool.size() / 2);
  c = good;
  c.v_pages = TensorView::Contiguous(small.data(), DType::kFloat32, {pages, ps / 2, hkv, dim});
  expect(c, {"cache.v_pages page_size", "got 4", "(8)"});
  c = good;
  c.k_pages = TensorView::Contiguous(kpool.data(), DType::kFloat32, {pages, ps, hkv * 2, dim / 2});
  expect(c, {"cache.k_pages head_dim", "got 8"});
  c = good;
  c.k_pages = TensorView::Contiguous(kpool.data(), DType::kFloat32, {pages, ps, 3, 16});
  c.v_pages = TensorView::Contiguous(vpool.data(), DType::kFloat32, {pages, ps, 3, 16});
  expect(c, {"cache.k_pages heads", "got 3", "a divisor of q's heads (4"});
  c = good;
  c.k_pages.data = nullptr;
  expect(c, {"cache.k_pages"});
  // The output may not overlap the pool.
  try {
    FlashAttentionDecodePaged(
        plan, qv, good, TensorView::Contiguous(kpool.data(), DType::kFloat32, {2, 1, heads, dim}),
        TensorView{}, std::nullopt, std::nullopt);
    ADD_FAILURE() << "no error for out overlapping k_pages";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("out"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc
