// Task types, cluster and port specs, peer templates and peer names (docs/peers-and-dns.md).
#include "plan/cluster.h"

#include <charconv>
#include <set>

namespace tfboot {
namespace {

std::optional<int> parse_port(std::string_view text) {
  auto value = parse_index(text);
  if (!value || *value < 1 || *value > 65535) return std::nullopt;
  return value;
}

}  // namespace

std::string_view to_string(TaskType type) {
  switch (type) {
    case TaskType::chief: return "chief";
    case TaskType::worker: return "worker";
    case TaskType::ps: return "ps";
    case TaskType::evaluator: return "evaluator";
  }
  return "?";
}

std::optional<TaskType> parse_task_type(std::string_view text) {
  if (text == "chief" || text == "master") return TaskType::chief;
  if (text == "worker") return TaskType::worker;
  if (text == "ps") return TaskType::ps;
  if (text == "evaluator") return TaskType::evaluator;
  return std::nullopt;
}

std::string task_name(TaskType type, int index) { return std::string(to_string(type)) + ":" + std::to_string(index); }

std::optional<int> parse_index(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;  // "03" is not how Kubernetes writes ordinals
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

Result<ClusterSpec> parse_cluster_spec(const Setting& setting) {
  ClusterSpec spec;
  std::set<TaskType> seen;
  for (auto item : split(setting.value, ',')) {
    auto equals = item.find('=');
    if (equals == std::string_view::npos) {
      return usage_error(quoted(setting) + ": '" + std::string(item) + "' is not type=count");
    }
    auto name = item.substr(0, equals);
    auto type = parse_task_type(name);
    if (!type || name == "master") {
      return usage_error(quoted(setting) + ": unknown task type '" + std::string(name) +
                         "' (use chief, worker, ps or evaluator)");
    }
    if (!seen.insert(*type).second) {
      return usage_error(quoted(setting) + ": task type '" + std::string(name) + "' is given twice");
    }
    auto count = parse_index(item.substr(equals + 1));
    if (!count || *count > max_tasks_per_type) {
      return usage_error(quoted(setting) + ": count '" + std::string(item.substr(equals + 1)) +
                         "' is not a number from 0 to " + std::to_string(max_tasks_per_type));
    }
    spec.counts[static_cast<std::size_t>(*type)] = *count;
  }
  if (spec.count(TaskType::chief) > 1) return usage_error(quoted(setting) + ": at most one chief");
  if (spec.count(TaskType::evaluator) > 1) return usage_error(quoted(setting) + ": at most one evaluator");
  if (spec.count(TaskType::chief) + spec.count(TaskType::worker) + spec.count(TaskType::ps) == 0) {
    return usage_error(quoted(setting) + ": needs at least one chief, worker or ps task");
  }
  return spec;
}

Result<PortSpec> parse_port_spec(const Setting& setting) {
  PortSpec spec;
  std::optional<int> default_port;
  std::array<std::optional<int>, 4> overrides;
  for (auto item : split(setting.value, ',')) {
    auto equals = item.find('=');
    if (equals == std::string_view::npos) {
      if (default_port) return usage_error(quoted(setting) + ": more than one default port");
      default_port = parse_port(item);
      if (!default_port) return usage_error(quoted(setting) + ": '" + std::string(item) + "' is not a port in 1..65535");
      continue;
    }
    auto name = item.substr(0, equals);
    auto type = parse_task_type(name);
    if (!type || name == "master") {
      return usage_error(quoted(setting) + ": unknown task type '" + std::string(name) + "'");
    }
    auto port = parse_port(item.substr(equals + 1));
    if (!port) {
      return usage_error(quoted(setting) + ": '" + std::string(item.substr(equals + 1)) + "' is not a port in 1..65535");
    }
    auto& slot = overrides[static_cast<std::size_t>(*type)];
    if (slot) return usage_error(quoted(setting) + ": port for '" + std::string(name) + "' is given twice");
    slot = port;
  }
  for (std::size_t i = 0; i < spec.ports.size(); ++i) {
    spec.ports[i] = overrides[i].value_or(default_port.value_or(2222));
  }
  return spec;
}

std::optional<HostnameParts> split_hostname(std::string_view hostname) {
  // Only the first label: the kubelet may hand us "host.service.namespace.svc...".
  hostname = hostname.substr(0, hostname.find('.'));
  auto dash = hostname.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto ordinal = parse_index(hostname.substr(dash + 1));
  if (!ordinal) return std::nullopt;
  HostnameParts parts;
  parts.ordinal = *ordinal;
  std::string_view rest = hostname.substr(0, dash);
  auto type_dash = rest.rfind('-');
  std::string_view type_text = type_dash == std::string_view::npos ? rest : rest.substr(type_dash + 1);
  if (auto type = parse_task_type(type_text)) {
    parts.type = type;
    parts.type_spelled_master = type_text == "master";
    parts.prefix = type_dash == std::string_view::npos ? "" : std::string(rest.substr(0, type_dash));
    return parts;
  }
  if (rest.empty()) return std::nullopt;
  parts.prefix = std::string(rest);
  return parts;
}

PeerTemplate derive_peer_template(const HostnameParts& parts, std::string_view name, int ordinal_base) {
  PeerTemplate result;
  result.prefix = parts.prefix;
  result.source = (ordinal_base == 0 ? "hostname '" : "PTR name '") + std::string(name) + "'";
  result.ordinal_base = ordinal_base;
  std::string lead = parts.prefix.empty() ? "" : parts.prefix + "-";
  if (parts.type) {
    result.text = lead + (ordinal_base == 0 ? "{type}-{index}" : "{type}-{ordinal}");
    result.chief_spelled_master = parts.type_spelled_master;
  } else {
    result.text = lead + "{ordinal}";
  }
  return result;
}

Result<PeerTemplate> make_peer_template(const Setting& setting, std::optional<HostnameParts> own_hostname) {
  PeerTemplate result{setting.value, quoted(setting), "", false};
  bool uses_prefix = false;
  for (std::size_t open = setting.value.find('{'); open != std::string::npos; open = setting.value.find('{', open + 1)) {
    auto close = setting.value.find('}', open);
    if (close == std::string::npos) return usage_error(quoted(setting) + ": unclosed '{'");
    auto name = std::string_view(setting.value).substr(open + 1, close - open - 1);
    if (name == "prefix") uses_prefix = true;
    else if (name != "type" && name != "index" && name != "ordinal") {
      return usage_error(quoted(setting) + ": unknown placeholder '{" + std::string(name) +
                         "}' (use {prefix} {type} {index} {ordinal})");
    }
  }
  if (uses_prefix) {
    if (!own_hostname || own_hostname->prefix.empty()) {
      return usage_error(quoted(setting) + " uses {prefix}, but the hostname has no '<prefix>-[<type>-]<ordinal>' form");
    }
    result.prefix = own_hostname->prefix;
    result.chief_spelled_master = own_hostname->type_spelled_master;
  }
  return result;
}

int ordinal_of(TaskType type, int index, bool chief_at_ordinal_0) {
  return chief_at_ordinal_0 && type == TaskType::worker ? index + 1 : index;
}

std::optional<std::string> dns_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 253) return "is longer than 253 characters";
  for (auto label : split(name, '.')) {
    if (label.empty()) return "has an empty label";
    if (label.size() > 63) return "has a label longer than 63 characters";
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) return "has a character that is not a letter, digit, '-' or '_'";
    }
    if (label.front() == '-' || label.back() == '-') return "has a label starting or ending with '-'";
  }
  return std::nullopt;
}

