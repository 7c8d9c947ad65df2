// What this host says about itself, gathered once before any planning: the hostname, the pod's
// /etc/hosts and /etc/resolv.conf, the interface addresses. Local reads only, never the network;
// the plan is then a pure function of options, environment and these facts.
#pragma once

#include <string>
#include <vector>

namespace tfboot {

struct HostFacts {
  std::string system_hostname;                   // gethostname(), "" when it fails
  std::string hosts_file;                        // /etc/hosts, "" when missing or unreadable
  std::string resolv_conf;                       // /etc/resolv.conf, likewise
  std::vector<std::string> interface_addresses;  // numeric, IPv4 and IPv6, loopback included
};

HostFacts gather_host_facts();

// Interface addresses that can name this host to others: neither loopback nor link-local,
// IPv4 first (compose networks are IPv4 unless configured otherwise).
std::vector<std::string> routable_addresses(const std::vector<std::string>& addresses);

}  // namespace tfboot
