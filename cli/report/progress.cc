// Terminal progress bar (see progress.h).
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace posenc::report {

Progress::Progress(int total_steps, ProgressMode mode)
    : total_(std::max(1, total_steps)),
      enabled_(mode == ProgressMode::kAuto && isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { Finish(); }

void Progress::Step(const std::string& label) {
  if (done_ < total_) ++done_;
  Draw(label);
}

void Progress::Draw(const std::string& label) const {
  if (!enabled_ || finished_) return;
  constexpr int kWidth = 28;
  const int filled = kWidth * (done_ - 1) / total_;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string text = label.substr(0, 40);
  std::fprintf(stderr, "\r\x1b[2K[%s] %d/%d %s", bar.c_str(), done_, total_, text.c_str());
  std::fflush(stderr);
}

void Progress::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\r\x1b[2K");
  std::fflush(stderr);
}

}  // namespace posenc::report
