// The control channel's messages: their types, one-line JSON framing, encoding and validating
// parser. Pure; the handshake, barrier and watches build on these (control/protocol/protocol.h lists all).
//
// One message is one line of compact JSON, {"type":"hello",...}. A connection goes:
//   coordinator: challenge{job, nonce, secret, protocol, tfboot}   (first, so a task learns early that it is misconfigured)
//   task:        hello{job, task, host, instance, supervised, name, addresses, fingerprint, nonce, proof,
//                      table, started_ms_ago, protocol, tfboot, [processes, preflight, wall_ms, relay]}
//   (above 128 tasks most tasks say all this through their relay: control/protocol/tree.h)
//   coordinator: accepted{proof, progress} | refused{reason}
//   coordinator: waiting{progress} every heartbeat until start{tasks, ...} | abort{code, message}
//                (with names verified, the coordinator resolves every name between the two;
//                with --preflight network, measure{session, rounds} to each task and its
//                measured{session, links} back before the verdict)
//   after start: ping both ways; task: exit{status, detail}; coordinator: done{} | stop{task, status, message}
//                | restart{task, status, message, count} (--max-restarts: every task rejoins a fresh barrier)
//                preempt{task, signal} both ways (--stop-together: a task's stop signal, passed to every task)
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "control/protocol/network_check.h"
#include "control/protocol/preflight.h"
#include "fingerprint/fingerprint.h"
#include "plan/cluster.h"

