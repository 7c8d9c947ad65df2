// The start barrier, coordinator side: accepts connections, challenges them, feeds their hellos
// and heartbeats to the StartBarrier, and sends its verdict to every task.
#include "control/join_sides.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <system_error>
#include <map>
#include <limits>
#include <set>
#include <tuple>
#include <variant>

#include "base/socket.h"
#include "base/text.h"
#include "control/auth.h"
#include "control/link.h"
#include "control/refusals.h"
#include "control/protocol/tree.h"

namespace tfboot {
namespace {

// A connection at the coordinator before the start.
struct Candidate {
  MessageConnection channel;
  Challenge challenge;
  Instant opened;
  std::optional<JobMember> task;  // once its hello was accepted
  bool refused = false;           // told why; closed once that is delivered or after `linger`
  short watched = 0;              // the events the event set has for it
  std::string source;             // the peer's address without its port
  std::optional<Abort> version_mismatch;  // its hello speaks another protocol than ours
  bool becomes_carrier = false;           // a relay's own connection, proven: a Carrier from now on
};

std::vector<std::vector<std::string>> addresses_of(const std::vector<MemberInfo>& members) {
  std::vector<std::vector<std::string>> addresses;
  addresses.reserve(members.size());
  for (const auto& member : members) addresses.push_back(member.addresses);
  return addresses;
}

// --preflight network at the coordinator: the start decided and held while every task measures its
// links and sends its figures (docs/preflight.md).
struct NetworkMeasurement {
  Start decision;
  std::string session;
  Instant began;
  Instant until;                                  // the figures' deadline
  std::map<ConnectionId, std::size_t> positions;  // the connection each task was asked on, its position
  std::vector<std::optional<std::vector<MeasuredLink>>> reports;  // by position in cluster order
  std::future<std::vector<MeasuredLink>> own;
  std::size_t own_position = 0;
  std::size_t waiting = 0;  // reports not in yet
  std::vector<std::size_t> shifts;  // the schedule: in round r task i streams to (i + shifts[r]) mod N

  // A task's figures, taken once, from the connection it was asked on.
  bool take(ConnectionId id, const Measured& measured) {
    auto it = positions.find(id);
    if (it == positions.end() || measured.session != session || reports[it->second]) return false;
    reports[it->second] = measured.links;
    --waiting;
    return true;
  }
  bool done(Instant now) const { return own.wait_for(std::chrono::seconds(0)) == std::future_status::ready && (waiting == 0 || now >= until); }
};

// Every wake-up costs what is ready, not what is open (an event set, lookups by index); what
// must look at every connection (silences, hello timeouts) runs on a timer, and a message for
// every task (a heartbeat, the start) is encoded once. So a job of thousands of tasks costs the
// coordinator a constant per task.
class CoordinatorBarrier {
 public:
  CoordinatorBarrier(const JobSettings& settings, Socket listener, EventSet events, const Hello& own, Instant now, std::size_t room,
                     const NetworkProbe* probe)
      : settings_(settings),
        probe_(probe),
        // Room for every task twice (an old and a new instance) and the strangers' budget, within what
        // the descriptor limit allows (an accept that fails for want of one would leave the
        // listener ready, and this loop busy).
        connection_cap_(std::min(2 * coordinator_connections(settings.tasks.size()) + 80, room)),
        listener_(std::move(listener)),
        events_(std::move(events)),
        barrier_(BarrierSettings{settings.job_id, settings.tasks, own, settings.env_check, settings.peer_silent_after,
                                 settings.preflight, PreflightBounds{}}),
        started_(now),
        own_start_(now - std::chrono::milliseconds(own.started_ms_ago)),
        own_(own),
        deadline_(now + settings.start_timeout),
        next_heartbeat_(now + settings.heartbeat_every),
        next_progress_(now + settings.progress_every),
        next_sweep_(now + sweep_every),
        refused_for_load_(settings.progress_every),
        refused_hellos_(settings.progress_every) {
    events_.watch(listener_.fd(), listener_key, POLLIN);
    for (std::size_t i = 0; i < settings.tasks.size(); ++i) position_of_.emplace(settings.tasks[i], i);
    coordinator_position_ = position_of_.at(settings.coordinator);
  }

  Result<std::unique_ptr<JobLink>> run() {
    if (verified_) events_.watch(verified_.get(), verified_key, POLLIN);
    log::info("start barrier: waiting for {} on control port {}", counted(settings_.tasks.size() - 1, "task"), settings_.port);
    report_state(false);
    while (true) {
      Instant now = SteadyClock::now();
      if (verification_ && verification_->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        if (auto verdict = take_verification()) {
          if (auto outcome = conclude(std::move(*verdict), now)) return std::move(*outcome);
        }
      }
      if (measuring_ && measuring_->done(now)) {
        if (auto outcome = take_measurement(now)) return std::move(*outcome);
      }
      if (now >= deadline_ && !verification_ && !measuring_) return give_up();
      if (barrier_.complete() && !verification_ && !measuring_ && (!settings_.verify_members || now >= settle_until())) {
        auto decision = barrier_.decide(settings_.supervise);
        if (std::holds_alternative<Abort>(decision) || !settings_.verify_members) {
          if (auto outcome = conclude(std::move(decision), now)) return std::move(*outcome);
        } else {
          begin_verification();
        }
      }
      housekeeping(now);
      if (auto waited = wait_once(); !waited) return std::unexpected(waited.error());
      if (version_abort_) return start(std::move(*version_abort_));
    }
  }

 private:
  // docs/observing.md (the coordinator's /status and barrier metrics).
  void report_state(bool started) const {
    if (settings_.on_barrier_state) settings_.on_barrier_state(barrier_.task_states(), started);
  }

