// One place for what a task gets besides its command: its log dir with tf_config.json and
// startup.json, and the TFBOOT_* variables of its environment. Used by entrypoint mode and by
// `tfboot local` alike.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/error.h"
#include "plan/cluster.h"
#include "task/startup.h"

namespace tfboot {

// Now, as startup.json records times: seconds since the Unix epoch.
double unix_seconds();

// "<root>/<type>_<index>".
std::string task_log_dir(const std::string& log_root, TaskType type, int index);

// What write_task_files wrote, kept to add the task's end to startup.json at exit.
struct TaskFiles {
  std::string startup_path;  // absolute: init mode changes to "/" before the command ends
  StartupText text;          // startup.json as written, without its end
  PreviousStarts previous;   // previous.restarts > 0: the log dir held an earlier start
};

// Creates the log dir and writes both files as one step. An earlier startup.json that is
// damaged is set aside as startup.json.damaged.<unix time> with a warning (in the log and in
// the new file). On failure, exit code 4, and neither a new file nor a directory created here
// is left behind.
Result<TaskFiles> write_task_files(const std::string& log_dir, StartupReport report);

// startup.json as written, with how the task ended (`end.ended_at` set here), replaced atomically.
// Exit code 4 on failure, the earlier file left whole.
Result<void> record_task_end(const TaskFiles& files, TaskEnd end);

// startup.json as record_task_end would write it with `end`, split around the moment of the end
// for a writer that knows it only later (a signal handler): the text before `ended_at`'s number,
// between it and `ended_at_iso`'s text, and after.
std::array<std::string, 3> startup_json_around_the_end(const TaskFiles& files, TaskEnd end);

// The command's environment: `inherited` ("KEY=value" entries as tfboot got them) without any
// entry for TF_CONFIG, TFBOOT_LOG_DIR, TFBOOT_TASK_TYPE, TFBOOT_TASK_INDEX or one of `extra`'s
// names (an inherited environment may hold one twice), then tfboot's values of those. An empty
// `tf_config` sets none (PyTorch and JAX).
std::vector<std::string> task_environment(const std::vector<std::string>& inherited, const std::string& tf_config,
                                          const std::string& log_dir, TaskType type, int index,
                                          const std::vector<std::string>& extra = {});

}  // namespace tfboot
