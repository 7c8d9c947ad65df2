// What this host says about itself: hostname, /etc files, interface addresses, platform files.
#include "plan/host_facts.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
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

// The interfaces, their names and numeric addresses (IPv4 and IPv6, loopback included).
void read_interfaces(HostFacts& facts) {
  std::set<std::string> addresses, names;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;
  for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (entry->ifa_name) names.insert(entry->ifa_name);
    if (!entry->ifa_addr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* address = nullptr;
    int family = entry->ifa_addr->sa_family;
    if (family == AF_INET) address = &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr;
    else if (family == AF_INET6) address = &reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
    if (!address || !::inet_ntop(family, address, text, sizeof text)) continue;
    addresses.insert(text);
    if (entry->ifa_name) facts.interface_of_address.emplace(text, entry->ifa_name);
  }
  ::freeifaddrs(list);
  facts.interface_addresses.assign(addresses.begin(), addresses.end());
  facts.interface_names.assign(names.begin(), names.end());
}

// /dev/nvidia0, /dev/nvidia1, ...: the container runtime mounts exactly the GPUs given to the
// container (nvidiactl and nvidia-uvm are not GPUs).
int count_gpu_devices() {
  DIR* dir = ::opendir("/dev");
  if (!dir) return 0;
  int count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name(entry->d_name);
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ++count;
    }
  }
  ::closedir(dir);
  return count;
}


std::optional<std::string> read_small_file(const std::string& path) {
  auto text = read_text_file(path, max_etc_file);
  if (!text) log::debug("{} is not a readable regular file of at most 1 MiB; ignored", path);
  return text;
}

std::string read_etc_file(const char* path) { return read_small_file(path).value_or(""); }

// Missing files are the rule here: nothing is logged for them.
std::optional<std::string> read_if_present(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  return read_small_file(path);
}

std::optional<int> container_cpu_limit() {
  if (auto v2 = read_if_present("/sys/fs/cgroup/cpu.max")) return cpu_limit_from(*v2, "", "");
  auto quota = read_if_present("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  if (!quota) return std::nullopt;
  return cpu_limit_from("", *quota, read_if_present("/sys/fs/cgroup/cpu/cpu.cfs_period_us").value_or(""));
}

// The CPUs this process may run on (its affinity mask), at most its container's CPU limit.
int count_usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (auto limit = container_cpu_limit()) cpus = std::min(cpus, *limit);
  return std::max(1, cpus);
}

// Why a file that is there cannot be read as a platform's description.
std::string why_unreadable(const std::string& path, const struct stat& info) {
  if (S_ISDIR(info.st_mode)) return "a directory";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (!S_ISREG(info.st_mode)) return "not a regular file";
  if (static_cast<std::size_t>(info.st_size) > max_etc_file) return "larger than 1 MiB";
  if (::access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return "a read failed";
}

// A platform's file: nullopt when there is none. One that is there but cannot be read (a FIFO, a
// directory, no permission) is noted in `files.unreadable` instead: taken for absent, it would let
// the next platform, or none, describe a job this host's files say something else about.
std::optional<std::string> read_platform_file(const std::string& path, PlatformFiles& files) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) files.unreadable[path] = std::strerror(errno);
    return std::nullopt;
  }
  auto text = read_text_file(path, max_etc_file);
  if (!text) files.unreadable[path] = why_unreadable(path, info);
  return text;
}

PlatformFiles platform_files(const std::string& pod_info_dir) {
  PlatformFiles files;
  files.sagemaker_resource_config = read_platform_file(sagemaker_resource_config_path, files);
  for (const char* name : {"chief", "master", "worker", "ps", "evaluator"}) {
    std::string file = std::string(name) + ".host";
    if (auto text = read_platform_file(std::string(volcano_config_dir) + "/" + file, files)) files.volcano_host_files[file] = *text;
  }
  files.pod_info_dir = pod_info_dir;
  files.pod_labels = read_platform_file(files.pod_info_dir + "/labels", files);
  files.pod_annotations = read_platform_file(files.pod_info_dir + "/annotations", files);
  return files;
}

}  // namespace

std::optional<int> cpu_limit_from(std::string_view cpu_max, std::string_view cfs_quota, std::string_view cfs_period) {
  auto number = [](std::string_view text) {
    long long value = -1;
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
  };
  long long quota = number(cfs_quota), period = number(cfs_period);
  if (!cpu_max.empty()) {
    const std::size_t space = cpu_max.find(' ');
    quota = number(cpu_max);  // "max 100000": no limit, no number
    period = space == std::string_view::npos ? 0 : number(cpu_max.substr(space));
  }
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 20));
}

HostFacts gather_host_facts(const std::string& pod_info_dir) {
  HostFacts facts{system_hostname(), read_etc_file("/etc/hosts"), read_etc_file("/etc/resolv.conf"), {},
                  platform_files(pod_info_dir)};
  read_interfaces(facts);
  facts.gpu_devices = count_gpu_devices();
  facts.usable_cpus = count_usable_cpus();
  return facts;
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
