// The interface whose route reaches the coordinator (interface.h).
#include "framework/interface.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/unique_fd.h"

namespace tfboot {

std::optional<std::string> interface_towards(const std::vector<std::string>& addresses, const HostFacts& facts) {
  for (const std::string& address : addresses) {
    // Our own address (the coordinator itself): the interface that holds it.
    if (auto own = facts.interface_of_address.find(address); own != facts.interface_of_address.end()) return own->second;
    sockaddr_storage target{};
    socklen_t length = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&target);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&target);
    if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(9);
      length = sizeof *v4;
    } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(9);
      length = sizeof *v6;
    } else {
      continue;
    }
    // connect() on a datagram socket only picks the route and the source address.
    UniqueFd fd(::socket(target.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), length) != 0) continue;
    sockaddr_storage source{};
    socklen_t source_length = sizeof source;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&source), &source_length) != 0) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* bytes = source.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&source)->sin_addr)
                                                    : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&source)->sin6_addr);
    if (!::inet_ntop(source.ss_family, bytes, text, sizeof text)) continue;
    if (auto found = facts.interface_of_address.find(text); found != facts.interface_of_address.end()) return found->second;
  }
  return std::nullopt;
}

}  // namespace tfboot
