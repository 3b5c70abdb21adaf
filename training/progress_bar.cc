#include "training/progress_bar.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

namespace lockstep::training {

std::string RenderProgress(const Progress& p, int width) {
  const double done = p.batches > 0 ? static_cast<double>(p.batch) / static_cast<double>(p.batches) : 0.0;
  const int filled = std::clamp(static_cast<int>(done * width), 0, width);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) {
    bar += p.batch > 0 ? ">" : " ";
    bar.append(static_cast<size_t>(width - filled - 1), ' ');
  }
  return fmt::format("epoch {}/{} [{}] {}/{}  loss {:.4f}  {:.0f} samples/s  eta {:.1f} s", p.epoch, p.epochs,
                     bar, p.batch, p.batches, p.loss, p.samples_per_second, p.eta_seconds);
}

void ProgressBar::Update(const Progress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && p.batch < p.batches && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  // \r back to the start, the line, then erase whatever a longer previous line left.
  fmt::print(out_, "\r{}\x1b[K", RenderProgress(p));
  std::fflush(out_);
}

void ProgressBar::Clear() {
  if (!enabled_ || !drawn_) return;
  fmt::print(out_, "\r\x1b[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace lockstep::training
