// SageMaker (bring your own container): the hosts of the training job and this container's name,
// from the resource config SageMaker writes (docs/identity.md, "Platforms").
#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "base/json_nesting.h"
#include "plan/platforms/platforms.h"

namespace tfboot {
namespace {

// nlohmann's values are destroyed recursively; SageMaker's file is two levels deep.
constexpr int max_nesting = 16;

const std::string where = sagemaker_resource_config_path;
const std::string give_cluster = ", so the job's hosts are unknown; describe the job with --cluster (and --peer-template, --task-index)";

struct InstanceGroup {
  std::string name;
  std::set<std::string> hosts;
};

// "hosts": every host of the job, the same list in every host's file (sorted, as SageMaker writes it).
Result<std::vector<std::string>> read_hosts(const nlohmann::json& root) {
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
  return hosts;
}

// With several instance groups (a heterogeneous cluster), the group this host is in
// ("current_group_name"): AWS's training toolkit distributes over that group by default
// (environment.py: distribution_hosts). nullopt with one group or none: every host is the job's.
Result<std::optional<InstanceGroup>> own_instance_group(const nlohmann::json& root, const std::vector<std::string>& hosts) {
  auto groups = root.find("instance_groups");
  if (groups == root.end() || !groups->is_array() || groups->size() <= 1) return std::optional<InstanceGroup>{};
  std::vector<InstanceGroup> listed;
  for (const auto& entry : *groups) {
    auto name = entry.find("instance_group_name");  // end() when the entry is not an object
    auto members = entry.find("hosts");
    bool valid = name != entry.end() && name->is_string() && !name->get<std::string>().empty() &&
                 members != entry.end() && members->is_array() &&
                 std::ranges::all_of(*members, [](const nlohmann::json& host) { return host.is_string(); });
    if (!valid) {
      return usage_error(where + ": \"instance_groups\" holds an entry that is not {\"instance_group_name\": <text>, \"hosts\": [<text>, ...]}");
    }
    InstanceGroup group{name->get<std::string>(), {}};
    if (std::ranges::any_of(listed, [&](const InstanceGroup& other) { return other.name == group.name; })) {
      return usage_error(where + ": \"instance_groups\" lists group '" + group.name + "' twice");
    }
    for (const auto& host : *members) {
      group.hosts.insert(host.get<std::string>());
      if (std::ranges::find(hosts, host.get<std::string>()) == hosts.end()) {
        return usage_error(where + ": instance group '" + group.name + "' lists '" + host.get<std::string>() + "', which is not in \"hosts\"");
      }
    }
    listed.push_back(std::move(group));
  }
  auto current = root.find("current_group_name");
  if (current == root.end() || !current->is_string() || current->get<std::string>().empty()) {
    return usage_error(where + ": \"instance_groups\" lists " + std::to_string(listed.size()) +
                       " groups but \"current_group_name\" is missing or not a non-empty string" + give_cluster);
  }
  auto own = std::ranges::find_if(listed, [&](const InstanceGroup& group) { return group.name == current->get<std::string>(); });
  if (own == listed.end()) {
    return usage_error(where + ": current_group_name '" + current->get<std::string>() + "' is not in \"instance_groups\"" + give_cluster);
  }
  return std::optional<InstanceGroup>{std::move(*own)};
}

// SageMaker does not give the container current_host as its hostname: gethostname() says the
// instance's name ("ip-10-0-103-105"), which is why AWS's toolkit preloads a gethostname() that
// reads current_host for MPI. So that name is no check; but a hostname tfboot was given
// (--hostname, POD_NAME), or one that is another host of the job, contradicts the file.
Result<std::vector<std::string>> check_hostname(const PlatformInputs& in, const std::string& current_host,
                                                const std::vector<std::string>& hosts) {
  const std::string label = platform::first_label(in.hostname.name);
  if (label == current_host || in.hostname.name.empty()) return std::vector<std::string>{};
  const std::string says = "SageMaker: " + where + " says this is current_host '" + current_host + "', but hostname '" +
                           in.hostname.name + "' (from " + in.hostname.source + ")";
  if (in.parsed.identity_flags.hostname || platform::env_setting(in.env, "POD_NAME")) {
    return usage_error(says + " says otherwise (a copy of the file left in the image? remove it, or give --cluster)");
  }
  if (std::ranges::find(hosts, label) != hosts.end()) return usage_error(says + " is another of its hosts");
  // SageMaker sets TRAINING_JOB_NAME in every training container; without it the file may be a
  // copy left in the image, and the DNS wait for the hosts it names would fail minutes later.
  if (platform::env_setting(in.env, "TRAINING_JOB_NAME")) return std::vector<std::string>{};
  return std::vector<std::string>{"SageMaker: " + where + " says this is current_host '" + current_host + "', hostname '" +
                                  in.hostname.name + "' is none of its hosts and TRAINING_JOB_NAME is not set: if this is " +
                                  "not a SageMaker training job, the file is a copy left in the image (remove it, or give --cluster)"};
}

}  // namespace

Result<std::optional<PlatformJob>> job_from_sagemaker(const PlatformInputs& in) {
  if (auto readable = platform::check_readable(in.facts.platform_files, where); !readable) return std::unexpected(readable.error());
  const auto& text = in.facts.platform_files.sagemaker_resource_config;
  if (!text) return std::optional<PlatformJob>{};
  if (!json_nesting_within(*text, max_nesting)) return usage_error(where + " is nested more than " + std::to_string(max_nesting) + " levels deep");
  auto root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return usage_error(where + " is not valid JSON");
  if (!root.is_object()) return usage_error(where + " is not a JSON object");
  auto current = root.find("current_host");
  if (current == root.end() || !current->is_string() || current->get<std::string>().empty()) {
    return usage_error(where + ": \"current_host\" is missing or not a non-empty string");
  }
  auto hosts = read_hosts(root);
  if (!hosts) return std::unexpected(hosts.error());
  const std::string own = current->get<std::string>();
  if (std::ranges::find(*hosts, own) == hosts->end()) return usage_error(where + ": current_host '" + own + "' is not in \"hosts\"");
  auto warnings = check_hostname(in, own, *hosts);
  if (!warnings) return std::unexpected(warnings.error());
  auto group = own_instance_group(root, *hosts);
  if (!group) return std::unexpected(group.error());
  std::string source = "SageMaker (current_host '" + own + "' in " + where + ")";
  if (*group) {
    if (!(*group)->hosts.contains(own)) return usage_error(where + ": current_host '" + own + "' is not in instance group '" + (*group)->name + "'");
    // In the order of "hosts", the same on every host; a group's own list is not (algo-2's file
    // may list its group as ["algo-2", "algo-1"]).
    std::erase_if(*hosts, [&](const std::string& host) { return !(*group)->hosts.contains(host); });
    source = "SageMaker (current_host '" + own + "' in instance group '" + (*group)->name + "' of " + where + ")";
  }

  const PortSpec& ports = in.parsed.ports;
  auto peers = platform::peers_from_ordinals(*hosts, std::vector<int>(hosts->size(), 0), ports, in.parsed.identity_flags.chief_at_ordinal_0,
                                             "SageMaker");
  if (!peers) return std::unexpected(peers.error());
  const auto position = std::ranges::find(*hosts, own) - hosts->begin();
  Identity identity = identity_from_ordinal(TaskType::worker, static_cast<int>(position), in.parsed.identity_flags.chief_at_ordinal_0, source);
  PlatformJob job{"SageMaker", identity, std::move(*peers), std::nullopt};
  job.warnings = std::move(*warnings);
  return std::optional<PlatformJob>{std::move(job)};
}

}  // namespace tfboot