  // The name check waits until the youngest task's tfboot has run for `record_settle`: its pod's
  // DNS record may lag the pod's start, and a name asked before it is published gets its
  // NXDOMAIN cached. Tasks that started earlier (the usual case in a large job) cost no wait.
  Instant settle_until() const { return std::max(barrier_.latest_task_start(), own_start_) + settings_.record_settle; }

  Result<void> wait_once() {
    Instant until = std::min({deadline_, next_heartbeat_, next_progress_, next_sweep_});
    if (verification_ && !verified_) until = std::min(until, SteadyClock::now() + std::chrono::milliseconds(20));  // no eventfd: look
    if (measuring_) until = std::min(until, SteadyClock::now() + std::chrono::milliseconds(20));  // the own measurement's end
    if (settings_.verify_members && barrier_.complete()) until = std::min(until, settle_until());
    auto ready = events_.wait(until);
    if (!ready) return std::unexpected(ready.error());
    Instant now = SteadyClock::now();
    for (const auto& [key, revents] : *ready) {
      if (key == listener_key) {
        accept_connections(now);
        continue;
      }
      if (key == verified_key) continue;  // run() takes the verdict
      if (auto carrier = carriers_.find(key); carrier != carriers_.end()) {
        on_carrier(carrier, revents, now);
        continue;
      }
      auto it = connections_.find(key);
      if (it == connections_.end()) continue;
      if (revents & POLLOUT) it->second.channel.flush();
      if (revents & (POLLIN | POLLHUP | POLLERR)) it->second.channel.receive(now);
      read_lines(it->first, it->second, now);
      settle(it);
    }
    watch_carriers();
    return {};
  }

  // --- The start tree (control/protocol/tree.h): relays' connections and those they carry.

  void on_carrier(std::map<ConnectionId, std::shared_ptr<Carrier>>::iterator it, short revents, Instant now) {
    Carrier& carrier = *it->second;
    if (revents & POLLOUT) carrier.channel.flush();
    if (revents & (POLLIN | POLLHUP | POLLERR)) carrier.channel.receive(now);
    take_from_carrier(it->second, now);
    if (carrier.channel.broken()) lose_carrier(it->first);
  }

  void take_from_carrier(const std::shared_ptr<Carrier>& carrier, Instant now) {
    auto input = read_carrier(*carrier, [this](std::uint64_t key) -> MessageConnection* {
      auto found = connections_.find(key);
      return found == connections_.end() ? nullptr : &found->second.channel;
    }, now);
    for (const RelayOpen& open : input.opened) open_carried(carrier, open, now);
    for (ConnectionId key : input.touched) {
      auto found = connections_.find(key);
      if (found == connections_.end()) continue;
      read_lines(found->first, found->second, now);
      settle(found);
    }
  }

  // A task connected to a relay: a candidate as any other, whose address is the one the relay saw.
  void open_carried(const std::shared_ptr<Carrier>& carrier, const RelayOpen& open, Instant now) {
    const ConnectionId id = next_id_++;
    carrier->carried.emplace(open.id, id);
    MessageConnection channel(carrier, open.id, open.peer, max_task_message, now);  // its address, as the name check reads it
    if (!make_room_for(open.source, now)) {
      channel.send(Refused{"too many connections awaiting their hello (" + std::to_string(unproven_.size()) + "); retry"});
      channel.shutdown_write();
      carrier->carried.erase(open.id);
      return;
    }
    auto nonce = make_nonce();
    if (!nonce) {
      log::error("{}", nonce.error().message);
      channel.fail(nonce.error().message);
      carrier->carried.erase(open.id);
      return;
    }
    Challenge challenge{settings_.job_id, *nonce, settings_.secret.has_value(), own_.protocol, own_.tfboot};
    Candidate candidate{std::move(channel), challenge, now};
    candidate.source = open.source;
    candidate.channel.send(challenge);
    count_unproven(id, open.source);
    connections_.emplace(id, std::move(candidate));
    ++carried_;
  }

  // A relay's connection ended (or was found silent): every connection it carried ends with it.
  void lose_carrier(ConnectionId key) {
    auto it = carriers_.find(key);
    if (it == carriers_.end()) return;
    std::shared_ptr<Carrier> carrier = it->second;
    carriers_.erase(it);
    const std::string why = "its relay " + carrier->relay.text() + " was lost: " +
                            (carrier->channel.broken() ? carrier->channel.problem() : std::string("closed"));
    log::warn("start barrier: the relay {}'s connection ended ({}); {} it carried end with it", carrier->relay.text(),
              carrier->channel.broken() ? carrier->channel.problem() : "closed", counted(carrier->carried.size(), "connection"));
    const auto carried = carrier->carried;
    for (const auto& [relay_id, id] : carried) {
      if (auto found = connections_.find(id); found != connections_.end()) {
        found->second.channel.fail(why);
        settle(found);
      }
    }
  }

  // A relay's hello on a connection of its own: proven as a task's, and one of this job's relays.
  void on_relay_hello(ConnectionId id, Candidate& candidate, const Hello& hello, Instant now) {
    if (auto proven = check_hello_proof(hello, candidate.challenge, settings_.secret); !proven) {
      log_refused_hello("the relay " + hello.task.text() + " from " + candidate.channel.peer() + ": " + proven.error().message, now);
      return refuse(id, candidate, "authentication failed");
    }
    auto position = position_of_.find(hello.task);
    if (position == position_of_.end() || !is_relay(position->second, coordinator_position_, settings_.tasks.size())) {
      log_refused_hello(hello.task.text() + " from " + candidate.channel.peer() + " offered to relay, and is no relay of this job", now);
      return refuse(id, candidate, hello.task.text() + " is no relay of this job of " + std::to_string(settings_.tasks.size()) + " tasks");
    }
    if (auto mismatch = protocol_mismatch(hello, candidate.channel.peer(), own_)) return refuse(id, candidate, mismatch->message);
    for (auto& [key, carrier] : carriers_) {
      if (carrier->relay == hello.task) {
        log::info("start barrier: the relay {} connected again; its older connection is closed", hello.task.text());
        carrier->channel.fail("replaced by a new connection");
      }
    }
    std::string proof = settings_.secret ? coordinator_proof(*settings_.secret, candidate.challenge, hello) : "";
    candidate.channel.send(Accepted{proof, barrier_.progress()});
    candidate.task = hello.task;
    candidate.becomes_carrier = true;
    uncount(id, candidate);
    log::debug("start barrier: the relay {} at {} carries its group", hello.task.text(), candidate.channel.peer());
  }

