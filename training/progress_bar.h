// The live progress bar model-train draws within an epoch when stderr is a terminal: one line,
// redrawn in place at most ten times a second, cleared before the epoch's log line.
//   epoch 3/30 [=========>          ] 21/40  loss 0.1234  48210 samples/s  eta 0.4 s
// Off (nothing drawn) when stderr is not a terminal, so logs and pipes get only the log lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep::training {

struct Progress {
  int64_t epoch = 0, epochs = 0;   // epoch from 1
  int64_t batch = 0, batches = 0;  // batches done this epoch, of batches
  double loss = 0;                 // mean so far this epoch
  double samples_per_second = 0;
  double eta_seconds = 0;  // the rest of this epoch
};

// The line, `width` characters of bar between the brackets.
std::string RenderProgress(const Progress& p, int width = 20);

class ProgressBar {
 public:
  // Draws on `out` when `enabled` (the trainer passes isatty(stderr)).
  ProgressBar(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}
  // Clears the line, so an error that ends the run early starts on a clean one.
  ~ProgressBar() { Clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  // Redraws unless the last draw was under 100 ms ago (the last batch always draws).
  void Update(const Progress& p);
  // Erases the line, so the next log line starts clean.
  void Clear();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace lockstep::training
