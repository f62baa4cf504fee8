/* A minimal decoding engine on posenc's C API (posenc/c.h), the way an
 * inference engine uses it: load a model's positional settings from a GGUF
 * or HF config.json, keep a KV cache the engine owns, and for each new token
 *   1. append its k and v to the cache, rotating k in place at its
 *      position (RoPE models; posenc_rope_apply);
 *   2. attend over the whole cache with a decode plan prepared once
 *      (posenc_decode_plan_create / _run: no allocation per step; RoPE: the
 *      kernel rotates q, the cached keys are pre-rotated; or ALiBi slopes
 *      from the model);
 *   3. when the cache is full, evict its oldest half and re-rotate the kept
 *      keys to their new positions (posenc_rope_shift_keys: a context shift).
 * The model's weights are not needed: q, k and v are deterministic
 * pseudo-random vectors. Every step is checked against attention written out
 * here in double precision from the unrotated vectors, so the example is also
 * a test (tests/CMakeLists.txt runs it on a Llama 3.1 GGUF, a Qwen2.5 YaRN
 * config.json and a BLOOM ALiBi GGUF).
 *
 * usage: posenc_engine MODEL [TOKENS [CACHE [THREADS]]]
 *   TOKENS tokens to decode (default 48), CACHE the cache capacity in tokens
 *   (default 32: a context shift happens when TOKENS > CACHE), THREADS the
 *   context's threads (default 2). Exit status 0 when every step matches. */
