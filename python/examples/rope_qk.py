"""RoPE on q and k: the score q_m . k_n depends only on the offset m - n.

Rotates one query and one key vector (head_dim 64) at several absolute
positions with the same offset and prints the dot products.
"""
import numpy as np

import posenc

rng = np.random.default_rng(0)
q = rng.standard_normal((1, 1, 1, 64)).astype(np.float32)  # [batch, heads, seq, head_dim]
k = rng.standard_normal((1, 1, 1, 64)).astype(np.float32)

print("offset 3 at different absolute positions:")
for m in [3, 10, 100, 1000]:
    qm = posenc.apply_rope(q, positions=[m], layout="bhsd")
    kn = posenc.apply_rope(k, positions=[m - 3], layout="bhsd")
    print(f"  m={m:5d} n={m - 3:5d}  q.k = {float((qm * kn).sum()):+.4f}")

# q and k of a whole sequence in one call (in place), as inside attention.
seq_q = rng.standard_normal((1, 4, 8, 64)).astype(np.float32)
seq_k = rng.standard_normal((1, 2, 8, 64)).astype(np.float32)  # GQA: 2 kv heads
norms = np.linalg.norm(seq_q, axis=-1)
posenc.apply_rope_qk(seq_q, seq_k, np.arange(8), layout="bhsd")
print("norms preserved:", bool(np.allclose(np.linalg.norm(seq_q, axis=-1), norms, rtol=1e-5)))
