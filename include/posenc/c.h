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
 *  - Every public struct begins with `size_t struct_size`, which its _init
 *    (or constructor) function sets; a function that takes the struct checks
 *    it and fails with POSENC_ERROR_INVALID_ARGUMENT ("x.struct_size: got 0,
 *    expected 48 ...") when a caller skipped the init.
 *
 * Stability (from 1.0; the 0.x series may still change, with the changes
 * listed in CHANGELOG.md): within one major version
 *  - a function keeps its name, signature and meaning, and an enumeration
 *    constant its value; new functions and constants may be added;
 *  - a struct only grows at its end, and the library accepts the
 *    struct_size of every earlier release of the same major version,
 *    reading only the fields that caller knew (the others take their _init
 *    value); today every struct has one size;
 *  - the symbols carry the version node POSENC_<major>.<minor> of the
 *    shared library (soname libposenc.so.<major>.<minor> in 0.x).
 * A header newer than the library (struct_size larger than the library
 * knows) is refused with POSENC_ERROR_INVALID_ARGUMENT, never misread.
 *
 * Memory: the calls an engine makes per token and layer allocate nothing
 * in the steady state -- posenc_rope_apply, posenc_rope_apply_qk,
 * posenc_rope_apply_with_cache, posenc_rope_shift_keys,
 * posenc_decode_plan_run, posenc_decode_plan_run_paged and
 * posenc_attention_decode, once they have run with the same shapes (and,
 * for posenc_attention_decode, params of the same contents) on the same
 * thread (tests/capi/alloc_count.c counts it with an interposed malloc).
 * posenc_attention_decode keeps the plans of the last 4 distinct params it
 * saw on the calling thread, keyed on their contents (every field and
 * every value the scheme points to), so changing a slope or a table in
 * place is seen; a plan of your own skips the key's reading of them. They reuse scratch that the
 * calling thread keeps, for itself and each thread of its context: RoPE, the frequency table and
 * one cos/sin block per thread, a few KiB; decode, the query rows, the split-K partials (at most B
 * * 64 * H * Sq * (Dv + 2) floats: 1 MiB at B = 1, H = 32, Sq = 1, Dv = 128) and one set of key and
 * value blocks per thread (about 0.5 MiB at Hkv = 8, D = Dv = 128). Other calls keep similar
 * scratch on the threads that run them. posenc_context_trim frees it, and
 * so does the end of a thread (a context's threads end with
 * posenc_context_destroy).
 * Other calls (config loading, prefill, tables) allocate as they need.
 *
 * Link: `pkg-config --cflags --libs posenc` (in a build tree:
 * PKG_CONFIG_PATH=<build> and the posenc-uninstalled.pc there), or CMake
 * find_package(posenc) and target posenc::shared. The symbols live in
 * libposenc.so beside the C++ API. */
#ifndef POSENC_C_H_
#define POSENC_C_H_

#include <stddef.h>
#include <stdint.h>

#include "posenc/version.h" /* POSENC_VERSION_MAJOR/_MINOR/_PATCH/_STRING */

/* The version as one number, MAJOR * 10000 + MINOR * 100 + PATCH, at
 * compile time (compare with posenc_version_number() at run time). */
#define POSENC_VERSION_NUMBER \
  (POSENC_VERSION_MAJOR * 10000 + POSENC_VERSION_MINOR * 100 + POSENC_VERSION_PATCH)

/* Import/export: the library's own build defines POSENC_BUILDING_LIBRARY;
 * consumers of the static library on Windows define POSENC_STATIC (the CMake
 * target posenc::posenc does). */
#if defined(_WIN32)
#if defined(POSENC_BUILDING_LIBRARY)
#define POSENC_C_API __declspec(dllexport)
#elif defined(POSENC_STATIC)
#define POSENC_C_API
#else
#define POSENC_C_API __declspec(dllimport)
#endif
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
/* The message of this thread's last call: "" when it succeeded (every
 * function that returns posenc_status clears it on success). */
POSENC_C_API const char* posenc_last_error(void);
/* "MAJOR.MINOR.PATCH" of the library (the same as posenc --version). */
POSENC_C_API const char* posenc_version(void);
/* MAJOR * 10000 + MINOR * 100 + PATCH of the library that is loaded. */
POSENC_C_API int32_t posenc_version_number(void);

/* ---- tensors ---- */

#define POSENC_MAX_RANK 6

typedef int32_t posenc_dtype; /* one of: */
enum { POSENC_FLOAT32 = 0, POSENC_FLOAT64 = 1, POSENC_BFLOAT16 = 2, POSENC_FLOAT16 = 3 };

typedef struct {
  size_t struct_size; /* set by posenc_tensor_contiguous / _strided */
  void* data;
  posenc_dtype dtype;
  int32_t rank;                     /* 1..POSENC_MAX_RANK */
  int64_t shape[POSENC_MAX_RANK];   /* first `rank` entries used */
  int64_t strides[POSENC_MAX_RANK]; /* in elements, not bytes */
} posenc_tensor;

/* Fills *out with a contiguous row-major view of `rank` dims. */
POSENC_C_API posenc_status posenc_tensor_contiguous(void* data, posenc_dtype dtype, int32_t rank,
                                                    const int64_t* shape, posenc_tensor* out);
/* Fills *out with a strided view (strides in elements, each >= 0; e.g. the
 * first Sk rows of a KV cache of capacity C). */
POSENC_C_API posenc_status posenc_tensor_strided(void* data, posenc_dtype dtype, int32_t rank,
                                                 const int64_t* shape, const int64_t* strides,
                                                 posenc_tensor* out);

/* Positions of a [batch, seq] set of tokens: ids (count == seq shared by all
 * rows, or batch * seq row-major) or, with ids == NULL, offset + s. Made by
 * posenc_positions_ids / posenc_positions_offset. */
typedef struct {
  size_t struct_size;
  const int64_t* ids;
  int64_t count;
  int64_t offset;
} posenc_positions;

/* Explicit ids (ids has count entries, the caller keeps them alive). */
POSENC_C_API posenc_status posenc_positions_ids(const int64_t* ids, int64_t count,
                                                posenc_positions* out);
/* Token s of every row at offset + s (offset >= 0). */
POSENC_C_API posenc_status posenc_positions_offset(int64_t offset, posenc_positions* out);

/* ---- context ---- */

typedef struct posenc_context posenc_context;
typedef int32_t posenc_backend; /* one of: */
enum { POSENC_BACKEND_AUTO = 0, POSENC_BACKEND_SCALAR = 1, POSENC_BACKEND_SIMD = 2 };

/* num_threads: 1 = the calling thread only, 0 = one per hardware thread.
 * Between calls the pool's threads poll for the next one for 50 us before
 * they sleep; the environment variable POSENC_POOL_SPIN_US (microseconds,
 * 0 to 100000) sets that for contexts created afterwards, and a bad value
 * gives POSENC_ERROR_INVALID_ARGUMENT naming it (posenc/context.h). */
POSENC_C_API posenc_status posenc_context_create(int32_t num_threads, posenc_backend backend,
                                                 posenc_context** out);
typedef int32_t posenc_workers; /* one of: */
enum { POSENC_WORKERS_POOL = 0, POSENC_WORKERS_OPENMP = 1 };
/* As posenc_context_create, with the threads that run its tasks:
 * POSENC_WORKERS_POOL, posenc's own (what posenc_context_create gives), or
 * POSENC_WORKERS_OPENMP, the calling thread's OpenMP team, for an engine
 * that is an OpenMP program itself (ggml's CPU backend, any `omp parallel`
 * host): posenc's tasks then run on the threads the engine's own parallel
 * regions use instead of competing with them for the cores (posenc/context.h,
 * Workers). POSENC_ERROR_INVALID_ARGUMENT, naming workers, for
 * POSENC_WORKERS_OPENMP where libposenc was built without OpenMP
 * (posenc_openmp_available() == 0). */
POSENC_C_API posenc_status posenc_context_create_on(int32_t num_threads, posenc_backend backend,
                                                    posenc_workers workers, posenc_context** out);
POSENC_C_API int32_t posenc_openmp_available(void);            /* 1 if built with OpenMP, else 0 */
POSENC_C_API void posenc_context_destroy(posenc_context* ctx); /* NULL is a no-op */
/* Frees the scratch kept between calls ("Memory" above) by the calling
 * thread and by ctx's threads (NULL: the calling thread's); the next calls
 * allocate it again. Call it when no posenc call is running on the calling
 * thread or on ctx, e.g. between the generations of a server. */
POSENC_C_API posenc_status posenc_context_trim(const posenc_context* ctx);

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
  size_t struct_size; /* set by posenc_rope_params_init */
  int64_t head_dim;   /* in [2, 65536] */
  int64_t rotary_dim; /* even, in [2, head_dim]; 0 means head_dim */
  double theta;       /* base of the default frequencies, finite > 1 */
  /* Required: -1 after _init. HF checkpoints are half-split (NeoX); GGUF
   * llama-family files are interleaved (llama.cpp's converter permutes the
   * Q/K weights), which posenc_rope_from_config reports. */
  posenc_rope_pairing pairing;
  posenc_rope_numerics numerics;
  /* Explicit frequencies (rotary_dim/2 values) or NULL for the default
   * theta^(-2j/rotary_dim) table; attention_factor multiplies cos and sin. */
  const double* inv_freq;
  int64_t inv_freq_count;
  double attention_factor;
} posenc_rope_params;

