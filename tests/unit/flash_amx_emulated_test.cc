// The AMX kernels (kernels/simd/flash_amx.cc: the bfloat16 logits;
// compute_x86.cc: the AMX compute ceiling) on every x86-64 machine, AMX or
// not: the kernels' own sources are compiled into this test
// with the tile intrinsics replaced by the software model of amx_emulation.h
// (the Intel SDM's pseudo-code of LDTILECFG, TILELOADD, TILESTORED, TILEZERO,
// TDPBF16PS, TILERELEASE). What this checks, and flash_kernels_test.cc's
// FlashBf16Logits.AmxTiles can only check on a CPU with AMX: the tile
// configuration, the operand layouts (q pairs as A rows, k^T pairs as VNNI B
// rows, their strides), the blocking (32 keys in two C tiles, the 16-key
// tail, the zero-padded copy for a tail of fewer than 16 query rows) and the
// result against float64 with the 2x rule; under ASan, that no tile load or
// store leaves the buffers; and that the ceiling's loop does the multiply-adds
// it counts. What it cannot check: the hardware itself, the Linux permission
// request (x86_features.cc) and speed.
#if defined(__x86_64__)
#include "amx_emulation.h"
// The kernels under their own names would clash with the library's copies
// (which run the real instructions): rename the external symbols defined.
#define FlashTileLogitsAmx EmulatedFlashTileLogitsAmx
#define LoadAmxTileConfig EmulatedLoadAmxTileConfig
#define ComputeAmxBf16 EmulatedComputeAmxBf16
#define ComputeBf16Dot EmulatedComputeBf16Dot  // AVX512_BF16: compiled, never called here
#define g_compute_sink g_emulated_compute_sink
#include "kernels/simd/compute_x86.cc"
#include "kernels/simd/flash_amx.cc"
#undef FlashTileLogitsAmx
#undef LoadAmxTileConfig
#undef ComputeAmxBf16
#undef ComputeBf16Dot
#undef g_compute_sink
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "flash_kernels_fixture.h"
#include "posenc/dtype.h"

