"""The 6x6 relative position matrix i - j and its T5 buckets.

Shaw et al., Transformer-XL and DeBERTa index by i - j; T5 buckets key minus
query (j - i) into 32 log-spaced buckets.
"""
import numpy as np

import posenc

rel = posenc.relative_matrix(6)
print("relative positions i - j:")
print(rel)
buckets = posenc.t5_bucket(-rel, num_buckets=32, max_distance=128, bidirectional=True)
print("T5 buckets (bidirectional, 32, 128):")
print(buckets)
far = posenc.t5_bucket(np.array([-1000, -128, -64, -8, 0, 8, 64, 128, 1000]))
print("far offsets share buckets:", far.tolist())
