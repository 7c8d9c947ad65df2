// The DNS wait against a fake resolver on a simulated clock: no network, no real time.
#include <doctest/doctest.h>

#include <map>

#include "dns/wait.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

// Answers after `latency` of simulated time; a name's answer may change with time (published late).
class FakeResolver final : public Resolver {
 public:
  using Answer = std::function<LookupResult(std::chrono::milliseconds since_start)>;

  TimePoint now{std::chrono::seconds(1000)};
  TimePoint start = now;
  std::chrono::milliseconds latency{2};
  std::map<std::string, Answer> answers;
  std::map<std::string, int> lookups;
  std::vector<TimePoint> lookup_times;
  int max_concurrent = 0;

  void start_lookup(const std::string& name, std::function<void(LookupResult)> done) override {
    ++lookups[name];
    lookup_times.push_back(now);
    pending_.push_back({now + latency, name, std::move(done)});
    max_concurrent = std::max(max_concurrent, static_cast<int>(pending_.size()));
  }

  void start_reverse_lookup(const std::string&, std::function<void(LookupResult)> done) override {
    done(lookup_failure(LookupReason::nxdomain));
  }

  void process(std::chrono::milliseconds budget) override {
    TimePoint until = now + budget;
    TimePoint earliest = until;
    for (const auto& p : pending_) earliest = std::min(earliest, p.due);
    now = earliest;
    std::vector<Pending> ready;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->due <= now) {
        ready.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& p : ready) {
      auto it = answers.find(p.name);
      auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      p.done(it == answers.end() ? lookup_failure(LookupReason::nxdomain) : it->second(since));
    }
  }

  std::vector<std::string> servers() const override { return {"10.0.0.10:53"}; }

  Clock clock() {
    return [this] { return now; };
  }

 private:
  struct Pending {
    TimePoint due;
    std::string name;
    std::function<void(LookupResult)> done;
  };
  std::vector<Pending> pending_;
};

FakeResolver::Answer always(const std::string& address) {
  return [address](auto) { return lookup_success({address}); };
}

FakeResolver::Answer published_after(std::chrono::milliseconds when, const std::string& address) {
  return [when, address](std::chrono::milliseconds since) {
    if (since >= when) return lookup_success({address});
    return lookup_failure(LookupReason::nxdomain);
  };
}

FakeResolver::Answer failing(LookupReason reason, const std::string& detail = "") {
  return [reason, detail](auto) { return lookup_failure(reason, detail); };
}

}  // namespace

