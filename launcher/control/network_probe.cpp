// The network level's measurement: the probe listener and one session's links, each bounded in
// time and bytes (docs/preflight.md).
#include "control/network_probe.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "base/log.h"
#include "base/text.h"
#include "control/socket.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

constexpr int pings = 5;
// Links received at once, and in one session: a stranger's flood of connections costs neither
// unbounded threads nor unbounded time.
constexpr std::size_t handlers_at_once = 8;
constexpr std::size_t handlers_per_session = 64;
constexpr std::size_t max_header = 600;
constexpr auto step_timeout = 3s;  // a connect, a round trip
constexpr auto header_timeout = 1s;  // a partner sends its header as it connects: a stranger's slot is freed soon
// Each round pings first, while no link streams, and streams from this far into the round: a
// round trip measured beside a stream measures the stream's queue (and, with many pods on one
// host, its scheduler), not the link.
constexpr auto quiet_part = 300ms;

// Until `fd` has one of `events` (or an error, which the next call says), or `until`: false then.
bool wait_for(int fd, short events, Instant until) {
  while (true) {
    const Instant now = SteadyClock::now();
    if (now >= until) return false;
    pollfd entry{fd, events, 0};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return false;
    if (ready > 0) return true;
  }
}

// One byte, or why not.
Result<char> read_byte(int fd, Instant until) {
  while (true) {
    char byte = 0;
    const ssize_t n = ::recv(fd, &byte, 1, 0);
    if (n == 1) return byte;
    if (n == 0) return make_error(exit_code::resources, "the partner closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return errno_error(exit_code::resources, "recv", errno);
    if (!wait_for(fd, POLLIN, until)) return make_error(exit_code::resources, "no answer within " + seconds_text(step_timeout));
  }
}

Result<void> write_text(int fd, std::string_view text, Instant until) {
  while (!text.empty()) {
    const ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return errno_error(exit_code::resources, "send", errno);
    if (!wait_for(fd, POLLOUT, until)) return make_error(exit_code::resources, "could not send within " + seconds_text(step_timeout));
  }
  return {};
}

// "tfboot-probe 1 <session> <to> <from> <job>": the job last, as it may hold spaces.
std::string probe_header(const std::string& session, int to, int from, const std::string& job) {
  return "tfboot-probe 1 " + session + " " + std::to_string(to) + " " + std::to_string(from) + " " + job + "\n";
}

// The sender's position, when `line` is a header of this session toward `self`.
std::optional<int> sender_of(std::string_view line, const std::string& session, int self, const std::string& job) {
  const std::string prefix = "tfboot-probe 1 " + session + " " + std::to_string(self) + " ";
  if (!line.starts_with(prefix)) return std::nullopt;
  line.remove_prefix(prefix.size());
  int from = -1;
  auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), from);
  if (error != std::errc{} || from < 0 || from == self) return std::nullopt;
  line.remove_prefix(static_cast<std::size_t>(end - line.data()));
  if (line != " " + job + "\n") return std::nullopt;
  return from;
}

void no_delay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);  // a failure only slows the pings
}

