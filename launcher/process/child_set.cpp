// The children tfboot supervises: fork/exec, signals through a signalfd, reaping, output copying.
#include "process/child_set.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "base/log.h"
#include "process/exec.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// A line longer than this without a newline (a progress bar, binary output) is passed on in
// pieces rather than held without limit.
constexpr std::size_t max_partial_line = 64 * 1024;

sigset_t supervised_signals() {
  sigset_t set;
  sigfillset(&set);
  for (int own = 1; own < NSIG; ++own) {
    if (is_own_signal(own) && own != SIGCHLD) sigdelset(&set, own);
  }
  return set;
}

int poll_timeout_ms(Instant until) {
  if (until == Instant::max()) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

// In the forked child: only async-signal-safe calls until exec (the command was prepared before
// fork); nothing here may return to the parent's code.
[[noreturn]] void exec_child(const PreparedCommand& command, int out_fd, int err_fd, bool take_terminal) {
  ::setpgid(0, 0);
  // Every signal is still blocked, so taking the terminal cannot stop us with SIGTTOU.
  if (take_terminal && ::isatty(STDIN_FILENO)) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  if (out_fd >= 0 && (::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0)) ::_exit(exit_code::resources);
  Error failed = exec_command(command);
  log::error("{}", failed.message);
  ::_exit(failed.code);
}

}  // namespace

bool is_own_signal(int signal_number) {
  switch (signal_number) {
    case SIGCHLD:
    case SIGKILL:
    case SIGSTOP:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS:
    case SIGABRT:
      return true;
    default:
      return false;
  }
}

Result<std::unique_ptr<ChildSet>> ChildSet::create(bool subreaper) {
  std::unique_ptr<ChildSet> set(new ChildSet());
  sigset_t blocked = supervised_signals();
  if (::sigprocmask(SIG_BLOCK, &blocked, &set->original_mask_) != 0) return errno_error(exit_code::resources, "sigprocmask failed", errno);
  set->signal_fd_.reset(::signalfd(-1, &blocked, SFD_CLOEXEC | SFD_NONBLOCK));
  // From here the destructor restores the mask, whatever fails next.
  if (!set->signal_fd_) return errno_error(exit_code::resources, "signalfd failed", errno);
  if (subreaper && ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return errno_error(exit_code::resources, "prctl(PR_SET_CHILD_SUBREAPER) failed", errno);
  }
  return set;
}

ChildSet::~ChildSet() {
  for (Child& child : children_) {
    if (child.exit_code) continue;
    ::kill(-child.pid, SIGKILL);
    ::kill(child.pid, SIGKILL);
    while (::waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // The pipes and the signalfd close with their members.
  ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

Result<std::size_t> ChildSet::start(const ChildSpec& spec) {
  // Read ends for us, write ends for the child (dup2'd there onto its stdout and stderr).
  UniqueFd out_read, out_write, err_read, err_write;
  bool capture = !spec.output_label.empty();
  if (capture) {
    int out[2], err[2];
    bool made = ::pipe2(out, O_CLOEXEC) == 0;
    if (made) {
      out_read.reset(out[0]);
      out_write.reset(out[1]);
      made = ::pipe2(err, O_CLOEXEC) == 0;
    }
    if (!made) {
      int saved = errno;
      return errno_error(exit_code::resources, "cannot create pipes for " + spec.output_label + "output", saved);
    }
    err_read.reset(err[0]);
    err_write.reset(err[1]);
  }
  const PreparedCommand command(spec.argv, spec.environment);
  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    return errno_error(exit_code::resources, "cannot start '" + spec.argv.front() + "': fork failed", saved);
  }
  if (pid == 0) exec_child(command, out_write.get(), err_write.get(), !capture);
  // Also set here: whichever of parent and child runs first, the group exists before we signal it.
  ::setpgid(pid, pid);
  // Our copies of the write ends close now, so that the child's exit is the pipes' end.
  out_write.reset();
  err_write.reset();
  Child child{.pid = pid, .label = spec.output_label};
  child.out = {std::move(out_read), STDOUT_FILENO, {}};
  child.err = {std::move(err_read), STDERR_FILENO, {}};
  children_.push_back(std::move(child));
  log::debug("started {} as pid {}", spec.argv.front(), pid);
  return children_.size() - 1;
}

bool ChildSet::any_running() const {
  return std::ranges::any_of(children_, [](const Child& child) { return !child.exit_code; });
}

void ChildSet::signal(std::size_t child, int signal_number) {
  if (children_[child].exit_code) return;
  // The group may be gone while the leader is a zombie not yet reaped; then the pid itself.
  if (::kill(-children_[child].pid, signal_number) != 0) ::kill(children_[child].pid, signal_number);
}

void ChildSet::signal_running(int signal_number) {
  for (std::size_t i = 0; i < children_.size(); ++i) signal(i, signal_number);
}

void ChildSet::reap() {
  while (true) {
    int status = 0;
    pid_t ended = ::waitpid(-1, &status, WNOHANG);
    if (ended <= 0) return;  // 0: some still running; ECHILD: none left
    for (std::size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].pid != ended) continue;
      children_[i].exit_code = status_to_exit_code(status);
      pending_.push_back(Event{.kind = Event::Kind::exited, .child = i, .exit_code = *children_[i].exit_code});
    }
  }
}

