"""Runs every script of python/examples and checks what it prints."""
import os
import re
import subprocess
import sys

import numpy as np

import posenc

from conftest import EXAMPLES


def run(name, *args):
    # The examples import the same posenc package as the tests.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(posenc.__file__))
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_example_has_a_test():
    tested = {"sinusoidal_table.py", "learned_table.py", "rope_qk.py", "alibi_scores.py",
              "relative_matrix.py", "visualize.py", "rotary_attention_layer.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_sinusoidal_table_example():
    out = run("sinusoidal_table.py")
    assert "shape (10, 16) float32" in out
    norms = re.search(r"row norms \[([^\]]*)\]", out).group(1).split()
    assert len(norms) == 10 and all(abs(float(n) - 8 ** 0.5) < 1e-4 for n in norms)  # sqrt(d/2)
    err = float(re.search(r"R\(3\) PE\(pos\)\| (\S+)", out).group(1))
    assert err < 1e-12
    assert "[[ 0.      1.      0.      1.      0.      1." in out  # PE(0) = (sin 0, cos 0, ...)
    assert "[ 0.8415  0.5403  0.311   0.9504" in out  # PE(1): sin 1, cos 1, sin 10000^(-1/8), ...


def test_learned_table_example():
    out = run("learned_table.py")
    assert "shape (10, 768) float32" in out
    std = float(re.search(r"std (\S+)", out).group(1))
    assert 0.018 < std < 0.022
    assert "rows 2 and 3 equal: True" in out
    assert "rows moved by SGD [0, 1, 2] row 2 moved by 0.20" in out


def test_rope_qk_example():
    out = run("rope_qk.py")
    dots = [float(v) for v in re.findall(r"q\.k = (\S+)", out)]
    assert len(dots) == 4 and max(dots) - min(dots) < 2e-3  # float32, positions up to 1000
    assert "norms preserved: True" in out


def test_alibi_scores_example():
    out = run("alibi_scores.py")
    assert "slopes [0.5    0.25   0.125  0.0625 0.0312 0.0156 0.0078 0.0039]" in out
    assert "[-2.  -1.5 -1.  -0.5  0. ]" in out
    probs = re.search(r"last token: \[([^\]]*)\]", out).group(1).split()
    p = np.exp(-0.5 * np.arange(4, -1, -1))
    assert np.allclose([float(v) for v in probs], p / p.sum(), atol=1e-4)


def test_relative_matrix_example():
    out = run("relative_matrix.py")
    assert "[ 5  4  3  2  1  0]]" in out and "[[ 0 -1 -2 -3 -4 -5]" in out
    assert "[[ 0 17 18 19 20 21]" in out
    assert "far offsets share buckets: [15, 15, 14, 8, 0, 24, 30, 31, 31]" in out


def test_visualize_example_writes_png(tmp_path):
    out = run("visualize.py", str(tmp_path))
    png = tmp_path / "posenc_encodings.png"
    assert f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_rotary_attention_layer_example():
    """RotaryEmbedding.from_config feeding posenc.torch.attention (GQA, KV cache)
    against the same block in plain torch."""
    out = run("rotary_attention_layer.py")
    assert "rope: llama3 RotaryEmbedding(head_dim=32" in out
    assert "rope_type='llama3'" in out and "layout='bshd'" in out
    assert "full pass matches plain torch: True" in out
    assert float(re.search(r"max \|diff\| (\S+)\)", out).group(1)) < 1e-5
    assert "output (2, 10, 128) grad of q weight finite: True" in out
    assert "gradients match plain torch: True" in out
    assert "cache length 10 kv-cache step matches full pass: True" in out
    assert "attention without a layout: " in out and "'layout'" in out
