/* A C11 program using the installed C API (posenc/c.h), built with -std=c11
 * -Wall -Wextra -Werror -pedantic through pkg-config and through CMake
 * find_package (tests/install/run_install_test.sh). Every result is checked
 * against values computed here from the formulas (libm, double) or known
 * exactly: the sinusoidal table, a RoPE rotation (in/out of place, ids and
 * offset), ALiBi slopes and a causal bias tile, T5 buckets, the frequencies
 * of a Llama 3.1 GGUF file and of its config.json, fused attention with
 * ALiBi against a softmax written out here, and one error status + message.
 *
 * usage: c_consumer VERSION LLAMA31.gguf llama-3.1-8b.json */
#include <math.h>
#include <posenc/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)

#define OK(call) CHECK((call) == POSENC_OK, "%s: %s", #call, posenc_last_error())

static void Sinusoidal(void) {
  float pe[5 * 8];
  posenc_tensor t;
  const int64_t shape[2] = {5, 8};
  OK(posenc_tensor_contiguous(pe, POSENC_FLOAT32, 2, shape, &t));
  OK(posenc_sinusoidal_table(NULL, 8, 10000.0, POSENC_SINUSOIDAL_INTERLEAVED, 0, 5, &t));
  for (int p = 0; p < 5; ++p) {
    for (int i = 0; i < 4; ++i) {
      const double angle = p * pow(10000.0, -2.0 * i / 8.0);
      CHECK(fabs(pe[p * 8 + 2 * i] - sin(angle)) < 1e-6, "sin at %d,%d", p, i);
      CHECK(fabs(pe[p * 8 + 2 * i + 1] - cos(angle)) < 1e-6, "cos at %d,%d", p, i);
    }
  }
}

/* RoPE half_split on x [1, S, H, D] against the formula. */
static void Rope(void) {
  enum { S = 3, H = 2, D = 8 };
  float x[S * H * D], out[S * H * D], want[S * H * D];
  for (int i = 0; i < S * H * D; ++i) x[i] = (float)sin(0.3 * i) + 0.01f * (float)i;
  const int64_t ids[S] = {7, 0, 123};
  for (int s = 0; s < S; ++s) {
    for (int h = 0; h < H; ++h) {
      const float* row = x + (s * H + h) * D;
      float* w = want + (s * H + h) * D;
      for (int j = 0; j < D / 2; ++j) {
        const double a = (double)ids[s] * pow(10000.0, -2.0 * j / D);
        w[j] = (float)(row[j] * cos(a) - row[j + D / 2] * sin(a));
        w[j + D / 2] = (float)(row[j + D / 2] * cos(a) + row[j] * sin(a));
      }
    }
  }
  posenc_rope_params p;
  posenc_rope_params_init(&p);
  p.head_dim = D;
  p.pairing = POSENC_PAIRING_HALF_SPLIT;
  posenc_tensor xt, ot;
  const int64_t shape[4] = {1, S, H, D};
  OK(posenc_tensor_contiguous(x, POSENC_FLOAT32, 4, shape, &xt));
  OK(posenc_tensor_contiguous(out, POSENC_FLOAT32, 4, shape, &ot));
  posenc_positions pos, off;
  OK(posenc_positions_ids(ids, S, &pos));
  OK(posenc_rope_apply(NULL, &p, &xt, POSENC_LAYOUT_BSHD, &pos, POSENC_DIRECTION_FORWARD, &ot));
  for (int i = 0; i < S * H * D; ++i) CHECK(fabsf(out[i] - want[i]) < 1e-5f, "rope out[%d]", i);
  OK(posenc_rope_apply(NULL, &p, &xt, POSENC_LAYOUT_BSHD, &pos, POSENC_DIRECTION_FORWARD, NULL));
  for (int i = 0; i < S * H * D; ++i) CHECK(x[i] == out[i], "in place [%d]", i);
  /* Offset form: token s at 10 + s; the inverse undoes it. */
  OK(posenc_positions_offset(10, &off));
  OK(posenc_rope_apply(NULL, &p, &xt, POSENC_LAYOUT_BSHD, &off, POSENC_DIRECTION_FORWARD, NULL));
  OK(posenc_rope_apply(NULL, &p, &xt, POSENC_LAYOUT_BSHD, &off, POSENC_DIRECTION_INVERSE, NULL));
  for (int i = 0; i < S * H * D; ++i) CHECK(fabsf(x[i] - out[i]) < 1e-5f, "inverse [%d]", i);
  /* A bad rotary dim: status and message. */
  p.rotary_dim = 3;
  CHECK(posenc_rope_apply(NULL, &p, &xt, POSENC_LAYOUT_BSHD, &pos, POSENC_DIRECTION_FORWARD,
                          NULL) == POSENC_ERROR_INVALID_ARGUMENT,
        "rotary_dim 3 accepted");
  CHECK(strstr(posenc_last_error(), "rotary_dim: got 3") != NULL, "message: %s",
        posenc_last_error());
}

