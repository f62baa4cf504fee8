"""Files of the extrapolation experiment: DIR/results.json and one CSV per
figure (bits_per_byte.csv: bits/byte against evaluation length;
loss_by_position.csv: loss against position at the longest length;
training_curves.csv: validation at L against step, the fine-tuned rows' at
their target length T against fine-tuning step; summary.csv: the table). Each file is written to a
temporary name beside it and renamed into place, so an interrupted run
never leaves half a file."""
from __future__ import annotations

import csv
import io
import json
import os
import pathlib
from typing import Any, Dict, List

from .errors import EXIT_IO, ExperimentError

FILES = ("results.json", "bits_per_byte.csv", "loss_by_position.csv", "training_curves.csv",
         "summary.csv")


def _write(path: pathlib.Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise ExperimentError(f"-o: cannot write '{path}' ({e.strerror})", EXIT_IO) from None


def _csv(header: List[str], rows: List[List[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def ratio(entry: Dict[str, Any], multiple: int, train_length: int) -> Any:
    """bits/byte at multiple x L divided by bits/byte at L (None when either
    is missing)."""
    by = {r["length"]: r.get("bits_per_byte") for r in entry["eval"]}
    a, b = by.get(train_length), by.get(multiple * train_length)
    return b / a if a and b is not None else None


def prepare_output(directory: str) -> pathlib.Path:
    """Creates DIR (and parents) before the run, so a bad -o fails first."""
    p = pathlib.Path(directory)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".write-test{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ExperimentError(f"-o: cannot write to '{directory}' ({e.strerror})",
                              EXIT_IO) from None
    return p


def write_results(results: Dict[str, Any], directory: str) -> List[str]:
    """Writes every file; returns their paths."""
    p = prepare_output(directory)
    cfg, schemes = results["config"], results["schemes"]
    L = cfg["train_length"]
    text = json.dumps(results, indent=1, allow_nan=False)
    out = {"results.json": text}
    rows = []
    for name, s in schemes.items():
        for r in s["eval"]:
            rows.append([name, s["trained_as"], r["length"], r["length"] / L, r["bits_per_byte"],
                         r["tokens"], r.get("error", "")])
    out["bits_per_byte.csv"] = _csv(["scheme", "trained_as", "length", "length_over_train",
                                     "bits_per_byte", "tokens", "error"], rows)
    rows = [[name, s["loss_by_position_length"], b["start"], b["end"], b["bits_per_byte"],
             b["tokens"]] for name, s in schemes.items() for b in s["loss_by_position"]]
    out["loss_by_position.csv"] = _csv(["scheme", "length", "start", "end", "bits_per_byte",
                                        "tokens"], rows)
    rows = [[name, c["step"], c["tokens"], c["train_bits_per_byte"], c["val_bits_per_byte"],
             c["val_tokens"], s.get("curve_length", L), "finetune" if "finetune" in s else "train"]
            for name, s in schemes.items() for c in s.get("curve", [])]
    out["training_curves.csv"] = _csv(["scheme", "step", "tokens", "train_bits_per_byte",
                                       "val_bits_per_byte", "val_tokens", "val_length",
                                       "phase"], rows)
    rows = []
    for name, s in schemes.items():
        by = {r["length"]: r.get("bits_per_byte") for r in s["eval"]}
        f = s.get("finetune") or {}
        rows.append([name, s["trained_as"], s["params"], s["train_tokens_per_s"],
                     by.get(L), ratio(s, 4, L), by.get(max(cfg["eval_lengths"])),
                     s.get("val_drop_last_quarter"), f.get("length"), f.get("steps"),
                     f.get("tokens"), f.get("fraction_of_pretraining")])
    out["summary.csv"] = _csv(["scheme", "trained_as", "params", "train_tokens_per_s",
                               "bits_per_byte_at_train_length", "ratio_4x_over_1x",
                               "bits_per_byte_at_longest", "val_drop_last_quarter",
                               "finetune_length", "finetune_steps", "finetune_tokens",
                               "finetune_fraction_of_pretraining"], rows)
    paths = []
    for name in FILES:
        _write(p / name, out[name])
        paths.append(str(p / name))
    return paths

