// The start tree (docs/supervision.md): above star_limit tasks, a task joins the coordinator through a
// relay, a task every task can name from the cluster alone (no question asked); the relay carries
// its group's connections to the coordinator over one connection of its own, as frames:
//   relay:       open{id, source, peer}  a task connected to the relay (its address, for the name check)
//                gone{id, why}           that connection ended at the relay
//   both ways:   via{ids} and then one line: that line is the message of every connection listed
//                (a task's own message up; down, once per hop, what the coordinator says to each of them)
//   coordinator: close{id}               the coordinator is done with that connection (after what it sent)
// and the relay's and the coordinator's own ping. Pure: positions in, positions out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.h"

namespace tfboot {

// Jobs of up to this many tasks are a star: every task joins the coordinator itself.
inline constexpr std::size_t star_limit = 128;
// Above it, the tasks form groups of this many in cluster order counted from the coordinator: the
// coordinator's own group joins it directly, each other group through its first task, its relay.
inline constexpr std::size_t relay_group = 128;

// Positions in cluster order (settings.tasks). nullopt: `position` joins the coordinator itself.
std::optional<std::size_t> relay_of(std::size_t position, std::size_t coordinator, std::size_t tasks);
bool is_relay(std::size_t position, std::size_t coordinator, std::size_t tasks);
// The connections of its own the coordinator of a job of `tasks` holds: one per task in a star; in a
// tree one per task of its own group, and two per relay (its task's and the one carrying its group).
std::size_t coordinator_connections(std::size_t tasks);
// The positions a relay carries, itself excluded.
std::vector<std::size_t> carried_by(std::size_t relay, std::size_t coordinator, std::size_t tasks);

struct RelayOpen {
  std::uint64_t id = 0;
  std::string source;  // the task's address without its port
  std::string peer;    // with it, for messages
};
struct RelayVia {
  std::vector<std::uint64_t> ids;  // the next line is theirs
};
struct RelayGone {
  std::uint64_t id = 0;
  std::string why;
};
struct RelayClose {
  std::uint64_t id = 0;
};
using RelayFrame = std::variant<RelayOpen, RelayVia, RelayGone, RelayClose>;

// The most connections one via may list: a group, and its reconnects.
inline constexpr std::size_t max_via_ids = 4 * relay_group;

std::string encode_frame(const RelayFrame& frame);
// nullopt: the line is not a frame but a message ({"type":...}); an error: a bad frame.
Result<std::optional<RelayFrame>> parse_frame(std::string_view line);

}  // namespace tfboot
