// The contents of startup.json: what tfboot found out before running the command (SPEC §7). Pure.
#pragma once

#include <string>
#include <vector>

#include "cluster.h"
#include "dns_wait.h"
#include "identity.h"

namespace tfboot {

struct StartupReport {
  std::string version;
  Identity identity;
  std::string hostname;
  std::vector<PeerAddress> peers;
  std::vector<NameStatus> resolution;  // one per peer when the DNS wait ran, else empty
  std::vector<std::string> dns_servers;
  std::vector<std::string> warnings;
  std::string tf_config;
  std::string command_line;  // the command's argv as a JSON list text
  double started_at = 0;     // Unix seconds
  double dns_wait_seconds = 0;
  double written_at = 0;
};

// Restarts in the same pod keep the history: `previous` is the last startup.json (may be empty
// or unreadable), whose runs are carried over and whose restart count is raised by one.
std::string build_startup_json(const StartupReport& report, const std::string& previous);

}  // namespace tfboot
