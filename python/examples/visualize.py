"""Pictures of the encodings (matplotlib, Agg backend): the sinusoidal table,
the RoPE relative score curve and the ALiBi bias, written as one PNG.

Usage: visualize.py [OUTPUT_DIR]   (default: a new temporary directory)
"""
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import posenc  # noqa: E402

out_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="posenc-")
os.makedirs(out_dir, exist_ok=True)

fig, axes = plt.subplots(1, 3, figsize=(15, 4))
table = posenc.sinusoidal_table(64, 128)
axes[0].imshow(table, aspect="auto", cmap="RdBu")
axes[0].set(title="sinusoidal table (64 x 128)", xlabel="dimension", ylabel="position")

q = np.ones((1, 1, 1, 128))
k = np.ones((1, 1, 1, 128))
offsets = np.arange(0, 256)
scores = [float((q * posenc.apply_rope(k, positions=[int(d)])).sum()) for d in offsets]
axes[1].plot(offsets, scores)
axes[1].set(title="RoPE: q.k vs offset (all-ones vectors)", xlabel="offset", ylabel="score")

bias = posenc.alibi_bias(8, 32, form="symmetric")
axes[2].imshow(bias[0], cmap="viridis")
axes[2].set(title="ALiBi bias, head 0", xlabel="key", ylabel="query")

path = os.path.join(out_dir, "posenc_encodings.png")
fig.tight_layout()
fig.savefig(path, dpi=80)
print("wrote", path, os.path.getsize(path), "bytes")
