// The DNS steps of the flow: the PTR of the own address, and waiting until every peer resolves.
#include "peer_dns.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "log.h"

#include "resolver.h"

namespace tfboot {
namespace {

std::set<std::string> own_interface_addresses() {
  std::set<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses;
  for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (entry->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text);
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr, text, sizeof text);
    } else {
      continue;
    }
    addresses.insert(text);
  }
  ::freeifaddrs(list);
  return addresses;
}

ResolverSettings resolver_settings(const Options& options, bool use_hosts_file) {
  ResolverSettings settings;
  if (options.dns_server) {
    settings.servers_csv = options.dns_server->value;
    settings.servers_source = options.dns_server->source;
  }
  settings.use_hosts_file = use_hosts_file;
  return settings;
}

bool is_loopback_or_link_local(const std::string& address) {
  return address.starts_with("127.") || address == "::1" || address.starts_with("fe80:");
}

}  // namespace

// Retried until --wait (at least a few seconds) since the record may lag the container's start.
Result<Setting> find_own_ptr_name(const Options& options) {
  auto mine = own_interface_addresses();
  // IPv4 first: compose networks are IPv4 unless configured otherwise.
  std::vector<std::string> candidates, ipv6;
  for (const auto& address : mine) {
    if (is_loopback_or_link_local(address)) continue;
    (address.find(':') == std::string::npos ? candidates : ipv6).push_back(address);
  }
  candidates.insert(candidates.end(), ipv6.begin(), ipv6.end());
  if (candidates.empty()) return usage_error("--identity-from ptr: this host has no address besides loopback");
  auto resolver = make_cares_resolver(resolver_settings(options, false));
  if (!resolver) return std::unexpected(resolver.error());

  auto limit = std::max<std::chrono::milliseconds>(options.wait, std::chrono::seconds(5));
  auto deadline = std::chrono::steady_clock::now() + limit;
  LookupResult last;
  int tries = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<LookupResult> answer;
    ++tries;
    (*resolver)->start_reverse_lookup(candidates.front(), [&](LookupResult result) { answer = std::move(result); });
    while (!answer && std::chrono::steady_clock::now() < deadline) (*resolver)->process(std::chrono::milliseconds(100));
    if (!answer) break;
    last = std::move(*answer);
    if (last.status == LookupStatus::resolved) {
      log::info("PTR of own address {} is {} (after {} tries)", candidates.front(), last.addresses.front(), tries);
      return Setting{last.addresses.front(), "PTR of " + candidates.front()};
    }
    log::debug("PTR of {}: {}", candidates.front(), last.error);
    (*resolver)->process(std::chrono::milliseconds(500));
  }
  return make_error(exit_code::peers_unresolved, "--identity-from ptr: the PTR record of own address " +
                                                     candidates.front() + " did not resolve within " +
                                                     std::to_string(limit.count() / 1000) + "s (" +
                                                     (last.error.empty() ? std::string("timeout") : last.error) + ")");
}

namespace {

std::string wait_text(std::chrono::milliseconds wait) {
  return wait.count() % 1000 == 0 ? std::to_string(wait.count() / 1000) + "s" : std::to_string(wait.count()) + "ms";
}


}  // namespace

Result<DnsResult> wait_for_peers(const Options& options, const std::vector<PeerAddress>& peers, const Identity& identity) {
  DnsResult result;
  // With a Service the pod's own /etc/hosts line would answer for itself; only DNS counts.
  auto resolver = make_cares_resolver(resolver_settings(options, peers.empty() || !peers.front().fully_qualified));
  if (!resolver) return std::unexpected(resolver.error());
  result.servers = (*resolver)->servers();

  std::vector<std::string> names;
  for (const auto& peer : peers) names.push_back(peer.lookup_name());
  WaitPolicy policy;
  policy.deadline = options.wait;
  log::info("waiting up to {} for {} names to resolve through {}", wait_text(options.wait), names.size(),
               result.servers.empty() ? std::string("no servers") : result.servers.front());
  auto outcome = wait_for_names(**resolver, names, policy, [] { return std::chrono::steady_clock::now(); },
                                static_cast<std::uint64_t>(::getpid()) ^
                                    static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  result.seconds = static_cast<double>(outcome.elapsed.count()) / 1000.0;
  result.names = std::move(outcome.names);
  if (!outcome.all_resolved) {
    std::string missing;
    int count = 0;
    for (const auto& status : result.names) {
      if (status.resolved) continue;
      missing += (count++ ? ", " : "") + status.name + " (" + describe(status) + ")";
    }
    return make_error(exit_code::peers_unresolved, std::to_string(count) + " of " + std::to_string(names.size()) +
                                                       " names did not resolve within --wait " + wait_text(options.wait) +
                                                       ": " + missing);
  }
  log::info("all {} names resolve after {:.3f}s", names.size(), result.seconds);

  // A stale record or a wrong Service shows up as our own name pointing somewhere else.
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const PeerAddress& peer = peers[i];
    if (peer.type != identity.type || peer.index != identity.index) continue;
    auto mine = own_interface_addresses();
    bool ours = std::ranges::any_of(result.names[i].addresses, [&](const std::string& a) { return mine.contains(a); });
    if (!ours) {
      std::string addresses;
      for (const auto& a : result.names[i].addresses) addresses += (addresses.empty() ? "" : ",") + a;
      result.warnings.push_back("own name " + peer.name + " resolves to " + addresses +
                                ", which is not an address of this host (stale DNS record or wrong Service?)");
      log::warn("{}", result.warnings.back());
    }
  }
  return result;
}

}  // namespace tfboot
