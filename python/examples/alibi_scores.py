"""ALiBi: attention scores get a per-head linear penalty -m_h * (i - j).

Prints the slopes for 8 heads and the biased causal scores of head 0 for a
5-token sequence whose content scores are all zero.
"""
import numpy as np

import posenc

slopes = posenc.alibi_slopes(8)
np.set_printoptions(precision=4, suppress=True, linewidth=120)
print("slopes", slopes)
scores = np.zeros((8, 5, 5), dtype=np.float32)
biased = scores + posenc.alibi_bias(8, 5)
print("head 0 biased scores:")
print(biased[0])
p = np.exp(biased[0] - biased[0].max(axis=-1, keepdims=True))
p /= p.sum(axis=-1, keepdims=True)
print("head 0 attention of the last token:", np.round(p[-1], 4))
