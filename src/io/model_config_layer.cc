// One rope dict of a config.json -> LayerRope (model_config_internal.h):
// the rope type, theta and rotary fraction, factor, original context, the
// type-specific keys (yarn, longrope, llama3, proportional) and multimodal
// sections, each a step of LayerParser. Matches HF transformers (commit
// c49429ed) standardize_rope_params and the _validate_*_rope_parameters
// rules (see src/io/model_config.cc for the whole-file conventions).
#include <set>

#include "io/model_config_internal.h"
#include "posenc/rope_scaling.h"

namespace posenc::model_config_internal {
namespace {

using T = RopeScalingType;

// Keys each rope type reads (HF's required + optional keys), plus the ones
// every type may carry.
const std::set<std::string>& AllowedKeys(RopeScalingType type) {
  static const std::set<std::string> common = {"rope_type",     "type",
                                               "rope_theta",    "partial_rotary_factor",
                                               "mrope_section", "mrope_interleaved"};
  static const auto with = [](std::initializer_list<const char*> extra) {
    std::set<std::string> s = common;
    for (const char* k : extra) s.insert(k);
    return s;
  };
  static const std::set<std::string> def = common, linear = with({"factor"}),
                                     ntk = with({"factor", "alpha"}),
                                     yarn = with({"factor", "original_max_position_embeddings",
                                                  "attention_factor", "beta_fast", "beta_slow",
                                                  "mscale", "mscale_all_dim", "truncate"}),
                                     llama3 = with({"factor", "original_max_position_embeddings",
                                                    "low_freq_factor", "high_freq_factor"}),
                                     longrope = with({"short_factor", "long_factor", "factor",
                                                      "original_max_position_embeddings",
                                                      "attention_factor"}),
                                     prop = with({"factor"});
  switch (type) {
    case T::kDefault:
      return def;
    case T::kLinear:
    case T::kDynamic:
      return linear;
    case T::kNtk:
      return ntk;
    case T::kYarn:
      return yarn;
    case T::kLlama3:
      return llama3;
    case T::kLongRope:
      return longrope;
    case T::kProportional:
      return prop;
  }
  return def;
}

class LayerParser {
 public:
  LayerParser(const Reader& rd, const Scope& scope, const ModelFields& m, const LayerSource& src,
              std::vector<std::string>& warnings)
      : rd_(rd),
        scope_(scope),
        m_(m),
        dict_(src.dict),
        path_(src.path),
        warnings_(warnings),
        p_(layer_.scaling) {
    layer_.layer_type = src.layer_type;
    p_.numerics = RopeNumerics::kHF;
    p_.head_dim = m.head_dim;
    p_.max_position_embeddings = m.max_pos;
    theta_override_ = src.theta_override;
  }

  LayerRope Parse() {
    Type();
    ThetaAndRotary();
    Factor();
    OriginalContext();
    switch (p_.type) {
      case T::kYarn:
        Yarn();
        break;
      case T::kLongRope:
        LongRope();
        break;
      case T::kLlama3:
        Llama3();
        break;
      case T::kProportional:
        Proportional();
        break;
      default:
        break;
    }
    MropeSections();
    ValidateRopeScalingParams(p_);  // every rule above makes this pass; kept as an invariant
    return layer_;
  }

