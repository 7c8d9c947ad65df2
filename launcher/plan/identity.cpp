// Who am I: the first identity source that answers wins (README: Identity).
#include "plan/identity.h"

namespace tfboot {
namespace {

Result<TaskType> type_from_setting(const Setting& setting) {
  auto type = parse_task_type(setting.value);
  if (!type) {
    return usage_error(setting.source + " '" + setting.value + "' is not a task type (use chief, worker, ps or evaluator)");
  }
  return *type;
}

Result<int> index_from_setting(const Setting& setting) {
  auto index = parse_index(setting.value);
  if (!index) return usage_error(setting.source + " '" + setting.value + "' is not a non-negative integer");
  return *index;
}

}  // namespace

// An ordinal counted over one StatefulSet (or a platform's list) that may hold the chief at ordinal 0.
Identity identity_from_ordinal(TaskType type, int ordinal, bool chief_at_ordinal_0, std::string source) {
  if (chief_at_ordinal_0 && type == TaskType::worker) {
    if (ordinal == 0) return Identity{TaskType::chief, 0, std::move(source) + ", chief at ordinal 0"};
    return Identity{TaskType::worker, ordinal - 1, std::move(source) + ", chief at ordinal 0"};
  }
  return Identity{type, ordinal, std::move(source)};
}

Hostname choose_hostname(const Options& options, const Environment& env, const std::string& system_hostname) {
  if (options.hostname) return Hostname{options.hostname->value, options.hostname->source};
  if (auto it = env.find("POD_NAME"); it != env.end() && !it->second.empty()) return Hostname{it->second, "POD_NAME"};
  return Hostname{system_hostname, "gethostname()"};
}

Result<Identity> resolve_identity(const IdentityInputs& in) {
  const Options& options = in.options;
  auto parts = split_hostname(in.hostname.name);

  // The type when only an ordinal is known: --task-type, else the hostname's, else worker.
  std::optional<TaskType> flag_type;
  if (options.task_type) {
    auto type = type_from_setting(*options.task_type);
    if (!type) return std::unexpected(type.error());
    flag_type = *type;
  }
  TaskType fallback_type = flag_type.value_or(parts && parts->type ? *parts->type : TaskType::worker);

  // 1. Explicit flags (or their twins).
  if (options.task_index) {
    auto index = index_from_setting(*options.task_index);
    if (!index) return std::unexpected(index.error());
    std::string source = options.task_index->source + (options.task_type ? " and " + options.task_type->source : "");
    return Identity{fallback_type, *index, source};
  }
  if (options.identity_from == IdentityFrom::automatic) {
    // 2. An operator's TF_CONFIG.
    if (in.operator_config) {
      return Identity{flag_type.value_or(in.operator_config->task_type), in.operator_config->task_index, "TF_CONFIG"};
    }
    // 3. A platform is asked by the plan, which has the host's files (identity_with_platform).
    // 4. An index from the environment.
    for (const char* variable : {"JOB_COMPLETION_INDEX", "TFBOOT_POD_INDEX"}) {
      auto it = in.env.find(variable);
      if (it == in.env.end() || it->second.empty()) continue;
      auto index = index_from_setting(Setting{it->second, variable});
      if (!index) return std::unexpected(index.error());
      return identity_from_ordinal(fallback_type, *index, options.chief_at_ordinal_0, variable);
    }
  }
  // 6. The PTR name of the own address (docker compose replicas count from 1).
  if (options.identity_from == IdentityFrom::ptr) {
    if (!in.ptr_name) return usage_error("--identity-from ptr: no PTR name found for the own address");
    auto first_label = in.ptr_name->value.substr(0, in.ptr_name->value.find('.'));
    auto ptr_parts = split_hostname(first_label);
    if (!ptr_parts || ptr_parts->ordinal < 1) {
      return usage_error(in.ptr_name->source + " '" + in.ptr_name->value +
                         "' is not of the form <project>-<service>-<N>.<network> with N >= 1");
    }
    std::string source = in.ptr_name->source + " '" + in.ptr_name->value + "'";
    if (ptr_parts->type) {
      if (flag_type && *flag_type != *ptr_parts->type) {
        return usage_error(options.task_type->source + " '" + options.task_type->value + "' contradicts " + source);
      }
      return Identity{*ptr_parts->type, ptr_parts->ordinal - 1, source};
    }
    return identity_from_ordinal(flag_type.value_or(TaskType::worker), ptr_parts->ordinal - 1, options.chief_at_ordinal_0, source);
  }
  // 5. The hostname.
  std::string source = "hostname '" + in.hostname.name + "' (from " + in.hostname.source + ")";
  if (!parts) {
    return usage_error(source + " is not of the form <prefix>-<type>-<ordinal> or <prefix>-<ordinal>; set --task-type and --task-index");
  }
  if (parts->type) {
    if (flag_type && *flag_type != *parts->type) {
      return usage_error(options.task_type->source + " '" + options.task_type->value + "' contradicts " + source);
    }
    return Identity{*parts->type, parts->ordinal, source};
  }
  return identity_from_ordinal(fallback_type, parts->ordinal, options.chief_at_ordinal_0, source);
}

Result<Identity> identity_with_platform(const Options& options, const Identity& from_platform) {
  std::optional<TaskType> flag_type;
  if (options.task_type) {
    auto type = type_from_setting(*options.task_type);
    if (!type) return std::unexpected(type.error());
    flag_type = *type;
  }
  if (options.task_index) {
    auto index = index_from_setting(*options.task_index);
    if (!index) return std::unexpected(index.error());
    std::string source = options.task_index->source + (options.task_type ? " and " + options.task_type->source : "");
    return Identity{flag_type.value_or(from_platform.type), *index, source};
  }
  if (flag_type && *flag_type != from_platform.type) {
    return usage_error(options.task_type->source + " '" + options.task_type->value + "' contradicts " + from_platform.task() +
                       " from " + from_platform.source);
  }
  return from_platform;
}

Result<void> check_identity_in_cluster(const Identity& identity, const ClusterSpec& spec, const Setting& cluster_source) {
  if (identity.index < spec.count(identity.type)) return {};
  return usage_error("task " + identity.task() + " from " + identity.source + " is outside " + cluster_source.source + " '" +
                     cluster_source.value + "'");
}

}  // namespace tfboot
