// Waiting until every name resolves: retry schedule, query budget, progress, deadline
// (docs/peers-and-dns.md).
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

// One wait: the names' states, the lookups in flight, the schedule of the next ones. run() turns
// the resolver's crank until every name resolved or the deadline passed; each answer comes back
// through on_answer().
class NameWait {
 public:
  NameWait(Resolver& resolver, const std::vector<std::string>& names, const WaitPolicy& policy, const Clock& clock,
           std::uint64_t seed)
      : resolver_(resolver), names_(names), policy_(policy), clock_(clock), start_(clock()),
        deadline_(start_ + policy.deadline), schedule_(policy.first_retry, policy.max_retry, seed), budget_(policy.retries_per_second, start_),
        window_(policy.max_in_flight), next_progress_(start_ + policy.progress_every) {
    // Shown without the trailing dot of a fully qualified lookup, as TF_CONFIG shows it.
    for (const auto& name : names) {
      outcome_.names.push_back(NameStatus{.name = name.ends_with('.') ? name.substr(0, name.size() - 1) : name});
    }
    for (std::size_t i = 0; i < names.size(); ++i) due_.emplace(start_, i);
  }

  WaitOutcome run() {
    const int total = static_cast<int>(names_.size());
    while (resolved_ < total) {
      const Instant now = clock_();
      if (now >= deadline_) break;
      start_due_lookups(now);
      log_progress_when_due(now);
      if (resolved_ < total) resolver_.process(std::clamp(time_until_something_is_due(now), 1ms, 1000ms));
    }
    outcome_.all_resolved = resolved_ == total;
    outcome_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock_() - start_);
    return std::move(outcome_);
  }

 private:
  // Names due for a lookup, earliest first; the index breaks ties so first tries go in order.
  using Due = std::pair<Instant, std::size_t>;

  void start_due_lookups(Instant now) {
    while (in_flight_ < window_ && !due_.empty() && due_.top().first <= now) {
      std::size_t i = due_.top().second;
      if (outcome_.names[i].tries > 0 && !budget_.try_take(now)) break;
      due_.pop();
      ++in_flight_;
      ++outcome_.names[i].tries;
      resolver_.start_lookup(names_[i], [this, i](LookupResult result) { on_answer(i, std::move(result)); });
    }
  }

  void on_answer(std::size_t i, LookupResult result) {
    --in_flight_;
    NameStatus& status = outcome_.names[i];
    const Instant finished = clock_();
    status.last_status = result.status;
    status.last_reason = result.reason;
    // Lookups allowed in flight: halved on every timeout, grown by one per answer. A server that
    // stalls (restarting, overloaded) keeps its queue; without this every per-try timeout would
    // add a full window of queries to it and overflow its receive buffer.
    if (result.reason == LookupReason::timeout) window_ = std::max(1, window_ / 2);
    else window_ = std::min(policy_.max_in_flight, window_ + 1);
    if (result.status == LookupStatus::resolved) {
      status.resolved = true;
      status.addresses = std::move(result.addresses);
      status.last_error.clear();
      status.time_to_resolve = std::chrono::duration_cast<std::chrono::milliseconds>(finished - start_);
      ++resolved_;
      log::debug("{} resolves to {} after {} tries", status.name, status.addresses.front(), status.tries);
      return;
    }
    status.last_error = std::move(result.error);
    log::trace("{}: {}", status.name, describe(status));
    if (policy_.on_failure) policy_.on_failure(i, status);
    due_.emplace(finished + schedule_.delay_after(status.tries), i);
  }

  void log_progress_when_due(Instant now) {
    if (now < next_progress_) return;
    log_progress(outcome_.names, resolved_, std::chrono::duration_cast<std::chrono::milliseconds>(now - start_));
    while (next_progress_ <= now) next_progress_ += policy_.progress_every;
  }

  // How long the resolver may sleep: until a retry, the budget, progress or the deadline is due.
  std::chrono::milliseconds time_until_something_is_due(Instant now) {
    Instant wake = std::min(deadline_, next_progress_);
    if (!due_.empty() && in_flight_ < window_) {
      Instant retry_at = due_.top().first;
      if (outcome_.names[due_.top().second].tries > 0) retry_at = std::max(retry_at, now + budget_.time_until_next(now));
      wake = std::min(wake, retry_at);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(wake - now);
  }

  Resolver& resolver_;
  const std::vector<std::string>& names_;
  const WaitPolicy& policy_;
  const Clock& clock_;
  const Instant start_;
  const Instant deadline_;
  WaitOutcome outcome_;
  Backoff schedule_;
  QueryBudget budget_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  int in_flight_ = 0;
  int resolved_ = 0;
  int window_;
  Instant next_progress_;
};

}  // namespace

WaitOutcome wait_for_names(Resolver& resolver, const std::vector<std::string>& names, const WaitPolicy& policy, const Clock& clock,
                           std::uint64_t seed) {
  return NameWait(resolver, names, policy, clock, seed).run();
}

}  // namespace tfboot