void ChildSet::read_signals() {
  signalfd_siginfo info{};
  while (true) {
    ssize_t n = ::read(signal_fd_.get(), &info, sizeof info);
    if (n != static_cast<ssize_t>(sizeof info)) return;  // EAGAIN: all read
    int number = static_cast<int>(info.ssi_signo);
    if (number == SIGCHLD) continue;  // reap() runs after every wake-up anyway
    pending_.push_back(Event{.kind = Event::Kind::signal, .signal_number = number});
  }
}

// Whole lines (ended by \n, or \r as progress bars do) get the label; only the new bytes are
// scanned, and a partial line is bounded.
void ChildSet::copy_output(OutputStream& stream, const std::string& label) {
  char buffer[16384];
  ssize_t n = ::read(stream.fd.get(), buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!stream.partial.empty()) write_all(stream.target, label + stream.partial + "\n");
    stream.partial.clear();
    stream.fd.reset();
    return;
  }
  std::string lines;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    if (buffer[i] != '\n' && buffer[i] != '\r') continue;
    lines += label + stream.partial;
    lines.append(buffer + begin, i + 1 - begin);
    stream.partial.clear();
    begin = i + 1;
  }
  stream.partial.append(buffer + begin, static_cast<std::size_t>(n) - begin);
  if (stream.partial.size() >= max_partial_line) {
    lines += label + stream.partial + "\n";
    stream.partial.clear();
  }
  write_all(stream.target, lines);
}

void ChildSet::add_output_fds(std::vector<pollfd>& fds) const {
  for (const Child& child : children_) {
    for (const OutputStream* stream : {&child.out, &child.err}) {
      if (stream->fd) fds.push_back({stream->fd.get(), POLLIN, 0});
    }
  }
}

void ChildSet::handle_output(const std::vector<pollfd>& fds) {
  for (const pollfd& entry : fds) {
    if (!(entry.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    for (Child& child : children_) {
      for (OutputStream* stream : {&child.out, &child.err}) {
        if (stream->fd.get() == entry.fd) copy_output(*stream, child.label);
      }
    }
  }
}

ChildSet::Event ChildSet::wait(Instant until, std::vector<pollfd>& extra) {
  for (pollfd& entry : extra) entry.revents = 0;
  while (pending_.empty()) {
    std::vector<pollfd> fds = extra;
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    add_output_fds(fds);
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms(until));
    if (ready < 0 && errno != EINTR && errno != EAGAIN) {
      log::warn("poll failed: {}", std::strerror(errno));
      ::usleep(10'000);  // never spin; the caller's deadlines still apply
    }
    if (ready > 0) {
      handle_output(fds);
      read_signals();
    }
    reap();
    bool extra_ready = false;
    for (std::size_t i = 0; i < extra.size(); ++i) {
      extra[i].revents = ready > 0 ? fds[i].revents : 0;
      extra_ready = extra_ready || extra[i].revents != 0;
    }
    if (pending_.empty() && extra_ready) return Event{.kind = Event::Kind::ready};
    if (pending_.empty() && SteadyClock::now() >= until) return Event{.kind = Event::Kind::timeout};
  }
  Event next = pending_.front();
  pending_.pop_front();
  return next;
}

void ChildSet::drain_output(std::chrono::milliseconds at_most) {
  Instant until = SteadyClock::now() + at_most;
  while (SteadyClock::now() < until) {
    std::vector<pollfd> fds;
    add_output_fds(fds);
    if (fds.empty()) return;
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms(until));
    if (ready < 0 && errno != EINTR) return;
    if (ready > 0) handle_output(fds);
  }
}

bool ChildSet::wait_for_group_to_end(std::size_t child, Instant until) {
  while (true) {
    reap();
    if (::kill(-children_[child].pid, 0) != 0 && errno == ESRCH) return true;
    if (SteadyClock::now() >= until) return false;
    ::usleep(20'000);
  }
}

}  // namespace tfboot
