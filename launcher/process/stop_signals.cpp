// SIGTERM and SIGINT before the command runs (stop_signals.h).
#include "process/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

std::unexpected<Error> signal_setup_error(const std::string& call) {
  return errno_error(exit_code::resources, call + " failed", errno);
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Set once the command has run: a stop signal after that comes between two runs of a restart in
// place, when the command has ended and is not running again yet.
volatile sig_atomic_t command_has_run = 0;

constexpr const char* before_start = "stopped by a signal before the command started; nothing was run";
constexpr const char* between_runs = stopped_between_runs;

// The termination message's file and its text for each case, made before any signal can come:
// the handler only opens, writes and closes (async-signal-safe). [signal is SIGINT][command has run]
char message_file[4096] = {};
char messages[2][2][256] = {};

void write_stop_message(int signal_number) {
  if (message_file[0] == '\0') return;
  const char* text = messages[signal_number == SIGINT][command_has_run ? 1 : 0];
  // O_NONBLOCK: a FIFO without a reader is not waited for; a device (/dev/null) takes it.
  const int fd = ::open(message_file, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return;
  const std::size_t size = std::strlen(text);
  [[maybe_unused]] const ssize_t written = ::write(fd, text, size);
  ::close(fd);
}

// The armed record, read by the handler only while `record_armed` is set.
StopRecord armed_record;
volatile sig_atomic_t record_armed = 0;

// Writes `value` in decimal, at least `width` digits, at `out`; returns past the last digit.
char* put_decimal(char* out, long long value, int width) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 || count < width);
  while (count > 0) *out++ = digits[--count];
  return out;
}

// Seconds since the epoch and milliseconds as "1796294952.770" and "2026-12-03T10:49:12.770Z",
// async-signal-safe (gmtime is not): days to a civil date as in the proleptic Gregorian calendar.
void format_now(long long seconds, long long milliseconds, char* unix_text, char* iso_text) {
  char* out = put_decimal(unix_text, seconds, 1);
  *out++ = '.';
  out = put_decimal(out, milliseconds, 3);
  *out = '\0';
  const long long days = seconds / 86400;
  const long long in_day = seconds % 86400;
  const long long z = days + 719468;
  const long long era = z / 146097;
  const long long day_of_era = z - era * 146097;
  const long long year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const long long day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const long long month_index = (5 * day_of_year + 2) / 153;
  const long long day = day_of_year - (153 * month_index + 2) / 5 + 1;
  const long long month = month_index < 10 ? month_index + 3 : month_index - 9;
  const long long year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  out = put_decimal(iso_text, year, 4);
  for (auto [separator, value] : {std::pair{'-', month}, {'-', day}, {'T', in_day / 3600}, {':', in_day / 60 % 60}, {':', in_day % 60}}) {
    *out++ = separator;
    out = put_decimal(out, value, 2);
  }
  *out++ = '.';
  out = put_decimal(out, milliseconds, 3);
  *out++ = 'Z';
  *out = '\0';
}

void write_stop_record(int signal_number) {
  if (!record_armed) return;
  timespec now{};
  if (::clock_gettime(CLOCK_REALTIME, &now) != 0 || now.tv_sec < 0) return;
  char unix_text[32];
  char iso_text[40];
  format_now(now.tv_sec, now.tv_nsec / 1'000'000, unix_text, iso_text);
  const auto& parts = armed_record.parts[signal_number == SIGINT];
  const int fd = armed_record.fd;
  if (write_all(fd, parts[0]) != 0 || write_all(fd, unix_text) != 0 || write_all(fd, parts[1]) != 0 ||
      write_all(fd, iso_text) != 0 || write_all(fd, parts[2]) != 0 || ::fsync(fd) != 0) {
    ::unlink(armed_record.temporary.c_str());  // the earlier file stays whole
    return;
  }
  ::rename(armed_record.temporary.c_str(), armed_record.path.c_str());
}

void exit_on_stop_signal(int signal_number) {
  log::write_from_signal_handler(log::Level::warning, command_has_run ? between_runs : before_start);
  write_stop_message(signal_number);
  write_stop_record(signal_number);
  ::_exit(exit_code::signal_base + signal_number);
}

}  // namespace

Result<void> install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = exit_on_stop_signal;
  // The other stop signal waits while the handler writes: two handlers would write one file.
  action.sa_mask = stop_signals();
  if (::sigaction(SIGTERM, &action, nullptr) != 0 || ::sigaction(SIGINT, &action, nullptr) != 0) {
    return signal_setup_error("sigaction");
  }
  // A parent may have left them blocked; then they would never reach the handler.
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_UNBLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

void note_command_has_run() { command_has_run = 1; }

void arm_stop_record(StopRecord record) {
  disarm_stop_record();
  armed_record = std::move(record);
  record_armed = 1;
}

void disarm_stop_record() {
  if (!record_armed) return;
  record_armed = 0;
  ::close(armed_record.fd);
  ::unlink(armed_record.temporary.c_str());
  armed_record = StopRecord{};
}

void set_stop_message_file(const std::string& path) {
  if (path.size() >= sizeof message_file) return;
  for (int signal_number : {SIGTERM, SIGINT}) {
    for (int ran : {0, 1}) {
      const std::string text = "exiting " + std::to_string(exit_code::signal_base + signal_number) + ": " +
                               (ran ? between_runs : before_start) + "\n";
      std::snprintf(messages[signal_number == SIGINT][ran], sizeof messages[0][0], "%s", text.c_str());
    }
  }
  std::snprintf(message_file, sizeof message_file, "%s", path.c_str());
}

Result<void> hold_stop_signals() {
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

Result<void> release_stop_signals() {
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_UNBLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

int idle_until_stopped() {
  // As PID 1 orphans still come to us (a `kubectl exec` session's leftovers): reap them meanwhile.
  sigset_t waited = stop_signals();
  sigaddset(&waited, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &waited, nullptr) != 0) log::warn("sigprocmask failed: {}", std::strerror(errno));
  int received = 0;
  while (true) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (::sigwait(&waited, &received) != 0 || received == SIGCHLD) continue;
    break;
  }
  log::info("{}: the idle task ends", signal_name(received));
  return exit_code::ok;
}

}  // namespace tfboot
