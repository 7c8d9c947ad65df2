// DNS names and lookup outcomes: lookup texts, --dns-server parsing, reverse names, /etc/hosts.
#include "dns/names.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <expected>

#include "base/text.h"

namespace tfboot {

LookupResult lookup_success(std::vector<std::string> addresses) {
  return {LookupStatus::resolved, std::move(addresses), "", LookupReason::none};
}

LookupResult lookup_failure(LookupReason reason, std::string detail) {
  auto result = [&](LookupStatus status, std::string text) { return LookupResult{status, {}, std::move(text), reason}; };
  switch (reason) {
    case LookupReason::none: break;
    case LookupReason::nxdomain: return result(LookupStatus::not_published, "NXDOMAIN");
    case LookupReason::no_address_records: return result(LookupStatus::not_published, "no address records");
    case LookupReason::no_ptr_record: return result(LookupStatus::not_published, "no PTR record");
    case LookupReason::bad_address: return result(LookupStatus::not_published, "not a numeric address");
    case LookupReason::timeout: return result(LookupStatus::dns_trouble, "timeout");
    case LookupReason::servfail: return result(LookupStatus::dns_trouble, "SERVFAIL");
    case LookupReason::refused: return result(LookupStatus::dns_trouble, "REFUSED");
    case LookupReason::connection_refused: return result(LookupStatus::dns_trouble, "connection refused");
    case LookupReason::other: break;
  }
  return result(LookupStatus::dns_trouble, detail.empty() ? std::string("lookup failed") : std::move(detail));
}

namespace {

// 1..65535 in decimal digits, else nullopt.
std::optional<int> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5 || !std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int port = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), port).ec != std::errc{}) return std::nullopt;
  if (port < 1 || port > 65535) return std::nullopt;
  return port;
}

// One "ip[:port]" entry, or what is wrong with it.
std::expected<DnsServer, std::string> parse_dns_server(std::string_view entry) {
  const std::string quoted = "'" + std::string(entry) + "'";
  if (entry.empty()) return std::unexpected("an entry is empty (expected ip[:port],...)");
  std::string_view host = entry;
  std::optional<std::string_view> port_text;
  bool ipv6 = false;
  if (entry.starts_with('[')) {
    auto close = entry.find(']');
    if (close == std::string_view::npos) return std::unexpected(quoted + " has no closing ']'");
    host = entry.substr(1, close - 1);
    ipv6 = true;
    std::string_view rest = entry.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::unexpected(quoted + " is not [ip]:port");
    if (!rest.empty()) port_text = rest.substr(1);
  } else if (std::ranges::count(entry, ':') > 1) {
    ipv6 = true;  // a bare IPv6 address has no port; "[ip]:port" gives one
  } else if (auto colon = entry.find(':'); colon != std::string_view::npos) {
    host = entry.substr(0, colon);
    port_text = entry.substr(colon + 1);
  }
  if (port_text && port_text->empty()) return std::unexpected(quoted + " has an empty port");
  std::string address(host);
  unsigned char bytes[sizeof(in6_addr)];
  if (inet_pton(ipv6 ? AF_INET6 : AF_INET, address.c_str(), bytes) != 1) {
    return std::unexpected("'" + address + "' is not an " + (ipv6 ? "IPv6" : "IPv4") +
                           " address (expected ip[:port], IPv6 as [ip]:port)");
  }
  if (!port_text) return DnsServer{address, 53};
  auto port = parse_port(*port_text);
  if (!port) return std::unexpected("port '" + std::string(*port_text) + "' is not a number in 1..65535");
  return DnsServer{address, *port};
}

}  // namespace

// c-ares' own parser is not used: it takes a port modulo 65536 (65589 is 53) without a word.
Result<std::vector<DnsServer>> parse_dns_servers(std::string_view list, std::string_view source) {
  std::vector<DnsServer> servers;
  for (std::string_view item : split(list, ',')) {
    auto server = parse_dns_server(item);
    if (!server) return usage_error(std::string(source) + " '" + std::string(list) + "': " + server.error());
    servers.push_back(std::move(*server));
  }
  return servers;
}

