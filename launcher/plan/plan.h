// What this task will do, decided from options, environment and the host's facts before any
// lookup: identity, peers, and later the TF_CONFIG text from the DNS wait's answers. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/options.h"
#include "dns/wait.h"
#include "plan/cluster.h"
#include "plan/host_facts.h"
#include "plan/identity.h"
#include "plan/inputs.h"
#include "plan/tf_config.h"

namespace tfboot {

// Linux refuses an environment string over 32 pages (MAX_ARG_STRLEN).
inline constexpr std::size_t max_environment_string = 32 * 4096;

struct Plan {
  Hostname hostname;
  Identity identity;
  std::vector<PeerAddress> peers;  // every task, in TF_CONFIG order
  std::optional<TfConfig> operator_config;  // adopted as it is
  std::optional<DnsSuffix> suffix;          // the peers' Service, when known
  Framework framework = Framework::tensorflow;  // --framework, else what a platform's runtime says
  Setting nproc_per_node;                       // --nproc-per-node, else the platform's, else 1
  std::vector<DnsServer> dns_servers;           // --dns-server as check_options parsed it; empty: resolv.conf's
  std::vector<std::string> warnings;        // for the log
};

// Every check that needs only the options and the environment: flag combinations, the cluster
// and port specs, an operator's TF_CONFIG. Runs before anything touches the network, so a usage
// error never waits on it. Returns the values parsed, which the later steps take as they are.
Result<PlanInputs> check_options(const Options& options, const Environment& env);

// Whether the own PTR name is needed (--identity-from ptr without --task-index).
bool needs_own_ptr_name(const Options& options);

// `ptr_name`: the own PTR name when needs_own_ptr_name.
// `parsed`: what check_options returned for the same options and environment.
Result<Plan> make_plan(const Options& options, const PlanInputs& parsed, const Environment& env, const HostFacts& facts,
                       const std::optional<Setting>& ptr_name);

// The task's TF_CONFIG, one line. `resolved` holds the DNS wait's answer per peer (needed for
// --address ip), or is empty. Exit 2 when it fails TensorFlow's checks or, when it goes into a
// TensorFlow command's environment (not only printed; PyTorch and JAX get none), exceeds what
// Linux allows in one environment string.
Result<std::string> make_tf_config_text(const Options& options, const Plan& plan, const std::vector<NameStatus>& resolved);

// The plan's inputs (plan/inputs.h) from the options, each value parsed once; a bad one is a usage error naming its flag, twin or variable. The checks
// across values (which are required together) are check_options' (above).
Result<PlanInputs> parse_plan_inputs(const Options& options, const Environment& env);
// --task-type and --task-index into `inputs`; check_options parses them last, after the checks
// a bad identity flag should not hide.
Result<void> parse_identity_flags(const Options& options, PlanInputs& inputs);

// The TF_CONFIG text an operator set, when tfboot adopts it: present, non-empty, and no
// --cluster given (which replaces it).
std::optional<std::string> operator_tf_config_text(const Options& options, const Environment& env);

}  // namespace tfboot
