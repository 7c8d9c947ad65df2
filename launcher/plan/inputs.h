// The options' values that identity, peers and platforms read, parsed once into typed values
// (docs/command-line.md, Identity). Later steps take these instead of parsing the text again.
#pragma once

#include <optional>

#include "base/error.h"
#include "base/setting.h"
#include "cli/options.h"
#include "plan/cluster.h"
#include "plan/tf_config.h"

namespace tfboot {

struct PlanInputs {
  std::optional<TaskType> task_type;        // --task-type
  std::optional<int> task_index;            // --task-index
  std::optional<ClusterSpec> cluster;       // --cluster
  PortSpec ports;                           // --port
  std::optional<TfConfig> operator_config;  // an operator's TF_CONFIG, unless --cluster replaces it
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