/* Defaults: theta 10000, accurate, attention_factor 1, no explicit
 * frequencies; head_dim and pairing (-1, unset) must still be set. */
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

#define POSENC_MAX_LAYER_TYPES 8
#define POSENC_WARNINGS_CAPACITY 2048

/* What the loader knows about a model's attention and positions. */
typedef struct {
  size_t struct_size;  /* set by posenc_model_rope_init */
  char rope_type[32];  /* "default", "linear", "yarn", "llama3", ... ("" for ALiBi models) */
  char model_type[64]; /* config model_type / GGUF general.architecture (truncated) */
  char format[16];     /* "config.json" or "gguf" */
  int32_t is_alibi;    /* 1: the model uses ALiBi (no RoPE; see posenc_alibi_slopes) */
  int64_t alibi_heads; /* ALiBi: head count */
  double alibi_max_bias;
  /* Attention shape: query heads, key/value heads (GQA; = num_heads when
   * the file does not say), head dim (ALiBi models too: hidden / heads);
   * 0 when the file does not give it. */
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  /* The softmax scale the model uses: DeepSeek-V2/V3's YaRN mscale^2 /
   * sqrt(qk_head_dim), else 0 (meaning the usual 1/sqrt(head_dim)); pass it
   * as posenc_attention_params.scale. */
  double softmax_scale;
  int64_t max_position_embeddings;
  int64_t original_max_position_embeddings;
  /* M-RoPE (Qwen2-VL / Qwen3-VL): pairs per t/h/w stream of the selected
   * layer type (num_mrope_sections 0 if none); interleaved = Qwen3-VL. */
  int32_t num_mrope_sections;
  int64_t mrope_section[4];
  int32_t mrope_interleaved;
  /* The model's layer types (num_layer_types, names truncated at 31 bytes;
   * one "" entry when one rope serves every layer). */
  int32_t num_layer_types;
  char layer_types[POSENC_MAX_LAYER_TYPES][32];
  /* The loader's warnings (HF's, e.g. an unknown rope key, or GGUF's), one
   * per line, num_warnings of them; truncated at the capacity. */
  int32_t num_warnings;
  char warnings[POSENC_WARNINGS_CAPACITY];
  /* RoPE: ready for posenc_rope_apply (inv_freq points at the caller's
   * buffer; pairing as the checkpoint's weights need it: interleaved for
   * GGUF llama-family files, see gguf.h). */
  posenc_rope_params params;
} posenc_model_rope;

