// The processes of one task's command: one for TensorFlow, --nproc-per-node for PyTorch and JAX,
// each with its task's variables and its framework's (docs/frameworks.md: PyTorch and JAX). Shared by
// entrypoint mode and `tfboot local`.
#pragma once

#include <string>
#include <vector>

#include "base/setting.h"
#include "framework/nodes.h"
#include "process/init.h"

namespace tfboot {

struct TaskProcesses {
  std::vector<std::string> command;
  std::string tf_config;  // "" for PyTorch and JAX, which get none
  std::string log_dir;
  TaskType type = TaskType::worker;
  int index = 0;
  std::string host;                   // named in a failed rank's line
  std::vector<std::string> extra;     // more variables for every process (the collectives' interface)
  std::string label_prefix;           // "[worker:1 " in tfboot local, else ""
  bool always_label = false;          // tfboot local labels even a single process
};

// `inherited`: tfboot's environment entries; `env` the same as a map.
std::vector<CommandProcess> command_processes(const TaskProcesses& task, const NodeJob& nodes,
                                              const std::vector<std::string>& inherited, const Environment& env);

// "restart 1 of 3": the job's restart `count` of at most `max` (--max-restarts), for the log.
std::string restart_of(int count, int max);

// Where rank `rank` of a PyTorch job writes its error record (TORCHELASTIC_ERROR_FILE).
std::string torch_error_file(const std::string& log_dir, int rank);

// For InitSettings::failure_detail: "rank 3 on pod-1: RuntimeError: boom" from the rank's error
// file; "rank 3 on pod-1" without one when the task has several processes; else "".
std::string failed_process_detail(const NodeJob& nodes, const TaskProcesses& task, std::size_t process);

// Removes error files an earlier run left, before the processes start.
void clear_error_files(const NodeJob& nodes, const std::string& log_dir);

}  // namespace tfboot
