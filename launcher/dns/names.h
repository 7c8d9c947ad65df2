// DNS names and lookup outcomes, pure: how a lookup ended (status, reason, the text users read),
// the --dns-server list, reverse-lookup names and /etc/hosts lines. The c-ares Resolver
// (resolver.h) and the DNS wait build on these.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"

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

struct DnsServer {
  std::string address;  // numeric IPv4 or IPv6, without brackets
  int port = 53;
  bool operator==(const DnsServer&) const = default;
};

// "ip[:port],..." with IPv6 as "[ip]:port" (or a bare IPv6 address, port 53) and ports in
// 1..65535. An error names `source` (the flag or its env twin) and quotes the whole list.
Result<std::vector<DnsServer>> parse_dns_servers(std::string_view list, std::string_view source);

// 127.0.0.0/8 or ::1, as numeric text.
bool is_loopback_address(std::string_view address);

// "10.1.2.3" -> "3.2.1.10.in-addr.arpa", IPv6 as nibbles under ip6.arpa; nullopt unless numeric.
std::optional<std::string> reverse_lookup_name(std::string_view address);

// The TTL of the SOA record in the authority section of a negative DNS answer (NXDOMAIN or
// NODATA), as sent: a cache counts it down, an authoritative server always gives the same.
// nullopt for anything else, a truncated or malformed message included.
std::optional<std::uint32_t> negative_answer_ttl(std::span<const unsigned char> message);

// /etc/hosts read once, so that a job's thousands of names cost a lookup each, not a pass over
// the file each.
class HostsFile {
 public:
  explicit HostsFile(std::string_view text);
  // The addresses given `name` (case-insensitive, a trailing dot ignored), IPv4 first, each once.
  std::vector<std::string> addresses(std::string_view name) const;

 private:
  struct Listed {
    std::vector<std::string> v4, v6;
  };
  std::unordered_map<std::string, Listed> by_name_;
};

// The addresses /etc/hosts gives `name` (case-insensitive, a trailing dot ignored), IPv4 first.
std::vector<std::string> addresses_in_hosts_file(std::string_view hosts_text, std::string_view name);

}  // namespace tfboot
