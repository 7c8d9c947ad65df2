// Sockets: listen on every address, accept, poll until a deadline (socket.h).
#include "base/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

std::string address_text(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    if (!::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host)) return "?";
    port = ntohs(v4.sin_port);
    return join_host_port(host, port);
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  port = ntohs(v6.sin6_port);
  // The dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; shown as the IPv4 they are.
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    if (!::inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], host, sizeof host)) return "?";
    return join_host_port(host, port);
  }
  if (!::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host)) return "?";
  return join_host_port(host, port);
}

// `host`: a numeric address, or "" for every address of `family`.
Result<UniqueFd> listen_on(int family, int port, int backlog, const std::string& what, const std::string& host = "") {
  UniqueFd socket(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) return errno_error(exit_code::resources, what + ": socket", errno);
  int on = 1;
  int off = 0;
  // A restarted tfboot must get its port back while old connections sit in TIME_WAIT; and an
  // IPv6 socket must take IPv4 peers too, whatever the host's bindv6only says.
  if (::setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      (family == AF_INET6 && ::setsockopt(socket.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0)) {
    return errno_error(exit_code::resources, what + ": setsockopt", errno);
  }
  sockaddr_storage address{};
  socklen_t size = 0;
  if (family == AF_INET6) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
    v6 = sockaddr_in6{.sin6_family = AF_INET6, .sin6_port = htons(static_cast<std::uint16_t>(port)), .sin6_addr = in6addr_any};
    if (!host.empty() && ::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) != 1) return make_error(exit_code::resources, what + ": '" + host + "' is not an IPv6 address");
    size = sizeof v6;
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(address);
    v4 = sockaddr_in{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_ANY)}};
    if (!host.empty() && ::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) != 1) return make_error(exit_code::resources, what + ": '" + host + "' is not an IPv4 address");
    size = sizeof v4;
  }
  if (::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(socket.get(), backlog) != 0) {
    return errno_error(exit_code::resources, what + ": cannot listen", errno);
  }
  return socket;
}

}  // namespace

Result<Socket> listen_on_every_address(int port, int backlog, const std::string& what) {
  auto socket = listen_on(AF_INET6, port, backlog, what);
  if (socket) return Socket(socket->release());
  if (auto v4 = listen_on(AF_INET, port, backlog, what)) return Socket(v4->release());
  return std::unexpected(socket.error());  // the first error says more than the fallback's
}

Result<Socket> listen_on_address(const std::string& host, int port, int backlog, const std::string& what) {
  const int family = host.find(':') == std::string::npos ? AF_INET : AF_INET6;
  auto socket = listen_on(family, port, backlog, what + " on " + host, host);
  if (!socket) return std::unexpected(socket.error());
  return Socket(socket->release());
}

AcceptedConnection accept_one(int listener, std::string_view what) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&address), &size, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) return AcceptedConnection{.socket = Socket(fd), .peer = address_text(address)};
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {};
  log::debug("{}: {}", what, errno_text("accept", errno));
  return AcceptedConnection{.failed = true};
}

Result<void> poll_until(std::vector<pollfd>& fds, Instant until, std::string_view what) {
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
  int timeout = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(wait.count(), 0, 60'000));
  if (::poll(fds.data(), fds.size(), timeout) >= 0) return {};
  if (errno == EINTR) {
    for (auto& fd : fds) fd.revents = 0;
    return {};
  }
  return errno_error(exit_code::resources, std::string(what) + ": poll", errno);
}

short revents_of(const std::vector<pollfd>& fds, int fd) {
  for (const auto& entry : fds) {
    if (entry.fd == fd) return entry.revents;
  }
  return 0;
}

std::string address_of_peer(std::string_view peer) {
  auto colon = peer.rfind(':');
  std::string_view host = colon == std::string_view::npos ? peer : peer.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::string(host);
}

std::string local_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in&>(address).sin_addr, text, sizeof text);
    return text;
  }
  if (address.ss_family != AF_INET6) return "";
  const in6_addr& v6 = reinterpret_cast<sockaddr_in6&>(address).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {  // a dual-stack listener's IPv4 connection: said as IPv4
    ::inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof text);
    return text;
  }
  ::inet_ntop(AF_INET6, &v6, text, sizeof text);
  return text;
}

}  // namespace tfboot