static void AlibiAndT5(void) {
  double slopes[8];
  OK(posenc_alibi_slopes(8, 8.0, POSENC_ALIBI_REFERENCE, slopes, 8));
  for (int h = 0; h < 8; ++h)
    CHECK(slopes[h] == ldexp(1.0, -(h + 1)), "slope %d = %g", h, slopes[h]);
  double tile[4 * 4];
  posenc_tensor t;
  const int64_t shape[2] = {4, 4};
  OK(posenc_tensor_contiguous(tile, POSENC_FLOAT64, 2, shape, &t));
  OK(posenc_alibi_bias_tile(NULL, slopes, 8, 4, 4, POSENC_ALIBI_CAUSAL, 1, 0, 4, 0, 4, &t));
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (j > i) {
        CHECK(isinf(tile[i * 4 + j]) && tile[i * 4 + j] < 0, "masked %d,%d", i, j);
      } else {
        CHECK(tile[i * 4 + j] == -0.25 * (i - j), "bias %d,%d = %g", i, j, tile[i * 4 + j]);
      }
    }
  }
  int64_t b[5];
  OK(posenc_t5_buckets(32, 128, POSENC_T5_BIDIRECTIONAL, -2, 5, b));
  const int64_t want[5] = {2, 1, 0, 17, 18};
  for (int i = 0; i < 5; ++i) CHECK(b[i] == want[i], "bucket of %d: %lld", i - 2, (long long)b[i]);
}

static void Config(const char* gguf, const char* json) {
  posenc_model_rope m, hf;
  double inv[64], inv_hf[64];
  posenc_model_rope_init(&m);
  posenc_model_rope_init(&hf);
  OK(posenc_rope_from_config(gguf, 0, NULL, POSENC_NUMERICS_HF, &m, NULL, 0));
  CHECK(m.params.inv_freq_count == 64, "count %lld", (long long)m.params.inv_freq_count);
  OK(posenc_rope_from_config(gguf, 0, NULL, POSENC_NUMERICS_HF, &m, inv, 64));
  OK(posenc_rope_from_config(json, 0, NULL, POSENC_NUMERICS_HF, &hf, inv_hf, 64));
  CHECK(m.params.pairing == POSENC_PAIRING_INTERLEAVED, "llama.cpp NORM pairing");
  CHECK(m.params.head_dim == 128 && m.max_position_embeddings == 131072, "dims");
  CHECK(m.num_heads == 32 && m.num_kv_heads == 8 && hf.num_heads == 32 && hf.num_kv_heads == 8,
        "heads %lld/%lld", (long long)m.num_heads, (long long)m.num_kv_heads);
  CHECK(inv[0] == 1.0, "inv_freq[0] = %g", inv[0]);
  const double last = pow(500000.0, -126.0 / 128.0) / 8.0;
  CHECK(fabs(inv[63] - last) < 1e-6 * last, "inv_freq[63] = %g, want %g", inv[63], last);
  for (int j = 0; j < 64; ++j) {
    CHECK(fabs(inv[j] - inv_hf[j]) <= 4.0 * ldexp(1.0, -24) * inv_hf[j], "gguf vs json pair %d", j);
  }
  CHECK(strcmp(hf.rope_type, "llama3") == 0, "json rope_type %s", hf.rope_type);
  CHECK(posenc_rope_from_config("/nonexistent.gguf", 0, NULL, POSENC_NUMERICS_HF, &m, NULL, 0) ==
            POSENC_ERROR_IO,
        "missing file");
}

