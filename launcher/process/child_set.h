// The children tfboot supervises, and the signal state it holds while it does. One type serves
// init mode, `tfboot local` and job supervision: it owns the children, their output pipes, the
// signal mask and the signalfd, and its destructor kills and reaps what is still running and
// restores the mask, so no error path leaves a child or a blocked signal behind (the shape of
// ninja's SubprocessSet).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "process/output_tail.h"

namespace tfboot {

struct ChildSpec {
  std::vector<std::string> argv;
  std::vector<std::string> environment;  // the command's whole environment, "KEY=value"
  // Non-empty: stdout and stderr are captured and copied to ours line by line with this prefix
  // ("[worker:0] "). Empty: the child shares our stdout and terminal, and its stderr is copied to
  // ours unchanged, unless ours is a terminal, which the child then shares too.
  std::string output_label;
  // A session of its own (setsid), as torchrun starts each rank: the kernel's autogroup then
  // schedules each as a group of its own rather than all with tfboot. It leads its process group
  // all the same, which is what we signal. Off: a process group in our session, given our
  // terminal when the output is not captured.
  bool own_session = false;
};

// Signals an init must not pass on: SIGCHLD is ours, and the synchronous ones are about tfboot
// itself (a fault in tfboot is not the command's business), as tini does.
bool is_own_signal(int signal_number);

class ChildSet {
 public:
  struct Event {
    enum class Kind { signal, exited, ready, timeout };
    Kind kind = Kind::timeout;
    int signal_number = 0;  // Kind::signal
    std::size_t child = 0;  // Kind::exited
    int exit_code = 0;      // Kind::exited: the status, or 128+N when signal N ended it
  };

  // Blocks every signal but tfboot's own (they arrive through a signalfd from now on). With
  // `subreaper`, orphans of the children are re-parented to us as they are to PID 1.
  static Result<std::unique_ptr<ChildSet>> create(bool subreaper);
  ~ChildSet();
  ChildSet(const ChildSet&) = delete;
  ChildSet& operator=(const ChildSet&) = delete;

  // fork + exec in a process group (or session) of its own, with default signal dispositions and an empty
  // mask. A command that cannot be executed ends with 127/126 as its exit code (a shell's rule);
  // fork or pipe failures are errors here (exit_code::resources).
  Result<std::size_t> start(const ChildSpec& spec);

  // Why an ended child failed, in its own words: the exec failure ("cannot run command 'pythn':
  // not found"), else the failure line of what it last wrote to stderr (output_tail.h); "" when
  // its stderr was not ours to read or it said nothing.
  std::string last_words(std::size_t child) const;

  bool running(std::size_t child) const { return !children_[child].exit_code; }
  bool any_running() const;
  // Events reaped but not yet returned by wait(): several children can end in one wake-up.
  bool has_pending_events() const { return !pending_.empty(); }
  std::optional<int> exit_code(std::size_t child) const { return children_[child].exit_code; }
  pid_t pid(std::size_t child) const { return children_[child].pid; }

  // To the child's whole process group; nothing once it has ended.
  void signal(std::size_t child, int signal_number);
  void signal_running(int signal_number);

  // The next event: a signal for us, a child that ended, one of `extra` ready (its revents set),
  // or `until` passed. Captured output is copied meanwhile; orphans are reaped silently.
  Event wait(Instant until, std::vector<pollfd>& extra);
  // Copies what is still in the pipes of ended children, for at most `at_most` (a daemon the
  // child left behind may hold a pipe open for ever).
  void drain_output(std::chrono::milliseconds at_most);
  // Until nothing is left in the ended child's process group (reaping as we go) or `until`.
  bool wait_for_group_to_end(std::size_t child, Instant until);

 private:
  struct OutputStream {
    UniqueFd fd;
    int target = -1;  // our stdout or stderr
    std::string partial;
  };
  struct Child {
    pid_t pid = -1;
    std::string label;
    std::optional<int> exit_code;
    OutputStream out, err;
    OutputTail err_tail;       // stderr's last lines
    std::string exec_failure;  // the message of an exec that failed
  };

  ChildSet() = default;
  void reap();
  // `tail`: where the lines are kept as well (stderr's), or null.
  void copy_output(OutputStream& stream, const std::string& label, OutputTail* tail);
  // What an ended child's pipes already hold, without waiting: its last lines precede its exit.
  void read_remaining_output(Child& child);
  void read_signals();
  void add_output_fds(std::vector<pollfd>& fds) const;
  void handle_output(const std::vector<pollfd>& fds);

  std::vector<Child> children_;
  std::deque<Event> pending_;
  UniqueFd signal_fd_;
  sigset_t original_mask_{};
};

}  // namespace tfboot
