// What this host says about itself: hostname, /etc files, interface addresses.
#include "host_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <set>

#include "files.h"
#include "log.h"

namespace tfboot {
namespace {

// resolv.conf and hosts files are a few KiB; anything far larger is not what we expect.
constexpr std::size_t max_etc_file = 1024 * 1024;

std::string system_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::vector<std::string> interface_addresses() {
  std::set<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* address = nullptr;
    int family = entry->ifa_addr->sa_family;
    if (family == AF_INET) address = &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr;
    else if (family == AF_INET6) address = &reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
    if (address && ::inet_ntop(family, address, text, sizeof text)) addresses.insert(text);
  }
  ::freeifaddrs(list);
  return {addresses.begin(), addresses.end()};
}

std::string read_etc_file(const char* path) {
  auto text = read_text_file(path, max_etc_file);
  if (!text) log::debug("{} is not a readable regular file of at most 1 MiB; ignored", path);
  return text.value_or("");
}

}  // namespace

HostFacts gather_host_facts() {
  return HostFacts{system_hostname(), read_etc_file("/etc/hosts"), read_etc_file("/etc/resolv.conf"), interface_addresses()};
}

std::vector<std::string> routable_addresses(const std::vector<std::string>& addresses) {
  std::vector<std::string> ipv4, ipv6;
  for (const auto& address : addresses) {
    bool local = address.starts_with("127.") || address == "::1" || address.starts_with("fe80:");
    if (!local) (address.find(':') == std::string::npos ? ipv4 : ipv6).push_back(address);
  }
  ipv4.insert(ipv4.end(), ipv6.begin(), ipv6.end());
  return ipv4;
}

}  // namespace tfboot
