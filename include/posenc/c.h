/* posenc/c.h: the C API of posenc (C99/C11; no C++ types), for engines in C,
 * Rust, Go, Zig, Julia, Python ctypes, ...
 *
 * A thin front end over the C++ API (the headers in include/posenc/): each
 * function converts its arguments, calls the C++ function of the same name and
 * returns a status code. The formulas, conventions, numerics and validation are
 * those of the C++ headers (rope.h, sinusoidal.h, alibi.h, t5.h,
 * model_config.h, gguf.h, flash_attention.h); read them for the details.
 *
 * Conventions:
 *  - Every function returns posenc_status (POSENC_OK = 0). On failure
 *    posenc_last_error() returns the message the C++ exception carried, e.g.
 *    "rotary_dim: got 7, expected an even number in [2, head_dim=64]"; it is
 *    thread-local and valid until the next failing call on the same thread.
 *    No C++ exception ever crosses this boundary (std::bad_alloc becomes
 *    POSENC_ERROR_OUT_OF_MEMORY).
 *  - Tensors are posenc_tensor views (pointer, dtype, rank, shape, strides in
 *    elements); the library never owns or frees caller memory.
 *  - A posenc_context holds the threads and the backend; NULL means one
 *    thread (the caller's) and the automatic backend. A context may be used
 *    by one call at a time; create one per thread that calls in parallel.
 *  - Output arrays (slopes, buckets, frequencies) are caller-owned with an
 *    explicit capacity; a too small capacity is POSENC_ERROR_INVALID_ARGUMENT.
 *  - Enumerations are int32_t typedefs with named constants (not C enum
 *    types), so any value a caller passes is well defined on both sides; a
 *    value outside the constants is POSENC_ERROR_INVALID_ARGUMENT.
 *
 * Link: `pkg-config --cflags --libs posenc`, or CMake find_package(posenc)
 * and target posenc::shared. The symbols live in libposenc.so beside the
 * C++ API. */
#ifndef POSENC_C_H_
#define POSENC_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define POSENC_C_API __declspec(dllexport)
#elif defined(__GNUC__)
#define POSENC_C_API __attribute__((visibility("default")))
#else
#define POSENC_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status, version, errors ---- */

typedef int32_t posenc_status; /* one of: */
enum {
  POSENC_OK = 0,
  POSENC_ERROR_INVALID_ARGUMENT = 1, /* posenc::InvalidArgument, NULL pointers, bad enums */
  POSENC_ERROR_CONFIG = 2,           /* posenc::ConfigError: a model config/GGUF is unusable */
  POSENC_ERROR_IO = 3,               /* posenc::IoError: unreadable or malformed file */
  POSENC_ERROR_OUT_OF_MEMORY = 4,    /* std::bad_alloc */
  POSENC_ERROR_INTERNAL = 5          /* any other exception (a bug: please report it) */
};

/* "ok", "invalid_argument", "config", "io", "out_of_memory", "internal". */
POSENC_C_API const char* posenc_status_name(posenc_status status);
/* The message of the last failing call on this thread ("" if none). */
POSENC_C_API const char* posenc_last_error(void);
/* "MAJOR.MINOR.PATCH" of the library (the same as posenc --version). */
POSENC_C_API const char* posenc_version(void);

/* ---- tensors ---- */

#define POSENC_MAX_RANK 6

typedef int32_t posenc_dtype; /* one of: */
enum { POSENC_FLOAT32 = 0, POSENC_FLOAT64 = 1, POSENC_BFLOAT16 = 2, POSENC_FLOAT16 = 3 };

typedef struct {
  void* data;
  posenc_dtype dtype;
  int32_t rank;                     /* 1..POSENC_MAX_RANK */
  int64_t shape[POSENC_MAX_RANK];   /* first `rank` entries used */
  int64_t strides[POSENC_MAX_RANK]; /* in elements, not bytes */
} posenc_tensor;

/* Fills *out with a contiguous row-major view of `rank` dims. */
POSENC_C_API posenc_status posenc_tensor_contiguous(void* data, posenc_dtype dtype, int32_t rank,
                                                    const int64_t* shape, posenc_tensor* out);

