// python/src/bind_attention.cc: the exact reference attention with
// positional schemes (posenc/attention.h) in posenc._posenc, forward and
// backward. Scheme arguments come as a dict (keys per scheme below); the
// Python API is posenc.attention and posenc.torch.attention.
//   rope:           theta, rotary_dim, pairing, numerics, inv_freq, attention_factor
//   alibi:          slopes | (max_bias, convention)      (num_heads = q's heads)
//   t5:             table [num_buckets, H], max_distance, bidirectional
//   shaw:           clip, a_key [2 clip + 1, D], a_value [2 clip + 1, Dv]
//   transformer_xl: r_w_bias [H, D], r_r_bias [H, D], rw [R, H, D]
//   deberta:        pos_key, pos_query [2 att_span, H, D] (None when off),
//                   position_buckets, max_relative_positions, pos_att_type
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/flash_attention.h"

namespace posenc::python {
namespace {

// Everything one call needs alive: the params and what they point into.
struct Call {
  AttentionParams params;
  std::vector<HeldView> held;
  IntArray query_ids, key_ids;
  std::unique_ptr<T5BiasTable> t5;
};

template <typename T>
T Get(const py::dict& args, const char* key, T fallback) {
  return args.contains(key) && !args[key].is_none() ? args[key].cast<T>() : fallback;
}

TensorView Held(Call& call, const py::dict& args, const char* key, bool required) {
  if (!args.contains(key) || args[key].is_none()) {
    Require(!required, key, "None", "an array or tensor for this scheme");
    return TensorView{};
  }
  call.held.push_back(ViewOf(args[key], key, Access::kRead));
  return call.held.back().view;
}

void CheckKeys(const py::dict& args, const std::string& scheme,
               std::initializer_list<const char*> allowed) {
  for (auto item : args) {
    const auto key = item.first.cast<std::string>();
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok = ok || key == a;
      list += list.empty() ? a : std::string(", ") + a;
    }
    Require(ok, "scheme argument", key,
            "one of the " + scheme + " arguments: " + (list.empty() ? "(none)" : list));
  }
}

std::unique_ptr<Call> Build(const std::string& layout, const std::string& mask,
                            std::int64_t sliding_window, py::handle scale,
                            py::handle query_positions, py::handle key_positions,
                            const std::string& scheme, const py::dict& args,
                            std::int64_t num_heads) {
  auto call = std::make_unique<Call>();
  AttentionParams& p = call->params;
  p.layout = ParseLayout(layout, "layout");
  p.mask = ParseAttentionMask(mask, "mask");
  if (sliding_window >= 0) p.sliding_window = sliding_window;
  if (!scale.is_none()) p.scale = scale.cast<double>();
  if (!query_positions.is_none()) {
    p.query_positions = PositionsOf(query_positions, 0, "query_positions", call->query_ids);
  }
  if (!key_positions.is_none()) {
    p.key_positions = PositionsOf(key_positions, 0, "key_positions", call->key_ids);
  }
  const PositionScheme::Kind kind = ParsePositionSchemeKind(scheme, "scheme");
  switch (kind) {
    case PositionScheme::Kind::kNone:
    case PositionScheme::Kind::kAbsolute:
      CheckKeys(args, scheme, {});
      p.scheme = kind == PositionScheme::Kind::kNone ? PositionScheme::None()
                                                      : PositionScheme::Absolute();
      break;
    case PositionScheme::Kind::kRope: {
      CheckKeys(args, scheme, {"theta", "rotary_dim", "pairing", "numerics", "inv_freq",
                               "attention_factor", "head_dim"});
      RopeParams r;
      r.head_dim = Get<std::int64_t>(args, "head_dim", 0);
      r.rotary_dim = Get<std::int64_t>(args, "rotary_dim", 0);
      r.theta = Get<double>(args, "theta", 10000.0);
      r.pairing = ParseRopePairing(Get<std::string>(args, "pairing", "half_split"), "pairing");
      r.numerics = ParseRopeNumerics(Get<std::string>(args, "numerics", "accurate"), "numerics");
      const TensorView f = Held(*call, args, "inv_freq", false);
      if (f.data != nullptr) {
        Require(f.rank == 1, "inv_freq.ndim", f.rank, "1");
        for (std::int64_t i = 0; i < f.shape[0]; ++i) {
          r.frequencies.inv_freq.push_back(LoadAsDouble(f.data, f.dtype, i * f.strides[0]));
        }
        r.frequencies.attention_factor = Get<double>(args, "attention_factor", 1.0);
      }
      p.scheme = PositionScheme::FromRope(r);
      break;
    }
    case PositionScheme::Kind::kAlibi: {
      CheckKeys(args, scheme, {"slopes", "max_bias", "convention"});
      AlibiParams a;
      a.num_heads = num_heads;
      a.max_bias = Get<double>(args, "max_bias", 8.0);
      a.convention = ParseAlibiSlopeConvention(Get<std::string>(args, "convention", "reference"),
                                               "convention");
      const TensorView s = Held(*call, args, "slopes", false);
      if (s.data != nullptr) {
        Require(s.rank == 1, "slopes.ndim", s.rank, "1");
        for (std::int64_t i = 0; i < s.shape[0]; ++i) {
          a.slopes.push_back(LoadAsDouble(s.data, s.dtype, i * s.strides[0]));
        }
      }
      p.scheme = PositionScheme::FromAlibi(AlibiSlopes(a));
      break;
    }
    case PositionScheme::Kind::kT5: {
      CheckKeys(args, scheme, {"table", "max_distance", "bidirectional"});
      const TensorView t = Held(*call, args, "table", true);
      Require(t.rank == 2, "table.ndim", t.rank, "2 ([num_buckets, heads])");
      T5BucketParams b;
      b.num_buckets = t.shape[0];
      b.max_distance = Get<std::int64_t>(args, "max_distance", 128);
      b.direction = Get<bool>(args, "bidirectional", true) ? T5Direction::kBidirectional
                                                           : T5Direction::kCausal;
      call->t5 = std::make_unique<T5BiasTable>(b, t.shape[1]);
      for (std::int64_t i = 0; i < t.shape[0]; ++i) {
        for (std::int64_t h = 0; h < t.shape[1]; ++h) {
          call->t5->data()[i * t.shape[1] + h] = static_cast<float>(
              LoadAsDouble(t.data, t.dtype, i * t.strides[0] + h * t.strides[1]));
        }
      }
      p.scheme = PositionScheme::FromT5(*call->t5);
      break;
    }
    case PositionScheme::Kind::kShaw: {
      CheckKeys(args, scheme, {"clip", "a_key", "a_value"});
      const TensorView ak = Held(*call, args, "a_key", true);
      const TensorView av = Held(*call, args, "a_value", true);
      ShawParams s;
      s.clip = Get<std::int64_t>(args, "clip", 16);
      s.head_dim = ak.rank >= 2 ? ak.shape[1] : 0;
      p.scheme = PositionScheme::FromShaw(s, ak, av);
      break;
    }
    case PositionScheme::Kind::kTransformerXL: {
      CheckKeys(args, scheme, {"r_w_bias", "r_r_bias", "rw"});
      p.scheme = PositionScheme::FromTransformerXL(Held(*call, args, "r_w_bias", true),
                                                   Held(*call, args, "r_r_bias", true),
                                                   Held(*call, args, "rw", true));
      break;
    }
    case PositionScheme::Kind::kDeBERTa: {
      CheckKeys(args, scheme, {"pos_key", "pos_query", "position_buckets",
                               "max_relative_positions", "pos_att_type", "head_dim"});
      DebertaParams d;
      d.position_buckets = Get<std::int64_t>(args, "position_buckets", 256);
      d.max_relative_positions = Get<std::int64_t>(args, "max_relative_positions", 512);
      d.pos_att_type = ParseDebertaPosAttType(Get<std::string>(args, "pos_att_type", "c2p|p2c"),
                                              "pos_att_type");
      d.head_dim = Get<std::int64_t>(args, "head_dim", 64);
      p.scheme = PositionScheme::FromDeBERTa(d, Held(*call, args, "pos_key", false),
                                             Held(*call, args, "pos_query", false));
      break;
    }
  }
  return call;
}

std::int64_t HeadsOf(const TensorView& q, const std::string& layout) {
  Require(q.rank == 4, "q.ndim", q.rank, "4");
  return ParseLayout(layout, "layout") == AttentionLayout::kBSHD ? q.shape[2] : q.shape[1];
}

// Head dims the scheme dict may leave out default to q's.
void DefaultHeadDims(Call& call, const TensorView& q, const py::dict& args) {
  auto& scheme = call.params.scheme;
  if (scheme.kind == PositionScheme::Kind::kRope && scheme.rope.head_dim == 0) {
    scheme.rope.head_dim = q.shape[3];
  }
  if (scheme.kind == PositionScheme::Kind::kDeBERTa && !args.contains("head_dim")) {
    scheme.deberta.params.head_dim = q.shape[3];
  }
}

FlashAttentionOptions FlashOptionsOf(std::int64_t query_tile, std::int64_t key_tile,
                                     const std::string& rope_keys) {
  FlashAttentionOptions o;
  o.query_tile = query_tile;
  o.key_tile = key_tile;
  o.rope_keys = ParseFlashRopeKeys(rope_keys, "rope_keys");
  return o;
}

// dq, dk, dv as writable views kept alive in `held` (reserved: no reallocation).
AttentionGrads GradViews(py::handle dq, py::handle dk, py::handle dv,
                         std::vector<HeldView>& held) {
  AttentionGrads g;
  held.push_back(ViewOf(dq, "dq", Access::kWrite));
  g.dq = held.back().view;
  held.push_back(ViewOf(dk, "dk", Access::kWrite));
  g.dk = held.back().view;
  held.push_back(ViewOf(dv, "dv", Access::kWrite));
  g.dv = held.back().view;
  return g;
}

// The table gradient outputs named in `table_grads` (keys as in AttentionGrads).
void TableGradViews(const py::dict& table_grads, AttentionGrads& g, std::vector<HeldView>& held) {
  for (auto item : table_grads) {
    const auto key = item.first.cast<std::string>();
    TensorView* target = key == "t5_table"         ? &g.t5_table
                         : key == "shaw_a_key"      ? &g.shaw_a_key
                         : key == "shaw_a_value"    ? &g.shaw_a_value
                         : key == "xl_r_w_bias"     ? &g.xl_r_w_bias
                         : key == "xl_r_r_bias"     ? &g.xl_r_r_bias
                         : key == "xl_rw"           ? &g.xl_rw
                         : key == "deberta_pos_key" ? &g.deberta_pos_key
                         : key == "deberta_pos_query" ? &g.deberta_pos_query
                                                      : nullptr;
    Require(target != nullptr, "table_grads", key,
            "t5_table, shaw_a_key, shaw_a_value, xl_r_w_bias, xl_r_r_bias, xl_rw, "
            "deberta_pos_key or deberta_pos_query");
    held.push_back(ViewOf(item.second, key, Access::kWrite));
    *target = held.back().view;
  }
}

}  // namespace