namespace posenc {
namespace {

using test::Bf16Tile;
using test::Index;

#if defined(__x86_64__)
namespace emu = amx_emulation;
namespace ks = kernels::simd;

// The model itself, on values small enough to check by hand: one A row
// [1, 2 | 3, 4] (two pairs) against B rows [5, 6] / [7, 8] for column 0 and
// [0.5, 0 ] / [-1, 0.25] for column 1: C[0][0] = 1*5 + 2*6 + 3*7 + 4*8 = 70,
// C[0][1] = 0.5 - 3 + 1 = -1.5; a denormal input reads as zero.
TEST(AmxEmulation, DotProductFollowsThePseudoCode) {
  emu::ResetErrors();
  ks::AmxTileConfig config;
  config.rows[0] = 1, config.colsb[0] = 8;  // C: 1 x 2 float32
  config.rows[1] = 1, config.colsb[1] = 8;  // A: 1 row of 2 pairs
  config.rows[2] = 2, config.colsb[2] = 8;  // B: 2 rows (pairs) x 2 columns
  for (int t = 3; t < 8; ++t) config.rows[t] = 0, config.colsb[t] = 0;
  _tile_loadconfig(&config);
  const std::uint16_t a[4] = {FloatToBF16(1).bits, FloatToBF16(2).bits, FloatToBF16(3).bits,
                              FloatToBF16(4).bits};
  const std::uint16_t b[8] = {
      FloatToBF16(5).bits, FloatToBF16(6).bits, FloatToBF16(0.5f).bits, 0,
      FloatToBF16(7).bits, FloatToBF16(8).bits, FloatToBF16(-1).bits,   FloatToBF16(0.25f).bits};
  float c[2] = {NAN, NAN};
  _tile_zero(0);
  _tile_loadd(1, a, 8);
  _tile_loadd(2, b, 8);
  _tile_dpbf16ps(0, 1, 2);
  _tile_stored(0, c, 8);
  EXPECT_EQ(c[0], 70.0f);
  EXPECT_EQ(c[1], -1.5f);
  const std::uint16_t denormal_a[4] = {1, 0, 0, 0};  // the smallest bfloat16 denormal
  const std::uint16_t big_b[8] = {
      FloatToBF16(1e30f).bits, 0, FloatToBF16(1e30f).bits, 0, 0, 0, 0, 0};
  _tile_zero(0);
  _tile_loadd(1, denormal_a, 8);
  _tile_loadd(2, big_b, 8);
  _tile_dpbf16ps(0, 1, 2);
  _tile_stored(0, c, 8);
  EXPECT_EQ(c[0], 0.0f);  // DAZ: 2^-133 * 1e30 would be 1.1e-10 without it
  EXPECT_EQ(emu::Errors(), 0) << emu::LastError();
  _tile_release();
  _tile_zero(0);  // after TILERELEASE: no configuration
  EXPECT_EQ(emu::Errors(), 1);
  EXPECT_NE(emu::LastError().find("no tile configuration"), std::string::npos);
  emu::ResetErrors();
}

TEST(AmxEmulation, MisuseIsReported) {
  emu::ResetErrors();
  ks::EmulatedLoadAmxTileConfig();  // 8 tiles of 16 x 64 bytes
  _tile_dpbf16ps(0, 0, 1);          // dst == a
  EXPECT_EQ(emu::Errors(), 1);
  ks::AmxTileConfig config;
  config.rows[2] = 8;  // B with 8 rows: A's 64 bytes need 16
  _tile_loadconfig(&config);
  _tile_dpbf16ps(0, 1, 2);
  EXPECT_EQ(emu::Errors(), 2);
  EXPECT_NE(emu::LastError().find("shapes"), std::string::npos);
  ks::AmxTileConfig reserved;
  reserved.reserved[3] = 1;  // byte 5: reserved, must be zero
  _tile_loadconfig(&reserved);
  EXPECT_EQ(emu::Errors(), 3);
  EXPECT_NE(emu::LastError().find("reserved byte 5"), std::string::npos);
  _tile_zero(0);  // the bad configuration was not loaded
  EXPECT_EQ(emu::Errors(), 4);
  _tile_release();
  emu::ResetErrors();
}

// The kernel: query rows 1 (tail copy only), 16 (one full block), 21 (block
// + tail), 64; keys 53 (ld 64: two 32-key steps), 40 (ld 48: the 16-key
// tail), 16 (ld 16: the tail alone); head sizes 32 and 128 (1 and 4 A tiles
// per C tile). Output columns past nk stay as the kernel wrote them (zero
// keys) and are not compared; columns past ld are never written.
TEST(AmxEmulation, FlashTileLogitsAmxMatchesFloat64) {
  for (const Index nq : {1, 16, 21, 64}) {
    for (const Index nk : {53, 40, 16}) {
      for (const Index dim : {32, 128}) {
        emu::ResetErrors();
        const Bf16Tile t(nq, nk, dim);
        // One guard row past the tile: the kernel writes nq rows of ld floats.
        std::vector<float> s((nq + 1) * t.ld, NAN);
        ks::EmulatedFlashTileLogitsAmx(t.q_pairs.data(), t.ldq, t.kt_pairs.data(), nq, dim, t.ld,
                                       s.data());
        ASSERT_EQ(emu::Errors(), 0) << emu::LastError();
        t.Check(s, "emulated AMX logits");
        for (Index i = 0; i < nq; ++i) {
          for (Index j = nk; j < t.ld; ++j) EXPECT_EQ(s[i * t.ld + j], 0.0f) << i << ", " << j;
        }
        for (Index j = 0; j < t.ld; ++j) EXPECT_TRUE(std::isnan(s[nq * t.ld + j])) << j;
        // The kernel leaves the tiles released (TILERELEASE), as a thread
        // that goes on to other work must.
        _tile_zero(0);
        EXPECT_EQ(emu::Errors(), 1) << "tiles still configured after the call";
      }
    }
  }
  emu::ResetErrors();
}

// The ceiling's loop: 4 TDPBF16PS per iteration, each 16 x 16 x 32
// multiply-adds (what it returns, as flops); C tile 0 accumulates 32 products
// 1.0 * 2^-20 per iteration, which the kernel stores into the sink.
TEST(AmxEmulation, ComputeCeilingDoesTheWorkItCounts) {
  emu::ResetErrors();
  for (const std::int64_t iterations : {1, 7}) {
    EXPECT_EQ(ks::EmulatedComputeAmxBf16(iterations), 2.0 * iterations * 4 * 16 * 16 * 32);
    EXPECT_EQ(ks::g_emulated_compute_sink, std::ldexp(32.0f * iterations, -20)) << iterations;
    ASSERT_EQ(emu::Errors(), 0) << emu::LastError();
  }
}
#else
TEST(AmxEmulation, NotX86) { GTEST_SKIP() << "AMX exists on x86-64 only"; }
#endif

}  // namespace
}  // namespace posenc
