// Name lookups behind a small interface: c-ares in production, a fake in unit tests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error.h"

namespace tfboot {

// "Not published yet" and "DNS in trouble" call for different actions by the user.
enum class LookupStatus { resolved, not_published, dns_trouble };

// Why a lookup ended as it did. Code decides on this; users read LookupResult::error.
enum class LookupReason {
  none,                // resolved
  nxdomain,            // the name does not exist
  no_address_records,  // the name exists without an A or AAAA record
  no_ptr_record,       // the reverse name exists without a PTR record
  timeout,
  servfail,
  refused,             // the server answered REFUSED
  connection_refused,  // nothing listens at the server's address
  bad_address,         // a reverse lookup of something that is not a numeric address
  other,
};

struct LookupResult {
  LookupStatus status = LookupStatus::dns_trouble;
  std::vector<std::string> addresses;  // numeric, IPv4 before IPv6; the name for a reverse lookup
  std::string error;                   // for users: "NXDOMAIN", "timeout", "SERVFAIL", ...; empty once resolved
  LookupReason reason = LookupReason::other;
};

// A resolved lookup.
LookupResult lookup_success(std::vector<std::string> addresses);
// A failed lookup: its status and its text follow from the reason; `detail` is the text of `other`.
LookupResult lookup_failure(LookupReason reason, std::string detail = {});

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Starts one lookup of a name's addresses; `done` is called from within process().
  virtual void start_lookup(const std::string& name, std::function<void(LookupResult)> done) = 0;
  // Starts one reverse (PTR) lookup of a numeric address; the name comes back in `addresses`.
  virtual void start_reverse_lookup(const std::string& address, std::function<void(LookupResult)> done) = 0;
  // Handles network events for at most `budget`, running callbacks of finished lookups.
  virtual void process(std::chrono::milliseconds budget) = 0;
  // The servers queried, for the log and startup.json.
  virtual std::vector<std::string> servers() const = 0;
};

struct DnsServer {
  std::string address;  // numeric IPv4 or IPv6, without brackets
  int port = 53;
  bool operator==(const DnsServer&) const = default;
};

// "ip[:port],..." with IPv6 as "[ip]:port" (or a bare IPv6 address, port 53) and ports in
// 1..65535. An error names `source` (the flag or its env twin) and quotes the whole list.
Result<std::vector<DnsServer>> parse_dns_servers(std::string_view list, std::string_view source);

// "10.1.2.3" -> "3.2.1.10.in-addr.arpa", IPv6 as nibbles under ip6.arpa; nullopt unless numeric.
std::optional<std::string> reverse_lookup_name(std::string_view address);

struct ResolverSettings {
  std::string servers_csv;  // "ip[:port],..." (see parse_dns_servers) or empty for resolv.conf's
  std::string servers_source;
  std::chrono::milliseconds per_try_timeout{500};
  // What /etc/resolv.conf says, as tfboot read it (host_facts.h): c-ares is never let near the
  // /etc files itself, since a FIFO or a device there would block it for ever. No nameserver:
  // 127.0.0.1, as glibc does.
  std::vector<std::string> nameservers;
  std::vector<std::string> search;
  int ndots = 1;
  // The text of /etc/hosts, answered before DNS, as glibc's "hosts: files dns" does; nullopt:
  // DNS only, so a pod's own /etc/hosts line proves nothing.
  std::optional<std::string> hosts_file;
};

// The addresses /etc/hosts gives `name` (case-insensitive, a trailing dot ignored), IPv4 first.
std::vector<std::string> addresses_in_hosts_file(std::string_view hosts_text, std::string_view name);

Result<std::unique_ptr<Resolver>> make_cares_resolver(const ResolverSettings& settings);

}  // namespace tfboot
