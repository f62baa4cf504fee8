// Report section: rotary position embedding (Su et al. 2021, RoFormer) and
// its context-extension schemes.
//
// Figures: q.k against relative distance for identical and for random
// vectors (the long-term decay, RoFormer 3.4.3) computed with ApplyRope;
// the wavelength 2 pi / inv_freq of every pair against context lengths; for
// each scaling scheme (linear, NTK, dynamic, YaRN, Llama 3, LongRoPE) the
// per-pair frequency ratio to the default table with the regions that
// posenc::ComputeRopeScaling reports; the same for every --config file
// (posenc::LoadModelConfig / ModelRopeScaling).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <random>
#include <set>

#include <fmt/format.h>

#include "charts.h"
#include "html.h"
#include "posenc/model_config.h"
#include "posenc/rope.h"
#include "posenc/rope_scaling.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

constexpr std::int64_t kHeadDim = 128;

std::vector<double> Gaussian(std::mt19937_64& rng, std::int64_t n) {
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

// Rows r of the result: `vec` rotated to position r, for r < n (float64).
std::vector<double> Rotated(const std::vector<double>& vec, std::int64_t n, const Context& ctx) {
  RopeParams p;
  p.head_dim = kHeadDim;
  std::vector<double> x(static_cast<std::size_t>(n * kHeadDim));
  for (std::int64_t r = 0; r < n; ++r) std::copy(vec.begin(), vec.end(), x.begin() + r * kHeadDim);
  ApplyRope(p, TensorView::Contiguous(x.data(), DType::kFloat64, {1, n, 1, kHeadDim}),
            AttentionLayout::kBSHD, Positions::Offset(0), RopeDirection::kForward, nullptr, ctx);
  return x;
}

double Dot(const double* a, const double* b) {
  double s = 0.0;
  for (std::int64_t i = 0; i < kHeadDim; ++i) s += a[i] * b[i];
  return s;
}

Chart DecayFigure(const ReportOptions& options, const ReportSizes& sizes,
                  std::vector<std::string>& summary) {
  const Context ctx(options.threads);
  const std::int64_t n = sizes.rope_distance;
  const std::int64_t step = std::max<std::int64_t>(1, n / 2048);
  std::mt19937_64 rng(20211210);
  constexpr int kDraws = 32;
  std::vector<double> identical(static_cast<std::size_t>(n), 0.0);
  for (int d = 0; d < kDraws; ++d) {
    const auto q = Gaussian(rng, kHeadDim);
    const auto rot = Rotated(q, n, ctx);
    const double norm2 = Dot(q.data(), q.data());
    for (std::int64_t m = 0; m < n; ++m) {
      identical[static_cast<std::size_t>(m)] +=
          Dot(rot.data(), rot.data() + m * kHeadDim) / norm2 / kDraws;
    }
  }
  const auto q = Gaussian(rng, kHeadDim);
  const auto k = Gaussian(rng, kHeadDim);
  const auto rq = Rotated(q, 1, ctx);
  const auto rk = Rotated(k, n, ctx);
  const double scale = std::sqrt(Dot(q.data(), q.data()) * Dot(k.data(), k.data()));
  Chart c = MakeChart("rope_decay", "q . k against relative distance (head_dim 128, theta 10^4)",
                      LineSpec({"distance", "relative distance m"}, {"score", "normalised q . k"},
                               {"vectors", "vectors", false, "line", false}));
  double tail = 0.0;
  for (std::int64_t m = 0; m < n; m += step) {
    const double same = identical[static_cast<std::size_t>(m)];
    if (m >= n / 2) tail = std::max(tail, std::abs(same));
    c.Add({{"vectors", "identical q = k (mean of 32)"}, {"distance", m}, {"score", same}});
    c.Add({{"vectors", "random q, k (one pair)"},
           {"distance", m},
           {"score", Dot(rq.data(), rk.data() + m * kHeadDim) / scale}});
  }
  c.caption = fmt::format(
      "<R_0 q, R_m k> computed by rotating with posenc::ApplyRope (float64). For identical "
      "vectors the score starts at 1 and decays with distance (the long-term decay of RoFormer "
      "3.4.3): its largest |value| beyond m = {} is {}. For independent random vectors the score "
      "is noise around 0 at every distance: RoPE does not create attention to near tokens by "
      "itself, it lets the model learn it.",
      n / 2, Sci(tail));
  summary.push_back(
      fmt::format("RoPE: identical-vector q.k falls from 1 to at most {} in |value| beyond m = {}",
                  Sci(tail), n / 2));
  return c;
}

Chart WavelengthFigure(std::vector<std::string>& summary) {
  Chart c;
  const std::vector<std::pair<double, std::string>> contexts = {
      {2048, "2k (Llama 1)"}, {8192, "8k (Llama 3)"}, {131072, "128k (Llama 3.1)"}};
  Json spec = LineSpec({"pair", "pair index j"},
                       {"wavelength", "wavelength 2 pi / omega_j (tokens)", AxisScale::kLog},
                       {"theta", "theta", true, "line", false});
  c = MakeChart("rope_wavelength", "Wavelength of every pair against the context length",
                WithRules(spec, "y", contexts));
  std::string counts;
  for (double theta : {10000.0, 500000.0}) {
    const auto f = RopeDefaultFrequencies(kHeadDim, theta, RopeNumerics::kAccurate);
    std::int64_t longer = 0;
    for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
      const double w = 2 * std::numbers::pi / f.inv_freq[j];
      longer += w > 8192 ? 1 : 0;
      c.Add({{"theta", fmt::format("{:g}", theta)},
             {"pair", static_cast<std::int64_t>(j)},
             {"wavelength", w}});
    }
    counts += fmt::format("{}theta = {:g}: {} of {} pairs", counts.empty() ? "" : "; ", theta,
                          longer, f.inv_freq.size());
  }
  c.caption = fmt::format(
      "head_dim 128. Wavelengths grow geometrically from 2 pi to about 2 pi theta. Pairs whose "
      "wavelength exceeds the context never complete a turn in training; past the trained length "
      "they see angles they never saw. Pairs with a wavelength over 8192 tokens: {}.",
      counts);
  summary.push_back("RoPE wavelengths (" + counts + " longer than 8k)");
  return c;
}

