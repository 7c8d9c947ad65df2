// The job's control channel, pure: messages, their framing and validation, the handshake, and the
// decisions of the start barrier and of the job after the start. Events in, decisions out; time
// is passed in and nothing here touches a socket (control.cpp does).
//
// One message is one line of compact JSON, {"type":"hello",...}. A connection goes:
//   coordinator: challenge{job, nonce, secret}   (first, so a task learns early that it is misconfigured)
//   task:        hello{job, task, host, instance, supervised, name, addresses, fingerprint, nonce, proof}
//   coordinator: accepted{proof, progress} | refused{reason}
//   coordinator: waiting{progress} every heartbeat until start{...} | abort{code, message}
//   after start: ping both ways; task: exit{status}; coordinator: done{} | stop{task, status, message}
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cluster.h"
#include "error.h"
#include "fingerprint.h"
#include "options.h"

namespace tfboot {

using Instant = std::chrono::steady_clock::time_point;

struct JobMember {
  TaskType type = TaskType::worker;
  int index = 0;
  std::string text() const { return std::string(to_string(type)) + ":" + std::to_string(index); }
  friend bool operator==(const JobMember&, const JobMember&) = default;
  friend auto operator<=>(const JobMember&, const JobMember&) = default;
};
// "worker:2" exactly as text() writes it; the wire has one spelling ("master:0" is refused).
std::optional<JobMember> parse_member(std::string_view text);

// A task says little; the coordinator's start will carry a table of every task's addresses.
inline constexpr std::size_t max_task_message = 64 * 1024;
inline constexpr std::size_t max_coordinator_message = 8 * 1024 * 1024;
// A message that breaks the protocol closes its connection; this code never becomes an exit status.
inline constexpr int protocol_violation = 1;

// Splits a byte stream into lines; a line longer than the limit is an error (and the
// connection is closed), so a peer cannot make us buffer without bound.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_line) : max_line_(max_line) {}
  Result<void> append(std::string_view bytes);
  // The next complete line without its '\n', or nullopt until more bytes come.
  std::optional<std::string> next();
  bool empty() const { return buffer_.size() == start_; }

 private:
  std::size_t max_line_;
  std::string buffer_;
  std::size_t start_ = 0;    // where the next line begins
  std::size_t scanned_ = 0;  // bytes from start_ known to hold no '\n'
};

struct BarrierProgress {
  int present = 0;
  int total = 0;
  std::vector<std::string> missing;  // the first few, in cluster order
};

struct Challenge {
  std::string job;
  std::string nonce;
  bool secret = false;  // the coordinator requires the shared secret
};
struct Hello {
  std::string job;
  JobMember task;
  std::string host;
  std::string instance;  // fresh for each start of tfboot: tells a reconnect from a second task
  bool supervised = false;  // keeps the connection after the start (init mode)
  std::string name;          // the DNS name as in TF_CONFIG
  std::vector<std::string> addresses;
  Fingerprint fingerprint;
  std::string nonce;  // with a secret only
  std::string proof;
};
struct Accepted {
  std::string proof;  // with a secret only: the coordinator's proof
  BarrierProgress progress;
};
struct Refused {
  std::string reason;
};
struct Waiting {
  BarrierProgress progress;
};
struct MemberInfo {
  JobMember task;
  std::string host;
  std::string name;
  std::vector<std::string> addresses;
};
struct Start {
  bool supervised = false;  // the coordinator keeps watching the job after the start
  std::vector<std::string> environment_differences;
  std::vector<MemberInfo> members;  // every task, in cluster order
};
struct Abort {
  int code = exit_code::start_barrier_incomplete;  // or environment_mismatch
  std::string message;
};
struct Ping {};
struct Exit {
  int status = 0;
};
struct Done {};
struct Stop {
  JobMember task;
  int status = 0;  // -1: the task was lost
  std::string message;
};
using Message = std::variant<Challenge, Hello, Accepted, Refused, Waiting, Start, Abort, Ping, Exit, Done, Stop>;

enum class Sender { task, coordinator };

// "hello", "start", ...: the value of the "type" key.
std::string_view message_type(const Message& message);
// One line of JSON ending in '\n'. Invalid UTF-8 in our own strings is replaced, never thrown.
std::string encode(const Message& message);
// Validates everything before use: the types `from` may send, every field's type and range,
// string lengths and list sizes, task names. Unknown keys are ignored. Never throws.
Result<Message> parse_message(std::string_view line, Sender from);

