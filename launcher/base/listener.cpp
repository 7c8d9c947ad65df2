// A listening TCP socket on every address of the host.
#include "base/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

namespace tfboot {
namespace {

Result<UniqueFd> listen_on(int family, int port, int backlog, const std::string& what) {
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
    size = sizeof v6;
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(address);
    v4 = sockaddr_in{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_ANY)}};
    size = sizeof v4;
  }
  if (::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(socket.get(), backlog) != 0) {
    return errno_error(exit_code::resources, what + ": cannot listen", errno);
  }
  return socket;
}

}  // namespace

Result<UniqueFd> listen_on_every_address(int port, int backlog, const std::string& what) {
  auto socket = listen_on(AF_INET6, port, backlog, what);
  if (socket) return socket;
  if (auto v4 = listen_on(AF_INET, port, backlog, what)) return v4;
  return socket;  // the first error says more than the fallback's
}

}  // namespace tfboot
