#!/usr/bin/python3
"""A/B comparison of two (or more) posenc builds on one machine, in one run.

Runs `posenc bench WHAT ... --json` of each binary in alternating rounds
(A B C A B C ...) so that slow minutes of a noisy machine hit every build
alike, then prints, per case (threads and the entry's identifying fields:
kernel, scheme, seq or shape, dtype, ...), the first build's minimum and median
time and every other build's ratio to it (min and median; < 1 is faster).
Used for the A/Bs of docs/PERFORMANCE.md:

  /usr/bin/python3 bench/ab_compare.py --rounds 8 --threads 2,1 \\
      before=/tmp/posenc_before17 after=/tmp/posenc_after17

--what picks the benchmark (attention, the default, or rope); --bench-args are
passed to it (default: --no-torch --max-seq 4096 --reps 3 --warmup 1).
"""

import argparse
import collections
import json
import math
import statistics
import subprocess
import sys


IDENTIFYING = ("kernel", "scheme", "seq", "shape", "dtype", "inplace", "precision", "layout")


def case_of(entry):
    """The case an entry measures: its identifying fields, as one short string."""
    parts = []
    for field in IDENTIFYING:
        value = entry.get(field)
        if value is None or value == "":
            continue
        if isinstance(value, list):
            value = "x".join(str(v) for v in value)
        parts.append(f"{field}={value}" if isinstance(value, bool) else str(value))
    return " ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", nargs="+", help="NAME=PATH of a posenc binary (first: the base)")
    ap.add_argument("--rounds", type=int, default=8, help="alternating rounds (default 8)")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts (default 2)")
    ap.add_argument("--what", choices=["attention", "rope"], default="attention",
                    help="the posenc bench to run (default attention)")
    ap.add_argument("--bench-args", default="--no-torch --max-seq 4096 --reps 3 --warmup 1",
                    help="arguments of `posenc bench attention` (default: %(default)s)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {a.rounds}")
    try:
        threads = [int(t) for t in a.threads.split(",")]
    except ValueError:
        ap.error(f"--threads must be comma-separated integers, got {a.threads!r}")
    builds = []
    for b in a.builds:
        name, sep, path = b.partition("=")
        if not sep or not name or not path:
            ap.error(f"build must be NAME=PATH, got {b!r}")
        builds.append((name, path))
    if len(builds) < 2:
        ap.error(f"need at least two builds to compare, got {len(builds)}")
    extra = a.bench_args.split()

    times = collections.defaultdict(list)  # (threads, case, build) -> [ms]
    for t in threads:
        for r in range(a.rounds):
            for name, path in builds:
                cmd = [path, "bench", a.what, "--threads", str(t), "--json", *extra]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                for e in json.loads(out)["results"]:
                    if e.get("ms") is None:
                        continue
                    times[(t, case_of(e), name)].append(e["ms"])
            print(f"threads {t}: round {r + 1}/{a.rounds} done", file=sys.stderr)

    base = builds[0][0]
    head = f"{'threads':>7} {'case':<48} | {base} min / median ms"
    for name, _ in builds[1:]:
        head += f" | {name}/{base} min, median"
    print(head)
    logs = collections.defaultdict(list)
    for key in sorted({k[:2] for k in times}):
        b = times[key + (base,)]
        line = f"{key[0]:>7} {key[1]:<48} |"
        line += f" {min(b):8.2f} {statistics.median(b):8.2f}"
        for name, _ in builds[1:]:
            o = times[key + (name,)]
            rmin, rmed = min(o) / min(b), statistics.median(o) / statistics.median(b)
            logs[name].append(math.log(rmin))
            line += f" | {rmin:6.3f} {rmed:6.3f}"
        print(line)
    for name, _ in builds[1:]:
        print(f"geometric mean of {name}/{base} (min times): "
              f"{math.exp(statistics.fmean(logs[name])):.3f} over {len(logs[name])} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