  // Whether `hello` came the way its task joins: through its relay, or to the coordinator itself.
  std::optional<std::string> wrong_way(const Candidate& candidate, const Hello& hello) const {
    auto position = position_of_.find(hello.task);
    if (position == position_of_.end()) return std::nullopt;  // the barrier refuses it
    const auto relay = relay_of(position->second, coordinator_position_, settings_.tasks.size());
    const Carrier* carrier = candidate.channel.carrier();
    if (relay && (!carrier || carrier->relay != settings_.tasks[*relay])) {
      return hello.task.text() + " joins through its relay " + settings_.tasks[*relay].text() + ", not " +
             (carrier ? "the relay " + carrier->relay.text() : std::string("the coordinator itself"));
    }
    if (!relay && carrier) return hello.task.text() + " joins the coordinator itself, not through the relay " + carrier->relay.text();
    return std::nullopt;
  }

  // Carriers sent to: watched for POLLOUT while they have output; the lost ones go.
  void watch_carriers() {
    std::vector<ConnectionId> lost;
    for (auto& [key, carrier] : carriers_) {
      if (carrier->channel.broken()) {
        lost.push_back(key);
        continue;
      }
      if (!carrier->touched) continue;
      carrier->touched = false;
      events_.watch(carrier->channel.fd(), key, carrier->channel.events());
    }
    for (ConnectionId key : lost) lose_carrier(key);
  }

  // After anything happened on a connection: closed when broken, else watched for what it waits for.
  void settle(std::map<ConnectionId, Candidate>::iterator it) {
    Candidate& candidate = it->second;
    if (candidate.becomes_carrier && !candidate.channel.broken()) {
      auto carrier = std::make_shared<Carrier>(std::move(candidate.channel), *candidate.task);
      const ConnectionId key = it->first;
      connections_.erase(it);
      carriers_.emplace(key, carrier);
      carrier->touched = true;
      take_from_carrier(carrier, SteadyClock::now());
      return;
    }
    if (candidate.channel.broken()) {
      if (Carrier* carrier = candidate.channel.carrier()) {
        carrier->carried.erase(candidate.channel.carried_id());
        --carried_;
      }
      barrier_.on_closed(it->first, candidate.channel.problem());
      uncount(it->first, candidate);
      refused_.erase(it->first);
      connections_.erase(it);  // its descriptor closes, and leaves the event set with it
      return;
    }
    if (!candidate.channel.carried() && candidate.channel.events() != candidate.watched) {
      candidate.watched = candidate.channel.events();
      events_.watch(candidate.channel.fd(), it->first, candidate.watched);
    }
  }

  // Connections that have not yet said an accepted hello have a budget of their own, so that
  // strangers (without the secret, or slow, or silent) cannot crowd out a task that proves
  // itself. When it is spent, room is made by fairness, not age: the address holding the most
  // unproven connections loses its oldest, so a newcomer from an address that holds fewer always
  // gets in, however strangers time their connections. A newcomer from the greediest address
  // competes only with that address's own connections (its oldest, past `hello_grace`), and is
  // refused, saying why, when there is none. A few per turn: a flood waits in the listen queue
  // and never holds up the heartbeats.
  void accept_connections(Instant now) {
    for (std::size_t taken = 0; taken < accepts_per_turn; ++taken) {
      auto accepted = accept_one(listener_.fd(), "control channel");
      if (!accepted) return;
      const std::string source = address_of_peer(accepted.peer);
      if (!make_room_for(source, now)) {
        refuse_for_load(std::move(accepted.socket), accepted.peer, now);
        continue;
      }
      auto nonce = make_nonce();
      if (!nonce) {
        log::error("{}", nonce.error().message);
        continue;
      }
      Challenge challenge{settings_.job_id, *nonce, settings_.secret.has_value(), own_.protocol, own_.tfboot};
      Candidate candidate{MessageConnection(std::move(accepted.socket), accepted.peer, max_task_message, now), challenge, now};
      candidate.source = source;
      candidate.channel.send(challenge);
      const ConnectionId id = next_id_++;
      count_unproven(id, source);
      settle(connections_.emplace(id, std::move(candidate)).first);
    }
  }

  std::size_t unproven_budget() const { return settings_.tasks.size() + 64; }

  // Whether a newcomer from `source` has room, made if need be. Refused connections waiting to
  // read why go first when the descriptors run short: they have been answered.
  bool make_room_for(const std::string& source, Instant now) {
    // Descriptors bound the connections of its own; every connection, carried or not, the job's size.
    const auto own = [this] { return connections_.size() - carried_; };
    if (own() >= connection_cap_ && !refused_.empty()) close_connection(*refused_.begin(), "refused");
    const bool full = own() >= connection_cap_ || connections_.size() >= 2 * settings_.tasks.size() + 80 ||
                      unproven_.size() >= unproven_budget();
    return !full || evict_for(source, now);
  }

