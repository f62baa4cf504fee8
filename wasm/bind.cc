// wasm/bind.cc: posenc in the browser (embind). The front end of the report's
// playground: each function calls the public API (include/posenc/) exactly as
// the CLI does, on one thread with the scalar reference kernels, and returns
// plain JavaScript values. wasm/posenc_api.js wraps them as window.posenc
// (camelCase names of the Python module, {shape, data} results, Error on bad
// input); this file only converts.
//
// Every function returns {ok: true, ...} or {ok: false, kind, message} with
// the message posenc's own (the CLI prints it after "posenc: error: "):
// embind does not turn a C++ exception into a JavaScript Error, so errors
// travel as values and the JS wrapper throws them.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/context.h"
#include "posenc/demo.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "posenc/positions.h"
#include "posenc/relative.h"
#include "posenc/rope.h"
#include "posenc/rope_scaling.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/tensor.h"
#include "posenc/version.h"

namespace posenc::wasm {
namespace {

using emscripten::val;

// One context for the module: the calling thread only (no pthreads in this
// build) and the scalar reference kernels.
const Context& Ctx() {
  static const Context ctx(1, Backend::kScalar);
  return ctx;
}

// A copy of `values` as a new JS typed array (`type`: "Float32Array", ...):
// the data outlives the wasm heap's next growth.
template <typename T>
val TypedArray(const char* type, const std::vector<T>& values) {
  return val::global(type).new_(emscripten::typed_memory_view(values.size(), values.data()));
}

val Shape(std::initializer_list<std::int64_t> dims) {
  val a = val::array();
  for (std::int64_t d : dims) a.call<void>("push", static_cast<double>(d));
  return a;
}

val Ok() {
  val r = val::object();
  r.set("ok", true);
  return r;
}

// {ok: true, shape, data: a `type` copy of values}.
template <typename T>
val TensorResult(std::initializer_list<std::int64_t> shape, const char* type,
                 const std::vector<T>& values) {
  val r = Ok();
  r.set("shape", Shape(shape));
  r.set("data", TypedArray(type, values));
  return r;
}

// Runs fn() (which fills an {ok: true} object) and turns posenc's exceptions
// into {ok: false, kind, message}.
template <typename Fn>
val Guard(Fn&& fn) {
  val r = val::object();
  r.set("ok", false);
  try {
    return fn();
  } catch (const InvalidArgument& e) {
    r.set("kind", std::string("error"));
    r.set("message", std::string(e.what()));
  } catch (const ConfigError& e) {
    r.set("kind", std::string("config error"));
    r.set("message", std::string(e.what()));
  } catch (const IoError& e) {
    r.set("kind", std::string("I/O error"));
    r.set("message", std::string(e.what()));
  } catch (const std::bad_alloc&) {
    r.set("kind", std::string("error"));
    r.set("message", std::string("out of memory (the request needs more memory than the page "
                                 "has; use smaller sizes)"));
  } catch (const std::exception& e) {
    r.set("kind", std::string("internal error"));
    r.set("message", std::string(e.what()));
  }
  return r;
}

// A JS number that must be an integer (named `arg` in the error).
std::int64_t Int(double v, const char* arg) {
  Require(std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 9007199254740991.0, arg, v,
          "an integer");
  return static_cast<std::int64_t>(v);
}

std::vector<std::int64_t> Ints(const val& array, const char* arg) {
  const auto n = array["length"].as<unsigned>();
  std::vector<std::int64_t> out(n);
  for (unsigned i = 0; i < n; ++i) out[i] = Int(array[i].as<double>(), arg);
  return out;
}

std::vector<double> Doubles(const val& array) { return emscripten::vecFromJSArray<double>(array); }

SinusoidalParams SinusoidalOf(double dim, double base, const std::string& layout) {
  SinusoidalParams p;
  p.dim = Int(dim, "dim");
  p.base = base;
  p.layout = ParseSinusoidalLayout(layout, "layout");
  ValidateSinusoidalParams(p);
  return p;
}

// sinusoidalTable(numPositions, dim, base, layout, offset): float32 [N, dim].
val SinusoidalTableJs(double num_positions, double dim, double base, std::string layout,
                      double offset) {
  return Guard([&] {
    const SinusoidalParams p = SinusoidalOf(dim, base, layout);
    const std::int64_t n = Int(num_positions, "num_positions");
    Require(n >= 1 && n <= (std::int64_t{1} << 16), "num_positions", n,
            "a count in [1, 65536] (the playground's limit)");
    Require(n * p.dim <= (std::int64_t{1} << 22), "num_positions * dim", n * p.dim,
            "at most 2^22 values (the playground's limit)");
    std::vector<float> data(static_cast<std::size_t>(n * p.dim));
    SinusoidalTable(p, Int(offset, "offset"), n,
                    TensorView::Contiguous(data.data(), DType::kFloat32, {n, p.dim}), Ctx());
    return TensorResult({n, p.dim}, "Float32Array", data);
  });
}

// sinusoidalInvFreq(dim, base, layout): float64 [ceil(dim / 2)].
val SinusoidalInvFreqJs(double dim, double base, std::string layout) {
  return Guard([&] {
    const std::vector<double> inv = SinusoidalInvFreq(SinusoidalOf(dim, base, layout));
    return TensorResult({static_cast<std::int64_t>(inv.size())}, "Float64Array", inv);
  });
}

val PairsOf(const RopeScaling& s) {
  val pairs = val::array();
  for (const RopePairInfo& pair : s.pairs) {
    val e = val::object();
    e.set("index", static_cast<double>(pair.index));
    e.set("invFreq", pair.inv_freq);
    e.set("defaultInvFreq", pair.default_inv_freq);
    e.set("wavelength", pair.wavelength);
    e.set("ratioToDefault", pair.ratio_to_default);
    e.set("region", std::string(RopePairRegionName(pair.region)));
    pairs.call<void>("push", e);
  }
  return pairs;
}

// ropeInvFreq(configJson, seqLen, layerType, numerics): the frequencies and
// scaling a HF config.json defines (what `posenc inspect --json` prints).
val RopeInvFreqJs(std::string config_json, double seq_len, std::string layer_type,
                  std::string numerics) {
  return Guard([&] {
    const ModelConfig config = ParseModelConfig(config_json, "config");
    const std::int64_t len = Int(seq_len, "seq_len");
    Require(len >= 0 && len <= kMaxPosition + 1, "seq_len", len, "a length in [0, 2^24]");
    const RopeNumerics num = ParseRopeNumerics(numerics, "numerics");
    const LayerRope& layer = SelectLayerRope(config, layer_type);
    const RopeScaling s = ModelRopeScaling(config, layer_type, len, num);
    const std::vector<double>& inv = s.frequencies.inv_freq;
    val r = TensorResult({static_cast<std::int64_t>(inv.size())}, "Float64Array", inv);
    r.set("attentionFactor", s.frequencies.attention_factor);
    r.set("ropeType", std::string(RopeScalingTypeName(s.type)));
    r.set("modelType", config.model_type);
    r.set("headDim", static_cast<double>(s.head_dim));
    r.set("rotaryDim", static_cast<double>(s.rotary_dim));
    r.set("theta", layer.scaling.theta);
    r.set("factor", s.factor);
    r.set("effectiveTheta", s.effective_theta);
    r.set("pairing", std::string(RopePairingName(config.pairing)));
    r.set("maxPositionEmbeddings", static_cast<double>(config.max_position_embeddings));
    r.set("originalMaxPositionEmbeddings",
          static_cast<double>(config.original_max_position_embeddings));
    r.set("yarnCorrectionRange", val::array(std::vector<double>{s.yarn_low, s.yarn_high}));
    r.set("pairs", PairsOf(s));
    val warnings = val::array();
    for (const std::string& w : config.warnings) warnings.call<void>("push", w);
    r.set("warnings", warnings);
    return r;
  });
}

// ropeCosSin(positions, headDim, theta, rotaryDim, pairing, numerics, invFreq,
// attentionFactor): float32 cos and sin [N, rotary_dim] in HF's layout.
val RopeCosSinJs(val positions, double head_dim, double theta, double rotary_dim,
                 std::string pairing, std::string numerics, val inv_freq, double attention_factor) {
  return Guard([&] {
    RopeParams p;
    p.head_dim = Int(head_dim, "head_dim");
    p.rotary_dim = Int(rotary_dim, "rotary_dim");
    p.theta = theta;
    p.pairing = ParseRopePairing(pairing, "pairing");
    p.numerics = ParseRopeNumerics(numerics, "numerics");
    if (!inv_freq.isNull() && !inv_freq.isUndefined()) {
      p.frequencies.inv_freq = Doubles(inv_freq);
    }
    p.frequencies.attention_factor = attention_factor;
    ValidateRopeParams(p);
    const std::vector<std::int64_t> ids = Ints(positions, "positions");
    const auto n = static_cast<std::int64_t>(ids.size());
    Require(n >= 1 && n <= (std::int64_t{1} << 16), "positions", n,
            "between 1 and 65536 positions (the playground's limit)");
    const std::int64_t rd = p.EffectiveRotaryDim();
    std::vector<float> cos(static_cast<std::size_t>(n * rd)), sin(cos.size());
    RopeCosSin(p, Positions::Ids(ids.data(), n), n,
               TensorView::Contiguous(cos.data(), DType::kFloat32, {n, rd}),
               TensorView::Contiguous(sin.data(), DType::kFloat32, {n, rd}), Ctx());
    val r = Ok();
    r.set("shape", Shape({n, rd}));
    r.set("cos", TypedArray("Float32Array", cos));
    r.set("sin", TypedArray("Float32Array", sin));
    return r;
  });
}

// alibiSlopes(numHeads, maxBias, convention): float64 [H].
val AlibiSlopesJs(double num_heads, double max_bias, std::string convention) {
  return Guard([&] {
    AlibiParams p;
    p.num_heads = Int(num_heads, "num_heads");
    p.max_bias = max_bias;
    p.convention = ParseAlibiSlopeConvention(convention, "convention");
    ValidateAlibiParams(p);
    const std::vector<double> slopes = AlibiSlopes(p);
    return TensorResult({p.num_heads}, "Float64Array", slopes);
  });
}

// alibiBias(numHeads, length, maxBias, form): float64 [H, L, L] (the CLI's
// dtype); masked (future) keys of the causal form are -inf.
val AlibiBiasJs(double num_heads, double length, double max_bias, std::string form) {
  return Guard([&] {
    AlibiParams p;
    p.num_heads = Int(num_heads, "num_heads");
    p.max_bias = max_bias;
    ValidateAlibiParams(p);
    const std::int64_t len = Int(length, "length");
    Require(len >= 1 && len <= 4096, "length", len,
            "a length in [1, 4096] (the playground's limit)");
    Require(p.num_heads * len * len <= (std::int64_t{1} << 22), "num_heads * length^2",
            p.num_heads * len * len, "at most 2^22 cells (the playground's limit)");
    AlibiGeometry g;
    g.query_len = len;
    g.key_len = len;
    g.form = ParseAlibiForm(form, "form");
    std::vector<double> data(static_cast<std::size_t>(p.num_heads * len * len));
    AlibiBiasMatrix(AlibiSlopes(p), g,
                    TensorView::Contiguous(data.data(), DType::kFloat64, {p.num_heads, len, len}),
                    Ctx());
    return TensorResult({p.num_heads, len, len}, "Float64Array", data);
  });
}

// t5Bucket(relativePositions, numBuckets, maxDistance, bidirectional): int32.
val T5BucketJs(val relative, double num_buckets, double max_distance, bool bidirectional) {
  return Guard([&] {
    T5BucketParams p;
    p.num_buckets = Int(num_buckets, "num_buckets");
    p.max_distance = Int(max_distance, "max_distance");
    p.direction = bidirectional ? T5Direction::kBidirectional : T5Direction::kCausal;
    const T5Bucketer bucketer(p);  // validates
    const std::vector<std::int64_t> rel = Ints(relative, "relative_position");
    std::vector<std::int32_t> out(rel.size());
    for (std::size_t i = 0; i < rel.size(); ++i) {
      Require(rel[i] >= -kMaxPosition && rel[i] <= kMaxPosition, "relative_position", rel[i],
              "a relative position in [-(2^24 - 1), 2^24 - 1]");
      out[i] = static_cast<std::int32_t>(bucketer.Bucket(rel[i]));
    }
    return TensorResult({static_cast<std::int64_t>(out.size())}, "Int32Array", out);
  });
}

// relativeMatrix(queryLen, keyLen, queryOffset, sign): int32 [Lq, Lk].
val RelativeMatrixJs(double query_len, double key_len, double query_offset, std::string sign) {
  return Guard([&] {
    RelativeMatrixParams p;
    p.query_len = Int(query_len, "query_len");
    p.key_len = Int(key_len, "key_len");
    p.query_offset = Int(query_offset, "query_offset");
    p.sign = ParseRelativeSign(sign, "sign");
    ValidateRelativeMatrixParams(p);
    Require(p.query_len * p.key_len <= (std::int64_t{1} << 22), "query_len * key_len",
            p.query_len * p.key_len, "at most 2^22 cells (the playground's limit)");
    const std::vector<std::int64_t> m = RelativePositionMatrix(p);
    const std::vector<std::int32_t> out(m.begin(), m.end());  // |rel| < 2^25
    return TensorResult({p.query_len, p.key_len}, "Int32Array", out);
  });
}

// A float64 [S, H, D] tensor {shape, data} from JS.
struct Tensor3 {
  std::vector<double> data;
  std::int64_t s = 0, h = 0, d = 0;
  TensorView View() { return TensorView::Contiguous(data.data(), DType::kFloat64, {1, s, h, d}); }
};

Tensor3 TensorOf(const val& t, const char* arg) {
  Require(t.typeOf().as<std::string>() == "object" && !t.isNull(), arg, std::string("no object"),
          "{shape: [seq, heads, dim], data: numbers}");
  const std::vector<std::int64_t> shape = Ints(t["shape"], arg);
  Require(shape.size() == 3, arg, static_cast<std::int64_t>(shape.size()),
          "a shape of rank 3: [seq, heads, dim]");
  Tensor3 out;
  out.s = shape[0];
  out.h = shape[1];
  out.d = shape[2];
  for (std::int64_t v : shape) {
    Require(v >= 1 && v <= 512, arg, v, "sizes in [1, 512] (the playground's limit)");
  }
  out.data = Doubles(val::global("Array").call<val>("from", t["data"]));
  Require(static_cast<std::int64_t>(out.data.size()) == out.s * out.h * out.d, arg,
          static_cast<std::int64_t>(out.data.size()), "seq * heads * dim values");
  return out;
}

// attention(q, k, v, scheme, mask, args): float64 reference attention of one
// sequence (batch 1, layout [S, H, D]) with a registered scheme; `args` holds
// the scheme's numeric and text arguments and tensors as {shape, data}.
val AttentionJs(val q_in, val k_in, val v_in, std::string scheme, std::string mask, val args) {
  return Guard([&] {
    Tensor3 q = TensorOf(q_in, "q"), k = TensorOf(k_in, "k"), v = TensorOf(v_in, "v");
    const SchemeInfo& info = FindScheme(scheme, "scheme");
    SchemeArgs sargs;
    std::vector<std::vector<double>> held;
    held.reserve(info.args.size());
    if (!args.isUndefined() && !args.isNull()) {
      const std::vector<std::string> keys =
          emscripten::vecFromJSArray<std::string>(val::global("Object").call<val>("keys", args));
      for (const std::string& key : keys) {
        const SchemeArgDecl* decl = info.FindArg(key);
        Require(decl != nullptr, "scheme argument", key,
                "an argument of " + std::string(info.name) + " (posenc schemes " +
                    std::string(info.name) + ")");
        const val value = args[key];
        const std::string name = "scheme." + std::string(info.name) + "." + key;
        switch (decl->type) {
          case SchemeArgType::kTensor: {
            const std::vector<std::int64_t> shape = Ints(value["shape"], name.c_str());
            held.push_back(Doubles(val::global("Array").call<val>("from", value["data"])));
            TensorView view;
            view.data = held.back().data();
            view.dtype = DType::kFloat64;
            view.rank = shape.empty() ? 1 : static_cast<int>(shape.size());
            Require(view.rank <= kMaxRank, name, static_cast<std::int64_t>(view.rank),
                    "a tensor of rank <= 4");
            std::int64_t stride = 1;
            for (int i = view.rank - 1; i >= 0; --i) {
              view.shape[i] = shape.empty() ? 1 : shape[static_cast<std::size_t>(i)];
              view.strides[i] = stride;
              stride *= view.shape[i];
            }
            Require(stride == static_cast<std::int64_t>(held.back().size()), name,
                    static_cast<std::int64_t>(held.back().size()), "one value per element");
            sargs.Tensor(key, view);
            break;
          }
          case SchemeArgType::kNumber:
            sargs.Number(key, value.as<double>());
            break;
          case SchemeArgType::kInteger:
            sargs.Integer(key, Int(value.as<double>(), name.c_str()));
            break;
          case SchemeArgType::kText:
            sargs.Text(key, value.as<std::string>());
            break;
          case SchemeArgType::kFlag:
            sargs.Flag(key, value.as<bool>());
            break;
        }
      }
    }
    AttentionParams p;
    p.layout = AttentionLayout::kBSHD;
    p.mask = ParseAttentionMask(mask, "mask");
    p.scheme = PositionScheme::Registered(info.name, std::move(sargs));
    std::vector<double> out(static_cast<std::size_t>(q.s * q.h * v.d));
    AttentionReference(p, q.View(), k.View(), v.View(),
                       TensorView::Contiguous(out.data(), DType::kFloat64, {1, q.s, q.h, v.d}),
                       nullptr, Ctx());
    return TensorResult({q.s, q.h, v.d}, "Float64Array", out);
  });
}

// permutationDemo(first, second, startToken, modelDim, heads, seed).
val PermutationDemoJs(std::string first, std::string second, std::string start_token,
                      double model_dim, double heads, double seed) {
  return Guard([&] {
    PermutationDemoParams p;
    p.first = first;
    p.second = second;
    p.start_token = start_token;
    p.model_dim = Int(model_dim, "model_dim");
    p.heads = Int(heads, "heads");
    const std::int64_t s = Int(seed, "seed");
    Require(s >= 0, "seed", s, "an integer >= 0");
    p.seed = static_cast<std::uint64_t>(s);
    val schemes = val::array();
    for (const PermutationDemoResult& res : RunPermutationDemo(p)) {
      val e = val::object();
      e.set("scheme", res.scheme);
      e.set("pooledDifference", res.pooled_difference);
      e.set("maxTokenDifference", res.max_token_difference);
      e.set("orderAware", res.order_aware);
      schemes.call<void>("push", e);
    }
    val r = Ok();
    r.set("schemes", schemes);
    return r;
  });
}

val SchemesJs() {
  val out = val::array();
  for (const SchemeInfo* info : RegisteredSchemes()) {
    val e = val::object();
    e.set("name", std::string(info->name));
    e.set("title", std::string(info->title));
    e.set("formula", std::string(info->formula));
    out.call<void>("push", e);
  }
  return out;
}

std::string VersionJs() { return POSENC_VERSION_STRING; }

}  // namespace
}  // namespace posenc::wasm

EMSCRIPTEN_BINDINGS(posenc) {
  using namespace posenc::wasm;
  emscripten::function("version", &VersionJs);
  emscripten::function("sinusoidalTable", &SinusoidalTableJs);
  emscripten::function("sinusoidalInvFreq", &SinusoidalInvFreqJs);
  emscripten::function("ropeInvFreq", &RopeInvFreqJs);
  emscripten::function("ropeCosSin", &RopeCosSinJs);
  emscripten::function("alibiSlopes", &AlibiSlopesJs);
  emscripten::function("alibiBias", &AlibiBiasJs);
  emscripten::function("t5Bucket", &T5BucketJs);
  emscripten::function("relativeMatrix", &RelativeMatrixJs);
  emscripten::function("attention", &AttentionJs);
  emscripten::function("permutationDemo", &PermutationDemoJs);
  emscripten::function("schemes", &SchemesJs);
}
