// Uses the installed headers and library; prints one value and checks it.
#include <cmath>
#include <cstdio>
#include <vector>

#include <posenc/posenc.h>

int main() {
  std::vector<float> table(4 * 8);
  posenc::SinusoidalParams params;
  params.dim = 8;
  posenc::SinusoidalTable(
      params, /*offset=*/0, /*num_positions=*/4,
      posenc::TensorView::Contiguous(table.data(), posenc::DType::kFloat32, {4, 8}));
  // PE(1, 0) = sin(1).
  const double want = std::sin(1.0);
  std::printf("PE[1][0] = %.7f (want %.7f)\n", table[8], want);
  return std::fabs(table[8] - want) < 1e-6 ? 0 : 1;
}