Result<std::vector<PeerAddress>> plan_peers(const ClusterSpec& spec, const PortSpec& ports, const PeerTemplate& peer_template,
                                            const std::optional<DnsSuffix>& suffix, bool chief_at_ordinal_0) {
  std::vector<PeerAddress> peers;
  std::map<std::string, std::string> task_by_name;
  for (TaskType type : all_task_types) {
    for (int index = 0; index < spec.count(type); ++index) {
      std::string host;
      const std::string& text = peer_template.text;
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '{') {
          host += text[i];
          continue;
        }
        auto close = text.find('}', i);
        auto name = std::string_view(text).substr(i + 1, close - i - 1);
        if (name == "prefix") host += peer_template.prefix;
        else if (name == "type") host += type == TaskType::chief && peer_template.chief_spelled_master ? "master" : to_string(type);
        else if (name == "index") host += std::to_string(index);
        else host += std::to_string(ordinal_of(type, index, chief_at_ordinal_0) + peer_template.ordinal_base);
        i = close;
      }
      PeerAddress peer{type, index, suffix ? host + "." + suffix->text() : host, ports.port(type), suffix.has_value()};
      if (auto problem = dns_name_problem(peer.name)) {
        return usage_error("peer name '" + peer.name + "' for " + peer.task() + " from peer template " +
                           peer_template.source + " " + *problem);
      }
      auto [it, inserted] = task_by_name.emplace(peer.name, peer.task());
      if (!inserted) {
        return usage_error("peer template " + peer_template.source + " gives " + it->second + " and " + peer.task() +
                           " the same name '" + peer.name + "' (add {type} or use --chief-at-ordinal-0)");
      }
      peers.push_back(std::move(peer));
    }
  }
  return peers;
}

}  // namespace tfboot
