// The start record as /metrics serves it: Prometheus' text exposition format (docs/observing.md). Pure.
#pragma once

#include <string>

#include "observe/start_record.h"

namespace tfboot::observe {

// Version 0.0.4 of the format: every family with its HELP and TYPE, then its samples.
std::string render_metrics(const StartRecord& record);

}  // namespace tfboot::observe
