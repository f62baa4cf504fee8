// The report's live playground on the C++ side (cli/report/playground.h):
// where the module is found, base64, the presets, and the page with and
// without a module. The module itself is tested in the browser
// (tests/report/playground_test.mjs: fidelity against the CLI, speed, size).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "html.h"
#include "playground.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "test_util.h"

namespace posenc::report {
namespace {

using posenc::ModelConfig;

namespace fs = std::filesystem;

// POSENC_WASM_DIR for one test.
class WasmDirEnv {
 public:
  explicit WasmDirEnv(const std::string& dir) { ::setenv("POSENC_WASM_DIR", dir.c_str(), 1); }
  ~WasmDirEnv() { ::unsetenv("POSENC_WASM_DIR"); }
};

std::string FakeModuleDir(const std::string& name) {
  const std::string dir = test::TempDir(name);
  std::ofstream(fs::path(dir) / "posenc.js") << "var createPosencModule = function () {};";
  std::ofstream(fs::path(dir) / "posenc.wasm", std::ios::binary)
      << std::string("\0asm\x01\0\0\0", 8);
  return dir;
}

TEST(PlaygroundBase64, Rfc4648Vectors) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64(std::string("\0\xff\xfe", 3)), "AP/+");
}

TEST(PlaygroundModule, MissingModuleSaysWhereAndHowToBuildIt) {
  const std::string dir = test::TempDir("playground_empty");
  const WasmDirEnv env(dir);
  EXPECT_EQ(WasmDir(), dir);
  const PlaygroundModule m = LoadPlaygroundModule();
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.unavailable.find(dir), std::string::npos) << m.unavailable;
  EXPECT_NE(m.unavailable.find("cmake --preset wasm"), std::string::npos) << m.unavailable;
  const ChartLibrary lib{"/*VEGA*/", "/*VL*/", "/*EMBED*/"};
  EXPECT_THROW(WritePlayground(lib, m, test::TempDir("playground_out_missing") + "/page"), IoError);
}

TEST(PlaygroundModule, LoadsModuleAndRopePresets) {
  const std::string dir = FakeModuleDir("playground_fake");
  const WasmDirEnv env(dir);
  const PlaygroundModule m = LoadPlaygroundModule();
  ASSERT_TRUE(m.available()) << m.unavailable;
  EXPECT_EQ(m.wasm_bytes, 8u);
  EXPECT_EQ(m.wasm_base64, "AGFzbQEAAAA=");
  EXPECT_NE(m.loader_js.find("createPosencModule"), std::string::npos);
  // Every example config with RoPE is a preset, by file stem, with its text.
  const auto presets = nlohmann::json::parse(m.presets_json);
  for (const char* name : {"llama-3.1-8b", "qwen2.5-7b-instruct-yarn", "phi-3.5-mini-instruct",
                           "gpt-neox-20b", "deepseek-v3"}) {
    ASSERT_TRUE(presets.contains(name)) << name;
    EXPECT_NO_THROW(nlohmann::json::parse(presets[name].get<std::string>())) << name;
  }
  for (const auto& [name, text] : presets.items()) {
    const ModelConfig config = ParseModelConfig(text.get<std::string>(), name);
    EXPECT_NO_THROW(SelectLayerRope(config, "")) << name;  // a RoPE config
  }
}

TEST(PlaygroundPage, ReportGetsALastSectionThatRunsTheModule) {
  const std::string dir = FakeModuleDir("playground_page");
  const WasmDirEnv env(dir);
  const PlaygroundModule m = LoadPlaygroundModule();
  Report r;
  r.title = "t";
  const ChartLibrary lib{"/*VEGA*/", "/*VL*/", "/*EMBED*/"};
  const std::string html = RenderHtml(r, lib, &m);
  EXPECT_NE(html.find("<section id=\"playground\">"), std::string::npos);
  EXPECT_NE(html.find("href=\"#playground\""), std::string::npos);
  EXPECT_NE(html.find("id=\"playground-root\""), std::string::npos);
  EXPECT_NE(html.find("Every figure above was computed once"), std::string::npos);
  EXPECT_NE(html.find("id=\"posenc-wasm\">AGFzbQEAAAA=</script>"), std::string::npos);
  EXPECT_NE(html.find("id=\"posenc-presets\""), std::string::npos);
  EXPECT_NE(html.find("window.posencReady"), std::string::npos);       // web/posenc_api.js
  EXPECT_NE(html.find("window.posencPlayground"), std::string::npos);  // web/playground.js
  EXPECT_NE(html.find(".pg-panel"), std::string::npos);                // web/playground.css
  // Without a playground argument (posenc plot, older callers) none of it.
  const std::string plain = RenderHtml(r, lib);
  EXPECT_EQ(plain.find("posenc-wasm"), std::string::npos);
  EXPECT_EQ(plain.find("id=\"playground\""), std::string::npos);
}

TEST(PlaygroundPage, WithoutModuleTheSectionSaysWhy) {
  const std::string dir = test::TempDir("playground_page_missing");
  const WasmDirEnv env(dir);
  const PlaygroundModule m = LoadPlaygroundModule();
  Report r;
  r.title = "t";
  const std::string html = RenderHtml(r, ChartLibrary{"", "", ""}, &m);
  EXPECT_NE(html.find("<section id=\"playground\">"), std::string::npos);
  EXPECT_NE(html.find("class=\"pg-unavailable\">The live playground is not in this page: no "
                      "posenc.js and posenc.wasm in " +
                      dir),
            std::string::npos);
  EXPECT_EQ(html.find("id=\"posenc-wasm\""), std::string::npos);
}

TEST(PlaygroundPage, WritePlaygroundWritesOneSelfContainedPage) {
  const std::string dir = FakeModuleDir("playground_write");
  const WasmDirEnv env(dir);
  const PlaygroundModule m = LoadPlaygroundModule();
  const std::string out = test::TempDir("playground_write_out") + "/page";
  const std::string path = WritePlayground(ChartLibrary{"/*V*/", "/*VL*/", "/*E*/"}, m, out);
  EXPECT_EQ(path, out + "/index.html");
  std::ifstream in(path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("id=\"playground-root\""), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("Every figure above"), std::string::npos);  // no report above it
  // A second run replaces its own folder.
  EXPECT_NO_THROW(WritePlayground(ChartLibrary{"", "", ""}, m, out));
}

}  // namespace
}  // namespace posenc::report
