// The start barrier, task side: finds the coordinator (retrying with backoff and jitter), answers
// its challenge, and waits for its start or abort while both send heartbeats.
#include "control/join_sides.h"

#include <algorithm>
#include <future>
#include <system_error>

#include "base/text.h"
#include "control/auth.h"
#include "control/link.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

class TaskBarrier {
 public:
  TaskBarrier(const JobSettings& settings, Hello hello, Instant now, const NetworkProbe* probe)
      : settings_(settings),
        probe_(probe),
        hello_(std::move(hello)),
        started_(now),
        deadline_(now + settings.start_timeout),
        next_attempt_(now),
        next_progress_(now + settings.progress_every),
        backoff_(100ms, 2s, std::hash<std::string>{}(hello_.instance)) {}

  Result<std::unique_ptr<JobLink>> run() {
    log::info("start barrier: joining the coordinator {} on control port {}", settings_.coordinator.text(), settings_.port);
    while (true) {
      Instant now = SteadyClock::now();
      if (now >= effective_deadline()) return give_up();
      timers(now);
      report_measurement();
      std::vector<pollfd> fds;
      if (channel_) fds.push_back({channel_->fd(), phase_ == Phase::connecting ? short(POLLOUT) : channel_->events(), 0});
      if (auto polled = poll_until(fds, next_timer(), "control channel"); !polled) return std::unexpected(polled.error());
      if (!channel_ || fds[0].revents == 0) continue;
      if (auto outcome = on_ready(fds[0].revents, SteadyClock::now())) return std::move(*outcome);
    }
  }

 private:
  enum class Phase { idle, connecting, greeting, waiting };

  // A task the coordinator accepted waits a little past its own deadline, so that when both
  // deadlines fall together the coordinator's verdict (naming the missing tasks) reaches it.
  // Once the coordinator says every task is present it is checking the job's names (docs/supervision.md: DNS
  // behind the barrier): its verdict, bounded by its own deadline, is awaited while it is heard.
  Instant effective_deadline() const {
    if (phase_ == Phase::waiting && all_present_) return Instant::max();
    return phase_ == Phase::waiting ? deadline_ + linger : deadline_;
  }

  Instant next_timer() const {
    Instant next = std::min(effective_deadline(), next_progress_);
    if (measuring_) next = std::min(next, SteadyClock::now() + 20ms);  // the measurement's end
    if (phase_ == Phase::idle) return std::min(next, next_attempt_);
    if (phase_ == Phase::waiting) return std::min({next, next_heartbeat_, channel_->last_heard() + settings_.peer_silent_after});
    return std::min(next, phase_deadline_);
  }

  void timers(Instant now) {
    if (phase_ == Phase::idle && now >= next_attempt_) try_connect(now);
    if ((phase_ == Phase::connecting || phase_ == Phase::greeting) && now >= phase_deadline_) {
      drop("no answer from " + channel_->peer() + " within " + seconds_text(settings_.hello_timeout), now);
    }
    if (phase_ == Phase::waiting && now - channel_->last_heard() > settings_.peer_silent_after) {
      drop("the coordinator at " + channel_->peer() + " was silent for " + seconds_text(now - channel_->last_heard()), now);
    }
    if (phase_ == Phase::waiting && now >= next_heartbeat_) {
      channel_->send(Ping{});
      next_heartbeat_ = now + settings_.heartbeat_every;
    }
    if (now >= next_progress_) {
      log::info("start barrier: waiting for the start after {} of {}: {}", seconds_text(now - started_),
                seconds_text(settings_.start_timeout), last_seen_);
      next_progress_ = now + settings_.progress_every;
    }
  }

  void try_connect(Instant now) {
    if (next_address_ >= addresses_.size()) {
      auto addresses = settings_.coordinator_addresses ? settings_.coordinator_addresses()
                                                      : make_error(exit_code::usage, "no way to find the coordinator's address");
      if (!addresses || addresses->empty()) {
        coordinator_unresolved_ = true;
        return retry_later("the coordinator " + coordinator_text() + " has no address yet: " +
                               (addresses ? "none" : addresses.error().message), now);
      }
      coordinator_unresolved_ = false;
      addresses_ = std::move(*addresses);
      next_address_ = 0;
    }
    const std::string peer = join_host_port(addresses_[next_address_++], settings_.port);
    auto socket = start_connect(addresses_[next_address_ - 1], settings_.port);
    if (!socket) return retry_later(peer + ": " + socket.error().message, now);
    channel_.emplace(std::move(*socket), peer, max_coordinator_message, now);
    phase_ = Phase::connecting;
    phase_deadline_ = now + settings_.hello_timeout;
  }

  // Closes the connection and tries again after a backoff (with jitter, so that a thousand
  // tasks do not come back at the same instant).
  void drop(const std::string& why, Instant now) {
    channel_.reset();
    all_present_ = false;
    challenge_ = Challenge{};
    retry_later(why, now);
  }

  // The coordinator refused us, or we refused what it said: worth a warning (once per reason)
  // and a place in the deadline's message even when a later attempt only times out.
  void refused(const std::string& why, Instant now) {
    if (why != last_refusal_) log::warn("start barrier: {}", why);
    last_refusal_ = why;
    drop(why, now);
  }

