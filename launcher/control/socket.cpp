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

void MessageConnection::send(EncodedMessage message) {
  if (broken() || message->empty()) return;
  queued_ += message->size();
  output_.push_back(std::move(message));
  if (queued_ > max_queued_output) return fail("the peer does not read what we send");
  flush();
}

void MessageConnection::flush() {
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
  if (::shutdown(socket_.fd(), SHUT_WR) != 0 && errno != ENOTCONN) fail(errno_text("shutdown", errno));
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

Result<std::size_t> make_room_for_tasks(std::size_t tasks) {
  // A connection per task, an eighth more for tasks that reconnect before their old connection
  // is seen closed, and 64 for the rest: the listener, the event set, the command's pipes and
  // signalfd, c-ares' sockets for the name check, log files.
  const rlim_t needed = static_cast<rlim_t>(tasks + tasks / 8 + 64);
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

void deliver(const std::vector<MessageConnection*>& channels, Instant until) {
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

void close_gently(const std::vector<MessageConnection*>& channels, Instant until) {
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
