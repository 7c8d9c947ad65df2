// Build, parse and validate TF_CONFIG the way TensorFlow reads it (docs/frameworks.md: TF_CONFIG).
#include "plan/tf_config.h"

#include <set>

#include <nlohmann/json.hpp>

namespace tfboot {

namespace {

// A JSON string as nlohmann's dump writes it (the texts here are valid UTF-8: names and addresses
// tfboot checked, or an operator's TF_CONFIG that parsed).
void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

}  // namespace

// Written by hand rather than through a JSON value: it runs once per task and grows with the
// cluster, and a JSON value's destructor may allocate while an out-of-memory error unwinds,
// which would abort instead of ending with exit 7.
std::string to_json(const TfConfig& config) {
  std::string out;
  std::size_t size = 64;
  for (TaskType type : all_task_types) {
    for (const auto& address : config.job(type)) size += address.size() + 3;
  }
  out.reserve(size);
  out += "{\"cluster\":{";
  bool first_job = true;
  for (TaskType type : all_task_types) {
    const auto& job = config.job(type);
    if (job.empty()) continue;
    if (!first_job) out += ',';
    first_job = false;
    append_json_string(out, to_string(type));
    out += ":[";
    for (std::size_t i = 0; i < job.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, job[i]);
    }
    out += ']';
  }
  out += "},\"task\":{\"type\":";
  append_json_string(out, to_string(config.task_type));
  out += ",\"index\":" + std::to_string(config.task_index) + "}";
  if (config.environment) {
    out += ",\"environment\":";
    append_json_string(out, *config.environment);
  }
  if (config.rpc_layer) {
    out += ",\"rpc_layer\":";
    append_json_string(out, *config.rpc_layer);
  }
  out += '}';
  return out;
}

std::optional<std::string> address_problem(std::string_view address) {
  if (address.find_first_of(", \t\r\n") != std::string_view::npos) return "contains a comma or whitespace";
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos || address.ends_with(']')) return "has no ':port'";
  auto host = address.substr(0, colon);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3) return "has a malformed [IPv6] host";
  } else if (host.find(':') != std::string_view::npos) {
    return "has an IPv6 host without [brackets]";
  }
  if (host.empty()) return "has an empty host";
  auto port = parse_index(address.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) return "has a port outside 1..65535";
  return std::nullopt;
}

std::pair<std::string, int> split_address(std::string_view address) {
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon);
  if (host.starts_with('[')) host = host.substr(1, host.size() - 2);
  return {std::string(host), parse_index(address.substr(colon + 1)).value_or(0)};
}

Result<void> validate_tf_config(const TfConfig& config, std::string_view source) {
  const std::string where(source);
  if (config.job(TaskType::chief).size() > 1) return usage_error(where + ": more than one chief");
  if (config.job(TaskType::evaluator).size() > 1) return usage_error(where + ": more than one evaluator");
  bool any = false;
  for (TaskType type : all_task_types) {
    const auto& job = config.job(type);
    any = any || !job.empty();
    for (std::size_t i = 0; i < job.size(); ++i) {
      if (auto problem = address_problem(job[i])) {
        return usage_error(where + ": address '" + job[i] + "' of " + task_name(type, static_cast<int>(i)) +
                           " " + *problem);
      }
    }
  }
  if (!any) return usage_error(where + ": cluster has no tasks");
  const auto& own_job = config.job(config.task_type);
  std::string task = task_name(config.task_type, config.task_index);
  if (own_job.empty()) {
    // An evaluator runs beside the cluster and need not be listed in it.
    if (config.task_type == TaskType::evaluator) {
      if (config.task_index != 0) return usage_error(where + ": task " + task + " but there is only one evaluator");
      return {};
    }
    return usage_error(where + ": task type '" + std::string(to_string(config.task_type)) + "' is not in the cluster");
  }
  if (config.task_index < 0 || static_cast<std::size_t>(config.task_index) >= own_job.size()) {
    return usage_error(where + ": task " + task + " is outside the cluster's " + std::to_string(own_job.size()) + " " +
                       std::string(to_string(config.task_type)) + " task(s)");
  }
  return {};
}

Result<TfConfig> parse_tf_config(std::string_view json, std::string_view source) {
  const std::string where(source);
  // JSON allows a key twice and keeps the last; TensorFlow's json.loads would too, silently
  // dropping a job. We refuse instead, and name the key.
  std::vector<std::set<std::string>> keys_by_depth;
  std::optional<std::string> duplicate;
  auto find_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys_by_depth.emplace_back();
    if (event == Event::object_end && !keys_by_depth.empty()) keys_by_depth.pop_back();
    if (event == Event::key && !keys_by_depth.empty() && !keys_by_depth.back().insert(parsed.get<std::string>()).second &&
        !duplicate) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json root = nlohmann::json::parse(json, find_duplicates, /*allow_exceptions=*/false);
  if (root.is_discarded()) return usage_error(where + " is not valid JSON");
  if (duplicate) return usage_error(where + ": key '" + *duplicate + "' appears twice in one object");
  if (!root.is_object()) return usage_error(where + " is not a JSON object");
  TfConfig config;
  auto cluster = root.find("cluster");
  if (cluster == root.end() || !cluster->is_object()) return usage_error(where + " has no \"cluster\" object");
  for (const auto& [name, addresses] : cluster->items()) {
    auto type = parse_task_type(name);
    if (!type || name == "master") {
      return usage_error(where + ": unknown job '" + name + "' in cluster (only chief, worker, ps, evaluator)");
    }
    if (!addresses.is_array()) return usage_error(where + ": job '" + name + "' is not a list of addresses");
    for (const auto& address : addresses) {
      if (!address.is_string()) return usage_error(where + ": job '" + name + "' has an address that is not a string");
      config.job(*type).push_back(address.get<std::string>());
    }
  }
  auto task = root.find("task");
  if (task == root.end() || !task->is_object()) return usage_error(where + " has no \"task\" object");
  auto type = task->find("type");
  if (type == task->end() || !type->is_string()) return usage_error(where + ": task.type is missing or not a string");
  auto task_type = parse_task_type(type->get<std::string>());
  if (!task_type || *type == "master") {
    return usage_error(where + ": task.type '" + type->get<std::string>() + "' is not chief, worker, ps or evaluator");
  }
  config.task_type = *task_type;
  auto index = task->find("index");
  if (index == task->end()) {
    config.task_index = 0;  // TensorFlow's default
  } else if (!index->is_number_integer() || index->get<long long>() < 0 || index->get<long long>() > 1'000'000) {
    return usage_error(where + ": task.index " + index->dump() + " is not a non-negative integer");
  } else {
    config.task_index = static_cast<int>(index->get<long long>());
  }
  for (auto [key, target] : {std::pair{"environment", &config.environment}, std::pair{"rpc_layer", &config.rpc_layer}}) {
    auto value = root.find(key);
    if (value == root.end()) continue;
    if (!value->is_string()) return usage_error(where + ": \"" + key + "\" is not a string");
    *target = value->get<std::string>();
  }
  if (auto valid = validate_tf_config(config, source); !valid) return std::unexpected(valid.error());
  return config;
}

TfConfig build_tf_config(const std::vector<PeerAddress>& peers, const std::vector<std::string>& addresses, TaskType own_type,
                         int own_index, bool evaluator_in_cluster) {
  TfConfig config;
  config.task_type = own_type;
  config.task_index = own_index;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].type == TaskType::evaluator && !evaluator_in_cluster) continue;
    config.job(peers[i].type).push_back(addresses[i]);
  }
  return config;
}

}  // namespace tfboot
