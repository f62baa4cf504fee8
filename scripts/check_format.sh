#!/usr/bin/env bash
# Format check of the test command: every tracked C/C++ file is what
# clang-format (Debian's, .clang-format: Google style, 100 columns) makes of
# it, and no other tracked source (Python, JS, shell, CMake) has a line over
# 100 columns, and no code comment records a timing or a date (the figure
# belongs in docs/PERFORMANCE.md, "Design figures"; the comment keeps the
# reason). Prints each offending file; exits 1 if there is any.
# `bash scripts/check_format.sh --fix` rewrites the C/C++ files in place.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
mapfile -t cxx < <(git ls-files '*.cc' '*.h' '*.c')
status=0
if ((fix)); then
  clang-format -i "${cxx[@]}"
else
  for f in "${cxx[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "format: $f differs from clang-format (bash scripts/check_format.sh --fix)"
      status=1
    fi
  done
fi
mapfile -t other < <(git ls-files '*.py' '*.mjs' '*.js' '*.css' '*.sh' '*.cmake' \
  '*CMakeLists.txt' '*.in')
long_lines='length > 100 { printf "%s:%d: %d columns\n", FILENAME, FNR, length }'
if long=$(awk "$long_lines" "${other[@]}") &&
   [ -n "$long" ]; then
  echo "$long"
  echo "format: lines over 100 columns"
  status=1
fi
# Comments only: // in C/C++ and JS, # in Python, shell and CMake.
notebook='^\s*(//|#).*([0-9][0-9.]* ?(ms|us|µs)\b|\b20[0-9]{2}-[01][0-9]\b)'
mapfile -t code < <(git ls-files 'src/*' 'cli/*' 'include/*' 'python/*.py' 'wasm/*' |
  grep -E '\.(cc|h|c|py|js)$')
if figures=$(grep -nE "$notebook" "${code[@]}") && [ -n "$figures" ]; then
  echo "$figures"
  echo "format: measured figures or dates in code comments (move them to docs/PERFORMANCE.md)"
  status=1
fi
if ((status == 0)); then
  echo "format: ${#cxx[@]} C/C++ files clang-formatted, no line over 100 columns"
fi
exit "$status"
