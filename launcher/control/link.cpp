// The job's control channel after the start: CoordinatorLink and TaskLink.
#include "control/link.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "base/text.h"
#include "base/threads.h"
#include "base/unique_fd.h"
#include "control/refusals.h"

namespace tfboot {
namespace {

// The task a coordinator's stop, restart or preempt names.
std::optional<JobMember> task_named(const Message& message) {
  if (const Stop* stop = std::get_if<Stop>(&message)) return stop->task;
  if (const Restart* restart = std::get_if<Restart>(&message)) return restart->task;
  if (const Preempt* preempt = std::get_if<Preempt>(&message)) return preempt->task;
  return std::nullopt;
}

// The coordinator's side after the start: heartbeats to every supervised task, their exits and
// silences into the JobMonitor, its decisions out to every task. The supervisor polls one
// descriptor, the event set's, so a wake-up costs what is ready, however many tasks there are.
class CoordinatorLink final : public JobLink {
 public:
  CoordinatorLink(StartInfo info, const JobSettings& settings, Socket listener, EventSet events,
                  std::map<std::uint64_t, LinkedTask> tasks, const std::vector<JobMonitor::Watched>& watched,
                  std::map<std::uint64_t, std::shared_ptr<Carrier>> carriers, Instant now)
      : JobLink(std::move(info)),
        heartbeat_every_(settings.heartbeat_every),
        silent_after_(settings.peer_silent_after),
        carriers_(std::move(carriers)),
        listener_(std::move(listener)),
        events_(std::move(events)),
        tasks_(std::move(tasks)),
        monitor_(settings.self, watched, settings.peer_silent_after, now,
                 JobRules{settings.done_when_every_task_is, start_info_.restarts, start_info_.max_restarts, start_info_.stop_together}),
        next_heartbeat_(now + settings.heartbeat_every),
        latecomers_(settings.progress_every) {
    for (auto& [key, linked] : tasks_) look_after(key, linked);
    watch_carriers();
  }

  void add_poll_fds(std::vector<pollfd>& fds) const override { fds.push_back({events_.fd(), POLLIN, 0}); }

  Instant next_wakeup() const override {
    if (!own_restart_.empty()) return SteadyClock::now();  // decided already: said at the next process()
    return tasks_.empty() ? Instant::max() : std::min(monitor_.next_deadline(), next_heartbeat_);
  }

  std::vector<JobEvent> process(const std::vector<pollfd>&, Instant now) override {
    std::vector<JobEvent> events = std::exchange(own_restart_, {});
    auto ready = events_.wait(now);  // now: no waiting, only what is ready
    if (!ready) log::warn("{}", ready.error().message);
    for (const auto& [key, revents] : ready ? *ready : std::vector<EventSet::Ready>{}) {
      if (key == listener_key) {
        if (listener_) refuse_latecomers(now);
        continue;
      }
      if (auto carrier = carriers_.find(key); carrier != carriers_.end()) {
        on_carrier(carrier->second, revents, now, events);
        continue;
      }
      auto it = tasks_.find(key);
      if (it == tasks_.end()) continue;
      MessageConnection& channel = it->second.channel;
      if (revents & POLLOUT) channel.flush();
      if (revents & (POLLIN | POLLHUP | POLLERR)) channel.receive(now);
      apply(read_messages(it->second.task, channel, now), events);
      look_after(key, it->second);
    }
    apply(monitor_.on_tick(now), events);
    if (now >= next_heartbeat_) {
      broadcast(Ping{});
      const EncodedMessage ping = encoded(Ping{});
      for (auto& [key, carrier] : carriers_) {
        carrier->channel.send(ping);
        carrier->touched = true;
        if (now - carrier->channel.last_heard() > silent_after_) carrier->channel.fail("silent for " + seconds_text(now - carrier->channel.last_heard()));
      }
      next_heartbeat_ = now + heartbeat_every_;
    }
    watch_carriers();
    bury(now, events);
    return events;
  }

  // Our own command's end: the supervisor knows it already, but not whether the job restarts,
  // which the next process() says.
  void report_exit(int status, const std::string& detail, bool rejoins) override {
    std::vector<JobEvent> events;
    apply(monitor_.on_own_exit(status, detail, rejoins), events);
    for (const JobEvent& event : events) {
      if (event.kind == JobEventKind::restart) own_restart_.push_back(event);
    }
  }

  void report_stop_signal(int signal_number) override {
    std::vector<JobEvent> ignored;  // the supervisor passed the signal on already
    apply(monitor_.on_own_stop_signal(signal_number), ignored);
  }

  bool awaits_other_tasks() const override { return !monitor_.decided() || !own_restart_.empty(); }

