// The options' values that identity, peers and platforms read, as typed values (docs/command-line.md,
// Identity); plan/plan.h parses them from the options once. Later steps take these, not the options.
#pragma once

#include <optional>

#include "base/error.h"
#include "base/setting.h"
#include "base/choices.h"
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

}  // namespace tfboot