// The receiver's side of one link; nullopt for a connection that is not one of this session's.
std::optional<MeasuredLink> receive_link(const Socket& socket, const Measure& plan, int self, const std::string& job, Instant start,
                                        Instant end) {
  const int fd = socket.fd();
  no_delay(fd);
  std::string header;
  const Instant header_until = std::min(end, SteadyClock::now() + header_timeout);
  while (header.empty() || header.back() != '\n') {
    auto byte = read_byte(fd, header_until);
    if (!byte || header.size() >= max_header) return std::nullopt;
    header.push_back(*byte);
  }
  const auto from = sender_of(header, plan.session, self, job);
  if (!from) {
    log::debug("preflight network: a probe connection not of this session ({} bytes of header), closed", header.size());
    return std::nullopt;
  }
  MeasuredLink link{*from, self, std::nullopt, std::nullopt, ""};
  std::vector<std::int64_t> round_trips;
  for (int i = 0; i < pings; ++i) {
    const Instant sent = SteadyClock::now();
    const Instant until = std::min(end, sent + step_timeout);
    if (auto pinged = write_text(fd, "p", until); !pinged) {
      link.problem = "ping: " + pinged.error().message;
      return link;
    }
    auto reply = read_byte(fd, until);
    if (!reply || *reply != 'p') {
      link.problem = reply ? "the partner answered a ping with something else" : "ping: " + reply.error().message;
      return link;
    }
    round_trips.push_back(std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - sent).count());
  }
  std::ranges::sort(round_trips);
  link.rtt_us = round_trips.front();  // the least: what the link does, without this host's scheduling
  // The stream starts in the round's loud part, which every link of the round shares.
  const std::chrono::milliseconds round(plan.round_ms);
  const auto rounds_in = std::max<std::int64_t>(0, (SteadyClock::now() - start) / round);
  std::this_thread::sleep_until(std::min(end, start + round * rounds_in + std::min<std::chrono::milliseconds>(quiet_part, round - std::chrono::milliseconds(plan.bulk_ms))));
  if (auto go = write_text(fd, "g", std::min(end, SteadyClock::now() + step_timeout)); !go) {
    link.problem = "stream: " + go.error().message;
    return link;
  }
  // Counted until the sender stops (its bulk_ms or max_bytes), or a second past its bulk_ms.
  const Instant go_at = SteadyClock::now();
  const Instant until = std::min(end, go_at + std::chrono::milliseconds(plan.bulk_ms) + 1s);
  Instant last = go_at;
  std::int64_t bytes = 0;
  std::vector<char> buffer(64 << 10);
  while (true) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      bytes += n;
      last = SteadyClock::now();
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;  // the end, or a reset at it
    if (!wait_for(fd, POLLIN, until)) break;
  }
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(last - go_at).count();
  if (bytes == 0 || micros <= 0) {
    link.problem = "no bytes streamed";
    return link;
  }
  link.bits_per_second = static_cast<std::int64_t>(static_cast<double>(bytes) * 8e6 / static_cast<double>(micros));
  return link;
}

// The sender's side of one link: "" when it streamed, else why it could not.
std::string send_link(const ProbeRound& round, const Measure& plan, int self, const std::string& job, Instant end) {
  auto socket = start_connect(round.address, round.port);
  if (!socket) return socket.error().message;
  const int fd = socket->fd();
  const std::string peer = join_host_port(round.address, round.port);
  if (!wait_for(fd, POLLOUT, std::min(end, SteadyClock::now() + step_timeout))) return peer + ": no connection within " + seconds_text(step_timeout);
  if (auto connected = connect_outcome(fd); !connected) return peer + ": " + connected.error().message;
  no_delay(fd);
  if (auto sent = write_text(fd, probe_header(plan.session, round.to, self, job), std::min(end, SteadyClock::now() + step_timeout)); !sent) {
    return peer + ": " + sent.error().message;
  }
  // Echo the pings until the go.
  for (int i = 0; i <= pings; ++i) {
    const Instant until = std::min(end, SteadyClock::now() + step_timeout);
    auto byte = read_byte(fd, until);
    if (!byte) return peer + ": " + byte.error().message;
    if (*byte == 'g') break;
    if (*byte != 'p' || i == pings) return peer + ": not a probe's answer";
    if (auto echoed = write_text(fd, "p", until); !echoed) return peer + ": " + echoed.error().message;
  }
  // Stream; whatever stops it now is the receiver's to count (its deadline may come first).
  const Instant stop = std::min(end, SteadyClock::now() + std::chrono::milliseconds(plan.bulk_ms));
  const std::vector<char> zeros(64 << 10, 0);
  std::int64_t sent = 0;
  while (sent < plan.max_bytes && SteadyClock::now() < stop) {
    const auto size = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(zeros.size()), plan.max_bytes - sent));
    const ssize_t n = ::send(fd, zeros.data(), size, MSG_NOSIGNAL);
    if (n > 0) {
      sent += n;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return "";
    if (!wait_for(fd, POLLOUT, stop)) break;
  }
  // Our end; the receiver closes once it has counted (or at its deadline).
  ::shutdown(fd, SHUT_WR);
  const Instant drained = std::min(end, SteadyClock::now() + 1500ms);
  char sink[256];
  while (wait_for(fd, POLLIN, drained)) {
    const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
  }
  return "";
}

}  // namespace

