// tfboot's log: one line per event on stderr, as text or as one JSON object, tagged with the task
// once known. Call sites format with fmt's checked format strings; the formatting and the output
// are compiled once, in log.cpp.
#pragma once

#include <string>
#include <string_view>

#include <fmt/core.h>

namespace tfboot {

enum class LogFormat { text, json };

}  // namespace tfboot

namespace tfboot::log {

enum class Level { trace, debug, info, warning, error };

// Text output at level info until configure() is called, so that option errors are logged too.
void start();
// `level` is one of trace, debug, info, warn, error (options.cpp has checked it).
void configure(const std::string& level, LogFormat format);
// "worker:3": added to every line from now on.
void set_task(const std::string& task);
bool enabled(Level level);
// Writes one line (messages are escaped to one line) unless `level` is below the configured one.
void write(Level level, std::string_view message);
void write_formatted(Level level, fmt::string_view format, fmt::format_args arguments);
// For a signal handler (and for when memory has run out): no allocation, no locks, only
// async-signal-safe calls. `message` is a constant ASCII text without quotes or backslashes.
void write_from_signal_handler(Level level, const char* message);

template <typename... Arguments>
void trace(fmt::format_string<Arguments...> format, Arguments&&... arguments) {
  if (enabled(Level::trace)) write_formatted(Level::trace, format, fmt::make_format_args(arguments...));
}
template <typename... Arguments>
void debug(fmt::format_string<Arguments...> format, Arguments&&... arguments) {
  if (enabled(Level::debug)) write_formatted(Level::debug, format, fmt::make_format_args(arguments...));
}
template <typename... Arguments>
void info(fmt::format_string<Arguments...> format, Arguments&&... arguments) {
  write_formatted(Level::info, format, fmt::make_format_args(arguments...));
}
template <typename... Arguments>
void warn(fmt::format_string<Arguments...> format, Arguments&&... arguments) {
  write_formatted(Level::warning, format, fmt::make_format_args(arguments...));
}
template <typename... Arguments>
void error(fmt::format_string<Arguments...> format, Arguments&&... arguments) {
  write_formatted(Level::error, format, fmt::make_format_args(arguments...));
}

}  // namespace tfboot::log
