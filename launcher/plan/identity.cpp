// Who am I: the first identity source that answers wins (docs/identity.md).
#include "plan/identity.h"

namespace tfboot {
namespace {

Result<int> index_from_setting(const Setting& setting) {
  auto index = parse_index(setting.value);
  if (!index) return usage_error(quoted(setting) + " is not a non-negative integer");
  return *index;
}

// An identity, an error, or nothing: then the next source is asked.
using Answer = Result<std::optional<Identity>>;

// The type when only an ordinal is known: --task-type, else the hostname's, else worker.
TaskType fallback_type(const IdentityInputs& in) {
  auto parts = split_hostname(in.hostname.name);
  return in.parsed.task_type.value_or(parts && parts->type ? *parts->type : TaskType::worker);
}

// A --task-type that names another type than `source` says is an error.
Result<void> check_flag_type(const IdentityInputs& in, TaskType type, const std::string& source) {
  if (!in.parsed.task_type || *in.parsed.task_type == type) return {};
  return usage_error(quoted(*in.parsed.identity_flags.task_type) + " contradicts " + source);
}

// 1. Explicit flags (or their twins).
Answer from_flags(const IdentityInputs& in) {
  if (!in.parsed.task_index) return std::nullopt;
  std::string source = in.parsed.identity_flags.task_index->source + (in.parsed.identity_flags.task_type ? " and " + in.parsed.identity_flags.task_type->source : "");
  return Identity{fallback_type(in), *in.parsed.task_index, source};
}

// 2. An operator's TF_CONFIG.
Answer from_operator_config(const IdentityInputs& in) {
  if (in.parsed.identity_flags.from != IdentityFrom::automatic || !in.parsed.operator_config) return std::nullopt;
  const TfConfig& config = *in.parsed.operator_config;
  return Identity{in.parsed.task_type.value_or(config.task_type), config.task_index, "TF_CONFIG"};
}

// 3. A platform: asked by the plan, which has the host's files (identity_with_platform).

// 4. An index from the environment: an Indexed Job's, or the pod-index label's.
Answer from_index_variable(const IdentityInputs& in) {
  if (in.parsed.identity_flags.from != IdentityFrom::automatic) return std::nullopt;
  for (const char* variable : {"JOB_COMPLETION_INDEX", "TFBOOT_POD_INDEX"}) {
    auto it = in.env.find(variable);
    if (it == in.env.end() || it->second.empty()) continue;
    auto index = index_from_setting(Setting{it->second, variable});
    if (!index) return std::unexpected(index.error());
    return identity_from_ordinal(fallback_type(in), *index, in.parsed.identity_flags.chief_at_ordinal_0, variable);
  }
  return std::nullopt;
}

// 5. The hostname, unless the PTR name is asked for.
Answer from_hostname(const IdentityInputs& in) {
  if (in.parsed.identity_flags.from == IdentityFrom::ptr) return std::nullopt;
  std::string source = "hostname '" + in.hostname.name + "' (from " + in.hostname.source + ")";
  auto parts = split_hostname(in.hostname.name);
  if (!parts) {
    // Every hint at once: without an ordinal the peers' names cannot be derived either.
    return usage_error(source + " is not of the form <prefix>-<type>-<ordinal> or <prefix>-<ordinal>; set --task-type and " +
                       (in.parsed.identity_flags.peer_template_given ? "--task-index" : "--task-index, and --peer-template for the peers' names") +
                       "; or run every task on this machine with `tfboot local`");
  }
  if (parts->type) {
    if (auto agrees = check_flag_type(in, *parts->type, source); !agrees) return std::unexpected(agrees.error());
    return Identity{*parts->type, parts->ordinal, source};
  }
  return identity_from_ordinal(fallback_type(in), parts->ordinal, in.parsed.identity_flags.chief_at_ordinal_0, source);
}

// 6. The PTR name of the own address (docker compose replicas count from 1).
Answer from_ptr_name(const IdentityInputs& in) {
  if (in.parsed.identity_flags.from != IdentityFrom::ptr) return std::nullopt;
  if (!in.ptr_name) return usage_error("--identity-from ptr: no PTR name found for the own address");
  auto first_label = in.ptr_name->value.substr(0, in.ptr_name->value.find('.'));
  auto parts = split_hostname(first_label);
  if (!parts || parts->ordinal < 1) {
    return usage_error(quoted(*in.ptr_name) + " is not of the form <project>-<service>-<N>.<network> with N >= 1");
  }
  std::string source = quoted(*in.ptr_name);
  if (parts->type) {
    if (auto agrees = check_flag_type(in, *parts->type, source); !agrees) return std::unexpected(agrees.error());
    return Identity{*parts->type, parts->ordinal - 1, source};
  }
  return identity_from_ordinal(in.parsed.task_type.value_or(TaskType::worker), parts->ordinal - 1, in.parsed.identity_flags.chief_at_ordinal_0,
                               source);
}

// docs/identity.md, in its order; the first that answers wins.
constexpr Answer (*identity_sources[])(const IdentityInputs&) = {from_flags, from_operator_config, from_index_variable,
                                                                 from_hostname, from_ptr_name};

}  // namespace

// An ordinal counted over one StatefulSet (or a platform's list) that may hold the chief at ordinal 0.
Identity identity_from_ordinal(TaskType type, int ordinal, bool chief_at_ordinal_0, std::string source) {
  if (chief_at_ordinal_0 && type == TaskType::worker) {
    if (ordinal == 0) return Identity{TaskType::chief, 0, std::move(source) + ", chief at ordinal 0"};
    return Identity{TaskType::worker, ordinal - 1, std::move(source) + ", chief at ordinal 0"};
  }
  return Identity{type, ordinal, std::move(source)};
}

Hostname choose_hostname(const std::optional<Setting>& hostname_flag, const Environment& env, const std::string& system_hostname) {
  if (hostname_flag) return Hostname{hostname_flag->value, hostname_flag->source};
  if (auto it = env.find("POD_NAME"); it != env.end() && !it->second.empty()) return Hostname{it->second, "POD_NAME"};
  return Hostname{system_hostname, "gethostname()"};
}

Result<Identity> resolve_identity(const IdentityInputs& in) {
  for (auto source : identity_sources) {
    auto answer = source(in);
    if (!answer) return std::unexpected(answer.error());
    if (*answer) return **answer;
  }
  // The hostname answers unless the PTR name is asked for, and the PTR source answers then.
  return usage_error("no identity source answered");
}

Result<Identity> identity_with_platform(const PlanInputs& parsed, const Identity& from_platform) {
  const IdentityFlags& flags = parsed.identity_flags;
  if (parsed.task_index) {
    std::string source = flags.task_index->source + (flags.task_type ? " and " + flags.task_type->source : "");
    return Identity{parsed.task_type.value_or(from_platform.type), *parsed.task_index, source};
  }
  if (parsed.task_type && *parsed.task_type != from_platform.type) {
    return usage_error(quoted(*flags.task_type) + " contradicts " + from_platform.task() + " from " + from_platform.source);
  }
  return from_platform;
}

Result<void> check_identity_in_cluster(const Identity& identity, const ClusterSpec& spec, const Setting& cluster_source) {
  if (identity.index < spec.count(identity.type)) return {};
  return usage_error("task " + identity.task() + " from " + identity.source + " is outside " + quoted(cluster_source));
}

}  // namespace tfboot
