// The flow of SPEC §1, top to bottom: options, identity, peers, DNS wait, TF_CONFIG, files, command.
#include "run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "cluster.h"
#include "dns_wait.h"
#include "files.h"
#include "identity.h"
#include "kubernetes.h"
#include "local.h"
#include "log.h"
#include "options.h"
#include "peer_dns.h"
#include "process.h"
#include "startup.h"
#include "tf_config.h"
#include "version.h"

namespace tfboot {
namespace {

constexpr std::size_t max_environment_string = 32 * 4096;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string system_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

// Before the files are written nothing has been written or started, so a stop request can end
// us at once. As PID 1 the kernel ignores signals without a handler, hence the explicit handler.
void exit_on_stop_signal(int signal_number) {
  static const char message[] = "tfboot: stopped by a signal before the command started; nothing was run\n";
  [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
  ::_exit(exit_code::signal_base + signal_number);
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = exit_on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

std::string address_for_tf_config(const std::string& ip, int port) {
  return ip.find(':') != std::string::npos ? "[" + ip + "]:" + std::to_string(port) : ip + ":" + std::to_string(port);
}

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

struct Plan {
  Identity identity;
  std::vector<PeerAddress> peers;
  std::optional<TfConfig> operator_config;  // adopted as it is
};

Result<Plan> make_plan(const Options& options, const Environment& env, const Hostname& hostname) {
  Plan plan;
  if (auto it = env.find("TF_CONFIG"); it != env.end() && !it->second.empty()) {
    if (options.cluster) {
      log::warn("TF_CONFIG from the environment is replaced, since {} is given", options.cluster->source);
    } else {
      auto config = parse_tf_config(it->second, "TF_CONFIG from the environment");
      if (!config) return std::unexpected(config.error());
      plan.operator_config = *config;
    }
  }
  std::optional<Setting> ptr_name;
  if (options.identity_from == IdentityFrom::ptr && !options.task_index) {
    auto found = find_own_ptr_name(options);
    if (!found) return std::unexpected(found.error());
    ptr_name = *found;
  }
  auto identity = resolve_identity({options, env, hostname, plan.operator_config, ptr_name});
  if (!identity) return std::unexpected(identity.error());
  plan.identity = *identity;

  if (plan.operator_config) {
    plan.operator_config->task_type = plan.identity.type;
    plan.operator_config->task_index = plan.identity.index;
    if (auto valid = validate_tf_config(*plan.operator_config, "TF_CONFIG with task " + plan.identity.task() + " from " +
                                                                    plan.identity.source);
        !valid) {
      return std::unexpected(valid.error());
    }
    plan.peers = peers_from_tf_config(*plan.operator_config);
    return plan;
  }

  if (!options.cluster) return usage_error("--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set");
  auto spec = parse_cluster_spec(*options.cluster);
  if (!spec) return std::unexpected(spec.error());
  if (auto inside = check_identity_in_cluster(plan.identity, *spec, *options.cluster); !inside) {
    return std::unexpected(inside.error());
  }
  auto ports = parse_port_spec(options.port);
  if (!ports) return std::unexpected(ports.error());

  // Peer names follow the own name: the hostname, or for compose replicas the PTR name.
  std::string own_name = ptr_name ? ptr_name->value.substr(0, ptr_name->value.find('.')) : hostname.name;
  auto parts = split_hostname(own_name);
  PeerTemplate peer_template;
  if (options.peer_template) {
    auto made = make_peer_template(*options.peer_template, parts);
    if (!made) return std::unexpected(made.error());
    peer_template = *made;
    if (ptr_name) peer_template.ordinal_base = 1;
  } else if (parts) {
    peer_template = derive_peer_template(*parts, ptr_name ? ptr_name->value : hostname.name, ptr_name ? 1 : 0);
  } else {
    return usage_error("cannot derive peer names from hostname '" + hostname.name + "' (from " + hostname.source +
                       "); set --peer-template");
  }

  auto resolv = parse_resolv_conf(read_text_file("/etc/resolv.conf").value_or(""));
  auto suffix = choose_dns_suffix(options, env, read_text_file("/etc/hosts").value_or(""), resolv,
                                  {hostname.name, system_hostname()});
  if (!suffix) return std::unexpected(suffix.error());
  auto peers = plan_peers(*spec, *ports, peer_template, *suffix, options.chief_at_ordinal_0);
  if (!peers) return std::unexpected(peers.error());
  plan.peers = std::move(*peers);
  if (*suffix) log::info("peers are in Service {}", (*suffix)->text());
  return plan;
}

std::string tf_config_address(const PeerAddress& peer, const NameStatus* status) {
  if (!status) return peer.name.find(':') != std::string::npos ? "[" + peer.name + "]:" + std::to_string(peer.port)
                                                               : peer.name + ":" + std::to_string(peer.port);
  return address_for_tf_config(status->addresses.front(), peer.port);
}

std::string json_list(const std::vector<std::string>& items) { return nlohmann::json(items).dump(); }

Result<int> run_entrypoint(const Options& options, const Environment& env) {
  const double started_at = unix_seconds();
  Hostname hostname = choose_hostname(options, env, system_hostname());
  auto plan = make_plan(options, env, hostname);
  if (!plan) return std::unexpected(plan.error());
  log::set_task(plan->identity.task());
  log::info("identity {} from {}", plan->identity.task(), plan->identity.source);

  install_stop_handlers();
  if (options.address == AddressMode::ip && options.wait.count() == 0) {
    return usage_error("--address ip needs the DNS wait; it cannot be combined with --wait 0");
  }
  // Linux refuses an environment string over 32 pages (MAX_ARG_STRLEN); better to say so now
  // than after a long DNS wait, when exec would fail with "Argument list too long".
  if (!options.print && options.address == AddressMode::name) {
    std::size_t estimate = std::string_view("TF_CONFIG=").size() + 64;
    for (const auto& peer : plan->peers) estimate += peer.name.size() + 10;
    if (estimate > max_environment_string) {
      return usage_error("TF_CONFIG for " + std::to_string(plan->peers.size()) + " tasks would be about " +
                         std::to_string(estimate) + " bytes, over Linux's limit of " + std::to_string(max_environment_string) +
                         " for one environment variable; use --address ip or shorter names");
    }
  }
  DnsResult dns;
  if (options.wait.count() > 0) {
    auto waited = wait_for_peers(options, plan->peers, plan->identity);
    if (!waited) return std::unexpected(waited.error());
    dns = std::move(*waited);
  } else {
    log::info("DNS wait is off (--wait 0)");
  }

  TfConfig config;
  if (plan->operator_config && options.address == AddressMode::name) {
    config = *plan->operator_config;
  } else {
    std::vector<std::string> addresses;
    for (std::size_t i = 0; i < plan->peers.size(); ++i) {
      const NameStatus* status = options.address == AddressMode::ip ? &dns.names[i] : nullptr;
      addresses.push_back(tf_config_address(plan->peers[i], status));
    }
    bool evaluator_listed = options.evaluator_in_cluster ||
                            (plan->operator_config && !plan->operator_config->job(TaskType::evaluator).empty());
    config = build_tf_config(plan->peers, addresses, plan->identity.type, plan->identity.index, evaluator_listed);
    if (plan->operator_config) {
      config.environment = plan->operator_config->environment;
      config.rpc_layer = plan->operator_config->rpc_layer;
    }
  }
  if (auto valid = validate_tf_config(config, "generated TF_CONFIG"); !valid) return std::unexpected(valid.error());
  const std::string tf_config = to_json(config);
  if (!options.print && tf_config.size() + 10 > max_environment_string) {
    return usage_error("TF_CONFIG is " + std::to_string(tf_config.size()) + " bytes, over Linux's limit of " +
                       std::to_string(max_environment_string) + " for one environment variable; use --address ip or shorter names");
  }

  if (options.print) {
    std::printf("%s\n", tf_config.c_str());
    std::fflush(stdout);
    return exit_code::ok;
  }

  const std::vector<std::string>& command = options.command.empty() ? default_command : options.command;
  // From here a stop signal waits until the files are whole: the supervisor passes it on to
  // the command, or, for exec, the handler ends us just before the command would start.
  block_forwarded_signals();
  std::string log_root = options.log_root ? options.log_root->value : "/logs";
  std::string log_dir = log_root + "/" + std::string(to_string(plan->identity.type)) + "_" + std::to_string(plan->identity.index);
  if (auto made = make_directories(log_dir); !made) return std::unexpected(made.error());

  StartupReport report{TFBOOT_VERSION_STRING, plan->identity, hostname.name, plan->peers, dns.names, dns.servers,
                       dns.warnings, tf_config, json_list(command), started_at, dns.seconds, unix_seconds()};
  std::string startup_path = log_dir + "/startup.json";
  std::string startup = build_startup_json(report, read_text_file(startup_path).value_or(""));
  if (auto written = write_file_atomically(log_dir + "/tf_config.json", tf_config + "\n"); !written) {
    return std::unexpected(written.error());
  }
  if (auto written = write_file_atomically(startup_path, startup); !written) return std::unexpected(written.error());
  log::info("log dir {}", log_dir);

  ::setenv("TF_CONFIG", tf_config.c_str(), 1);
  ::setenv("TFBOOT_LOG_DIR", log_dir.c_str(), 1);
  ::setenv("TFBOOT_TASK_TYPE", std::string(to_string(plan->identity.type)).c_str(), 1);
  ::setenv("TFBOOT_TASK_INDEX", std::to_string(plan->identity.index).c_str(), 1);

  bool as_init = options.init.value_or(::getpid() == 1);
  log::info("running {} ({})", json_list(command), as_init ? "supervised as init" : "exec");
  if (as_init) return supervise_command(command);
  unblock_forwarded_signals();
  return std::unexpected(exec_command(command));
}

Environment environment_from(char** envp) {
  Environment env;
  for (char** entry = envp; entry && *entry; ++entry) {
    std::string_view text(*entry);
    auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

}  // namespace

int run(int argc, char** argv, char** envp) {
  log::start();
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  const Environment env = environment_from(envp);
  auto options = parse_options(args, env);
  if (!options) {
    log::error("{}", options.error().message);
    return options.error().code;
  }
  log::configure(options->log_level, options->log_format);
  Result<int> outcome;
  try {
    switch (options->mode) {
      case Mode::help:
        std::fputs(help_text().c_str(), stdout);
        return exit_code::ok;
      case Mode::version:
        std::printf("tfboot %s\n", TFBOOT_VERSION_STRING);
        return exit_code::ok;
      case Mode::local:
        outcome = run_local(*options, env);
        break;
      case Mode::entrypoint:
        outcome = run_entrypoint(*options, env);
        break;
    }
  } catch (const std::exception& error) {
    log::error("internal error: {}", error.what());
    return 1;
  }
  if (!outcome) {
    log::error("{}", outcome.error().message);
    return outcome.error().code;
  }
  return *outcome;
}

}  // namespace tfboot
