// Who am I: the first identity source that answers wins (README: Identity). Pure.
#pragma once

#include <optional>
#include <string>

#include "cluster.h"
#include "options.h"
#include "tf_config.h"

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
Hostname choose_hostname(const Options& options, const Environment& env, const std::string& system_hostname);

struct IdentityInputs {
  const Options& options;
  const Environment& env;
  const Hostname& hostname;
  const std::optional<TfConfig>& operator_config;  // TF_CONFIG found in the environment
  const std::optional<Setting>& ptr_name;          // own PTR name, for --identity-from ptr
};

// Identity only; whether the index fits the cluster is checked by check_identity_in_cluster.
Result<Identity> resolve_identity(const IdentityInputs& inputs);

Result<void> check_identity_in_cluster(const Identity& identity, const ClusterSpec& spec, const Setting& cluster_source);

}  // namespace tfboot
