// The DNS steps of the flow: the PTR of the own address, and waiting until every peer resolves
// (docs/identity.md, DNS wait). Effectful: it talks to the DNS server through the c-ares Resolver.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/options.h"
#include "dns/wait.h"
#include "plan/cluster.h"
#include "plan/host_facts.h"
#include "plan/identity.h"

namespace tfboot {

struct DnsResult {
  std::vector<NameStatus> names;
  std::vector<std::string> servers;
  std::vector<std::string> warnings;
  double seconds = 0;
};

// Resolves every name of `peers` before `deadline`: exit 3 naming each missing one, else their
// addresses in the order of `peers`. `watched`: the position of the coordinator's name, whose
// NXDOMAIN answers are checked for coming from a cache (said in the log).
Result<DnsResult> resolve_peer_names(const Options& options, const std::vector<DnsServer>& dns_servers, const std::vector<PeerAddress>& peers,
                                     const HostFacts& facts, Instant deadline,
                                     std::optional<std::size_t> watched = std::nullopt);

// resolve_peer_names, plus a warning when the own name (if among `peers`) points at another host.
Result<DnsResult> wait_for_peers(const Options& options, const std::vector<DnsServer>& dns_servers, const std::vector<PeerAddress>& peers,
                                 const Identity& identity, const HostFacts& facts, Instant deadline,
                                 std::optional<std::size_t> watched = std::nullopt);

// One lookup of `peer`'s name, for at most `at_most`: its addresses, or the error as text
// ("not published yet: NXDOMAIN"). Used to find the job's coordinator before each connection.
Result<std::vector<std::string>> resolve_once(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                              const PeerAddress& peer, std::chrono::milliseconds at_most);

// Docker's embedded DNS answers the PTR of a container's IP with "<project>-<service>-<N>.<network>".
// Retried until `deadline`, since the record may lag the container's start.
Result<Setting> find_own_ptr_name(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                  Instant deadline);

// What every lookup of this task goes to: `dns_servers` (--dns-server as check_options parsed
// it), else resolv.conf's nameservers, with its search list and, when `use_hosts_file`, /etc/hosts.
ResolverSettings resolver_settings(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                   bool use_hosts_file);

}  // namespace tfboot
