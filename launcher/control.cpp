// The job's control channel over TCP: sockets, poll(2) and timers around control_protocol's
// decisions. Every descriptor is non-blocking and CLOEXEC; every system call is checked.
#include "control.h"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <utility>

#include "control_auth.h"
#include "log.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// A peer that does not read what we send is cut off before we hold more than this for it.
constexpr std::size_t max_queued_output = 2 * max_coordinator_message;
// A refused or finished peer gets this long to read our last message before the close.
constexpr auto linger = 1s;

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string seconds_text(SteadyClock::duration duration) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(duration).count());
}

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Socket() { reset(); }
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // On Linux the descriptor is gone even when close() reports an error: nothing to retry.
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string address_text(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    if (!::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host)) return "?";
    port = ntohs(v4.sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  port = ntohs(v6.sin6_port);
  // The dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; shown as the IPv4 they are.
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    if (!::inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], host, sizeof host)) return "?";
    return std::string(host) + ":" + std::to_string(port);
  }
  if (!::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host)) return "?";
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// One connection: lines in through a bounded FrameReader, messages out through a queue that is
// written whenever the socket takes more.
class Channel {
 public:
  Channel(Socket socket, std::string peer, std::size_t max_line, Instant now)
      : socket_(std::move(socket)), peer_(std::move(peer)), reader_(max_line), last_heard_(now) {}

  int fd() const { return socket_.fd(); }
  const std::string& peer() const { return peer_; }
  Instant last_heard() const { return last_heard_; }
  bool broken() const { return problem_.has_value(); }
  const std::string& problem() const { return *problem_; }
  bool has_output() const { return sent_ < output_.size(); }
  short events() const { return static_cast<short>(POLLIN | (has_output() ? POLLOUT : 0)); }

  void send(const Message& message) {
    if (broken()) return;
    output_ += encode(message);
    if (output_.size() - sent_ > max_queued_output) return fail("the peer does not read what we send");
    flush();
  }

  void flush() {
    while (has_output() && !broken()) {
      ssize_t put = ::send(socket_.fd(), output_.data() + sent_, output_.size() - sent_, MSG_NOSIGNAL);
      if (put >= 0) sent_ += static_cast<std::size_t>(put);
      else if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      else if (errno != EINTR) fail(system_error("send"));
    }
    if (!has_output()) {
      output_.clear();
      sent_ = 0;
    }
  }