void AddPairs(Chart& c, const std::string& series, const RopeScaling& s) {
  for (const auto& p : s.pairs) {
    c.Add({{"scheme", series},
           {"pair", p.index},
           {"ratio", p.ratio_to_default},
           {"wavelength", std::isfinite(p.wavelength) ? p.wavelength : 0.0},
           {"region", std::string(RopePairRegionName(p.region))}});
  }
}

Json RatioSpec(bool facet) {
  Json inner =
      LineSpec({"pair", "pair index j"}, {"ratio", "inv_freq / default inv_freq", AxisScale::kLog},
               {"region", "region", false, "point", false});
  inner["encoding"]["tooltip"].push_back(
      {{"field", "wavelength"}, {"title", "wavelength (tokens)"}, {"format", ".4~g"}});
  inner["encoding"]["color"]["scale"] = {
      {"domain", {"kept", "blended", "interpolated", "unrotated"}},
      {"range", {"#1a7f37", "#bf8700", "#cf222e", "#6e7781"}}};
  if (!facet) return inner;
  inner["width"] = 220;
  inner["height"] = 150;
  return Json{
      {"facet", {{"field", "scheme"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}}},
      {"columns", 3},
      {"spec", inner}};
}

// Keeps in the colour legend only the regions some point uses (no legend
// entry without a point).
void RestrictRegionLegend(Chart& c) {
  std::set<std::string> used;
  for (const auto& r : c.records) used.insert(r["region"].get<std::string>());
  Json& enc = c.spec.contains("spec") ? c.spec["spec"]["encoding"] : c.spec["encoding"];
  Json& scale = enc["color"]["scale"];
  Json domain = Json::array(), range = Json::array();
  for (std::size_t i = 0; i < scale["domain"].size(); ++i) {
    if (used.count(scale["domain"][i].get<std::string>()) != 0) {
      domain.push_back(scale["domain"][i]);
      range.push_back(scale["range"][i]);
    }
  }
  scale["domain"] = domain;
  scale["range"] = range;
}

