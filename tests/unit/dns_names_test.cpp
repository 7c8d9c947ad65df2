// DNS names and lookup outcomes (dns/names.h): --dns-server lists, reverse names, what each failure
// reason means, and /etc/hosts lines.
#include <doctest/doctest.h>

#include "dns/names.h"
#include "test_support.h"

namespace tfboot {

TEST_CASE("dns_names::parse_dns_servers") {
  struct Row {
    const char* behaviour;
    const char* list;
    std::vector<DnsServer> expected;
  };
  const Row accepted[] = {
      {"an IPv4 address alone means port 53", "10.0.0.10", {{"10.0.0.10", 53}}},
      {"an IPv4 address with a port", "10.0.0.10:5353", {{"10.0.0.10", 5353}}},
      {"the ports at both ends of the range", "10.0.0.1:1,10.0.0.2:65535", {{"10.0.0.1", 1}, {"10.0.0.2", 65535}}},
      {"IPv6 in brackets with a port", "[::1]:53", {{"::1", 53}}},
      {"IPv6 in brackets without a port", "[fd00::10]", {{"fd00::10", 53}}},
      {"a bare IPv6 address has no port", "fd00::10", {{"fd00::10", 53}}},
      {"a list keeps its order", "10.0.0.2,[fd00::1]:54,10.0.0.1",
       {{"10.0.0.2", 53}, {"fd00::1", 54}, {"10.0.0.1", 53}}},
  };
  for (const auto& row : accepted) {
    CAPTURE(row.behaviour);
    auto servers = parse_dns_servers(row.list, "--dns-server");
    REQUIRE_MESSAGE(servers, error_of(servers));
    CHECK(*servers == row.expected);
  }

  struct Bad {
    const char* behaviour;
    const char* list;
    const char* source;
    const char* message;
  };
  const Bad rejected[] = {
      {"a port above 65535 is not taken modulo 65536", "127.0.0.1:65589", "--dns-server",
       "--dns-server '127.0.0.1:65589': port '65589' is not a number in 1..65535"},
      {"the error names the env twin when that is the source", "127.0.0.1:65589", "TFBOOT_DNS_SERVER",
       "TFBOOT_DNS_SERVER '127.0.0.1:65589': port '65589' is not a number in 1..65535"},
      {"port 0", "127.0.0.1:0", "--dns-server", "--dns-server '127.0.0.1:0': port '0' is not a number in 1..65535"},
      {"a signed port", "127.0.0.1:+53", "--dns-server",
       "--dns-server '127.0.0.1:+53': port '+53' is not a number in 1..65535"},
      {"a port with trailing text", "127.0.0.1:53x", "--dns-server",
       "--dns-server '127.0.0.1:53x': port '53x' is not a number in 1..65535"},
      {"a huge port", "[::1]:99999999999999999999", "--dns-server",
       "--dns-server '[::1]:99999999999999999999': port '99999999999999999999' is not a number in 1..65535"},
      {"an empty port", "127.0.0.1:", "--dns-server", "--dns-server '127.0.0.1:': '127.0.0.1:' has an empty port"},
      {"an empty port after brackets", "[::1]:", "--dns-server", "--dns-server '[::1]:': '[::1]:' has an empty port"},
      {"a name instead of an address", "not-an-ip", "--dns-server",
       "--dns-server 'not-an-ip': 'not-an-ip' is not an IPv4 address (expected ip[:port], IPv6 as [ip]:port)"},
      {"a short IPv4 address", "10.0.1:53", "--dns-server",
       "--dns-server '10.0.1:53': '10.0.1' is not an IPv4 address (expected ip[:port], IPv6 as [ip]:port)"},
      {"IPv4 in brackets", "[10.0.0.1]:53", "--dns-server",
       "--dns-server '[10.0.0.1]:53': '10.0.0.1' is not an IPv6 address (expected ip[:port], IPv6 as [ip]:port)"},
      {"a missing closing bracket", "[::1:53", "--dns-server", "--dns-server '[::1:53': '[::1:53' has no closing ']'"},
      {"text between bracket and port", "[::1]x53", "--dns-server", "--dns-server '[::1]x53': '[::1]x53' is not [ip]:port"},
      {"a space after a comma", "10.0.0.1, 10.0.0.2", "--dns-server",
       "--dns-server '10.0.0.1, 10.0.0.2': ' 10.0.0.2' is not an IPv4 address (expected ip[:port], IPv6 as [ip]:port)"},
      {"an empty entry", "10.0.0.1,,10.0.0.2", "--dns-server",
       "--dns-server '10.0.0.1,,10.0.0.2': an entry is empty (expected ip[:port],...)"},
      {"a trailing comma", "10.0.0.1,", "--dns-server", "--dns-server '10.0.0.1,': an entry is empty (expected ip[:port],...)"},
      {"an empty list", "", "--dns-server", "--dns-server '': an entry is empty (expected ip[:port],...)"},
  };
  for (const auto& row : rejected) {
    CAPTURE(row.behaviour);
    auto servers = parse_dns_servers(row.list, row.source);
    CHECK(code_of(servers) == exit_code::usage);
    CHECK(error_of(servers) == row.message);
  }
}

TEST_CASE("dns_names::reverse_lookup_name") {
  CHECK(reverse_lookup_name("10.1.2.3") == "3.2.1.10.in-addr.arpa");
  CHECK(reverse_lookup_name("192.168.200.7") == "7.200.168.192.in-addr.arpa");
  CHECK(reverse_lookup_name("fd00::21") == "1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa");
  CHECK(reverse_lookup_name("2001:db8::abcd") ==
        "d.c.b.a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
  SUBCASE("anything but a numeric address has no reverse name") {
    for (const char* text : {"", "10.1.2", "10.1.2.256", "host", "::g", "10.1.2.3 ", "fe80::1%eth0"}) {
      CAPTURE(text);
      CHECK(reverse_lookup_name(text) == std::nullopt);
    }
  }
}

TEST_CASE("dns_names::lookup_failure") {
  struct Row {
    LookupReason reason;
    LookupStatus status;
    const char* text;
  };
  const Row rows[] = {
      {LookupReason::nxdomain, LookupStatus::not_published, "NXDOMAIN"},
      {LookupReason::no_address_records, LookupStatus::not_published, "no address records"},
      {LookupReason::no_ptr_record, LookupStatus::not_published, "no PTR record"},
      {LookupReason::bad_address, LookupStatus::not_published, "not a numeric address"},
      {LookupReason::timeout, LookupStatus::dns_trouble, "timeout"},
      {LookupReason::servfail, LookupStatus::dns_trouble, "SERVFAIL"},
      {LookupReason::refused, LookupStatus::dns_trouble, "REFUSED"},
      {LookupReason::connection_refused, LookupStatus::dns_trouble, "connection refused"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.text);
    auto result = lookup_failure(row.reason, "ignored detail");
    CHECK(result.reason == row.reason);
    CHECK(result.status == row.status);
    CHECK(result.error == row.text);
    CHECK(result.addresses.empty());
  }
  SUBCASE("any other failure is DNS trouble, told in its own words") {
    auto result = lookup_failure(LookupReason::other, "Misformatted domain name");
    CHECK(result.status == LookupStatus::dns_trouble);
    CHECK(result.error == "Misformatted domain name");
    CHECK(lookup_failure(LookupReason::other).error == "lookup failed");
  }
  SUBCASE("success carries the addresses and no error") {
    auto result = lookup_success({"10.0.0.1", "fd00::1"});
    CHECK(result.status == LookupStatus::resolved);
    CHECK(result.reason == LookupReason::none);
    CHECK(result.error.empty());
    CHECK(result.addresses == std::vector<std::string>{"10.0.0.1", "fd00::1"});
  }
}

TEST_CASE("dns_names::addresses_in_hosts_file answers as glibc's files source does") {
  const std::string hosts =
      "127.0.0.1\tlocalhost\n"
      "::1 localhost ip6-localhost  # loopback\n"
      "# 10.0.0.9 commented-out\n"
      "10.1.0.7\tTrainer-0.example trainer-0\n"
      "10.1.0.8 trainer-1\n"
      "fd00::8 trainer-1\n"
      "10.1.0.8 trainer-1\n"
      "not-an-address trainer-2\n"
      "10.1.0.9\n";
  CHECK(addresses_in_hosts_file(hosts, "trainer-0") == std::vector<std::string>{"10.1.0.7"});
  CHECK(addresses_in_hosts_file(hosts, "TRAINER-0.example.") == std::vector<std::string>{"10.1.0.7"});
  CHECK(addresses_in_hosts_file(hosts, "trainer-1") == std::vector<std::string>{"10.1.0.8", "fd00::8"});
  CHECK(addresses_in_hosts_file(hosts, "localhost") == std::vector<std::string>{"127.0.0.1", "::1"});
  CHECK(addresses_in_hosts_file(hosts, "trainer-2").empty());
  CHECK(addresses_in_hosts_file(hosts, "commented-out").empty());
  CHECK(addresses_in_hosts_file("", "trainer-0").empty());
}

}  // namespace tfboot

namespace tfboot {
namespace {

// A response to "A w.svc." with `rcode`, `answers` A records and an SOA with `ttl` in authority.
std::vector<unsigned char> dns_response(unsigned rcode, int answers, std::uint32_t ttl, bool response = true) {
  std::vector<unsigned char> m{0x12, 0x34, static_cast<unsigned char>(response ? 0x81 : 0x01), static_cast<unsigned char>(0x80 | rcode),
                               0, 1, 0, static_cast<unsigned char>(answers), 0, 1, 0, 0};
  m.reserve(256);  // (also keeps GCC 12's -Warray-bounds from a false alarm on the inserts below)
  auto add = [&](std::initializer_list<unsigned char> bytes) {
    for (unsigned char byte : bytes) m.push_back(byte);
  };
  add({1, 'w', 3, 's', 'v', 'c', 0});
  add({0, 1, 0, 1});  // type A, class IN
  auto u32 = [&](std::uint32_t v) {
    for (int shift : {24, 16, 8, 0}) m.push_back(static_cast<unsigned char>(v >> shift));
  };
  for (int i = 0; i < answers; ++i) {
    add({0xC0, 12, 0, 1, 0, 1});
    u32(30);
    add({0, 4, 10, 0, 0, 1});
  }
  add({3, 's', 'v', 'c', 0, 0, 6, 0, 1});  // the zone's SOA
  u32(ttl);
  std::vector<unsigned char> rdata{2, 'n', 's', 0xC0, 12, 4, 'h', 'o', 's', 't', 0xC0, 12};
  for (std::uint32_t v : {1u, 7200u, 1800u, 86400u, 30u}) {
    for (int shift : {24, 16, 8, 0}) rdata.push_back(static_cast<unsigned char>(v >> shift));
  }
  m.push_back(0);
  m.push_back(static_cast<unsigned char>(rdata.size()));
  m.insert(m.end(), rdata.begin(), rdata.end());
  return m;
}

}  // namespace

TEST_CASE("dns_names::negative_answer_ttl reads the SOA's TTL of NXDOMAIN and NODATA answers only") {
  CHECK(negative_answer_ttl(dns_response(3, 0, 27)) == 27u);  // NXDOMAIN, as a cache counts it down
  CHECK(negative_answer_ttl(dns_response(0, 0, 30)) == 30u);  // NODATA
  CHECK(negative_answer_ttl(dns_response(0, 1, 30)) == std::nullopt);  // an answer
  CHECK(negative_answer_ttl(dns_response(2, 0, 30)) == std::nullopt);  // SERVFAIL
  CHECK(negative_answer_ttl(dns_response(3, 0, 30, false)) == std::nullopt);  // a query, not a response
  const auto whole = dns_response(3, 0, 27);
  // Cut anywhere before the SOA's TTL and data length are whole (32 bytes of data follow, which
  // are not needed): never a value, never a read past the end.
  const std::size_t ttl_end = whole.size() - 32;
  for (std::size_t length = 0; length < ttl_end; ++length) {
    CHECK(negative_answer_ttl(std::span<const unsigned char>(whole.data(), length)) == std::nullopt);
  }
  CHECK(negative_answer_ttl(std::span<const unsigned char>(whole.data(), ttl_end)) == 27u);
}

}  // namespace tfboot
