#!/usr/bin/env python3
"""Runs every command shown in the repository's Markdown shell blocks
(```sh / ```bash / ```shell) on the built release tree, so that the READMEs
and docs cannot drift from the code: each command must exit 0 within its
timeout, and a command that names an output (-o / --output / a `>`
redirection) must leave that file, or a non-empty folder, behind.
Registered as the ctest `doc_commands` (tests/CMakeLists.txt) for the build
tree build/release, which the commands name.

Each command runs as written, in a fresh temporary directory that mirrors
the repository root: one symbolic link per top-level entry (build/,
examples/, tests/, node_modules/, ...) except the folders that documented
commands write (OUTPUTS below). So a command sees the paths the docs name,
its outputs land in the scratch directory and never in the source tree, and
the commands pass in any order and any number of times, whatever a user's
earlier run (scripts/run.sh's report/, say) left in the checkout. A command
whose output path would go through a link into the source tree fails the
check.

A command is one line of a block (a trailing backslash continues it; blank
lines and comment lines are not commands). SKIP below lists the only
commands not run, each with its reason (printed): the set-up, build and test
commands themselves, commands that take minutes (benchmarks), and ones that
install into the machine's environment; the ctest `python_wheel` and the
install tests run the packaging commands in scratch directories instead.

usage: run_doc_commands.py ROOT [--list]
"""
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# (regex matched against the command, reason). Keep it short and explicit.
SKIP = [
    (r"^bash scripts/run\.sh$", "the main job itself: set-up, build and report (minutes)"),
    (r"^bash scripts/test\.sh$", "the test command itself (this check is part of it)"),
    (r"posenc bench ", "a benchmark: minutes; publishable figures are taken on an idle machine"),
    (r"posenc experiment extrapolation",
     "the experiment: up to 20 minutes (--quick: 4); the suite runs a tiny configuration "
     "(ctest ExperimentCli, pytest test_extrapolation)"),
    (r"^cmake --preset release && cmake --build",
     "the build command: the tree is built before tests run"),
    (r"-m pytest -q python/tests$", "the Python test suite itself (run by scripts/test.sh)"),
    (r"bench/ring_attention\.py( --backward)?$",
     "a benchmark: minutes; publishable figures are taken on an idle machine"),
    (r"torchrun --nnodes 2 ",
     "needs two hosts; the one-host torchrun command of docs/DISTRIBUTED.md runs"),
    (r"^bash scripts/fuzz\.sh", "the fuzzers: minutes to hours each; scripts/test.sh runs every "
     "target for 20 s"),
    (r"fuzz_cli build/fuzz/artifacts/", "replays a crash file named by the fuzzer (a placeholder)"),
    (r"^cmake --preset tsan", "the ThreadSanitizer build and tests (run by scripts/test.sh)"),
    (r"--experiment my-run", "reads the output of the experiment command above it (skipped)"),
    (r"^pip install \. --no-build-isolation$",
     "installs into the current environment; ctest python_wheel runs it in a scratch venv"),
    (r"-m build --wheel --no-isolation$",
     "writes dist/ into the source tree; ctest python_wheel runs it"),
]
TIMEOUT_S = 120
SKIP_DIRS = {"build", "node_modules", ".git", "report", "dist"}
# Top-level folders that documented commands (or scripts/run.sh) write: not
# mirrored into a command's scratch directory, so they start absent there.
OUTPUTS = {".git", "report", "my-run", "dist", "out", "experiment-quick", "playground"}


def markdown_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".md"):
                yield pathlib.Path(dirpath) / name


def commands(path):
    """(line number, command) of every shell block line in `path`."""
    out, block, pending, start = [], False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if not block:
            block = re.fullmatch(r"```(sh|bash|shell)", stripped) is not None
            continue
        if stripped.startswith("```"):
            block = False
            continue
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        out.append((start, pending + stripped))
        pending = ""
    return out


def strip_comment(command):
    """The command without a trailing `# ...` comment outside quotes."""
    quote = None
    for i, ch in enumerate(command):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command


def scratch_mirror(root):
    """A fresh temporary directory with a link to each top-level entry of
    root except OUTPUTS."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="posenc-doc-"))
    for entry in sorted(root.iterdir()):
        if entry.name not in OUTPUTS:
            (scratch / entry.name).symlink_to(entry)
    return scratch


def output_paths(command):
    """The paths a command names as its output: the value of -o / --output
    (also --output=X) and the target of a `>` redirection."""
    try:
        words = shlex.split(command, comments=False)
    except ValueError:
        return []
    out = []
    for i, w in enumerate(words):
        if w in ("-o", "--output", ">") and i + 1 < len(words):
            out.append(words[i + 1])
        elif w.startswith("--output="):
            out.append(w.split("=", 1)[1])
        elif w.startswith(">") and len(w) > 1 and not w.startswith(">&"):
            out.append(w[1:])
    return [p for p in out if p and not p.startswith("/dev/")]


def check_outputs(command, scratch):
    """None when every named output is in the scratch directory and was
    written (a non-empty file, or a folder holding a file); else why not."""
    for name in output_paths(command):
        path = scratch / name
        first = pathlib.Path(name).parts[0] if not os.path.isabs(name) else None
        if first is None or (scratch / first).is_symlink():
            return f"output '{name}' is outside the scratch directory (it would write into " \
                   "the source tree or an absolute path)"
        if path.is_dir():
            if not any(p.is_file() for p in path.rglob("*")):
                return f"output folder '{name}' is empty"
        elif not path.is_file() or path.stat().st_size == 0:
            return f"output '{name}' was not written (missing or empty)"
    return None


def run(command, cwd):
    """(exit code, stderr) of one command in its own process group; on the
    timeout the whole group is killed, so no child outlives the check."""
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", command], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return 124, f"timed out after {TIMEOUT_S} s (process group killed)"


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    listing = "--list" in sys.argv
    passed = failed = skipped = 0
    for path in markdown_files(root):
        rel = path.relative_to(root)
        for number, raw in commands(path):
            command = strip_comment(raw)
            where = f"{rel}:{number}"
            reason = next((r for pattern, r in SKIP if re.search(pattern, command)), None)
            if reason:
                skipped += 1
                print(f"SKIP {where}: {command}\n     ({reason})")
                continue
            if listing:
                print(f"RUN  {where}: {command}")
                continue
            t0 = time.monotonic()
            scratch = scratch_mirror(root)
            try:
                rc, err = run(command, scratch)
                problem = check_outputs(command, scratch) if rc == 0 else None
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            dt = time.monotonic() - t0
            if rc == 0 and problem is None:
                passed += 1
                print(f"PASS {where} ({dt:.1f} s): {command}")
            elif rc == 0:
                failed += 1
                print(f"FAIL {where} ({dt:.1f} s): {command}\n     {problem}")
            else:
                failed += 1
                print(f"FAIL {where} (exit {rc}, {dt:.1f} s): {command}\n{err[-2000:]}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
