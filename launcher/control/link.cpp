// The job's control channel after the start: CoordinatorLink and TaskLink.
#include "control/link.h"

#include <algorithm>

#include "base/log.h"

namespace tfboot {
namespace {

// The coordinator's side after the start: heartbeats to every supervised task, their exits and
// silences into the JobMonitor, its decisions out to every task.
class CoordinatorLink final : public JobLink {
 public:
  CoordinatorLink(StartInfo info, const JobSettings& settings, Socket listener, std::map<JobMember, MessageConnection> tasks,
                  const std::vector<JobMonitor::Watched>& watched, Instant now)
      : JobLink(std::move(info)),
        heartbeat_every_(settings.heartbeat_every),
        listener_(std::move(listener)),
        tasks_(std::move(tasks)),
        monitor_(settings.self, watched, settings.peer_silent_after, now, settings.done_when_every_task_is),
        next_heartbeat_(now + settings.heartbeat_every) {}

  void add_poll_fds(std::vector<pollfd>& fds) const override {
    if (listener_) fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& [task, channel] : tasks_) fds.push_back({channel.fd(), channel.events(), 0});
  }

  Instant next_wakeup() const override { return tasks_.empty() ? Instant::max() : std::min(monitor_.next_deadline(), next_heartbeat_); }

  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) override {
    if (listener_ && revents_of(fds, listener_.fd()) != 0) refuse_latecomers();
    std::vector<JobEvent> events;
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      auto& [task, channel] = *it;
      short revents = revents_of(fds, channel.fd());
      if (revents & POLLOUT) channel.flush();
      if (revents & (POLLIN | POLLHUP | POLLERR)) channel.receive(now);
      apply(read_messages(task, channel, now), events);
      if (!channel.broken()) {
        ++it;
        continue;
      }
      apply(monitor_.on_closed(task, channel.problem(), now), events);
      it = tasks_.erase(it);
    }
    apply(monitor_.on_tick(now), events);
    if (now >= next_heartbeat_) {
      for (auto& [task, channel] : tasks_) channel.send(Ping{});
      next_heartbeat_ = now + heartbeat_every_;
    }
    return events;
  }

  void report_exit(int status, const std::string& detail) override {
    std::vector<JobEvent> ignored;  // our own command's end: the supervisor knows it already
    apply(monitor_.on_own_exit(status, detail), ignored);
  }

  bool awaits_other_tasks() const override { return !monitor_.decided(); }

  void finish(std::chrono::milliseconds at_most) override {
    listener_.reset();
    std::vector<MessageConnection*> channels;
    for (auto& [task, channel] : tasks_) channels.push_back(&channel);
    deliver(channels, SteadyClock::now() + at_most);
    for (MessageConnection* channel : channels) channel->shutdown_write();
    tasks_.clear();
  }

 private:
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

  void apply(JobDecision decision, std::vector<JobEvent>& events) {
    events.insert(events.end(), decision.events.begin(), decision.events.end());
    if (!decision.broadcast) return;
    for (auto& [task, channel] : tasks_) channel.send(*decision.broadcast);
  }

  // The job has started: a new hello is refused at once, with no state kept for it.
  void refuse_latecomers() {
    while (auto accepted = accept_one(listener_.fd())) {
      MessageConnection channel(std::move(accepted->first), accepted->second, max_task_message, SteadyClock::now());
      channel.send(Refused{"job already started"});
      channel.shutdown_write();
      log::info("control channel: refused a connection from {}: job already started", accepted->second);
    }
  }

  std::chrono::milliseconds heartbeat_every_;
  Socket listener_;
  std::map<JobMember, MessageConnection> tasks_;
  JobMonitor monitor_;
  Instant next_heartbeat_;
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
      if (const Stop* stop = std::get_if<Stop>(&*message); stop && !in_cluster(settings_, stop->task)) {
        channel_->fail("protocol violation: a stop for " + stop->task.text() + ", not a task of this job");
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

  void report_exit(int status, const std::string& detail) override {
    if (channel_) channel_->send(Exit{status, detail});
  }

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

}  // namespace

std::unique_ptr<JobLink> make_coordinator_link(StartInfo info, const JobSettings& settings, Socket listener,
                                               std::map<JobMember, MessageConnection> tasks,
                                               const std::vector<JobMonitor::Watched>& watched, Instant now) {
  return std::make_unique<CoordinatorLink>(std::move(info), settings, std::move(listener), std::move(tasks), watched, now);
}

std::unique_ptr<JobLink> make_task_link(StartInfo info, const JobSettings& settings, std::optional<MessageConnection> channel,
                                        Instant now) {
  return std::make_unique<TaskLink>(std::move(info), settings, std::move(channel), now);
}

}  // namespace tfboot
