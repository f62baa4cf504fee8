#!/usr/bin/python3
"""The method map of docs/ARCHITECTURE.md is true: every path it names exists, every method has a
header, an implementation and tests, and every attention scheme with a source file of its own
(src/attention/schemes/<name>.cc) is on the map. Per-thread buffers have one mechanism,
kernels::ThreadBuffers (src/kernels/thread_scratch.h): `thread_local` appears elsewhere in src/
only for the per-thread state listed in THREAD_STATE, each with its reason.

Usage: check_architecture.py ROOT   (exit 0: the map holds; 1: each problem printed)
       check_architecture.py --self-test   (a map with a wrong path and a missing scheme fails)
"""
import pathlib
import re
import sys

COLUMNS = ["method", "header (formula)", "implementation", "fast kernel", "tests", "golden data"]
REQUIRED = ["header (formula)", "implementation", "tests"]
MECHANISM = "src/kernels/thread_scratch.h"
THREAD_STATE = {  # file: why its thread_local is state, not buffers
    "src/capi/c_api.cc": "the last error message, the default Context, a RopeParams per thread",
    "src/capi/c_attention.cc": "the cache of decode plans keyed on the params' contents",
    "src/core/rope.cc": "the cache of frequency tables keyed on the RoPE params",
    "src/threading/thread_pool.cc": "the pool whose task runs on this thread",
    "src/kernels/simd/compute_x86.cc": "fixed tiles of the AMX ceiling probe (no allocation)",
}


def method_map(text):
    """Rows of the table under "## Method map" as dicts keyed by COLUMNS."""
    section = text.split("## Method map", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    if header != COLUMNS:
        raise ValueError(f"method map columns {header}, expected {COLUMNS}")
    return [dict(zip(COLUMNS, (c.strip() for c in row.strip("|").split("|")))) for row in rows[2:]]


def problems(root, text):
    root = pathlib.Path(root)
    found = []
    rows = method_map(text)
    named = set()
    for row in rows:
        for column in COLUMNS[1:]:
            paths = [p for p in re.findall(r"`([^`]+)`", row[column]) if "/" in p]
            if column in REQUIRED and not paths:
                found.append(f"{row['method']}: no path in column '{column}'")
            for path in paths:
                named.add(path)
                if not (root / path).exists():
                    found.append(f"{row['method']}: {column}: {path} does not exist")
    for scheme in sorted((root / "src" / "attention" / "schemes").glob("*.cc")):
        path = scheme.relative_to(root).as_posix()
        if scheme.name != "none.cc" and path not in named:
            found.append(f"scheme source {path} is not on the method map")
    for source in sorted((root / "src").rglob("*")):
        path = source.relative_to(root).as_posix()
        if source.suffix in (".cc", ".h") and path != MECHANISM and path not in THREAD_STATE:
            if "thread_local" in source.read_text():
                found.append(f"{path}: thread_local outside {MECHANISM} (use ThreadBuffers)")
    if len(rows) < 15:
        found.append(f"the method map has {len(rows)} rows")
    return found


def self_test(root):
    text = (pathlib.Path(root) / "docs" / "ARCHITECTURE.md").read_text()
    assert problems(root, text) == [], problems(root, text)
    broken = text.replace("`src/core/alibi.cc`", "`src/core/alibi_typo.cc`", 1)
    broken = broken.replace("`src/attention/schemes/fire.cc`", "`src/attention/fire.cc`", 1)
    found = problems(root, broken)
    assert any("alibi_typo.cc does not exist" in p for p in found), found
    assert any("schemes/fire.cc is not on the method map" in p for p in found), found
    print("self-test: a wrong path and a missing scheme are found")


def main(argv):
    if argv[1:2] == ["--self-test"]:
        self_test(argv[2] if len(argv) > 2 else pathlib.Path(__file__).resolve().parents[2])
        return 0
    root = pathlib.Path(argv[1])
    found = problems(root, (root / "docs" / "ARCHITECTURE.md").read_text())
    for p in found:
        print(p)
    if not found:
        rows = method_map((root / "docs" / "ARCHITECTURE.md").read_text())
        print(f"method map: {len(rows)} rows, every path exists, every scheme source listed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