void BindAttention(py::module_& m) {
  m.def(
      "attention",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle probs,
         const std::string& layout, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, py::handle query_positions, py::handle key_positions,
         const std::string& scheme, const py::dict& scheme_args, py::handle ctx) {
        const Context& c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kWrite);
        std::unique_ptr<Call> call = Build(layout, mask, sliding_window, scale, query_positions,
                                           key_positions, scheme, scheme_args,
                                           HeadsOf(qv.view, layout));
        DefaultHeadDims(*call, qv.view, scheme_args);
        std::optional<HeldView> pv;
        if (!probs.is_none()) pv = ViewOf(probs, "probs", Access::kWrite);
        py::gil_scoped_release release;
        AttentionReference(call->params, qv.view, kv.view, vv.view, ov.view,
                           pv ? &pv->view : nullptr, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("probs"),
      py::arg("layout"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
      py::arg("query_positions"), py::arg("key_positions"), py::arg("scheme"),
      py::arg("scheme_args"), py::arg("ctx"));

  m.def(
      "attention_backward",
      [](py::handle q, py::handle k, py::handle v, py::handle dout, py::handle dq,
         py::handle dk, py::handle dv, const py::dict& table_grads, const std::string& layout,
         const std::string& mask, std::int64_t sliding_window, py::handle scale,
         py::handle query_positions, py::handle key_positions, const std::string& scheme,
         const py::dict& scheme_args) {
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView dov = ViewOf(dout, "dout", Access::kRead);
        std::unique_ptr<Call> call = Build(layout, mask, sliding_window, scale, query_positions,
                                           key_positions, scheme, scheme_args,
                                           HeadsOf(qv.view, layout));
        DefaultHeadDims(*call, qv.view, scheme_args);
        std::vector<HeldView> held;
        held.reserve(16);
        AttentionGrads g = GradViews(dq, dk, dv, held);
        TableGradViews(table_grads, g, held);
        py::gil_scoped_release release;
        AttentionReferenceBackward(call->params, qv.view, kv.view, vv.view, dov.view, g);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout"), py::arg("dq"), py::arg("dk"),
      py::arg("dv"), py::arg("table_grads"), py::arg("layout"), py::arg("mask"),
      py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"));

  // Fused attention (posenc/flash_attention.h): forward, with the row
  // log-sum-exp when lse is not None (float32 [B, H, Sq]).
  m.def(
      "flash_attention",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle lse,
         const std::string& layout, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, py::handle query_positions, py::handle key_positions,
         const std::string& scheme, const py::dict& scheme_args, std::int64_t query_tile,
         std::int64_t key_tile, const std::string& rope_keys, py::handle ctx) {
        const Context& c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kWrite);
        std::optional<HeldView> lv;
        if (!lse.is_none()) lv = ViewOf(lse, "lse", Access::kWrite);
        std::unique_ptr<Call> call = Build(layout, mask, sliding_window, scale, query_positions,
                                           key_positions, scheme, scheme_args,
                                           HeadsOf(qv.view, layout));
        DefaultHeadDims(*call, qv.view, scheme_args);
        const FlashAttentionOptions o = FlashOptionsOf(query_tile, key_tile, rope_keys);
        py::gil_scoped_release release;
        if (lv) {
          FlashAttentionWithLse(call->params, qv.view, kv.view, vv.view, ov.view, lv->view, o, c);
        } else {
          FlashAttention(call->params, qv.view, kv.view, vv.view, ov.view, o, c);
        }
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"),
      py::arg("layout"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
      py::arg("query_positions"), py::arg("key_positions"), py::arg("scheme"),
      py::arg("scheme_args"), py::arg("query_tile") = 64, py::arg("key_tile") = 64,
      py::arg("rope_keys") = "rotate", py::arg("ctx") = py::none());

  // FlashAttentionVarlen: packed sequences, q [total_q, H, D], k/v
  // [total_k, Hkv, D/Dv], out [total_q, H, Dv]; cu_seqlens_q / cu_seqlens_k
  // batch + 1 integer offsets (any integer dtype, a sequence or a tensor).
  m.def(
      "flash_attention_varlen",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle cu_seqlens_q,
         py::handle cu_seqlens_k, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, const std::string& scheme, const py::dict& scheme_args,
         std::int64_t query_tile, std::int64_t key_tile, py::handle ctx) {
        const Context& c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kWrite);
        Require(qv.view.rank == 3, "q.ndim", qv.view.rank, "3 ([total_q, heads, head_dim])");
        const IntArray cu_q = IntsOf(cu_seqlens_q, "cu_seqlens_q");
        const IntArray cu_k = IntsOf(cu_seqlens_k, "cu_seqlens_k");
        Require(cu_q.shape.size() == 1, "cu_seqlens_q.ndim", cu_q.shape.size(), "1");
        Require(cu_k.shape.size() == 1, "cu_seqlens_k.ndim", cu_k.shape.size(), "1");
        // The layout is not read by the varlen call; positions restart per sequence.
        std::unique_ptr<Call> call = Build("bshd", mask, sliding_window, scale, py::none(),
                                           py::none(), scheme, scheme_args, qv.view.shape[1]);
        if (call->params.scheme.kind == PositionScheme::Kind::kRope &&
            call->params.scheme.rope.head_dim == 0) {
          call->params.scheme.rope.head_dim = qv.view.shape[2];
        }
        const FlashAttentionOptions o = FlashOptionsOf(query_tile, key_tile, "rotate");
        py::gil_scoped_release release;
        FlashAttentionVarlen(call->params, qv.view, kv.view, vv.view, ov.view, cu_q.values,
                             cu_k.values, o, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("cu_seqlens_q"),
      py::arg("cu_seqlens_k"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
      py::arg("scheme"), py::arg("scheme_args"), py::arg("query_tile") = 64,
      py::arg("key_tile") = 64, py::arg("ctx") = py::none());

  // FlashAttentionBackward: lse None recomputes it; table_grads as in
  // attention_backward (t5_table, shaw_a_key, shaw_a_value are computed).
  m.def(
      "flash_attention_backward",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle dout,
         py::handle lse, py::handle dq, py::handle dk, py::handle dv,
         const py::dict& table_grads, const std::string& layout, const std::string& mask,
         std::int64_t sliding_window, py::handle scale, py::handle query_positions,
         py::handle key_positions, const std::string& scheme, const py::dict& scheme_args,
         std::int64_t query_tile, std::int64_t key_tile, const std::string& rope_keys,
         py::handle ctx) {
        const Context& c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kRead);
        HeldView dov = ViewOf(dout, "dout", Access::kRead);
        std::optional<HeldView> lv;
        if (!lse.is_none()) lv = ViewOf(lse, "lse", Access::kRead);
        std::unique_ptr<Call> call = Build(layout, mask, sliding_window, scale, query_positions,
                                           key_positions, scheme, scheme_args,
                                           HeadsOf(qv.view, layout));
        DefaultHeadDims(*call, qv.view, scheme_args);
        const FlashAttentionOptions o = FlashOptionsOf(query_tile, key_tile, rope_keys);
        std::vector<HeldView> held;
        held.reserve(16);
        AttentionGrads g = GradViews(dq, dk, dv, held);
        TableGradViews(table_grads, g, held);
        py::gil_scoped_release release;
        FlashAttentionBackward(call->params, qv.view, kv.view, vv.view, ov.view, dov.view,
                               lv ? lv->view : TensorView{}, g, o, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dout"),
      py::arg("lse"), py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("table_grads"),
      py::arg("layout"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
      py::arg("query_positions"), py::arg("key_positions"), py::arg("scheme"),
      py::arg("scheme_args"), py::arg("query_tile") = 64, py::arg("key_tile") = 64,
      py::arg("rope_keys") = "rotate", py::arg("ctx") = py::none());
}

}  // namespace posenc::python
