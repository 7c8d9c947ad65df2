// Volcano: the env plugin's VC_TASK_INDEX and the svc plugin's host lists, in the environment
// (VC_<TASK>_HOSTS, VC_<TASK>_NUM) and in /etc/volcano/<task>.host (docs/identity.md, "Platforms").
#include <algorithm>
#include <cctype>
#include <set>

#include "plan/platforms/platforms.h"

namespace tfboot {
namespace {

using platform::env_setting;
using platform::first_label;

// The Volcano task names read as task types; a job's other tasks are not part of TF_CONFIG.
struct TaskName {
  TaskType type;
  std::string_view name;
};
constexpr TaskName task_names[] = {{TaskType::chief, "chief"}, {TaskType::chief, "master"}, {TaskType::worker, "worker"},
                                   {TaskType::ps, "ps"}, {TaskType::evaluator, "evaluator"}};

struct HostList {
  std::vector<std::string> hosts;
  std::string source;  // "VC_WORKER_HOSTS" or "/etc/volcano/worker.host"
};

std::vector<std::string> split_trimmed(std::string_view text, char separator) {
  std::vector<std::string> parts;
  for (std::string_view part : split(text, separator)) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front()))) part.remove_prefix(1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.remove_suffix(1);
    parts.emplace_back(part);
  }
  return parts;
}

// VC_<TASK>_NUM as the number it says, whatever the spelling ("2", "02", "+2", " 2"): nullopt when
// it is no non-negative decimal number. Digits only from there, so any length compares.
std::optional<std::string> count_digits(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.starts_with('+')) text.remove_prefix(1);
  if (text.empty() || !std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  while (text.size() > 1 && text.front() == '0') text.remove_prefix(1);
  return std::string(text);
}

// The hosts Volcano lists for one of its tasks, in index order; nullopt when it lists none.
Result<std::optional<HostList>> hosts_of(const PlatformInputs& in, std::string_view name) {
  std::string upper(name);
  std::ranges::transform(upper, upper.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const std::string file_name = std::string(name) + ".host";
  const std::string file_path = std::string(volcano_config_dir) + "/" + file_name;
  std::optional<HostList> list;
  if (auto setting = env_setting(in.env, "VC_" + upper + "_HOSTS")) {
    list = HostList{split_trimmed(setting->value, ','), setting->source};
  } else if (auto file = in.facts.platform_files.volcano_host_files.find(file_name); file != in.facts.platform_files.volcano_host_files.end()) {
    std::string_view text = file->second;
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    if (text.empty()) return std::optional<HostList>{};
    list = HostList{split_trimmed(text, '\n'), file_path};
  } else if (auto readable = platform::check_readable(in.facts.platform_files, file_path); !readable) {
    return std::unexpected(readable.error());
  }
  if (!list) return std::optional<HostList>{};
  if (list->hosts.size() > max_platform_hosts) return usage_error(list->source + " lists more than " + std::to_string(max_platform_hosts) + " hosts");
  std::set<std::string> seen;
  for (const auto& host : list->hosts) {
    if (auto named = platform::check_host_name(host, list->source); !named) return std::unexpected(named.error());
    if (!seen.insert(host).second) return usage_error(list->source + " lists '" + host + "' twice");
  }
  if (auto count = env_setting(in.env, "VC_" + upper + "_NUM")) {
    auto digits = count_digits(count->value);
    if (!digits) return usage_error(quoted(*count) + " is not a number of hosts");
    if (*digits != std::to_string(list->hosts.size())) {
      return usage_error(quoted(*count) + " does not match " + list->source + ", which lists " +
                         std::to_string(list->hosts.size()) + " hosts");
    }
  }
  return list;
}

struct OwnTask {
  TaskType type;
  std::optional<int> position;  // where the own hostname is in its list
  std::string source;
};

// The list that holds the own hostname, and --task-type, which must agree with it; else
// --task-type alone, else the type in the hostname.
Result<OwnTask> own_task(const PlatformInputs& in, const std::array<std::optional<HostList>, 4>& lists) {
  const std::string hostname_text = "hostname '" + in.hostname.name + "' (from " + in.hostname.source + ")";
  const std::optional<TaskType>& flagged = in.parsed.task_type;
  const std::string own = first_label(in.hostname.name);
  for (TaskType type : all_task_types) {
    const auto& list = lists[static_cast<std::size_t>(type)];
    if (!list) continue;
    auto found = std::ranges::find_if(list->hosts, [&](const std::string& host) { return first_label(host) == own; });
    if (found == list->hosts.end()) continue;
    if (flagged && *flagged != type) {
      return usage_error("Volcano: " + quoted(*in.parsed.identity_flags.task_type) + " contradicts " +
                         list->source + ", which lists " + hostname_text);
    }
    return OwnTask{type, static_cast<int>(found - list->hosts.begin()), hostname_text + " in " + list->source};
  }
  if (flagged) return OwnTask{*flagged, std::nullopt, in.parsed.identity_flags.task_type->source};
  if (auto parts = split_hostname(in.hostname.name); parts && parts->type && lists[static_cast<std::size_t>(*parts->type)]) {
    return OwnTask{*parts->type, std::nullopt, hostname_text};
  }
  return usage_error("Volcano: " + hostname_text + " is in none of the job's host lists and names no listed task type; set --task-type");
}

}  // namespace

