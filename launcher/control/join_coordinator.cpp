// The start barrier, coordinator side: accepts connections, challenges them, feeds their hellos
// and heartbeats to the StartBarrier, and sends its verdict to every task.
#include "control/join_sides.h"

#include <algorithm>
#include <future>
#include <system_error>
#include <map>
#include <variant>

#include "control/auth.h"
#include "control/link.h"

namespace tfboot {
namespace {

// A connection at the coordinator before the start.
struct Candidate {
  MessageConnection channel;
  Challenge challenge;
  Instant opened;
  std::optional<JobMember> task;  // once its hello was accepted
  bool refused = false;           // told why; closed once that is delivered or after `linger`
};

class CoordinatorBarrier {
 public:
  CoordinatorBarrier(const JobSettings& settings, Socket listener, const Hello& own, Instant now)
      : settings_(settings),
        listener_(std::move(listener)),
        barrier_(BarrierSettings{settings.job_id, settings.tasks, own, settings.env_check, settings.peer_silent_after}),
        started_(now),
        deadline_(now + settings.start_timeout),
        next_heartbeat_(now + settings.heartbeat_every),
        next_progress_(now + settings.progress_every) {}

  Result<std::unique_ptr<JobLink>> run() {
    log::info("start barrier: waiting for {} on control port {}", counted(settings_.tasks.size() - 1, "task"), settings_.port);
    while (true) {
      Instant now = SteadyClock::now();
      if (verification_ && verification_->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        if (auto verdict = take_verification()) return start(std::move(*verdict));
      }
      if (now >= deadline_ && !verification_) return give_up();
      if (barrier_.complete() && !verification_ && (!settings_.verify_members || now >= last_hello_ + settings_.record_settle)) {
        auto decision = barrier_.decide(settings_.supervise);
        if (std::holds_alternative<Abort>(decision) || !settings_.verify_members) return start(std::move(decision));
        begin_verification(std::get<Start>(decision));
      }
      housekeeping(now);
      if (auto polled = poll_once(); !polled) return std::unexpected(polled.error());
    }
  }

