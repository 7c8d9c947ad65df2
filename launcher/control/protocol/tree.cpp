// The start tree: who joins through whom, and the relay's frames.
#include "control/protocol/tree.h"

#include <nlohmann/json.hpp>

#include "control/protocol/messages.h"

namespace tfboot {
namespace {

using nlohmann::json;

// A position counted from the coordinator's, which is 0.
std::size_t from_coordinator(std::size_t position, std::size_t coordinator, std::size_t tasks) {
  return (position + tasks - coordinator) % tasks;
}

std::string json_text(std::string_view text) { return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::optional<std::size_t> relay_of(std::size_t position, std::size_t coordinator, std::size_t tasks) {
  if (tasks <= star_limit || position >= tasks || coordinator >= tasks) return std::nullopt;
  const std::size_t counted = from_coordinator(position, coordinator, tasks);
  const std::size_t first = counted / relay_group * relay_group;
  if (first == 0 || first == counted) return std::nullopt;
  return (first + coordinator) % tasks;
}

bool is_relay(std::size_t position, std::size_t coordinator, std::size_t tasks) {
  if (tasks <= star_limit || position >= tasks || coordinator >= tasks) return false;
  const std::size_t counted = from_coordinator(position, coordinator, tasks);
  return counted != 0 && counted % relay_group == 0;
}

std::size_t coordinator_connections(std::size_t tasks) {
  if (tasks <= star_limit) return tasks;
  const std::size_t relays = (tasks - 1) / relay_group;  // every multiple of the group below `tasks`
  return (relay_group - 1) + 2 * relays;
}

std::vector<std::size_t> carried_by(std::size_t relay, std::size_t coordinator, std::size_t tasks) {
  std::vector<std::size_t> carried;
  if (!is_relay(relay, coordinator, tasks)) return carried;
  const std::size_t first = from_coordinator(relay, coordinator, tasks);
  for (std::size_t counted = first + 1; counted < first + relay_group && counted < tasks; ++counted) {
    carried.push_back((counted + coordinator) % tasks);
  }
  return carried;
}

std::string encode_frame(const RelayFrame& frame) {
  struct Encoder {
    std::string operator()(const RelayOpen& f) const {
      return R"({"frame":"open","id":)" + std::to_string(f.id) + R"(,"source":)" + json_text(f.source) + R"(,"peer":)" + json_text(f.peer) + "}\n";
    }
    std::string operator()(const RelayVia& f) const {
      std::string out = R"({"frame":"via","ids":[)";
      for (std::size_t i = 0; i < f.ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(f.ids[i]);
      }
      return out + "]}\n";
    }
    std::string operator()(const RelayGone& f) const { return R"({"frame":"gone","id":)" + std::to_string(f.id) + R"(,"why":)" + json_text(f.why) + "}\n"; }
    std::string operator()(const RelayClose& f) const { return R"({"frame":"close","id":)" + std::to_string(f.id) + "}\n"; }
  };
  return std::visit(Encoder{}, frame);
}

Result<std::optional<RelayFrame>> parse_frame(std::string_view line) {
  static constexpr std::string_view prefix = R"({"frame":)";
  if (line.substr(0, prefix.size()) != prefix) return std::optional<RelayFrame>{};
  if (line.size() > max_task_message) return make_error(protocol_violation, "a relay frame over " + std::to_string(max_task_message) + " bytes");
  json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string& what) -> Result<std::optional<RelayFrame>> { return make_error(protocol_violation, "a bad relay frame: " + what); };
  if (!object.is_object() || !object["frame"].is_string()) return bad("not a JSON object with a 'frame'");
  const std::string kind = object["frame"].get<std::string>();
  auto id = [&]() -> std::optional<std::uint64_t> {
    auto it = object.find("id");
    if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::uint64_t>();
  };
  auto text = [&](const char* key, std::size_t max) -> std::optional<std::string> {
    auto it = object.find(key);
    if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().size() > max) return std::nullopt;
    return it->get<std::string>();
  };
  if (kind == "via") {
    auto ids = object.find("ids");
    if (ids == object.end() || !ids->is_array() || ids->empty() || ids->size() > max_via_ids) return bad("'ids' is not a list of 1.." + std::to_string(max_via_ids));
    RelayVia via;
    via.ids.reserve(ids->size());
    for (const auto& item : *ids) {
      if (!item.is_number_unsigned()) return bad("'ids' holds what is not a connection id");
      via.ids.push_back(item.get<std::uint64_t>());
    }
    return std::optional<RelayFrame>{std::move(via)};
  }
  if (!id()) return bad("'" + kind.substr(0, 16) + "' without an 'id'");
  if (kind == "close") return std::optional<RelayFrame>{RelayClose{*id()}};
  if (kind == "gone") {
    auto why = text("why", 4096);
    if (!why) return bad("'gone' without a 'why'");
    return std::optional<RelayFrame>{RelayGone{*id(), *why}};
  }
  if (kind == "open") {
    auto source = text("source", 64);
    auto peer = text("peer", 80);
    if (!source || !peer) return bad("'open' without its 'source' and 'peer'");
    return std::optional<RelayFrame>{RelayOpen{*id(), *source, *peer}};
  }
  return bad("of unknown kind '" + kind.substr(0, 16) + "'");
}

}  // namespace tfboot
