// The start barrier as the coordinator sees it: slots per task, verdicts on hellos, the start.
#include "control/protocol/barrier.h"

#include <algorithm>
#include <utility>

#include "base/socket.h"

namespace tfboot {

StartBarrier::StartBarrier(BarrierSettings settings) : settings_(std::move(settings)) {
  for (const auto& task : settings_.tasks) {
    if (!slot_by_task_.emplace(task, slots_.size()).second) continue;  // a task listed twice is one slot
    missing_.insert(missing_.end(), slots_.size());
    slots_.push_back(Slot{.task = task});
  }
  if (Slot* own = slot_of(settings_.own.task)) {
    own->hello = settings_.own;
    take(*own, 0);  // never a real connection id: the coordinator is present by itself
    own->ever_connected = true;
    own->clock_offset_ms = 0;  // the coordinator's clock is the job's
  }
}

StartBarrier::Slot* StartBarrier::slot_of(const JobMember& task) {
  auto it = slot_by_task_.find(task);
  return it == slot_by_task_.end() ? nullptr : &slots_[it->second];
}

StartBarrier::Slot* StartBarrier::slot_of(ConnectionId connection) {
  return const_cast<Slot*>(std::as_const(*this).slot_of(connection));
}

const StartBarrier::Slot* StartBarrier::slot_of(ConnectionId connection) const {
  auto it = connection == 0 ? slot_by_connection_.end() : slot_by_connection_.find(connection);
  return it == slot_by_connection_.end() ? nullptr : &slots_[it->second];
}

void StartBarrier::take(Slot& slot, ConnectionId connection) {
  const std::size_t position = static_cast<std::size_t>(&slot - slots_.data());
  if (slot.connection) slot_by_connection_.erase(*slot.connection);
  slot.connection = connection;
  slot_by_connection_[connection] = position;
  missing_.erase(position);
}

void StartBarrier::leave(Slot& slot) {
  if (!slot.connection) return;
  slot_by_connection_.erase(*slot.connection);
  slot.connection.reset();
  missing_.insert(static_cast<std::size_t>(&slot - slots_.data()));
}

HelloVerdict StartBarrier::on_hello(ConnectionId connection, const Hello& hello, std::string_view peer, Instant now,
                                    std::optional<std::int64_t> clock_offset_ms) {
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
  take(*slot, connection);
  latest_task_start_ = std::max(latest_task_start_, now - std::chrono::milliseconds(hello.started_ms_ago));
  slot->hello = hello;
  slot->peer = std::string(peer);
  slot->last_heard = now;
  slot->ever_connected = true;
  slot->last_error.clear();
  slot->clock_offset_ms = clock_offset_ms;
  return verdict;
}

void StartBarrier::on_heard(ConnectionId connection, Instant now) {
  if (Slot* slot = slot_of(connection)) slot->last_heard = now;
}

void StartBarrier::on_closed(ConnectionId connection, const std::string& why) {
  if (Slot* slot = slot_of(connection)) {
    leave(*slot);
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

BarrierProgress StartBarrier::progress() const {
  constexpr std::size_t shown = 5;  // enough to act on; the coordinator's log names them all
  BarrierProgress progress{static_cast<int>(slots_.size() - missing_.size()), static_cast<int>(slots_.size()), {}};
  for (auto it = missing_.begin(); it != missing_.end() && progress.missing.size() < shown; ++it) {
    progress.missing.push_back(slots_[*it].task.text());
  }
  return progress;
}

std::optional<ConnectionId> StartBarrier::connection_of(const JobMember& task) const {
  auto it = slot_by_task_.find(task);
  if (it == slot_by_task_.end() || !slots_[it->second].connection || *slots_[it->second].connection == 0) return std::nullopt;
  return slots_[it->second].connection;
}

bool StartBarrier::wants_table(ConnectionId connection) const {
  const Slot* slot = slot_of(connection);
  return slot && slot->hello.table;
}

std::vector<std::string> StartBarrier::environment_differences() const {
  std::vector<std::pair<std::string, Fingerprint>> by_task;
  for (const auto& slot : slots_) {
    if (slot.connection) by_task.emplace_back(slot.task.text(), slot.hello.fingerprint);
  }
  return compare_fingerprints(by_task);
}

// Every node of a PyTorch or JAX job must run as many processes as the others: WORLD_SIZE and each
// RANK are computed from that count on every node, so one that differs gives ranks twice.
std::optional<Abort> StartBarrier::process_counts_differ() const {
  std::map<int, std::vector<std::string>> by_count;
  for (const auto& slot : slots_) {
    if (slot.connection && slot.hello.processes > 0) by_count[slot.hello.processes].push_back(slot.task.text());
  }
  if (by_count.size() < 2) return std::nullopt;
  constexpr std::size_t named = 5;
  std::string counts;
  for (const auto& [count, tasks] : by_count) {
    std::string names;
    for (std::size_t i = 0; i < tasks.size() && i < named; ++i) names += (i ? ", " : "") + tasks[i];
    if (tasks.size() > named) names += " and " + std::to_string(tasks.size() - named) + " more";
    counts += (counts.empty() ? "" : "; ") + names + (tasks.size() == 1 ? " runs " : " run ") + std::to_string(count);
  }
  return Abort{exit_code::usage, "the nodes run different numbers of processes (--nproc-per-node): " + counts +
                                     "; every node of the job must run the same number (give a number, not gpu or cpu, "
                                     "where the nodes differ)"};
}

std::variant<Start, Abort> StartBarrier::decide(bool supervised) const {
  if (auto differ = process_counts_differ()) return *differ;
  Start start{supervised, {}, static_cast<int>(slots_.size()), false, std::nullopt};
  if (settings_.env_check != EnvCheck::off) start.environment_differences = environment_differences();
  if (settings_.env_check == EnvCheck::fail && !start.environment_differences.empty()) {
    std::string message = "environment check failed (--env-check fail): ";
    for (std::size_t i = 0; i < start.environment_differences.size(); ++i) message += (i ? " | " : "") + start.environment_differences[i];
    return Abort{exit_code::environment_mismatch, message};
  }
  if (settings_.preflight != PreflightLevel::off) {
    const auto figures = preflight_figures();
    const PreflightVerdict verdict = judge_preflight(figures, settings_.preflight_bounds);
    if (!verdict.passed()) return Abort{exit_code::preflight_refused, preflight_refusal_message(verdict)};
    start.clock_offsets_ms.emplace();
    for (const auto& slot : slots_) start.clock_offsets_ms->push_back(slot.clock_offset_ms.value_or(0));
  }
  return start;
}

std::vector<TaskPreflight> StartBarrier::preflight_figures() const {
  std::vector<TaskPreflight> figures;
  for (const auto& slot : slots_) {
    if (!slot.connection) continue;
    figures.push_back({slot.task.text(), std::string(to_string(slot.task.type)), slot.hello.host, slot.hello.preflight,
                       slot.clock_offset_ms, accelerator_count(slot.hello.fingerprint)});
  }
  return figures;
}

std::vector<std::optional<int>> StartBarrier::network_ports() const {
  std::vector<std::optional<int>> ports;
  ports.reserve(slots_.size());
  for (const auto& slot : slots_) ports.push_back(slot.connection ? slot.hello.network_port : std::nullopt);
  return ports;
}

std::vector<MemberInfo> StartBarrier::members() const {
  std::vector<MemberInfo> members;
  members.reserve(slots_.size());
  for (const auto& slot : slots_) members.push_back({slot.task, slot.hello.host, slot.hello.name, slot.hello.addresses, address_of_peer(slot.peer)});
  return members;
}

std::string StartBarrier::missing_report(std::size_t at_most) const {
  std::string report;
  std::size_t listed = 0;
  for (std::size_t position : missing_) {
    if (listed == at_most) break;
    ++listed;
    const Slot& slot = slots_[position];
    std::string detail = slot.ever_connected ? "host '" + slot.hello.host + "'" : "never said hello";
    if (!slot.last_error.empty()) detail += ": " + slot.last_error;
    report += (report.empty() ? "" : ", ") + slot.task.text() + " (" + detail + ")";
  }
  if (missing_.size() > listed) report += " and " + std::to_string(missing_.size() - listed) + " more";
  return report;
}

std::vector<StartBarrier::TaskState> StartBarrier::task_states() const {
  std::vector<TaskState> states;
  states.reserve(slots_.size());
  for (const auto& slot : slots_) {
    states.push_back({slot.task, slot.connection.has_value(), slot.ever_connected ? slot.hello.host : "", slot.last_error});
  }
  return states;
}

std::vector<StartBarrier::Present> StartBarrier::present_tasks() const {
  std::vector<Present> present;
  for (const auto& slot : slots_) {
    if (slot.connection && *slot.connection != 0) present.push_back({slot.task, *slot.connection, slot.hello.supervised});
  }
  return present;
}

}  // namespace tfboot
