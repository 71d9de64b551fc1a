// A one-line progress indicator on stderr while the CLI waits: redrawn in
// place on a terminal, a plain line every few seconds otherwise.
#pragma once

#include <chrono>
#include <string>

namespace tpuemu {

class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  void Update(const std::string& text);
  // A state worth a line of its own as soon as it comes (a job waiting in the
  // queue, which may not change for minutes): off a terminal, printed at once
  // unless it is the last one noted; on one, as Update.
  void Note(const std::string& text);
  void Done();

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_plain_;
  std::string noted_;  // the last Note, off a terminal
};

}  // namespace tpuemu