  // Closes an unproven connection to make room for one from `source`: whether one was.
  bool evict_for(const std::string& source, Instant now) {
    if (greediest_.empty()) return false;
    const auto& [count, order, greedy] = *greediest_.rbegin();
    auto mine = unproven_by_source_.find(source);
    const std::size_t own = mine == unproven_by_source_.end() ? 0 : mine->second.size();
    if (count > own) return evict(*unproven_by_source_.at(greedy).begin(), now);
    if (mine == unproven_by_source_.end()) return false;
    const ConnectionId oldest = *mine->second.begin();  // ids count up with time
    auto it = connections_.find(oldest);
    return it != connections_.end() && now - it->second.opened >= hello_grace && evict(oldest, now);
  }

  bool evict(ConnectionId id, Instant now) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return false;
    log::debug("control channel: closed {}, {} without a hello, to make room", it->second.channel.peer(), seconds_text(now - it->second.opened));
    it->second.channel.fail("no hello within " + seconds_text(now - it->second.opened) + ", closed to make room");
    settle(it);
    return true;
  }

  void close_connection(ConnectionId id, const std::string& why) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    it->second.channel.fail(why);
    settle(it);
  }

  void refuse_for_load(Socket socket, const std::string& peer, Instant now) {
    MessageConnection channel(std::move(socket), peer, max_task_message, now);
    channel.send(Refused{"too many connections awaiting their hello (" + std::to_string(unproven_.size()) +
                         "; strangers without the secret?); retry"});
    channel.shutdown_write();
    const std::string what = "a connection from " + peer + ": " + std::to_string(unproven_.size()) +
                             " connections await their hello, the most of them from its own address";
    if (auto line = refused_for_load_.note(what, now)) log::warn("control channel: {}", *line);
  }

  // The index of addresses by how many unproven connections each holds, and among equals by
  // whose oldest is the oldest: its last entry is the address that loses one to make room.
  using GreedKey = std::tuple<std::size_t, ConnectionId, std::string>;
  static GreedKey greed_of(const std::string& source, const std::set<ConnectionId>& ids) {
    return {ids.size(), std::numeric_limits<ConnectionId>::max() - *ids.begin(), source};
  }

  void count_unproven(ConnectionId id, const std::string& source) {
    auto& ids = unproven_by_source_[source];
    if (!ids.empty()) greediest_.erase(greed_of(source, ids));
    ids.insert(id);
    greediest_.insert(greed_of(source, ids));
    unproven_.insert(id);
  }

  void uncount(ConnectionId id, const Candidate& candidate) {
    if (unproven_.erase(id) == 0) return;
    auto mine = unproven_by_source_.find(candidate.source);
    if (mine == unproven_by_source_.end()) return;
    greediest_.erase(greed_of(candidate.source, mine->second));
    mine->second.erase(id);
    if (mine->second.empty()) unproven_by_source_.erase(mine);
    else greediest_.insert(greed_of(candidate.source, mine->second));
  }

  void read_lines(ConnectionId id, Candidate& candidate, Instant now) {
    while (auto line = candidate.channel.next_line()) {
      if (candidate.refused) continue;  // what it says after the refusal does not matter
      auto message = parse_message(*line, Sender::task);
      if (!message) return candidate.channel.fail("protocol violation: " + message.error().message);
      if (candidate.task) {
        // Before the start a present task only sends heartbeats, and the figures it was asked for.
        // Figures of an earlier session, or after their deadline, are a sign of life, not a violation.
        if (const Measured* measured = std::get_if<Measured>(&*message)) {
          if (!measuring_ || !measuring_->take(id, *measured)) log::debug("preflight network: figures from {} not asked for now, left aside", candidate.task->text());
          barrier_.on_heard(id, now);
          continue;
        }
        if (!std::holds_alternative<Ping>(*message)) return candidate.channel.fail("protocol violation: a '" + std::string(message_type(*message)) + "' before the start");
        barrier_.on_heard(id, now);
      } else if (const Hello* hello = std::get_if<Hello>(&*message)) {
        if (hello->relay && !candidate.channel.carried()) {
          on_relay_hello(id, candidate, *hello, now);
          return;  // what follows is the relay's frames: read as a carrier's
        }
        on_hello(id, candidate, *hello, now);
      } else {
        return candidate.channel.fail("protocol violation: a '" + std::string(message_type(*message)) + "' before hello");
      }
    }
  }

  void on_hello(ConnectionId id, Candidate& candidate, const Hello& hello, Instant now) {
    if (banned_.contains({hello.task, candidate.source})) {
      log_refused_hello(hello.task.text() + " from " + candidate.channel.peer() + ": dropped before as a stranger in its place", now);
      return refuse(id, candidate, "a connection from " + candidate.source + " claimed " + hello.task.text() +
                                       " before, and its name does not resolve to that address");
    }
    if (hello.relay) return refuse(id, candidate, "a relay's hello through a relay");
    if (auto wrong = wrong_way(candidate, hello)) {
      log_refused_hello(*wrong + " (from " + candidate.channel.peer() + ")", now);
      barrier_.note_problem(hello.task, *wrong);
      return refuse(id, candidate, *wrong);
    }
    if (auto proven = check_hello_proof(hello, candidate.challenge, settings_.secret); !proven) {
      log_refused_hello(hello.host + " claiming " + hello.task.text() + " from " + candidate.channel.peer() + ": " + proven.error().message, now);
      barrier_.note_problem(hello.task, proven.error().message + " from " + candidate.channel.peer());
      return refuse(id, candidate, "authentication failed");
    }
    HelloVerdict verdict = barrier_.on_hello(id, hello, candidate.channel.peer(), now, clock_offset_of(hello, candidate, now));
    if (!verdict.accepted) {
      log_refused_hello(hello.task.text() + " from " + candidate.channel.peer() + ": " + verdict.reason, now);
      return refuse(id, candidate, verdict.reason);
    }
    if (verdict.replaced) {
      log::info("start barrier: {} reconnected; its older connection is closed", hello.task.text());
      if (auto old = connections_.find(*verdict.replaced); old != connections_.end()) {
        old->second.channel.fail("replaced by a new connection");
        settle(old);
      }
    }
    candidate.task = hello.task;
    uncount(id, candidate);
    std::string proof = settings_.secret ? coordinator_proof(*settings_.secret, candidate.challenge, hello) : "";
    const BarrierProgress progress = barrier_.progress();
    candidate.channel.send(Accepted{proof, progress});
    log::info("start barrier: {} ({}) is present; {}/{}", hello.task.text(), hello.host, progress.present, settings_.tasks.size());
    // A task of another version ends the start for every task, itself included; accepted first, so
    // that a task older than the version check obeys the abort that names both versions. With the
    // secret it proved to be the job's: at once. Without, it may be a stranger in a task's place:
    // when the barrier would start, after the check of the job's names has dropped strangers.
    candidate.version_mismatch = protocol_mismatch(hello, candidate.channel.peer(), own_);
    if (candidate.version_mismatch && settings_.secret && !version_abort_) version_abort_ = candidate.version_mismatch;
  }

