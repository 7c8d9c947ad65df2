// The control channel's sockets: MessageConnection, the event set and the listen, deliver and connect steps.
#include "control/socket.h"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "base/log.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// Thousands of tasks connect at the same moment; the kernel caps this at net.core.somaxconn.
constexpr int listen_backlog = 4096;

// A peer that does not read what we send is cut off before we hold more than this for it.
constexpr std::size_t max_queued_output = 2 * max_coordinator_message;

// Bytes sent but not yet acknowledged by the peer; 0 when the kernel cannot tell.
int unacknowledged(int fd) {
  int bytes = 0;
  return ::ioctl(fd, SIOCOUTQ, &bytes) == 0 ? bytes : 0;
}

}  // namespace

MessageConnection::MessageConnection(std::shared_ptr<Carrier> carrier, std::uint64_t id, std::string peer, std::size_t max_line, Instant now)
    : carrier_(std::move(carrier)),
      via_(std::make_shared<const std::string>(encode_frame(RelayVia{{id}}))),
      carried_id_(id),
      peer_(std::move(peer)),
      reader_(max_line),
      last_heard_(now) {}

void MessageConnection::take_line(std::string_view line, Instant now) {
  if (broken()) return;
  last_heard_ = now;
  std::string framed(line);
  framed += '\n';
  if (auto added = reader_.append(framed); !added) fail(added.error().message);
}

void MessageConnection::fail(std::string problem) {
  if (problem_) return;
  problem_ = std::move(problem);
  close_at_relay();
}

void MessageConnection::close_at_relay() {
  if (!carrier_ || closed_at_relay_) return;
  closed_at_relay_ = true;
  carrier_->channel.send(std::make_shared<const std::string>(encode_frame(RelayClose{carried_id_})));
  carrier_->touched = true;
}

void MessageConnection::send(EncodedMessage message) {
  if (broken() || message->empty()) return;
  if (carrier_) {
    if (carrier_->channel.broken()) return fail("its relay " + carrier_->relay.text() + " was lost: " + carrier_->channel.problem());
    carrier_->channel.send(via_);
    carrier_->channel.send(std::move(message));
    carrier_->touched = true;
    return;
  }
  queued_ += message->size();
  output_.push_back(std::move(message));
  if (queued_ > max_queued_output) return fail("the peer does not read what we send");
  flush();
}

void MessageConnection::flush() {
  if (carrier_) return;  // its relay's connection is flushed by whoever keeps it
  while (has_output() && !broken()) {
    const std::string& front = *output_.front();
    ssize_t put = ::send(socket_.fd(), front.data() + sent_, front.size() - sent_, MSG_NOSIGNAL);
    if (put >= 0) {
      sent_ += static_cast<std::size_t>(put);
      queued_ -= static_cast<std::size_t>(put);
      if (sent_ == front.size()) {
        output_.pop_front();
        sent_ = 0;
      }
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      fail(errno_text("send", errno));
    }
  }
}

void MessageConnection::receive(Instant now) {
  if (carrier_) return;  // take_line() brings its lines
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
      fail(errno_text("receive", errno));
    }
  }
}

void MessageConnection::shutdown_write() {
  if (carrier_) return close_at_relay();  // the relay delivers what was sent first, then closes
  if (::shutdown(socket_.fd(), SHUT_WR) != 0 && errno != ENOTCONN) fail(errno_text("shutdown", errno));
}

