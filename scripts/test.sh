#!/usr/bin/env bash
# Sets up, checks the format, builds and runs every test: the suite in release, then again in
# debug under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded
# tests under ThreadSanitizer, every fuzz target for a bounded time
# (FUZZ_SECONDS each, default 20), then the browser tests (report, playground)
# and the Python tests.
# Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== format (clang-format, .clang-format; no line over 100 columns) =="
bash scripts/check_format.sh

echo "== size (no file in src/, cli/, python/ over 600 lines, no function over 80) =="
/usr/bin/python3 scripts/check_size.py

JOBS=${JOBS:-$(nproc)}
export CTEST_OUTPUT_ON_FAILURE=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== release build and tests =="
# The wasm preset first: the report and playground tests read build/wasm/posenc.{js,wasm}.
cmake --preset wasm >/dev/null
cmake --build --preset wasm -j "$JOBS"
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
ctest --preset release -j "$JOBS"

echo "== debug build under ASan/UBSan and tests =="
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$JOBS"
ctest --preset asan -j "$JOBS"

echo "== threaded tests under ThreadSanitizer (tsan preset: two test programs) =="
# setarch -R: gcc 12's TSan runtime fails to map its shadow on kernels with
# high mmap randomisation (vm.mmap_rnd_bits 32); without ASLR it always can.
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$JOBS"
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  setarch "$(uname -m)" -R ctest --preset tsan -j "$JOBS"

echo "== fuzz targets (libFuzzer, ASan + UBSan), ${FUZZ_SECONDS:-20} s each =="
bash scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-20}"

echo "== browser test of the report (headless Chromium via playwright-core) =="
# Writes screenshots to build/release/report_browser_test/ (report.png, plot_1024.png).
node tests/report/browser_test.mjs --posenc build/release/cli/posenc \
  --out build/release/report_browser_test

echo "== browser test of the live playground (posenc compiled to WebAssembly) =="
# Fidelity against the CLI, update speed, size; screenshot in build/release/playground_test/.
node tests/report/playground_test.mjs --posenc build/release/cli/posenc \
  --wasm build/wasm/posenc.wasm --out build/release/playground_test

echo "== Python module tests (pytest) =="
# The release preset builds the module into build/release/python/posenc.
# pytest exits 5 when it collects nothing: that is a failure here too, and
# python/tests/conftest.py fails the run if any test file contributes no test.
rc=0
PYTHONPATH=build/release/python /usr/bin/python3 -m pytest -q python/tests || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests from python/tests" >&2
fi
[ "$rc" -eq 0 ] || exit 1

echo "== all test suites passed =="