namespace tfboot {

struct JobMember {
  TaskType type = TaskType::worker;
  int index = 0;
  std::string text() const { return task_name(type, index); }
  friend bool operator==(const JobMember&, const JobMember&) = default;
  friend auto operator<=>(const JobMember&, const JobMember&) = default;
};
// "worker:2" exactly as text() writes it; the wire has one spelling ("master:0" is refused).
std::optional<JobMember> parse_member(std::string_view text);

// A task says little; the coordinator's start carries a table of every task's addresses to the
// tasks that ask for it.
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

// The control channel's version, in the challenge and the hello beside tfboot's own version
// (CHANGELOG.md lists it per release). Every task of a job must speak the same one; a challenge or
// hello without it is protocol 1 (tfboot 0.1.0 up to the version that added it). A later protocol
// keeps the challenge's and the hello's fields, so that each side can still read the other's version.
inline constexpr int protocol_version = 3;  // 3: the start tree above 128 tasks
inline constexpr int unversioned_protocol = 1;
inline constexpr std::size_t max_tfboot_version = 64;
// Processes one node may say it runs: far above any node's GPUs or cores.
inline constexpr std::int64_t max_processes_per_node = 1 << 20;

struct BarrierProgress {
  int present = 0;
  int total = 0;
  std::vector<std::string> missing;  // the first few, in cluster order
};

struct Challenge {
  std::string job;
  std::string nonce;
  bool secret = false;  // the coordinator requires the shared secret
  int protocol = protocol_version;
  std::string tfboot;  // the coordinator's tfboot version; "" when it does not say
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
  bool table = false;  // wants every task's addresses with the start (--address ip)
  // How long this tfboot has run: its pod's DNS record may lag the pod's start, not this hello.
  std::int64_t started_ms_ago = 0;
  int protocol = protocol_version;
  std::string tfboot;  // this tfboot's version; "" when it does not say
  // PyTorch and JAX: the processes this node runs (--nproc-per-node resolved); 0 for TensorFlow.
  int processes = 0;
  // --preflight (docs/preflight.md): what the task found on its node, and its wall clock (Unix ms)
  // when it sent this hello, which the coordinator compares with its own.
  std::optional<NodeFigures> preflight;
  std::optional<std::int64_t> wall_ms;
  // --preflight network: the port this task's tfboot measures its links on (preflight.network_port).
  std::optional<int> network_port;
  // The start tree (control/protocol/tree.h): this connection is `task`'s relay carrying its group,
  // not the task itself (which joins on a connection of its own).
  bool relay = false;
};
// Hello::started_ms_ago for a tfboot started at `started`: at most what the wire carries (24.8
// days), which a job restarting in place after weeks reaches.
inline std::int64_t started_ms_ago(Instant started, Instant now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count();
  return std::min<std::int64_t>(ms, std::numeric_limits<int>::max());
}
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
  std::string source = {};  // the address its connection came from; "" for the coordinator itself
  friend bool operator==(const MemberInfo&, const MemberInfo&) = default;
};
// The same bytes go to every task (encoded once): what a task needs, never one entry per task
// unless the task asked for the table.
struct Start {
  bool supervised = false;  // the coordinator keeps watching the job after the start
  std::vector<std::string> environment_differences;
  int tasks = 0;  // the job's size, as the coordinator counted it
  // The coordinator resolved every task's name and found it pointing at its task.
  bool names_verified = false;
  // Only for a task that asked (Hello::table): every task's addresses in cluster order, each entry
  // its addresses joined by ',' (the DNS answers when names_verified, else what the task reported).
  std::optional<std::vector<std::string>> addresses;
  // The job's rules after the start, the coordinator's: restarts so far and the most it makes in
  // place, and whether a stop signal to one task reaches every task's command.
  int restarts = 0;
  int max_restarts = 0;
  bool stop_together = false;
  // --preflight passed: each task's clock offset from the coordinator's in cluster order, in ms.
  std::optional<std::vector<std::int64_t>> clock_offsets_ms;
  // --preflight network passed: the job's figures (preflight.network).
  std::optional<NetworkSummary> network;
};
struct Abort {
  int code = exit_code::start_barrier_incomplete;  // or environment_mismatch, peers_unresolved, preflight_refused
  std::string message;
};
// `abort` as a task accepts it: a message longer than the wire carries is cut, saying that the
// rest is in the coordinator's log (which has the whole of it).
Abort fitted_to_the_wire(Abort abort);
struct Ping {};
struct Exit {
  int status = 0;
  std::string detail;  // what failed, when the task knows more than its status ("rank 3 on pod-1: ..."); optional
};
struct Done {};
struct Stop {
  JobMember task;
  int status = 0;  // -1: the task was lost
  std::string message;
};
// The job restarts in place after `task` failed or was lost: every task stops its command and joins
// a fresh start barrier; `count` is the job's restarts with this one.
struct Restart {
  JobMember task;
  int status = 0;  // -1: the task was lost
  std::string message;
  int count = 1;
};
// A stop signal came to `task`'s tfboot (a drained node, a reclaimed spot instance): from that
// task to the coordinator, then from the coordinator to every task, whose commands get it too.
struct Preempt {
  JobMember task;
  int signal = 15;
};
// --preflight network (docs/preflight.md): once every task is present, the coordinator asks each
// task to measure its links: in round r (at r * round_ms after this message came) it streams to
// rounds[r]'s task for bulk_ms, at most max_bytes, on that task's network port, while its own
// listener counts what its partners stream to it. `to`: the partner's position in cluster order.
struct ProbeRound {
  int to = 0;
  std::string address;
  int port = 0;
};
struct Measure {
  std::string session;  // 16 hex digits: a probe connection of another session is refused
  int round_ms = 1500;
  int bulk_ms = 500;
  std::int64_t max_bytes = 128 << 20;
  std::vector<ProbeRound> rounds;
};
inline constexpr std::size_t max_probe_rounds = 8;
inline constexpr std::size_t max_measured_links = 64;
// Each link as its receiver counted it (rtt, throughput), or as its sender failed it (problem).
struct MeasuredLink {
  int from = 0;
  int to = 0;
  std::optional<std::int64_t> rtt_us;
  std::optional<std::int64_t> bits_per_second;
  std::string problem;
};
struct Measured {
  std::string session;
  std::vector<MeasuredLink> links;
};
using Message = std::variant<Challenge, Hello, Accepted, Refused, Waiting, Start, Abort, Ping, Exit, Done, Stop, Restart, Preempt,
                             Measure, Measured>;

enum class Sender { task, coordinator };

// "hello", "start", ...: the value of the "type" key.
std::string_view message_type(const Message& message);
// One line of JSON ending in '\n'. Invalid UTF-8 in our own strings is replaced, never thrown.
std::string encode(const Message& message);
// Validates everything before use: the types `from` may send, every field's type and range,
// string lengths and list sizes, task names. Unknown keys are ignored. Never throws.
Result<Message> parse_message(std::string_view line, Sender from);

}  // namespace tfboot
