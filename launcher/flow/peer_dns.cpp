// The DNS steps of the flow: the PTR of the own address, and waiting until every peer resolves.
#include "flow/peer_dns.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "base/clock.h"
#include "base/log.h"
#include "base/text.h"
#include "dns/resolver.h"
#include "observe/start_record.h"
#include "plan/kubernetes.h"

namespace tfboot {
namespace {

std::string missing_names(const std::vector<NameStatus>& names, int& count) {
  std::string missing;
  count = 0;
  for (const auto& status : names) {
    if (status.resolved) continue;
    missing += (count++ ? ", " : "") + status.name + " (" + describe(status) + ")";
  }
  return missing;
}

// A stale record or a wrong Service shows up as our own name pointing somewhere else.
std::vector<std::string> own_name_warnings(const std::vector<PeerAddress>& peers, const std::vector<NameStatus>& names,
                                           const Identity& identity, const HostFacts& facts) {
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].type != identity.type || peers[i].index != identity.index) continue;
    bool ours = std::ranges::any_of(names[i].addresses, [&](const std::string& address) {
      return std::ranges::find(facts.interface_addresses, address) != facts.interface_addresses.end();
    });
    if (ours) continue;
    warnings.push_back("own name " + peers[i].name + " resolves to " + joined(names[i].addresses, ",") +
                       ", which is not an address of this host (stale DNS record or wrong Service?)");
    log::warn("{}", warnings.back());
  }
  return warnings;
}

// A name asked while it was missing can be answered from a cache for a while after its record
// appears: the cached NXDOMAIN lives until its negative TTL runs out. Seen by asking for the TTL
// of the negative answer now and then (one extra query every few seconds, for one name only): a
// TTL that counts down comes from a cache. Said once in the log.
class CachedNegativeWatch {
 public:
  CachedNegativeWatch(Resolver& resolver, const PeerAddress& peer, std::string role)
      : resolver_(resolver), name_(peer.lookup_name()), shown_(peer.name), role_(std::move(role)) {}

  void on_failure(const NameStatus& status) {
    const auto now = SteadyClock::now();
    if (said_ || probing_ || status.last_reason != LookupReason::nxdomain || now < next_probe_) return;
    probing_ = true;
    next_probe_ = now + probe_every;
    resolver_.start_negative_ttl_probe(name_, [this, now](std::optional<std::uint32_t> ttl) { on_probe(now, ttl); });
  }

 private:
  static constexpr auto probe_every = std::chrono::seconds(3);

  void on_probe(Instant asked, std::optional<std::uint32_t> ttl) {
    probing_ = false;
    if (!ttl) return;
    log::debug("{}: NXDOMAIN with a negative TTL of {}s", shown_, *ttl);
    if (last_ && *ttl < last_->second) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(asked - last_->first).count();
      const auto dropped = static_cast<long long>(last_->second - *ttl);
      if (dropped >= elapsed - 2 && dropped <= elapsed + 2) {
        said_ = true;
        log::info("{} {} is missing, and its NXDOMAIN comes from a DNS cache (the negative TTL counts down, "
                  "{}s left): if its record appears meanwhile, it is seen when that runs out",
                  role_, shown_, *ttl);
      }
    }
    last_ = std::pair{asked, *ttl};
  }

  Resolver& resolver_;
  std::string name_;   // as asked: fully qualified, with the trailing dot
  std::string shown_;  // as TF_CONFIG shows it
  std::string role_;
  bool probing_ = false;
  bool said_ = false;
  Instant next_probe_{};
  std::optional<std::pair<Instant, std::uint32_t>> last_;
};

}  // namespace

// The resolver sees /etc/resolv.conf and /etc/hosts only as tfboot read them (host_facts.h).
ResolverSettings resolver_settings(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                   bool use_hosts_file) {
  ResolverSettings settings;
  settings.servers = dns_servers;
  if (options.dns_server) settings.servers_given = quoted(*options.dns_server);
  ResolvConf resolv = parse_resolv_conf(facts.resolv_conf);
  settings.nameservers = resolv.nameservers;
  settings.search = resolv.search;
  settings.ndots = resolv.ndots;
  if (use_hosts_file) settings.hosts_file = facts.hosts_file;
  return settings;
}

Result<Setting> find_own_ptr_name(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                  Instant deadline) {
  auto candidates = routable_addresses(facts.interface_addresses);
  if (candidates.empty()) return usage_error("--identity-from ptr: this host has no address besides loopback");
  auto resolver = make_cares_resolver(resolver_settings(options, dns_servers, facts, false));
  if (!resolver) return std::unexpected(resolver.error());

  const auto started = SteadyClock::now();
  LookupResult last;
  int tries = 0;
  while (SteadyClock::now() < deadline) {
    std::optional<LookupResult> answer;
    ++tries;
    (*resolver)->start_reverse_lookup(candidates.front(), [&](LookupResult result) { answer = std::move(result); });
    while (!answer && SteadyClock::now() < deadline) (*resolver)->process(std::chrono::milliseconds(100));
    if (!answer) break;
    last = std::move(*answer);
    if (last.status == LookupStatus::resolved) {
      log::info("PTR of own address {} is {} (after {} tries)", candidates.front(), last.addresses.front(), tries);
      return Setting{last.addresses.front(), "PTR of " + candidates.front()};
    }
    log::debug("PTR of {}: {}", candidates.front(), last.error);
    (*resolver)->process(std::min(std::chrono::milliseconds(500), std::chrono::ceil<std::chrono::milliseconds>(
                                                                      std::max(deadline - SteadyClock::now(), SteadyClock::duration::zero()))));
  }
  auto limit = std::chrono::round<std::chrono::seconds>(deadline - started);
  return make_error(exit_code::peers_unresolved, "--identity-from ptr: the PTR record of own address " + candidates.front() +
                                                     " did not resolve within " + seconds_text(std::chrono::milliseconds(limit)) + " (" +
                                                     (last.error.empty() ? std::string("timeout") : last.error) + ")");
}

