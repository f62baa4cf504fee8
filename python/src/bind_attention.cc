// python/src/bind_attention.cc: attention with positional schemes in
// posenc._posenc: the reference (posenc/attention.h) and the fused kernel
// (posenc/flash_attention.h), forward and backward, and the scheme registry
// (posenc/scheme.h). Nothing here knows a particular scheme: the scheme
// arguments arrive as a dict and are converted by the type each scheme
// declares (tensor, number, integer, text, flag; a "[]"-shaped tensor may be
// 0-d), gradients of trainable tensor arguments are requested by argument
// name (`scheme_grads`), and schemes() / scheme_info() expose the
// declarations that posenc.torch's autograd and the docs read.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "posenc/attention.h"
#include "posenc/flash_attention.h"
#include "posenc/scheme.h"

namespace posenc::python {
namespace {

// Everything one call needs alive: the params and what they point into.
struct AttentionCall {
  AttentionParams params;
  std::vector<HeldView> held;
  IntArray query_ids, key_ids;
};

// The scheme's named arguments from a dict, by the declared types; None
// values count as absent.
SchemeArgs ArgsOf(const SchemeInfo& info, const py::dict& args, std::vector<HeldView>& held) {
  std::string allowed;
  for (const SchemeArgDecl& d : info.args)
    allowed += (allowed.empty() ? "" : ", ") + std::string(d.name);
  SchemeArgs out;
  for (auto item : args) {
    const auto key = item.first.cast<std::string>();
    const SchemeArgDecl* decl = info.FindArg(key);
    Require(decl != nullptr, "scheme argument", key,
            "one of the " + std::string(info.name) +
                " arguments: " + (allowed.empty() ? std::string("(none)") : allowed));
    if (item.second.is_none()) continue;
    const std::string name = "scheme." + std::string(info.name) + "." + key;
    try {
      switch (decl->type) {
        case SchemeArgType::kTensor:
          held.push_back(
              ViewOf(item.second, key, Access::kRead,
                     decl->shape == "[]" ? ScalarTensor::kAsShape1 : ScalarTensor::kReject));
          out.Tensor(key, held.back().view);
          break;
        case SchemeArgType::kNumber:
          out.Number(key, item.second.cast<double>());
          break;
        case SchemeArgType::kInteger:
          out.Integer(key, item.second.cast<std::int64_t>());
          break;
        case SchemeArgType::kText:
          out.Text(key, item.second.cast<std::string>());
          break;
        case SchemeArgType::kFlag:
          out.Flag(key, item.second.cast<bool>());
          break;
      }
    } catch (const py::cast_error&) {
      throw InvalidArgument(ArgMessage(
          name, py::str(py::type::handle_of(item.second).attr("__qualname__")).cast<std::string>(),
          std::string(decl->type == SchemeArgType::kInteger ? "an " : "a ") +
              std::string(SchemeArgTypeName(decl->type))));
    }
  }
  return out;
}

std::unique_ptr<AttentionCall> Build(const std::string& layout, const std::string& mask,
                                     std::int64_t sliding_window, py::handle scale,
                                     py::handle query_positions, py::handle key_positions,
                                     const std::string& scheme, const py::dict& args) {
  auto call = std::make_unique<AttentionCall>();
  call->held.reserve(args.size() + 8);
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
  const SchemeInfo& info = FindScheme(scheme, "scheme");
  p.scheme = PositionScheme::Registered(info.name, ArgsOf(info, args, call->held));
  return call;
}

FlashAttentionOptions FlashOptionsOf(std::int64_t query_tile, std::int64_t key_tile,
                                     const std::string& rope_keys, const std::string& precision) {
  FlashAttentionOptions o;
  o.query_tile = query_tile;
  o.key_tile = key_tile;
  o.rope_keys = ParseFlashRopeKeys(rope_keys, "rope_keys");
  o.precision = ParseFlashPrecision(precision, "precision");
  return o;
}

// dq, dk, dv and the scheme gradients named in `scheme_grads` (argument
// name -> writable tensor) as views kept alive in `held`.
AttentionGrads GradViews(py::handle dq, py::handle dk, py::handle dv, const py::dict& scheme_grads,
                         std::vector<HeldView>& held) {
  held.reserve(held.size() + 3 + scheme_grads.size());
  AttentionGrads g;
  held.push_back(ViewOf(dq, "dq", Access::kWrite));
  g.dq = held.back().view;
  held.push_back(ViewOf(dk, "dk", Access::kWrite));
  g.dk = held.back().view;
  held.push_back(ViewOf(dv, "dv", Access::kWrite));
  g.dv = held.back().view;
  for (auto item : scheme_grads) {
    const auto key = item.first.cast<std::string>();
    held.push_back(
        ViewOf(item.second, "scheme_grads." + key, Access::kWrite, ScalarTensor::kAsShape1));
    g.scheme.Set(key, held.back().view);
  }
  return g;
}

py::dict InfoDict(const SchemeInfo& info) {
  py::dict d;
  d["name"] = std::string(info.name);
  d["title"] = std::string(info.title);
  d["paper"] = std::string(info.paper);
  d["formula"] = std::string(info.formula);
  py::list terms;
  for (SchemeTerm t :
       {SchemeTerm::kRotation, SchemeTerm::kBias, SchemeTerm::kLogit, SchemeTerm::kValue}) {
    if (info.Has(t)) terms.append(std::string(SchemeTermName(t)));
  }
  d["terms"] = terms;
  d["fused"] = info.Fused();
  d["causal_only"] = info.masks == SchemeMasks::kCausalOnly;
  py::list args;
  for (const SchemeArgDecl& a : info.args) {
    py::dict x;
    x["name"] = std::string(a.name);
    x["type"] = std::string(SchemeArgTypeName(a.type));
    x["shape"] = std::string(a.shape);
    x["trainable"] = a.grad == SchemeArgGrad::kTrainable;
    x["required"] = a.presence == SchemeArgPresence::kRequired;
    x["default"] = std::string(a.default_text);
    x["doc"] = std::string(a.doc);
    args.append(x);
  }
  d["args"] = args;
  return d;
}

// The integer array `obj` (rank `rank`, else an error naming `arg`) as
// int32 values with its shape; values outside the int32 range are errors.
auto Int32sOf(py::handle obj, const char* arg, std::size_t rank) {
  const IntArray a = IntsOf(obj, arg);
  Require(a.shape.size() == rank, std::string(arg) + ".ndim", a.shape.size(), std::to_string(rank));
  std::vector<std::int32_t> out32(a.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    Require(a.values[i] >= INT32_MIN && a.values[i] <= INT32_MAX,
            std::string(arg) + "[" + std::to_string(i) + "]", a.values[i],
            "a value in the int32 range");
    out32[i] = static_cast<std::int32_t>(a.values[i]);
  }
  return std::make_pair(out32, a.shape);
}

// Binds schemes() and scheme_info(): the registered scheme declarations.
void BindSchemes(py::module_& m) {
  m.def(
      "schemes",
      [] {
        py::list out;
        for (const SchemeInfo* info : RegisteredSchemes()) out.append(InfoDict(*info));
        return out;
      },
      "The declarations of every registered positional scheme (posenc/scheme.h).");
  m.def(
      "scheme_info", [](const std::string& name) { return InfoDict(FindScheme(name, "scheme")); },
      py::arg("name"), "The declaration of one registered positional scheme.");
}

// Binds the reference attention: attention and attention_backward.
void BindReferenceAttention(py::module_& m) {
  m.def(
      "attention",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle probs,
         const std::string& layout, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, py::handle query_positions, py::handle key_positions,
         const std::string& scheme, const py::dict& scheme_args, py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kWrite);
        std::unique_ptr<AttentionCall> call =
            Build(layout, mask, sliding_window, scale, query_positions, key_positions, scheme,
                  scheme_args);
        std::optional<HeldView> pv;
        if (!probs.is_none()) pv = ViewOf(probs, "probs", Access::kWrite);
        py::gil_scoped_release release;
        AttentionReference(call->params, qv.view, kv.view, vv.view, ov.view,
                           pv ? &pv->view : nullptr, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("probs"), py::arg("layout"),
      py::arg("mask"), py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"), py::arg("ctx"));

  m.def(
      "attention_backward",
      [](py::handle q, py::handle k, py::handle v, py::handle dout, py::handle dq, py::handle dk,
         py::handle dv, const py::dict& scheme_grads, const std::string& layout,
         const std::string& mask, std::int64_t sliding_window, py::handle scale,
         py::handle query_positions, py::handle key_positions, const std::string& scheme,
         const py::dict& scheme_args) {
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView dov = ViewOf(dout, "dout", Access::kRead);
        std::unique_ptr<AttentionCall> call =
            Build(layout, mask, sliding_window, scale, query_positions, key_positions, scheme,
                  scheme_args);
        std::vector<HeldView> held;
        AttentionGrads g = GradViews(dq, dk, dv, scheme_grads, held);
        py::gil_scoped_release release;
        AttentionReferenceBackward(call->params, qv.view, kv.view, vv.view, dov.view, g);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout"), py::arg("dq"), py::arg("dk"),
      py::arg("dv"), py::arg("scheme_grads"), py::arg("layout"), py::arg("mask"),
      py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"));
}

// The fused forward of `call` over dense [B, ...] tensors, with the row
// log-sum-exp when lse is not None (float32 [B, H, Sq]) and a second O in
// out_copy's dtype when out_copy is not None (lse required).
void RunFlashForward(const AttentionCall& call, const FlashAttentionOptions& o, py::handle q,
                     py::handle k, py::handle v, py::handle out, py::handle lse,
                     py::handle out_copy, py::handle ctx) {
  const ContextHold c = ContextOf(ctx);
  HeldView qv = ViewOf(q, "q", Access::kRead);
  HeldView kv = ViewOf(k, "k", Access::kRead);
  HeldView vv = ViewOf(v, "v", Access::kRead);
  HeldView ov = ViewOf(out, "out", Access::kWrite);
  std::optional<HeldView> lv, cv;
  if (!lse.is_none()) lv = ViewOf(lse, "lse", Access::kWrite);
  if (!out_copy.is_none()) {
    if (!lv) {
      throw InvalidArgument(
          ArgMessage("out_copy", "an array without lse", "None, or an array together with lse"));
    }
    cv = ViewOf(out_copy, "out_copy", Access::kWrite);
  }
  py::gil_scoped_release release;
  if (lv) {
    FlashAttentionWithLse(call.params, qv.view, kv.view, vv.view, ov.view, lv->view,
                          cv ? cv->view : TensorView{}, o, c);
  } else {
    FlashAttention(call.params, qv.view, kv.view, vv.view, ov.view, o, c);
  }
}

// The fused backward of `call`: lse None recomputes it; scheme_grads as in
// attention_backward (argument name -> gradient tensor).
void RunFlashBackward(const AttentionCall& call, const FlashAttentionOptions& o, py::handle q,
                      py::handle k, py::handle v, py::handle out, py::handle dout, py::handle lse,
                      py::handle dq, py::handle dk, py::handle dv, const py::dict& scheme_grads,
                      py::handle ctx) {
  const ContextHold c = ContextOf(ctx);
  HeldView qv = ViewOf(q, "q", Access::kRead);
  HeldView kv = ViewOf(k, "k", Access::kRead);
  HeldView vv = ViewOf(v, "v", Access::kRead);
  HeldView ov = ViewOf(out, "out", Access::kRead);
  HeldView dov = ViewOf(dout, "dout", Access::kRead);
  std::optional<HeldView> lv;
  if (!lse.is_none()) lv = ViewOf(lse, "lse", Access::kRead);
  std::vector<HeldView> held;
  AttentionGrads g = GradViews(dq, dk, dv, scheme_grads, held);
  py::gil_scoped_release release;
  FlashAttentionBackward(call.params, qv.view, kv.view, vv.view, ov.view, dov.view,
                         lv ? lv->view : TensorView{}, g, o, c);
}

// A fused call's fixed arguments (layout, mask, window, scale, positions,
// scheme with its arguments, tiles, rope_keys, precision), parsed once.
// posenc.torch.attention keeps one per argument set, so a training step
// parses nothing: only its tensors reach the binding (docs/PERFORMANCE.md,
// "The training shape, sixth pass"). Immutable; tensor scheme arguments and
// position ids are held (read) for its lifetime.
struct FlashCall {
  std::unique_ptr<AttentionCall> call;
  FlashAttentionOptions options;
};

// Binds flash_attention, FlashAttentionCall and flash_attention_backward.
void BindFlash(py::module_& m) {
  m.def(
      "flash_attention",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle lse,
         const std::string& layout, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, py::handle query_positions, py::handle key_positions,
         const std::string& scheme, const py::dict& scheme_args, std::int64_t query_tile,
         std::int64_t key_tile, const std::string& rope_keys, const std::string& precision,
         py::handle ctx, py::handle out_copy) {
        const std::unique_ptr<AttentionCall> call =
            Build(layout, mask, sliding_window, scale, query_positions, key_positions, scheme,
                  scheme_args);
        RunFlashForward(*call, FlashOptionsOf(query_tile, key_tile, rope_keys, precision), q, k, v,
                        out, lse, out_copy, ctx);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("layout"),
      py::arg("mask"), py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"),
      py::arg("query_tile") = 64, py::arg("key_tile") = 64, py::arg("rope_keys") = "rotate",
      py::arg("precision") = "float32", py::arg("ctx") = py::none(),
      py::arg("out_copy") = py::none());

  m.def(
      "flash_attention_backward",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle dout, py::handle lse,
         py::handle dq, py::handle dk, py::handle dv, const py::dict& scheme_grads,
         const std::string& layout, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, py::handle query_positions, py::handle key_positions,
         const std::string& scheme, const py::dict& scheme_args, std::int64_t query_tile,
         std::int64_t key_tile, const std::string& rope_keys, const std::string& precision,
         py::handle ctx) {
        const std::unique_ptr<AttentionCall> call =
            Build(layout, mask, sliding_window, scale, query_positions, key_positions, scheme,
                  scheme_args);
        RunFlashBackward(*call, FlashOptionsOf(query_tile, key_tile, rope_keys, precision), q, k, v,
                         out, dout, lse, dq, dk, dv, scheme_grads, ctx);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dout"), py::arg("lse"),
      py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("scheme_grads"), py::arg("layout"),
      py::arg("mask"), py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"),
      py::arg("query_tile") = 64, py::arg("key_tile") = 64, py::arg("rope_keys") = "rotate",
      py::arg("precision") = "float32", py::arg("ctx") = py::none());

  py::class_<FlashCall>(m, "FlashAttentionCall")
      .def(py::init([](const std::string& layout, const std::string& mask,
                       std::int64_t sliding_window, py::handle scale, py::handle query_positions,
                       py::handle key_positions, const std::string& scheme,
                       const py::dict& scheme_args, std::int64_t query_tile, std::int64_t key_tile,
                       const std::string& rope_keys, const std::string& precision) {
             FlashCall f{Build(layout, mask, sliding_window, scale, query_positions, key_positions,
                               scheme, scheme_args),
                         FlashOptionsOf(query_tile, key_tile, rope_keys, precision)};
             ValidateFlashAttentionOptions(f.options);
             return f;
           }),
           py::arg("layout"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
           py::arg("query_positions"), py::arg("key_positions"), py::arg("scheme"),
           py::arg("scheme_args"), py::arg("query_tile") = 64, py::arg("key_tile") = 64,
           py::arg("rope_keys") = "rotate", py::arg("precision") = "float32")
      .def(
          "forward",
          [](const FlashCall& f, py::handle q, py::handle k, py::handle v, py::handle out,
             py::handle lse, py::handle out_copy, py::handle ctx) {
            RunFlashForward(*f.call, f.options, q, k, v, out, lse, out_copy, ctx);
          },
          py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"),
          py::arg("out_copy"), py::arg("ctx"))
      .def(
          "backward",
          [](const FlashCall& f, py::handle q, py::handle k, py::handle v, py::handle out,
             py::handle dout, py::handle lse, py::handle dq, py::handle dk, py::handle dv,
             const py::dict& scheme_grads, py::handle ctx) {
            RunFlashBackward(*f.call, f.options, q, k, v, out, dout, lse, dq, dk, dv, scheme_grads,
                             ctx);
          },
          py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dout"), py::arg("lse"),
          py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("scheme_grads"), py::arg("ctx"));
}

// Binds flash_attention_varlen: the fused forward over packed sequences.
void BindFlashVarlen(py::module_& m) {
  // FlashAttentionVarlen: packed sequences, q [total_q, H, D], k/v
  // [total_k, Hkv, D/Dv], out [total_q, H, Dv]; cu_seqlens_q / cu_seqlens_k
  // batch + 1 integer offsets (any integer dtype, a sequence or a tensor).
  m.def(
      "flash_attention_varlen",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle cu_seqlens_q,
         py::handle cu_seqlens_k, const std::string& mask, std::int64_t sliding_window,
         py::handle scale, const std::string& scheme, const py::dict& scheme_args,
         std::int64_t query_tile, std::int64_t key_tile, const std::string& precision,
         py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
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
        std::unique_ptr<AttentionCall> call =
            Build("bshd", mask, sliding_window, scale, py::none(), py::none(), scheme, scheme_args);
        const FlashAttentionOptions o = FlashOptionsOf(query_tile, key_tile, "rotate", precision);
        py::gil_scoped_release release;
        FlashAttentionVarlen(call->params, qv.view, kv.view, vv.view, ov.view, cu_q.values,
                             cu_k.values, o, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("cu_seqlens_q"),
      py::arg("cu_seqlens_k"), py::arg("mask"), py::arg("sliding_window"), py::arg("scale"),
      py::arg("scheme"), py::arg("scheme_args"), py::arg("query_tile") = 64,
      py::arg("key_tile") = 64, py::arg("precision") = "float32", py::arg("ctx") = py::none());
}

// Binds flash_attention_decode: few query tokens against a dense or paged
// KV cache.
void BindFlashDecode(py::module_& m) {
  // Decode (FlashAttentionDecode): 1..16 query tokens against a KV cache,
  // split-K. k / v: a dense cache [B, Sk, Hkv, D] in the layout (views of
  // a larger buffer welcome); or, with block_table and seq_lens given, a
  // paged cache (FlashAttentionDecodePaged): k / v the page pools
  // [num_pages, page_size, Hkv, D], block_table [B, max_pages] and
  // seq_lens [B] integer arrays (int32 range).
  m.def(
      "flash_attention_decode",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle lse,
         py::handle block_table, py::handle seq_lens, const std::string& layout,
         const std::string& mask, std::int64_t sliding_window, py::handle scale,
         py::handle query_positions, py::handle key_positions, const std::string& scheme,
         const py::dict& scheme_args, const std::string& rope_keys, const std::string& precision,
         py::handle ctx) {
        const ContextHold c = ContextOf(ctx);
        HeldView qv = ViewOf(q, "q", Access::kRead);
        HeldView kv = ViewOf(k, "k", Access::kRead);
        HeldView vv = ViewOf(v, "v", Access::kRead);
        HeldView ov = ViewOf(out, "out", Access::kWrite);
        std::optional<HeldView> lv;
        if (!lse.is_none()) lv = ViewOf(lse, "lse", Access::kWrite);
        std::unique_ptr<AttentionCall> call =
            Build(layout, mask, sliding_window, scale, query_positions, key_positions, scheme,
                  scheme_args);
        const FlashAttentionOptions o = FlashOptionsOf(64, 64, rope_keys, precision);
        const TensorView lse_view = lv ? lv->view : TensorView{};
        Require(block_table.is_none() == seq_lens.is_none(), "block_table",
                block_table.is_none() ? "None" : "given",
                "given together with seq_lens (a paged cache) or both None (a dense cache)");
        if (block_table.is_none()) {
          py::gil_scoped_release release;
          FlashAttentionDecode(call->params, qv.view, kv.view, vv.view, ov.view, lse_view, o, c);
          return;
        }
        const auto [table, table_shape] = Int32sOf(block_table, "block_table", 2);
        const auto [lens, lens_shape] = Int32sOf(seq_lens, "seq_lens", 1);
        Require(qv.view.rank == 4, "q.ndim", qv.view.rank, "4");
        const AttentionDims qd = GetAttentionDims(qv.view, call->params.layout, "q");
        Require(table_shape[0] == qd.batch, "block_table.shape[0]", table_shape[0],
                "q's batch (" + std::to_string(qd.batch) + ")");
        Require(lens_shape[0] == qd.batch, "seq_lens.shape[0]", lens_shape[0],
                "q's batch (" + std::to_string(qd.batch) + ")");
        Require(vv.view.rank == 4, "v.ndim", vv.view.rank, "4 ([num_pages, page_size, Hkv, Dv])");
        PagedKVCache cache;
        cache.k_pages = kv.view;
        cache.v_pages = vv.view;
        cache.block_table = table.data();
        cache.max_pages = table_shape[1];
        cache.seq_lens = lens.data();
        const PreparedDecode plan(call->params, qd.heads, qd.head_dim, vv.view.shape[3], o);
        py::gil_scoped_release release;
        FlashAttentionDecodePaged(plan, qv.view, cache, ov.view, lse_view,
                                  call->params.query_positions, call->params.key_positions, c);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"),
      py::arg("block_table"), py::arg("seq_lens"), py::arg("layout"), py::arg("mask"),
      py::arg("sliding_window"), py::arg("scale"), py::arg("query_positions"),
      py::arg("key_positions"), py::arg("scheme"), py::arg("scheme_args"),
      py::arg("rope_keys") = "rotate", py::arg("precision") = "float32",
      py::arg("ctx") = py::none());
}

}  // namespace

void BindAttention(py::module_& m) {
  BindSchemes(m);
  BindReferenceAttention(m);
  BindFlash(m);
  BindFlashVarlen(m);
  BindFlashDecode(m);
}

}  // namespace posenc::python
