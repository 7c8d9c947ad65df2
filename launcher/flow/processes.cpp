// The processes of one task's command (processes.h).
#include "flow/processes.h"

#include <algorithm>

#include "framework/environment.h"
#include "framework/error_file.h"
#include "task/task_files.h"

namespace tfboot {

std::string torch_error_file(const std::string& log_dir, int rank) {
  return log_dir + "/error_rank" + std::to_string(rank) + ".json";
}

std::vector<CommandProcess> command_processes(const TaskProcesses& task, const NodeJob& nodes,
                                              const std::vector<std::string>& inherited, const Environment& env) {
  std::vector<CommandProcess> processes;
  const bool several = nodes.local_world_size > 1;
  for (int local_rank = 0; local_rank < nodes.local_world_size; ++local_rank) {
    const int rank = nodes.rank(local_rank);
    std::vector<std::string> extra =
        framework_variables(nodes, local_rank, torch_error_file(task.log_dir, rank), env);
    extra.insert(extra.end(), task.extra.begin(), task.extra.end());
    extra.push_back("TFBOOT_RESTART_COUNT=" + std::to_string(nodes.restarts));
    const bool labelled = several || task.always_label;
    // Python buffers a pipe: without this a labelled process's print() would show only when it exits.
    if (labelled && !env.contains("PYTHONUNBUFFERED")) extra.push_back("PYTHONUNBUFFERED=1");
    CommandProcess process;
    process.spec.argv = task.command;
    process.spec.own_session = several;  // docs/frameworks.md: each rank in a session of its own
    process.spec.environment = task_environment(inherited, task.tf_config, task.log_dir, task.type, task.index, extra);
    if (nodes.framework != Framework::tensorflow) process.name = "rank " + std::to_string(rank);
    if (labelled) {
      process.spec.output_label = task.label_prefix.empty() ? "[" + process.name + "] "
                                  : process.name.empty()     ? task.label_prefix.substr(0, task.label_prefix.size() - 1) + "] "
                                                             : task.label_prefix + process.name + "] ";
    }
    if (process.name.empty()) process.name = "the command";
    processes.push_back(std::move(process));
  }
  return processes;
}

std::string failed_process_detail(const NodeJob& nodes, const TaskProcesses& task, std::size_t process,
                                  const std::string& last_words) {
  if (nodes.framework == Framework::tensorflow) return last_words;
  const int rank = nodes.rank(static_cast<int>(process));
  const std::string where = "rank " + std::to_string(rank) + " on " + task.host;
  if (nodes.framework == Framework::pytorch) {
    if (auto message = read_torch_error_message(torch_error_file(task.log_dir, rank))) return where + ": " + *message;
  }
  if (nodes.local_world_size == 1) return last_words;
  return last_words.empty() ? where : where + ": " + last_words;
}

void clear_error_files(const NodeJob& nodes, const std::string& log_dir) {
  if (nodes.framework != Framework::pytorch) return;
  for (int local_rank = 0; local_rank < nodes.local_world_size; ++local_rank) {
    remove_stale_error_file(torch_error_file(log_dir, nodes.rank(local_rank)));
  }
}

}  // namespace tfboot
