// Init mode: supervising the command in the manner of tini and dumb-init, and following the job's
// decisions (README: Running the command, Job supervision).
#pragma once

#include <poll.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"

namespace tfboot {

class ChildSet;

// What the job decided for this task: stop the command and end tfboot with `exit_code`.
struct JobOutcome {
  int exit_code = 0;
  std::string reason;  // one line for the log
};

// The supervisor's view of the job's control channel (README: Job supervision).
class JobView {
 public:
  virtual ~JobView() = default;
  virtual void add_poll_fds(std::vector<pollfd>& fds) const = 0;
  virtual Instant next_wakeup() const = 0;
  // Handles what is ready or due; a decision once the job has made one.
  virtual std::optional<JobOutcome> process(const std::vector<pollfd>& fds, Instant now) = 0;
  // Our command ended with `exit_code`; the channel tells the job, within a bounded time.
  virtual void report_exit(int exit_code) = 0;
};

struct InitSettings {
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  JobView* job = nullptr;  // the job's control channel after the start barrier, if any
};

// Init mode: starts the command in its own process group in `children`, forwards every signal
// but tfboot's own to that group, reaps every child, follows the job's decisions, and returns
// the exit code tfboot ends with (README: Running the command, Job supervision).
Result<int> supervise_command(ChildSet& children, const std::vector<std::string>& command,
                              const std::vector<std::string>& environment, const InitSettings& settings);

}  // namespace tfboot