namespace {

// Reads a DNS message front to back; any read past its end fails.
class MessageReader {
 public:
  explicit MessageReader(std::span<const unsigned char> message) : message_(message) {}
  std::optional<std::uint32_t> number(std::size_t bytes) {
    if (bytes > message_.size() - at_) return std::nullopt;
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i) value = value << 8 | message_[at_++];
    return value;
  }
  // A name is labels up to a zero byte or a compression pointer (which ends it here).
  bool skip_name() {
    while (at_ < message_.size()) {
      unsigned char length = message_[at_];
      if (length == 0) return ++at_, true;
      if ((length & 0xC0) == 0xC0) return skip(2);
      if ((length & 0xC0) != 0 || !skip(1u + length)) return false;
    }
    return false;
  }
  bool skip(std::size_t bytes) {
    if (bytes > message_.size() - at_) return false;
    at_ += bytes;
    return true;
  }

 private:
  std::span<const unsigned char> message_;
  std::size_t at_ = 0;
};

constexpr std::uint32_t type_soa = 6;
constexpr std::uint32_t rcode_nxdomain = 3;

}  // namespace

std::optional<std::uint32_t> negative_answer_ttl(std::span<const unsigned char> message) {
  MessageReader reader(message);
  auto id = reader.number(2);
  auto flags = reader.number(2);
  auto questions = reader.number(2);
  auto answers = reader.number(2);
  auto authorities = reader.number(2);
  if (!id || !flags || !questions || !answers || !authorities || !reader.skip(2)) return std::nullopt;
  const bool negative = (*flags & 0xF) == rcode_nxdomain || ((*flags & 0xF) == 0 && *answers == 0);
  if (!negative || !(*flags & 0x8000)) return std::nullopt;  // a response, NXDOMAIN or NODATA
  for (std::uint32_t i = 0; i < *questions; ++i) {
    if (!reader.skip_name() || !reader.skip(4)) return std::nullopt;
  }
  for (std::uint32_t i = 0; i < *answers + *authorities; ++i) {
    if (!reader.skip_name()) return std::nullopt;
    auto type = reader.number(2);
    auto klass = reader.number(2);
    auto ttl = reader.number(4);
    auto length = reader.number(2);
    if (!type || !klass || !ttl || !length) return std::nullopt;
    if (i >= *answers && *type == type_soa) return *ttl;
    if (!reader.skip(*length)) return std::nullopt;
  }
  return std::nullopt;
}

bool is_loopback_address(std::string_view address) { return address == "::1" || address.starts_with("127."); }

std::optional<std::string> reverse_lookup_name(std::string_view address) {
  std::string text(address);
  static constexpr char hex[] = "0123456789abcdef";
  if (in_addr v4{}; inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&v4);
    std::string name;
    for (int i = 3; i >= 0; --i) name += std::to_string(bytes[i]) + ".";
    return name + "in-addr.arpa";
  }
  if (in6_addr v6{}; inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::string name;
    for (int i = 15; i >= 0; --i) {
      name += hex[v6.s6_addr[i] & 15];
      name += '.';
      name += hex[v6.s6_addr[i] >> 4];
      name += '.';
    }
    return name + "ip6.arpa";
  }
  return std::nullopt;
}

namespace {

std::string lowercase_name(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (result.ends_with('.')) result.pop_back();
  return result;
}

}  // namespace

HostsFile::HostsFile(std::string_view text) {
  for (std::string_view line : lines(text)) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> fields;
    for (std::size_t at = 0; at < line.size();) {
      at = line.find_first_not_of(" \t\r", at);
      if (at == std::string_view::npos) break;
      std::size_t stop = line.find_first_of(" \t\r", at);
      if (stop == std::string_view::npos) stop = line.size();
      fields.push_back(line.substr(at, stop - at));
      at = stop;
    }
    if (fields.size() < 2) continue;
    std::string address(fields[0]);
    in6_addr storage{};
    bool is_v6 = address.find(':') != std::string::npos;
    if (inet_pton(is_v6 ? AF_INET6 : AF_INET, address.c_str(), &storage) != 1) continue;
    for (std::size_t k = 1; k < fields.size(); ++k) {
      Listed& listed = by_name_[lowercase_name(fields[k])];
      auto& list = is_v6 ? listed.v6 : listed.v4;
      if (std::find(list.begin(), list.end(), address) == list.end()) list.push_back(address);
    }
  }
}

std::vector<std::string> HostsFile::addresses(std::string_view name) const {
  auto it = by_name_.find(lowercase_name(name));
  if (it == by_name_.end()) return {};
  std::vector<std::string> addresses = it->second.v4;
  addresses.insert(addresses.end(), it->second.v6.begin(), it->second.v6.end());
  return addresses;
}

std::vector<std::string> addresses_in_hosts_file(std::string_view hosts_text, std::string_view name) {
  return HostsFile(hosts_text).addresses(name);
}

}  // namespace tfboot
