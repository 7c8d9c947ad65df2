// What this host says about itself, gathered once before any planning: the hostname, the pod's
// /etc/hosts and /etc/resolv.conf, the interface addresses, the files in which a platform describes
// the job. Local reads only, never the network; the plan is then a pure function of options,
// environment and these facts.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/setting.h"

namespace tfboot {

// Where SageMaker and Volcano write their description of the job (docs/identity.md).
inline constexpr const char* sagemaker_resource_config_path = "/opt/ml/input/config/resourceconfig.json";
inline constexpr const char* volcano_config_dir = "/etc/volcano";

// Each file's text, nullopt when it is missing or not a readable regular file of at most 1 MiB.
struct PlatformFiles {
  std::optional<std::string> sagemaker_resource_config;
  std::map<std::string, std::string> volcano_host_files;  // "worker.host" -> text, for the task types' names
  std::string pod_info_dir;                               // --pod-info-dir, where the next two come from
  std::optional<std::string> pod_labels;                  // <pod_info_dir>/labels
  std::optional<std::string> pod_annotations;             // <pod_info_dir>/annotations
  // Those that are there but cannot be read, path -> why ("a FIFO", "Permission denied"): the
  // platform they belong to stops with exit 2 naming them, rather than take them for absent.
  std::map<std::string, std::string> unreadable;
};

struct HostFacts {
  std::string system_hostname;                   // gethostname(), "" when it fails
  std::string hosts_file;                        // /etc/hosts, "" when missing or unreadable
  std::string resolv_conf;                       // /etc/resolv.conf, likewise
  std::vector<std::string> interface_addresses;  // numeric, IPv4 and IPv6, loopback included
  PlatformFiles platform_files;
  std::map<std::string, std::string> interface_of_address;  // numeric address -> its interface ("eth0")
  std::vector<std::string> interface_names;                 // every interface, with or without an address
  int gpu_devices = 0;  // /dev/nvidia<N> device nodes: the GPUs the container sees
  int usable_cpus = 1;  // the CPUs this process may run on (its affinity mask)
};

// `pod_info_dir`: where a JobSet's pod-info files are (--pod-info-dir).
HostFacts gather_host_facts(const std::string& pod_info_dir);

// A container's CPU limit in whole CPUs, rounded up, from cgroup v2's cpu.max ("200000 100000")
// or, when that is empty, v1's CFS quota and period; nullopt without a limit ("max 100000", -1).
std::optional<int> cpu_limit_from(std::string_view cpu_max, std::string_view cfs_quota, std::string_view cfs_period);

// Interface addresses that can name this host to others: neither loopback nor link-local,
// IPv4 first (compose networks are IPv4 unless configured otherwise).
std::vector<std::string> routable_addresses(const std::vector<std::string>& addresses);

}  // namespace tfboot