  // The task's wall clock against ours when it sent its hello (docs/preflight.md): our clock then
  // is ours now less half the time from the challenge to the hello, which is one round trip.
  static std::optional<std::int64_t> clock_offset_of(const Hello& hello, const Candidate& candidate, Instant now) {
    if (!hello.wall_ms) return std::nullopt;
    const auto round_trip = std::chrono::duration_cast<std::chrono::milliseconds>(now - candidate.opened).count();
    return *hello.wall_ms - (wall_clock_ms() - round_trip / 2);
  }

  // The first present task's version mismatch, if any.
  std::optional<Abort> present_version_mismatch() const {
    for (const auto& present : barrier_.present_tasks()) {
      auto it = connections_.find(present.connection);
      if (it != connections_.end() && it->second.version_mismatch) return it->second.version_mismatch;
    }
    return std::nullopt;
  }

  // A hello refused: the first at once, then a line per interval (anyone can send hellos).
  void log_refused_hello(const std::string& what, Instant now) {
    if (auto line = refused_hellos_.note(what, now)) log::warn("start barrier: {}", *line);
  }

  void refuse(ConnectionId id, Candidate& candidate, const std::string& reason) {
    uncount(id, candidate);
    refused_.insert(id);
    candidate.channel.send(Refused{reason});
    candidate.channel.shutdown_write();
    candidate.refused = true;
    candidate.opened = SteadyClock::now();  // from now on: the time it has to read the refusal
  }

  void housekeeping(Instant now) {
    if (now >= next_sweep_) {
      sweep(now);
      next_sweep_ = now + sweep_every;
    }
    if (now >= next_heartbeat_) {
      Fanout waiting(encoded(Waiting{barrier_.progress()}));
      for (auto& [id, candidate] : connections_) {
        if (candidate.task) waiting.to(candidate.channel);
      }
      waiting.send();
      for (auto it = connections_.begin(); it != connections_.end();) {
        auto current = it++;
        if (current->second.task) settle(current);
      }
      const EncodedMessage ping = encoded(Ping{});
      for (auto& [key, carrier] : carriers_) {
        carrier->channel.send(ping);
        carrier->touched = true;
      }
      watch_carriers();
      next_heartbeat_ = now + settings_.heartbeat_every;
      report_state(false);
    }
    if (now >= next_progress_) {
      log::info("start barrier: {}/{} tasks present after {}; missing: {}", barrier_.progress().present, settings_.tasks.size(),
                seconds_text(now - started_), barrier_.missing_report(10));
      next_progress_ = now + settings_.progress_every;
    }
  }