  void finish(std::chrono::milliseconds at_most) override {
    listener_.reset();
    std::vector<MessageConnection*> channels;
    for (auto& [key, linked] : tasks_) channels.push_back(&linked.channel);
    deliver(channels, SteadyClock::now() + at_most);
    for (MessageConnection* channel : channels) channel->shutdown_write();
    deliver(on_the_wire(channels), SteadyClock::now() + at_most);  // the carried ones' close frames
    for (auto& [key, carrier] : carriers_) carrier->channel.shutdown_write();
    tasks_.clear();
    carriers_.clear();
  }

 private:
  // A relay's connection (control/protocol/tree.h): its tasks' lines to them, as their own
  // connections' would be; a task connecting to it now is refused, as at the listener.
  void on_carrier(const std::shared_ptr<Carrier>& held, short revents, Instant now, std::vector<JobEvent>& events) {
    Carrier& carrier = *held;
    if (revents & POLLOUT) carrier.channel.flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) carrier.channel.receive(now);
    auto input = read_carrier(carrier, [this](std::uint64_t key) -> MessageConnection* {
      auto found = tasks_.find(key);
      return found == tasks_.end() ? nullptr : &found->second.channel;
    }, now);
    for (const RelayOpen& open : input.opened) {
      MessageConnection late(held, open.id, open.peer, max_task_message, now);
      // After a restart's broadcast the listener is closed and a task connecting is refused by the
      // kernel, which it retries; through a relay it is closed before its challenge, which it retries too.
      if (listener_) late.send(Refused{"job already started"});
      late.shutdown_write();
      if (auto line = latecomers_.note("a connection from " + open.peer + " via the relay " + carrier.relay.text() + ": job already started", now)) {
        log::info("control channel: {}", *line);
      }
    }
    for (std::uint64_t key : input.touched) {
      auto it = tasks_.find(key);
      if (it == tasks_.end()) continue;
      apply(read_messages(it->second.task, it->second.channel, now), events);
      look_after(key, it->second);
    }
  }

  // Relays sent to are watched for POLLOUT while they have output; a lost one ends every task it
  // carried, as their own connections' ends would.
  void watch_carriers() {
    for (auto it = carriers_.begin(); it != carriers_.end();) {
      auto current = it++;
      Carrier& carrier = *current->second;
      if (carrier.channel.broken()) {
        log::warn("the relay {}'s connection ended ({}); the {} it carried are lost with it", carrier.relay.text(), carrier.channel.problem(),
                  counted(carrier.carried.size(), "task"));
        const std::string why = "its relay " + carrier.relay.text() + " was lost: " + carrier.channel.problem();
        for (const auto& [relay_id, key] : carrier.carried) {
          auto task = tasks_.find(key);
          if (task == tasks_.end()) continue;
          task->second.channel.fail(why);
          look_after(key, task->second);
        }
        carriers_.erase(current);
        continue;
      }
      if (!carrier.touched) continue;
      carrier.touched = false;
      events_.watch(carrier.channel.fd(), current->first, carrier.channel.events());
    }
  }

  JobDecision read_messages(const JobMember& task, MessageConnection& channel, Instant now) {
    JobDecision decision;
    while (auto line = channel.next_line()) {
      auto message = parse_message(*line, Sender::task);
      if (!message) {
        channel.fail("protocol violation: " + message.error().message);
        break;
      }
      auto next = monitor_.on_message(task, *message, now);
      if (!next.events.empty() || next.broadcast) decision = std::move(next);
      if (const Exit* exit = std::get_if<Exit>(&*message)) log::info("{} exited with {}{}{}", task.text(), describe_status(exit->status), exit->detail.empty() ? "" : ": ", exit->detail);
    }
    return decision;
  }

  // After anything happened on a connection: noted for burial when broken, else watched for
  // what it waits for.
  void look_after(std::uint64_t key, LinkedTask& linked) {
    if (linked.channel.broken()) return broken_.push_back(key);
    if (linked.channel.carried()) return;  // its relay's connection is watched
    const short wanted = linked.channel.events();
    auto [watched, added] = watched_.try_emplace(key, wanted);
    if (!added && watched->second == wanted) return;
    watched->second = wanted;
    events_.watch(linked.channel.fd(), key, wanted);
  }

  // Broken connections leave; the monitor hears why (a lost task may decide the job, whose
  // broadcast may break more: bounded, as each round removes one).
  void bury(Instant now, std::vector<JobEvent>& events) {
    while (!broken_.empty()) {
      const std::uint64_t key = broken_.back();
      broken_.pop_back();
      auto it = tasks_.find(key);
      if (it == tasks_.end()) continue;
      const JobMember task = it->second.task;
      const std::string why = it->second.channel.problem();
      if (Carrier* carrier = it->second.channel.carrier()) carrier->carried.erase(it->second.channel.carried_id());
      tasks_.erase(it);
      watched_.erase(key);
      apply(monitor_.on_closed(task, why, now), events);
    }
  }

