// The playground's module and presets (playground.h).
#include "playground.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "html.h"
#include "posenc/error.h"
#include "posenc/model_config.h"

namespace posenc::report {
namespace {

namespace fs = std::filesystem;

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw IoError("playground: cannot read '" + path.string() + "'");
  return text.str();
}

// PREFIX/share/posenc/wasm beside an installed PREFIX/bin/posenc, or "".
std::string InstalledWasmDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = exe.parent_path().parent_path() / "share" / "posenc" / "wasm";
  return fs::is_directory(dir, ec) ? dir.string() : "";
}

// Example configs that define RoPE, by file stem, in name order.
std::string PresetsJson() {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(ExamplesDir(), ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string text = ReadBytes(f);
    try {
      const ModelConfig config = ParseModelConfig(text, f.string());
      SelectLayerRope(config, "");  // throws for a config without RoPE (ALiBi models)
      out[f.stem().string()] = text;
    } catch (const Error&) {
      continue;  // not a RoPE config: no preset
    }
  }
  return out.dump();
}

}  // namespace

std::string WasmDir() {
  if (const char* env = std::getenv("POSENC_WASM_DIR"); env != nullptr && *env != '\0') return env;
  if (std::string installed = InstalledWasmDir(); !installed.empty()) return installed;
  return POSENC_WASM_BUILD_DIR;
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const auto v = (static_cast<unsigned char>(bytes[i]) << 16) |
                   (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                   static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

PlaygroundModule LoadPlaygroundModule() {
  PlaygroundModule m;
  m.dir = WasmDir();
  const fs::path dir = m.dir;
  std::error_code ec;
  if (!fs::is_regular_file(dir / "posenc.js", ec) ||
      !fs::is_regular_file(dir / "posenc.wasm", ec)) {
    m.unavailable = "no posenc.js and posenc.wasm in " + m.dir +
                    " (build them with `cmake --preset wasm && cmake --build --preset wasm`, or "
                    "set POSENC_WASM_DIR)";
    return m;
  }
  m.loader_js = ReadBytes(dir / "posenc.js");
  const std::string wasm = ReadBytes(dir / "posenc.wasm");
  m.wasm_bytes = wasm.size();
  m.wasm_base64 = Base64(wasm);
  m.presets_json = PresetsJson();
  return m;
}

}  // namespace posenc::report