  // What needs a look at every connection: silent tasks, hellos that did not come, refusals read.
  void sweep(Instant now) {
    for (auto& [key, carrier] : carriers_) {
      if (now - carrier->channel.last_heard() > settings_.peer_silent_after) {
        carrier->channel.fail("silent for " + seconds_text(now - carrier->channel.last_heard()));
      }
    }
    watch_carriers();
    for (ConnectionId id : barrier_.silent(now)) {
      if (auto it = connections_.find(id); it != connections_.end()) it->second.channel.fail("silent for " + seconds_text(now - it->second.channel.last_heard()));
    }
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto current = it++;
      Candidate& candidate = current->second;
      if (candidate.refused && now - candidate.opened > linger) candidate.channel.fail("refused");
      else if (!candidate.task && !candidate.refused && now - candidate.opened > settings_.hello_timeout) {
        candidate.channel.fail("no hello within " + seconds_text(settings_.hello_timeout));
      }
      if (candidate.channel.broken()) settle(current);
    }
  }

  // Every task is present: their names are resolved on a thread of their own, while this one
  // keeps the connections alive (heartbeats, silence, reconnects).
  void begin_verification() {
    log::info("start barrier: all {} tasks present; resolving their names once", settings_.tasks.size());
    pending_members_ = barrier_.members();
    // The thread rings `verified_` when done, which wakes this loop: no polling for the verdict.
    auto check = [this, members = pending_members_, deadline = deadline_] {
      auto verdict = settings_.verify_members(members, deadline);
      const std::uint64_t one = 1;
      if (verified_ && ::write(verified_.get(), &one, sizeof one) < 0) log::debug("start barrier: {}", errno_text("eventfd", errno));
      return verdict;
    };
    try {
      verification_ = std::async(std::launch::async, std::move(check));
    } catch (const std::system_error& error) {  // no thread to spare: checked here, the heartbeats paused
      log::warn("start barrier: no thread for the name check ({}); checking on this one", error.what());
      std::promise<Result<VerifiedMembers>> done;
      done.set_value(settings_.verify_members(pending_members_, deadline_));
      verification_ = done.get_future();
    }
  }

  // The verdict once the names are checked, or nullopt when the job changed meanwhile (a task
  // reconnected or left) and the check must wait for the barrier and run again.
  std::optional<std::variant<Start, Abort>> take_verification() {
    auto verified = verification_->get();
    verification_.reset();
    std::uint64_t rung = 0;
    if (verified_ && ::read(verified_.get(), &rung, sizeof rung) < 0) log::debug("start barrier: {}", errno_text("eventfd", errno));
    if (!barrier_.complete()) {
      log::info("start barrier: a task left while the names were resolved; checking again once all are present");
      return std::nullopt;
    }
    auto decision = barrier_.decide(settings_.supervise);
    Start* start = std::get_if<Start>(&decision);
    if (!start) return decision;
    if (barrier_.members() != pending_members_) {
      log::info("start barrier: a task came back while the names were resolved; checking again");
      return std::nullopt;
    }
    // Every task learns why, with the DNS code whatever went wrong.
    if (!verified) return Abort{exit_code::peers_unresolved, "the coordinator's check of the job's names: " + verified.error().message};
    if (!verified->strangers.empty()) {
      drop_strangers(verified->strangers);
      return std::nullopt;
    }
    pending_members_ = std::move(verified->table);
    start->names_verified = true;
    return decision;
  }

  // Connections in a task's place from an address its name does not resolve to: closed, their
  // address refused for that task from now on, and the barrier waits for the real task.
  void drop_strangers(const std::vector<std::pair<JobMember, std::string>>& strangers) {
    for (const auto& [task, why] : strangers) {
      auto id = barrier_.connection_of(task);
      auto it = id ? connections_.find(*id) : connections_.end();
      if (it == connections_.end()) continue;
      log::warn("start barrier: dropped the connection in {}'s place: {} (a stranger, a stale DNS record, or a NAT: "
                "--control-source-check off); waiting for {}", task.text(), why, task.text());
      banned_.emplace(task, it->second.source);
      it->second.channel.fail(why);
      settle(it);
    }
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
    if (auto mismatch = present_version_mismatch()) message += "; and " + mismatch->message;
    auto channels = present_channels();
    Fanout abort(encoded(fitted_to_the_wire(Abort{exit_code::start_barrier_incomplete, message})));
    for (MessageConnection* channel : channels) abort.to(*channel);
    abort.send();
    close_gently(channels, SteadyClock::now() + linger);
    return make_error(exit_code::start_barrier_incomplete, message);
  }

  Result<std::unique_ptr<JobLink>> start(std::variant<Start, Abort> decision);

  // The verdict once every task is present (and its name checked): with --preflight network
  // first every task's links (nullopt while they are measured), else the start or abort itself.
  std::optional<Result<std::unique_ptr<JobLink>>> conclude(std::variant<Start, Abort> decision, Instant now) {
    if (std::holds_alternative<Abort>(decision) || !probe_ || settings_.tasks.size() < 2) return start(std::move(decision));
    if (auto refused = begin_measurement(std::move(std::get<Start>(decision)), now)) return start(std::move(*refused));
    return std::nullopt;
  }

  // "worker:7 (host 'h')" of every task, in cluster order.
  static std::vector<std::string> names_of(const std::vector<MemberInfo>& members) {
    std::vector<std::string> names;
    names.reserve(members.size());
    for (const auto& member : members) names.push_back(member.task.text() + " (host '" + member.host + "')");
    return names;
  }

  // Each task gets its partners (network_shifts) with the address it can reach them on: the one
  // their connection came from, and for the coordinator the one the task reached it on.
  std::optional<Abort> begin_measurement(Start decision, Instant now) {
    const auto members = barrier_.members();
    const auto ports = barrier_.network_ports();
    const auto names = names_of(members);
    std::vector<std::string> unmeasured;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!ports[i]) unmeasured.push_back(names[i] + ": network: its tfboot measures no links (its --preflight is not network)");
    }
    if (!unmeasured.empty()) return Abort{exit_code::preflight_refused, preflight_refusal_message(PreflightVerdict{unmeasured})};
    auto session = make_nonce();
    if (!session) return Abort{exit_code::preflight_refused, "preflight: the network check has no session id: " + session.error().message};
    const std::size_t tasks = members.size();
    const auto shifts = network_shifts(tasks);
    NetworkMeasurement measurement;
    measurement.session = session->substr(0, 16);
    measurement.began = now;
    measurement.reports.resize(tasks);
    std::map<JobMember, std::size_t> position_of;
    for (std::size_t i = 0; i < tasks; ++i) position_of.emplace(members[i].task, i);
    measurement.own_position = position_of.at(settings_.coordinator);
    auto plan_for = [&](std::size_t from, const std::string& own_address) {
      Measure plan{.session = measurement.session};
      for (std::size_t shift : shifts) {
        const std::size_t to = (from + shift) % tasks;
        std::string address = to == measurement.own_position ? own_address : members[to].source;
        if (address.empty() && !members[to].addresses.empty()) address = members[to].addresses.front();
        plan.rounds.push_back({static_cast<int>(to), address, *ports[to]});
      }
      return plan;
    };
    for (const auto& present : barrier_.present_tasks()) {
      auto it = connections_.find(present.connection);
      if (it == connections_.end()) continue;
      const std::size_t position = position_of.at(present.task);
      it->second.channel.send(plan_for(position, local_address(it->second.channel.fd())));
      settle(it);
      measurement.positions.emplace(present.connection, position);
      ++measurement.waiting;
    }
    Measure own = plan_for(measurement.own_position, "");
    measurement.until = now + network_session_length(own) + std::chrono::seconds(2);
    auto measure = [probe = probe_, own, position = static_cast<int>(measurement.own_position), inbound = shifts.size(), now] {
      return probe->measure(own, position, inbound, now);
    };
    try {
      measurement.own = std::async(std::launch::async, measure);
    } catch (const std::system_error& error) {  // no thread to spare: measured here, the heartbeats paused
      log::warn("preflight network: no thread for the coordinator's own links ({}); measuring on this one", error.what());
      std::promise<std::vector<MeasuredLink>> done;
      done.set_value(measure());
      measurement.own = done.get_future();
    }
    log::info("preflight network: every task measures its links to {} ({} in all), {} ms a round",
              counted(shifts.size(), "partner"), tasks * shifts.size(), own.round_ms);
    measurement.decision = std::move(decision);
    measurement.shifts = shifts;
    measuring_ = std::move(measurement);
    return std::nullopt;
  }

  // The figures in (or their deadline passed): the start with the job's figures, or the abort
  // that names the slow task or link; nullopt when a task left or came back meanwhile, and the
  // barrier waits to measure again.
  std::optional<Result<std::unique_ptr<JobLink>>> take_measurement(Instant now) {
    NetworkMeasurement measurement = std::move(*measuring_);
    measuring_.reset();
    measurement.reports[measurement.own_position] = measurement.own.get();
    const auto present = barrier_.present_tasks();
    const bool same = barrier_.complete() && std::ranges::all_of(present, [&](const auto& task) { return measurement.positions.contains(task.connection); });
    if (!same) {
      log::info("preflight network: a task left or came back while the links were measured; measuring again once all are present");
      return std::nullopt;
    }
    const auto names = names_of(barrier_.members());
    const auto tasks = static_cast<int>(names.size());
    std::vector<LinkFigure> links;
    std::vector<std::string> silent;
    for (std::size_t i = 0; i < measurement.reports.size(); ++i) {
      if (!measurement.reports[i]) {
        silent.push_back(names[i] + ": network: sent no figures within " + seconds_text(measurement.until - measurement.began));
        continue;
      }
      for (const MeasuredLink& link : *measurement.reports[i]) {
        if (link.from < 0 || link.from >= tasks || link.to < 0 || link.to >= tasks) continue;
        // A task speaks only of its own links: what it received, or what it could not send.
        if (static_cast<std::size_t>(link.to) != i && static_cast<std::size_t>(link.from) != i) continue;
        LinkFigure figure{static_cast<std::size_t>(link.from), static_cast<std::size_t>(link.to), std::nullopt, std::nullopt, link.problem};
        if (link.rtt_us) figure.rtt_ms = static_cast<double>(*link.rtt_us) / 1000;
        if (link.bits_per_second) figure.bits_per_second = static_cast<double>(*link.bits_per_second);
        links.push_back(std::move(figure));
      }
    }
    // A scheduled link neither end reported (both reports in) is named too.
    std::set<std::pair<std::size_t, std::size_t>> reported;
    for (const LinkFigure& link : links) reported.emplace(link.from, link.to);
    for (std::size_t from = 0; from < measurement.reports.size(); ++from) {
      for (std::size_t shift : measurement.shifts) {
        const std::size_t to = (from + shift) % measurement.reports.size();
        if (measurement.reports[from] && measurement.reports[to] && !reported.contains({from, to})) {
          links.push_back(LinkFigure{from, to, std::nullopt, std::nullopt, "neither end reported it"});
        }
      }
    }
    NetworkVerdict verdict = judge_network(links, names, settings_.network_bounds);
    verdict.refusals.insert(verdict.refusals.begin(), silent.begin(), silent.end());
    for (const auto& warning : verdict.warnings) log::warn("preflight network: {}", warning);
    if (!verdict.passed()) return start(Abort{exit_code::preflight_refused, preflight_refusal_message(PreflightVerdict{verdict.refusals})});
    // Rounded as the wire rounds them, so that the coordinator's record says what every task's does.
    auto rounded = [](std::optional<double> value, double unit) { return value ? std::optional<double>(std::round(*value * unit) / unit) : std::nullopt; };
    NetworkSummary summary{rounded(verdict.median_bits_per_second, 1), rounded(verdict.median_rtt_ms, 1000),
                           std::round(std::chrono::duration<double>(now - measurement.began).count() * 1000) / 1000,
                           static_cast<int>(std::ranges::count_if(links, [](const LinkFigure& link) { return link.bits_per_second.has_value(); })),
                           {}};
    constexpr std::size_t warnings_said = 10;  // the log has them all
    for (std::size_t i = 0; i < verdict.warnings.size() && i < warnings_said; ++i) summary.warnings.push_back(verdict.warnings[i].substr(0, 1024));
    if (verdict.warnings.size() > warnings_said) summary.warnings.push_back("and " + std::to_string(verdict.warnings.size() - warnings_said) + " more");
    log::info("preflight network: {} links measured in {}: median {}, round trip {}", summary.links, seconds_text(now - measurement.began),
              summary.median_bits_per_second ? gbits_text(*summary.median_bits_per_second) : "none",
              summary.median_rtt_ms ? fmt::format("{:.3g} ms", *summary.median_rtt_ms) : "none");
    measurement.decision.network = std::move(summary);
    return start(std::move(measurement.decision));
  }

  static constexpr std::uint64_t verified_key = ~std::uint64_t{0};  // connection ids count up from 1
  // How often every connection is looked at for a silence or a missing hello.
  static constexpr std::chrono::milliseconds sweep_every{250};
  // A task answers the challenge within milliseconds; an unproven connection older than this
  // may be closed to make room for another.
  static constexpr std::chrono::seconds hello_grace{2};
  static constexpr std::size_t accepts_per_turn = 32;
  const JobSettings& settings_;
  const NetworkProbe* probe_;  // --preflight network's, or none
  std::optional<NetworkMeasurement> measuring_;
  std::size_t connection_cap_;  // of the connections with a descriptor of their own
  std::size_t carried_ = 0;     // connections_ carried by relays
  Socket listener_;
  EventSet events_;
  StartBarrier barrier_;
  std::map<ConnectionId, Candidate> connections_;
  std::map<ConnectionId, std::shared_ptr<Carrier>> carriers_;  // relays' own connections, by their event keys
  std::map<JobMember, std::size_t> position_of_;                // in cluster order
  std::size_t coordinator_position_ = 0;
  std::set<ConnectionId> unproven_;  // connections without an accepted hello (nor a refusal)
  std::set<std::pair<JobMember, std::string>> banned_;  // a task and an address found as a stranger in its place
  std::map<std::string, std::set<ConnectionId>> unproven_by_source_;
  std::set<GreedKey> greediest_;    // unproven_by_source_ ordered by greed_of
  std::set<ConnectionId> refused_;  // told why, waiting to read it before the close
  ConnectionId next_id_ = 1;  // 0 is the coordinator's own entry in the barrier
  Instant started_;
  Instant own_start_;  // when this tfboot started
  Hello own_;          // the coordinator's own hello: its protocol and tfboot versions
  std::optional<Abort> version_abort_;  // a task of another version proved the secret
  Instant deadline_;
  Instant next_heartbeat_;
  Instant next_progress_;
  Instant next_sweep_;
  // Rung by the name check's thread when it is done; read when its verdict is taken. Declared
  // before the future, so that it outlives a thread still running when the barrier ends.
  UniqueFd verified_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::optional<std::future<Result<VerifiedMembers>>> verification_;
  std::vector<MemberInfo> pending_members_;  // what the running verification checks; then its answers
  // Refusals in the log at a bounded rate: a flood of strangers is a line per interval.
  RefusalTally refused_for_load_;
  RefusalTally refused_hellos_;
};