  // Reads what is there. Lines read stay available through next_line() after the peer closed
  // or failed, so that a "done" just before a close is not lost.
  void receive(Instant now) {
    char buffer[65536];
    for (int round = 0; round < 16 && !broken(); ++round) {  // bounded, so one peer cannot starve the rest
      ssize_t got = ::recv(socket_.fd(), buffer, sizeof buffer, 0);
      if (got > 0) {
        last_heard_ = now;
        if (auto added = reader_.append({buffer, static_cast<std::size_t>(got)}); !added) fail(added.error().message);
      } else if (got == 0) {
        fail("connection closed by the peer");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else if (errno != EINTR) {
        fail(system_error("receive"));
      }
    }
  }

  std::optional<std::string> next_line() { return reader_.next(); }

  // Our side is done: the peer reads what was sent, then sees the end.
  void shutdown_write() {
    if (::shutdown(socket_.fd(), SHUT_WR) != 0 && errno != ENOTCONN) fail(system_error("shutdown"));
  }

  void fail(std::string problem) {
    if (!problem_) problem_ = std::move(problem);
  }

 private:
  Socket socket_;
  std::string peer_;
  FrameReader reader_;
  std::string output_;
  std::size_t sent_ = 0;
  std::optional<std::string> problem_;
  Instant last_heard_;
};

bool in_cluster(const JobSettings& settings, const JobMember& task) {
  return std::find(settings.tasks.begin(), settings.tasks.end(), task) != settings.tasks.end();
}

// poll(2) until `until`; EINTR is a wake-up with nothing ready.
Result<void> poll_until(std::vector<pollfd>& fds, Instant until) {
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
  int timeout = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(wait.count(), 0, 60'000));
  if (::poll(fds.data(), fds.size(), timeout) >= 0) return {};
  if (errno == EINTR) {
    for (auto& fd : fds) fd.revents = 0;
    return {};
  }
  return make_error(exit_code::resources, system_error("control channel: poll"));
}

short revents_of(const std::vector<pollfd>& fds, int fd) {
  for (const auto& entry : fds) {
    if (entry.fd == fd) return entry.revents;
  }
  return 0;
}

// Bytes sent but not yet acknowledged by the peer; 0 when the kernel cannot tell.
int unacknowledged(int fd) {
  int bytes = 0;
  return ::ioctl(fd, SIOCOUTQ, &bytes) == 0 ? bytes : 0;
}

// Until everything queued on `channels` has been acknowledged by the peers, or `until`: a close
// with unread input sends a reset, and a reset throws away what the peer has not yet received.
// What arrives meanwhile stays buffered in the channels for whoever reads them next.
void deliver(const std::vector<Channel*>& channels, Instant until) {
  while (SteadyClock::now() < until) {
    std::vector<pollfd> fds;
    for (Channel* channel : channels) {
      channel->flush();
      if (!channel->broken() && (channel->has_output() || unacknowledged(channel->fd()) > 0)) {
        fds.push_back({channel->fd(), channel->events(), 0});
      }
    }
    if (fds.empty() || !poll_until(fds, std::min(until, SteadyClock::now() + 20ms))) return;
    for (Channel* channel : channels) {
      if (revents_of(fds, channel->fd()) & (POLLIN | POLLHUP | POLLERR)) channel->receive(SteadyClock::now());
    }
  }
}

Result<Socket> listen_on(int family, int port) {
  Socket socket(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) return make_error(exit_code::resources, system_error("--control-port " + std::to_string(port) + ": socket"));
  int on = 1;
  int off = 0;
  // A restarted coordinator must get its port back while old connections sit in TIME_WAIT.
  if (::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      (family == AF_INET6 && ::setsockopt(socket.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0)) {
    return make_error(exit_code::resources, system_error("--control-port " + std::to_string(port) + ": setsockopt"));
  }
  sockaddr_storage address{};
  socklen_t size = 0;
  if (family == AF_INET6) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
    v6 = sockaddr_in6{.sin6_family = AF_INET6, .sin6_port = htons(static_cast<std::uint16_t>(port)), .sin6_addr = in6addr_any};
    size = sizeof v6;
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(address);
    v4 = sockaddr_in{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_ANY)}};
    size = sizeof v4;
  }
  if (::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(socket.fd(), 128) != 0) {
    return make_error(exit_code::resources, system_error("--control-port " + std::to_string(port) + ": cannot listen"));
  }
  return socket;
}

// Dual-stack where the host has IPv6, so that tasks reach us over either family; IPv4 otherwise.
Result<Socket> open_listener(int port) {
  auto socket = listen_on(AF_INET6, port);
  if (socket) return socket;
  if (auto v4 = listen_on(AF_INET, port)) return v4;
  return socket;  // the first error says more than the fallback's
}

// Accepts one pending connection; nullopt when none is pending.
std::optional<std::pair<Socket, std::string>> accept_one(int listener) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&address), &size, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    // EAGAIN: none left. A connection that died in the backlog or a lack of descriptors is
    // logged and skipped: the listener stays, and the peer retries.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) log::debug("control channel: {}", system_error("accept"));
    return std::nullopt;
  }
  return std::pair{Socket(fd), address_text(address)};
}

}  // namespace

// --- After the start

namespace {

// The coordinator's side after the start: heartbeats to every supervised task, their exits and
// silences into the JobMonitor, its decisions out to every task.
class CoordinatorLink final : public JobLink {
 public:
  CoordinatorLink(StartInfo info, const JobSettings& settings, Socket listener, std::map<JobMember, Channel> tasks,
                  const std::vector<JobMonitor::Watched>& watched, Instant now)
      : JobLink(std::move(info)),
        heartbeat_every_(settings.heartbeat_every),
        listener_(std::move(listener)),
        tasks_(std::move(tasks)),
        monitor_(settings.self, watched, settings.peer_silent_after, now),
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

  void report_exit(int status) override {
    std::vector<JobEvent> ignored;  // our own command's end: the supervisor knows it already
    apply(monitor_.on_own_exit(status), ignored);
  }

  void finish(std::chrono::milliseconds at_most) override {
    listener_.reset();
    std::vector<Channel*> channels;
    for (auto& [task, channel] : tasks_) channels.push_back(&channel);
    deliver(channels, SteadyClock::now() + at_most);
    for (Channel* channel : channels) channel->shutdown_write();
    tasks_.clear();
  }