CarrierInput read_carrier(Carrier& carrier, const std::function<MessageConnection*(std::uint64_t key)>& find, Instant now) {
  CarrierInput input;
  while (auto line = carrier.channel.next_line()) {
    if (carrier.via) {
      for (std::uint64_t id : carrier.via->ids) {
        auto key = carrier.carried.find(id);
        MessageConnection* channel = key == carrier.carried.end() ? nullptr : find(key->second);
        if (!channel) continue;
        channel->take_line(*line, now);
        input.touched.push_back(key->second);
      }
      carrier.via.reset();
      continue;
    }
    auto frame = parse_frame(*line);
    if (!frame) {
      carrier.channel.fail("protocol violation: " + frame.error().message);
      break;
    }
    if (!*frame) {  // the relay's own word: only its heartbeat
      auto message = parse_message(*line, Sender::task);
      if (!message || !std::holds_alternative<Ping>(*message)) {
        carrier.channel.fail("protocol violation: " + (message ? "a '" + std::string(message_type(*message)) + "' from a relay" : message.error().message));
        break;
      }
      continue;
    }
    if (auto* open = std::get_if<RelayOpen>(&**frame)) {
      if (carrier.carried.contains(open->id)) {
        carrier.channel.fail("protocol violation: connection " + std::to_string(open->id) + " opened twice");
        break;
      }
      input.opened.push_back(std::move(*open));
    } else if (auto* via = std::get_if<RelayVia>(&**frame)) {
      carrier.via = std::move(*via);
    } else if (auto* gone = std::get_if<RelayGone>(&**frame)) {
      auto key = carrier.carried.find(gone->id);
      if (MessageConnection* channel = key == carrier.carried.end() ? nullptr : find(key->second)) {
        channel->fail(gone->why);
        input.touched.push_back(key->second);
      }
    } else {
      carrier.channel.fail("protocol violation: a 'close' from a relay");
      break;
    }
  }
  return input;
}

void Fanout::to(MessageConnection& channel) {
  if (channel.broken()) return;
  if (!channel.carried()) return direct_.push_back(&channel);
  carried_[channel.carrier()].push_back(channel.carried_id());
}

// The relays first: their groups have a hop to go, and a relay's own task, hearing the same on its
// own connection, may then keep its machine busy (stopping or starting its command) while the
// relay passes the message on.
void Fanout::send() {
  for (auto& [carrier, ids] : carried_) {
    for (std::size_t first = 0; first < ids.size(); first += max_via_ids) {
      const std::size_t last = std::min(ids.size(), first + max_via_ids);
      carrier->channel.send(std::make_shared<const std::string>(encode_frame(RelayVia{{ids.begin() + first, ids.begin() + last}})));
      carrier->channel.send(message_);
    }
    carrier->touched = true;
  }
  carried_.clear();
  for (MessageConnection* channel : direct_) channel->send(message_);
  direct_.clear();
}

Result<EventSet> EventSet::create() {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return errno_error(exit_code::resources, "control channel: epoll_create1", errno);
  return EventSet(std::move(epoll));
}

void EventSet::watch(int fd, std::uint64_t key, short events) {
  // poll's and epoll's bits for in, out, error and hang-up are the same on Linux.
  epoll_event event{.events = static_cast<std::uint32_t>(events), .data = {.u64 = key}};
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &event) == 0) return;
  if (errno == ENOENT && ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) == 0) return;
  // Only a lack of kernel memory gets here; the connection then times out as a silent one.
  log::warn("control channel: {}", errno_text("epoll_ctl", errno));
}

Result<std::vector<EventSet::Ready>> EventSet::wait(Instant until) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
  int timeout = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 0, 60'000));
  epoll_event events[256];
  int count = ::epoll_wait(epoll_.get(), events, static_cast<int>(std::size(events)), timeout);
  std::vector<Ready> ready;
  if (count < 0) {
    if (errno == EINTR) return ready;
    return errno_error(exit_code::resources, "control channel: epoll_wait", errno);
  }
  for (int i = 0; i < count; ++i) ready.push_back({events[i].data.u64, static_cast<short>(events[i].events)});
  return ready;
}