Result<std::vector<std::string>> resolve_once(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                              const PeerAddress& peer, std::chrono::milliseconds at_most) {
  auto resolver = make_cares_resolver(resolver_settings(options, dns_servers, facts, !peer.fully_qualified));
  if (!resolver) return std::unexpected(resolver.error());
  std::optional<LookupResult> answer;
  (*resolver)->start_lookup(peer.lookup_name(), [&](LookupResult result) { answer = std::move(result); });
  const auto deadline = SteadyClock::now() + at_most;
  while (!answer && SteadyClock::now() < deadline) (*resolver)->process(std::chrono::milliseconds(100));
  if (!answer) return make_error(exit_code::peers_unresolved, "DNS in trouble: timeout");
  if (answer->status != LookupStatus::resolved) {
    NameStatus status{.name = peer.name, .tries = 1, .last_status = answer->status, .last_error = answer->error};
    status.last_reason = answer->reason;
    return make_error(exit_code::peers_unresolved, describe(status));
  }
  return answer->addresses;
}

Result<DnsResult> resolve_peer_names(const Options& options, const std::vector<DnsServer>& dns_servers, const std::vector<PeerAddress>& peers,
                                     const HostFacts& facts, Instant deadline, std::optional<std::size_t> watched) {
  DnsResult result;
  // With a Service the pod's own /etc/hosts line would answer for itself; only DNS counts.
  auto resolver = make_cares_resolver(resolver_settings(options, dns_servers, facts, peers.empty() || !peers.front().fully_qualified));
  if (!resolver) return std::unexpected(resolver.error());
  result.servers = (*resolver)->servers();

  std::vector<std::string> names;
  for (const auto& peer : peers) names.push_back(peer.lookup_name());
  WaitPolicy policy;
  std::optional<CachedNegativeWatch> watch;
  if (watched && *watched < peers.size() && peers[*watched].fully_qualified) {
    watch.emplace(**resolver, peers[*watched], "the coordinator's name");
  }
  policy.on_failure = [&watch, watched](std::size_t i, const NameStatus& status) {
    observe::count_failed_lookup(status.last_reason);  // docs/observing.md
    if (watch && i == *watched) watch->on_failure(status);
  };
  policy.deadline = std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now()));
  // What is left of --wait, to the second (the steps before took a few milliseconds of it).
  auto shown = policy.deadline >= std::chrono::seconds(1) ? std::chrono::milliseconds(std::chrono::round<std::chrono::seconds>(policy.deadline))
                                                           : policy.deadline;
  log::info("waiting up to {} for {} to resolve through {}", seconds_text(shown), counted(names.size(), "name"),
            result.servers.empty() ? std::string("no servers") : result.servers.front());
  auto outcome = wait_for_names(**resolver, names, policy, [] { return SteadyClock::now(); },
                                static_cast<std::uint64_t>(::getpid()) ^
                                    static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  result.seconds = static_cast<double>(outcome.elapsed.count()) / 1000.0;
  result.names = std::move(outcome.names);
  observe::count_lookups(result.names);
  if (!outcome.all_resolved) {
    // Only an answer that the name does not exist says so; a lookup never answered is DNS trouble.
    if (watched && *watched < result.names.size() && !result.names[*watched].resolved && result.names[*watched].tries > 0 &&
        (result.names[*watched].last_reason == LookupReason::nxdomain ||
         result.names[*watched].last_reason == LookupReason::no_address_records)) {
      // Finding the coordinator is part of the start: a coordinator whose name was never published
      // is a task missing at the barrier (exit 5), not a DNS in trouble.
      const NameStatus& coordinator = result.names[*watched];
      return make_error(exit_code::start_barrier_incomplete,
                        "start barrier incomplete after " + seconds_text(std::max(options.wait, options.start_timeout)) +
                            ": no start from the coordinator " + peers[*watched].task() +
                            " (" + coordinator.name + "); its name was never published (" + describe(coordinator) +
                            "); check that the coordinator's pod runs and that its name is published (a headless "
                            "Service with publishNotReadyAddresses: true, the pod's hostname and subdomain)");
    }
    int count = 0;
    std::string missing = missing_names(result.names, count);
    const std::string how_many = names.size() == 1 ? "the name did not resolve"
                                                   : std::to_string(count) + " of " + counted(names.size(), "name") + " did not resolve";
    const std::string within = watched ? "within " + seconds_text(std::max(options.wait, options.start_timeout)) + " (--wait, or --start-timeout when longer)"
                                       : "within --wait " + seconds_text(options.wait);
    return make_error(exit_code::peers_unresolved, how_many + " " + within + ": " + missing);
  }
  log::info("{} after {:.3f}s", names.size() == 1 ? std::string("the name resolves") : "all " + counted(names.size(), "name") + " resolve", result.seconds);
  return result;
}

Result<DnsResult> wait_for_peers(const Options& options, const std::vector<DnsServer>& dns_servers, const std::vector<PeerAddress>& peers,
                                 const Identity& identity, const HostFacts& facts, Instant deadline, std::optional<std::size_t> watched) {
  auto result = resolve_peer_names(options, dns_servers, peers, facts, deadline, watched);
  if (result) result->warnings = own_name_warnings(peers, result->names, identity, facts);
  return result;
}

}  // namespace tfboot