 private:
  JobDecision read_messages(const JobMember& task, Channel& channel, Instant now) {
    JobDecision decision;
    while (auto line = channel.next_line()) {
      auto message = parse_message(*line, Sender::task);
      if (!message) {
        channel.fail("protocol violation: " + message.error().message);
        break;
      }
      auto next = monitor_.on_message(task, *message, now);
      if (!next.events.empty() || next.broadcast) decision = std::move(next);
      if (const Exit* exit = std::get_if<Exit>(&*message)) log::info("{} exited with {}", task.text(), describe_status(exit->status));
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
      Channel channel(std::move(accepted->first), accepted->second, max_task_message, SteadyClock::now());
      channel.send(Refused{"job already started"});
      channel.shutdown_write();
      log::info("control channel: refused a connection from {}: job already started", accepted->second);
    }
  }

  std::chrono::milliseconds heartbeat_every_;
  Socket listener_;
  std::map<JobMember, Channel> tasks_;
  JobMonitor monitor_;
  Instant next_heartbeat_;
};

// A task's side after the start: heartbeats to the coordinator, its done/stop in, our exit out.
class TaskLink final : public JobLink {
 public:
  TaskLink(StartInfo info, const JobSettings& settings, std::optional<Channel> channel, Instant now)
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

  void report_exit(int status) override {
    if (channel_) channel_->send(Exit{status});
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
  std::optional<Channel> channel_;
  CoordinatorWatch watch_;
  Instant next_heartbeat_;
};

}  // namespace

// --- The start barrier, coordinator side

namespace {

// A connection at the coordinator before the start.
struct Candidate {
  Channel channel;
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
    log::info("start barrier: waiting for {} tasks on control port {}", settings_.tasks.size() - 1, settings_.port);
    while (!barrier_.complete()) {
      Instant now = SteadyClock::now();
      if (now >= deadline_) return give_up();
      housekeeping(now);
      if (auto polled = poll_once(); !polled) return std::unexpected(polled.error());
    }
    return start();
  }

 private:
  Result<void> poll_once() {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    Instant until = std::min({deadline_, next_heartbeat_, next_progress_});
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
      Candidate candidate{Channel(std::move(accepted->first), accepted->second, max_task_message, now), challenge, now};
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

  std::vector<Channel*> present_channels() {
    std::vector<Channel*> channels;
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
    for (Channel* channel : channels) channel->send(Abort{exit_code::start_barrier_incomplete, message});
    deliver(channels, SteadyClock::now() + linger);
    return make_error(exit_code::start_barrier_incomplete, message);
  }

  Result<std::unique_ptr<JobLink>> start();

  const JobSettings& settings_;
  Socket listener_;
  StartBarrier barrier_;
  std::map<ConnectionId, Candidate> connections_;
  ConnectionId next_id_ = 1;  // 0 is the coordinator's own entry in the barrier
  Instant started_;
  Instant deadline_;
  Instant next_heartbeat_;
  Instant next_progress_;
};

void log_differences(const std::vector<std::string>& differences) {
  for (const auto& line : differences) log::warn("environment differs between tasks: {}", line);
}

Result<std::unique_ptr<JobLink>> CoordinatorBarrier::start() {
  auto decision = barrier_.decide(settings_.supervise);
  auto channels = present_channels();
  if (const Abort* abort = std::get_if<Abort>(&decision)) {
    for (Channel* channel : channels) channel->send(*abort);
    deliver(channels, SteadyClock::now() + settings_.peer_silent_after);
    return make_error(abort->code, abort->message);
  }
  const Start& start = std::get<Start>(decision);
  for (Channel* channel : channels) channel->send(start);
  // The start message may be megabytes for a large job; delivered before anyone may close.
  deliver(channels, SteadyClock::now() + settings_.peer_silent_after);
  log_differences(start.environment_differences);
  log::info("start barrier: all {} tasks present; starting", settings_.tasks.size());

  Instant now = SteadyClock::now();
  std::map<JobMember, Channel> tasks;
  std::vector<JobMonitor::Watched> watched;
  for (const auto& present : barrier_.present_tasks()) {
    auto it = connections_.find(present.connection);
    if (!settings_.supervise || !present.supervised || it == connections_.end()) continue;
    watched.push_back({present.task, true});
    tasks.emplace(present.task, std::move(it->second.channel));
  }
  StartInfo info{start.environment_differences, start.members, settings_.supervise};
  Socket listener = settings_.supervise ? std::move(listener_) : Socket();
  return std::make_unique<CoordinatorLink>(std::move(info), settings_, std::move(listener), std::move(tasks), watched, now);
}

}  // namespace

// --- The start barrier, task side

namespace {

// A non-blocking connect to a numeric address; its outcome shows when the socket turns writable.
Result<Socket> start_connect(const std::string& host, int port) {
  sockaddr_storage address{};
  socklen_t size = 0;
  auto& v4 = reinterpret_cast<sockaddr_in&>(address);
  auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
  if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<std::uint16_t>(port));
    size = sizeof v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<std::uint16_t>(port));
    size = sizeof v6;
  } else {
    return make_error(protocol_violation, "'" + host + "' is not a numeric address");
  }
  Socket socket(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) return make_error(protocol_violation, system_error("socket"));
  if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), size) != 0 && errno != EINPROGRESS) {
    return make_error(protocol_violation, system_error("connect"));
  }
  return socket;
}

