// spdlog to stderr, text or one JSON object per line, tagged with the task once known.
#include "log.h"

#include <unistd.h>

#include <chrono>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace tfboot {
namespace {

std::string current_task;
LogFormat current_format = LogFormat::text;

// One JSON object per line; built with nlohmann so any message text is escaped correctly.
class JsonStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    auto time = std::chrono::duration_cast<std::chrono::microseconds>(message.time.time_since_epoch()).count();
    nlohmann::ordered_json line;
    line["time"] = static_cast<double>(time) / 1e6;
    line["level"] = std::string(spdlog::level::to_string_view(message.level).data(),
                                spdlog::level::to_string_view(message.level).size());
    line["logger"] = "tfboot";
    if (!current_task.empty()) line["task"] = current_task;
    line["message"] = std::string(message.payload.data(), message.payload.size());
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

void apply_text_pattern() {
  std::string tag = current_task.empty() ? "" : " [" + current_task + "]";
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e tfboot %l" + tag + " %v");
}

void install(LogFormat format) {
  current_format = format;
  spdlog::sink_ptr sink;
  if (format == LogFormat::json) sink = std::make_shared<JsonStderrSink>();
  else sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("tfboot", sink);
  logger->flush_on(spdlog::level::trace);  // lines must be out before exec replaces the process
  auto level = spdlog::default_logger() ? spdlog::default_logger()->level() : spdlog::level::info;
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
  if (format == LogFormat::text) apply_text_pattern();
}

}  // namespace

void start_logging() { install(LogFormat::text); }

void configure_logging(const std::string& level, LogFormat format) {
  install(format);
  spdlog::set_level(spdlog::level::from_str(level));
}

void set_log_task(const std::string& task) {
  current_task = task;
  if (current_format == LogFormat::text) apply_text_pattern();
}

}  // namespace tfboot
