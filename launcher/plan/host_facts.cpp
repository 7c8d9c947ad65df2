// What this host says about itself: hostname, /etc files, interface addresses, platform files.
#include "plan/host_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <set>

#include "base/files.h"
#include "base/log.h"
#include "dns/names.h"

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

std::optional<std::string> read_small_file(const std::string& path) {
  auto text = read_text_file(path, max_etc_file);
  if (!text) log::debug("{} is not a readable regular file of at most 1 MiB; ignored", path);
  return text;
}

std::string read_etc_file(const char* path) { return read_small_file(path).value_or(""); }

// Missing files are the rule here (a host runs on at most one platform): nothing is logged for them.
std::optional<std::string> read_if_present(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  return read_small_file(path);
}

PlatformFiles platform_files(const Options& options) {
  PlatformFiles files;
  files.sagemaker_resource_config = read_if_present(sagemaker_resource_config_path);
  for (const char* name : {"chief", "master", "worker", "ps", "evaluator"}) {
    std::string file = std::string(name) + ".host";
    if (auto text = read_if_present(std::string(volcano_config_dir) + "/" + file)) files.volcano_host_files[file] = *text;
  }
  files.pod_info_dir = options.pod_info_dir.value;
  files.pod_labels = read_if_present(files.pod_info_dir + "/labels");
  files.pod_annotations = read_if_present(files.pod_info_dir + "/annotations");
  return files;
}

}  // namespace

HostFacts gather_host_facts(const Options& options) {
  return HostFacts{system_hostname(), read_etc_file("/etc/hosts"), read_etc_file("/etc/resolv.conf"), interface_addresses(),
                   platform_files(options)};
}

std::vector<std::string> routable_addresses(const std::vector<std::string>& addresses) {
  std::vector<std::string> ipv4, ipv6;
  for (const auto& address : addresses) {
    bool local = is_loopback_address(address) || address.starts_with("fe80:");
    if (!local) (address.find(':') == std::string::npos ? ipv4 : ipv6).push_back(address);
  }
  ipv4.insert(ipv4.end(), ipv6.begin(), ipv6.end());
  return ipv4;
}

}  // namespace tfboot
