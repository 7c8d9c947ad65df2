// Waiting until every name resolves: retry schedule, query budget, progress, deadline
// (docs/peers-and-dns.md). Pure apart from the Resolver it drives and the clock it is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "dns/resolver.h"

namespace tfboot {

using Clock = std::function<Instant()>;

struct NameStatus;

struct WaitPolicy {
  std::chrono::milliseconds deadline{std::chrono::minutes(15)};
  // Lookups in flight at once, at most; timeouts shrink the window (see wait_for_names). A lookup
  // is one query, A, plus an AAAA query only for a name that exists without an A record.
  int max_in_flight = 64;
  // Backoff (base/clock.h) for a missing name: first retry after about `first_retry`, doubling,
  // never more than `max_retry`, so a name published late is seen within a second.
  std::chrono::milliseconds first_retry{100};
  std::chrono::milliseconds max_retry{1000};
  // Retries (not first tries) per second, so thousands of waiting pods do not flood the cluster DNS.
  double retries_per_second = 50;
  std::chrono::milliseconds progress_every{std::chrono::seconds(10)};
  // Called after each failed lookup, with the name's position and status, from within the wait.
  std::function<void(std::size_t, const NameStatus&)> on_failure;
};

// A token bucket: `rate` tokens a second, holding at most one second's worth.
class QueryBudget {
 public:
  QueryBudget(double rate, Instant now) : rate_(rate), tokens_(rate), last_(now) {}
  bool try_take(Instant now);
  std::chrono::milliseconds time_until_next(Instant now) const;

 private:
  double rate_;
  double tokens_;
  Instant last_;
};

struct NameStatus {
  std::string name;  // without a trailing dot
  bool resolved = false;
  int tries = 0;
  std::vector<std::string> addresses;
  LookupStatus last_status = LookupStatus::not_published;
  LookupReason last_reason = LookupReason::none;  // none until a lookup failed, and once resolved
  std::string last_error;                         // its text; empty once resolved
  std::chrono::milliseconds time_to_resolve{0};
};

struct WaitOutcome {
  std::vector<NameStatus> names;  // in the order given
  bool all_resolved = false;
  std::chrono::milliseconds elapsed{0};
};

WaitOutcome wait_for_names(Resolver& resolver, const std::vector<std::string>& names, const WaitPolicy& policy, const Clock& clock,
                           std::uint64_t seed);

// "DNS in trouble: timeout", "not published yet: NXDOMAIN", "resolved" or "not tried yet".
std::string describe(const NameStatus& status);

}  // namespace tfboot
