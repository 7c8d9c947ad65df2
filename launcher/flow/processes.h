// The processes of one task's command: one for TensorFlow, --nproc-per-node for PyTorch and JAX,
// each with its task's variables and its framework's (docs/frameworks.md: PyTorch and JAX). Shared by
// entrypoint mode and `tfboot local`.
#pragma once

#include <string>
#include <vector>

#include "base/setting.h"
#include "framework/nodes.h"
#include "supervise/loop.h"

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

// Where rank `rank` of a PyTorch job writes its error record (TORCHELASTIC_ERROR_FILE).
std::string torch_error_file(const std::string& log_dir, int rank);

// For SupervisorSettings::failure_detail: "rank 3 on pod-1: RuntimeError: boom" from the rank's error
// file; else `last_words` (its exec failure or its stderr's failure line), after "rank 3 on pod-1: "
// when the task has several processes. "" when nothing is known.
std::string failed_process_detail(const NodeJob& nodes, const TaskProcesses& task, std::size_t process,
                                  const std::string& last_words);

// Removes error files an earlier run left, before the processes start.
void clear_error_files(const NodeJob& nodes, const std::string& log_dir);

}  // namespace tfboot