#include <math.h>
#include <posenc/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_OK(call)                                                                            \
  do {                                                                                            \
    const posenc_status s_ = (call);                                                              \
    if (s_ != POSENC_OK) {                                                                        \
      fprintf(stderr, "%s failed: %s: %s\n", #call, posenc_status_name(s_), posenc_last_error()); \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

/* Deterministic values in (-1, 1) (SplitMix64). */
static double Uniform(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

typedef struct {
  int64_t heads, kv_heads, head_dim, capacity;
  int is_alibi;
  posenc_rope_params rope; /* RoPE models */
  double* inv_freq;        /* rotary_dim / 2 */
  double* slopes;          /* ALiBi models: one per head */
  /* The cache (owned here): rotated keys as posenc reads them, and the
   * unrotated keys and values the reference recomputes from. */
  float *k, *v;
  double *k_raw, *v_raw;
  int64_t len;
} Engine;

/* x rotated at position p in double (the model's pairing and frequencies). */
static void RotateRef(const Engine* e, const double* x, double p, double* out) {
  const int64_t d = e->head_dim, r = e->rope.rotary_dim == 0 ? d : e->rope.rotary_dim;
  memcpy(out, x, (size_t)d * sizeof(double));
  for (int64_t j = 0; j < r / 2; ++j) {
    const double a = p * e->inv_freq[j], c = cos(a) * e->rope.attention_factor,
                 s = sin(a) * e->rope.attention_factor;
    const int64_t i0 = e->rope.pairing == POSENC_PAIRING_INTERLEAVED ? 2 * j : j;
    const int64_t i1 = e->rope.pairing == POSENC_PAIRING_INTERLEAVED ? 2 * j + 1 : j + r / 2;
    out[i0] = x[i0] * c - x[i1] * s;
    out[i1] = x[i1] * c + x[i0] * s;
  }
}

/* Attention of one query token at position `pos` (the last cache slot) over
 * the cache, in double, from the unrotated vectors; returns the largest
 * difference to `got` [H, D]. */
static double Reference(const Engine* e, const double* q_raw, int64_t pos, const float* got) {
  const int64_t h = e->heads, d = e->head_dim, g = e->heads / e->kv_heads, n = e->len;
  double* qr = malloc((size_t)d * sizeof(double));
  double* kr = malloc((size_t)d * sizeof(double));
  double* s = malloc((size_t)n * sizeof(double));
  double worst = 0.0;
  for (int64_t hq = 0; hq < h; ++hq) {
    const int64_t hk = hq / g;
    if (!e->is_alibi) RotateRef(e, q_raw + hq * d, (double)pos, qr);
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const double* kj = e->k_raw + (j * e->kv_heads + hk) * d;
      double dot = 0.0;
      if (e->is_alibi) {
        for (int64_t x = 0; x < d; ++x) dot += q_raw[hq * d + x] * kj[x];
      } else {
        RotateRef(e, kj, (double)j, kr);
        for (int64_t x = 0; x < d; ++x) dot += qr[x] * kr[x];
      }
      s[j] = dot / sqrt((double)d) - (e->is_alibi ? e->slopes[hq] * (double)(pos - j) : 0.0);
      if (s[j] > mx) mx = s[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = exp(s[j] - mx));
    for (int64_t x = 0; x < d; ++x) {
      double o = 0.0;
      for (int64_t j = 0; j < n; ++j) o += s[j] * e->v_raw[(j * e->kv_heads + hk) * d + x];
      const double diff = fabs(o / sum - (double)got[hq * d + x]);
      if (diff > worst) worst = diff;
    }
  }
  free(qr);
  free(kr);
  free(s);
  return worst;
}

/* A view of the first `rows` cache slots [1, rows, Hkv, D] of a cache of
 * capacity `capacity` (its strides stay those of the full cache). */
static posenc_tensor CacheView(float* data, const Engine* e, int64_t rows) {
  const int64_t shape[4] = {1, rows, e->kv_heads, e->head_dim};
  const int64_t strides[4] = {e->capacity * e->kv_heads * e->head_dim, e->kv_heads * e->head_dim,
                              e->head_dim, 1};
  posenc_tensor t;
  CHECK_OK(posenc_tensor_strided(data, POSENC_FLOAT32, 4, shape, strides, &t));
  return t;
}

static void Load(Engine* e, const char* path) {
  posenc_model_rope m;
  posenc_model_rope_init(&m);
  /* First call: the sizes; second: the frequencies into our buffer. */
  CHECK_OK(posenc_rope_from_config(path, 0, NULL, POSENC_NUMERICS_ACCURATE, &m, NULL, 0));
  e->heads = m.num_heads;
  e->kv_heads = m.num_kv_heads;
  e->is_alibi = m.is_alibi;
  if (e->is_alibi) {
    e->head_dim = m.head_dim;
    e->slopes = malloc((size_t)e->heads * sizeof(double));
    CHECK_OK(posenc_alibi_slopes(e->heads, m.alibi_max_bias, POSENC_ALIBI_REFERENCE, e->slopes,
                                 e->heads));
    printf("%s: %s, ALiBi, %lld heads (%lld kv), head_dim %lld\n", path, m.model_type,
           (long long)e->heads, (long long)e->kv_heads, (long long)e->head_dim);
    return;
  }
  e->inv_freq = malloc((size_t)m.params.inv_freq_count * sizeof(double));
  CHECK_OK(posenc_rope_from_config(path, 0, NULL, POSENC_NUMERICS_ACCURATE, &m, e->inv_freq,
                                   m.params.inv_freq_count));
  e->rope = m.params; /* inv_freq points at e->inv_freq */
  e->head_dim = m.params.head_dim;
  printf(
      "%s: %s, RoPE %s (%s pairing, attention factor %.4f), %lld heads (%lld kv), "
      "head_dim %lld\n",
      path, m.model_type, m.rope_type,
      e->rope.pairing == POSENC_PAIRING_INTERLEAVED ? "interleaved" : "half-split",
      e->rope.attention_factor, (long long)e->heads, (long long)e->kv_heads,
      (long long)e->head_dim);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [TOKENS [CACHE [THREADS]]]\n", argv[0]);
    return 2;
  }
  const int64_t tokens = argc > 2 ? atoll(argv[2]) : 48;
  Engine e;
  memset(&e, 0, sizeof e);
  e.capacity = argc > 3 ? atoll(argv[3]) : 32;
  const int threads = argc > 4 ? atoi(argv[4]) : 2;
  if (tokens < 1 || e.capacity < 2) {
    fprintf(stderr, "TOKENS must be >= 1 and CACHE >= 2\n");
    return 2;
  }
  printf("posenc %s\n", posenc_version());
  Load(&e, argv[1]);
  const int64_t h = e.heads, hkv = e.kv_heads, d = e.head_dim;
  const size_t slot = (size_t)(hkv * d);
  e.k = calloc((size_t)e.capacity * slot, sizeof(float));
  e.v = calloc((size_t)e.capacity * slot, sizeof(float));
  e.k_raw = calloc((size_t)e.capacity * slot, sizeof(double));
  e.v_raw = calloc((size_t)e.capacity * slot, sizeof(double));
  float* q = malloc((size_t)(h * d) * sizeof(float));
  float* out = malloc((size_t)(h * d) * sizeof(float));
  double* q_raw = malloc((size_t)(h * d) * sizeof(double));
  posenc_context* ctx = NULL;
  CHECK_OK(posenc_context_create(threads, POSENC_BACKEND_AUTO, &ctx));

  posenc_scheme scheme;
  posenc_scheme_init(&scheme);
  if (e.is_alibi) {
    scheme.kind = POSENC_SCHEME_ALIBI;
    scheme.alibi_slopes = e.slopes;
    scheme.num_alibi_slopes = h;
  } else {
    scheme.kind = POSENC_SCHEME_ROPE;
    scheme.rope = &e.rope;
    scheme.rope_keys = POSENC_ROPE_KEYS_PRE_ROTATED; /* rotated when they enter the cache */
  }
  posenc_attention_params params;
  posenc_attention_params_init(&params);
  params.scheme = &scheme;
  /* Prepared once: the scheme is resolved here, and each step below runs
   * without resolving it again or allocating (c.h, posenc_decode_plan_run). */
  posenc_decode_plan* plan = NULL;
  CHECK_OK(posenc_decode_plan_create(&params, h, d, d, &plan));

  uint64_t rng = 42;
  double worst = 0.0;
  int64_t shifts = 0;
  const int64_t qshape[4] = {1, 1, h, d};
  posenc_tensor qt, ot;
  CHECK_OK(posenc_tensor_contiguous(q, POSENC_FLOAT32, 4, qshape, &qt));
  CHECK_OK(posenc_tensor_contiguous(out, POSENC_FLOAT32, 4, qshape, &ot));
  for (int64_t t = 0; t < tokens; ++t) {
    if (e.len == e.capacity) { /* context shift: drop the oldest half */
      const int64_t drop = e.capacity / 2, keep = e.len - drop;
      memmove(e.k, e.k + drop * slot, (size_t)keep * slot * sizeof(float));
      memmove(e.v, e.v + drop * slot, (size_t)keep * slot * sizeof(float));
      memmove(e.k_raw, e.k_raw + drop * slot, (size_t)keep * slot * sizeof(double));
      memmove(e.v_raw, e.v_raw + drop * slot, (size_t)keep * slot * sizeof(double));
      e.len = keep;
      if (!e.is_alibi) { /* keys rotated at j + drop move to j */
        const posenc_tensor kept = CacheView(e.k, &e, keep);
        CHECK_OK(posenc_rope_shift_keys(ctx, &e.rope, &kept, POSENC_LAYOUT_BSHD, -drop));
      }
      ++shifts;
    }
    const int64_t pos = e.len; /* the new token's position: its cache slot */
    for (int64_t i = 0; i < h * d; ++i) q[i] = (float)(q_raw[i] = (float)Uniform(&rng));
    float* k_new = e.k + pos * (int64_t)slot;
    for (size_t i = 0; i < slot; ++i) {
      k_new[i] = (float)(e.k_raw[(size_t)pos * slot + i] = (float)Uniform(&rng));
      e.v[(size_t)pos * slot + i] = (float)(e.v_raw[(size_t)pos * slot + i] = (float)Uniform(&rng));
    }
    ++e.len;
    if (!e.is_alibi) { /* the new key rotated in place at pos as it enters the cache */
      posenc_positions at;
      CHECK_OK(posenc_positions_offset(pos, &at));
      const posenc_tensor kt = CacheView(k_new, &e, 1);
      CHECK_OK(posenc_rope_apply(ctx, &e.rope, &kt, POSENC_LAYOUT_BSHD, &at,
                                 POSENC_DIRECTION_FORWARD, NULL));
    }
    /* q stays unrotated: the kernel rotates the queries at their positions. */
    const posenc_tensor kc = CacheView(e.k, &e, e.len), vc = CacheView(e.v, &e, e.len);
    CHECK_OK(posenc_decode_plan_run(ctx, plan, &qt, &kc, &vc, &ot, NULL, NULL, NULL));
    const double err = Reference(&e, q_raw, pos, out);
    if (err > worst) worst = err;
  }
  posenc_decode_plan_destroy(plan);
  posenc_context_destroy(ctx);
  const double bound = 1e-6;
  printf(
      "decoded %lld tokens, cache %lld, %lld context shift(s): max |error| vs float64 %.3g "
      "(bound %.0e)\n",
      (long long)tokens, (long long)e.capacity, (long long)shifts, worst, bound);
  free(q);
  free(out);
  free(q_raw);
  free(e.k);
  free(e.v);
  free(e.k_raw);
  free(e.v_raw);
  free(e.inv_freq);
  free(e.slopes);
  return worst <= bound ? 0 : 1;
}
