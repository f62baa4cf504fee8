#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (cmake --preset fuzz: clang-16,
# ASan + UBSan) and runs each for a bounded time, one after the other.
#   scripts/fuzz.sh [--seconds N] [--only NAME[,NAME...]] [--no-build] [-- extra libFuzzer flags]
# N defaults to 20 (what CI runs); 0 means no time bound (pass -- -runs=K).
# Seeds: the repository's seed folders
# (examples/configs, tests/golden/npy, fuzz/seeds/<target>) are read only; new
# inputs go to build/fuzz/corpus/<target>, crashes to build/fuzz/artifacts/.
# Prints one line per target (executions, coverage, features) and exits
# non-zero if any target found a crash, a leak, a timeout or an OOM.
# docs/RELIABILITY.md: the targets, the figures of a long run, adding one.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=20
ONLY=""
BUILD=1
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_PER_TARGET="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "fuzz.sh: unknown argument '$1' (use --seconds N, --only NAMES, --no-build)" >&2
       exit 2 ;;
  esac
done

if ! command -v clang++-16 >/dev/null 2>&1; then
  echo "fuzz.sh: clang++-16 not found: run scripts/setup.sh (clang-16, libfuzzer-16-dev)" >&2
  exit 2
fi

JOBS=${JOBS:-$(nproc)}
if [ "$BUILD" -eq 1 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$JOBS"
fi

# target | max input bytes | seed folders (read only)
TARGETS=(
  "model_config|8192|examples/configs fuzz/seeds/model_config"
  "npy|4096|tests/golden/npy"
  "positions|256|fuzz/seeds/positions"
  "cli|512|fuzz/seeds/cli"
  "rope_views|512|fuzz/seeds/rope_views"
  "flash_views|1024|fuzz/seeds/flash_views"
  "gguf|4096|tests/golden/gguf"
)

# Absolute paths: fuzz_cli runs in a private temporary folder (chdir).
OUT=$PWD/build/fuzz
mkdir -p "$OUT/artifacts" "$OUT/logs"
# malloc_context_size=0: ASan records no stack per allocation (the same
# errors are found; a report lacks the allocation / free stacks, which a
# replay of the saved input without this option prints). fuzz_cli, which
# allocates heavily while building the CLI11 app, runs ~1.4x faster.
ASAN_DEFAULT=detect_leaks=1:allocator_may_return_null=0:malloc_context_size=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-$ASAN_DEFAULT}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for entry in "${TARGETS[@]}"; do
  IFS='|' read -r name max_len seeds <<<"$entry"
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
  corpus="$OUT/corpus/$name"
  mkdir -p "$corpus"
  dict=()
  [ -f "fuzz/$name.dict" ] && dict=(-dict="$PWD/fuzz/$name.dict")
  seed_dirs=()
  for s in $seeds; do seed_dirs+=("$PWD/$s"); done
  log="$OUT/logs/$name.log"
  rc=0
  "$OUT/fuzz/fuzz_$name" "$corpus" "${seed_dirs[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -max_len="$max_len" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$OUT/artifacts/$name-" "${dict[@]}" "${EXTRA[@]}" >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $name: ok, ${execs} executions (${SECONDS_PER_TARGET} s bound), cov ${cov}, ft ${ft}"
  else
    echo "fuzz $name: FAILED (exit $rc) after ${execs} executions; log $log," \
      "inputs $OUT/artifacts/$name-*" >&2
    grep -E 'ERROR|FUZZ_CHECK|runtime error|Test unit written' "$log" | head -5 >&2 || true
    failed+=("$name")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets passed"