 private:
  std::string At(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  std::int64_t RotaryDim() const { return p_.RotaryDim(); }

  // rope_type, else the legacy `type`; "mrope" is default + sections; unknown keys warn.
  void Type() {
    std::string type_name = "default";
    std::string type_path = At("rope_type");
    for (const char* key : {"type", "rope_type"}) {
      if (const json* v = Reader::Find(dict_, key)) {
        if (!v->is_string()) rd_.Fail(At(key), Show(*v), "a string naming the rope type");
        type_name = v->get<std::string>();
        type_path = At(key);
      }
    }
    if (type_name == "mrope") type_name = "default";
    try {
      p_.type = ParseRopeScalingType(type_name);
    } catch (const InvalidArgument&) {
      rd_.Fail(type_path, "\"" + type_name + "\"",
               "one of " + std::string(KnownRopeScalingTypes()) + " (\"mrope\" means default)");
    }
    tn_ = std::string(RopeScalingTypeName(p_.type));
    for (const auto& [key, value] : dict_.items()) {
      if (!AllowedKeys(p_.type).contains(key)) {
        warnings_.push_back(At(key) + ": unrecognized key for rope_type '" + tn_ + "', ignored");
      }
    }
  }

  // theta and the rotary fraction (top-level partial_rotary_factor wins, as HF).
  void ThetaAndRotary() {
    const auto dict_theta = rd_.Number(dict_, "rope_theta", At("rope_theta"), "a number > 1");
    p_.theta = dict_theta        ? *dict_theta
               : theta_override_ ? *theta_override_
               : m_.top_theta    ? *m_.top_theta
                                 : 10000.0;
    if (!(p_.theta > 1.0)) rd_.Fail(At("rope_theta"), Num(p_.theta), "a number > 1");
    dict_prf_ = rd_.Number(dict_, "partial_rotary_factor", At("partial_rotary_factor"),
                           "a number in (0, 1]");
    if (dict_prf_ && m_.top_prf && *dict_prf_ != *m_.top_prf) {
      warnings_.push_back(At("partial_rotary_factor") + ": " + Num(*dict_prf_) +
                          " differs from the top-level value " + Num(*m_.top_prf) +
                          "; using the top-level value (HF standardize_rope_params)");
    }
    p_.partial_rotary_factor = m_.top_prf ? *m_.top_prf : dict_prf_ ? *dict_prf_ : 1.0;
    if (!(p_.partial_rotary_factor > 0.0 && p_.partial_rotary_factor <= 1.0)) {
      rd_.Fail(At("partial_rotary_factor"), Num(p_.partial_rotary_factor), "a number in (0, 1]");
    }
    const std::int64_t d = RotaryDim();
    if (p_.type != T::kProportional && (d < 2 || d % 2 != 0)) {
      rd_.Fail(At("partial_rotary_factor"), Num(p_.partial_rotary_factor),
               "a fraction giving an even rotary dim >= 2 (head_dim " +
                   std::to_string(m_.head_dim) + " * factor = " + std::to_string(d) + ")");
    }
    if ((p_.type == T::kDynamic || p_.type == T::kNtk) && d < 4) {
      rd_.Fail(At("partial_rotary_factor"), Num(p_.partial_rotary_factor),
               "a rotary dim >= 4 for NTK scaling (got " + std::to_string(d) + ")");
    }
  }

  // factor (alpha for NTK), required by linear, dynamic, ntk and llama3.
  void Factor() {
    const std::string factor_expect =
        p_.type == T::kProportional ? "a number > 0" : "a number >= 1 for rope_type '" + tn_ + "'";
    p_.factor = rd_.Number(dict_, "factor", At("factor"), factor_expect);
    if (p_.type == T::kNtk && !p_.factor)
      p_.factor = rd_.Number(dict_, "alpha", At("alpha"), factor_expect);
    const bool factor_required = p_.type == T::kLinear || p_.type == T::kDynamic ||
                                 p_.type == T::kNtk || p_.type == T::kLlama3;
    if (!p_.factor && factor_required) rd_.Fail(At("factor"), "nothing (missing)", factor_expect);
    if (p_.factor) {
      const bool ok = p_.type == T::kProportional ? *p_.factor > 0.0 : *p_.factor >= 1.0;
      if (!ok) rd_.Fail(At("factor"), Num(*p_.factor), factor_expect);
    }
    if (p_.type == T::kDynamic && m_.max_pos <= 0) {
      rd_.Fail(scope_.text_prefix + "max_position_embeddings", "nothing (missing)",
               "an integer > 0 (rope_type 'dynamic' scales relative to it)");
    }
  }

  // original_max_position_embeddings (Phi-3's top-level value has priority).
  void OriginalContext() {
    if (p_.type == T::kYarn || p_.type == T::kLlama3 || p_.type == T::kLongRope) {
      const auto in_dict = rd_.Int(dict_, "original_max_position_embeddings",
                                   At("original_max_position_embeddings"));
      const auto orig = (m_.top_original_max && !m_.nested) ? m_.top_original_max : in_dict;
      p_.original_max_position_embeddings = orig ? *orig : m_.max_pos;
      if (p_.original_max_position_embeddings <= 0) {
        rd_.Fail(At("original_max_position_embeddings"), "nothing (missing)",
                 "an integer > 0 (or max_position_embeddings) for rope_type '" + tn_ + "'");
      }
      if (!p_.factor && p_.type != T::kLlama3) {
        if (m_.max_pos <= 0) {
          rd_.Fail(At("factor"), "nothing (missing)",
                   "a number >= 1, or max_position_embeddings to derive it from for rope_type '" +
                       tn_ + "'");
        }
        const double derived = static_cast<double>(m_.max_pos) /
                               static_cast<double>(p_.original_max_position_embeddings);
        if (p_.type == T::kYarn) {
          if (derived < 1.0) {
            rd_.Fail(At("factor"), "nothing (missing; max/original = " + Num(derived) + ")",
                     "a number >= 1");
          }
          warnings_.push_back(At("factor") + ": missing (HF's validator requires it); derived " +
                              Num(derived) +
                              " = max_position_embeddings / original_max_position_embeddings");
        }
      }
    }
  }

  // yarn: attention_factor, beta_fast / beta_slow, mscale, truncate.
  void Yarn() {
    p_.attention_factor =
        rd_.Number(dict_, "attention_factor", At("attention_factor"), "a number > 0");
    if (p_.attention_factor && *p_.attention_factor <= 0.0) {
      rd_.Fail(At("attention_factor"), Num(*p_.attention_factor), "a number > 0");
    }
    p_.beta_fast = rd_.Number(dict_, "beta_fast", At("beta_fast"), "a number >= 0 (0 means 32)");
    p_.beta_slow = rd_.Number(dict_, "beta_slow", At("beta_slow"), "a number >= 0 (0 means 1)");
    for (auto [key, v] :
         {std::pair{"beta_fast", p_.beta_fast}, std::pair{"beta_slow", p_.beta_slow}}) {
      if (v && *v < 0.0) rd_.Fail(At(key), Num(*v), "a number >= 0");
    }
    const double bf = (p_.beta_fast && *p_.beta_fast != 0.0) ? *p_.beta_fast : 32.0;
    const double bs = (p_.beta_slow && *p_.beta_slow != 0.0) ? *p_.beta_slow : 1.0;
    if (bf < bs) {
      warnings_.push_back(At("beta_fast") + ": beta_fast=" + Num(bf) +
                          " is smaller than beta_slow=" + Num(bs) + " (HF warns; used as given)");
    }
    p_.mscale = rd_.Number(dict_, "mscale", At("mscale"));
    p_.mscale_all_dim = rd_.Number(dict_, "mscale_all_dim", At("mscale_all_dim"));
    const auto truncate = rd_.Bool(dict_, "truncate", At("truncate"));
    if (truncate && m_.nested) {
      warnings_.push_back(At("truncate") +
                          ": HF reads truncate only from a flat rope dict_, so this "
                          "per-layer value is ignored (truncate=true), as in HF");
    } else if (truncate) {
      p_.truncate = *truncate ? YarnTruncate::kTruncate : YarnTruncate::kExact;
    }
    if (p_.factor && m_.max_pos > 0) {
      const double implicit = static_cast<double>(m_.max_pos) /
                              static_cast<double>(p_.original_max_position_embeddings);
      if (implicit != *p_.factor && implicit != 1.0) {
        warnings_.push_back(
            At("factor") + ": explicit factor " + Num(*p_.factor) +
            " differs from max_position_embeddings / original_max_position_embeddings = " +
            Num(implicit) + "; using the explicit factor (as HF)");
      }
    }
  }

  // longrope: short_factor / long_factor of rotary_dim/2 entries, attention_factor.
  void LongRope() {
    for (auto [key, list] :
         {std::pair{"short_factor", &p_.short_factor}, std::pair{"long_factor", &p_.long_factor}}) {
      const json* v = Reader::Find(dict_, key);
      if (v == nullptr)
        rd_.Fail(At(key), "nothing (missing)",
                 "a list of rotary_dim/2 = " + std::to_string(RotaryDim() / 2) + " numbers");
      *list = rd_.NumberList(*v, At(key));
      if (static_cast<std::int64_t>(list->size()) != RotaryDim() / 2) {
        rd_.Fail(At(key), "a list of " + std::to_string(list->size()) + " numbers",
                 "rotary_dim/2 = " + std::to_string(RotaryDim() / 2) + " numbers");
      }
    }
    p_.attention_factor =
        rd_.Number(dict_, "attention_factor", At("attention_factor"), "a number > 0");
    if (p_.attention_factor && *p_.attention_factor <= 0.0) {
      rd_.Fail(At("attention_factor"), Num(*p_.attention_factor), "a number > 0");
    }
  }

  // llama3: low / high frequency factors.
  void Llama3() {
    const auto low = rd_.Number(dict_, "low_freq_factor", At("low_freq_factor"), "a number > 0");
    const auto high =
        rd_.Number(dict_, "high_freq_factor", At("high_freq_factor"), "a number > low_freq_factor");
    if (!low)
      rd_.Fail(At("low_freq_factor"), "nothing (missing)",
               "a number > 0 (required for rope_type 'llama3')");
    if (!high)
      rd_.Fail(At("high_freq_factor"), "nothing (missing)",
               "a number (required for rope_type 'llama3')");
    if (*low <= 0.0) rd_.Fail(At("low_freq_factor"), Num(*low), "a number > 0");
    if (*high <= *low) {
      rd_.Fail(At("high_freq_factor"), Num(*high),
               "a number > low_freq_factor (" + Num(*low) + ")");
    }
    p_.low_freq_factor = *low;
    p_.high_freq_factor = *high;
    if (m_.max_pos > 0 && p_.original_max_position_embeddings >= m_.max_pos) {
      warnings_.push_back(At("original_max_position_embeddings") + ": " +
                          std::to_string(p_.original_max_position_embeddings) +
                          " is not below max_position_embeddings = " + std::to_string(m_.max_pos) +
                          " (HF warns)");
    }
  }

  // proportional: warns when no rotary fraction is given.
  void Proportional() {
    if (!dict_prf_ && !m_.top_prf) {
      warnings_.push_back(At("partial_rotary_factor") +
                          ": missing for rope_type 'proportional'; "
                          "1.0 makes it equivalent to linear scaling (HF warns)");
    }
  }

  // Multimodal sections: in the dict or at the top level.
  void MropeSections() {
    // Multimodal sections: in the dict_ or at the top level.
    const auto [sec_obj, sec_path] = Reader::Find(dict_, "mrope_section") != nullptr
                                         ? std::pair{&dict_, At("mrope_section")}
                                         : scope_.Where("mrope_section");
    if (sec_obj != nullptr) {
      const json& sec = (*sec_obj)["mrope_section"];
      if (!sec.is_array() || sec.size() != 3)
        rd_.Fail(sec_path, Show(sec), "a list of 3 integers (t, h, w)");
      std::int64_t sum = 0;
      for (std::size_t i = 0; i < 3; ++i) {
        if (!sec[i].is_number_integer() || sec[i].get<std::int64_t>() < 0) {
          rd_.Fail(sec_path + "[" + std::to_string(i) + "]", Show(sec[i]), "an integer >= 0");
        }
        layer_.mrope_section.push_back(sec[i].get<std::int64_t>());
        sum += layer_.mrope_section.back();
      }
      if (sum != RotaryDim() / 2) {
        rd_.Fail(sec_path, Show(sec),
                 "sections summing to rotary_dim/2 = " + std::to_string(RotaryDim() / 2));
      }
      const auto [il_obj, il_path] = Reader::Find(dict_, "mrope_interleaved") != nullptr
                                         ? std::pair{&dict_, At("mrope_interleaved")}
                                         : scope_.Where("mrope_interleaved");
      if (il_obj != nullptr && *rd_.Bool(*il_obj, "mrope_interleaved", il_path)) {
        layer_.mrope_layout = MRopeLayout::kInterleaved;
      }
    }
  }

  const Reader& rd_;
  const Scope& scope_;
  const ModelFields& m_;
  const json& dict_;
  std::string path_;
  std::vector<std::string>& warnings_;
  LayerRope layer_;
  RopeScalingParams& p_;
  std::optional<double> theta_override_, dict_prf_;
  std::string tn_;  // the type's name, for messages
};

}  // namespace

LayerRope ParseLayer(const Reader& rd, const Scope& scope, const ModelFields& m,
                     const LayerSource& source, std::vector<std::string>& warnings) {
  return LayerParser(rd, scope, m, source, warnings).Parse();
}

}  // namespace posenc::model_config_internal