TEST_CASE("dns_wait::wait_for_names") {
  FakeResolver resolver;
  WaitPolicy policy;
  policy.deadline = 30s;

  SUBCASE("all names present resolve with one lookup each") {
    std::vector<std::string> names;
    for (int i = 0; i < 200; ++i) {
      names.push_back("w-" + std::to_string(i) + ".svc.");
      resolver.answers[names.back()] = always("10.1.0." + std::to_string(i % 250));
    }
    auto outcome = wait_for_names(resolver, names, policy, resolver.clock(), 1);
    CHECK(outcome.all_resolved);
    REQUIRE(outcome.names.size() == 200);
    for (const auto& status : outcome.names) {
      CHECK(status.resolved);
      CHECK(status.tries == 1);
    }
    CHECK(outcome.names[7].addresses == std::vector<std::string>{"10.1.0.7"});
    CHECK(resolver.max_concurrent == policy.max_in_flight);
    CHECK(outcome.elapsed < 100ms);
  }

  SUBCASE("a name published late is seen within a second of appearing") {
    resolver.answers["a."] = always("10.0.0.1");
    resolver.answers["late."] = published_after(7s, "10.0.0.2");
    auto outcome = wait_for_names(resolver, {"a.", "late."}, policy, resolver.clock(), 42);
    CHECK(outcome.all_resolved);
    CHECK(outcome.names[1].time_to_resolve >= 7s);
    CHECK(outcome.names[1].time_to_resolve <= 8s);
    CHECK(outcome.names[1].tries > 5);
    CHECK(outcome.names[0].tries == 1);
  }

  SUBCASE("the deadline ends the wait and names what is missing, with its kind of failure") {
    policy.deadline = 5s;
    resolver.answers["ok."] = always("10.0.0.1");
    resolver.answers["troubled."] = failing(LookupReason::servfail);
    auto outcome = wait_for_names(resolver, {"ok.", "missing.", "troubled."}, policy, resolver.clock(), 3);
    CHECK_FALSE(outcome.all_resolved);
    CHECK(outcome.elapsed >= 5s);
    CHECK(outcome.elapsed < 5s + 1100ms);
    CHECK(outcome.names[0].resolved);
    CHECK_FALSE(outcome.names[1].resolved);
    CHECK(describe(outcome.names[1]) == "not published yet: NXDOMAIN");
    CHECK(outcome.names[1].last_reason == LookupReason::nxdomain);
    CHECK(describe(outcome.names[2]) == "DNS in trouble: SERVFAIL");
    CHECK(outcome.names[2].last_reason == LookupReason::servfail);
    CHECK(outcome.names[0].last_reason == LookupReason::none);
  }

  SUBCASE("retries stay within the query budget") {
    policy.deadline = 10s;
    policy.retries_per_second = 20;
    std::vector<std::string> names;
    for (int i = 0; i < 500; ++i) names.push_back("never-" + std::to_string(i) + ".");
    auto outcome = wait_for_names(resolver, names, policy, resolver.clock(), 9);
    CHECK_FALSE(outcome.all_resolved);
    int total = 0;
    for (const auto& [name, count] : resolver.lookups) total += count;
    // 500 first tries, then at most 20 a second plus one second's burst.
    CHECK(total > 500);
    CHECK(total <= 500 + 20 * 10 + 20);
  }

  SUBCASE("retries back off exponentially up to the cap") {
    policy.deadline = 20s;
    resolver.latency = 1ms;
    auto outcome = wait_for_names(resolver, {"never."}, policy, resolver.clock(), 5);
    auto& times = resolver.lookup_times;
    REQUIRE(times.size() > 10);
    auto gap = [&](std::size_t i) { return times[i + 1] - times[i]; };
    CHECK(gap(0) <= 101ms);   // ~100 ms, half of it jitter
    CHECK(gap(0) >= 50ms);
    CHECK(gap(3) >= 400ms);   // 800 ms with jitter
    for (std::size_t i = 5; i + 1 < times.size(); ++i) CHECK(gap(i) <= 1001ms);
    CHECK(outcome.names[0].tries == static_cast<int>(times.size()));
  }

  SUBCASE("timeouts shrink the lookups in flight so a stalled server is not flooded") {
    policy.deadline = 3s;
    policy.retries_per_second = 10000;  // only the window limits here
    resolver.latency = 500ms;
    std::vector<std::string> names;
    for (int i = 0; i < 200; ++i) names.push_back("stalled-" + std::to_string(i) + ".");
    auto lookups_made = [&] {
      auto outcome = wait_for_names(resolver, names, policy, resolver.clock(), 11);
      CHECK_FALSE(outcome.all_resolved);
      int total = 0;
      for (const auto& [name, count] : resolver.lookups) total += count;
      return total;
    };

    SUBCASE("a timeout halves the window, down to one lookup at a time") {
      for (const auto& name : names) resolver.answers[name] = failing(LookupReason::timeout);
      int total = lookups_made();
      CHECK(total >= 64);  // the first window of 64
      CHECK(total <= 64 + 8);
    }
    SUBCASE("the window follows the reason, not the text") {
      for (const auto& name : names) resolver.answers[name] = failing(LookupReason::other, "timeout");
      // Every answer grows the window back: each 500 ms, a full window of retries.
      CHECK(lookups_made() > 64 * 4);
    }
  }

  SUBCASE("no names: done at once") {
    auto outcome = wait_for_names(resolver, {}, policy, resolver.clock(), 1);
    CHECK(outcome.all_resolved);
    CHECK(resolver.lookups.empty());
  }
}

TEST_CASE("dns_wait::QueryBudget") {
  TimePoint t{std::chrono::seconds(5)};
  QueryBudget budget(10, t);
  int taken = 0;
  while (budget.try_take(t)) ++taken;
  CHECK(taken == 10);
  CHECK(budget.time_until_next(t) > 0ms);
  CHECK(budget.time_until_next(t) <= 101ms);
  CHECK(budget.try_take(t + 100ms));
  CHECK_FALSE(budget.try_take(t + 100ms));
}

}  // namespace tfboot