  void retry_later(const std::string& why, Instant now) {
    last_seen_ = why;
    log::debug("start barrier: {}", why);
    phase_ = Phase::idle;
    next_attempt_ = now + backoff_.delay_after(++failures_);
  }

  std::optional<Result<std::unique_ptr<JobLink>>> on_ready(short revents, Instant now) {
    if (phase_ == Phase::connecting) {
      if (auto connected = connect_outcome(channel_->fd()); !connected) {
        drop(channel_->peer() + ": " + connected.error().message, now);
        return std::nullopt;
      }
      phase_ = Phase::greeting;
      last_seen_ = "connected to " + channel_->peer() + ", waiting for its challenge";
      return std::nullopt;
    }
    if (revents & POLLOUT) channel_->flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) channel_->receive(now);
    while (auto line = channel_->next_line()) {
      auto message = parse_message(*line, Sender::coordinator);
      if (!message) {
        refused(channel_->peer() + ": protocol violation: " + message.error().message, now);
        return std::nullopt;
      }
      if (auto outcome = on_message(*message, now)) return outcome;
      if (!channel_) return std::nullopt;
    }
    if (channel_->broken()) drop(channel_->peer() + ": " + channel_->problem(), now);
    return std::nullopt;
  }

  // --preflight network (docs/preflight.md): this task's links measured on a thread of its own,
  // while this one keeps the heartbeats; the figures go to the coordinator once in.
  void begin_measurement(const Measure& plan, Instant now) {
    if (measuring_) measuring_->wait();  // an earlier session's (a reconnect): bounded by its own length
    const auto self = static_cast<int>(std::find(settings_.tasks.begin(), settings_.tasks.end(), settings_.self) - settings_.tasks.begin());
    auto measure = [probe = probe_, plan, self, now] { return probe->measure(plan, self, plan.rounds.size(), now); };
    log::info("preflight network: measuring the links to {}", counted(plan.rounds.size(), "partner"));
    try {
      measuring_ = std::async(std::launch::async, measure);
    } catch (const std::system_error& error) {  // no thread to spare: measured here, the heartbeats paused
      log::warn("preflight network: no thread to measure on ({}); measuring on this one", error.what());
      std::promise<std::vector<MeasuredLink>> done;
      done.set_value(measure());
      measuring_ = done.get_future();
    }
    measuring_session_ = plan.session;
  }

  void report_measurement() {
    if (!measuring_ || measuring_->wait_for(0s) != std::future_status::ready) return;
    Measured measured{measuring_session_, measuring_->get()};
    measuring_.reset();
    if (measured.links.size() > max_measured_links) measured.links.resize(max_measured_links);
    for (auto& link : measured.links) link.problem = link.problem.substr(0, 1024);
    if (channel_ && phase_ == Phase::waiting) channel_->send(measured);
  }

  std::optional<Result<std::unique_ptr<JobLink>>> on_message(const Message& message, Instant now);
  void on_challenge(const Challenge& challenge, Instant now);
  void on_accepted(const Accepted& accepted, Instant now);
  Result<std::unique_ptr<JobLink>> on_start(const Start& start, Instant now);

  // Says what it last saw and the last refusal before it.
  Result<std::unique_ptr<JobLink>> give_up() {
    std::string seen = "last: " + last_seen_;
    if (!last_refusal_.empty() && last_refusal_ != last_seen_) seen += "; earlier: " + last_refusal_;
    if (coordinator_unresolved_) {
      seen += "; check that the coordinator's pod runs and that its name is published (a headless Service with "
              "publishNotReadyAddresses: true, the pod's hostname and subdomain)";
    }
    return make_error(exit_code::start_barrier_incomplete, "start barrier incomplete after " + seconds_text(settings_.start_timeout) +
                                                               ": no start from the coordinator " + coordinator_text() + "; " + seen);
  }

  // "worker:0 (mnist-worker-0.mnist.default.svc.cluster.local)": the task and the name asked.
  std::string coordinator_text() const {
    return settings_.coordinator.text() + (settings_.coordinator_name.empty() ? "" : " (" + settings_.coordinator_name + ")");
  }

  const JobSettings& settings_;
  const NetworkProbe* probe_;  // --preflight network's, or none
  std::optional<std::future<std::vector<MeasuredLink>>> measuring_;
  std::string measuring_session_;
  Hello hello_;
  Instant started_;
  Instant deadline_;
  bool all_present_ = false;  // the coordinator's last word: every task is present
  Instant next_attempt_;
  Instant next_progress_;
  Instant next_heartbeat_{};
  Instant phase_deadline_{};
  Backoff backoff_;  // 100 ms doubling up to 2 s, seeded by our instance
  Phase phase_ = Phase::idle;
  std::optional<MessageConnection> channel_;
  Challenge challenge_;
  std::vector<std::string> addresses_;
  std::size_t next_address_ = 0;
  int failures_ = 0;
  std::string last_seen_ = "not connected yet";
  bool coordinator_unresolved_ = false;  // the last look-up of its name gave no address
  std::string last_refusal_;
};

