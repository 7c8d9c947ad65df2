// The network level's schedule and verdict (control/protocol/network_check.h): which partners each
// task measures, and the bad node named against the job's healthy links.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "control/protocol/protocol.h"

namespace tfboot {
namespace {

std::vector<std::string> names_of(std::size_t tasks) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tasks; ++i) names.push_back("worker:" + std::to_string(i) + " (host 'pod-" + std::to_string(i) + "')");
  return names;
}

// Every link of the schedule, measured at `healthy` bit/s, except those that touch `slow` at `slow_bps`.
std::vector<LinkFigure> measured(std::size_t tasks, double healthy, std::optional<std::size_t> slow = std::nullopt, double slow_bps = 0) {
  std::vector<LinkFigure> links;
  for (std::size_t shift : network_shifts(tasks)) {
    for (std::size_t from = 0; from < tasks; ++from) {
      const std::size_t to = (from + shift) % tasks;
      const bool touches = slow && (from == *slow || to == *slow);
      links.push_back({from, to, 0.05, touches ? slow_bps : healthy, ""});
    }
  }
  return links;
}

TEST_CASE("network_check::network_shifts") {
  CHECK(network_shifts(0).empty());
  CHECK(network_shifts(1).empty());
  CHECK(network_shifts(2) == std::vector<std::size_t>{1});
  CHECK(network_shifts(4) == std::vector<std::size_t>{1, 2, 3});
  CHECK(network_shifts(8) == std::vector<std::size_t>{1, 4, 3});
  CHECK(network_shifts(6) == std::vector<std::size_t>{1, 3, 2});
  SUBCASE("at most three rounds at any size, and every task has partners on both sides") {
    for (std::size_t tasks : {5u, 7u, 16u, 64u, 1024u, 12500u, 100000u}) {
      CAPTURE(tasks);
      const auto shifts = network_shifts(tasks);
      CHECK(shifts.size() >= 2);
      CHECK(shifts.size() <= 3);
      CHECK(shifts.front() == 1);  // the ring first
      std::set<std::size_t> distinct(shifts.begin(), shifts.end());
      CHECK(distinct.size() == shifts.size());
      for (std::size_t shift : shifts) CHECK((shift > 0 && shift < tasks));
    }
  }
}

TEST_CASE("network_check::judge_network") {
  const NetworkBounds bounds;
  SUBCASE("a healthy job passes with its median") {
    auto verdict = judge_network(measured(8, 9.4e9), names_of(8), bounds);
    CHECK(verdict.passed());
    CHECK(verdict.warnings.empty());
    REQUIRE(verdict.median_bits_per_second);
    CHECK(*verdict.median_bits_per_second == doctest::Approx(9.4e9));
  }
  SUBCASE("one slow node is named once, as slow with every partner, with its figure and the median") {
    auto verdict = judge_network(measured(8, 9.4e9, 7, 4e6), names_of(8), bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0].starts_with("worker:7 (host 'pod-7'): network: slow with every partner (6 links); at best worker:"));
    CHECK(verdict.refusals[0].find("0.004 Gbit/s (median 9.4)") != std::string::npos);
    CHECK(verdict.warnings.empty());
  }
  SUBCASE("found from three tasks up: the median is of each task's best link") {
    auto verdict = judge_network(measured(3, 9.4e9, 0, 4e6), names_of(3), bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0].starts_with("worker:0 (host 'pod-0'): network: slow with every partner"));
  }
  SUBCASE("between the warn and the refuse ratio: a warning, the job starts") {
    auto verdict = judge_network(measured(8, 9.4e9, 2, 3e9), names_of(8), bounds);
    CHECK(verdict.passed());
    REQUIRE(verdict.warnings.size() == 1);
    CHECK(verdict.warnings[0].starts_with("worker:2 (host 'pod-2'): network: slow with every partner"));
  }
  SUBCASE("refuse_below 0 only warns") {
    auto verdict = judge_network(measured(8, 9.4e9, 7, 4e6), names_of(8), NetworkBounds{0.5, 0, 1});
    CHECK(verdict.passed());
    REQUIRE(verdict.warnings.size() == 1);
    CHECK(verdict.warnings[0].starts_with("worker:7 (host 'pod-7'): network:"));
  }
  SUBCASE("one slow link between healthy nodes is named as a link, in a warning: it does not say which end is at fault") {
    auto links = measured(8, 9.4e9);
    links[3].bits_per_second = 8e7;  // worker:3 -> worker:4
    auto verdict = judge_network(links, names_of(8), bounds);
    CHECK(verdict.passed());
    REQUIRE(verdict.warnings.size() == 1);
    CHECK(verdict.warnings[0] == "network: worker:3 → worker:4: 0.08 Gbit/s (median 9.4), round trip 0.05 ms (median 0.05)");
  }
  SUBCASE("a round trip far over the median's is slow too (a warning); a loopback's jitter is not") {
    auto links = measured(8, 9.4e9);
    links[3].rtt_ms = 0.9;  // 18 times the median, but under a millisecond more: jitter
    CHECK(judge_network(links, names_of(8), bounds).warnings.empty());
    links[3].rtt_ms = 50;
    auto verdict = judge_network(links, names_of(8), bounds);
    CHECK(verdict.passed());
    REQUIRE(verdict.warnings.size() == 1);
    CHECK(verdict.warnings[0].find("round trip 50 ms (median 0.05)") != std::string::npos);
  }
  SUBCASE("a link its sender could not open is named with why (a warning); the receiver's figures win over a sender's problem") {
    auto links = measured(8, 9.4e9);
    links.push_back({3, 4, std::nullopt, std::nullopt, "connection refused"});  // the receiver's figures came too
    CHECK(judge_network(links, names_of(8), bounds).warnings.empty());
    links[3] = {3, 4, std::nullopt, std::nullopt, "connection refused"};
    links.pop_back();
    auto verdict = judge_network(links, names_of(8), bounds);
    CHECK(verdict.passed());
    REQUIRE(verdict.warnings.size() == 1);
    CHECK(verdict.warnings[0] == "network: worker:3 → worker:4: not measured: connection refused");
  }
  CHECK(gbits_text(9.41e9) == "9.41 Gbit/s");
  CHECK(gbits_text(3.92e6) == "0.00392 Gbit/s");
}

TEST_CASE("network_check: the start carries the figures; a hello its port") {
  Start start{true, {}, 2, false, std::nullopt};
  start.clock_offsets_ms = std::vector<std::int64_t>{0, -3};
  start.network = NetworkSummary{9.4e9, 0.12, 4.6, 6, {"network: worker:0 → worker:1: 4.1 Gbit/s (median 9.4)"}};
  auto parsed = parse_message(encode(start).substr(0, encode(start).size() - 1), Sender::coordinator);
  REQUIRE(parsed);
  REQUIRE(std::get<Start>(*parsed).network);
  CHECK(*std::get<Start>(*parsed).network == *start.network);
  CHECK(*std::get<Start>(*parsed).clock_offsets_ms == *start.clock_offsets_ms);

  Hello hello;
  hello.job = "0123456789abcdef";
  hello.task = JobMember{TaskType::worker, 1};
  hello.host = "pod-1";
  hello.instance = "aaaaaaaa";
  hello.preflight = NodeFigures{{"/logs", "", 100, 0.5}, std::nullopt};
  hello.network_port = 2221;
  auto line = encode(hello);
  auto back = parse_message(line.substr(0, line.size() - 1), Sender::task);
  REQUIRE(back);
  CHECK(std::get<Hello>(*back).network_port == 2221);
}

}  // namespace
}  // namespace tfboot