/* Zeroes *out and sets its struct_size (and that of out->params). */
POSENC_C_API void posenc_model_rope_init(posenc_model_rope* out);

/* Reads a config.json or .gguf at `path` and computes the frequencies of
 * `layer_type` (NULL or "": the full-attention / only layer) for a call with
 * seq_len (0: at initialisation; dynamic and longrope depend on it) in
 * `numerics` (HF's float32 recipe or float64). The rotary_dim/2 frequencies
 * are written to inv_freq (capacity entries); inv_freq NULL with capacity 0
 * only fills *out (params.inv_freq_count says how many are needed).
 * An ALiBi model returns POSENC_OK with is_alibi = 1 and no frequencies.
 * *out must have been set by posenc_model_rope_init. */
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

/* ---- positional schemes of attention (attention.h, scheme.h) ---- */

/* A scheme is typed for the schemes an engine loads from a model
 * (posenc_rope_from_config's params, ALiBi slopes, a T5 table), or NAMED
 * for any scheme the library registers (`posenc schemes` lists them, with
 * their arguments). A setting a scheme needs has no default: leaving it at
 * what posenc_scheme_init wrote is POSENC_ERROR_INVALID_ARGUMENT naming it. */
typedef int32_t posenc_scheme_kind; /* one of: */
enum {
  POSENC_SCHEME_NONE = 0,  /* no positional term (scores q.k only) */
  POSENC_SCHEME_ROPE = 1,  /* rope, rope_keys */
  POSENC_SCHEME_ALIBI = 2, /* alibi_slopes, num_alibi_slopes */
  POSENC_SCHEME_T5 = 3,    /* t5_table, t5_max_distance, t5_direction */
  POSENC_SCHEME_NAMED = 4  /* name, args, num_args */
};
/* Whether the kernel rotates the keys (by key_positions, like the queries)
 * or they were rotated when they entered the cache. Required with RoPE. */
