// The report's live playground: posenc compiled to WebAssembly (the wasm
// preset: wasm/bind.cc, build/wasm/posenc.{js,wasm}) plus the page code that
// drives it (web/posenc_api.js: window.posenc; web/playground.js: the
// panels). html.cc inlines all of it, the module as base64, so the page
// still opens offline from file://.
//
// The module is read at run time, like the chart library (html.h): from
// $POSENC_WASM_DIR when set, else PREFIX/share/posenc/wasm beside an
// installed executable, else the build tree's build/wasm (compile-time
// POSENC_WASM_BUILD_DIR). Without it the report keeps every static figure and
// its playground section says how to build the module.
#pragma once

#include <cstddef>
#include <string>

namespace posenc::report {

struct PlaygroundModule {
  std::string loader_js;    // posenc.js: Emscripten's loader (defines createPosencModule)
  std::string wasm_base64;  // posenc.wasm, base64
  std::size_t wasm_bytes = 0;
  std::string dir;  // where they were read
  // {"<config file stem>": "<config.json text>", ...}: the example configs
  // that define RoPE (ExamplesDir()), the presets of the RoPE panel.
  std::string presets_json = "{}";
  std::string unavailable;  // why there is no module ("" when loaded)

  bool available() const { return unavailable.empty(); }
};

// The directory searched for posenc.js and posenc.wasm (see above).
std::string WasmDir();

// Reads the module and the presets. A missing module is not an error: the
// result says why in `unavailable`. An unreadable file that exists throws
// IoError.
PlaygroundModule LoadPlaygroundModule();

// RFC 4648 base64 of `bytes` (no line breaks).
std::string Base64(std::string_view bytes);

}  // namespace posenc::report
