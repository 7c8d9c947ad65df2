// Build, parse and validate TF_CONFIG the way TensorFlow reads it (docs/frameworks.md: TF_CONFIG). Pure.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "plan/cluster.h"

namespace tfboot {

struct TfConfig {
  std::array<std::vector<std::string>, 4> jobs;  // addresses by TaskType, in TF_CONFIG key order
  TaskType task_type = TaskType::worker;
  int task_index = 0;
  // Kept as given when adopting an operator's TF_CONFIG.
  std::optional<std::string> environment;
  std::optional<std::string> rpc_layer;

  const std::vector<std::string>& job(TaskType type) const { return jobs[static_cast<std::size_t>(type)]; }
  std::vector<std::string>& job(TaskType type) { return jobs[static_cast<std::size_t>(type)]; }
};

// Keys in the order cluster, task; empty jobs left out; compact, one line.
std::string to_json(const TfConfig& config);

// The checks TensorFlow makes before it connects; `source` names where the config came from.
Result<void> validate_tf_config(const TfConfig& config, std::string_view source);

// Parses and validates an operator's TF_CONFIG.
Result<TfConfig> parse_tf_config(std::string_view json, std::string_view source);

// "host:port" or "[v6]:port", port 1..65535, no comma or whitespace; nullopt when fine.
std::optional<std::string> address_problem(std::string_view address);

// Splits a valid address into host (without brackets) and port.
std::pair<std::string, int> split_address(std::string_view address);

// TF_CONFIG for one task of a planned cluster. `addresses` holds one "host:port" per peer, in plan
// order. The evaluator is listed only when asked for.
TfConfig build_tf_config(const std::vector<PeerAddress>& peers, const std::vector<std::string>& addresses, TaskType own_type,
                         int own_index, bool evaluator_in_cluster);

}  // namespace tfboot
