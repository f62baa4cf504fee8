#!/usr/bin/python3
"""Every list of attention schemes written in the docs, headers, sources and docstrings is the
registry's: a run of five or more registered names ("none, absolute, rope, ...") must be the list
of all registered schemes or of the fused ones (`posenc schemes --json`), in registration order.
Shorter runs are choices (a benchmark's cases, a figure's panels), not copies of the registry.
Comment markers at line breaks (//, #) are read through, so a list may wrap.

Usage: check_scheme_lists.py ROOT POSENC   (POSENC: the CLI, for `posenc schemes --json`)
       check_scheme_lists.py --self-test ROOT POSENC
Exit 0 when every list matches; 1 with each mismatch printed (file, line, list, expected).
"""
import json
import pathlib
import re
import subprocess
import sys

MIN_NAMES = 5
SKIP = ("tests/", "docs/experiments/", "docs/evidence/")
# Files whose long lists are a choice, not a copy of the registry, and why.
CHOICES = {
    "cli/report/section_attention.cc": "the report's attention panels (absolute codes included)",
    "python/posenc/experiments/extrapolation/__init__.py": "the experiment's scheme table",
}


def registry(posenc):
    """(all names, fused names) in registration order."""
    schemes = json.loads(subprocess.run([posenc, "schemes", "--json"], check=True,
                                        capture_output=True, text=True).stdout)
    return [s["name"] for s in schemes], [s["name"] for s in schemes if s["fused"]]


def lists_in(text, names):
    """(line, [names]) of every run of at least MIN_NAMES names separated by commas."""
    flat = re.sub(r"\n[ \t]*(//+|#+|\*)?[ \t]*", " ", text)
    starts = [0]
    for m in re.finditer(r"\n", text):
        starts.append(m.end())
    word = "(?:" + "|".join(sorted(names, key=len, reverse=True)) + ")"
    found = []
    for m in re.finditer(rf"\b{word}(?:,\s+(?:and\s+)?{word}\b){{{MIN_NAMES - 1},}}", flat):
        run = re.findall(rf"\b{word}\b", m.group(0))
        # Line of the match in the original text: count the joins removed before it.
        before = text[:_original_offset(text, flat, m.start())]
        line = 1 + before.count("\n")
        found.append((line, run))
    return found


def _original_offset(text, flat, flat_pos):
    """Offset in `text` of position flat_pos of the flattened text."""
    pos = 0
    for m in re.finditer(r"\n[ \t]*(//+|#+|\*)?[ \t]*", text):
        removed_before = m.start() - pos
        if flat_pos < removed_before:
            return pos + flat_pos
        flat_pos -= removed_before + 1
        pos = m.end()
    return pos + flat_pos


def mismatches(root, files, all_names, fused):
    out = []
    for name in files:
        if name in CHOICES:
            continue
        text = (pathlib.Path(root) / name).read_text(errors="replace")
        for line, run in lists_in(text, all_names):
            if run not in (all_names, fused):
                out.append(f"{name}:{line}: schemes {', '.join(run)}; the registry has "
                           f"{', '.join(fused)} (fused) and {', '.join(all_names)} (all)")
    return out


def tracked(root):
    names = subprocess.run(["git", "ls-files", "*.md", "*.h", "*.cc", "*.py", "*.js", "*.pyi"],
                           cwd=root, check=True, capture_output=True, text=True).stdout.split()
    return [n for n in names if not n.startswith(SKIP)]


def self_test(root, all_names, fused):
    planted = pathlib.Path(root) / "build" / "scheme_list_self_test.md"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text("Fused schemes: " + ", ".join(fused[:-1]) + ".\n\n// wraps: "
                       + ", ".join(fused[:3]) + ",\n// " + ", ".join(fused[3:]) + "\n")
    found = mismatches(root, [planted.relative_to(root).as_posix()], all_names, fused)
    planted.unlink()
    assert len(found) == 1 and ":1:" in found[0], found
    print("self-test: a list without its last scheme is found; a wrapped full list passes")


def main(argv):
    if argv[1] == "--self-test":
        root, posenc = argv[2], argv[3]
        self_test(root, *registry(posenc))
        return 0
    root, posenc = argv[1], argv[2]
    all_names, fused = registry(posenc)
    files = tracked(root)
    found = mismatches(root, files, all_names, fused)
    for line in found:
        print(line)
    if not found:
        print(f"scheme lists: every list of {MIN_NAMES}+ scheme names in {len(files)} files is the "
              "registry's")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
