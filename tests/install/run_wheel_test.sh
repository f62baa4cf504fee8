#!/usr/bin/env bash
# The Python package as a user installs it (registered in tests/CMakeLists.txt,
# release builds): builds the wheel with `python3 -m build --wheel
# --no-isolation` (Debian python3-build) from the source tree, installs it
# into a fresh `python3 -m venv --system-site-packages` under /tmp, checks
# that `import posenc` there (from another directory) loads the installed
# package with the VERSION file's version, and runs python/examples through
# their checks (python/tests/test_examples.py, copied with the examples, so
# nothing is imported from the source tree). Then `pip install .
# --no-build-isolation` into the same venv replaces it from the source tree.
#
# Both builds reuse BUILD_DIR's extension (POSENC_CMAKE_BUILD_DIR, see
# setup.py): the same sources and flags as the tree's tests, so the test
# spends seconds, not a second compile of the library.
#
#   run_wheel_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1") source=$(realpath "$2")
version=$(head -n1 "$source/VERSION")
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/posenc-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export POSENC_CMAKE_BUILD_DIR=$build PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s.%N) last=$start
step() {  # prints the seconds the previous step took
  local now; now=$(date +%s.%N)
  awk -v a="$last" -v b="$now" -v s="$1" 'BEGIN { printf "  %-28s %5.1f s\n", s, b - a }'
  last=$now
}

cd "$source"
# setuptools packs everything under its build/lib into the wheel: files a
# previous build left there (a module since moved or removed) would ship and
# hide a package missing from pyproject.toml. Start from an empty one.
rm -rf "$source"/build/setuptools/lib.* "$source"/build/setuptools/bdist.*
"$py" -m build --wheel --no-isolation --outdir "$tmp/dist" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log"; exit 1; }
wheel=$(ls "$tmp"/dist/posenc-"$version"-*.whl)
step "build the wheel"
# --without-pip: the venv uses Debian's pip from the system site-packages
# (ensurepip would spend ~10 s copying a second pip into it).
"$py" -m venv --system-site-packages --without-pip "$tmp/venv"
step "make the venv"
"$tmp/venv/bin/python" -m pip install --no-deps -q "$wheel"
step "pip install the wheel"

mkdir -p "$tmp/python/tests" "$tmp/run"
cp -r "$source/python/examples" "$tmp/python/examples"
cp "$source/python/tests/conftest.py" "$source/python/tests/test_examples.py" "$tmp/python/tests/"
cd "$tmp/run"
check='import posenc, posenc.torch, posenc.torch.distributed, sys
assert posenc.__file__.startswith(sys.argv[1]), posenc.__file__
assert posenc.torch.__file__.startswith(sys.argv[1]), posenc.torch.__file__
assert posenc.__version__ == sys.argv[2], posenc.__version__
print("imported", posenc.__file__, posenc.__version__)'
env -u PYTHONPATH "$tmp/venv/bin/python" -c "$check" "$tmp/venv/" "$version"
env -u PYTHONPATH "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$tmp/python/tests"
step "import + examples"

cd "$source"
"$tmp/venv/bin/python" -m pip install --no-deps --no-build-isolation --force-reinstall -q . \
  >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
cd "$tmp/run"
env -u PYTHONPATH "$tmp/venv/bin/python" -c "$check" "$tmp/venv/" "$version"
step "pip install . + import"
awk -v a="$start" -v b="$(date +%s.%N)" -v w="$(basename "$wheel")" \
  'BEGIN { printf "wheel test: %s, %.1f s\n", w, b - a }'
