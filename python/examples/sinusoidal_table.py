"""The (10, 16) sinusoidal table of "Attention Is All You Need", built by posenc.

PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
Prints the table, then checks two facts: every row has norm sqrt(d/2), and
PE(pos + k) is a fixed rotation of PE(pos) (the reason relative offsets are
linearly readable).
"""
import numpy as np

import posenc

pe = posenc.sinusoidal_table(10, 16)  # float32 numpy array [10, 16]
np.set_printoptions(precision=4, suppress=True, linewidth=120)
print("shape", pe.shape, pe.dtype)
print(pe)
print("row norms", np.round(np.linalg.norm(pe, axis=1), 6))

# PE(pos + k) = R(k) PE(pos): each (sin, cos) pair turns by k * inv_freq[i].
inv = posenc.sinusoidal_inv_freq(16)
k = 3
pe64 = posenc.sinusoidal_table(10, 16, dtype="float64")
s, c = pe64[:, 0::2], pe64[:, 1::2]
s_k = s * np.cos(k * inv) + c * np.sin(k * inv)
print("max |PE(pos+3) - R(3) PE(pos)|", f"{np.abs(s_k[:-k] - pe64[k:, 0::2]).max():.1e}")
