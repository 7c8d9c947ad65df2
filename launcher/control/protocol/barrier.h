// The start barrier as the coordinator sees it, pure: which task is present on which connection,
// who is missing and why, and the verdict (start or abort) once every task said hello. Time is
// passed in; control/join_coordinator.cpp feeds it from the sockets.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/choices.h"
#include "control/protocol/messages.h"

namespace tfboot {

using ConnectionId = std::uint64_t;

struct BarrierSettings {
  std::string job_id;
  std::vector<JobMember> tasks;  // every task of the cluster, in cluster order, coordinator included
  Hello own;                     // the coordinator's own entry
  EnvCheck env_check = EnvCheck::warn;
  std::chrono::milliseconds peer_silent_after{10000};
  PreflightLevel preflight = PreflightLevel::off;  // the coordinator's: the job's (docs/preflight.md)
  PreflightBounds preflight_bounds;
};

struct HelloVerdict {
  bool accepted = false;
  std::string reason;                    // why it was refused
  std::optional<ConnectionId> replaced;  // the task's older connection, now to be closed
};

class StartBarrier {
 public:
  explicit StartBarrier(BarrierSettings settings);

  // `peer` is the connection's address, for messages; `clock_offset_ms`: the task's wall clock
  // against the coordinator's at this hello, when the hello carried one.
  HelloVerdict on_hello(ConnectionId connection, const Hello& hello, std::string_view peer, Instant now,
                        std::optional<std::int64_t> clock_offset_ms = std::nullopt);
  void on_heard(ConnectionId connection, Instant now);
  // The connection is gone; `why` becomes its task's last error.
  void on_closed(ConnectionId connection, const std::string& why);
  // Something went wrong for a task before its hello counted (a wrong secret, say).
  void note_problem(const JobMember& task, const std::string& problem);
  // Connections of present tasks that have been silent longer than peer_silent_after.
  std::vector<ConnectionId> silent(Instant now) const;

  bool complete() const { return missing_.empty(); }
  BarrierProgress progress() const;
  // Once complete: Start for every task, or Abort with environment_mismatch when the
  // environment check is `fail` and fingerprints differ, or with preflight_refused when a task
  // cannot run the job (--preflight quick).
  std::variant<Start, Abort> decide(bool supervised) const;
  // Every task's entry in cluster order, as its hello said: what the name check compares.
  std::vector<MemberInfo> members() const;
  // The latest start of a present task's tfboot, as their hellos tell (a hello received at `now`
  // that says 300 ms: now - 300 ms).
  Instant latest_task_start() const { return latest_task_start_; }
  std::vector<std::string> environment_differences() const;
  // An abort (exit 2) naming the tasks when the nodes run different numbers of processes.
  std::optional<Abort> process_counts_differ() const;
  // Every present task's preflight figures, in cluster order (the coordinator's own included).
  std::vector<TaskPreflight> preflight_figures() const;
  // --preflight network: the port each task's hello said it measures its links on, in cluster
  // order (nullopt: a task missing, or one whose level is not network).
  std::vector<std::optional<int>> network_ports() const;
  // "worker:2 (never said hello), ps:0 (host 'ps-0': connection closed)"; beyond `at_most`
  // tasks, "and N more".
  std::string missing_report(std::size_t at_most = 50) const;
  // Every task in cluster order: present or not, its host as its hello said, its last error
  // (docs/observing.md, the coordinator's /status).
  struct TaskState {
    JobMember task;
    bool present = false;
    std::string host;
    std::string last_error;
  };
  std::vector<TaskState> task_states() const;
  // The connection a present task is on; nullopt when it is missing or the coordinator itself.
  std::optional<ConnectionId> connection_of(const JobMember& task) const;
  // Whether the task on `connection` asked for the table of addresses with the start.
  bool wants_table(ConnectionId connection) const;
  // The connection of each present task other than the coordinator, and whether it stays.
  struct Present {
    JobMember task;
    ConnectionId connection;
    bool supervised;
  };
  std::vector<Present> present_tasks() const;

 private:
  struct Slot {
    JobMember task;
    std::optional<ConnectionId> connection;
    Hello hello;
    std::string peer;
    Instant last_heard{};
    bool ever_connected = false;
    std::string last_error;
    std::optional<std::int64_t> clock_offset_ms;
  };
  Slot* slot_of(const JobMember& task);
  Slot* slot_of(ConnectionId connection);
  const Slot* slot_of(ConnectionId connection) const;
  void take(Slot& slot, ConnectionId connection);
  void leave(Slot& slot);

  // Every lookup is by index, so that a job of thousands of tasks costs a constant per hello,
  // heartbeat and progress line, never a pass over every task.
  BarrierSettings settings_;
  std::vector<Slot> slots_;
  std::map<JobMember, std::size_t> slot_by_task_;
  std::unordered_map<ConnectionId, std::size_t> slot_by_connection_;
  std::set<std::size_t> missing_;  // slots without a connection, in cluster order
  Instant latest_task_start_{};
};

}  // namespace tfboot
