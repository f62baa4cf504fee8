"""A (10, 768) learned position table, like BERT's / GPT-2's position embeddings.

Initialised N(0, 0.02^2) (HF initializer_range) from a seed; the table is
looked up by position ids, and one SGD step on a toy loss moves only the rows
that were used.
"""
import numpy as np

import posenc

table = posenc.LearnedTable.random_normal(10, 768, stddev=0.02, seed=0)
w = table.values  # float32 [10, 768], shares memory with the C++ table
print("shape", w.shape, w.dtype)
print(f"mean {w.mean():+.4f} std {w.std():.4f}")

ids = np.array([0, 1, 2, 2])
rows = table.lookup(ids)
print("lookup shape", rows.shape, "rows 2 and 3 equal:", bool(np.array_equal(rows[2], rows[3])))

# Loss = sum of looked-up values: d loss / d row = number of times it was used.
grad = table.backward(np.ones_like(rows), ids)
before = w.copy()
table.sgd_step(grad, learning_rate=0.1)
moved = np.where(np.abs(table.values - before).max(axis=1) > 0)[0]
print("rows moved by SGD", moved.tolist(), "row 2 moved by", f"{(before - w)[2, 0]:.2f}")
