#!/usr/bin/env python3
"""Writes docs/evidence/choose.json, the evidence base of `posenc choose`,
from posenc's own measurements and the support matrix:

- the committed runs of `posenc experiment extrapolation`: the default run
  (docs/experiments/extrapolation/results.json) and the 3x-training check
  (docs/experiments/extrapolation-3x/results.json and its second-run/,
  together one run "3x"): bits/byte of every row at every evaluation length,
  errors, positional parameters, fine-tuning settings, last-quarter drops;
- the benchmark docs/evidence/scheme_cost.json (bench/scheme_cost.py): the
  fused attention's time per scheme relative to no positional term;
- docs/evidence/support.json: engine x scheme support with a source per
  cell, and the literature for what posenc does not measure.

Every number in the output is copied from a measurement file, with the file
and the field it came from; nothing is typed in by hand. `--check` compares
the committed file with what the script would write now (the test suite runs
it, so the evidence cannot drift from the measurements).

usage: /usr/bin/python3 scripts/make_evidence.py [--root DIR] [-o FILE] [--check]
"""
import argparse
import hashlib
import json
import pathlib
import sys

DEFAULT_RUN = "docs/experiments/extrapolation/results.json"
RUNS_3X = ["docs/experiments/extrapolation-3x/results.json",
           "docs/experiments/extrapolation-3x/second-run/results.json"]
BENCH = "docs/evidence/scheme_cost.json"
SUPPORT = "docs/evidence/support.json"
OUTPUT = "docs/evidence/choose.json"

# An experiment row -> (the attention scheme it runs in the benchmark, the
# engine-support feature it needs). The rope rows' frequency scheme comes
# from the row's "extension" / "finetune" record, else from its name (the
# experiment's names: rope+pi linear, rope+ntk dynamic without training and
# static ntk when fine-tuned, rope+yarn yarn).
NAME_TYPES = {"rope+pi": "linear", "rope+ntk": "dynamic", "rope+yarn": "yarn",
              "rope+pi+ft": "linear", "rope+ntk+ft": "ntk", "rope+yarn+ft": "yarn"}


def row_features(name, entry):
    trained = entry.get("trained_as", name)
    if trained != "rope":
        return ("none" if trained in ("none", "sinusoidal", "learned") else trained), trained
    rope_type = ((entry.get("finetune") or {}).get("rope_type")
                 or (entry.get("extension") or {}).get("rope_type") or NAME_TYPES.get(name))
    return "rope", ("rope" if rope_type in (None, "default") else f"rope:{rope_type}")


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(root, rel):
    path = root / rel
    try:
        return json.loads(path.read_text(encoding="utf-8")), path
    except (OSError, ValueError) as e:
        sys.exit(f"make_evidence: cannot read '{rel}': {e}")


def run_rows(root, name, files):
    """{row: {...}} of one named run (several results.json of the same
    configuration merged), plus the run's description."""
    rows, described = {}, []
    for rel in files:
        res, path = load(root, rel)
        cfg = res["config"]
        if cfg.get("quick"):
            sys.exit(f"make_evidence: '{rel}' is a --quick run, not a measurement")
        L = cfg["train_length"]
        described.append({"source": rel, "sha256": sha256(path), "date": cfg.get("date"),
                          "steps": cfg["steps"], "train_length": L,
                          "tokens_per_scheme": cfg.get("tokens_per_scheme"),
                          "eval_tokens": cfg.get("eval_tokens"),
                          "cpu": cfg.get("machine", {}).get("cpu")})
        for row, e in res["schemes"].items():
            evals = {}
            for r in e["eval"]:
                key = str(r["length"])
                evals[key] = {"bits_per_byte": r["bits_per_byte"],
                              "field": f"schemes.{row}.eval[length={r['length']}].bits_per_byte"}
                if r.get("error"):
                    evals[key]["error"] = r["error"]
            bench_scheme, feature = row_features(row, e)
            out = {"source": rel, "train_length": L, "steps": cfg["steps"],
                   "trained_as": e.get("trained_as", row), "eval": evals,
                   "positional_params": e.get("positional_params"),
                   "params": e.get("params"),
                   "train_tokens_per_s": e.get("train_tokens_per_s"),
                   "val_drop_last_quarter": e.get("val_drop_last_quarter"),
                   "bench_scheme": bench_scheme, "feature": feature}
            if "extension" in e:
                out["extension"] = e["extension"]
            if "finetune" in e:
                out["finetune"] = e["finetune"]
            rows[row] = out
    return {"name": name, "files": described, "rows": rows}


def bench_costs(root):
    doc, path = load(root, BENCH)
    costs = {}
    for i, r in enumerate(doc["results"]):
        costs[r["scheme"]] = {
            "forward_relative_to_none": r["forward_relative_to_none"],
            "forward_backward_relative_to_none": r["forward_backward_relative_to_none"],
            "forward_ms": r["forward_ms"],
            "field": f"results[{i}].forward_backward_relative_to_none"}
    return {"source": BENCH, "sha256": sha256(path), "shape": doc["shape"],
            "threads": doc["threads"], "machine": doc["machine"], "date": doc["date"],
            "command": doc["command"], "schemes": costs}


def build(root):
    support, spath = load(root, SUPPORT)
    runs = [run_rows(root, "default", [DEFAULT_RUN]), run_rows(root, "3x", RUNS_3X)]
    bench = bench_costs(root)
    for run in runs:
        for row, e in run["rows"].items():
            if e["bench_scheme"] not in bench["schemes"]:
                sys.exit(f"make_evidence: row '{row}' needs the benchmark of scheme "
                         f"'{e['bench_scheme']}', which {BENCH} lacks")
            if e["feature"] not in support["features"]:
                sys.exit(f"make_evidence: row '{row}' needs feature '{e['feature']}', which "
                         f"{SUPPORT} lacks")
    return {
        "about": "The evidence base of `posenc choose`, written by scripts/make_evidence.py "
                 "from the files under 'inputs'; do not edit by hand (rerun the script).",
        "format": 1,
        "path": OUTPUT,
        "inputs": {"support": {"source": SUPPORT, "sha256": sha256(spath)}},
        "engines": support["engines"],
        "runs": runs,
        "cost": bench,
        "support": support["features"],
        "literature": support["literature"],
        "finetune_literature": support["finetune_literature"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--check", action="store_true",
                   help="exit 1 if the committed file differs from what would be written")
    a = p.parse_args()
    root = pathlib.Path(a.root)
    text = json.dumps(build(root), indent=1, sort_keys=False, allow_nan=False) + "\n"
    out = pathlib.Path(a.output) if a.output else root / OUTPUT
    if a.check:
        old = out.read_text(encoding="utf-8") if out.exists() else ""
        if old != text:
            sys.exit(f"make_evidence: '{out}' is not what scripts/make_evidence.py writes from "
                     "the measurements; rerun it")
        print(f"make_evidence: '{out}' is up to date")
        return
    out.write_text(text, encoding="utf-8")
    print(f"make_evidence: wrote '{out}'")


if __name__ == "__main__":
    main()
