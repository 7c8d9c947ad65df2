// What this task will do, decided before any lookup. Pure.
#include "plan/plan.h"

#include <algorithm>

#include "dns/resolver.h"
#include "plan/kubernetes.h"
#include "plan/platforms/platforms.h"

namespace tfboot {
namespace {

// Peers as an operator's TF_CONFIG lists them; names are looked up as written.
std::vector<PeerAddress> peers_from_tf_config(const TfConfig& config) {
  std::vector<PeerAddress> peers;
  for (TaskType type : all_task_types) {
    const auto& job = config.job(type);
    for (std::size_t i = 0; i < job.size(); ++i) {
      auto [host, port] = split_address(job[i]);
      peers.push_back(PeerAddress{type, static_cast<int>(i), host, port, false});
    }
  }
  return peers;
}

// Peer names follow the own name: the hostname, or for compose replicas the PTR name.
Result<PeerTemplate> choose_peer_template(const Options& options, const Hostname& hostname,
                                          const std::optional<Setting>& ptr_name) {
  std::string own_name = ptr_name ? ptr_name->value.substr(0, ptr_name->value.find('.')) : hostname.name;
  auto parts = split_hostname(own_name);
  if (options.peer_template) {
    auto made = make_peer_template(*options.peer_template, parts);
    if (made && ptr_name) made->ordinal_base = 1;
    return made;
  }
  if (!parts) {
    return usage_error("cannot derive peer names from hostname '" + hostname.name + "' (from " + hostname.source +
                       "); set --peer-template");
  }
  return derive_peer_template(*parts, ptr_name ? ptr_name->value : hostname.name, ptr_name ? 1 : 0);
}

// Only TensorFlow's command gets TF_CONFIG in its environment (PyTorch and JAX get a handful of
// short variables): only its size can hit Linux's limit.
bool tf_config_in_environment(const Options& options, const Plan& plan) {
  return !options.print && plan.framework == Framework::tensorflow;
}

// Checked before the DNS wait so that a too-large job fails now, not with "Argument list too
// long" after a long wait; make_tf_config_text checks the exact size.
Result<void> check_environment_estimate(const Options& options, const Plan& plan) {
  if (!tf_config_in_environment(options, plan) || options.address == AddressMode::ip) return {};
  const std::vector<PeerAddress>& peers = plan.peers;
  std::size_t estimate = std::string_view("TF_CONFIG=").size() + 64;
  for (const auto& peer : peers) estimate += peer.name.size() + 10;
  if (estimate <= max_environment_string) return {};
  return usage_error("TF_CONFIG for " + std::to_string(peers.size()) + " tasks would be about " + std::to_string(estimate) +
                     " bytes, over Linux's limit of " + std::to_string(max_environment_string) +
                     " for one environment variable; use --address ip or shorter names");
}

Result<Plan> plan_from_operator_config(Plan plan, TfConfig config) {
  config.task_type = plan.identity.type;
  config.task_index = plan.identity.index;
  if (auto valid = validate_tf_config(config, "TF_CONFIG with task " + plan.identity.task() + " from " + plan.identity.source);
      !valid) {
    return std::unexpected(valid.error());
  }
  plan.peers = peers_from_tf_config(config);
  plan.operator_config = std::move(config);
  return plan;
}

// Neither --cluster nor TF_CONFIG: a platform that describes the job gives identity and peers.
Result<Plan> plan_from_platform(const Options& options, const PlanInputs& parsed, const Environment& env, const HostFacts& facts,
                                Plan plan) {
  auto job = describe_job_by_platform({parsed, env, facts, plan.hostname});
  if (!job) return std::unexpected(job.error());
  if (!*job) {
    return usage_error("--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set and no platform describes the job "
                       "(Slurm, SageMaker, Volcano, JobSet)");
  }
  auto identity = identity_with_platform(parsed, (*job)->identity);
  if (!identity) return std::unexpected(identity.error());
  plan.identity = *identity;
  plan.peers = std::move((*job)->peers);
  plan.suffix = (*job)->suffix;
  plan.warnings.insert(plan.warnings.end(), (*job)->warnings.begin(), (*job)->warnings.end());
  if ((*job)->framework && !options.framework_given) plan.framework = *(*job)->framework;
  if ((*job)->nproc_per_node && !options.nproc_per_node_given) plan.nproc_per_node = *(*job)->nproc_per_node;
  bool listed = std::ranges::any_of(plan.peers, [&](const PeerAddress& peer) {
    return peer.type == plan.identity.type && peer.index == plan.identity.index;
  });
  if (!listed) {
    return usage_error("task " + plan.identity.task() + " from " + plan.identity.source + " is outside the cluster " +
                       (*job)->platform + " describes (" + cluster_counts_text(plan.peers) + ")");
  }
  if (auto fits = check_environment_estimate(options, plan); !fits) return std::unexpected(fits.error());
  return plan;
}

}  // namespace

Result<PlanInputs> check_options(const Options& options, const Environment& env) {
  if (options.address == AddressMode::ip && options.wait.count() == 0) {
    return usage_error("--address ip needs the DNS wait; it cannot be combined with --wait 0");
  }
  if (options.control_port != 0 && options.start_timeout.count() <= 0) {
    return usage_error("--start-timeout must be positive (the deadline for every task of the job to be present)");
  }
  if (!operator_tf_config_text(options, env) && !options.cluster && options.identity_from != IdentityFrom::automatic) {
    // Platforms are asked only for the automatic identity; whether one describes the job is
    // known once the host's files are read (make_plan).
    return usage_error("--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set");
  }
  auto parsed = parse_plan_inputs(options, env);
  if (!parsed) return parsed;
  if (options.dns_server) {
    auto servers = parse_dns_servers(options.dns_server->value, options.dns_server->source);
    if (!servers) return std::unexpected(servers.error());
    parsed->dns_servers = std::move(*servers);
  }
  if (auto identity_flags = parse_identity_flags(options, *parsed); !identity_flags) return std::unexpected(identity_flags.error());
  return parsed;
}

bool needs_own_ptr_name(const Options& options) { return options.identity_from == IdentityFrom::ptr && !options.task_index; }

Result<Plan> make_plan(const Options& options, const PlanInputs& parsed, const Environment& env, const HostFacts& facts,
                       const std::optional<Setting>& ptr_name) {
  Plan plan;
  plan.hostname = choose_hostname(options.hostname, env, facts.system_hostname);
  plan.framework = options.framework;
  plan.nproc_per_node = options.nproc_per_node;
  plan.dns_servers = parsed.dns_servers;
  if (options.cluster && env.contains("TF_CONFIG") && !env.find("TF_CONFIG")->second.empty()) {
    plan.warnings.push_back("TF_CONFIG from the environment is replaced, since " + options.cluster->source + " is given");
  }
  if (!parsed.operator_config && !parsed.cluster) return plan_from_platform(options, parsed, env, facts, std::move(plan));
  auto identity = resolve_identity({env, plan.hostname, parsed, ptr_name});
  if (!identity) return std::unexpected(identity.error());
  plan.identity = *identity;
  if (parsed.operator_config) return plan_from_operator_config(std::move(plan), *parsed.operator_config);

  if (auto inside = check_identity_in_cluster(plan.identity, *parsed.cluster, *options.cluster); !inside) {
    return std::unexpected(inside.error());
  }
  auto peer_template = choose_peer_template(options, plan.hostname, ptr_name);
  if (!peer_template) return std::unexpected(peer_template.error());
  auto suffix = choose_dns_suffix(parsed.service, env, facts.hosts_file, parse_resolv_conf(facts.resolv_conf),
                                  {plan.hostname.name, facts.system_hostname});
  if (!suffix) return std::unexpected(suffix.error());
  plan.suffix = *suffix;
  auto peers = plan_peers(*parsed.cluster, parsed.ports, *peer_template, *suffix, options.chief_at_ordinal_0);
  if (!peers) return std::unexpected(peers.error());
  plan.peers = std::move(*peers);
  if (auto fits = check_environment_estimate(options, plan); !fits) return std::unexpected(fits.error());
  return plan;
}

Result<std::string> make_tf_config_text(const Options& options, const Plan& plan, const std::vector<NameStatus>& resolved) {
  TfConfig config;
  if (plan.operator_config && options.address == AddressMode::name) {
    config = *plan.operator_config;
  } else {
    std::vector<std::string> addresses;
    for (std::size_t i = 0; i < plan.peers.size(); ++i) {
      bool by_ip = options.address == AddressMode::ip && i < resolved.size() && !resolved[i].addresses.empty();
      addresses.push_back(join_host_port(by_ip ? resolved[i].addresses.front() : plan.peers[i].name, plan.peers[i].port));
    }
    bool evaluator_listed = options.evaluator_in_cluster ||
                            (plan.operator_config && !plan.operator_config->job(TaskType::evaluator).empty());
    config = build_tf_config(plan.peers, addresses, plan.identity.type, plan.identity.index, evaluator_listed);
    if (plan.operator_config) {
      config.environment = plan.operator_config->environment;
      config.rpc_layer = plan.operator_config->rpc_layer;
    }
  }
  if (auto valid = validate_tf_config(config, "generated TF_CONFIG"); !valid) return std::unexpected(valid.error());
  std::string text = to_json(config);
  if (tf_config_in_environment(options, plan) && text.size() + 10 > max_environment_string) {
    return usage_error("TF_CONFIG is " + std::to_string(text.size()) + " bytes, over Linux's limit of " +
                       std::to_string(max_environment_string) + " for one environment variable; use --address ip or shorter names");
  }
  return text;
}

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