// --- Handshake: proofs over both nonces; the role in the text keeps a proof from being reflected.
std::string task_proof(std::string_view secret, const Challenge& challenge, const Hello& hello);
std::string coordinator_proof(std::string_view secret, const Challenge& challenge, const Hello& hello);
// Task side, on the challenge: is this our job's coordinator, and do we agree about the secret?
Result<void> check_challenge(const Challenge& challenge, std::string_view job, bool have_secret);
// Coordinator side: the hello's proof, when a secret is set.
Result<void> check_hello_proof(const Hello& hello, const Challenge& challenge, const std::optional<std::string>& secret);
// Task side: the coordinator's proof in `accepted`, when a secret is set.
Result<void> check_accepted(const Accepted& accepted, const Challenge& challenge, const Hello& hello,
                            const std::optional<std::string>& secret);

// --- The start barrier, as the coordinator sees it.
using ConnectionId = std::uint64_t;

struct BarrierSettings {
  std::string job_id;
  std::vector<JobMember> tasks;  // every task of the cluster, in cluster order, coordinator included
  Hello own;                     // the coordinator's own entry
  EnvCheck env_check = EnvCheck::warn;
  std::chrono::milliseconds peer_silent_after{10000};
};

struct HelloVerdict {
  bool accepted = false;
  std::string reason;                    // why it was refused
  std::optional<ConnectionId> replaced;  // the task's older connection, now to be closed
};

class StartBarrier {
 public:
  explicit StartBarrier(BarrierSettings settings);

  // `peer` is the connection's address, for messages.
  HelloVerdict on_hello(ConnectionId connection, const Hello& hello, std::string_view peer, Instant now);
  void on_heard(ConnectionId connection, Instant now);
  // The connection is gone; `why` becomes its task's last error.
  void on_closed(ConnectionId connection, const std::string& why);
  // Something went wrong for a task before its hello counted (a wrong secret, say).
  void note_problem(const JobMember& task, const std::string& problem);
  // Connections of present tasks that have been silent longer than peer_silent_after.
  std::vector<ConnectionId> silent(Instant now) const;

  bool complete() const;
  BarrierProgress progress() const;
  // Once complete: Start for every task, or Abort with environment_mismatch when the
  // environment check is `fail` and fingerprints differ.
  std::variant<Start, Abort> decide(bool supervised) const;
  std::vector<std::string> environment_differences() const;
  // "worker:2 (never said hello), ps:0 (host 'ps-0': connection closed)"; beyond `at_most`
  // tasks, "and N more".
  std::string missing_report(std::size_t at_most = 50) const;
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
  };
  Slot* slot_of(const JobMember& task);
  Slot* slot_of(ConnectionId connection);

  BarrierSettings settings_;
  std::vector<Slot> slots_;
};

// --- After the start.
enum class JobEventKind { job_done, task_failed, coordinator_lost };
struct JobEvent {
  JobEventKind kind = JobEventKind::job_done;
  std::string task;  // the task that failed, or the coordinator
  int status = 0;    // the failed task's status; -1 when it was lost
  std::string message;
};

struct JobDecision {
  std::vector<JobEvent> events;        // for our own supervisor
  std::optional<Message> broadcast;    // for every other task
};

// The coordinator's watch over the job: task exits and silences in, events and broadcasts out.
// The first failure or the own command's end decides; later news is only logged by the caller.
class JobMonitor {
 public:
  struct Watched {
    JobMember task;
    bool supervised;  // exec-mode tasks close their connection at exec: not a failure
  };
  JobMonitor(JobMember self, const std::vector<Watched>& tasks, std::chrono::milliseconds silent_after, Instant now);
  JobDecision on_message(const JobMember& from, const Message& message, Instant now);
  JobDecision on_closed(const JobMember& from, const std::string& why, Instant now);
  JobDecision on_tick(Instant now);
  JobDecision on_own_exit(int status);
  // When on_tick must next run; time_point::max() when nothing is watched.
  Instant next_deadline() const;
  bool decided() const { return decided_; }

 private:
  struct State {
    bool supervised;
    bool exited = false;
    bool gone = false;
    Instant last_heard;
  };
  JobDecision fail(const JobMember& task, int status, const std::string& message);

  JobMember self_;
  std::chrono::milliseconds silent_after_;
  std::map<JobMember, State> tasks_;
  bool decided_ = false;
};

// A task's watch over the coordinator after the start.
class CoordinatorWatch {
 public:
  // `active` is false when the coordinator does not keep watching (it exec'd its command).
  CoordinatorWatch(JobMember coordinator, bool active, std::chrono::milliseconds silent_after, Instant now);
  std::optional<JobEvent> on_message(const Message& message, Instant now);
  std::optional<JobEvent> on_closed(const std::string& why);
  std::optional<JobEvent> on_tick(Instant now);
  Instant next_deadline() const;
  bool decided() const { return decided_; }

 private:
  std::optional<JobEvent> decide(JobEvent event);

  JobMember coordinator_;
  bool active_;
  std::chrono::milliseconds silent_after_;
  Instant last_heard_;
  bool decided_ = false;
};

// "status 1", "signal 9 (status 137)", "lost".
std::string describe_status(int status);

}  // namespace tfboot
