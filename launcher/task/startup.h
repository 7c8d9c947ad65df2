// The contents of startup.json: what tfboot found out before running the command, how the task
// ended (init mode), and what an earlier start in the same log dir left (docs/supervision.md: Running the
// command). Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dns/wait.h"
#include "plan/cluster.h"
#include "plan/identity.h"

namespace tfboot {

// How the task ended, written into startup.json when tfboot exits in init mode.
struct TaskEnd {
  double ended_at = 0;  // Unix seconds
  int exit_status = 0;  // what tfboot exits with
  std::string reason;   // "command_succeeded", "command_failed", "stopped_by_signal", "job_done", "job_failed"
  std::string message;  // the closing log line's why
  std::string failed_task;  // the task whose failure stopped this one ("worker:1"), or ""
};

struct StartupReport {
  std::string version;
  Identity identity;
  std::string hostname;
  std::vector<PeerAddress> peers;
  std::vector<NameStatus> resolution;  // one per peer when the DNS wait ran, else empty
  std::vector<std::string> dns_servers;
  std::vector<std::string> warnings;
  std::string tf_config;
  std::vector<std::string> command;  // passed on untouched; not always valid UTF-8
  double started_at = 0;             // Unix seconds
  double dns_wait_seconds = 0;
  double written_at = 0;
  std::string job_json;  // the job's control channel: a JSON object text, or empty when off
  std::string preflight_json;  // --preflight: a JSON object text (docs/preflight.md), or empty when off
  std::string framework_json;  // PyTorch's or JAX's view of the node: a JSON object text, or empty for TensorFlow
  // `tfboot local`: no DNS and no peers to look up, so dns_servers, dns_wait_seconds and peers
  // are left out rather than written empty.
  bool local = false;
  std::string commit;          // tfboot's commit ("3f2a9c1"), or empty when not known
  std::optional<TaskEnd> end;  // set once the task has ended
};

// What an earlier startup.json in the same log dir says, validated and bounded: a log dir on a
// volume outlives restarts, and whatever it holds must never stop a start.
struct PreviousStarts {
  struct Start {
    double started_at = 0;
    std::string identity_source;
    std::optional<TaskEnd> end;  // how that start ended, when its startup.json says (reason and message are cut)
  };
  int restarts = 0;            // starts before this one
  std::vector<Start> history;  // oldest first, at most max_history
  std::optional<std::string> damage;  // why the earlier file was set aside, if it was
};
inline constexpr std::size_t max_history = 20;
// The size beyond which an earlier startup.json is set aside unread.
inline constexpr std::size_t max_previous_startup_json = 1024 * 1024;

// nullopt: no earlier file. Text that is not an earlier report of ours is damage.
PreviousStarts read_previous_starts(const std::optional<std::string>& text);

// startup.json's text but for its "end", rendered once: what grows with the job (the peers,
// TF_CONFIG) is not rendered again when the task ends. `before` holds the members before where
// "end" goes, `after` those after it and the closing brace.
struct StartupText {
  std::string before;
  std::string after;
};
StartupText render_startup_json(const StartupReport& report, const PreviousStarts& previous);
// The whole file: `text` with `end` (none: no "end" member) between its parts.
std::string startup_json_with_end(const StartupText& text, const std::optional<TaskEnd>& end);
// Both in one: the file for `report` (report.end included).
std::string build_startup_json(const StartupReport& report, const PreviousStarts& previous);

// ISO 8601 in UTC with milliseconds, "2023-11-14T22:13:20.500Z", for the epoch seconds beside it.
std::string iso8601_utc(double unix_seconds);

}  // namespace tfboot
