// The resolver's pure parts: reverse names, and what each failure reason means.
#include <doctest/doctest.h>

#include "resolver.h"

namespace tfboot {

TEST_CASE("resolver::reverse_lookup_name") {
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

TEST_CASE("resolver::lookup_failure") {
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

}  // namespace tfboot
