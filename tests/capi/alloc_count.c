/* Counts heap allocations in the steady state of the C API calls an engine
 * makes per token and layer (c.h, "Memory"): malloc and its relatives are
 * interposed here (the executable's definitions win over libc's for every
 * library in the process, libposenc.so and libstdc++'s operator new
 * included) and forward to glibc's __libc_* entry points. Each call is made
 * a few times first (scratch grows to its size), then ROUNDS more times
 * with counting on; the test fails when any of those allocates. The decode
 * steps run through a posenc_decode_plan, one with a cache that grows by a
 * token every step, one against a paged cache (posenc_decode_plan_run_paged);
 * posenc_attention_decode without a plan reuses the plan the calling thread
 * made for the same params on its first call.
 *
 * usage: posenc_alloc_count MODEL.gguf (a RoPE model: Llama 3.1 8B's) */
#include <malloc.h>
#include <posenc/c.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static atomic_int counting;
static atomic_long allocations;

static void Count(void) {
  if (atomic_load_explicit(&counting, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  }
}
void* malloc(size_t n) {
  Count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  Count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  Count();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t alignment, size_t n) {
  Count();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  Count();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  Count();
  void* p = __libc_memalign(alignment, n);
  if (p == NULL) return 12; /* ENOMEM */
  *out = p;
  return 0;
}

#define CHECK_OK(call)                                                \
  do {                                                                \
    const posenc_status s_ = (call);                                  \
    if (s_ != POSENC_OK) {                                            \
      fprintf(stderr, "%s failed: %s\n", #call, posenc_last_error()); \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

enum { WARMUP = 3, ROUNDS = 50, H = 32, HKV = 8, D = 128, KEYS = 1000, PAGE = 8 };

typedef struct {
  posenc_context* ctx;
  posenc_rope_params rope;         /* the model's: explicit inv_freq (Llama 3 factors) */
  posenc_rope_params rope_default; /* theta only: the default table */
  posenc_tensor q, k_new, k_cache, v_cache, out, lse, cos_sin;
  posenc_positions at;
  posenc_attention_params none, rope_decode, alibi_decode;
  posenc_scheme scheme_rope, scheme_alibi;
  posenc_decode_plan *plan_none, *plan_rope, *plan_alibi;
  posenc_kv_pages pages; /* the same keys as a paged cache, pages in reverse order */
  float* k_data;
  float* v_data;
  int64_t grow; /* keys of the growing-cache case */
  double slopes[H];
} Bench;

typedef void (*Call)(Bench*);
static void RopeQK(Bench* b) {
  CHECK_OK(posenc_rope_apply_qk(b->ctx, &b->rope, &b->q, &b->k_new, POSENC_LAYOUT_BSHD, &b->at,
                                POSENC_DIRECTION_FORWARD, NULL, NULL));
}
static void RopeDefault(Bench* b) {
  CHECK_OK(posenc_rope_apply(b->ctx, &b->rope_default, &b->q, POSENC_LAYOUT_BSHD, &b->at,
                             POSENC_DIRECTION_FORWARD, NULL));
}
static void RopeWithCache(Bench* b) {
  CHECK_OK(posenc_rope_apply_with_cache(b->ctx, &b->rope, &b->q, POSENC_LAYOUT_BSHD, &b->at,
                                        &b->cos_sin, POSENC_DIRECTION_FORWARD, NULL));
}
static void ShiftKeys(Bench* b) {
  CHECK_OK(posenc_rope_shift_keys(b->ctx, &b->rope_default, &b->k_cache, POSENC_LAYOUT_BSHD, 1));
}
static void PlanNone(Bench* b) {
  CHECK_OK(posenc_decode_plan_run(b->ctx, b->plan_none, &b->q, &b->k_cache, &b->v_cache, &b->out,
                                  &b->lse, NULL, NULL));
}
static void PlanRope(Bench* b) {
  CHECK_OK(posenc_decode_plan_run(b->ctx, b->plan_rope, &b->q, &b->k_cache, &b->v_cache, &b->out,
                                  NULL, NULL, NULL));
}
static void PlanAlibi(Bench* b) {
  CHECK_OK(posenc_decode_plan_run(b->ctx, b->plan_alibi, &b->q, &b->k_cache, &b->v_cache, &b->out,
                                  NULL, &b->at, NULL));
}
/* A generation: the cache one token longer at every step (300 -> 400 keys
 * over the warm-up and the counted rounds: chunk counts change on the way). */
static void PlanRopeGrowing(Bench* b) {
  posenc_tensor k = b->k_cache, v = b->v_cache;
  k.shape[1] = v.shape[1] = ++b->grow;
  CHECK_OK(posenc_decode_plan_run(b->ctx, b->plan_rope, &b->q, &k, &v, &b->out, NULL, NULL, NULL));
}
static void PlanRopePaged(Bench* b) {
  CHECK_OK(posenc_decode_plan_run_paged(b->ctx, b->plan_rope, &b->q, &b->pages, &b->out, NULL, NULL,
                                        NULL));
}
static void DecodeNone(Bench* b) {
  CHECK_OK(
      posenc_attention_decode(b->ctx, &b->none, &b->q, &b->k_cache, &b->v_cache, &b->out, &b->lse));
}
static void DecodeRope(Bench* b) {
  CHECK_OK(posenc_attention_decode(b->ctx, &b->rope_decode, &b->q, &b->k_cache, &b->v_cache,
                                   &b->out, NULL));
}
static void DecodeAlibi(Bench* b) {
  CHECK_OK(posenc_attention_decode(b->ctx, &b->alibi_decode, &b->q, &b->k_cache, &b->v_cache,
                                   &b->out, NULL));
}

static long Measure(Bench* b, Call call) {
  for (int i = 0; i < WARMUP; ++i) call(b);
  atomic_store(&allocations, 0);
  atomic_store(&counting, 1);
  for (int i = 0; i < ROUNDS; ++i) call(b);
  atomic_store(&counting, 0);
  return atomic_load(&allocations);
}

static posenc_tensor Tensor(void* data, posenc_dtype dtype, int64_t s, int64_t h, int64_t d) {
  posenc_tensor t;
  const int64_t shape[4] = {1, s, h, d};
  CHECK_OK(posenc_tensor_contiguous(data, dtype, 4, shape, &t));
  return t;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  static Bench b;
  static float q[H * D], k_new[HKV * D], k[KEYS * HKV * D], v[KEYS * HKV * D], out[H * D];
  static float lse[H], cos_sin[4096 * D];
  static double inv_freq[D / 2];
  static int32_t block_table[KEYS / PAGE], seq_len[1] = {KEYS};
  for (size_t i = 0; i < sizeof k / sizeof *k; ++i) {
    k[i] = (float)((i * 7919u) % 1000u) / 1000.0f - 0.5f;
    v[i] = (float)((i * 104729u) % 1000u) / 1000.0f - 0.5f;
  }
  posenc_model_rope m;
  posenc_model_rope_init(&m);
  CHECK_OK(
      posenc_rope_from_config(argv[1], 0, NULL, POSENC_NUMERICS_ACCURATE, &m, inv_freq, D / 2));
  b.rope = m.params;
  posenc_rope_params_init(&b.rope_default);
  b.rope_default.head_dim = D;
  b.rope_default.pairing = POSENC_PAIRING_HALF_SPLIT;
  CHECK_OK(posenc_context_create(2, POSENC_BACKEND_AUTO, &b.ctx));
  b.q = Tensor(q, POSENC_FLOAT32, 1, H, D);
  b.k_new = Tensor(k_new, POSENC_FLOAT32, 1, HKV, D);
  b.k_cache = Tensor(k, POSENC_FLOAT32, KEYS, HKV, D);
  b.v_cache = Tensor(v, POSENC_FLOAT32, KEYS, HKV, D);
  b.out = Tensor(out, POSENC_FLOAT32, 1, H, D);
  const int64_t lse_shape[3] = {1, H, 1}, cs_shape[2] = {4096, D};
  CHECK_OK(posenc_tensor_contiguous(lse, POSENC_FLOAT32, 3, lse_shape, &b.lse));
  CHECK_OK(posenc_tensor_contiguous(cos_sin, POSENC_FLOAT32, 2, cs_shape, &b.cos_sin));
  CHECK_OK(posenc_rope_cos_sin_cache(b.ctx, &b.rope, &b.cos_sin));
  CHECK_OK(posenc_positions_offset(KEYS - 1, &b.at));
  b.k_data = k;
  b.v_data = v;
  posenc_attention_params_init(&b.none);
  posenc_scheme_init(&b.scheme_rope);
  b.scheme_rope.kind = POSENC_SCHEME_ROPE;
  b.scheme_rope.rope = &b.rope;
  b.scheme_rope.rope_keys = POSENC_ROPE_KEYS_PRE_ROTATED;
  b.rope_decode = b.none;
  b.rope_decode.scheme = &b.scheme_rope;
  CHECK_OK(posenc_alibi_slopes(H, 8.0, POSENC_ALIBI_REFERENCE, b.slopes, H));
  posenc_scheme_init(&b.scheme_alibi);
  b.scheme_alibi.kind = POSENC_SCHEME_ALIBI;
  b.scheme_alibi.alibi_slopes = b.slopes;
  b.scheme_alibi.num_alibi_slopes = H;
  b.alibi_decode = b.none;
  b.alibi_decode.scheme = &b.scheme_alibi;
  CHECK_OK(posenc_decode_plan_create(&b.none, H, D, D, &b.plan_none));
  CHECK_OK(posenc_decode_plan_create(&b.rope_decode, H, D, D, &b.plan_rope));
  CHECK_OK(posenc_decode_plan_create(&b.alibi_decode, H, D, D, &b.plan_alibi));
  b.grow = 300;
  posenc_kv_pages_init(&b.pages);
  const int64_t pool_shape[4] = {KEYS / PAGE, PAGE, HKV, D};
  CHECK_OK(posenc_tensor_contiguous(k, POSENC_FLOAT32, 4, pool_shape, &b.pages.k_pages));
  CHECK_OK(posenc_tensor_contiguous(v, POSENC_FLOAT32, 4, pool_shape, &b.pages.v_pages));
  for (int i = 0; i < KEYS / PAGE; ++i) block_table[i] = KEYS / PAGE - 1 - i;
  b.pages.block_table = block_table;
  b.pages.max_pages = KEYS / PAGE;
  b.pages.seq_lens = seq_len;

  const struct {
    const char* name;
    Call call;
    int must_be_zero;
  } cases[] = {{"rope_apply_qk (model inv_freq)", RopeQK, 1},
               {"rope_apply (default table)", RopeDefault, 1},
               {"rope_apply_with_cache", RopeWithCache, 1},
               {"rope_shift_keys (1000 keys)", ShiftKeys, 1},
               {"decode_plan_run none + lse", PlanNone, 1},
               {"decode_plan_run rope (pre-rotated keys)", PlanRope, 1},
               {"decode_plan_run alibi (explicit positions)", PlanAlibi, 1},
               {"decode_plan_run rope, cache growing", PlanRopeGrowing, 1},
               {"decode_plan_run_paged rope (pages of 8)", PlanRopePaged, 1},
               {"attention_decode none + lse (no plan)", DecodeNone, 1},
               {"attention_decode rope (no plan)", DecodeRope, 1},
               {"attention_decode alibi (no plan)", DecodeAlibi, 1}};
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    const long n = Measure(&b, cases[i].call);
    const int bad = cases[i].must_be_zero && n != 0;
    printf("%-44s %6.2f allocations per call (%d calls after %d warm-up)%s\n", cases[i].name,
           (double)n / ROUNDS, ROUNDS, WARMUP, bad ? "  FAIL: must be 0" : "");
    failed |= bad;
  }
  /* posenc_context_trim hands the kept scratch back: the heap in use drops
   * by at least the decode partials (1 MiB: 64 chunks x 32 heads x 128
   * floats), the next call allocates again, and the one after nothing. */
  const struct mallinfo2 before = mallinfo2();
  CHECK_OK(posenc_context_trim(b.ctx));
  const struct mallinfo2 after = mallinfo2();
  const double freed_mib =
      ((double)(before.uordblks + before.hblkhd) - (double)(after.uordblks + after.hblkhd)) /
      1048576.0;
  atomic_store(&allocations, 0);
  atomic_store(&counting, 1);
  PlanRope(&b);
  const long first = atomic_load(&allocations);
  atomic_store(&allocations, 0);
  PlanRope(&b);
  atomic_store(&counting, 0);
  const long second = atomic_load(&allocations);
  printf(
      "posenc_context_trim: %.2f MiB freed; the next plan run allocates %ld blocks, the one "
      "after %ld\n",
      freed_mib, first, second);
  if (freed_mib < 1.0 || first == 0 || second != 0) {
    printf("FAIL: trim must free >= 1 MiB, and only the first call after it may allocate\n");
    failed = 1;
  }
  posenc_decode_plan_destroy(b.plan_none);
  posenc_decode_plan_destroy(b.plan_rope);
  posenc_decode_plan_destroy(b.plan_alibi);
  posenc_context_destroy(b.ctx);
  return failed;
}
