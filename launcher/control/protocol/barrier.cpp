// The start barrier as the coordinator sees it: slots per task, verdicts on hellos, the start.
#include "control/protocol/barrier.h"

#include <algorithm>

namespace tfboot {

StartBarrier::StartBarrier(BarrierSettings settings) : settings_(std::move(settings)) {
  for (const auto& task : settings_.tasks) slots_.push_back(Slot{.task = task});
  if (Slot* own = slot_of(settings_.own.task)) {
    own->hello = settings_.own;
    own->connection = 0;  // never a real connection id: the coordinator is present by itself
    own->ever_connected = true;
  }
}

StartBarrier::Slot* StartBarrier::slot_of(const JobMember& task) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& slot) { return slot.task == task; });
  return it == slots_.end() ? nullptr : &*it;
}

StartBarrier::Slot* StartBarrier::slot_of(ConnectionId connection) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& slot) { return slot.connection == connection; });
  return it == slots_.end() || connection == 0 ? nullptr : &*it;
}

HelloVerdict StartBarrier::on_hello(ConnectionId connection, const Hello& hello, std::string_view peer, Instant now) {
  const std::string from = "'" + hello.host + "' (" + std::string(peer) + ")";
  Slot* slot = slot_of(hello.task);
  if (hello.job != settings_.job_id) {
    if (slot) slot->last_error = "refused a hello from " + from + " of another job " + hello.job;
    return {false, "job " + hello.job + " is not this job (" + settings_.job_id + "): another job, or a cluster of another size"};
  }
  if (!slot) return {false, hello.task.text() + " is not a task of this job's cluster"};
  if (hello.task == settings_.own.task) return {false, hello.task.text() + " is the coordinator itself, host '" + settings_.own.host + "'"};
  HelloVerdict verdict{true, "", std::nullopt};
  if (slot->connection) {
    bool same_instance = slot->hello.instance == hello.instance;
    bool alive = now - slot->last_heard <= settings_.peer_silent_after;
    if (alive && !same_instance) {
      return {false, hello.task.text() + " is already present from host '" + slot->hello.host + "' (" + slot->peer +
                         "); refused the second hello from host " + from};
    }
    verdict.replaced = slot->connection;  // a reconnect of the same tfboot, or a restarted one after a dead one
  }
  slot->connection = connection;
  slot->hello = hello;
  slot->peer = std::string(peer);
  slot->last_heard = now;
  slot->ever_connected = true;
  slot->last_error.clear();
  return verdict;
}

void StartBarrier::on_heard(ConnectionId connection, Instant now) {
  if (Slot* slot = slot_of(connection)) slot->last_heard = now;
}

void StartBarrier::on_closed(ConnectionId connection, const std::string& why) {
  if (Slot* slot = slot_of(connection)) {
    slot->connection.reset();
    slot->last_error = why;
  }
}

void StartBarrier::note_problem(const JobMember& task, const std::string& problem) {
  if (Slot* slot = slot_of(task); slot && !slot->connection) slot->last_error = problem;
}

std::vector<ConnectionId> StartBarrier::silent(Instant now) const {
  std::vector<ConnectionId> connections;
  for (const auto& slot : slots_) {
    if (slot.connection && *slot.connection != 0 && now - slot.last_heard > settings_.peer_silent_after) {
      connections.push_back(*slot.connection);
    }
  }
  return connections;
}

bool StartBarrier::complete() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.connection.has_value(); });
}

BarrierProgress StartBarrier::progress() const {
  constexpr std::size_t shown = 5;  // enough to act on; the coordinator's log names them all
  BarrierProgress progress{0, static_cast<int>(slots_.size()), {}};
  for (const auto& slot : slots_) {
    if (slot.connection) ++progress.present;
    else if (progress.missing.size() < shown) progress.missing.push_back(slot.task.text());
  }
  return progress;
}

std::vector<std::string> StartBarrier::environment_differences() const {
  std::vector<std::pair<std::string, Fingerprint>> by_task;
  for (const auto& slot : slots_) {
    if (slot.connection) by_task.emplace_back(slot.task.text(), slot.hello.fingerprint);
  }
  return compare_fingerprints(by_task);
}

std::variant<Start, Abort> StartBarrier::decide(bool supervised) const {
  Start start{supervised, {}, {}};
  if (settings_.env_check != EnvCheck::off) start.environment_differences = environment_differences();
  if (settings_.env_check == EnvCheck::fail && !start.environment_differences.empty()) {
    std::string message = "environment check failed (--env-check fail): ";
    for (std::size_t i = 0; i < start.environment_differences.size(); ++i) message += (i ? " | " : "") + start.environment_differences[i];
    return Abort{exit_code::environment_mismatch, message};
  }
  for (const auto& slot : slots_) start.members.push_back({slot.task, slot.hello.host, slot.hello.name, slot.hello.addresses});
  return start;
}

std::string StartBarrier::missing_report(std::size_t at_most) const {
  std::string report;
  std::size_t listed = 0;
  std::size_t missing = 0;
  for (const auto& slot : slots_) {
    if (slot.connection) continue;
    if (++missing > at_most) continue;
    ++listed;
    std::string detail = slot.ever_connected ? "host '" + slot.hello.host + "'" : "never said hello";
    if (!slot.last_error.empty()) detail += ": " + slot.last_error;
    report += (report.empty() ? "" : ", ") + slot.task.text() + " (" + detail + ")";
  }
  if (missing > listed) report += " and " + std::to_string(missing - listed) + " more";
  return report;
}

std::vector<StartBarrier::Present> StartBarrier::present_tasks() const {
  std::vector<Present> present;
  for (const auto& slot : slots_) {
    if (slot.connection && *slot.connection != 0) present.push_back({slot.task, *slot.connection, slot.hello.supervised});
  }
  return present;
}

}  // namespace tfboot
