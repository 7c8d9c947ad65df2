// The start record as the coordinator's /status serves it (docs/observing.md). Pure.
#pragma once

#include <cstddef>
#include <string>

#include "observe/start_record.h"

namespace tfboot::observe {

// The most tasks /status lists: every task of a job this small; of a larger one the first missing
// ones in cluster order, and `tasks_not_listed` counts the others (present or missing).
inline constexpr std::size_t status_tasks_listed = 100;

// One line of JSON: the job's tasks, present or missing, with their host and last error.
std::string render_status(const StartRecord& record);

}  // namespace tfboot::observe