std::string Regions(const RopeScaling& s) {
  std::int64_t counts[4] = {0, 0, 0, 0};
  for (const auto& p : s.pairs) ++counts[static_cast<int>(p.region)];
  return fmt::format("{} kept, {} blended, {} interpolated{}", counts[0], counts[2], counts[1],
                     counts[3] ? fmt::format(", {} unrotated", counts[3]) : "");
}

Chart ScalingFigure(std::vector<std::string>& summary) {
  Chart c = MakeChart("rope_scaling", "Per-pair frequency ratio to default, by scaling scheme",
                      RatioSpec(true));
  std::string notes;
  auto add = [&](const std::string& name, const RopeScalingParams& p, std::int64_t seq_len) {
    const RopeScaling s = ComputeRopeScaling(p, seq_len);
    AddPairs(c, name, s);
    double lowest = 1.0;
    for (const auto& pair : s.pairs) lowest = std::min(lowest, pair.ratio_to_default);
    notes += fmt::format("{}: {}", name, Regions(s));
    const double factor = p.factor.value_or(1.0);
    if (p.type == RopeScalingType::kDynamic && seq_len > p.max_position_embeddings) {
      // HF dynamic NTK: base * (factor * S / max - (factor - 1))^(d / (d - 2)).
      notes += fmt::format(
          " (dynamic rescales the NTK base for the current length S = {}: its factor there is "
          "{:g} * {} / {} - ({:g} - 1) = {:g}, so the lowest pair reaches 1/{:.0f})",
          seq_len, factor, seq_len, p.max_position_embeddings, factor,
          factor * static_cast<double>(seq_len) / static_cast<double>(p.max_position_embeddings) -
              (factor - 1.0),
          1.0 / lowest);
    }
    notes += ". ";
  };
  RopeScalingParams base;
  base.head_dim = kHeadDim;
  base.factor = 8.0;
  base.max_position_embeddings = 4096;
  base.original_max_position_embeddings = 4096;
  RopeScalingParams p = base;
  p.type = RopeScalingType::kLinear;
  add("linear x8", p, 0);
  p.type = RopeScalingType::kNtk;
  add("NTK x8", p, 0);
  p.type = RopeScalingType::kDynamic;
  add("dynamic x8 at 16k tokens", p, 16384);
  p.type = RopeScalingType::kYarn;
  add("YaRN x8 (orig 4096)", p, 0);
  RopeScalingParams l3 = base;
  l3.type = RopeScalingType::kLlama3;
  l3.theta = 500000.0;
  l3.original_max_position_embeddings = 8192;
  add("Llama 3 x8 (theta 5e5)", l3, 0);
  const std::filesystem::path phi =
      std::filesystem::path(ExamplesDir()) / "phi-3.5-mini-instruct.json";
  std::string longrope =
      "LongRoPE: examples/configs/phi-3.5-mini-instruct.json not found, not drawn.";
  if (std::filesystem::exists(phi)) {
    const ModelConfig cfg = LoadModelConfig(phi.string());
    const auto& layer = SelectLayerRope(cfg, "");
    const RopeScaling s = ModelRopeScaling(cfg, layer.layer_type, cfg.max_position_embeddings,
                                           RopeNumerics::kAccurate);
    AddPairs(c, "LongRoPE (Phi-3.5-mini, long)", s);
    double lo = 1e300, hi = 0.0;  // LongRoPE's per-pair factors: 1 / ratio
    for (const auto& pair : s.pairs) {
      lo = std::min(lo, 1.0 / pair.ratio_to_default);
      hi = std::max(hi, 1.0 / pair.ratio_to_default);
    }
    longrope = fmt::format(
        "LongRoPE (Phi-3.5-mini long_factor, head_dim {}, factor {:.3g} = {} / {}): {}; its "
        "per-pair factors (long_factor, ratio 1/factor) range from {:.3g} to {:.3g}, so "
        "\"blended\" there means a pair's own factor between 1 and the largest.",
        s.head_dim, s.factor, cfg.max_position_embeddings, cfg.original_max_position_embeddings,
        Regions(s), lo, hi);
  }
  c.caption =
      "Each point is one frequency pair (head_dim 128, theta 10^4 unless noted), coloured by "
      "the region posenc::ComputeRopeScaling reports: kept (high frequencies, ratio 1), "
      "blended (a ratio between 1 and 1/factor), interpolated (ratio 1/factor). " +
      notes + longrope;
  RestrictRegionLegend(c);
  summary.push_back("RoPE scaling regions: " + notes + longrope);
  return c;
}