/* Positions of a [batch, seq] set of tokens: ids (count == seq shared by all
 * rows, or batch * seq row-major) or, with ids == NULL, offset + s. */
typedef struct {
  const int64_t* ids;
  int64_t count;
  int64_t offset;
} posenc_positions;

/* ---- context ---- */

typedef struct posenc_context posenc_context;
typedef int32_t posenc_backend; /* one of: */
enum { POSENC_BACKEND_AUTO = 0, POSENC_BACKEND_SCALAR = 1, POSENC_BACKEND_SIMD = 2 };

/* num_threads: 1 = the calling thread only, 0 = one per hardware thread. */
POSENC_C_API posenc_status posenc_context_create(int32_t num_threads, posenc_backend backend,
                                                 posenc_context** out);
POSENC_C_API void posenc_context_destroy(posenc_context* ctx); /* NULL is a no-op */

/* ---- RoPE (rope.h) ---- */

typedef int32_t posenc_layout; /* one of: */
enum { POSENC_LAYOUT_BSHD = 0, POSENC_LAYOUT_BHSD = 1 };
typedef int32_t posenc_rope_pairing; /* one of: */
enum { POSENC_PAIRING_HALF_SPLIT = 0, POSENC_PAIRING_INTERLEAVED = 1 };
typedef int32_t posenc_rope_numerics; /* one of: */
enum { POSENC_NUMERICS_ACCURATE = 0, POSENC_NUMERICS_HF = 1 };
typedef int32_t posenc_rope_direction; /* one of: */
enum { POSENC_DIRECTION_FORWARD = 0, POSENC_DIRECTION_INVERSE = 1 };

typedef struct {
  int64_t head_dim;   /* in [2, 65536] */
  int64_t rotary_dim; /* even, in [2, head_dim]; 0 means head_dim */
  double theta;       /* base of the default frequencies, finite > 1 */
  posenc_rope_pairing pairing;
  posenc_rope_numerics numerics;
  /* Explicit frequencies (rotary_dim/2 values) or NULL for the default
   * theta^(-2j/rotary_dim) table; attention_factor multiplies cos and sin. */
  const double* inv_freq;
  int64_t inv_freq_count;
  double attention_factor;
} posenc_rope_params;

/* Defaults: theta 10000, half_split, accurate, attention_factor 1, no
 * explicit frequencies; head_dim must still be set. */
POSENC_C_API void posenc_rope_params_init(posenc_rope_params* params);

/* x: rank 4 in `layout`; out NULL = in place, else x's shape and dtype. */
POSENC_C_API posenc_status posenc_rope_apply(const posenc_context* ctx,
                                             const posenc_rope_params* params,
                                             const posenc_tensor* x, posenc_layout layout,
                                             const posenc_positions* positions,
                                             posenc_rope_direction direction,
                                             const posenc_tensor* out);
/* q and k in one pass; q_out / k_out NULL = in place. */
POSENC_C_API posenc_status posenc_rope_apply_qk(
    const posenc_context* ctx, const posenc_rope_params* params, const posenc_tensor* q,
    const posenc_tensor* k, posenc_layout layout, const posenc_positions* positions,
    posenc_rope_direction direction, const posenc_tensor* q_out, const posenc_tensor* k_out);
/* Packed sequences: x [total_tokens, heads, head_dim], cu_seqlens num_seqs + 1
 * offsets, seq_offsets NULL (all 0) or num_seqs start positions. */
POSENC_C_API posenc_status posenc_rope_apply_varlen(
    const posenc_context* ctx, const posenc_rope_params* params, const posenc_tensor* x,
    const int64_t* cu_seqlens, int64_t num_seqs, const int64_t* seq_offsets,
    posenc_rope_direction direction, const posenc_tensor* out);
/* cos and sin [count, rotary_dim] in HF's layout (positions ids has count
 * entries, or offset + r). */
POSENC_C_API posenc_status posenc_rope_cos_sin(const posenc_context* ctx,
                                               const posenc_rope_params* params,
                                               const posenc_positions* positions, int64_t count,
                                               const posenc_tensor* cos, const posenc_tensor* sin);
/* The default table into out[0 .. rotary_dim/2). */
POSENC_C_API posenc_status posenc_rope_default_inv_freq(int64_t rotary_dim, double theta,
                                                        posenc_rope_numerics numerics, double* out,
                                                        int64_t capacity);

