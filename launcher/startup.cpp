// The contents of startup.json: what tfboot found out before running the command (SPEC §7).
#include "startup.h"

#include <nlohmann/json.hpp>

namespace tfboot {

std::string build_startup_json(const StartupReport& report, const std::string& previous) {
  using nlohmann::ordered_json;
  ordered_json root;
  root["tfboot_version"] = report.version;
  root["task"] = {{"type", std::string(to_string(report.identity.type))}, {"index", report.identity.index}};
  root["identity_source"] = report.identity.source;
  root["hostname"] = report.hostname;
  root["started_at"] = report.started_at;
  root["dns_wait_seconds"] = report.dns_wait_seconds;
  root["written_at"] = report.written_at;
  root["dns_servers"] = report.dns_servers;
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
  root["peers"] = peers;
  root["warnings"] = report.warnings;
  root["tf_config"] = ordered_json::parse(report.tf_config, nullptr, false);
  root["command"] = ordered_json::parse(report.command_line, nullptr, false);

  // History of earlier starts in this log dir (a restarted container keeps its volume).
  ordered_json history = ordered_json::array();
  int restarts = 0;
  auto old = ordered_json::parse(previous, nullptr, false);
  if (old.is_object()) {
    // An earlier start happened: count it even if that file predates the counter.
    restarts = 1;
    if (auto it = old.find("restarts"); it != old.end() && it->is_number_integer()) restarts = it->get<int>() + 1;
    if (auto it = old.find("history"); it != old.end() && it->is_array()) history = *it;
    history.push_back({{"started_at", old.value("started_at", 0.0)}, {"identity_source", old.value("identity_source", "")}});
    while (history.size() > 20) history.erase(history.begin());
  }
  root["restarts"] = restarts;
  root["history"] = history;
  return root.dump(2) + "\n";
}

}  // namespace tfboot