  // Encoded once, the same bytes to every task.
  void broadcast(const Message& message) {
    Fanout fanout(encoded(message));
    for (auto& [key, linked] : tasks_) fanout.to(linked.channel);
    fanout.send();
    for (auto& [key, linked] : tasks_) look_after(key, linked);
  }

  void apply(JobDecision decision, std::vector<JobEvent>& events) {
    events.insert(events.end(), decision.events.begin(), decision.events.end());
    if (!decision.broadcast) return;
    broadcast(*decision.broadcast);
    // A task that stops before us connects again; the fresh barrier will listen, this one refuses.
    if (std::holds_alternative<Restart>(*decision.broadcast)) listener_.reset();
  }

  // The job has started: a new hello is refused at once, with no state kept for it. A few per
  // turn, so that a flood of connections waits in the listen queue and never holds up a
  // heartbeat; the log gets a line per interval, with the count.
  void refuse_latecomers(Instant now) {
    for (std::size_t taken = 0; taken < latecomers_per_turn; ++taken) {
      auto accepted = accept_one(listener_.fd(), "control channel");
      if (!accepted) return;
      MessageConnection channel(std::move(accepted.socket), accepted.peer, max_task_message, now);
      channel.send(Refused{"job already started"});
      channel.shutdown_write();
      if (auto line = latecomers_.note("a connection from " + accepted.peer + ": job already started", now)) {
        log::info("control channel: {}", *line);
      }
    }
  }

  static constexpr std::size_t latecomers_per_turn = 32;

  std::chrono::milliseconds heartbeat_every_;
  std::chrono::milliseconds silent_after_;
  std::map<std::uint64_t, std::shared_ptr<Carrier>> carriers_;  // the relays' own connections, by their keys
  Socket listener_;
  EventSet events_;
  std::map<std::uint64_t, LinkedTask> tasks_;
  std::map<std::uint64_t, short> watched_;  // the events the event set has for each task
  std::vector<std::uint64_t> broken_;       // to be buried at the end of process()
  JobMonitor monitor_;
  Instant next_heartbeat_;
  std::vector<JobEvent> own_restart_;  // decided on our own command's failure, for the next process()
  RefusalTally latecomers_;            // connections refused after the start, for the log
};

// A task's side after the start: heartbeats to the coordinator, its done/stop in, our exit out.
class TaskLink final : public JobLink {
 public:
  TaskLink(StartInfo info, const JobSettings& settings, std::optional<MessageConnection> channel, Instant now)
      : JobLink(std::move(info)),
        heartbeat_every_(settings.heartbeat_every),
        settings_(settings),
        channel_(std::move(channel)),
        watch_(settings.coordinator, channel_.has_value(), settings.peer_silent_after, now),
        next_heartbeat_(now + settings.heartbeat_every) {}

  void add_poll_fds(std::vector<pollfd>& fds) const override {
    if (channel_) fds.push_back({channel_->fd(), channel_->events(), 0});
  }

  Instant next_wakeup() const override { return channel_ ? std::min(watch_.next_deadline(), next_heartbeat_) : Instant::max(); }

  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) override {
    if (!channel_) return {};
    std::vector<JobEvent> events;
    short revents = revents_of(fds, channel_->fd());
    if (revents & POLLOUT) channel_->flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) channel_->receive(now);
    while (auto line = channel_->next_line()) {
      auto message = parse_message(*line, Sender::coordinator);
      if (!message) {
        channel_->fail("protocol violation: " + message.error().message);
        break;
      }
      if (std::holds_alternative<Restart>(*message) && !may_restart()) {
        channel_->fail("protocol violation: a restart in a job with no restart left");
        break;
      }
      if (auto named = task_named(*message); named && !in_cluster(settings_, *named)) {
        channel_->fail("protocol violation: a " + std::string(message_type(*message)) + " for " + named->text() +
                       ", not a task of this job");
        break;
      }
      if (auto event = watch_.on_message(*message, now)) events.push_back(*event);
    }
    if (channel_->broken()) {
      if (auto event = watch_.on_closed(channel_->problem())) events.push_back(*event);
      channel_.reset();
      return events;
    }
    if (auto event = watch_.on_tick(now)) events.push_back(*event);
    if (now >= next_heartbeat_) {
      channel_->send(Ping{});
      next_heartbeat_ = now + heartbeat_every_;
    }
    return events;
  }

  void report_exit(int status, const std::string& detail, bool) override {
    if (channel_) channel_->send(Exit{status, detail});
  }

  void report_stop_signal(int signal_number) override {
    if (channel_ && start_info_.stop_together && !watch_.decided()) channel_->send(Preempt{settings_.self, signal_number});
  }

  // A task done early waits for the coordinator's verdict on the job (done, or a stop).
  bool awaits_other_tasks() const override { return channel_.has_value() && !watch_.decided(); }

  void finish(std::chrono::milliseconds at_most) override {
    if (!channel_) return;
    deliver({&*channel_}, SteadyClock::now() + at_most);
    channel_->shutdown_write();
    channel_.reset();
  }

 private:
  std::chrono::milliseconds heartbeat_every_;
  JobSettings settings_;  // a copy: the link outlives join_job's argument
  std::optional<MessageConnection> channel_;
  CoordinatorWatch watch_;
  Instant next_heartbeat_;
};

