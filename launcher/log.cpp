// tfboot's log: text lines or one JSON object per line on stderr. The only file that compiles
// fmt's formatting code; every other file only checks its format strings against fmt/core.h.
#define FMT_HEADER_ONLY
#include <fmt/format.h>

#include "log.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <nlohmann/json.hpp>

#include "error.h"

namespace tfboot::log {
namespace {

std::string current_task;
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
  std::size_t done = 0;
  while (done < line.size()) {
    ssize_t written = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // stderr closed or full: a log line is not worth failing for
    done += static_cast<std::size_t>(written);
  }
}

std::string text_line(Level level, std::string_view message, std::chrono::system_clock::time_point now) {
  auto since_epoch = now.time_since_epoch();
  time_t seconds = static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count());
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
  tm local{};
  ::localtime_r(&seconds, &local);
  char stamp[32] = {};
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &local);
  std::string tag = current_task.empty() ? "" : " [" + current_task + "]";
  return fmt::format("{}.{:03d} tfboot {}{} {}\n", stamp, millis, level_name(level), tag, one_line(std::string(message)));
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

void set_task(const std::string& task) { current_task = task; }

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