std::chrono::milliseconds network_session_length(const Measure& plan) {
  return std::chrono::milliseconds(plan.round_ms) * static_cast<int>(plan.rounds.size()) + std::chrono::milliseconds(plan.bulk_ms) + 3s;
}

Result<NetworkProbe> NetworkProbe::open(int port, std::string job_id) {
  auto listener = listen_on_every_address(port, 64, "--preflight-port " + std::to_string(port));
  if (!listener) return std::unexpected(listener.error());
  sockaddr_storage bound{};  // port 0 (tests): the one the kernel chose
  socklen_t length = sizeof bound;
  if (port == 0 && ::getsockname(listener->fd(), reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
    port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  }
  return NetworkProbe(std::move(*listener), port, std::move(job_id));
}

std::vector<MeasuredLink> NetworkProbe::measure(const Measure& plan, int self, std::size_t inbound, Instant start) const {
  const Instant end = start + network_session_length(plan);
  std::mutex mutex;
  std::vector<MeasuredLink> links;
  std::atomic<std::size_t> received{0};
  std::atomic<std::size_t> running{0};
  auto keep = [&](MeasuredLink link) {
    std::lock_guard lock(mutex);
    links.push_back(std::move(link));
  };
  // Each inbound link on a thread of its own, so that a slow partner does not hold up the next
  // round's; the accepting loop ends with the session, or once every inbound link is in.
  auto receive = [&] {
    std::vector<std::thread> handlers;
    while (SteadyClock::now() < end && received.load() < inbound) {
      if (!wait_for(listener_.fd(), POLLIN, std::min(end, SteadyClock::now() + 50ms))) continue;
      AcceptedConnection connection = accept_one(listener_.fd(), "preflight network probe");
      if (!connection) continue;
      if (running.load() >= handlers_at_once || handlers.size() >= handlers_per_session) continue;  // closed: too many at once
      ++running;
      try {
        handlers.emplace_back([&, socket = std::move(connection.socket)] {
          if (auto link = receive_link(socket, plan, self, job_id_, start, end)) {
            keep(std::move(*link));
            ++received;
          }
          --running;
        });
      } catch (const std::system_error& error) {
        --running;
        log::warn("preflight network: no thread for a probe connection: {}", error.what());
      }
    }
    for (auto& handler : handlers) handler.join();
  };
  std::optional<std::thread> receiver;
  try {
    receiver.emplace(receive);
  } catch (const std::system_error& error) {
    log::warn("preflight network: no thread to receive on: {}", error.what());
  }
  // Each round's send on a thread of its own too, started on time: a partner that stalls one
  // round does not push this task's later rounds past the session's end.
  std::vector<std::thread> senders;
  for (std::size_t r = 0; r < plan.rounds.size(); ++r) {
    auto send = [&, r] {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(plan.round_ms) * static_cast<int>(r));
      const ProbeRound& round = plan.rounds[r];
      std::string problem = send_link(round, plan, self, job_id_, end);
      if (!problem.empty()) keep(MeasuredLink{self, round.to, std::nullopt, std::nullopt, problem});
    };
    try {
      senders.emplace_back(send);
    } catch (const std::system_error& error) {  // no thread to spare: sent from here, in turn
      log::warn("preflight network: no thread to send round {} on: {}", r + 1, error.what());
      send();
    }
  }
  for (auto& sender : senders) sender.join();
  if (receiver) receiver->join();
  std::lock_guard lock(mutex);
  return links;
}

}  // namespace tfboot