// The connect's outcome, once the socket is writable.
Result<void> connect_outcome(int fd) {
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return make_error(protocol_violation, system_error("getsockopt"));
  if (error != 0) return make_error(protocol_violation, std::string("connect: ") + std::strerror(error));
  return {};
}

std::string host_port(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

class TaskBarrier {
 public:
  TaskBarrier(const JobSettings& settings, Hello hello, Instant now)
      : settings_(settings),
        hello_(std::move(hello)),
        started_(now),
        deadline_(now + settings.start_timeout),
        next_attempt_(now),
        next_progress_(now + settings.progress_every),
        random_(static_cast<std::uint32_t>(std::hash<std::string>{}(hello_.instance))) {}

  Result<std::unique_ptr<JobLink>> run() {
    log::info("start barrier: joining the coordinator {} on control port {}", settings_.coordinator.text(), settings_.port);
    while (true) {
      Instant now = SteadyClock::now();
      if (now >= effective_deadline()) return give_up();
      timers(now);
      std::vector<pollfd> fds;
      if (channel_) fds.push_back({channel_->fd(), phase_ == Phase::connecting ? short(POLLOUT) : channel_->events(), 0});
      if (auto polled = poll_until(fds, next_timer()); !polled) return std::unexpected(polled.error());
      if (!channel_ || fds[0].revents == 0) continue;
      if (auto outcome = on_ready(fds[0].revents, SteadyClock::now())) return std::move(*outcome);
    }
  }

 private:
  enum class Phase { idle, connecting, greeting, waiting };

  // A task the coordinator accepted waits a little past its own deadline, so that when both
  // deadlines fall together the coordinator's verdict (naming the missing tasks) reaches it.
  Instant effective_deadline() const { return phase_ == Phase::waiting ? deadline_ + linger : deadline_; }

  Instant next_timer() const {
    Instant next = std::min(effective_deadline(), next_progress_);
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
      log::info("start barrier: waiting for the start after {}: {}", seconds_text(now - started_), last_seen_);
      next_progress_ = now + settings_.progress_every;
    }
  }

  void try_connect(Instant now) {
    if (next_address_ >= addresses_.size()) {
      auto addresses = settings_.coordinator_addresses ? settings_.coordinator_addresses()
                                                      : make_error(exit_code::usage, "no way to find the coordinator's address");
      if (!addresses || addresses->empty()) {
        return retry_later("the coordinator " + settings_.coordinator.text() + " has no address yet: " +
                               (addresses ? "none" : addresses.error().message), now);
      }
      addresses_ = std::move(*addresses);
      next_address_ = 0;
    }
    const std::string peer = host_port(addresses_[next_address_++], settings_.port);
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
    auto delay = std::min<std::chrono::milliseconds>(100ms * (1 << std::min(failures_++, 5)), 2s);
    std::uniform_int_distribution<long long> jitter(0, delay.count() / 2);
    next_attempt_ = now + delay / 2 + std::chrono::milliseconds(jitter(random_));
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

  std::optional<Result<std::unique_ptr<JobLink>>> on_message(const Message& message, Instant now);
  void on_challenge(const Challenge& challenge, Instant now);
  void on_accepted(const Accepted& accepted, Instant now);
  Result<std::unique_ptr<JobLink>> on_start(const Start& start, Instant now);

  // Says what it last saw and the last refusal before it.
  Result<std::unique_ptr<JobLink>> give_up() {
    std::string seen = "last: " + last_seen_;
    if (!last_refusal_.empty() && last_refusal_ != last_seen_) seen += "; earlier: " + last_refusal_;
    return make_error(exit_code::start_barrier_incomplete, "start barrier incomplete after " + seconds_text(settings_.start_timeout) +
                                                               ": no start from the coordinator " + settings_.coordinator.text() + "; " + seen);
  }

  const JobSettings& settings_;
  Hello hello_;
  Instant started_;
  Instant deadline_;
  Instant next_attempt_;
  Instant next_progress_;
  Instant next_heartbeat_{};
  Instant phase_deadline_{};
  std::minstd_rand random_;
  Phase phase_ = Phase::idle;
  std::optional<Channel> channel_;
  Challenge challenge_;
  std::vector<std::string> addresses_;
  std::size_t next_address_ = 0;
  int failures_ = 0;
  std::string last_seen_ = "not connected yet";
  std::string last_refusal_;
};

std::optional<Result<std::unique_ptr<JobLink>>> TaskBarrier::on_message(const Message& message, Instant now) {
  const bool proven = phase_ == Phase::waiting;  // only a coordinator that proved the secret is obeyed
  if (const Refused* refusal = std::get_if<Refused>(&message)) {
    refused(channel_->peer() + " refused us: " + refusal->reason, now);
  } else if (const Challenge* challenge = std::get_if<Challenge>(&message); challenge && phase_ == Phase::greeting && challenge_.nonce.empty()) {
    on_challenge(*challenge, now);
  } else if (const Accepted* accepted = std::get_if<Accepted>(&message); accepted && phase_ == Phase::greeting && !challenge_.nonce.empty()) {
    on_accepted(*accepted, now);
  } else if (const Waiting* waiting = std::get_if<Waiting>(&message); waiting && proven) {
    last_seen_ = "connected to " + channel_->peer() + "; " + std::to_string(waiting->progress.present) + "/" +
                 std::to_string(waiting->progress.total) + " tasks present";
  } else if (const Abort* abort = std::get_if<Abort>(&message); abort && proven) {
    return make_error(abort->code, abort->message);
  } else if (const Start* start = std::get_if<Start>(&message); start && proven) {
    auto stranger = std::find_if(start->members.begin(), start->members.end(), [&](const MemberInfo& info) { return !in_cluster(settings_, info.task); });
    if (stranger == start->members.end()) return on_start(*start, now);
    refused(channel_->peer() + ": protocol violation: the start names " + stranger->task.text() + ", not a task of this job", now);
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
  StartInfo info{start.environment_differences, start.members, start.supervised};
  // Kept only when both sides watch the job after the start; otherwise closed here.
  std::optional<Channel> kept;
  if (settings_.supervise && start.supervised) kept = std::move(channel_);
  channel_.reset();
  return std::make_unique<TaskLink>(std::move(info), settings_, std::move(kept), now);
}

}  // namespace

Result<void> check_job_settings(const JobSettings& settings) {
  auto listed = [&](const JobMember& task) { return std::find(settings.tasks.begin(), settings.tasks.end(), task) != settings.tasks.end(); };
  if (settings.port < 1 || settings.port > 65535) return usage_error("--control-port " + std::to_string(settings.port) + " is outside 1..65535");
  if (settings.tasks.size() < 2) return usage_error("the control channel needs a job of more than one task");
  if (!listed(settings.self)) return usage_error("task " + settings.self.text() + " is not in the cluster");
  if (!listed(settings.coordinator)) return usage_error("the coordinator " + settings.coordinator.text() + " is not in the cluster");
  if (settings.job_id.size() != 16) return usage_error("the job id must be 16 hex digits");
  if (settings.start_timeout <= std::chrono::milliseconds::zero()) return usage_error("--start-timeout must be positive");
  if (settings.heartbeat_every <= std::chrono::milliseconds::zero() || settings.peer_silent_after <= settings.heartbeat_every) {
    return usage_error("the control channel's silence limit must be longer than its heartbeat period");
  }
  if (settings.self != settings.coordinator && !settings.coordinator_addresses) {
    return usage_error("a task other than the coordinator needs a way to find the coordinator's address");
  }
  return {};
}

Result<std::unique_ptr<JobLink>> join_job(const JobSettings& settings, const Fingerprint& own) {
  if (auto valid = check_job_settings(settings); !valid) return std::unexpected(valid.error());
  auto instance = make_nonce();
  if (!instance) return std::unexpected(instance.error());
  Hello hello{settings.job_id, settings.self, settings.hostname, instance->substr(0, 16), settings.supervise,
              settings.own_name, settings.own_addresses, own, "", ""};
  // Strings that go on the wire are bounded there; cut here so that our own hello is never refused.
  hello.host = hello.host.substr(0, 253);
  hello.name = hello.name.substr(0, 253);
  if (hello.addresses.size() > 64) hello.addresses.resize(64);
  const Instant now = SteadyClock::now();
  if (settings.self != settings.coordinator) return TaskBarrier(settings, std::move(hello), now).run();
  auto listener = open_listener(settings.port);
  if (!listener) return std::unexpected(listener.error());
  return CoordinatorBarrier(settings, std::move(*listener), hello, now).run();
}

}  // namespace tfboot