/* out = softmax(q.k / sqrt(D) - slope |i - j|) v, causal, one batch. */
static void Attention(void) {
  enum { S = 3, H = 2, D = 4 };
  float q[S * H * D], k[S * H * D], v[S * H * D], out[S * H * D];
  for (int i = 0; i < S * H * D; ++i) {
    q[i] = (float)sin(0.7 * i);
    k[i] = (float)cos(0.3 * i);
    v[i] = (float)(0.1 * i);
  }
  double slopes[H] = {0.5, 0.25};
  const int64_t shape[4] = {1, S, H, D}, sshape[1] = {H};
  posenc_tensor qt, kt, vt, ot;
  posenc_scheme_arg arg;
  posenc_scheme_arg_init(&arg);
  arg.name = "slopes";
  arg.kind = POSENC_ARG_TENSOR;
  OK(posenc_tensor_contiguous(slopes, POSENC_FLOAT64, 1, sshape, &arg.tensor));
  OK(posenc_tensor_contiguous(q, POSENC_FLOAT32, 4, shape, &qt));
  OK(posenc_tensor_contiguous(k, POSENC_FLOAT32, 4, shape, &kt));
  OK(posenc_tensor_contiguous(v, POSENC_FLOAT32, 4, shape, &vt));
  OK(posenc_tensor_contiguous(out, POSENC_FLOAT32, 4, shape, &ot));
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  posenc_scheme scheme;
  posenc_scheme_init(&scheme);
  scheme.kind = POSENC_SCHEME_NAMED;
  scheme.name = "alibi";
  scheme.args = &arg;
  scheme.num_args = 1;
  p.scheme = &scheme;
  posenc_context* ctx = NULL;
  OK(posenc_context_create(2, POSENC_BACKEND_AUTO, &ctx));
  OK(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &ot));
  posenc_context_destroy(ctx);
  for (int i = 0; i < S; ++i) {
    for (int h = 0; h < H; ++h) {
      double logit[S], max = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += (double)q[(i * H + h) * D + d] * k[(j * H + h) * D + d];
        logit[j] = dot / sqrt((double)D) - slopes[h] * (i - j);
        if (logit[j] > max) max = logit[j];
      }
      for (int j = 0; j <= i; ++j) sum += exp(logit[j] - max);
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int j = 0; j <= i; ++j) o += exp(logit[j] - max) / sum * v[(j * H + h) * D + d];
        CHECK(fabs(out[(i * H + h) * D + d] - o) < 1e-5, "attention %d,%d,%d: %g vs %g", i, h, d,
              out[(i * H + h) * D + d], o);
      }
    }
  }
  arg.name = "slope";
  CHECK(posenc_flash_attention(NULL, &p, &qt, &kt, &vt, &ot) == POSENC_ERROR_INVALID_ARGUMENT,
        "bad arg name");
  CHECK(strstr(posenc_last_error(), "got slope") != NULL, "message: %s", posenc_last_error());
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s VERSION LLAMA31.gguf llama-3.1-8b.json\n", argv[0]);
    return 2;
  }
  CHECK(strcmp(posenc_version(), argv[1]) == 0, "version %s, want %s", posenc_version(), argv[1]);
  CHECK(strcmp(POSENC_VERSION_STRING, argv[1]) == 0 &&
            posenc_version_number() == POSENC_VERSION_NUMBER,
        "compile-time version %s (%d), run-time %d", POSENC_VERSION_STRING, POSENC_VERSION_NUMBER,
        (int)posenc_version_number());
  Sinusoidal();
  Rope();
  AlibiAndT5();
  Config(argv[2], argv[3]);
  Attention();
  printf("c_consumer: posenc %s, %d failures\n", posenc_version(), failures);
  return failures == 0 ? 0 : 1;
}