 private:
  Result<void> poll_once() {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    Instant until = std::min({deadline_, next_heartbeat_, next_progress_});
    if (verification_) until = std::min(until, SteadyClock::now() + verification_poll);
    if (settings_.verify_members && barrier_.complete()) until = std::min(until, last_hello_ + settings_.record_settle);
    for (const auto& [id, candidate] : connections_) {
      fds.push_back({candidate.channel.fd(), candidate.channel.events(), 0});
      until = std::min(until, candidate.task ? candidate.channel.last_heard() + settings_.peer_silent_after
                                             : candidate.opened + (candidate.refused ? linger : settings_.hello_timeout));
    }
    if (auto polled = poll_until(fds, until); !polled) return polled;
    Instant now = SteadyClock::now();
    if (fds[0].revents != 0) accept_connections(now);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto& [id, candidate] = *it;
      short revents = revents_of(fds, candidate.channel.fd());
      if (revents & POLLOUT) candidate.channel.flush();
      if (revents & (POLLIN | POLLHUP | POLLERR)) candidate.channel.receive(now);
      read_lines(id, candidate, now);
      if (candidate.channel.broken()) {
        barrier_.on_closed(id, candidate.channel.problem());
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    return {};
  }

  void accept_connections(Instant now) {
    // Room for every task twice (an old and a new instance) and some strangers; beyond that a
    // connection is closed at once, and a task among them retries.
    const std::size_t cap = 2 * settings_.tasks.size() + 16;
    while (auto accepted = accept_one(listener_.fd())) {
      if (connections_.size() >= cap) {
        log::debug("control channel: closed a connection from {}: {} connections open", accepted->second, cap);
        continue;
      }
      auto nonce = make_nonce();
      if (!nonce) {
        log::error("{}", nonce.error().message);
        continue;
      }
      Challenge challenge{settings_.job_id, *nonce, settings_.secret.has_value()};
      Candidate candidate{MessageConnection(std::move(accepted->first), accepted->second, max_task_message, now), challenge, now};
      candidate.channel.send(challenge);
      connections_.emplace(next_id_++, std::move(candidate));
    }
  }

  void read_lines(ConnectionId id, Candidate& candidate, Instant now) {
    while (auto line = candidate.channel.next_line()) {
      if (candidate.refused) continue;  // what it says after the refusal does not matter
      auto message = parse_message(*line, Sender::task);
      if (!message) return candidate.channel.fail("protocol violation: " + message.error().message);
      if (candidate.task) {
        // Before the start a present task only sends heartbeats.
        if (!std::holds_alternative<Ping>(*message)) return candidate.channel.fail("protocol violation: a '" + std::string(message_type(*message)) + "' before the start");
        barrier_.on_heard(id, now);
      } else if (const Hello* hello = std::get_if<Hello>(&*message)) {
        on_hello(id, candidate, *hello, now);
      } else {
        return candidate.channel.fail("protocol violation: a '" + std::string(message_type(*message)) + "' before hello");
      }
    }
  }

  void on_hello(ConnectionId id, Candidate& candidate, const Hello& hello, Instant now) {
    if (auto proven = check_hello_proof(hello, candidate.challenge, settings_.secret); !proven) {
      log::warn("start barrier: refused {} claiming {} from {}: {}", hello.host, hello.task.text(), candidate.channel.peer(), proven.error().message);
      barrier_.note_problem(hello.task, proven.error().message + " from " + candidate.channel.peer());
      return refuse(candidate, "authentication failed");
    }
    HelloVerdict verdict = barrier_.on_hello(id, hello, candidate.channel.peer(), now);
    if (!verdict.accepted) {
      log::warn("start barrier: refused {} from {}: {}", hello.task.text(), candidate.channel.peer(), verdict.reason);
      return refuse(candidate, verdict.reason);
    }
    if (verdict.replaced) {
      log::info("start barrier: {} reconnected; its older connection is closed", hello.task.text());
      if (auto old = connections_.find(*verdict.replaced); old != connections_.end()) old->second.channel.fail("replaced by a new connection");
    }
    candidate.task = hello.task;
    last_hello_ = now;
    std::string proof = settings_.secret ? coordinator_proof(*settings_.secret, candidate.challenge, hello) : "";
    candidate.channel.send(Accepted{proof, barrier_.progress()});
    log::info("start barrier: {} ({}) is present; {}/{}", hello.task.text(), hello.host, barrier_.progress().present, settings_.tasks.size());
  }

  void refuse(Candidate& candidate, const std::string& reason) {
    candidate.channel.send(Refused{reason});
    candidate.channel.shutdown_write();
    candidate.refused = true;
    candidate.opened = SteadyClock::now();  // from now on: the time it has to read the refusal
  }

  void housekeeping(Instant now) {
    for (ConnectionId id : barrier_.silent(now)) {
      if (auto it = connections_.find(id); it != connections_.end()) it->second.channel.fail("silent for " + seconds_text(now - it->second.channel.last_heard()));
    }
    for (auto& [id, candidate] : connections_) {
      if (candidate.refused && now - candidate.opened > linger) candidate.channel.fail("refused");
      else if (!candidate.task && !candidate.refused && now - candidate.opened > settings_.hello_timeout) {
        candidate.channel.fail("no hello within " + seconds_text(settings_.hello_timeout));
      }
    }
    if (now >= next_heartbeat_) {
      for (auto& [id, candidate] : connections_) {
        if (candidate.task) candidate.channel.send(Waiting{barrier_.progress()});
      }
      next_heartbeat_ = now + settings_.heartbeat_every;
    }
    if (now >= next_progress_) {
      log::info("start barrier: {}/{} tasks present after {}; missing: {}", barrier_.progress().present, settings_.tasks.size(),
                seconds_text(now - started_), barrier_.missing_report(10));
      next_progress_ = now + settings_.progress_every;
    }
  }

  // Every task is present: their names are resolved on a thread of their own, while this one
  // keeps the connections alive (heartbeats, silence, reconnects).
  void begin_verification(Start start) {
    log::info("start barrier: all {} tasks present; resolving their names once", settings_.tasks.size());
    pending_members_ = start.members;
    try {
      verification_ = std::async(std::launch::async, settings_.verify_members, pending_members_, deadline_);
    } catch (const std::system_error& error) {  // no thread to spare: checked here, the heartbeats paused
      log::warn("start barrier: no thread for the name check ({}); checking on this one", error.what());
      std::promise<Result<std::vector<MemberInfo>>> done;
      done.set_value(settings_.verify_members(pending_members_, deadline_));
      verification_ = done.get_future();
    }
  }

  // The verdict once the names are checked, or nullopt when the job changed meanwhile (a task
  // reconnected or left) and the check must wait for the barrier and run again.
  std::optional<std::variant<Start, Abort>> take_verification() {
    auto verified = verification_->get();
    verification_.reset();
    if (!barrier_.complete()) {
      log::info("start barrier: a task left while the names were resolved; checking again once all are present");
      return std::nullopt;
    }
    auto decision = barrier_.decide(settings_.supervise);
    Start* start = std::get_if<Start>(&decision);
    if (!start) return decision;
    if (start->members != pending_members_) {
      log::info("start barrier: a task came back while the names were resolved; checking again");
      return std::nullopt;
    }
    // Every task learns why, with the DNS code whatever went wrong.
    if (!verified) return Abort{exit_code::peers_unresolved, "the coordinator's check of the job's names: " + verified.error().message};
    start->members = std::move(*verified);
    start->names_verified = true;
    return decision;
  }

  std::vector<MessageConnection*> present_channels() {
    std::vector<MessageConnection*> channels;
    for (auto& [id, candidate] : connections_) {
      if (candidate.task && !candidate.channel.broken()) channels.push_back(&candidate.channel);
    }
    return channels;
  }

  Result<std::unique_ptr<JobLink>> give_up() {
    std::string message = "start barrier incomplete after " + seconds_text(settings_.start_timeout) + ": " +
                          std::to_string(barrier_.progress().present) + "/" + std::to_string(settings_.tasks.size()) +
                          " tasks present; missing " + barrier_.missing_report();
    auto channels = present_channels();
    for (MessageConnection* channel : channels) channel->send(fitted_to_the_wire(Abort{exit_code::start_barrier_incomplete, message}));
    deliver(channels, SteadyClock::now() + linger);
    return make_error(exit_code::start_barrier_incomplete, message);
  }

  Result<std::unique_ptr<JobLink>> start(std::variant<Start, Abort> decision);

  // How often the loop looks whether the names are checked.
  static constexpr std::chrono::milliseconds verification_poll{20};
  const JobSettings& settings_;
  Socket listener_;
  StartBarrier barrier_;
  std::map<ConnectionId, Candidate> connections_;
  ConnectionId next_id_ = 1;  // 0 is the coordinator's own entry in the barrier
  Instant started_;
  Instant deadline_;
  Instant next_heartbeat_;
  Instant next_progress_;
  Instant last_hello_{};  // when the last task was accepted
  std::optional<std::future<Result<std::vector<MemberInfo>>>> verification_;
  std::vector<MemberInfo> pending_members_;  // what the running verification checks
};

Result<std::unique_ptr<JobLink>> CoordinatorBarrier::start(std::variant<Start, Abort> decision) {
  auto channels = present_channels();
  if (const Abort* abort = std::get_if<Abort>(&decision)) {
    for (MessageConnection* channel : channels) channel->send(fitted_to_the_wire(*abort));
    deliver(channels, SteadyClock::now() + settings_.peer_silent_after);
    return make_error(abort->code, abort->message);
  }
  const Start& start = std::get<Start>(decision);
  for (MessageConnection* channel : channels) channel->send(start);
  // The start message may be megabytes for a large job; delivered before anyone may close.
  deliver(channels, SteadyClock::now() + settings_.peer_silent_after);
  log_differences(start.environment_differences);
  log::info("start barrier: all {} tasks present; starting", settings_.tasks.size());

  Instant now = SteadyClock::now();
  std::map<JobMember, MessageConnection> tasks;
  std::vector<JobMonitor::Watched> watched;
  for (const auto& present : barrier_.present_tasks()) {
    auto it = connections_.find(present.connection);
    if (!settings_.supervise || !present.supervised || it == connections_.end()) continue;
    watched.push_back({present.task, true});
    tasks.emplace(present.task, std::move(it->second.channel));
  }
  StartInfo info{start.environment_differences, start.members, settings_.supervise, start.names_verified};
  Socket listener = settings_.supervise ? std::move(listener_) : Socket();
  return make_coordinator_link(std::move(info), settings_, std::move(listener), std::move(tasks), watched, now);
}

}  // namespace

Result<std::unique_ptr<JobLink>> join_as_coordinator(const JobSettings& settings, Socket listener, const Hello& own,
                                                     Instant now) {
  return CoordinatorBarrier(settings, std::move(listener), own, now).run();
}

}  // namespace tfboot
