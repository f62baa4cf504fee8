#!/usr/bin/env bash
# Tests of the installed package (registered in tests/CMakeLists.txt, release
# builds only: they test packaging, the sanitizer build tests the code).
#
#   run_install_test.sh c BUILD_DIR SOURCE_DIR WORK_DIR
#     Installs the build tree into WORK_DIR/prefix and builds the C consumer
#     (c_consumer.c) with -std=c11 -Wall -Wextra -Werror -pedantic twice:
#     through pkg-config (posenc.pc) and through CMake find_package(posenc)
#     (c_cmake/); runs both against the installed libposenc.so.
#   run_install_test.sh standalone BUILD_DIR SOURCE_DIR WORK_DIR
#     Installs into a fresh directory under /tmp, then, in a private mount
#     namespace (unshare -m; the mounts vanish with the process, the trees
#     are untouched), mounts an empty tmpfs over the source tree (and over the
#     build tree when it lies elsewhere) and runs the installed `posenc
#     report --quick`, `posenc plot` and `posenc inspect` there. Exit 77
#     (ctest: skipped) with a reason when no mount namespace can be made.
set -euo pipefail
mode=$1 build=$(realpath "$2") source=$(realpath "$3") work=$4
version=$(head -n1 "$source/VERSION")

case "$mode" in
c)
  rm -rf "$work" && mkdir -p "$work"
  prefix=$(realpath "$work")/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
  libdir=$(dirname "$(find "$prefix" -name posenc.pc -path '*pkgconfig*')")/..
  libdir=$(realpath "$libdir")
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  test "$(pkg-config --modversion posenc)" = "$version"
  gguf=$source/tests/golden/gguf/b_llama31_8b_llama3_rope_freqs.gguf
  json=$prefix/share/posenc/configs/llama-3.1-8b.json
  echo "== pkg-config: cc -std=c11 $(pkg-config --cflags --libs posenc)"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags posenc) \
    "$source/tests/install/c_consumer.c" -o "$work/c_consumer_pc" \
    $(pkg-config --libs posenc) -lm -Wl,-rpath,"$libdir"
  "$work/c_consumer_pc" "$version" "$gguf" "$json"
  echo "== CMake find_package(posenc COMPONENTS shared), without Highway or nlohmann_json"
  cmake -S "$source/tests/install/c_cmake" -B "$work/c_cmake" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_DISABLE_FIND_PACKAGE_hwy=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON >/dev/null
  cmake --build "$work/c_cmake" >/dev/null
  "$work/c_cmake/c_consumer" "$version" "$gguf" "$json"
  echo "== pkg-config in the build tree: posenc-uninstalled.pc"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror -pedantic \
    $(PKG_CONFIG_PATH=$build pkg-config --cflags posenc) \
    "$source/tests/install/c_consumer.c" -o "$work/c_consumer_uninstalled" \
    $(PKG_CONFIG_PATH=$build pkg-config --libs posenc) -lm
  uninstalled_libdir=$(PKG_CONFIG_PATH=$build pkg-config --variable=libdir posenc)
  case "$uninstalled_libdir" in "$build"/*) ;; *)
    echo "posenc-uninstalled.pc: libdir $uninstalled_libdir is not in the build tree"; exit 1 ;;
  esac
  LD_LIBRARY_PATH=$uninstalled_libdir "$work/c_consumer_uninstalled" "$version" "$gguf" "$json"
  echo "== exported symbols: every posenc_* in version node POSENC_<major>.<minor>"
  node=POSENC_$(echo "$version" | cut -d. -f1,2)
  syms=$(readelf --dyn-syms -W "$uninstalled_libdir/libposenc.so" | awk '$7 != "UND" {print $8}')
  c_syms=$(echo "$syms" | grep -c '^posenc_[a-z_0-9]*@@' || true)
  bad=$(echo "$syms" | grep '^posenc_' | grep -v "@@$node\$" || true)
  # The exported C functions are exactly those c.h declares.
  declared=$(grep -oE '\bposenc_[a-z0-9_]+\(' "$source/include/posenc/c.h" | tr -d '(' | sort -u)
  exported=$(echo "$syms" | grep '^posenc_' | sed 's/@.*//' | sort -u)
  if [ "$declared" != "$exported" ]; then
    echo "c.h and libposenc.so differ:"; diff <(echo "$declared") <(echo "$exported"); exit 1
  fi
  test -z "$bad" || { echo "C symbols outside $node:"; echo "$bad"; exit 1; }
  if echo "$syms" | grep -q 'hwy'; then echo "Highway symbols exported"; exit 1; fi
  echo "$c_syms C symbols, all @@$node"
  ;;
standalone)
  if ! unshare -m true 2>/dev/null; then
    if unshare -rm true 2>/dev/null; then ns=(unshare -rm); else
      echo "SKIP: no mount namespace (unshare -m / -rm not permitted here): cannot hide the trees"
      exit 77
    fi
  else
    ns=(unshare -m)
  fi
  tmp=$(mktemp -d /tmp/posenc-standalone.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
  hide=("$source")
  case "$build/" in "$source"/*) ;; *) hide+=("$build") ;; esac
  "${ns[@]}" env -u POSENC_NODE_MODULES bash -euo pipefail -c '
    tmp=$1; version=$2; shift 2
    for d in "$@"; do mount -t tmpfs -o size=1m,mode=0755 posenc-hidden "$d"; done
    for d in "$@"; do
      if [ -n "$(ls -A "$d")" ]; then echo "FAIL: $d is still visible" >&2; exit 1; fi
    done
    cd "$tmp"
    posenc=$tmp/prefix/bin/posenc
    test "$("$posenc" --version)" = "posenc $version"
    "$posenc" report --quick -o "$tmp/report" >/dev/null
    "$posenc" plot sinusoidal --positions 32 --dim 16 -o "$tmp/plot.html" >/dev/null
    configs=$tmp/prefix/share/posenc/configs
    "$posenc" inspect "$configs/llama-3.1-8b.json" --json > "$tmp/inspect.json"
    for bundle in vega/build/vega.min.js vega-lite/build/vega-lite.min.js \
                  vega-embed/build/vega-embed.min.js; do
      sig=$(head -c 40000 "$tmp/prefix/share/posenc/node_modules/$bundle" | tail -c 100)
      for page in "$tmp/report/index.html" "$tmp/plot.html"; do
        grep -qF -- "$sig" "$page" || { echo "FAIL: $page lacks $bundle" >&2; exit 1; }
      done
    done
    grep -q "Results of the committed run" "$tmp/report/index.html" || {
      echo "FAIL: the report did not find share/posenc/experiments" >&2; exit 1; }
    grep -q "LongRoPE (Phi-3.5-mini" "$tmp/report/index.html" || {
      echo "FAIL: the report did not find share/posenc/configs" >&2; exit 1; }
    grep -q "\"rope_type\": \"llama3\"" "$tmp/inspect.json"
    echo "standalone: report $(wc -c < "$tmp/report/index.html") bytes," \
         "plot $(wc -c < "$tmp/plot.html") bytes, with ${*} hidden"
  ' standalone "$tmp" "$version" "${hide[@]}"
  ;;
*)
  echo "usage: $0 c|standalone BUILD_DIR SOURCE_DIR WORK_DIR" >&2
  exit 2
  ;;
esac
