// The options' values that identity, peers and platforms read, parsed once into typed values
// (docs/command-line.md, Identity). Later steps take these instead of parsing the text again.
#pragma once

#include <optional>

#include "base/error.h"
#include "base/setting.h"
#include "cli/options.h"
#include "dns/names.h"
#include "plan/cluster.h"
#include "plan/kubernetes.h"
#include "plan/tf_config.h"

namespace tfboot {

// The flags that say who this task is, as given: their text and source name them in messages.
struct IdentityFlags {
  std::optional<Setting> task_type;   // --task-type
  std::optional<Setting> task_index;  // --task-index
  std::optional<Setting> hostname;    // --hostname
  IdentityFrom from{};                // --identity-from
  bool chief_at_ordinal_0 = false;    // --chief-at-ordinal-0
  bool peer_template_given = false;   // --peer-template
};

struct PlanInputs {
  std::optional<TaskType> task_type;        // --task-type
  std::optional<int> task_index;            // --task-index
  std::optional<ClusterSpec> cluster;       // --cluster
  PortSpec ports;                           // --port
  std::optional<TfConfig> operator_config;  // an operator's TF_CONFIG, unless --cluster replaces it
  std::vector<DnsServer> dns_servers;        // --dns-server; empty: resolv.conf's (check_options)
  ServiceSettings service;                   // --service, --namespace, --cluster-domain
  IdentityFlags identity_flags;              // as given; task_type and task_index above are them parsed
  std::optional<Framework> framework;        // --framework, when given
  bool port_given = false;                   // --port, not its default
};

// Each value parsed once; a bad one is a usage error naming its flag, twin or variable. The checks
// across values (which are required together) are check_options' (plan/plan.h).
Result<PlanInputs> parse_plan_inputs(const Options& options, const Environment& env);
// --task-type and --task-index into `inputs`; check_options parses them last, after the checks
// a bad identity flag should not hide.
Result<void> parse_identity_flags(const Options& options, PlanInputs& inputs);

// The TF_CONFIG text an operator set, when tfboot adopts it: present, non-empty, and no
// --cluster given (which replaces it).
std::optional<std::string> operator_tf_config_text(const Options& options, const Environment& env);

}  // namespace tfboot