std::vector<Block> ConfigFigures(const ReportOptions& options) {
  std::vector<Block> out;
  int index = 0;
  for (const auto& path : options.configs) {
    const ModelConfig cfg = LoadModelConfig(path);
    const std::string name = std::filesystem::path(path).stem().string();
    if (cfg.alibi) {  // no RoPE to chart: the ALiBi section draws its slopes
      Table t;
      t.id = fmt::format("config_{}_alibi", index++);
      t.title = name + ": ALiBi slopes (no RoPE)";
      t.header = {"head", "slope"};
      for (std::size_t h = 0; h < cfg.alibi->slopes.size(); ++h) {
        t.rows.push_back({std::to_string(h), fmt::format("{:.8g}", cfg.alibi->slopes[h])});
      }
      t.caption = fmt::format(
          "{} ({}, {} heads, max bias {:g}): ALiBi, slopes as "
          "ggml_soft_max_ext.",
          path, cfg.model_type, cfg.alibi->num_heads, cfg.alibi->max_bias);
      out.push_back(std::move(t));
      continue;
    }
    Chart c = MakeChart(fmt::format("config_{}_{}", index++,
                                    [&] {
                                      std::string id;
                                      for (char ch : name)
                                        id += std::isalnum(static_cast<unsigned char>(ch))
                                                  ? static_cast<char>(std::tolower(ch))
                                                  : '_';
                                      return id;
                                    }()),
                        name + ": frequency ratio per pair", RatioSpec(cfg.layers.size() > 1));
    std::string text;
    for (const auto& layer : cfg.layers) {
      const std::int64_t seq = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 0;
      const RopeScaling s = ModelRopeScaling(cfg, layer.layer_type, seq);
      const std::string series =
          layer.layer_type.empty()
              ? std::string(RopeScalingTypeName(s.type))
              : layer.layer_type + " (" + std::string(RopeScalingTypeName(s.type)) + ")";
      AddPairs(c, series, s);
      text += fmt::format(
          "{}: theta {:g}, rotary dim {}, factor {:g}, attention factor {:.6g}; {}. ", series,
          layer.scaling.theta, s.rotary_dim, s.factor, s.frequencies.attention_factor, Regions(s));
    }
    c.caption = fmt::format(
        "{} (head_dim {}, max_position_embeddings {}), evaluated at seq_len = "
        "max_position_embeddings with HF numerics. {}",
        path, cfg.head_dim, cfg.max_position_embeddings, text);
    RestrictRegionLegend(c);
    out.emplace_back(std::move(c));
  }
  return out;
}

}  // namespace

Section RopeSection(const ReportOptions& options) {
  const ReportSizes sizes = SizesFor(options.detail);
  Section s;
  s.id = "rope";
  s.title = "RoPE";
  s.paragraphs = {
      "Rotary embeddings rotate each (x, y) pair of q and k by p * theta^(-2j/d): the score "
      "<R_m q, R_n k> depends on m - n only. Context extension changes the frequencies; the "
      "scaling charts show by how much, pair by pair."};
  std::vector<std::string> summary;
  s.blocks.emplace_back(DecayFigure(options, sizes, summary));
  s.blocks.emplace_back(WavelengthFigure(summary));
  s.blocks.emplace_back(ScalingFigure(summary));
  for (auto& b : ConfigFigures(options)) s.blocks.push_back(std::move(b));
  if (!options.configs.empty()) {
    s.paragraphs.push_back(
        fmt::format("{} model configuration(s) given with --config are charted "
                    "after the built-in schemes.",
                    options.configs.size()));
  }
  s.summary = {summary.front(), summary[1]};
  return s;
}

}  // namespace posenc::report
