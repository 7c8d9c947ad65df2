// The coordinator's /status as JSON (status.h).
#include "observe/status.h"

#include <nlohmann/json.hpp>

namespace tfboot::observe {

std::string render_status(const StartRecord& record) {
  nlohmann::ordered_json status;
  status["job_id"] = record.job_id;
  status["started"] = record.job_started;
  status["tasks_expected"] = record.tasks_expected;
  status["tasks_present"] = record.tasks_present;
  auto& tasks = status["tasks"] = nlohmann::ordered_json::array();
  // Bounded at any size: every task of a small job; of a larger one, the first missing tasks.
  const bool every_task = record.tasks.size() <= status_tasks_listed;
  std::size_t not_listed = 0;
  for (const auto& task : record.tasks) {
    if (!every_task && (task.present || tasks.size() == status_tasks_listed)) {
      ++not_listed;
      continue;
    }
    tasks.push_back({{"task", task.task}, {"present", task.present}, {"host", task.host}, {"last_error", task.last_error}});
  }
  if (!every_task) status["tasks_not_listed"] = not_listed;
  if (record.preflight_passed) {
    status["preflight"] = {{"passed", *record.preflight_passed}, {"seconds", record.preflight_seconds.value_or(0)},
                           {"refusal", record.preflight_refusal}};
    if (record.preflight_network_links) {
      auto figure = [](const std::optional<double>& value) { return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(); };
      status["preflight"]["network"] = {{"seconds", record.preflight_network_seconds.value_or(0)},
                                        {"links", *record.preflight_network_links},
                                        {"median_bits_per_second", figure(record.preflight_network_median_bits_per_second)},
                                        {"median_rtt_seconds", figure(record.preflight_network_median_rtt_seconds)},
                                        {"warnings", record.preflight_network_warnings.value_or(0)}};
    }
  }
  return status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace tfboot::observe
