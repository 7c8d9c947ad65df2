// What this task's start has shown so far (docs/observing.md): the record, and the process's one
// record, written by the flow through the hook-ins below and read by the metrics server's thread.
// Its renderings are prometheus.h (/metrics) and status.h (/status).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dns/wait.h"

namespace tfboot::observe {

// The start-up's phases, in the order they run; each ends where the next begins.
enum class Phase {
  plan,        // options, the host's facts, identity and peers (a PTR lookup for compose)
  dns_wait,    // the names this task resolves before the barrier
  barrier,     // joining the job until the coordinator's start (the name check included)
  name_check,  // the coordinator, within the barrier: every task's name resolved and compared
  files,       // the names completed after the start, TF_CONFIG, the log dir, startup.json
};
inline constexpr std::size_t phase_count = 5;
std::string_view phase_name(Phase phase);

// The job's decisions as this task hears them (docs/supervision.md: Job supervision).
enum class StopEvent { job_done, peer_failed, coordinator_lost, restart, preempted };
inline constexpr std::size_t stop_event_count = 5;
std::string_view stop_event_name(StopEvent event);

// Every outcome a lookup is counted under in StartRecord::dns_lookups.
inline constexpr std::string_view lookup_outcomes[] = {"resolved", "nxdomain", "no_address_records", "timeout", "servfail",
                                                       "refused",  "connection_refused", "other"};

// One task of the job as the coordinator's barrier sees it, for /status.
struct TaskPresence {
  std::string task;  // "worker:1"
  bool present = false;
  std::string host;        // as its hello said; "" before one
  std::string last_error;  // why it is not present, or ""
};

struct StartRecord {
  std::string version;
  std::string commit;
  std::string task;       // "worker:1", once the identity is known
  std::string job_id;     // once the task joins a job
  std::string framework;  // tensorflow, pytorch or jax
  double started_at = 0;  // Unix seconds
  std::array<std::optional<double>, phase_count> phase_seconds{};
  std::optional<double> seconds_to_command;
  std::map<std::string, std::uint64_t, std::less<>> dns_lookups;  // by outcome (lookup_outcomes)
  std::uint64_t dns_retries = 0;
  bool coordinator = false;
  std::size_t tasks_expected = 0;
  std::size_t tasks_present = 0;
  std::vector<TaskPresence> tasks;  // the coordinator's barrier, in cluster order
  bool job_started = false;         // the coordinator said start
  int restarts = 0;                 // startup.json's "restarts": earlier starts in the same log dir
  int job_restarts = 0;             // the job's restarts in place, as its coordinator counts them
  bool command_started = false;
  bool command_running = false;
  std::optional<int> exit_status;   // what tfboot exits with, once supervision ended
  std::array<std::uint64_t, stop_event_count> stop_events{};
  std::string end_message;  // the supervision's closing reason, for the termination message
  // --preflight (docs/preflight.md): this task's checks' time and the job's verdict, once known.
  std::optional<double> preflight_seconds;
  std::optional<bool> preflight_passed;
  std::string preflight_refusal;  // the verdict's one line when refused
  // Each check's figure for this task: the directories probed ("log_root", "checkpoint_dir"), the
  // GPUs counted, the clock's offset from the coordinator's (a task alone has none).
  struct PreflightDirectory {
    std::string name;
    double write_seconds = 0;
    std::int64_t free_mib = 0;
    bool writable = false;
  };
  std::vector<PreflightDirectory> preflight_directories;
  std::optional<int> preflight_accelerators;
  std::optional<int> preflight_accelerators_answering;  // of them, those whose device opened
  std::optional<double> preflight_clock_offset_seconds;
  // --preflight network: the job's figures, once the start carried them.
  std::optional<double> preflight_network_seconds;
  std::optional<double> preflight_network_median_bits_per_second;
  std::optional<double> preflight_network_median_rtt_seconds;
  std::optional<int> preflight_network_links;
  std::optional<int> preflight_network_warnings;
};

// /readyz: the command has started, after the barrier where there is one.
bool is_ready(const StartRecord& record);

// The process's record. Each change runs under a lock that the reader holds only to copy it, so
// neither side waits on the other for longer than a copy.
void update(const std::function<void(StartRecord&)>& change);
StartRecord snapshot();

// The hook-ins the flow calls, each one line there (the phases' times: phase_clock.h).
void phase_ended(Phase phase, double seconds);
void count_failed_lookup(LookupReason reason);
// After a wait: one resolved lookup per resolved name; every try past a name's first a retry.
void count_lookups(const std::vector<NameStatus>& names);
void count_stop_event(StopEvent event);

}  // namespace tfboot::observe
