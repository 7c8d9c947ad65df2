// The quick preflight's verdict: a task's directories and GPUs, its clock, its accelerators against its type's.
#include "control/protocol/preflight.h"

#include <map>

namespace tfboot {
namespace {

std::string named(const TaskPreflight& task) { return task.task + " (host '" + task.host + "')"; }

// Per type, the count most tasks see; among equals, the one the first task in cluster order sees.
std::map<std::string, int> usual_accelerators(const std::vector<TaskPreflight>& tasks) {
  std::map<std::string, std::map<int, int>> counts;
  std::map<std::string, std::vector<int>> order;
  for (const auto& task : tasks) {
    if (counts[task.type][task.accelerators]++ == 0) order[task.type].push_back(task.accelerators);
  }
  std::map<std::string, int> usual;
  for (const auto& [type, seen] : order) {
    int best = seen.front();
    for (int count : seen) {
      if (counts[type][count] > counts[type][best]) best = count;
    }
    usual[type] = best;
  }
  return usual;
}

// "log root /logs not writable: ..." or "... has 12 MiB free (at least 64 needed)"; nothing when fine.
void judge_directory(const std::string& what, const DirectoryFigures& directory, const PreflightBounds& bounds,
                     std::vector<std::string>& problems) {
  if (!directory.problem.empty()) {
    problems.push_back(what + " " + directory.path + " not writable: " + directory.problem);
  } else if (directory.free_mib < bounds.min_free_mib) {
    problems.push_back(what + " " + directory.path + " has " + std::to_string(directory.free_mib) + " MiB free (at least " +
                       std::to_string(bounds.min_free_mib) + " needed)");
  }
}

}  // namespace

PreflightVerdict judge_preflight(const std::vector<TaskPreflight>& tasks, const PreflightBounds& bounds) {
  PreflightVerdict verdict;
  const auto usual = usual_accelerators(tasks);
  std::map<std::string, int> of_type;
  for (const auto& task : tasks) ++of_type[task.type];
  for (const auto& task : tasks) {
    std::vector<std::string> problems;
    if (!task.node) {
      problems.push_back("reported no preflight figures (its --preflight is off, or its tfboot is older)");
    } else {
      judge_directory("log root", task.node->log_root, bounds, problems);
      if (task.node->checkpoint_dir) judge_directory("checkpoint dir", *task.node->checkpoint_dir, bounds, problems);
      problems.insert(problems.end(), task.node->silent_gpus.begin(), task.node->silent_gpus.end());
    }
    if (task.clock_offset_ms && (*task.clock_offset_ms > bounds.max_clock_offset_ms || *task.clock_offset_ms < -bounds.max_clock_offset_ms)) {
      problems.push_back("clock " + std::to_string(*task.clock_offset_ms) + " ms off the coordinator's (at most " +
                         std::to_string(bounds.max_clock_offset_ms) + " ms)");
    }
    const int expected = usual.at(task.type);
    if (task.accelerators != expected) {
      problems.push_back("sees " + std::to_string(task.accelerators) + " accelerators, the other " + task.type + " tasks " +
                         std::to_string(expected) + (of_type[task.type] > 2 ? " (most of them)" : ""));
    }
    for (const auto& problem : problems) verdict.refusals.push_back(named(task) + ": " + problem);
  }
  return verdict;
}

std::string preflight_refusal_message(const PreflightVerdict& verdict) {
  constexpr std::size_t named_at_most = 10;  // the coordinator's log has each on a line of its own
  std::string message = "preflight refused the start: ";
  for (std::size_t i = 0; i < verdict.refusals.size() && i < named_at_most; ++i) message += (i ? "; " : "") + verdict.refusals[i];
  if (verdict.refusals.size() > named_at_most) message += "; and " + std::to_string(verdict.refusals.size() - named_at_most) + " more";
  return message;
}

}  // namespace tfboot