Result<std::size_t> make_room_for_tasks(std::size_t tasks, std::size_t connections) {
  // A connection per task (or per task of its own group and two per relay, in a tree), an eighth
  // more for tasks that reconnect before their old connection is seen closed, and 64 for the rest:
  // the listener, the event set, the command's pipes and signalfd, c-ares' sockets for the name
  // check, log files.
  const rlim_t needed = static_cast<rlim_t>(connections + connections / 8 + 64);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return errno_error(exit_code::resources, "getrlimit(RLIMIT_NOFILE)", errno);
  if (limit.rlim_cur >= needed) return static_cast<std::size_t>(limit.rlim_cur - 64);
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (limit.rlim_cur < needed) {
    return make_error(exit_code::resources, "the descriptor limit (ulimit -n) is " + std::to_string(limit.rlim_cur) +
                                                " at most, too low for the coordinator of a job of " + std::to_string(tasks) + " tasks (" +
                                                std::to_string(needed) + " needed): raise the container's nofile limit");
  }
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return errno_error(exit_code::resources, "setrlimit(RLIMIT_NOFILE)", errno);
  log::info("control channel: descriptor limit raised from {} to {} for a job of {} tasks", before, limit.rlim_cur, tasks);
  return static_cast<std::size_t>(limit.rlim_cur - 64);
}

std::vector<MessageConnection*> on_the_wire(const std::vector<MessageConnection*>& channels) {
  std::vector<MessageConnection*> wires;
  std::set<MessageConnection*> seen;
  for (MessageConnection* channel : channels) {
    MessageConnection* wire = channel->carried() ? &channel->carrier()->channel : channel;
    if (seen.insert(wire).second) wires.push_back(wire);
  }
  return wires;
}

void deliver(const std::vector<MessageConnection*>& carried_or_not, Instant until) {
  const auto channels = on_the_wire(carried_or_not);
  while (SteadyClock::now() < until) {
    std::vector<pollfd> fds;
    for (MessageConnection* channel : channels) {
      channel->flush();
      if (!channel->broken() && (channel->has_output() || unacknowledged(channel->fd()) > 0)) {
        fds.push_back({channel->fd(), channel->events(), 0});
      }
    }
    if (fds.empty() || !poll_until(fds, std::min(until, SteadyClock::now() + 20ms), "control channel")) return;
    for (MessageConnection* channel : channels) {
      if (revents_of(fds, channel->fd()) & (POLLIN | POLLHUP | POLLERR)) channel->receive(SteadyClock::now());
    }
  }
}

void close_gently(const std::vector<MessageConnection*>& carried_or_not, Instant until) {
  for (MessageConnection* channel : carried_or_not) {
    if (channel->carried()) channel->shutdown_write();
  }
  const auto channels = on_the_wire(carried_or_not);
  deliver(channels, until);
  for (MessageConnection* channel : channels) channel->shutdown_write();
  while (SteadyClock::now() < until) {
    std::vector<pollfd> fds;
    for (MessageConnection* channel : channels) {
      if (!channel->broken()) fds.push_back({channel->fd(), POLLIN, 0});
    }
    if (fds.empty() || !poll_until(fds, until, "control channel")) return;
    for (MessageConnection* channel : channels) {
      if (revents_of(fds, channel->fd()) & (POLLIN | POLLHUP | POLLERR)) {
        channel->receive(SteadyClock::now());
        while (channel->next_line()) {
        }
      }
    }
  }
}

// Dual-stack where the host has IPv6, so that tasks reach us over either family; IPv4 otherwise.
Result<Socket> open_listener(int port) {
  return listen_on_every_address(port, listen_backlog, "--control-port " + std::to_string(port));
}

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
  if (!socket) return errno_error(protocol_violation, "socket", errno);
  if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), size) != 0 && errno != EINPROGRESS) {
    return errno_error(protocol_violation, "connect", errno);
  }
  return socket;
}

Result<void> connect_outcome(int fd) {
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return errno_error(protocol_violation, "getsockopt", errno);
  if (error != 0) return make_error(protocol_violation, std::string("connect: ") + std::strerror(error));
  return {};
}

}  // namespace tfboot
