// The C API (include/posenc/c.h), part 1: errors, version, tensors, context,
// RoPE, model configs, sinusoidal tables, ALiBi and T5. A front end over the
// public C++ API (docs/INTERNALS.md, "C API"): every entry point converts
// its arguments (c_api_internal.h), calls the C++ function and returns a
// status through Guard, which catches every exception (std::bad_alloc
// included) so that none crosses the C boundary; the message goes to a
// thread-local buffer read by posenc_last_error().
#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "c_api_internal.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "posenc/rope_scaling.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/version.h"

namespace posenc::capi {
namespace {

thread_local std::string t_last_error;

}  // namespace

posenc_status SetError(posenc_status status, const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {  // no memory even for the message: leave it empty, keep the status
    t_last_error.clear();
  }
  return status;
}

void ClearError() noexcept { t_last_error.clear(); }

posenc_status CurrentExceptionStatus() noexcept {
  try {
    throw;
  } catch (const InvalidArgument& e) {
    return SetError(POSENC_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const ConfigError& e) {
    return SetError(POSENC_ERROR_CONFIG, e.what());
  } catch (const IoError& e) {
    return SetError(POSENC_ERROR_IO, e.what());
  } catch (const std::bad_alloc&) {
    return SetError(POSENC_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return SetError(POSENC_ERROR_INTERNAL, e.what());
  } catch (...) {
    return SetError(POSENC_ERROR_INTERNAL, "unknown exception");
  }
}

void RequirePointer(const void* p, std::string_view arg, std::string_view expected) {
  if (p == nullptr) throw InvalidArgument(ArgMessage(arg, "NULL", expected));
}

const Context& ContextOf(const posenc_context* ctx) {
  if (ctx != nullptr) return ctx->context;
  thread_local const Context default_context(1, Backend::kAuto);
  return default_context;
}

DType DTypeOf(posenc_dtype dtype, std::string_view arg) {
  return EnumOf<DType>(static_cast<int>(dtype), 4, arg,
                       "a posenc_dtype: POSENC_FLOAT32 (0), POSENC_FLOAT64 (1), "
                       "POSENC_BFLOAT16 (2) or POSENC_FLOAT16 (3)");
}

TensorView ViewOf(const posenc_tensor* t, std::string_view arg) {
  CheckStructSize(t, arg, "posenc_tensor_contiguous or posenc_tensor_strided");
  TensorView v;
  v.data = t->data;
  if (t->dtype < 0 || t->dtype >= 4) DTypeOf(t->dtype, std::string(arg) + ".dtype");  // throws
  v.dtype = static_cast<DType>(t->dtype);
  if (t->rank < 1 || t->rank > POSENC_MAX_RANK) {
    FailArgument(std::string(arg) + ".rank", t->rank, "a rank in [1, 6]");
  }
  v.rank = t->rank;
  for (int i = 0; i < t->rank; ++i) {
    v.shape[static_cast<std::size_t>(i)] = t->shape[i];
    v.strides[static_cast<std::size_t>(i)] = t->strides[i];
  }
  return v;
}

Positions PositionsOf(const posenc_positions* p, std::string_view arg) {
  CheckStructSize(p, arg, "posenc_positions_ids or posenc_positions_offset");
  return p->ids != nullptr ? Positions::Ids(p->ids, p->count) : Positions::Offset(p->offset);
}

AttentionLayout LayoutOf(posenc_layout layout) {
  return EnumOf<AttentionLayout>(static_cast<int>(layout), 2, "layout",
                                 "POSENC_LAYOUT_BSHD (0) or POSENC_LAYOUT_BHSD (1)");
}

RopeParams& ThreadRopeParams() {
  thread_local RopeParams r;
  return r;
}

const RopeParams& RopeParamsOf(const posenc_rope_params* p) {
  CheckStructSize(p, "params", "posenc_rope_params_init");
  RopeParams& r = ThreadRopeParams();
  r.head_dim = p->head_dim;
  r.rotary_dim = p->rotary_dim;
  r.theta = p->theta;
  // No default: the wrong pairing gives plausible but wrong outputs.
  if (p->pairing < 0 || p->pairing > 1) {
    FailArgument("params.pairing", p->pairing,
                 "POSENC_PAIRING_HALF_SPLIT (0, HF checkpoints) or POSENC_PAIRING_INTERLEAVED (1, "
                 "GGUF llama-family and GPT-J); -1 is what posenc_rope_params_init leaves: it "
                 "must be set");
  }
  r.pairing = static_cast<RopePairing>(p->pairing);
  if (p->numerics < 0 || p->numerics > 1) {
    FailArgument("params.numerics", p->numerics,
                 "POSENC_NUMERICS_ACCURATE (0) or POSENC_NUMERICS_HF (1)");
  }
  r.numerics = static_cast<RopeNumerics>(p->numerics);
  if (p->inv_freq == nullptr) {
    if (p->inv_freq_count != 0) {
      FailArgument("params.inv_freq",
                   "NULL with inv_freq_count " + std::to_string(p->inv_freq_count),
                   "a buffer of inv_freq_count frequencies (or count 0 for the default table)");
    }
    r.frequencies.inv_freq.clear();  // keeps its capacity
  } else {
    if (p->inv_freq_count < 1 || p->inv_freq_count > 32768) {
      FailArgument("params.inv_freq_count", p->inv_freq_count,
                   "rotary_dim/2 frequencies, in [1, 32768]");
    }
    r.frequencies.inv_freq.assign(p->inv_freq, p->inv_freq + p->inv_freq_count);
  }
  r.frequencies.attention_factor = p->attention_factor;
  return r;
}

}  // namespace posenc::capi

using posenc::FailArgument;
using posenc::capi::ContextOf;
using posenc::capi::Guard;
using posenc::capi::RequirePointer;
using posenc::capi::ViewOf;

extern "C" {

const char* posenc_status_name(posenc_status status) {
  switch (status) {
    case POSENC_OK:
      return "ok";
    case POSENC_ERROR_INVALID_ARGUMENT:
      return "invalid_argument";
    case POSENC_ERROR_CONFIG:
      return "config";
    case POSENC_ERROR_IO:
      return "io";
    case POSENC_ERROR_OUT_OF_MEMORY:
      return "out_of_memory";
    case POSENC_ERROR_INTERNAL:
      return "internal";
  }
  return "unknown";
}

const char* posenc_last_error(void) { return posenc::capi::t_last_error.c_str(); }

const char* posenc_version(void) { return POSENC_VERSION_STRING; }

int32_t posenc_version_number(void) { return POSENC_VERSION_NUMBER; }

posenc_status posenc_tensor_contiguous(void* data, posenc_dtype dtype, int32_t rank,
                                       const int64_t* shape, posenc_tensor* out) {
  // Row-major strides, then posenc_tensor_strided checks and fills. A bad
  // shape only makes these strides meaningless (wrapping, never UB): it is
  // refused there before they are used.
  int64_t strides[POSENC_MAX_RANK] = {};
  if (shape != nullptr && rank >= 1 && rank <= POSENC_MAX_RANK) {
    std::uint64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = static_cast<std::int64_t>(stride);
      stride *= static_cast<std::uint64_t>(shape[i]);
    }
  }
  return posenc_tensor_strided(data, dtype, rank, shape, strides, out);
}

posenc_status posenc_tensor_strided(void* data, posenc_dtype dtype, int32_t rank,
                                    const int64_t* shape, const int64_t* strides,
                                    posenc_tensor* out) {
  return Guard([&] {
    RequirePointer(out, "out", "a posenc_tensor to fill");
    RequirePointer(shape, "shape", "an array of rank sizes");
    RequirePointer(strides, "strides", "an array of rank strides (in elements)");
    posenc::capi::DTypeOf(dtype, "dtype");
    posenc::Require(rank >= 1 && rank <= POSENC_MAX_RANK, "rank", rank, "a rank in [1, 6]");
    posenc_tensor t{};
    t.struct_size = sizeof(posenc_tensor);
    t.data = data;
    t.dtype = dtype;
    t.rank = rank;
    for (int i = 0; i < rank; ++i) {
      if (shape[i] < 1) {
        FailArgument("shape[" + std::to_string(i) + "]", shape[i], "a size >= 1");
      }
      if (strides[i] < 0) {
        FailArgument("strides[" + std::to_string(i) + "]", strides[i],
                     "a stride >= 0 (in elements)");
      }
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
    *out = t;
  });
}

posenc_status posenc_positions_ids(const int64_t* ids, int64_t count, posenc_positions* out) {
  return Guard([&] {
    RequirePointer(out, "out", "a posenc_positions to fill");
    RequirePointer(ids, "ids", "an array of count positions");
    posenc::Require(count >= 1, "count", count, "a count >= 1");
    posenc_positions p{};
    p.struct_size = sizeof(posenc_positions);
    p.ids = ids;
    p.count = count;
    *out = p;
  });
}

posenc_status posenc_positions_offset(int64_t offset, posenc_positions* out) {
  return Guard([&] {
    RequirePointer(out, "out", "a posenc_positions to fill");
    posenc::Require(offset >= 0, "offset", offset, "a position offset >= 0");
    posenc_positions p{};
    p.struct_size = sizeof(posenc_positions);
    p.offset = offset;
    *out = p;
  });
}

posenc_status posenc_context_create(int32_t num_threads, posenc_backend backend,
                                    posenc_context** out) {
  return posenc_context_create_on(num_threads, backend, POSENC_WORKERS_POOL, out);
}

posenc_status posenc_context_create_on(int32_t num_threads, posenc_backend backend,
                                       posenc_workers workers, posenc_context** out) {
  return Guard([&] {
    RequirePointer(out, "out", "a posenc_context* to fill");
    *out = nullptr;
    const auto b = posenc::capi::EnumOf<posenc::Backend>(
        static_cast<int>(backend), 3, "backend",
        "POSENC_BACKEND_AUTO (0), POSENC_BACKEND_SCALAR (1) or POSENC_BACKEND_SIMD (2)");
    const auto w = posenc::capi::EnumOf<posenc::Workers>(
        static_cast<int>(workers), 2, "workers",
        "POSENC_WORKERS_POOL (0) or POSENC_WORKERS_OPENMP (1)");
    *out = new posenc_context{posenc::Context(num_threads, b, w)};
  });
}

int32_t posenc_openmp_available(void) { return posenc::OpenMPAvailable() ? 1 : 0; }

void posenc_context_destroy(posenc_context* ctx) { delete ctx; }

posenc_status posenc_context_trim(const posenc_context* ctx) {
  return Guard([&] {
    posenc::capi::ThreadRopeParams() = posenc::RopeParams{};
    posenc::ReleaseThreadScratch(ContextOf(ctx));
  });
}

void posenc_rope_params_init(posenc_rope_params* params) {
  if (params == nullptr) return;
  *params = posenc_rope_params{};
  params->struct_size = sizeof(posenc_rope_params);
  params->theta = 10000.0;
  params->pairing = -1;  // required (c.h)
  params->numerics = POSENC_NUMERICS_ACCURATE;
  params->attention_factor = 1.0;
}

posenc_status posenc_rope_apply(const posenc_context* ctx, const posenc_rope_params* params,
                                const posenc_tensor* x, posenc_layout layout,
                                const posenc_positions* positions, posenc_rope_direction direction,
                                const posenc_tensor* out) {
  return Guard([&] {
    const posenc::RopeParams& p = posenc::capi::RopeParamsOf(params);
    const posenc::TensorView xv = ViewOf(x, "x");
    const auto dir = posenc::capi::EnumOf<posenc::RopeDirection>(
        static_cast<int>(direction), 2, "direction",
        "POSENC_DIRECTION_FORWARD (0) or POSENC_DIRECTION_INVERSE (1)");
    posenc::TensorView ov;
    if (out != nullptr) ov = ViewOf(out, "out");
    posenc::ApplyRope(p, xv, posenc::capi::LayoutOf(layout),
                      posenc::capi::PositionsOf(positions, "positions"), dir,
                      out != nullptr ? &ov : nullptr, ContextOf(ctx));
  });
}

posenc_status posenc_rope_apply_qk(const posenc_context* ctx, const posenc_rope_params* params,
                                   const posenc_tensor* q, const posenc_tensor* k,
                                   posenc_layout layout, const posenc_positions* positions,
                                   posenc_rope_direction direction, const posenc_tensor* q_out,
                                   const posenc_tensor* k_out) {
  return Guard([&] {
    const posenc::RopeParams& p = posenc::capi::RopeParamsOf(params);
    const posenc::TensorView qv = ViewOf(q, "q"), kv = ViewOf(k, "k");
    const auto dir = posenc::capi::EnumOf<posenc::RopeDirection>(
        static_cast<int>(direction), 2, "direction",
        "POSENC_DIRECTION_FORWARD (0) or POSENC_DIRECTION_INVERSE (1)");
    posenc::TensorView qo, ko;
    if (q_out != nullptr) qo = ViewOf(q_out, "q_out");
    if (k_out != nullptr) ko = ViewOf(k_out, "k_out");
    posenc::ApplyRopeQK(p, qv, kv, posenc::capi::LayoutOf(layout),
                        posenc::capi::PositionsOf(positions, "positions"), dir,
                        q_out != nullptr ? &qo : nullptr, k_out != nullptr ? &ko : nullptr,
                        ContextOf(ctx));
  });
}

posenc_status posenc_rope_apply_varlen(const posenc_context* ctx, const posenc_rope_params* params,
                                       const posenc_tensor* x, const int64_t* cu_seqlens,
                                       int64_t num_seqs, const int64_t* seq_offsets,
                                       posenc_rope_direction direction, const posenc_tensor* out) {
  return Guard([&] {
    const posenc::RopeParams& p = posenc::capi::RopeParamsOf(params);
    const posenc::TensorView xv = ViewOf(x, "x");
    RequirePointer(cu_seqlens, "cu_seqlens", "num_seqs + 1 offsets");
    const auto dir = posenc::capi::EnumOf<posenc::RopeDirection>(
        static_cast<int>(direction), 2, "direction",
        "POSENC_DIRECTION_FORWARD (0) or POSENC_DIRECTION_INVERSE (1)");
    posenc::TensorView ov;
    if (out != nullptr) ov = ViewOf(out, "out");
    posenc::ApplyRopeVarlen(p, xv, cu_seqlens, num_seqs, seq_offsets, dir,
                            out != nullptr ? &ov : nullptr, ContextOf(ctx));
  });
}

posenc_status posenc_rope_cos_sin(const posenc_context* ctx, const posenc_rope_params* params,
                                  const posenc_positions* positions, int64_t count,
                                  const posenc_tensor* cos, const posenc_tensor* sin) {
  return Guard([&] {
    const posenc::RopeParams& p = posenc::capi::RopeParamsOf(params);
    posenc::RopeCosSin(p, posenc::capi::PositionsOf(positions, "positions"), count,
                       ViewOf(cos, "cos"), ViewOf(sin, "sin"), ContextOf(ctx));
  });
}

posenc_status posenc_rope_default_inv_freq(int64_t rotary_dim, double theta,
                                           posenc_rope_numerics numerics, double* out,
                                           int64_t capacity) {
  return Guard([&] {
    const auto n = posenc::capi::EnumOf<posenc::RopeNumerics>(
        static_cast<int>(numerics), 2, "numerics",
        "POSENC_NUMERICS_ACCURATE (0) or POSENC_NUMERICS_HF (1)");
    const posenc::RopeFrequencies f = posenc::RopeDefaultFrequencies(rotary_dim, theta, n);
    const auto size = static_cast<std::int64_t>(f.inv_freq.size());
    if (capacity < size) {
      FailArgument("capacity", capacity, "at least rotary_dim/2 = " + std::to_string(size));
    }
    RequirePointer(out, "out", "a buffer of rotary_dim/2 doubles");
    std::copy(f.inv_freq.begin(), f.inv_freq.end(), out);
  });
}

void posenc_model_rope_init(posenc_model_rope* out) {
  if (out == nullptr) return;
  *out = posenc_model_rope{};
  out->struct_size = sizeof(posenc_model_rope);
  posenc_rope_params_init(&out->params);
}

posenc_status posenc_rope_from_config(const char* path, int64_t seq_len, const char* layer_type,
                                      posenc_rope_numerics numerics, posenc_model_rope* out,
                                      double* inv_freq, int64_t capacity) {
  return Guard([&] {
    RequirePointer(path, "path", "the path of a config.json or .gguf file");
    posenc::capi::CheckStructSize(out, "out", "posenc_model_rope_init");
    const auto n = posenc::capi::EnumOf<posenc::RopeNumerics>(
        static_cast<int>(numerics), 2, "numerics",
        "POSENC_NUMERICS_ACCURATE (0) or POSENC_NUMERICS_HF (1)");
    const posenc::ModelConfig cfg = posenc::LoadModelConfig(path);
    posenc_model_rope r;
    posenc_model_rope_init(&r);
    const auto copy = [](char* dst, std::size_t size, const std::string& s) {
      const std::size_t len = std::min(size - 1, s.size());
      std::memcpy(dst, s.data(), len);
      dst[len] = '\0';
    };
    copy(r.model_type, sizeof(r.model_type), cfg.model_type);
    copy(r.format, sizeof(r.format), cfg.format);
    r.num_heads = cfg.num_heads;
    r.num_kv_heads = cfg.num_kv_heads;
    r.head_dim = cfg.head_dim;
    r.softmax_scale = cfg.deepseek_softmax_scale.value_or(0.0);
    r.max_position_embeddings = cfg.max_position_embeddings;
    r.original_max_position_embeddings = cfg.original_max_position_embeddings;
    std::string warnings;
    for (const std::string& w : cfg.warnings) warnings += w + "\n";
    r.num_warnings = static_cast<int32_t>(cfg.warnings.size());
    copy(r.warnings, sizeof(r.warnings), warnings);
    for (const posenc::LayerRope& l : cfg.layers) {
      if (r.num_layer_types == POSENC_MAX_LAYER_TYPES) break;
      copy(r.layer_types[r.num_layer_types++], sizeof(r.layer_types[0]), l.layer_type);
    }
    if (cfg.alibi) {
      r.is_alibi = 1;
      r.alibi_heads = cfg.alibi->num_heads;
      r.alibi_max_bias = cfg.alibi->max_bias;
      *out = r;
      return;
    }
    const std::string layer = layer_type != nullptr ? layer_type : "";
    const posenc::LayerRope& l = posenc::SelectLayerRope(cfg, layer);
    const posenc::RopeScaling s = posenc::ModelRopeScaling(cfg, l.layer_type, seq_len, n);
    copy(r.rope_type, sizeof(r.rope_type), std::string(posenc::RopeScalingTypeName(s.type)));
    const auto sections = std::min<std::size_t>(l.mrope_section.size(), 4);
    r.num_mrope_sections = static_cast<int32_t>(sections);
    std::copy_n(l.mrope_section.begin(), sections, r.mrope_section);
    r.mrope_interleaved = sections > 0 && l.mrope_layout == posenc::MRopeLayout::kInterleaved;
    r.params.head_dim = cfg.head_dim;
    r.params.rotary_dim = s.rotary_dim;
    r.params.theta = l.scaling.theta;
    r.params.pairing = cfg.pairing == posenc::RopePairing::kInterleaved ? POSENC_PAIRING_INTERLEAVED
                                                                        : POSENC_PAIRING_HALF_SPLIT;
    r.params.numerics = static_cast<posenc_rope_numerics>(numerics);
    r.params.attention_factor = s.frequencies.attention_factor;
    const auto size = static_cast<std::int64_t>(s.frequencies.inv_freq.size());
    r.params.inv_freq_count = size;
    if (inv_freq != nullptr || capacity != 0) {
      if (capacity < size) {
        FailArgument("capacity", capacity,
                     "at least rotary_dim/2 = " + std::to_string(size) +
                         " (or 0 with inv_freq NULL to query)");
      }
      RequirePointer(inv_freq, "inv_freq", "a buffer of capacity doubles");
      std::copy(s.frequencies.inv_freq.begin(), s.frequencies.inv_freq.end(), inv_freq);
      r.params.inv_freq = inv_freq;
    }
    *out = r;
  });
}

posenc_status posenc_sinusoidal_table(const posenc_context* ctx, int64_t dim, double base,
                                      posenc_sinusoidal_layout layout, int64_t offset,
                                      int64_t num_positions, const posenc_tensor* out) {
  return Guard([&] {
    posenc::SinusoidalParams p;
    p.dim = dim;
    p.base = base;
    p.layout = posenc::capi::EnumOf<posenc::SinusoidalLayout>(
        static_cast<int>(layout), 3, "layout",
        "POSENC_SINUSOIDAL_INTERLEAVED (0), POSENC_SINUSOIDAL_SPLIT (1) or "
        "POSENC_SINUSOIDAL_SPLIT_T2T (2)");
    posenc::SinusoidalTable(p, offset, num_positions, ViewOf(out, "out"), ContextOf(ctx));
  });
}

posenc_status posenc_alibi_slopes(int64_t num_heads, double max_bias,
                                  posenc_alibi_convention convention, double* out,
                                  int64_t capacity) {
  return Guard([&] {
    posenc::AlibiParams p;
    p.num_heads = num_heads;
    p.max_bias = max_bias;
    p.convention = posenc::capi::EnumOf<posenc::AlibiSlopeConvention>(
        static_cast<int>(convention), 2, "convention",
        "POSENC_ALIBI_REFERENCE (0) or POSENC_ALIBI_BLOOM_FLOAT32 (1)");
    const std::vector<double> slopes = posenc::AlibiSlopes(p);
    if (capacity < num_heads) {
      FailArgument("capacity", capacity, "at least num_heads = " + std::to_string(num_heads));
    }
    RequirePointer(out, "out", "a buffer of num_heads doubles");
    std::copy(slopes.begin(), slopes.end(), out);
  });
}

posenc_status posenc_alibi_bias_tile(const posenc_context* ctx, const double* slopes,
                                     int64_t num_slopes, int64_t query_len, int64_t key_len,
                                     posenc_alibi_form form, int64_t head, int64_t row_begin,
                                     int64_t row_end, int64_t col_begin, int64_t col_end,
                                     const posenc_tensor* out) {
  return Guard([&] {
    RequirePointer(slopes, "slopes", "num_slopes slopes (one per head)");
    posenc::Require(num_slopes >= 1 && num_slopes <= posenc::kMaxAlibiHeads, "num_slopes",
                    num_slopes, "a head count in [1, 65536]");
    posenc::AlibiGeometry g;
    g.query_len = query_len;
    g.key_len = key_len;
    g.form = posenc::capi::EnumOf<posenc::AlibiForm>(
        static_cast<int>(form), 2, "form", "POSENC_ALIBI_CAUSAL (0) or POSENC_ALIBI_SYMMETRIC (1)");
    posenc::AlibiTile t;
    t.head = head;
    t.row_begin = row_begin;
    t.row_end = row_end;
    t.col_begin = col_begin;
    t.col_end = col_end;
    posenc::AlibiBiasTile(std::vector<double>(slopes, slopes + num_slopes), g, t,
                          ViewOf(out, "out"), ContextOf(ctx));
  });
}

posenc_status posenc_t5_buckets(int64_t num_buckets, int64_t max_distance,
                                posenc_t5_direction direction, int64_t first, int64_t count,
                                int64_t* out) {
  return Guard([&] {
    posenc::T5BucketParams p;
    p.num_buckets = num_buckets;
    p.max_distance = max_distance;
    p.direction = posenc::capi::EnumOf<posenc::T5Direction>(
        static_cast<int>(direction), 2, "direction",
        "POSENC_T5_BIDIRECTIONAL (0) or POSENC_T5_CAUSAL (1)");
    const std::vector<std::int64_t> b = posenc::T5Buckets(p, first, count);
    RequirePointer(out, "out", "a buffer of count buckets");
    std::copy(b.begin(), b.end(), out);
  });
}

}  // extern "C"
