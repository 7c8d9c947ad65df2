// Who am I: the first identity source that answers wins (docs/identity.md). Pure.
#pragma once

#include <optional>
#include <string>

#include "base/setting.h"
#include "plan/cluster.h"
#include "plan/inputs.h"
#include "plan/tf_config.h"

namespace tfboot {

struct Identity {
  TaskType type = TaskType::worker;
  int index = 0;
  std::string source;  // e.g. "hostname 'mnist-worker-3' (from POD_NAME)", for the log and startup.json
  std::string task() const { return task_name(type, index); }
};

// The name to parse and where it came from: --hostname, else POD_NAME, else gethostname().
struct Hostname {
  std::string name;
  std::string source;
};
Hostname choose_hostname(const std::optional<Setting>& hostname_flag, const Environment& env, const std::string& system_hostname);

struct IdentityInputs {
  const Environment& env;
  const Hostname& hostname;
  const PlanInputs& parsed;                 // the identity flags, and an operator's TF_CONFIG parsed
  const std::optional<Setting>& ptr_name;  // own PTR name, for --identity-from ptr
};

// The sources of docs/identity.md, in its order, one function each (identity.cpp); the first
// that answers wins. Identity only; whether the index fits is check_identity_in_cluster's.
Result<Identity> resolve_identity(const IdentityInputs& inputs);

// The task at `ordinal` of a list that may hold the chief first (--chief-at-ordinal-0): ordinal 0 is
// chief 0 and ordinal k worker k-1; otherwise `type` and the ordinal as they are.
Identity identity_from_ordinal(TaskType type, int ordinal, bool chief_at_ordinal_0, std::string source);

// The identity a platform gives (docs/identity.md), unless --task-index says otherwise (then the
// type is --task-type's, else the platform's). A --task-type that contradicts the platform is an error.
Result<Identity> identity_with_platform(const PlanInputs& parsed, const Identity& from_platform);

Result<void> check_identity_in_cluster(const Identity& identity, const ClusterSpec& spec, const Setting& cluster_source);

}  // namespace tfboot