Result<std::unique_ptr<JobLink>> CoordinatorBarrier::start(std::variant<Start, Abort> decision) {
  // Another version explains whatever else the barrier found (the environment check, the names).
  if (auto mismatch = present_version_mismatch()) decision = *mismatch;
  auto channels = present_channels();
  if (const Abort* abort = std::get_if<Abort>(&decision)) {
    Fanout message(encoded(fitted_to_the_wire(*abort)));
    for (MessageConnection* channel : channels) message.to(*channel);
    message.send();
    deliver(channels, SteadyClock::now() + settings_.peer_silent_after);
    close_gently(channels, SteadyClock::now() + linger);
    return make_error(abort->code, abort->message);
  }
  Start& start = std::get<Start>(decision);
  start.restarts = settings_.restarts;
  start.max_restarts = settings_.max_restarts;
  start.stop_together = settings_.stop_together;
  // A task that exec'd its command cannot stop it, nor join a restart's barrier.
  for (const auto& present : barrier_.present_tasks()) {
    if (start.max_restarts == 0 || present.supervised) continue;
    log::warn("no restart in place for this job: {} runs its command by exec (not as init), so a failure ends the job",
              present.task.text());
    start.max_restarts = 0;
  }
  if (!start.names_verified) pending_members_ = barrier_.members();
  // Two encodings at most, each made once: the start, and the start with the table of addresses
  // for the tasks that asked for it.
  Fanout plain(encoded(start));
  EncodedMessage with_table;
  std::vector<MessageConnection*> closing;  // connections not kept after the start
  for (const auto& present : barrier_.present_tasks()) {
    auto it = connections_.find(present.connection);
    if (it == connections_.end()) continue;
    if (!settings_.supervise || !present.supervised) closing.push_back(&it->second.channel);
    if (!barrier_.wants_table(present.connection)) {
      plain.to(it->second.channel);
      continue;
    }
    if (!with_table) {
      Start table = start;
      table.addresses.emplace();
      for (const auto& member : pending_members_) table.addresses->push_back(joined(member.addresses, ","));  // "10.0.0.1,fd00::1"
      with_table = encoded(table);
    }
    it->second.channel.send(with_table);
  }
  plain.send();
  // A connection closed with unread input resets, and a reset throws away what its peer has not
  // received yet: those wait until the start is delivered. The kept ones go on in the link.
  deliver(closing, SteadyClock::now() + settings_.peer_silent_after);
  log_differences(start.environment_differences);
  log::info("start barrier: all {} tasks present; starting", settings_.tasks.size());
  report_state(true);

  Instant now = SteadyClock::now();
  std::map<std::uint64_t, LinkedTask> tasks;  // by the keys the event set knows them by
  std::vector<JobMonitor::Watched> watched;
  for (const auto& present : barrier_.present_tasks()) {
    auto it = connections_.find(present.connection);
    if (!settings_.supervise || !present.supervised || it == connections_.end()) continue;
    watched.push_back({present.task, true});
    tasks.emplace(it->first, LinkedTask{present.task, std::move(it->second.channel)});
  }
  StartInfo info{start.environment_differences, start.tasks,        settings_.supervise, start.names_verified,
                 addresses_of(pending_members_),  start.restarts, start.max_restarts, start.stop_together, start.clock_offsets_ms,
                 start.network};
  Socket listener = settings_.supervise ? std::move(listener_) : Socket();
  // The unsupervised tasks' connections close at their relays (what they were sent first).
  for (MessageConnection* channel : closing) channel->shutdown_write();
  std::map<std::uint64_t, std::shared_ptr<Carrier>> carriers;
  if (settings_.supervise) carriers = std::move(carriers_);
  else deliver(on_the_wire(closing), SteadyClock::now() + settings_.peer_silent_after);
  return make_coordinator_link(std::move(info), settings_, std::move(listener), std::move(events_), std::move(tasks), watched,
                               std::move(carriers), now);
}

}  // namespace

Result<std::unique_ptr<JobLink>> join_as_coordinator(const JobSettings& settings, Socket listener, const Hello& own,
                                                     Instant now, std::size_t room, const NetworkProbe* probe) {
  auto events = EventSet::create();
  if (!events) return std::unexpected(events.error());
  return CoordinatorBarrier(settings, std::move(listener), std::move(*events), own, now, room, probe).run();
}

}  // namespace tfboot
