// The plan: options + environment + host facts -> identity, peers and TF_CONFIG, before any lookup.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan/plan.h"
#include "test_support.h"

namespace tfboot {
namespace {

// As run() does: check_options, then make_plan with the values it parsed.
Result<Plan> checked_plan(const Options& options, const Environment& env, const HostFacts& facts,
                          const std::optional<Setting>& ptr_name) {
  auto parsed = check_options(options, env);
  if (!parsed) return std::unexpected(parsed.error());
  return make_plan(options, *parsed, env, facts, ptr_name);
}

using namespace std::chrono_literals;

Options options_from(const std::vector<std::string>& args, const Environment& env = {}) {
  auto options = parse_options(args, env);
  REQUIRE_MESSAGE(options, error_of(options));
  return *options;
}

// A StatefulSet pod "mnist-worker-1" behind the headless Service "mnist" in namespace "ml".
HostFacts statefulset_pod() {
  return HostFacts{"mnist-worker-1",
                   "127.0.0.1 localhost\n10.1.0.7 mnist-worker-1.mnist.ml.svc.cluster.local mnist-worker-1\n",
                   "nameserver 10.96.0.10\nsearch ml.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
                   {"10.1.0.7", "127.0.0.1"}};
}

std::string names_of(const Plan& plan) {
  std::string names;
  for (const auto& peer : plan.peers) names += (names.empty() ? "" : " ") + peer.lookup_name() + ":" + std::to_string(peer.port);
  return names;
}

}  // namespace

TEST_CASE("plan::check_options runs every check that needs no network") {
  struct Row {
    const char* behaviour;
    std::vector<std::string> args;
    Environment env;
    std::string error;
  };
  const Row rows[] = {
      {"a bad cluster spec with PTR identity is named, not blamed on the PTR lookup",
       {"--identity-from", "ptr", "--cluster", "worker=two"}, {}, "--cluster 'worker=two': count 'two' is not a number from 0 to 100000"},
      {"--address ip with --wait 0", {"--address", "ip", "--wait", "0", "--cluster", "worker=2"}, {},
       "--address ip needs the DNS wait; it cannot be combined with --wait 0"},
      {"no cluster and no TF_CONFIG, with an identity source that asks no platform", {"--identity-from", "hostname"}, {},
       "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set"},
      {"no cluster with PTR identity fails before the PTR lookup", {"--identity-from", "ptr"}, {},
       "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set"},
      {"a bad port spec", {"--cluster", "worker=2", "--port", "22x"}, {}, "--port '22x': '22x' is not a port in 1..65535"},
      {"a DNS server with a port out of range, even with --wait 0", {"--cluster", "worker=2", "--wait", "0", "--dns-server", "127.0.0.1:65589"},
       {}, "--dns-server '127.0.0.1:65589': port '65589' is not a number in 1..65535"},
      {"an operator TF_CONFIG that TensorFlow would refuse", {}, {{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{}})"}},
       "TF_CONFIG from the environment: task.type is missing or not a string"},
      {"a zero --start-timeout, before any lookup", {"--cluster", "worker=2", "--start-timeout", "0"}, {},
       "--start-timeout must be positive (the deadline for every task of the job to be present)"},
      {"a missing --cluster is said before a bad port", {"--identity-from", "hostname", "--port", "99999"}, {},
       "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set"},
      {"a bad --task-type after a bad DNS server", {"--cluster", "worker=2", "--task-type", "boss", "--dns-server", "a b"}, {},
       "--dns-server 'a b': 'a b' is not an IPv4 address (expected ip[:port], IPv6 as [ip]:port)"},
      {"a bad --task-type before any lookup", {"--cluster", "worker=2", "--identity-from", "ptr", "--task-type", "boss"}, {},
       "--task-type 'boss' is not a task type (use chief, worker, ps or evaluator)"},
      {"a bad --task-index before any lookup", {"--cluster", "worker=2", "--task-index", "x"}, {},
       "--task-index 'x' is not a non-negative integer"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    auto checked = check_options(options_from(row.args, row.env), row.env);
    CHECK(code_of(checked) == 2);
    CHECK(error_of(checked) == row.error);
  }
  CHECK(check_options(options_from({"--cluster", "worker=2"}), {}));
  // Whether a platform describes the job is known once the host's files are read: make_plan says.
  CHECK(check_options(options_from({}), {}));
  CHECK_FALSE(needs_own_ptr_name(options_from({"--identity-from", "ptr", "--task-index", "1", "--cluster", "worker=2"})));
  CHECK(needs_own_ptr_name(options_from({"--identity-from", "ptr", "--cluster", "worker=2"})));
}

TEST_CASE("plan::make_plan from host facts alone") {
  SUBCASE("zero configuration in a StatefulSet pod: identity and Service from the facts") {
    auto plan = checked_plan(options_from({"--cluster", "worker=2"}), {}, statefulset_pod(), std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    CHECK(plan->hostname.name == "mnist-worker-1");
    REQUIRE(plan->suffix);
    CHECK(plan->suffix->text() == "mnist.ml.svc.cluster.local");
    CHECK(names_of(*plan) ==
          "mnist-worker-0.mnist.ml.svc.cluster.local.:2222 mnist-worker-1.mnist.ml.svc.cluster.local.:2222");
  }
  SUBCASE("no /etc files: bare names") {
    HostFacts bare{"trainer-2", "", "", {}};
    auto plan = checked_plan(options_from({"--cluster", "worker=3"}), {}, bare, std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:2");
    CHECK_FALSE(plan->suffix);
    CHECK(names_of(*plan) == "trainer-0:2222 trainer-1:2222 trainer-2:2222");
  }
  SUBCASE("the PTR name gives identity and peers for compose replicas") {
    HostFacts container{"3f2a9c0d1e4b", "", "", {"172.18.0.4"}};
    auto plan = checked_plan(options_from({"--identity-from", "ptr", "--cluster", "worker=2"}), {}, container,
                          Setting{"proj-worker-2.proj_default", "PTR of 172.18.0.4"});
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    CHECK(names_of(*plan) == "proj-worker-1:2222 proj-worker-2:2222");
  }
  SUBCASE("an index outside the cluster is a usage error naming its source") {
    auto plan = checked_plan(options_from({"--cluster", "worker=1"}), {}, statefulset_pod(), std::nullopt);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan).find("worker:1") != std::string::npos);
  }
  SUBCASE("--cluster replaces an operator's TF_CONFIG, with a warning") {
    Environment env{{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}})"}};
    auto plan = checked_plan(options_from({"--cluster", "worker=2"}, env), env, statefulset_pod(), std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK_FALSE(plan->operator_config);
    CHECK(plan->warnings == std::vector<std::string>{"TF_CONFIG from the environment is replaced, since --cluster is given"});
  }
  SUBCASE("an operator's TF_CONFIG is adopted and its names are used as written") {
    Environment env{{"TF_CONFIG", R"({"cluster":{"worker":["w0.x:2000","w1.x:2001"]},"task":{"type":"worker","index":1}})"}};
    auto plan = checked_plan(options_from({}, env), env, HostFacts{"pod-abc", "", "", {}}, std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    CHECK(names_of(*plan) == "w0.x:2000 w1.x:2001");
  }
  SUBCASE("a job too large for one environment string fails before the DNS wait") {
    auto plan = checked_plan(options_from({"--cluster", "worker=4000"}), {}, statefulset_pod(), std::nullopt);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan).starts_with("TF_CONFIG for 4000 tasks would be about "));
  }
  SUBCASE("PyTorch and JAX get no TF_CONFIG: a job of 2,500 nodes with Kubernetes names is no environment problem") {
    for (const char* framework : {"pytorch", "jax"}) {
      CAPTURE(framework);
      auto options = options_from({"--cluster", "worker=2500", "--framework", framework});
      auto plan = checked_plan(options, {}, statefulset_pod(), std::nullopt);
      REQUIRE_MESSAGE(plan, error_of(plan));
      auto text = make_tf_config_text(options, *plan, {});
      REQUIRE_MESSAGE(text, error_of(text));
      CHECK(text->size() > max_environment_string);  // tf_config.json and the job id still have it whole
    }
    auto tensorflow = options_from({"--cluster", "worker=2500"});
    CHECK(error_of(checked_plan(tensorflow, {}, statefulset_pod(), std::nullopt)).starts_with("TF_CONFIG for 2500 tasks would be about "));
  }
}

TEST_CASE("plan::make_plan from a platform that describes the job") {
  const Environment srun{{"SLURM_PROCID", "2"},
                         {"SLURM_STEP_NUM_TASKS", "4"},
                         {"SLURM_STEP_NODELIST", "gpu[07-08],cpu1"},
                         {"SLURM_STEP_TASKS_PER_NODE", "2,1(x2)"}};
  const HostFacts node{"gpu08", "127.0.0.1 localhost\n", "nameserver 10.0.0.1\n", {"10.0.0.8"}};
  auto plan_for = [&](const std::vector<std::string>& args, const Environment& env, const HostFacts& facts) {
    return checked_plan(options_from(args, env), env, facts, std::nullopt);
  };
  SUBCASE("Slurm gives identity and peers; names are bare") {
    auto plan = plan_for({}, srun, node);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:2");
    CHECK(plan->identity.source == "Slurm (SLURM_PROCID)");
    CHECK_FALSE(plan->suffix);
    CHECK(names_of(*plan) == "gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222");
    auto text = make_tf_config_text(options_from({}, srun), *plan, {});
    CHECK(text.value_or("") ==
          R"({"cluster":{"worker":["gpu07:2222","gpu07:2223","gpu08:2222","cpu1:2222"]},"task":{"type":"worker","index":2}})");
  }
  SUBCASE("--cluster wins: the platform is not asked") {
    auto plan = plan_for({"--cluster", "worker=2", "--hostname", "trainer-1"}, srun, node);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.source == "hostname 'trainer-1' (from --hostname)");
    CHECK(names_of(*plan) == "trainer-0:2222 trainer-1:2222");
  }
  SUBCASE("an operator's TF_CONFIG wins: the platform is not asked") {
    Environment env = srun;
    env["TF_CONFIG"] = R"({"cluster":{"worker":["w0:2000","w1:2000"]},"task":{"type":"worker","index":0}})";
    auto plan = plan_for({}, env, node);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.source == "TF_CONFIG");
    CHECK(names_of(*plan) == "w0:2000 w1:2000");
  }
  SUBCASE("bad platform data is a usage error before any lookup") {
    Environment env = srun;
    env["SLURM_STEP_NODELIST"] = "gpu[07-08";
    auto plan = plan_for({}, env, node);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan) == "SLURM_STEP_NODELIST 'gpu[07-08': '[' without ']'");
  }
  SUBCASE("--task-index still comes first, inside the platform's cluster") {
    auto plan = plan_for({"--task-index", "3"}, srun, node);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:3");
    CHECK(plan->identity.source == "--task-index");
    auto outside = plan_for({"--task-index", "4"}, srun, node);
    CHECK(code_of(outside) == 2);
    CHECK(error_of(outside) == "task worker:4 from --task-index is outside the cluster Slurm describes (worker=4)");
  }
  SUBCASE("a --task-type that contradicts the platform") {
    auto plan = plan_for({"--task-type", "ps"}, srun, node);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan) == "--task-type 'ps' contradicts worker:2 from Slurm (SLURM_PROCID)");
  }
  SUBCASE("a JobSet pod: the Service from the kubelet's /etc/hosts line") {
    HostFacts pod{"bert-worker-1-0", "10.1.0.7 bert-worker-1-0.bert.ml.svc.cluster.local bert-worker-1-0\n",
                  "search ml.svc.cluster.local svc.cluster.local cluster.local\n", {"10.1.0.7"}};
    pod.platform_files.pod_info_dir = "/etc/podinfo";
    pod.platform_files.pod_labels =
        "batch.kubernetes.io/job-completion-index=\"0\"\njobset.sigs.k8s.io/global-replicas=\"2\"\n"
        "jobset.sigs.k8s.io/job-index=\"1\"\njobset.sigs.k8s.io/jobset-name=\"bert\"\n"
        "jobset.sigs.k8s.io/replicatedjob-name=\"worker\"\njobset.sigs.k8s.io/replicatedjob-replicas=\"2\"";
    auto plan = plan_for({}, {}, pod);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    REQUIRE(plan->suffix);
    CHECK(plan->suffix->text() == "bert.ml.svc.cluster.local");
    CHECK(names_of(*plan) == "bert-worker-0-0.bert.ml.svc.cluster.local.:2222 bert-worker-1-0.bert.ml.svc.cluster.local.:2222");
  }
  SUBCASE("no --cluster, no TF_CONFIG and no platform") {
    auto plan = plan_for({}, {}, statefulset_pod());
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan) ==
          "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set and no platform describes the job (Slurm, "
          "SageMaker, Volcano, JobSet)");
  }
}

TEST_CASE("plan::make_tf_config_text") {
  auto options = options_from({"--cluster", "worker=2"});
  auto plan = checked_plan(options, {}, statefulset_pod(), std::nullopt);
  REQUIRE(plan);
  SUBCASE("names, one line, keys in TensorFlow's order") {
    auto text = make_tf_config_text(options, *plan, {});
    CHECK(text.value_or("") ==
          R"({"cluster":{"worker":["mnist-worker-0.mnist.ml.svc.cluster.local:2222","mnist-worker-1.mnist.ml.svc.cluster.local:2222"]},)"
          R"("task":{"type":"worker","index":1}})");
  }
  SUBCASE("--address ip: the resolved addresses, IPv6 in brackets") {
    auto ip_options = options_from({"--cluster", "worker=2", "--address", "ip"});
    std::vector<NameStatus> resolved(2);
    resolved[0].addresses = {"10.1.0.6"};
    resolved[1].addresses = {"fd00::7"};
    auto text = make_tf_config_text(ip_options, *plan, resolved);
    CHECK(text.value_or("") == R"({"cluster":{"worker":["10.1.0.6:2222","[fd00::7]:2222"]},"task":{"type":"worker","index":1}})");
  }
}

}  // namespace tfboot
