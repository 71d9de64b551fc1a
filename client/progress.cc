#include "client/progress.h"

#include <unistd.h>

#include <cstdio>

namespace tpuemu {

Progress::Progress(bool enabled)
    : enabled_(enabled), tty_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()), last_plain_(start_) {}

Progress::~Progress() { Done(); }

void Progress::Update(const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    static const char spin[] = "|/-\\";
    std::fprintf(stderr, "\r\033[K%c %s (%.1fs)", spin[static_cast<int>(elapsed * 8) % 4], text.c_str(), elapsed);
    drawn_ = true;
  } else if (now - last_plain_ > std::chrono::seconds(5)) {
    std::fprintf(stderr, "... %s (%.0fs)\n", text.c_str(), elapsed);
    last_plain_ = now;
  }
  std::fflush(stderr);
}

void Progress::Note(const std::string& text) {
  if (!enabled_) return;
  if (tty_ || text == noted_) return Update(text);
  noted_ = text;
  std::fprintf(stderr, "... %s\n", text.c_str());
  std::fflush(stderr);
  last_plain_ = std::chrono::steady_clock::now();
}

void Progress::Done() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

}  // namespace tpuemu
