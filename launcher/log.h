// spdlog to stderr, text or one JSON object per line, tagged with the task once known.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

#include "options.h"

namespace tfboot {

// Text output until configure_logging is called, so that option errors are logged too.
void start_logging();
void configure_logging(const std::string& level, LogFormat format);
// "worker:3": added to every line from now on.
void set_log_task(const std::string& task);

}  // namespace tfboot
