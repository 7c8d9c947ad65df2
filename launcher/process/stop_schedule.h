// When a command that should end gets SIGTERM and then SIGKILL: the one schedule that init mode
// and `tfboot local` share (docs/supervision.md: Running the command, tfboot local).
#pragma once

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace tfboot {

// Once the job is done, how long a command may take to end by itself before SIGTERM: a worker of
// a MultiWorkerMirroredStrategy job finishes the same step as the chief.
inline constexpr std::chrono::milliseconds finish_window{std::chrono::seconds(5)};

// SIGTERM when planned, SIGKILL `grace` (--stop-grace) after it. The caller sends the signals;
// this only says when, so that its loop can sleep until next().
class StopSchedule {
 public:
  enum class Step { none, terminate, kill };

  explicit StopSchedule(std::chrono::milliseconds grace) : grace_(grace) {}

  // SIGTERM at `when`, unless one is planned sooner.
  void terminate_at(Instant when) { term_at_ = std::min(term_at_, when); }
  // The caller sent SIGTERM at `now` without waiting: SIGKILL follows after the grace, and a
  // later SIGTERM never postpones it.
  void terminated(Instant now) {
    term_at_ = Instant::max();
    kill_at_ = std::min(kill_at_, now + grace_);
  }
  // What is due at `now`, each step once; called until it says none.
  Step due(Instant now) {
    if (now >= term_at_) {
      terminated(now);
      return Step::terminate;
    }
    if (now >= kill_at_) {
      kill_at_ = Instant::max();
      return Step::kill;
    }
    return Step::none;
  }
  Instant next() const { return std::min(term_at_, kill_at_); }
  std::chrono::milliseconds grace() const { return grace_; }

 private:
  std::chrono::milliseconds grace_;
  Instant term_at_ = Instant::max();
  Instant kill_at_ = Instant::max();
};

}  // namespace tfboot
