// The contents of startup.json, and what an earlier one says about earlier starts.
#include "task/startup.h"

#include <nlohmann/json.hpp>

#include "base/json_nesting.h"

namespace tfboot {
namespace {

using nlohmann::ordered_json;

// nlohmann parses iteratively but copies, dumps and destroys recursively: a deeply nested
// earlier file would overflow the stack. Our own files are 4 levels deep.
constexpr int max_nesting = 16;
constexpr std::size_t max_text_field = 4096;
constexpr int max_restarts = 1'000'000'000;

PreviousStarts damaged(std::string why) { return PreviousStarts{.damage = std::move(why)}; }

std::string dump(const ordered_json& value, int indent) {
  // Hostnames and command arguments are bytes, not always UTF-8: replaced, never an abort.
  return value.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json peers_json(const StartupReport& report) {
  ordered_json peers = ordered_json::array();
  for (std::size_t i = 0; i < report.peers.size(); ++i) {
    const PeerAddress& peer = report.peers[i];
    ordered_json entry{{"task", peer.task()}, {"name", peer.name}, {"port", peer.port}};
    if (i < report.resolution.size()) {
      const NameStatus& status = report.resolution[i];
      entry["resolved"] = status.resolved;
      entry["addresses"] = status.addresses;
      entry["tries"] = status.tries;
      entry["seconds_to_resolve"] = status.resolved ? static_cast<double>(status.time_to_resolve.count()) / 1000.0 : -1.0;
      if (!status.resolved) entry["last_error"] = describe(status);
    }
    peers.push_back(entry);
  }
  return peers;
}

}  // namespace

PreviousStarts read_previous_starts(const std::optional<std::string>& text) {
  if (!text) return {};
  if (text->size() > max_previous_startup_json) return damaged("larger than 1 MiB");
  if (!json_nesting_within(*text, max_nesting)) return damaged("nested deeper than " + std::to_string(max_nesting) + " levels");
  auto old = ordered_json::parse(*text, nullptr, false);
  if (old.is_discarded() || !old.is_object()) return damaged("not a JSON object");
  PreviousStarts previous;
  // An earlier start happened: count it even if that file predates the counter.
  previous.restarts = 1;
  if (auto it = old.find("restarts"); it != old.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() >= max_restarts) {
      return damaged("\"restarts\" is not a count");
    }
    previous.restarts = static_cast<int>(it->get<long long>()) + 1;
  }
  auto started_at = old.find("started_at");
  auto source = old.find("identity_source");
  if (started_at == old.end() || !started_at->is_number() || source == old.end() || !source->is_string() ||
      source->get_ref<const std::string&>().size() > max_text_field) {
    return damaged("\"started_at\" or \"identity_source\" missing or of the wrong type");
  }
  if (auto it = old.find("history"); it != old.end()) {
    if (!it->is_array()) return damaged("\"history\" is not a list");
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("started_at") || !entry["started_at"].is_number() ||
          !entry.contains("identity_source") || !entry["identity_source"].is_string() ||
          entry["identity_source"].get_ref<const std::string&>().size() > max_text_field) {
        return damaged("an entry of \"history\" is not a start");
      }
      previous.history.push_back({entry["started_at"].get<double>(), entry["identity_source"].get<std::string>()});
    }
  }
  previous.history.push_back({started_at->get<double>(), source->get<std::string>()});
  if (previous.history.size() > max_history) {
    previous.history.erase(previous.history.begin(), previous.history.end() - static_cast<std::ptrdiff_t>(max_history));
  }
  return previous;
}

std::string build_startup_json(const StartupReport& report, const PreviousStarts& previous) {
  ordered_json root;
  root["tfboot_version"] = report.version;
  root["task"] = {{"type", std::string(to_string(report.identity.type))}, {"index", report.identity.index}};
  root["identity_source"] = report.identity.source;
  root["hostname"] = report.hostname;
  root["started_at"] = report.started_at;
  root["dns_wait_seconds"] = report.dns_wait_seconds;
  root["written_at"] = report.written_at;
  root["dns_servers"] = report.dns_servers;
  root["peers"] = peers_json(report);
  root["warnings"] = report.warnings;
  root["tf_config"] = ordered_json::parse(report.tf_config, nullptr, false);
  root["command"] = report.command;
  if (!report.job_json.empty()) root["job"] = ordered_json::parse(report.job_json, nullptr, false);
  if (!report.framework_json.empty()) root["framework"] = ordered_json::parse(report.framework_json, nullptr, false);
  root["restarts"] = previous.restarts;
  ordered_json history = ordered_json::array();
  for (const auto& start : previous.history) {
    history.push_back({{"started_at", start.started_at}, {"identity_source", start.identity_source}});
  }
  root["history"] = history;
  return dump(root, 2) + "\n";
}

}  // namespace tfboot
