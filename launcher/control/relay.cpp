// A relay of the start tree: its group's connections carried to the coordinator on one of its own.
#include "control/relay.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "base/socket.h"
#include "base/text.h"
#include "base/threads.h"
#include "control/auth.h"
#include "control/socket.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view ping_line = R"({"type":"ping"})";

class RelayThread final : public Relay {
 public:
  RelayThread(const JobSettings& settings, Hello own, Socket listener)
      : settings_(settings),
        own_(std::move(own)),
        listener_(std::move(listener)),
        backoff_(100ms, 2s, std::hash<std::string>{}(own_.instance) ^ 0x5eed) {
    own_.relay = true;
    own_.fingerprint = {};  // the relay's own connection carries no environment of its own
    own_.preflight.reset();
    own_.network_port.reset();
  }

  Result<void> start() {
    auto thread = start_thread_without_signals([this] { run(); }, "relay");
    if (!thread) return std::unexpected(thread.error());
    thread_ = std::move(*thread);
    return {};
  }

  ~RelayThread() override { finish(0ms); }

  void finish(std::chrono::milliseconds at_most) override {
    std::lock_guard lock(finishing_);
    if (!thread_.joinable()) return;
    finish_until_ = SteadyClock::now() + at_most;
    stopping_ = true;
    const std::uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0) log::debug("relay: {}", errno_text("eventfd", errno));
    thread_.join();
  }

 private:
  enum class Phase { idle, connecting, greeting, carrying };
  struct Child {
    MessageConnection channel;
    bool closing = false;  // the coordinator is done with it: closed once delivered, or after `linger`
    Instant closing_since{};
  };

  void run() {
    log::info("relay: carrying this group's tasks to the coordinator {} (listening on port {})", settings_.coordinator.text(),
              settings_.relay_port);
    while (!stopping_) turn(SteadyClock::now());
    // Finishing: what the coordinator still says (the start, before it closes this connection) is
    // passed on, until it closes or `at_most` passed.
    while (upstream_ && phase_ == Phase::carrying && SteadyClock::now() < finish_until_) turn(SteadyClock::now());
    std::vector<MessageConnection*> channels;
    for (auto& [id, child] : children_) channels.push_back(&child.channel);
    deliver(channels, std::max(finish_until_, SteadyClock::now() + (finish_until_ > Instant{} ? linger : 0s)));
    children_.clear();
    upstream_.reset();
  }

  void turn(Instant now) {
    timers(now);
    // Not carrying (the coordinator's barrier not open yet, or a restart's): the group's connections
    // wait in the listen queue, each for its challenge, until the coordinator accepts this relay.
    std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}, {listener_.fd(), short(phase_ == Phase::carrying ? POLLIN : 0), 0}};
    if (upstream_) fds.push_back({upstream_->fd(), phase_ == Phase::connecting ? short(POLLOUT) : upstream_->events(), 0});
    std::vector<std::uint64_t> order;
    for (auto& [id, child] : children_) {
      fds.push_back({child.channel.fd(), child.channel.events(), 0});
      order.push_back(id);
    }
    if (auto polled = poll_until(fds, next_timer(now), "relay"); !polled) {
      log::warn("{}", polled.error().message);
      std::this_thread::sleep_for(100ms);
      return;
    }
    now = SteadyClock::now();
    if (fds[0].revents) {
      std::uint64_t rung = 0;
      if (::read(wake_.get(), &rung, sizeof rung) < 0) log::debug("relay: {}", errno_text("eventfd", errno));
    }
    if (fds[1].revents) accept_children(now);
    std::size_t next = 2;
    if (upstream_ && next < fds.size() && fds[next].fd == upstream_->fd()) on_upstream(fds[next++].revents, now);
    for (std::size_t i = 0; i < order.size() && next + i < fds.size(); ++i) {
      if (fds[next + i].revents) on_child(order[i], fds[next + i].revents, now);
    }
  }

  Instant next_timer(Instant now) const {
    Instant next = now + 250ms;  // the sweep of silent and closing children
    if (stopping_) next = std::min(next, finish_until_);
    if (phase_ == Phase::idle) next = std::min(next, next_attempt_);
    if (phase_ == Phase::connecting || phase_ == Phase::greeting) next = std::min(next, phase_deadline_);
    if (phase_ == Phase::carrying) next = std::min(next, next_beat_);
    return next;
  }

  void timers(Instant now) {
    if (phase_ == Phase::idle && now >= next_attempt_) connect(now);
    if ((phase_ == Phase::connecting || phase_ == Phase::greeting) && now >= phase_deadline_) {
      drop_upstream("no answer from " + upstream_->peer() + " within " + seconds_text(settings_.hello_timeout), now);
    }
    if (phase_ == Phase::carrying && now - upstream_->last_heard() > settings_.peer_silent_after) {
      drop_upstream("the coordinator at " + upstream_->peer() + " was silent for " + seconds_text(now - upstream_->last_heard()), now);
    }
    if (phase_ == Phase::carrying && now >= next_beat_) {
      upstream_->send(Ping{});
      send_pings();
      next_beat_ = now + settings_.heartbeat_every;
    }
    for (auto it = children_.begin(); it != children_.end();) {
      auto current = it++;
      Child& child = current->second;
      if (child.closing) {
        child.channel.flush();
        if (!child.channel.has_output()) child.channel.shutdown_write();
        if (now - child.closing_since > linger) child.channel.fail("closed");
      } else if (now - child.channel.last_heard() > settings_.peer_silent_after) {
        child.channel.fail("silent for " + seconds_text(now - child.channel.last_heard()) + " at its relay " + settings_.self.text());
      }
      settle(current);
    }
  }

  // The tasks heard since the last beat, in one via: the coordinator counts each as heard.
  void send_pings() {
    if (pinged_.empty() || !upstream_) return;
    upstream_->send(std::make_shared<const std::string>(encode_frame(RelayVia{std::move(pinged_)})));
    upstream_->send(pinged_line_);
    pinged_.clear();
  }

  void connect(Instant now) {
    auto addresses = settings_.coordinator_addresses ? settings_.coordinator_addresses()
                                                     : make_error(exit_code::usage, "no way to find the coordinator's address");
    if (!addresses || addresses->empty()) {
      return retry_later("the coordinator has no address yet: " + (addresses ? std::string("none") : addresses.error().message), now);
    }
    const std::string& address = (*addresses)[attempts_++ % addresses->size()];
    auto socket = start_connect(address, settings_.port);
    if (!socket) return retry_later(join_host_port(address, settings_.port) + ": " + socket.error().message, now);
    upstream_.emplace(std::move(*socket), join_host_port(address, settings_.port), max_coordinator_message, now);
    phase_ = Phase::connecting;
    phase_deadline_ = now + settings_.hello_timeout;
  }

  void retry_later(const std::string& why, Instant now) {
    if (why != last_problem_) log::debug("relay: {}", why);
    last_problem_ = why;
    phase_ = Phase::idle;
    next_attempt_ = now + backoff_.delay_after(++failures_);
  }

  // The coordinator is gone (a restart in place closes every connection, a stop ends the job): the
  // group's connections end too, gently, and the relay connects again for the next barrier.
  void drop_upstream(const std::string& why, Instant now) {
    if (phase_ == Phase::carrying) log::info("relay: the coordinator's connection ended ({}); closing this group's {}", why, counted(children_.size(), "connection"));
    for (auto& [id, child] : children_) begin_closing(child, now);
    upstream_.reset();
    via_.reset();
    pinged_.clear();
    retry_later(why, now);
  }

  void begin_closing(Child& child, Instant now) {
    if (child.closing) return;
    child.closing = true;
    child.closing_since = now;
    child.channel.flush();
    if (!child.channel.has_output()) child.channel.shutdown_write();
  }

  void accept_children(Instant now) {
    for (int taken = 0; taken < 32 && phase_ == Phase::carrying; ++taken) {
      auto accepted = accept_one(listener_.fd(), "relay");
      if (!accepted) return;
      const std::uint64_t id = next_id_++;
      children_.emplace(id, Child{MessageConnection(std::move(accepted.socket), accepted.peer, max_task_message, now)});
      upstream_->send(std::make_shared<const std::string>(encode_frame(RelayOpen{id, address_of_peer(accepted.peer), accepted.peer})));
    }
  }

  void on_child(std::uint64_t id, short revents, Instant now) {
    auto it = children_.find(id);
    if (it == children_.end()) return;
    MessageConnection& channel = it->second.channel;
    if (revents & POLLOUT) channel.flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) channel.receive(now);
    while (auto line = channel.next_line()) {
      if (it->second.closing || phase_ != Phase::carrying) continue;
      if (*line == ping_line) {
        pinged_.push_back(id);
        if (pinged_.size() >= max_via_ids) send_pings();
        continue;
      }
      upstream_->send(std::make_shared<const std::string>(encode_frame(RelayVia{{id}})));
      *line += '\n';
      upstream_->send(std::make_shared<const std::string>(std::move(*line)));
    }
    settle(it);
  }

  // A broken connection leaves, and the coordinator hears why (unless it closed it itself).
  void settle(std::map<std::uint64_t, Child>::iterator it) {
    if (!it->second.channel.broken()) return;
    if (!it->second.closing && phase_ == Phase::carrying) {
      upstream_->send(std::make_shared<const std::string>(encode_frame(RelayGone{it->first, it->second.channel.problem()})));
    }
    children_.erase(it);
  }

  void on_upstream(short revents, Instant now) {
    if (phase_ == Phase::connecting) {
      if (auto connected = connect_outcome(upstream_->fd()); !connected) return drop_upstream(upstream_->peer() + ": " + connected.error().message, now);
      phase_ = Phase::greeting;
      return;
    }
    if (revents & POLLOUT) upstream_->flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) upstream_->receive(now);
    while (upstream_) {
      auto line = upstream_->next_line();
      if (!line) break;
      if (via_) {
        *line += '\n';
        const EncodedMessage message = std::make_shared<const std::string>(std::move(*line));
        for (std::uint64_t id : via_->ids) {
          if (auto child = children_.find(id); child != children_.end() && !child->second.closing) child->second.channel.send(message);
        }
        via_.reset();
        continue;
      }
      auto frame = parse_frame(*line);
      if (!frame) return drop_upstream(upstream_->peer() + ": protocol violation: " + frame.error().message, now);
      if (*frame) {
        on_frame(**frame, now);
        continue;
      }
      auto message = parse_message(*line, Sender::coordinator);
      if (!message) return drop_upstream(upstream_->peer() + ": protocol violation: " + message.error().message, now);
      on_message(*message, now);
    }
    if (upstream_ && upstream_->broken()) drop_upstream(upstream_->peer() + ": " + upstream_->problem(), now);
    for (auto it = children_.begin(); it != children_.end();) settle(it++);
  }

  void on_frame(const RelayFrame& frame, Instant now) {
    if (phase_ != Phase::carrying) return upstream_->fail("protocol violation: a relay frame before the relay was accepted");
    if (const RelayVia* via = std::get_if<RelayVia>(&frame)) {
      via_ = *via;
    } else if (const RelayClose* close = std::get_if<RelayClose>(&frame)) {
      if (auto it = children_.find(close->id); it != children_.end()) begin_closing(it->second, now);
    } else {
      upstream_->fail("protocol violation: a relay frame only a relay sends");
    }
  }

  void on_message(const Message& message, Instant now) {
    if (const Challenge* challenge = std::get_if<Challenge>(&message); challenge && phase_ == Phase::greeting && challenge_.nonce.empty()) {
      if (auto same = check_coordinator_protocol(*challenge, own_, "the coordinator at " + upstream_->peer()); !same) {
        return upstream_->fail(same.error().message);
      }
      if (auto fine = check_challenge(*challenge, settings_.job_id, settings_.secret.has_value()); !fine) return upstream_->fail(fine.error().message);
      challenge_ = *challenge;
      own_.nonce.clear();
      own_.proof.clear();
      if (settings_.secret) {
        auto nonce = make_nonce();
        if (!nonce) return upstream_->fail(nonce.error().message);
        own_.nonce = *nonce;
        own_.proof = task_proof(*settings_.secret, challenge_, own_);
      }
      own_.started_ms_ago = started_ms_ago(settings_.started, now);
      upstream_->send(own_);
    } else if (const Accepted* accepted = std::get_if<Accepted>(&message); accepted && phase_ == Phase::greeting && !challenge_.nonce.empty()) {
      if (auto fine = check_accepted(*accepted, challenge_, own_, settings_.secret); !fine) return upstream_->fail(fine.error().message);
      phase_ = Phase::carrying;
      failures_ = 0;
      challenge_ = Challenge{};
      next_beat_ = now + settings_.heartbeat_every;
      log::info("relay: the coordinator {} at {} accepted this relay", settings_.coordinator.text(), upstream_->peer());
    } else if (const Refused* refused = std::get_if<Refused>(&message)) {
      if (refused->reason != last_problem_) log::warn("relay: the coordinator at {} refused this relay: {}", upstream_->peer(), refused->reason);
      upstream_->fail("refused: " + refused->reason);
      last_problem_ = "refused: " + refused->reason;
    } else if (!std::holds_alternative<Ping>(message) || phase_ != Phase::carrying) {
      upstream_->fail("protocol violation: an unexpected '" + std::string(message_type(message)) + "' to a relay");
    }
  }

  JobSettings settings_;
  Hello own_;
  Socket listener_;
  UniqueFd wake_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  Backoff backoff_;
  Phase phase_ = Phase::idle;
  std::optional<MessageConnection> upstream_;
  Challenge challenge_;
  std::optional<RelayVia> via_;  // a via from the coordinator, its line not yet read
  std::map<std::uint64_t, Child> children_;
  std::vector<std::uint64_t> pinged_;
  const EncodedMessage pinged_line_ = std::make_shared<const std::string>(std::string(ping_line) + "\n");
  std::uint64_t next_id_ = 1;
  std::size_t attempts_ = 0;
  int failures_ = 0;
  std::string last_problem_;
  Instant next_attempt_{};
  Instant phase_deadline_{};
  Instant next_beat_{};
  Instant finish_until_{};
  std::atomic<bool> stopping_{false};
  std::mutex finishing_;
  std::thread thread_;  // started once everything above is made
};

