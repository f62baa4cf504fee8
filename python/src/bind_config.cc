// python/src/bind_config.cc: Hugging Face config.json (or llama.cpp GGUF)
// RoPE (posenc/model_config.h, posenc/gguf.h, posenc/rope_scaling.h) in
// posenc._posenc. A config is a path (config.json or .gguf, told apart by the
// file's magic bytes) or JSON text (the Python layer turns a dict into JSON
// text); results are plain dicts and numpy arrays. The Python API is
// posenc.rope_inv_freq, posenc.rope_config and posenc.inspect
// (posenc/_config.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>

#include "bindings.h"
#include "posenc/choose.h"
#include "posenc/model_config.h"

namespace posenc::python {
namespace {

ModelConfig Load(const std::string& path_or_text, bool is_text, const std::string& source) {
  if (is_text) return ParseModelConfig(path_or_text, source);
  return LoadModelConfig(path_or_text);
}

py::array_t<double> ToArray(const std::vector<double>& v) {
  return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
}

py::object Opt(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

std::int64_t SeqLen(std::int64_t seq_len) {
  Require(seq_len >= 0 && seq_len <= kMaxPosition + 1, "seq_len", seq_len,
          "None or a length in [1, 2^24] (max(position_ids) + 1)");
  return seq_len;
}

py::dict Describe(const ModelConfig& config, const std::string& layer_type, std::int64_t seq_len,
                  RopeNumerics numerics) {
  const LayerRope& layer = SelectLayerRope(config, layer_type);
  const RopeScaling s = ModelRopeScaling(config, layer_type, SeqLen(seq_len), numerics);
  const RopeScalingParams& p = layer.scaling;
  py::dict d;
  d["source"] = config.source;
  d["format"] = config.format;
  d["position_encoding"] = "rope";
  d["model_type"] = config.model_type;
  d["layer_type"] = layer.layer_type;
  py::list layer_types;
  for (const LayerRope& l : config.layers) layer_types.append(l.layer_type);
  d["layer_types"] = layer_types;
  d["rope_type"] = std::string(RopeScalingTypeName(s.type));
  d["head_dim"] = s.head_dim;
  d["rotary_dim"] = s.rotary_dim;
  d["theta"] = p.theta;
  d["partial_rotary_factor"] = p.partial_rotary_factor;
  d["pairing"] = std::string(RopePairingName(config.pairing));
  d["numerics"] = std::string(RopeNumericsName(numerics));
  d["max_position_embeddings"] = config.max_position_embeddings;
  d["original_max_position_embeddings"] = config.original_max_position_embeddings;
  d["factor"] = s.factor;
  d["effective_theta"] = s.effective_theta;
  d["attention_factor"] = s.frequencies.attention_factor;
  d["inv_freq"] = ToArray(s.frequencies.inv_freq);
  d["yarn_low"] = s.yarn_low;
  d["yarn_high"] = s.yarn_high;
  d["deepseek_softmax_factor"] = s.deepseek_softmax_factor;
  d["deepseek_softmax_scale"] = Opt(config.deepseek_softmax_scale);
  d["longrope_factors"] = std::string(LongRopeFactorsName(s.longrope_factors));
  d["mrope_section"] = layer.mrope_section;
  d["freq_factors"] = ToArray(p.freq_factors);
  d["warnings"] = config.warnings;
  py::list pairs;
  for (const RopePairInfo& pair : s.pairs) {
    py::dict e;
    e["index"] = pair.index;
    e["inv_freq"] = pair.inv_freq;
    e["default_inv_freq"] = pair.default_inv_freq;
    e["wavelength"] = pair.wavelength;
    e["ratio_to_default"] = pair.ratio_to_default;
    e["region"] = std::string(RopePairRegionName(pair.region));
    pairs.append(e);
  }
  d["pairs"] = pairs;
  return d;
}

// ALiBi models: their description, else None.
py::object AlibiInfo(const ModelConfig& config) {
  if (!config.alibi) return py::none();
  py::dict d;
  d["source"] = config.source;
  d["format"] = config.format;
  d["position_encoding"] = "alibi";
  d["model_type"] = config.model_type;
  d["num_heads"] = config.alibi->num_heads;
  d["max_bias"] = config.alibi->max_bias;
  d["slopes"] = ToArray(config.alibi->slopes);
  d["head_dim"] = config.head_dim;
  d["max_position_embeddings"] = config.max_position_embeddings;
  d["warnings"] = config.warnings;
  return d;
}

}  // namespace

void BindConfig(py::module_& m) {
  m.def(
      "model_alibi",
      [](const std::string& config, bool is_text, const std::string& source) {
        return AlibiInfo(Load(config, is_text, source));
      },
      py::arg("config"), py::arg("is_text"), py::arg("source"));
  m.def(
      "rope_inv_freq",
      [](const std::string& config, bool is_text, const std::string& source, std::int64_t seq_len,
         const std::string& layer_type, const std::string& numerics) {
        const ModelConfig c = Load(config, is_text, source);
        const RopeScaling s = ModelRopeScaling(c, layer_type, SeqLen(seq_len),
                                               ParseRopeNumerics(numerics, "numerics"));
        return std::make_pair(ToArray(s.frequencies.inv_freq), s.frequencies.attention_factor);
      },
      py::arg("config"), py::arg("is_text"), py::arg("source"), py::arg("seq_len"),
      py::arg("layer_type"), py::arg("numerics"));
  m.def(
      "rope_config",
      [](const std::string& config, bool is_text, const std::string& source, std::int64_t seq_len,
         const std::string& layer_type, const std::string& numerics) {
        const ModelConfig c = Load(config, is_text, source);
        return Describe(c, layer_type, seq_len, ParseRopeNumerics(numerics, "numerics"));
      },
      py::arg("config"), py::arg("is_text"), py::arg("source"), py::arg("seq_len"),
      py::arg("layer_type"), py::arg("numerics"));
  // posenc.choose (posenc/_choose.py): the answer of posenc/choose.h as JSON
  // text; None / 0 for what the caller left to the defaults.
  m.def(
      "choose_json",
      [](const std::optional<std::string>& architecture, std::int64_t train_length,
         std::int64_t target_length, const std::string& finetune, const std::string& from_path,
         const std::vector<std::string>& engines, const std::string& evidence) {
        ChooseRequest r;
        if (architecture) r.architecture = ParseModelArchitecture(*architecture, "architecture");
        r.train_length = train_length;
        r.target_length = target_length;
        r.finetune = ParseFinetuneBudget(finetune, "finetune");
        r.from = from_path;
        for (const std::string& e : engines)
          r.engines.push_back(ParseInferenceEngine(e, "engines"));
        py::gil_scoped_release release;
        return ChooseEncodingJson(r, evidence);
      },
      py::arg("architecture"), py::arg("train_length"), py::arg("target_length"),
      py::arg("finetune"), py::arg("from_path"), py::arg("engines"), py::arg("evidence"));
}

}  // namespace posenc::python
