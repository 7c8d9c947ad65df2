// The start tree's pure side: who joins through which relay, and the relays' frames.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "control/protocol/tree.h"

namespace tfboot {
namespace {

std::string frame_error(std::string_view line) {
  auto parsed = parse_frame(line);
  return parsed ? "parsed" : parsed.error().message;
}

TEST_CASE("tree::a job of up to 128 tasks is a star") {
  for (std::size_t position = 0; position < star_limit; ++position) {
    CHECK_FALSE(relay_of(position, 0, star_limit));
    CHECK_FALSE(is_relay(position, 0, star_limit));
  }
}

TEST_CASE("tree::above 128 tasks each group of 128 but the coordinator's joins through its first task") {
  const std::size_t tasks = 300;
  CHECK_FALSE(relay_of(0, 0, tasks));
  CHECK_FALSE(relay_of(127, 0, tasks));   // the coordinator's group
  CHECK_FALSE(relay_of(128, 0, tasks));   // a relay joins the coordinator itself
  CHECK(relay_of(129, 0, tasks) == 128u);
  CHECK(relay_of(255, 0, tasks) == 128u);
  CHECK(relay_of(299, 0, tasks) == 256u);
  CHECK(is_relay(128, 0, tasks));
  CHECK(is_relay(256, 0, tasks));
  CHECK_FALSE(is_relay(0, 0, tasks));
  CHECK_FALSE(is_relay(384, 0, tasks));  // outside the job
  CHECK(carried_by(256, 0, tasks).size() == 43);
  CHECK(carried_by(128, 0, tasks).front() == 129u);
  CHECK(carried_by(5, 0, tasks).empty());
  CHECK(coordinator_connections(128) == 128);
  CHECK(coordinator_connections(tasks) == 127 + 2 * 2);
  CHECK(coordinator_connections(98'304) == 127 + 2 * 767);
}

TEST_CASE("tree::groups are counted from the coordinator's position, and every task has one way in") {
  const std::size_t tasks = 1000;
  for (std::size_t coordinator : {std::size_t{0}, std::size_t{1}, std::size_t{999}}) {
    std::set<std::size_t> carried;
    std::size_t direct = 0;
    for (std::size_t position = 0; position < tasks; ++position) {
      if (position == coordinator) continue;
      if (auto relay = relay_of(position, coordinator, tasks)) {
        CHECK(is_relay(*relay, coordinator, tasks));
        carried.insert(position);
      } else {
        ++direct;
      }
    }
    std::size_t relays = 0;
    std::set<std::size_t> listed;
    for (std::size_t position = 0; position < tasks; ++position) {
      if (!is_relay(position, coordinator, tasks)) continue;
      ++relays;
      for (std::size_t child : carried_by(position, coordinator, tasks)) {
        CHECK(relay_of(child, coordinator, tasks) == position);
        listed.insert(child);
      }
    }
    CHECK(listed == carried);
    CHECK(relays == 7);                 // 1000 / 128, the coordinator's group aside
    CHECK(direct == 127 + relays);      // its own group, and each relay's own task
  }
  CHECK(relay_of(1, 1, 1000) == std::nullopt);
  CHECK(relay_of(129, 1, 1000) == std::nullopt);  // counted from the coordinator at 1: the 128th, a relay
  CHECK(relay_of(130, 1, 1000) == 129u);
  CHECK(relay_of(0, 1, 1000) == 897u);  // the last group wraps around: 999 is 998th, 0 the 999th
}

TEST_CASE("tree::frames round-trip, and a bad one is named") {
  for (const RelayFrame& frame : {RelayFrame{RelayOpen{7, "10.0.0.7", "10.0.0.7:41234"}}, RelayFrame{RelayVia{{1, 2, 3}}},
                                  RelayFrame{RelayGone{7, "silent for 10s at its relay worker:128"}}, RelayFrame{RelayClose{9}}}) {
    const std::string line = encode_frame(frame);
    REQUIRE(line.back() == '\n');
    auto parsed = parse_frame(std::string_view(line).substr(0, line.size() - 1));
    REQUIRE(parsed);
    REQUIRE(*parsed);
    CHECK(encode_frame(**parsed) == line);
  }
  auto message = parse_frame(R"({"type":"ping"})");
  REQUIRE(message);
  CHECK_FALSE(*message);  // a message, not a frame
  CHECK(frame_error(R"({"frame":"via","ids":[]})") == "a bad relay frame: 'ids' is not a list of 1..512");
  CHECK(frame_error(R"({"frame":"via","ids":[-1]})") == "a bad relay frame: 'ids' holds what is not a connection id");
  CHECK(frame_error(R"({"frame":"open","id":1})") == "a bad relay frame: 'open' without its 'source' and 'peer'");
  CHECK(frame_error(R"({"frame":"gone"})") == "a bad relay frame: 'gone' without an 'id'");
  CHECK(frame_error(R"({"frame":"shout","id":1})") == "a bad relay frame: of unknown kind 'shout'");
  CHECK(frame_error(R"({"frame":)") == "a bad relay frame: not a JSON object with a 'frame'");
}

}  // namespace
}  // namespace tfboot