typedef int32_t posenc_rope_keys; /* one of: */
enum { POSENC_ROPE_KEYS_ROTATE = 0, POSENC_ROPE_KEYS_PRE_ROTATED = 1 };

/* A named argument of a NAMED scheme (the registry's declarations):
 *   "rope": numbers rotary_dim, theta, attention_factor; texts pairing
 *     ("half_split" | "interleaved", required), numerics ("accurate" |
 *     "hf"), rope_keys ("rotate" | "pre_rotated", required); tensor inv_freq.
 *   "alibi": tensor slopes [H], or number max_bias (default 8) with text
 *     convention ("reference" | "bloom_float32").
 *   "t5": tensor table ([num_buckets, H], required); numbers max_distance
 *     (default 128) and bidirectional (default 1; 0: causal buckets).
 *   "shaw": tensors a_key [2 clip + 1, D], a_value [2 clip + 1, Dv]
 *     (required); number clip (default 16).
 *   "fire": tensors w1 [hidden], b1 [hidden], w2 [H, hidden], b2 [H], c [1],
 *     threshold [1] (required); number eps (default 1e-6); causal only.
 * Kinds: NUMBER for number, integer and flag arguments; TEXT; TENSOR. An
 * unknown scheme or argument, a missing required argument or a wrong kind
 * is POSENC_ERROR_INVALID_ARGUMENT naming it and what is allowed. */
typedef int32_t posenc_arg_kind; /* one of: */
enum { POSENC_ARG_NUMBER = 0, POSENC_ARG_TEXT = 1, POSENC_ARG_TENSOR = 2 };

typedef struct {
  size_t struct_size; /* sizeof(posenc_scheme_arg), set by posenc_scheme_arg_init */
  const char* name;
  posenc_arg_kind kind;
  double number;        /* POSENC_ARG_NUMBER */
  const char* text;     /* POSENC_ARG_TEXT */
  posenc_tensor tensor; /* POSENC_ARG_TENSOR */
} posenc_scheme_arg;

/* Zeroes *arg and sets its struct_size (name NULL, kind NUMBER). */
POSENC_C_API void posenc_scheme_arg_init(posenc_scheme_arg* arg);

typedef struct {
  size_t struct_size; /* sizeof(posenc_scheme), set by posenc_scheme_init */
  posenc_scheme_kind kind;
  /* ROPE: posenc_rope_from_config's or hand-filled params (head_dim = D of
   * q and k), and where the keys' rotation happens. */
  const posenc_rope_params* rope;
  posenc_rope_keys rope_keys;
  /* ALIBI: one slope per query head (posenc_alibi_slopes). */
  const double* alibi_slopes;
  int64_t num_alibi_slopes;
  /* T5: the learned table [num_buckets, H] (float32 or float64), the
   * bucketing's max_distance (>= 1) and direction. */
  const posenc_tensor* t5_table;
  int64_t t5_max_distance;
  posenc_t5_direction t5_direction;
  /* NAMED: a registered scheme name and its arguments. */
  const char* name;
  const posenc_scheme_arg* args;
  int64_t num_args;
} posenc_scheme;

/* kind NONE; rope_keys and t5_direction -1 (unset), every pointer NULL. */
POSENC_C_API void posenc_scheme_init(posenc_scheme* scheme);

/* ---- fused attention (flash_attention.h) ---- */

typedef int32_t posenc_mask; /* one of: */
enum { POSENC_MASK_CAUSAL = 0, POSENC_MASK_BIDIRECTIONAL = 1 };