std::optional<Result<std::unique_ptr<JobLink>>> TaskBarrier::on_message(const Message& message, Instant now) {
  const bool proven = phase_ == Phase::waiting;  // only a coordinator that proved the secret is obeyed
  if (const Refused* refusal = std::get_if<Refused>(&message)) {
    refused(channel_->peer() + " refused us: " + refusal->reason, now);
  } else if (const Challenge* challenge = std::get_if<Challenge>(&message); challenge && phase_ == Phase::greeting && challenge_.nonce.empty()) {
    // Another version at the coordinator's address is a job that cannot start: said at once, not
    // retried until the deadline.
    if (auto same = check_coordinator_protocol(*challenge, hello_, coordinator_text() + " at " + channel_->peer()); !same) {
      return std::unexpected(same.error());
    }
    on_challenge(*challenge, now);
  } else if (const Accepted* accepted = std::get_if<Accepted>(&message); accepted && phase_ == Phase::greeting && !challenge_.nonce.empty()) {
    on_accepted(*accepted, now);
  } else if (const Waiting* waiting = std::get_if<Waiting>(&message); waiting && proven) {
    all_present_ = waiting->progress.total > 0 && waiting->progress.present == waiting->progress.total;
    last_seen_ = "connected to " + channel_->peer() + "; " + std::to_string(waiting->progress.present) + "/" +
                 std::to_string(waiting->progress.total) + " tasks present";
  } else if (const Abort* abort = std::get_if<Abort>(&message); abort && proven) {
    return make_error(abort->code, abort->message);
  } else if (const Measure* measure = std::get_if<Measure>(&message); measure && proven && probe_) {
    begin_measurement(*measure, now);
  } else if (const Start* start = std::get_if<Start>(&message); start && proven) {
    if (static_cast<std::size_t>(start->tasks) == settings_.tasks.size()) return on_start(*start, now);
    refused(channel_->peer() + ": protocol violation: the start counts " + std::to_string(start->tasks) + " tasks, this job has " +
                std::to_string(settings_.tasks.size()), now);
  } else if (!std::holds_alternative<Ping>(message) || !proven) {
    refused(channel_->peer() + ": protocol violation: an unexpected '" + std::string(message_type(message)) + "'", now);
  }
  return std::nullopt;
}

void TaskBarrier::on_challenge(const Challenge& challenge, Instant now) {
  if (auto fine = check_challenge(challenge, settings_.job_id, settings_.secret.has_value()); !fine) {
    return refused(channel_->peer() + ": " + fine.error().message, now);
  }
  challenge_ = challenge;
  hello_.nonce.clear();
  hello_.proof.clear();
  if (settings_.secret) {
    auto nonce = make_nonce();
    if (!nonce) return drop(nonce.error().message, now);
    hello_.nonce = *nonce;
    hello_.proof = task_proof(*settings_.secret, challenge_, hello_);
  }
  hello_.started_ms_ago = started_ms_ago(settings_.started, now);
  if (settings_.preflight != PreflightLevel::off) hello_.wall_ms = wall_clock_ms() + settings_.clock_offset_for_tests_ms;
  channel_->send(hello_);
}

void TaskBarrier::on_accepted(const Accepted& accepted, Instant now) {
  if (auto fine = check_accepted(accepted, challenge_, hello_, settings_.secret); !fine) {
    return refused(channel_->peer() + ": " + fine.error().message, now);
  }
  phase_ = Phase::waiting;
  failures_ = 0;
  next_heartbeat_ = now + settings_.heartbeat_every;
  last_seen_ = "connected to " + channel_->peer() + "; " + std::to_string(accepted.progress.present) + "/" +
               std::to_string(accepted.progress.total) + " tasks present";
  log::info("start barrier: the coordinator {} at {} accepted us; {}/{} tasks present", settings_.coordinator.text(), channel_->peer(),
            accepted.progress.present, accepted.progress.total);
}

Result<std::unique_ptr<JobLink>> TaskBarrier::on_start(const Start& start, Instant now) {
  log_differences(start.environment_differences);
  log::info("start barrier: the coordinator says start");
  StartInfo info{start.environment_differences, start.tasks,        start.supervised,   start.names_verified,
                 {},                              start.restarts, start.max_restarts, start.stop_together, start.clock_offsets_ms,
                 start.network};
  if (start.addresses) {
    for (const auto& entry : *start.addresses) {
      auto parts = split_non_empty(entry, ',');
      info.addresses.emplace_back(parts.begin(), parts.end());
    }
  }
  // Kept only when both sides watch the job after the start; otherwise closed here.
  std::optional<MessageConnection> kept;
  if (settings_.supervise && start.supervised) kept = std::move(channel_);
  channel_.reset();
  return make_task_link(std::move(info), settings_, std::move(kept), now);
}

}  // namespace

Result<std::unique_ptr<JobLink>> join_as_task(const JobSettings& settings, Hello own, Instant now, const NetworkProbe* probe) {
  return TaskBarrier(settings, std::move(own), now, probe).run();
}

}  // namespace tfboot