std::mutex relay_lock;
std::unique_ptr<Relay>& the_relay() {
  static std::unique_ptr<Relay> relay;
  return relay;
}

}  // namespace

Result<std::unique_ptr<Relay>> start_relay(const JobSettings& settings, const Hello& own, const std::string& listener_address) {
  const std::string what = "the relay's port (--relay-port " + std::to_string(settings.relay_port) + ")";
  auto listener = listener_address.empty() ? listen_on_every_address(settings.relay_port, 1024, what)
                                           : listen_on_address(listener_address, settings.relay_port, 1024, what);
  if (!listener) return std::unexpected(listener.error());
  auto relay = std::make_unique<RelayThread>(settings, own, std::move(*listener));
  if (auto started = relay->start(); !started) return std::unexpected(started.error());
  return std::unique_ptr<Relay>(std::move(relay));
}

void keep_relay(std::unique_ptr<Relay> relay) {
  std::lock_guard lock(relay_lock);
  the_relay() = std::move(relay);
}

bool relay_running() {
  std::lock_guard lock(relay_lock);
  return the_relay() != nullptr;
}

void finish_relay(std::chrono::milliseconds at_most) {
  std::lock_guard lock(relay_lock);
  if (the_relay()) the_relay()->finish(at_most);
}

}  // namespace tfboot
