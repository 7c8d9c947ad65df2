// The network level's measurement (control/network_probe.h) over loopback: two probes measure the
// link between them both ways; a partner that is not there is a problem on the sender's link; a
// connection of another session is not counted.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <future>
#include <string>
#include <vector>

#include "control/network_probe.h"
#include "control/socket.h"

namespace tfboot {
namespace {

Measure plan_to(int to, int port) {
  Measure plan{.session = "0123456789abcdef", .round_ms = 400, .bulk_ms = 150, .max_bytes = 32 << 20};
  plan.rounds.push_back({to, "127.0.0.1", port});
  return plan;
}

TEST_CASE("network_probe::measure two probes measure the link between them both ways") {
  auto first = NetworkProbe::open(0, "job");
  auto second = NetworkProbe::open(0, "job");
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(first->port() != 0);
  const Instant start = SteadyClock::now();
  auto other = std::async(std::launch::async, [&] { return second->measure(plan_to(0, first->port()), 1, 1, start); });
  const auto mine = first->measure(plan_to(1, second->port()), 0, 1, start);
  const auto theirs = other.get();
  // Each side reports the link it received, with both figures, and no problem with the one it sent.
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].from == 1);
  CHECK(mine[0].to == 0);
  CHECK(mine[0].problem == "");
  REQUIRE(mine[0].rtt_us);
  CHECK(*mine[0].rtt_us < 100'000);
  REQUIRE(mine[0].bits_per_second);
  CHECK(*mine[0].bits_per_second > 10'000'000);  // loopback: far more than 10 Mbit/s
  REQUIRE(theirs.size() == 1);
  CHECK(theirs[0].from == 0);
  CHECK(theirs[0].to == 1);
  CHECK(theirs[0].bits_per_second.has_value());
  // Every inbound link in: done well before the session's bound.
  CHECK(SteadyClock::now() - start < network_session_length(plan_to(1, 1)));
}

TEST_CASE("network_probe::measure a partner that is not there is the sender's problem") {
  auto lonely = NetworkProbe::open(0, "job");
  auto closed = NetworkProbe::open(0, "job");
  REQUIRE(lonely);
  REQUIRE(closed);
  const int nobody = closed->port();
  closed = make_error(exit_code::resources, "closed");  // the port is free again: nothing listens
  const auto links = lonely->measure(plan_to(1, nobody), 0, 0, SteadyClock::now());
  REQUIRE(links.size() == 1);
  CHECK(links[0].from == 0);
  CHECK(links[0].to == 1);
  CHECK_FALSE(links[0].bits_per_second);
  CHECK(links[0].problem.find("onnection refused") != std::string::npos);
}

TEST_CASE("network_probe::measure a connection of another session is not counted") {
  auto probe = NetworkProbe::open(0, "job");
  REQUIRE(probe);
  Measure plan{.session = "0123456789abcdef", .round_ms = 200, .bulk_ms = 50, .max_bytes = 1 << 20};  // no rounds of its own
  const Instant start = SteadyClock::now();
  auto measured = std::async(std::launch::async, [&] { return probe->measure(plan, 0, 1, start); });
  auto stranger = start_connect("127.0.0.1", probe->port());
  REQUIRE(stranger);
  std::vector<pollfd> fds{{stranger->fd(), POLLOUT, 0}};
  REQUIRE(poll_until(fds, SteadyClock::now() + std::chrono::seconds(2), "test"));
  const std::string header = "tfboot-probe 1 fedcba9876543210 0 1 job\n";
  CHECK(::send(stranger->fd(), header.data(), header.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(header.size()));
  const auto links = measured.get();  // at the session's bound: the one inbound link never came
  CHECK(links.empty());
  CHECK(SteadyClock::now() - start >= network_session_length(plan) - std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace tfboot
