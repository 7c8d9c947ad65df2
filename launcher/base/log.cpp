// tfboot's log: text lines or one JSON object per line on stderr. The only file that compiles
// fmt's formatting code; every other file only checks its format strings against fmt/core.h.
#define FMT_HEADER_ONLY
#include <fmt/format.h>

#include "base/log.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"

namespace tfboot::log {
namespace {

std::string current_task;
// The task again, in a fixed buffer that a signal handler may read.
char task_for_signal_handler[64] = {};
LogFormat current_format = LogFormat::text;
Level current_level = Level::info;

std::string_view level_name(Level level) {
  switch (level) {
    case Level::trace: return "trace";
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warning: return "warning";
    case Level::error: return "error";
  }
  return "info";
}

// One write(2) per line, so lines of tfboot and of the command never interleave mid-line, and
// nothing sits in a buffer when exec replaces the process.
void write_line(const std::string& line) {
  write_all(STDERR_FILENO, line);  // stderr closed or full: a log line is not worth failing for
}

// "2026-11-30T15:48:20.067Z" from Unix milliseconds, by integer arithmetic only (a signal
// handler uses it too). Days to civil date after Howard Hinnant's public-domain algorithm.
void format_utc_timestamp(long long unix_ms, char (&out)[32]) {
  long long seconds = unix_ms / 1000, millis = unix_ms % 1000;
  long long days = seconds / 86400, second_of_day = seconds % 86400;
  long long z = days + 719468, era = z / 146097, day_of_era = z - era * 146097;
  long long year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  long long day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  long long mp = (5 * day_of_year + 2) / 153, day = day_of_year - (153 * mp + 2) / 5 + 1;
  long long month = mp < 10 ? mp + 3 : mp - 9, year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  long long fields[] = {year, month, day, second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60, millis};
  const int widths[] = {4, 2, 2, 2, 2, 2, 3};
  const char separators[] = {'-', '-', 'T', ':', ':', '.', 'Z'};
  int at = 0;
  for (int i = 0; i < 7; ++i) {
    for (int digit = widths[i] - 1; digit >= 0; --digit) {
      long long value = fields[i];
      for (int k = 0; k < digit; ++k) value /= 10;
      out[at++] = static_cast<char>('0' + value % 10);
    }
    out[at++] = separators[i];
  }
  out[at] = '\0';
}

std::size_t append(char* buffer, std::size_t at, std::size_t size, const char* text) {
  while (*text && at + 1 < size) buffer[at++] = *text++;
  return at;
}

std::string text_line(Level level, std::string_view message, std::chrono::system_clock::time_point now) {
  char stamp[32] = {};
  format_utc_timestamp(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count(), stamp);
  std::string tag = current_task.empty() ? "" : " [" + current_task + "]";
  return fmt::format("{} tfboot {}{} {}\n", stamp, level_name(level), tag, one_line(std::string(message)));
}

// Built with nlohmann so any message text is escaped correctly (invalid UTF-8 replaced).
std::string json_line(Level level, std::string_view message, std::chrono::system_clock::time_point now) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  nlohmann::ordered_json line;
  line["time"] = static_cast<double>(micros) / 1e6;
  line["level"] = level_name(level);
  line["logger"] = "tfboot";
  if (!current_task.empty()) line["task"] = current_task;
  line["message"] = std::string(message);
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void start() {
  current_format = LogFormat::text;
  current_level = Level::info;
}

void configure(const std::string& level, LogFormat format) {
  current_format = format;
  for (Level candidate : {Level::trace, Level::debug, Level::info, Level::warning, Level::error}) {
    if (level == level_name(candidate) || (candidate == Level::warning && level == "warn")) current_level = candidate;
  }
}

void set_task(const std::string& task) {
  current_task = task;
  std::size_t length = std::min(task.size(), sizeof task_for_signal_handler - 1);
  std::memcpy(task_for_signal_handler, task.data(), length);
  task_for_signal_handler[length] = '\0';
}

void write_from_signal_handler(Level level, const char* message) {
  const char* name = level_name(level).data();
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  char stamp[32] = {};
  format_utc_timestamp(static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000, stamp);
  char line[512];
  std::size_t at = 0;
  bool json = current_format == LogFormat::json;
  if (json) {
    // The JSON "time" is Unix seconds, as in every other line.
    char seconds[24];
    int digits = 0;
    for (long long value = now.tv_sec; value > 0 && digits < 23; value /= 10) seconds[digits++] = static_cast<char>('0' + value % 10);
    char forward[24];
    for (int i = 0; i < digits; ++i) forward[i] = seconds[digits - 1 - i];
    forward[digits] = '\0';
    at = append(line, at, sizeof line, "{\"time\":");
    at = append(line, at, sizeof line, forward);
    at = append(line, at, sizeof line, ",\"level\":\"");
    at = append(line, at, sizeof line, name);
    at = append(line, at, sizeof line, "\",\"logger\":\"tfboot\",");
    if (task_for_signal_handler[0]) {
      at = append(line, at, sizeof line, "\"task\":\"");
      at = append(line, at, sizeof line, task_for_signal_handler);
      at = append(line, at, sizeof line, "\",");
    }
    at = append(line, at, sizeof line, "\"message\":\"");
    at = append(line, at, sizeof line, message);
    at = append(line, at, sizeof line, "\"}\n");
  } else {
    at = append(line, at, sizeof line, stamp);
    at = append(line, at, sizeof line, " tfboot ");
    at = append(line, at, sizeof line, name);
    at = append(line, at, sizeof line, " ");
    if (task_for_signal_handler[0]) {
      at = append(line, at, sizeof line, "[");
      at = append(line, at, sizeof line, task_for_signal_handler);
      at = append(line, at, sizeof line, "] ");
    }
    at = append(line, at, sizeof line, message);
    at = append(line, at, sizeof line, "\n");
  }
  [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, line, at);
}

bool enabled(Level level) { return level >= current_level; }

void write(Level level, std::string_view message) {
  if (!enabled(level)) return;
  auto now = std::chrono::system_clock::now();
  write_line(current_format == LogFormat::json ? json_line(level, message, now) : text_line(level, message, now));
}

void write_formatted(Level level, fmt::string_view format, fmt::format_args arguments) {
  if (!enabled(level)) return;
  write(level, fmt::vformat(format, arguments));
}

}  // namespace tfboot::log