/* ---- model configs: HF config.json or llama.cpp GGUF (model_config.h, gguf.h) ---- */

typedef struct {
  char rope_type[32];  /* "default", "linear", "yarn", "llama3", ... ("" for ALiBi models) */
  char model_type[64]; /* config model_type / GGUF general.architecture (truncated) */
  int32_t is_alibi;    /* 1: the model uses ALiBi (no RoPE; see posenc_alibi_slopes) */
  int64_t alibi_heads; /* ALiBi: head count */
  double alibi_max_bias;
  int64_t max_position_embeddings;
  int64_t original_max_position_embeddings;
  /* RoPE: ready for posenc_rope_apply (inv_freq points at the caller's buffer). */
  posenc_rope_params params;
} posenc_model_rope;

/* Reads a config.json or .gguf at `path` and computes the frequencies of
 * `layer_type` (NULL or "": the full-attention / only layer) for a call with
 * seq_len (0: at initialisation; dynamic and longrope depend on it) in
 * `numerics` (HF's float32 recipe or float64). The rotary_dim/2 frequencies
 * are written to inv_freq (capacity entries); inv_freq NULL with capacity 0
 * only fills *out (params.inv_freq_count says how many are needed).
 * An ALiBi model returns POSENC_OK with is_alibi = 1 and no frequencies. */
POSENC_C_API posenc_status posenc_rope_from_config(const char* path, int64_t seq_len,
                                                   const char* layer_type,
                                                   posenc_rope_numerics numerics,
                                                   posenc_model_rope* out, double* inv_freq,
                                                   int64_t capacity);

/* ---- sinusoidal (sinusoidal.h) ---- */

typedef int32_t posenc_sinusoidal_layout; /* one of: */
enum {
  POSENC_SINUSOIDAL_INTERLEAVED = 0,
  POSENC_SINUSOIDAL_SPLIT = 1,
  POSENC_SINUSOIDAL_SPLIT_T2T = 2
};

/* out[r, :] = PE(offset + r), out [num_positions, dim] (any dtype). */
POSENC_C_API posenc_status posenc_sinusoidal_table(const posenc_context* ctx, int64_t dim,
                                                   double base, posenc_sinusoidal_layout layout,
                                                   int64_t offset, int64_t num_positions,
                                                   const posenc_tensor* out);

/* ---- ALiBi (alibi.h) ---- */

typedef int32_t posenc_alibi_convention; /* one of: */
enum { POSENC_ALIBI_REFERENCE = 0, POSENC_ALIBI_BLOOM_FLOAT32 = 1 };
typedef int32_t posenc_alibi_form; /* one of: */
enum { POSENC_ALIBI_CAUSAL = 0, POSENC_ALIBI_SYMMETRIC = 1 };

/* The num_heads slopes into out (capacity >= num_heads). */
POSENC_C_API posenc_status posenc_alibi_slopes(int64_t num_heads, double max_bias,
                                               posenc_alibi_convention convention, double* out,
                                               int64_t capacity);
/* One tile of the bias of head `head`: out [row_end - row_begin, col_end -
 * col_begin], queries bottom-right aligned in a [query_len, key_len] score
 * matrix; slopes has num_slopes (= heads) entries. */
POSENC_C_API posenc_status posenc_alibi_bias_tile(const posenc_context* ctx, const double* slopes,
                                                  int64_t num_slopes, int64_t query_len,
                                                  int64_t key_len, posenc_alibi_form form,
                                                  int64_t head, int64_t row_begin, int64_t row_end,
                                                  int64_t col_begin, int64_t col_end,
                                                  const posenc_tensor* out);

/* ---- T5 relative buckets (t5.h) ---- */

typedef int32_t posenc_t5_direction; /* one of: */
enum { POSENC_T5_BIDIRECTIONAL = 0, POSENC_T5_CAUSAL = 1 };

/* Buckets of rel = first .. first + count - 1 (rel = key - query) into out. */
POSENC_C_API posenc_status posenc_t5_buckets(int64_t num_buckets, int64_t max_distance,
                                             posenc_t5_direction direction, int64_t first,
                                             int64_t count, int64_t* out);

