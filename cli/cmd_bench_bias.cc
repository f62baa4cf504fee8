// `posenc bench bias`: materialised attention-bias matrices [H = 32, S, S]
// against the machine's write bandwidth (posenc/bandwidth.h, kWrite over the
// same bytes, same threads, same buffer) and the PyTorch-eager baselines of
// bench/torch_baseline.py (kernels "alibi" and "t5_bias").
//  - alibi: AlibiBiasMatrix, paper slopes for 32 heads, causal form
//    (-slope * (i - j), -infinity above the diagonal), Sq = Sk = S.
//  - t5_bias: T5BiasTable::FillBias, bidirectional 32 buckets / max distance
//    128 (T5's encoder), a N(0, 1) table, queries at 0..S-1, keys 0..S-1.
// S = 1024 and 4096 (those <= --max-seq; a --max-seq below 1024 runs that
// single size, for smoke tests), float32 and bfloat16. GB/s = bytes written
// (H * S * S * element size) / time; fraction_of_bandwidth against the
// write ceiling. One buffer (the largest case) is allocated and pre-faulted
// once and reused by every case and by the ceiling kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "bench_common.h"
#include "posenc/alibi.h"
#include "posenc/bandwidth.h"
#include "posenc/t5.h"

namespace posenc::cli {

void BenchBias(const BenchOptions& o, const Context& ctx, std::vector<Result>& out) {
  const std::int64_t heads = 32;
  std::vector<std::int64_t> seqs;
  for (const std::int64_t s : {1024, 4096}) {
    if (s <= o.max_seq) seqs.push_back(s);
  }
  if (o.max_seq < 1024) seqs.push_back(o.max_seq);  // --max-seq smoke runs
  std::int64_t max_bytes = 0;
  for (const std::int64_t s : seqs) max_bytes = std::max(max_bytes, heads * s * s * 4);
  BenchVector<float> buf = Buffer(max_bytes, 5);

  const std::vector<double> slopes =
      AlibiSlopes(AlibiParams{heads, 8.0, AlibiSlopeConvention::kReference, {}});
  T5BiasTable t5(T5BucketParams{32, 128, T5Direction::kBidirectional}, heads);
  t5.InitNormal(1, 1.0);

  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const std::int64_t seq : seqs) {
      const std::int64_t bytes = heads * seq * seq * static_cast<std::int64_t>(DTypeSize(dtype));
      const TensorView view = TensorView::Contiguous(buf.data(), dtype, {heads, seq, seq});
      const double ceiling_ms = MedianMs(
          [&] { RunStreamKernel(StreamKernel::kWrite, buf.data(), nullptr, bytes / 4, 0.5f, ctx); },
          o.reps, o.warmup);
      for (const char* kernel : {"alibi", "t5_bias"}) {
        Result r;
        r.kernel = kernel;
        r.dtype = std::string(DTypeName(dtype));
        r.shape = {heads, seq, seq};
        r.inplace = false;  // a fresh matrix: nothing is read
        r.bytes = static_cast<double>(bytes);
        r.footprint = r.bytes;
        r.ceiling = "write";
        r.ceiling_ms = ceiling_ms;
        if (r.kernel == "alibi") {
          const AlibiGeometry g{seq, seq, AlibiForm::kCausal};
          r.ms = MedianMs([&] { AlibiBiasMatrix(slopes, g, view, ctx); }, o.reps, o.warmup);
        } else {
          r.ms = MedianMs([&] { t5.FillBias(Positions::Offset(0), seq, seq, view, ctx); }, o.reps,
                          o.warmup);
        }
        out.push_back(r);
      }
    }
  }
}

}  // namespace posenc::cli
