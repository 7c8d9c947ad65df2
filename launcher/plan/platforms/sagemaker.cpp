// SageMaker (bring your own container): the hosts of the training job and this container's name,
// from the resource config SageMaker writes (README: Identity, "Platforms").
#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "base/json_nesting.h"
#include "plan/platforms/platforms.h"

namespace tfboot {
namespace {

// nlohmann's values are destroyed recursively; SageMaker's file is two levels deep.
constexpr int max_nesting = 16;

}  // namespace

Result<std::optional<PlatformJob>> job_from_sagemaker(const PlatformInputs& in) {
  const auto& text = in.facts.platform_files.sagemaker_resource_config;
  if (!text) return std::optional<PlatformJob>{};
  const std::string where = sagemaker_resource_config_path;
  if (!json_nesting_within(*text, max_nesting)) return usage_error(where + " is nested more than " + std::to_string(max_nesting) + " levels deep");
  auto root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return usage_error(where + " is not valid JSON");
  if (!root.is_object()) return usage_error(where + " is not a JSON object");
  auto current = root.find("current_host");
  if (current == root.end() || !current->is_string() || current->get<std::string>().empty()) {
    return usage_error(where + ": \"current_host\" is missing or not a non-empty string");
  }
  auto listed = root.find("hosts");
  if (listed == root.end() || !listed->is_array() || listed->empty()) {
    return usage_error(where + ": \"hosts\" is missing or not a non-empty list");
  }
  if (listed->size() > max_platform_hosts) return usage_error(where + ": \"hosts\" lists more than " + std::to_string(max_platform_hosts) + " hosts");
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  for (const auto& host : *listed) {
    if (!host.is_string()) return usage_error(where + ": \"hosts\" holds a value that is not a string");
    hosts.push_back(host.get<std::string>());
    if (auto named = platform::check_host_name(hosts.back(), where + " \"hosts\""); !named) return std::unexpected(named.error());
    if (!seen.insert(hosts.back()).second) return usage_error(where + ": \"hosts\" lists '" + hosts.back() + "' twice");
  }
  const std::string own = current->get<std::string>();
  auto position = std::find(hosts.begin(), hosts.end(), own);
  if (position == hosts.end()) return usage_error(where + ": current_host '" + own + "' is not in \"hosts\"");

  const PortSpec& ports = in.parsed.ports;
  auto peers = platform::peers_from_ordinals(hosts, std::vector<int>(hosts.size(), 0), ports, in.options.chief_at_ordinal_0,
                                             "SageMaker");
  if (!peers) return std::unexpected(peers.error());
  Identity identity = identity_from_ordinal(TaskType::worker, static_cast<int>(position - hosts.begin()),
                                            in.options.chief_at_ordinal_0,
                                            "SageMaker (current_host '" + own + "' in " + where + ")");
  return std::optional<PlatformJob>{PlatformJob{"SageMaker", identity, std::move(*peers), std::nullopt}};
}

}  // namespace tfboot