/* ---- fused attention forward (flash_attention.h) ---- */

/* A positional scheme by NAME with NAMED arguments, so that any scheme the
 * library knows can be passed without a C struct per scheme:
 *   "none", "absolute": no arguments.
 *   "rope": numbers rotary_dim, theta, attention_factor; texts pairing
 *     ("half_split" | "interleaved"), numerics ("accurate" | "hf"),
 *     rope_keys ("rotate" | "pre_rotated"); tensor inv_freq (float64 [n]).
 *   "alibi": tensor slopes (float32/float64 [H]), or number max_bias (default
 *     8) with text convention ("reference" | "bloom_float32").
 *   "t5": tensor table ([num_buckets, H], required); numbers max_distance
 *     (default 128) and bidirectional (default 1; 0: causal buckets).
 *   "shaw": tensors a_key [2 clip + 1, D], a_value [2 clip + 1, Dv] (float32
 *     or float64, required); number clip (default 16).
 *   "fire": tensors w1 [hidden], b1 [hidden], w2 [H, hidden], b2 [H], c [1],
 *     threshold [1] (required); number eps (default 1e-6); causal mask only.
 * These are the registry's declarations (include/posenc/scheme.h; `posenc
 * schemes` prints them): any registered scheme is accepted by name, with
 * its declared arguments (NUMBER for number, integer and flag arguments;
 * TEXT; TENSOR).
 * An unknown scheme or argument name, a missing required argument or a
 * wrong kind is POSENC_ERROR_INVALID_ARGUMENT naming it and what is allowed. */
typedef int32_t posenc_arg_kind; /* one of: */
enum { POSENC_ARG_NUMBER = 0, POSENC_ARG_TEXT = 1, POSENC_ARG_TENSOR = 2 };

typedef struct {
  const char* name;
  posenc_arg_kind kind;
  double number;        /* POSENC_ARG_NUMBER */
  const char* text;     /* POSENC_ARG_TEXT */
  posenc_tensor tensor; /* POSENC_ARG_TENSOR */
} posenc_scheme_arg;

typedef int32_t posenc_mask; /* one of: */
enum { POSENC_MASK_CAUSAL = 0, POSENC_MASK_BIDIRECTIONAL = 1 };

typedef struct {
  posenc_layout layout; /* of q, k, v and out */
  posenc_mask mask;
  int64_t sliding_window; /* W >= 1, or 0 for none */
  double scale;           /* finite > 0, or 0 for 1/sqrt(D) */
  const char* scheme;     /* NULL means "none" */
  const posenc_scheme_arg* scheme_args;
  int64_t num_scheme_args;
  int64_t query_tile; /* 0: 64 */
  int64_t key_tile;   /* 0: 64 */
  /* Explicit positions (posenc_flash_attention only; NULL: queries at
   * Sk - Sq + i, keys at j). Ids per batch row or shared, or an offset. */
  const posenc_positions* query_positions;
  const posenc_positions* key_positions;
} posenc_attention_params;

/* Defaults: bshd, causal, no window, default scale, scheme "none", tiles 64,
 * default positions. */
POSENC_C_API void posenc_attention_params_init(posenc_attention_params* params);

/* q [B, Sq, H, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv], out [B, Sq, H, Dv]
 * in params->layout (queries bottom-right aligned, GQA when H > Hkv). */
POSENC_C_API posenc_status posenc_flash_attention(const posenc_context* ctx,
                                                  const posenc_attention_params* params,
                                                  const posenc_tensor* q, const posenc_tensor* k,
                                                  const posenc_tensor* v, const posenc_tensor* out);
/* Packed sequences: q [total_q, H, D], k/v [total_k, Hkv, D|Dv], out
 * [total_q, H, Dv]; cu_seqlens_q / cu_seqlens_k have batch + 1 entries. */
POSENC_C_API posenc_status posenc_flash_attention_varlen(
    const posenc_context* ctx, const posenc_attention_params* params, const posenc_tensor* q,
    const posenc_tensor* k, const posenc_tensor* v, const posenc_tensor* out,
    const int64_t* cu_seqlens_q, const int64_t* cu_seqlens_k, int64_t batch);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* POSENC_C_H_ */
