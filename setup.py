"""Builds the extension posenc._posenc with the system CMake for setuptools
(pyproject.toml has the metadata; `pip install . --no-build-isolation` and
`python3 -m build --wheel --no-isolation` both come here).

CMake configures this repository with only the library and the Python module
(POSENC_BUILD_PYTHON=ON; no CLI, tests, shared library or install rules) for
the interpreter running setup.py, in build/python-<tag>/, builds the target
_posenc and copies the module into the wheel. Set POSENC_CMAKE_BUILD_DIR to
an already configured build tree (e.g. build/release) to build _posenc there
instead: the same sources and Release flags, so the wheel holds the module
that tree's tests ran against (the wheel test in tests/install uses this to
stay fast). The interpreter must match the tree's (same extension suffix);
setup.py checks it. CMAKE_BUILD_PARALLEL_LEVEL sets the build's job count.
"""
import os
import pathlib
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "build" / "setuptools").mkdir(parents=True, exist_ok=True)  # setup.cfg's egg_base


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        reuse = os.environ.get("POSENC_CMAKE_BUILD_DIR")
        if reuse:
            build_dir = pathlib.Path(reuse).resolve()
            if not (build_dir / "CMakeCache.txt").exists():
                raise RuntimeError(f"POSENC_CMAKE_BUILD_DIR={reuse}: not a configured CMake tree")
        else:
            build_dir = ROOT / "build" / f"python-{sys.implementation.cache_tag}"
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DPOSENC_BUILD_PYTHON=ON",
                            "-DPOSENC_BUILD_CLI=OFF", "-DPOSENC_BUILD_TESTS=OFF",
                            "-DPOSENC_BUILD_SHARED=OFF", "-DPOSENC_INSTALL=OFF",
                            f"-DPOSENC_PYTHON={sys.executable}"], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_posenc", "-j", jobs],
                       check=True)
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve()
        built = build_dir / "python" / "posenc" / target.name
        if not built.exists():
            found = sorted(p.name for p in (build_dir / "python" / "posenc").glob("_posenc*.so"))
            raise RuntimeError(f"{build_dir}: no {target.name} (found {found}); the tree was built "
                               f"for another interpreter than {sys.executable} "
                               f"(EXT_SUFFIX {sysconfig.get_config_var('EXT_SUFFIX')})")
        target.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(target))


setup(ext_modules=[CMakeExtension("posenc._posenc")], cmdclass={"build_ext": CMakeBuild})