// From the start until the supervisor first uses the link: a thread of its own runs it, so that
// the work between (TF_CONFIG and startup.json for a large job, a slow log volume, a CPU shared
// with many relays) never leaves the job without this task's heartbeats and answers. What it
// decided waits for the supervisor's first process(); any use takes the link back first.
class PumpedLink final : public JobLink {
 public:
  explicit PumpedLink(std::unique_ptr<JobLink> link) : JobLink(link->start_info()), link_(std::move(link)) {}
  ~PumpedLink() override { take_back(); }

  Result<void> start() {
    if (!wake_) return errno_error(exit_code::resources, "the control channel: eventfd", errno);
    auto thread = start_thread_without_signals([this] { pump(); }, "the control channel");
    if (!thread) return std::unexpected(thread.error());
    thread_ = std::move(*thread);
    return {};
  }

  void add_poll_fds(std::vector<pollfd>& fds) const override {
    take_back();
    link_->add_poll_fds(fds);
  }
  Instant next_wakeup() const override {
    take_back();
    return held_.empty() ? link_->next_wakeup() : SteadyClock::now();
  }
  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) override {
    take_back();
    std::vector<JobEvent> events = std::exchange(held_, {});
    for (JobEvent& event : link_->process(fds, now)) events.push_back(std::move(event));
    return events;
  }
  void report_exit(int status, const std::string& detail, bool rejoins) override {
    take_back();
    link_->report_exit(status, detail, rejoins);
  }
  bool awaits_other_tasks() const override {
    take_back();
    return link_->awaits_other_tasks();
  }
  void report_stop_signal(int signal_number) override {
    take_back();
    link_->report_stop_signal(signal_number);
  }
  void finish(std::chrono::milliseconds at_most) override {
    take_back();
    link_->finish(at_most);
  }

 private:
  void pump() {
    std::vector<pollfd> fds;
    while (true) {
      fds.assign(1, pollfd{wake_.get(), POLLIN, 0});
      link_->add_poll_fds(fds);
      if (auto polled = poll_until(fds, link_->next_wakeup(), "the control channel"); !polled) {
        log::warn("{}; the link waits for the supervisor", polled.error().message);
        return;
      }
      if (fds.front().revents & POLLIN) return;
      for (JobEvent& event : link_->process(fds, SteadyClock::now())) held_.push_back(std::move(event));
    }
  }

  // Ends the thread (once): from here the caller's thread alone uses the link.
  void take_back() const {
    if (!thread_.joinable()) return;
    const std::uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0) log::debug("the control channel: {}", errno_text("eventfd", errno));
    thread_.join();
  }

  std::unique_ptr<JobLink> link_;
  UniqueFd wake_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::vector<JobEvent> held_;  // what the thread's turns returned, for the first process()
  mutable std::thread thread_;
};

Result<std::unique_ptr<JobLink>> kept_alive_until_used(std::unique_ptr<JobLink> link) {
  auto pumped = std::make_unique<PumpedLink>(std::move(link));
  if (auto started = pumped->start(); !started) return std::unexpected(started.error());
  return std::unique_ptr<JobLink>(std::move(pumped));
}

}  // namespace

Result<std::unique_ptr<JobLink>> make_coordinator_link(StartInfo info, const JobSettings& settings, Socket listener, EventSet events,
                                                       std::map<std::uint64_t, LinkedTask> tasks,
                                                       const std::vector<JobMonitor::Watched>& watched,
                                                       std::map<std::uint64_t, std::shared_ptr<Carrier>> carriers, Instant now) {
  return kept_alive_until_used(std::make_unique<CoordinatorLink>(std::move(info), settings, std::move(listener), std::move(events),
                                                                std::move(tasks), watched, std::move(carriers), now));
}

Result<std::unique_ptr<JobLink>> make_task_link(StartInfo info, const JobSettings& settings, std::optional<MessageConnection> channel,
                                                Instant now) {
  return kept_alive_until_used(std::make_unique<TaskLink>(std::move(info), settings, std::move(channel), now));
}

}  // namespace tfboot
