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
// fork); nothing here may return to the parent's code. An exec that fails says why on
// `report_fd` (closed by a successful exec) as well as in the log.
[[noreturn]] void exec_child(const PreparedCommand& command, int out_fd, int err_fd, int report_fd, bool own_session,
                             bool take_terminal) {
  if (own_session) {
    ::setsid();  // cannot fail: a forked child leads no group yet (the parent leaves its group alone)
  } else {
    ::setpgid(0, 0);
    // Every signal is still blocked, so taking the terminal cannot stop us with SIGTTOU.
    if (take_terminal && ::isatty(STDIN_FILENO)) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  }
  if (out_fd >= 0 && ::dup2(out_fd, STDOUT_FILENO) < 0) ::_exit(exit_code::resources);
  if (err_fd >= 0 && ::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(exit_code::resources);
  Error failed = exec_command(command);
  write_all(report_fd, failed.message);
  log::error("{}", failed.message);
  ::_exit(failed.code);
}

// The pipe a child's output comes through: the read end for us, the write end for the child.
struct OutputPipe {
  UniqueFd read, write;
};

Result<OutputPipe> output_pipe(const std::string& what) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return errno_error(exit_code::resources, "cannot create a pipe for " + what, errno);
  return OutputPipe{UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// Until the write end closes: at the child's exec, or when its failed exec has said why.
std::string read_until_closed(int fd) {
  std::string text;
  char buffer[1024];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
  }
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
    // Refused (qemu-user, a seccomp profile): the command's orphans go to the real init instead;
    // the command itself is still ours to supervise.
    log::warn("cannot become a child subreaper ({}): the command's orphans are reaped by this host's init", std::strerror(errno));
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
  // A label captures both streams; else stderr alone, whose last lines may say why the command
  // failed, unless ours is a terminal, which the command then writes to itself.
  const bool labelled = !spec.output_label.empty();
  const bool capture_stderr = labelled || !::isatty(STDERR_FILENO);
  OutputPipe out, err;
  const std::string what = spec.output_label + "output";
  if (labelled) {
    auto made = output_pipe(what);
    if (!made) return std::unexpected(made.error());
    out = std::move(*made);
  }
  if (capture_stderr) {
    auto made = output_pipe(what);
    if (!made) return std::unexpected(made.error());
    err = std::move(*made);
  }
  auto report = output_pipe("an exec failure's report");
  if (!report) return std::unexpected(report.error());
  const PreparedCommand command(spec.argv, spec.environment);
  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    return errno_error(exit_code::resources, "cannot start '" + spec.argv.front() + "': fork failed", saved);
  }
  if (pid == 0) exec_child(command, out.write.get(), err.write.get(), report->write.get(), spec.own_session, !labelled);
  // Also set here: whichever of parent and child runs first, the group exists before we signal it.
  // (A child's own session is there once the report pipe closes, below; setpgid here would make
  // it a group leader first, which setsid refuses.)
  if (!spec.own_session) ::setpgid(pid, pid);
  // Our copies of the write ends close now, so that the child's exit (or exec) is the pipes' end.
  out.write.reset();
  err.write.reset();
  report->write.reset();
  Child child{.pid = pid, .label = spec.output_label};
  child.out = {std::move(out.read), STDOUT_FILENO, {}};
  child.err = {std::move(err.read), STDERR_FILENO, {}};
  child.exec_failure = read_until_closed(report->read.get());
  children_.push_back(std::move(child));
  log::debug("started {} as pid {}", spec.argv.front(), pid);
  return children_.size() - 1;
}

std::string ChildSet::last_words(std::size_t child) const {
  if (!children_[child].exec_failure.empty()) return children_[child].exec_failure;
  return failure_line(children_[child].err_tail.lines());
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
      read_remaining_output(children_[i]);
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
// scanned, and a partial line is bounded. The tail keeps lines ended by \n: a progress bar's
// redrawn line is no failure's account.
void ChildSet::copy_output(OutputStream& stream, const std::string& label, OutputTail* tail) {
  char buffer[16384];
  ssize_t n = ::read(stream.fd.get(), buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!stream.partial.empty()) {
      write_all(stream.target, label + stream.partial + "\n");
      if (tail) tail->add(stream.partial);
    }
    stream.partial.clear();
    stream.fd.reset();
    return;
  }
  std::string lines;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    if (buffer[i] != '\n' && buffer[i] != '\r') continue;
    if (tail && buffer[i] == '\n') tail->add(stream.partial + std::string(buffer + begin, i - begin));
    lines += label + stream.partial;
    lines.append(buffer + begin, i + 1 - begin);
    stream.partial.clear();
    begin = i + 1;
  }
  stream.partial.append(buffer + begin, static_cast<std::size_t>(n) - begin);
  if (stream.partial.size() >= max_partial_line) {
    lines += label + stream.partial + "\n";
    if (tail) tail->add(stream.partial);
    stream.partial.clear();
  }
  write_all(stream.target, lines);
}

void ChildSet::read_remaining_output(Child& child) {
  // Bounded: a process the child left behind may still be writing.
  for (int reads = 0; reads < 64; ++reads) {
    std::vector<pollfd> fds;
    if (child.out.fd) fds.push_back({child.out.fd.get(), POLLIN, 0});
    if (child.err.fd) fds.push_back({child.err.fd.get(), POLLIN, 0});
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    bool read_any = false;
    for (const pollfd& entry : fds) {
      if (!(entry.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      read_any = true;
      if (entry.fd == child.out.fd.get()) copy_output(child.out, child.label, nullptr);
      else copy_output(child.err, child.label, &child.err_tail);
    }
    if (!read_any) return;
  }
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
        if (stream->fd.get() == entry.fd) copy_output(*stream, child.label, stream == &child.err ? &child.err_tail : nullptr);
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