/* The precision of P (before P . V) and of dS (before dQ = dS K and
 * dK = dS^T Q) in the fused kernels (flash_attention.h, FlashPrecision):
 * FLOAT32 (the default; error within 2x a plain float32 attention's), or
 * BFLOAT16: rounded to bfloat16 with float32 accumulation, as
 * FlashAttention-2 and torch's bfloat16 path do; it needs bfloat16 q, k, v
 * (POSENC_ERROR_INVALID_ARGUMENT naming "precision" otherwise). */
typedef int32_t posenc_precision; /* one of: */
enum { POSENC_PRECISION_FLOAT32 = 0, POSENC_PRECISION_BFLOAT16 = 1 };

typedef struct {
  size_t struct_size;   /* sizeof(posenc_attention_params), set by its _init */
  posenc_layout layout; /* of q, k, v and out */
  posenc_mask mask;
  int64_t sliding_window;      /* W >= 1, or 0 for none */
  double scale;                /* finite > 0, or 0 for 1/sqrt(D) */
  const posenc_scheme* scheme; /* NULL: no positional term */
  int64_t query_tile;          /* posenc_flash_attention: 0 = 64 */
  int64_t key_tile;            /* posenc_flash_attention: 0 = 64 */
  /* Explicit positions (NULL: queries at Sk - Sq + i, keys at j). Ids per
   * batch row or shared, or an offset. */
  const posenc_positions* query_positions;
  const posenc_positions* key_positions;
  /* The precision of the probabilities P and of dS where they enter the
   * matrix products (POSENC_PRECISION_*; _init: FLOAT32). */
  posenc_precision precision;
} posenc_attention_params;

/* Defaults: bshd, causal, no window, default scale, no scheme, tiles 64,
 * default positions, FLOAT32 precision. */
POSENC_C_API void posenc_attention_params_init(posenc_attention_params* params);

/* Prefill: q [B, Sq, H, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv], out
 * [B, Sq, H, Dv] in params->layout (queries bottom-right aligned, GQA when
 * H > Hkv). For 1..16 new tokens against a cache use posenc_attention_decode. */
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

/* ---- decode against a KV cache (flash_attention.h, FlashAttentionDecode) ---- */

/* Decode: Sq in [1, 16] new query tokens per sequence against Sk cached keys,
 * split-K over the context's threads (flash-decoding) with every fused
 * scheme. The cache is the caller's: k [B, Sk, Hkv, D] and v [B, Sk, Hkv, Dv]
 * are views of its first Sk rows (a cache of capacity C >= Sk in bshd has
 * strides {C*Hkv*D, Hkv*D, D, 1}; any strides, float32/bfloat16/float16/
 * float64). q [B, Sq, H, D], out [B, Sq, H, Dv] (H a multiple of Hkv). The
 * queries sit at Sk - Sq + i unless params->query_positions says otherwise.
 * With RoPE the kernel rotates the queries (pass them unrotated), and
 * scheme->rope_keys says whether the cached keys are already rotated
 * (PRE_ROTATED: each key was rotated at its position when it was written,
 * e.g. by posenc_rope_apply) or are rotated here (ROTATE).
 * lse: NULL, or float32 [B, H, Sq] receiving log-sum-exp of each row.
 * query_tile and key_tile are not used. Results do not depend on the
 * thread count and equal a plan's run. Memory: see "Memory" at the top of
 * this file (the plan is made on the first call with these params and
 * kept by the calling thread). */
POSENC_C_API posenc_status posenc_attention_decode(const posenc_context* ctx,
                                                   const posenc_attention_params* params,
                                                   const posenc_tensor* q, const posenc_tensor* k,
                                                   const posenc_tensor* v, const posenc_tensor* out,
                                                   const posenc_tensor* lse);

/* Decode prepared once, run every token (FlashInfer's plan / run split):
 * the scheme of params (and its layout, mask, window, scale, rope_keys) is
 * resolved for q with `heads` heads of head_dim and values of value_dim,
 * and what it needs from the scheme's params and tensors is copied: the
 * plan keeps no pointer into params. params->query_positions and
 * key_positions are not used: each run takes its own. A plan is immutable
 * and may be used by several threads at once. */
typedef struct posenc_decode_plan posenc_decode_plan;
POSENC_C_API posenc_status posenc_decode_plan_create(const posenc_attention_params* params,
                                                     int64_t heads, int64_t head_dim,
                                                     int64_t value_dim, posenc_decode_plan** out);
