// A terminal progress bar for long commands. It draws on stderr only when
// stderr is a terminal (isatty), so redirected or captured output is never
// garbled with carriage returns; otherwise it is silent.
#pragma once

#include <cstdint>
#include <string>

namespace posenc::report {

enum class ProgressMode : std::uint8_t {
  kAuto,   // draw when stderr is a terminal
  kNever,  // stay silent
};

class Progress {
 public:
  Progress(int total_steps, ProgressMode mode = ProgressMode::kAuto);
  ~Progress();  // clears the bar line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Announces the step about to run ("RoPE scaling") and redraws.
  void Step(const std::string& label);
  // Clears the bar (idempotent).
  void Finish();
  bool enabled() const { return enabled_; }
  int done() const { return done_; }

 private:
  void Draw(const std::string& label) const;

  int total_;
  int done_ = 0;
  bool enabled_;
  bool finished_ = false;
};

}  // namespace posenc::report