Result<std::optional<PlatformJob>> job_from_volcano(const PlatformInputs& in) {
  auto index_setting = env_setting(in.env, "VC_TASK_INDEX");
  if (!index_setting) index_setting = env_setting(in.env, "VK_TASK_INDEX");
  std::array<std::optional<HostList>, 4> lists;
  for (const auto& [type, name] : task_names) {
    auto list = hosts_of(in, name);
    if (!list) return std::unexpected(list.error());
    if (!*list) continue;
    auto& slot = lists[static_cast<std::size_t>(type)];
    if (slot) return usage_error("Volcano: both " + slot->source + " and " + (*list)->source + " list the chief");
    slot = std::move(*list);
  }
  bool listed = std::ranges::any_of(lists, [](const auto& list) { return list.has_value(); });
  if (!index_setting && !listed) return std::optional<PlatformJob>{};
  if (!listed) {
    return usage_error("Volcano (" + index_setting->source + " is set): no VC_CHIEF_HOSTS, VC_WORKER_HOSTS, VC_PS_HOSTS or " +
                       "VC_EVALUATOR_HOSTS, nor " + volcano_config_dir + "/<task>.host (enable the svc plugin, and name the " +
                       "job's tasks chief, worker, ps or evaluator)");
  }
  auto own = own_task(in, lists);
  if (!own) return std::unexpected(own.error());
  const auto& own_list = lists[static_cast<std::size_t>(own->type)];
  if (!own_list) {
    return usage_error("Volcano: this task is a " + std::string(to_string(own->type)) + " (from " + own->source +
                       "), but the job lists no " + std::string(to_string(own->type)) + " hosts");
  }
  int index = 0;
  std::string source;
  if (index_setting) {
    auto parsed = parse_index(index_setting->value);
    if (!parsed) return usage_error(index_setting->source + " '" + index_setting->value + "' is not a non-negative integer");
    if (own->position && *own->position != *parsed) {
      return usage_error(index_setting->source + " '" + index_setting->value + "' contradicts " + own->source + " at position " +
                         std::to_string(*own->position));
    }
    if (static_cast<std::size_t>(*parsed) >= own_list->hosts.size()) {
      return usage_error(index_setting->source + " '" + index_setting->value + "' is outside " + own_list->source + ", which lists " +
                         std::to_string(own_list->hosts.size()) + " hosts");
    }
    index = *parsed;
    source = "Volcano (" + index_setting->source + ", type from " + own->source + ")";
  } else if (own->position) {
    index = *own->position;
    source = "Volcano (" + own->source + ", position " + std::to_string(index) + ")";
  } else {
    return usage_error("Volcano: VC_TASK_INDEX is not set (enable the env plugin)");
  }

  const PortSpec& ports = in.parsed.ports;
  platform::TasksByType tasks;
  for (TaskType type : all_task_types) {
    if (const auto& list = lists[static_cast<std::size_t>(type)]) {
      for (const auto& host : list->hosts) tasks[static_cast<std::size_t>(type)].push_back(platform::Task{host, ports.port(type)});
    }
  }
  auto peers = platform::peers_from_tasks(tasks, "Volcano");
  if (!peers) return std::unexpected(peers.error());
  Identity identity{own->type, index, source};
  return std::optional<PlatformJob>{PlatformJob{"Volcano", identity, std::move(*peers), std::nullopt}};
}

}  // namespace tfboot
