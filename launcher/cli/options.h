// Command line and TFBOOT_* environment twins -> Options (docs/command-line.md). Pure.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/choices.h"
#include "base/error.h"
#include "base/log.h"
#include "base/setting.h"

namespace tfboot {

enum class Mode { entrypoint, local, version, help };

// Made by parse_options, which sets every default from its option table (docs/command-line.md):
// the defaults are written there once, not here.
struct Options {
  Mode mode = Mode::entrypoint;
  std::optional<Setting> task_type;
  std::optional<Setting> task_index;
  std::optional<Setting> hostname;
  bool chief_at_ordinal_0 = false;
  IdentityFrom identity_from{};
  std::optional<Setting> cluster;
  std::optional<Setting> peer_template;
  std::optional<Setting> service;
  std::optional<Setting> kube_namespace;
  std::optional<Setting> cluster_domain;
  // The downward-API volume with the pod's labels and annotations (a JobSet's, docs/identity.md).
  Setting pod_info_dir;
  Setting port;
  AddressMode address{};
  bool evaluator_in_cluster = false;
  std::chrono::milliseconds wait{};
  std::optional<Setting> dns_server;
  std::optional<Setting> log_root;
  bool print = false;
  std::optional<bool> init;  // unset: on exactly when tfboot is PID 1
  // The job's control channel between the tasks' tfboot processes; port 0 turns it off.
  int control_port = 0;
  int relay_port = 0;                      // above 128 tasks, where relays listen (docs/supervision.md: The start tree); 0: the control port
  std::chrono::milliseconds start_timeout{};
  EnvCheck env_check{};
  PreflightLevel preflight{};  // docs/preflight.md
  std::optional<Setting> checkpoint_dir;  // --checkpoint-dir: checked by --preflight
  int preflight_port = 2221;               // --preflight network: where each task measures its links
  double preflight_refuse_below = 0.1;     // --preflight network: a share of the job's median throughput
  bool control_source_check = true;  // a task's connection must come from an address its name resolves to
  std::chrono::milliseconds stop_grace{};
  std::optional<Setting> control_secret_file;
  Framework framework{};
  bool framework_given = false;  // --framework or its twin, not the default
  // N, gpu, cpu or auto, resolved with the host's facts (framework/nproc_per_node.h).
  Setting nproc_per_node;
  bool nproc_per_node_given = false;
  // Init mode: once the command succeeded, stay (idle) until stopped instead of exiting, so a
  // StatefulSet does not restart a finished job.
  bool idle_when_done = false;
  // Init mode with the control channel, and tfboot local: a failure restarts every task's command
  // in place, this many times at most; 0 ends the job at the first failure.
  int max_restarts = 0;
  // Init mode: a stop signal to one task's tfboot reaches every task's command.
  bool stop_together = true;
  std::string log_level;
  LogFormat log_format{};
  // Init mode: the metrics server's port (docs/observing.md); 0 = none.
  int metrics_port = 0;
  // Where a failing exit's reason goes; unset: /dev/termination-log when it is writable.
  std::optional<Setting> termination_log;
  std::vector<std::string> command;  // empty: the default command
  // --unknown-variables warn: a TFBOOT_* variable that is no option's twin is a warning, not an error.
  bool warn_unknown_variables = false;
  // Said once the log is configured: with --unknown-variables warn, TFBOOT_* variables that are
  // no option's twin (a typo such as TFBOOT_CLUSTR would otherwise be ignored in silence).
  std::vector<std::string> warnings;
};

inline const std::vector<std::string> default_command{"python", "train.py"};
inline constexpr int max_restarts_allowed = 10000;

// args excludes argv[0].
Result<Options> parse_options(std::span<const std::string> args, const Environment& env);

// "500ms", "30s", "15m", "1h" or plain seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view source);

std::string help_text();

// The log format asked for, read apart from parse_options so that its own errors are written in
// it too: json with --log-format json (or =json) before the command, or TFBOOT_LOG_FORMAT=json
// (the flag wins); else text.
LogFormat requested_log_format(std::span<const std::string> args, const Environment& env);

}  // namespace tfboot