POSENC_C_API void posenc_decode_plan_destroy(posenc_decode_plan* plan); /* NULL: no-op */
/* One decode step: as posenc_attention_decode with the plan's params, and
 * the positions of this step (NULL: queries at Sk - Sq + i, keys at j).
 * Zero allocation: a run with the B, Sq, H, D and Dv of the previous run on
 * this thread and context allocates no memory, whatever Sk (the cache may
 * grow every step); tests/capi/alloc_count.c counts it. The scratch it
 * reuses is described under "Memory" above. */
POSENC_C_API posenc_status posenc_decode_plan_run(const posenc_context* ctx,
                                                  const posenc_decode_plan* plan,
                                                  const posenc_tensor* q, const posenc_tensor* k,
                                                  const posenc_tensor* v, const posenc_tensor* out,
                                                  const posenc_tensor* lse,
                                                  const posenc_positions* query_positions,
                                                  const posenc_positions* key_positions);

/* A paged KV cache (vLLM's block table; FlashInfer's NHD pages): the keys
 * of sequence b are its first seq_lens[b] tokens, token j at slot
 * j % page_size of page block_table[b * max_pages + j / page_size].
 * k_pages [num_pages, page_size, Hkv, D] and v_pages [num_pages, page_size,
 * Hkv, Dv], any strides (an HND pool [num_pages, Hkv, page_size, D] is the
 * same view with permuted strides), any float dtype. The tables are the
 * caller's, read during the call only. */
typedef struct {
  size_t struct_size; /* sizeof(posenc_kv_pages), set by posenc_kv_pages_init */
  posenc_tensor k_pages;
  posenc_tensor v_pages;
  const int32_t* block_table; /* [batch, max_pages] page ids */
  int64_t max_pages;          /* entries per block_table row */
  const int32_t* seq_lens;    /* [batch] keys per sequence, each >= Sq */
} posenc_kv_pages;

/* Zeroes *pages and sets its struct_size. */
POSENC_C_API void posenc_kv_pages_init(posenc_kv_pages* pages);

/* One decode step against a paged cache: as posenc_decode_plan_run, each
 * sequence with its own length (queries by default at seq_lens[b] - Sq + i;
 * explicit key ids per row are [B, max_b seq_lens[b]]). Blocks of keys
 * never cross a page: pages of 64 tokens or a multiple decode at the dense
 * cache's speed, smaller pages in blocks of one page. Zero allocation as
 * posenc_decode_plan_run. A page id outside [0, num_pages) among the pages
 * a sequence uses ("cache.block_table[b][i]"), a length outside
 * [Sq, max_pages * page_size] ("cache.seq_lens[b]") or a pool that does
 * not fit q, the plan or the other pool is POSENC_ERROR_INVALID_ARGUMENT. */
POSENC_C_API posenc_status posenc_decode_plan_run_paged(
    const posenc_context* ctx, const posenc_decode_plan* plan, const posenc_tensor* q,
    const posenc_kv_pages* cache, const posenc_tensor* out, const posenc_tensor* lse,
    const posenc_positions* query_positions, const posenc_positions* key_positions);

/* Re-rotates RoPE keys in a cache in place from positions p to p + delta
 * (e.g. delta = -n after evicting the first n tokens): k rank 4 in layout,
 * rotated forward at their positions. params as for posenc_rope_apply with
 * attention_factor 1 (a factor would be applied twice). Error: one extra
 * rotation's rounding against rotating from scratch at p + delta. */
POSENC_C_API posenc_status posenc_rope_shift_keys(const posenc_context* ctx,
                                                  const posenc_rope_params* params,
                                                  const posenc_tensor* k, posenc_layout layout,
                                                  int64_t delta);

/* A cos/sin cache (vLLM's cos_sin_cache): cache [max_positions, rotary_dim]
 * (any float dtype), row p = cos(p inv_freq) | sin(p inv_freq), times the
 * attention factor. Fill it once; posenc_rope_apply_with_cache then rotates
 * by looking angles up instead of computing them (positions in
 * [0, max_positions)). */
POSENC_C_API posenc_status posenc_rope_cos_sin_cache(const posenc_context* ctx,
                                                     const posenc_rope_params* params,
                                                     const posenc_tensor* cache);
POSENC_C_API posenc_status posenc_rope_apply_with_cache(
    const posenc_context* ctx, const posenc_rope_params* params, const posenc_tensor* x,
    posenc_layout layout, const posenc_positions* positions, const posenc_tensor* cache,
    posenc_rope_direction direction, const posenc_tensor* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* POSENC_C_H_ */
