// Waiting until every name resolves: retry schedule, query budget, progress, deadline (README:
// DNS wait).
#include "dns/wait.h"

#include <algorithm>
#include <queue>

#include "base/log.h"

namespace tfboot {

using namespace std::chrono_literals;

bool QueryBudget::try_take(Instant now) {
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(rate_, tokens_ + elapsed * rate_);
  last_ = now;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::chrono::milliseconds QueryBudget::time_until_next(Instant now) const {
  double elapsed = std::chrono::duration<double>(now - last_).count();
  double tokens = std::min(rate_, tokens_ + elapsed * rate_);
  if (tokens >= 1.0) return 0ms;
  return std::chrono::milliseconds(static_cast<long long>((1.0 - tokens) / rate_ * 1000.0) + 1);
}

std::string describe(const NameStatus& status) {
  if (status.resolved) return "resolved";
  if (status.tries == 0) return "not tried yet";
  return std::string(status.last_status == LookupStatus::dns_trouble ? "DNS in trouble: " : "not published yet: ") +
         status.last_error;
}

namespace {

void log_progress(const std::vector<NameStatus>& names, int resolved, std::chrono::milliseconds elapsed) {
  std::string missing;
  int shown = 0;
  for (const auto& status : names) {
    if (status.resolved) continue;
    if (shown == 3) {
      missing += ", ...";
      break;
    }
    missing += (shown++ ? ", " : "") + status.name + " (" + describe(status) + ")";
  }
  log::info("waiting for DNS: {}/{} names resolve after {:.1f}s; missing: {}", resolved, names.size(),
               static_cast<double>(elapsed.count()) / 1000.0, missing);
}

}  // namespace

WaitOutcome wait_for_names(Resolver& resolver, const std::vector<std::string>& names, const WaitPolicy& policy, const Clock& clock,
                           std::uint64_t seed) {
  const Instant start = clock();
  const Instant deadline = start + policy.deadline;
  WaitOutcome outcome;
  // Shown without the trailing dot of a fully qualified lookup, as TF_CONFIG shows it.
  for (const auto& name : names) {
    outcome.names.push_back(NameStatus{.name = name.ends_with('.') ? name.substr(0, name.size() - 1) : name});
  }

  Backoff schedule(policy.first_retry, policy.max_retry, seed);
  QueryBudget budget(policy.retries_per_second, start);
  // Names due for a lookup, earliest first; the index breaks ties so first tries go in order.
  using Due = std::pair<Instant, std::size_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due;
  for (std::size_t i = 0; i < names.size(); ++i) due.emplace(start, i);

  int in_flight = 0;
  int resolved = 0;
  // Lookups allowed in flight: halved on every timeout, grown by one per answer. A server that
  // stalls (restarting, overloaded) keeps its queue; without this every per-try timeout would
  // add a full window of queries to it and overflow its receive buffer.
  int window = policy.max_in_flight;
  const int total = static_cast<int>(names.size());
  Instant next_progress = start + policy.progress_every;

  while (resolved < total) {
    Instant now = clock();
    if (now >= deadline) break;

    while (in_flight < window && !due.empty() && due.top().first <= now) {
      std::size_t i = due.top().second;
      if (outcome.names[i].tries > 0 && !budget.try_take(now)) break;
      due.pop();
      ++in_flight;
      ++outcome.names[i].tries;
      resolver.start_lookup(names[i], [&, i](LookupResult result) {
        --in_flight;
        NameStatus& status = outcome.names[i];
        Instant finished = clock();
        status.last_status = result.status;
        status.last_reason = result.reason;
        if (result.reason == LookupReason::timeout) window = std::max(1, window / 2);
        else window = std::min(policy.max_in_flight, window + 1);
        if (result.status == LookupStatus::resolved) {
          status.resolved = true;
          status.addresses = std::move(result.addresses);
          status.last_error.clear();
          status.time_to_resolve = std::chrono::duration_cast<std::chrono::milliseconds>(finished - start);
          ++resolved;
          log::debug("{} resolves to {} after {} tries", status.name, status.addresses.front(), status.tries);
          return;
        }
        status.last_error = std::move(result.error);
        log::trace("{}: {}", status.name, describe(status));
        if (policy.on_failure) policy.on_failure(i, status);
        due.emplace(finished + schedule.delay_after(status.tries), i);
      });
    }

    if (now >= next_progress) {
      log_progress(outcome.names, resolved, std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
      while (next_progress <= now) next_progress += policy.progress_every;
    }

    // Sleep in the resolver until something is due: a retry, the budget, progress or the deadline.
    Instant wake = std::min(deadline, next_progress);
    if (!due.empty() && in_flight < window) {
      Instant retry_at = due.top().first;
      if (outcome.names[due.top().second].tries > 0) retry_at = std::max(retry_at, now + budget.time_until_next(now));
      wake = std::min(wake, retry_at);
    }
    auto pause = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now);
    if (resolved < total) resolver.process(std::clamp(pause, 1ms, 1000ms));
  }
  outcome.all_resolved = resolved == total;
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock() - start);
  return outcome;
}

}  // namespace tfboot
