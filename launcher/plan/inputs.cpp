// The options' values parsed once (inputs.h).
#include "plan/inputs.h"

namespace tfboot {

std::optional<std::string> operator_tf_config_text(const Options& options, const Environment& env) {
  auto it = env.find("TF_CONFIG");
  if (it == env.end() || it->second.empty() || options.cluster) return std::nullopt;
  return it->second;
}

Result<PlanInputs> parse_plan_inputs(const Options& options, const Environment& env) {
  PlanInputs inputs;
  if (auto text = operator_tf_config_text(options, env)) {
    auto config = parse_tf_config(*text, "TF_CONFIG from the environment");
    if (!config) return std::unexpected(config.error());
    inputs.operator_config = std::move(*config);
  }
  if (options.cluster) {
    auto spec = parse_cluster_spec(*options.cluster);
    if (!spec) return std::unexpected(spec.error());
    inputs.cluster = *spec;
  }
  // torchrun's default master port; JAX has none and takes the same (as Kubeflow's runtimes do).
  const bool default_port = options.port.source == "default";
  auto ports = parse_port_spec(default_port && options.framework != Framework::tensorflow ? Setting{"29500", "default"} : options.port);
  if (!ports) return std::unexpected(ports.error());
  inputs.ports = *ports;
  inputs.service = {options.service, options.kube_namespace, options.cluster_domain};
  inputs.identity_flags = {options.task_type,    options.task_index,         options.hostname,
                           options.identity_from, options.chief_at_ordinal_0, options.peer_template.has_value()};
  if (options.framework_given) inputs.framework = options.framework;
  inputs.port_given = options.port.source != "default";
  return inputs;
}

Result<void> parse_identity_flags(const Options& options, PlanInputs& inputs) {
  if (options.task_type) {
    auto type = parse_task_type(options.task_type->value);
    if (!type) return usage_error(quoted(*options.task_type) + " is not a task type (use chief, worker, ps or evaluator)");
    inputs.task_type = *type;
  }
  if (options.task_index) {
    auto index = parse_index(options.task_index->value);
    if (!index) return usage_error(quoted(*options.task_index) + " is not a non-negative integer");
    inputs.task_index = *index;
  }
  return {};
}

}  // namespace tfboot
