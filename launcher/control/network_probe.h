// The network level of the preflight, its measurement (docs/preflight.md): this task's probe
// listener on --preflight-port, and one session of rounds in which it streams to its partners
// while it counts what its own partners stream to it. The schedule and the verdict are
// control/protocol/network_check.h's; the messages that carry them, control/protocol/messages.h's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/socket.h"
#include "control/protocol/messages.h"

namespace tfboot {

// One link, from the receiver's side: the sender's first line names the job, the session and
// both ends; the receiver then times five one-byte round trips (keeping the least), says go, and
// counts the bytes the sender streams until it stops (bulk_ms, or max_bytes) or its own deadline.
class NetworkProbe {
 public:
  // Listens on `port` of every address (0: one the kernel chooses, for tests), before the barrier, so that the port is ours (or its
  // clash said) before any partner connects. Errors are exit_code::resources naming --preflight-port.
  static Result<NetworkProbe> open(int port, std::string job_id);

  // This task's part of one session: in round r (from `start` + r·round_ms) it streams to
  // plan.rounds[r], while it receives up to `inbound` links toward `self`. Returns the links it
  // received, each with its figures (or the problem that stopped it), and each link it could not
  // send, with the problem. Bounded: returns by start + rounds·round_ms + bulk_ms + 3 s.
  std::vector<MeasuredLink> measure(const Measure& plan, int self, std::size_t inbound, Instant start) const;

  int port() const { return port_; }

 private:
  NetworkProbe(Socket listener, int port, std::string job_id) : listener_(std::move(listener)), port_(port), job_id_(std::move(job_id)) {}
  Socket listener_;
  int port_ = 0;
  std::string job_id_;
};

// When the last of a session's links is over at the latest, from its start.
std::chrono::milliseconds network_session_length(const Measure& plan);

}  // namespace tfboot
