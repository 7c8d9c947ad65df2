// Who am I (docs/identity.md): hostnames and environments -> type, index and the source named in the log.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan/identity.h"
#include "plan/plan.h"
#include "test_support.h"

namespace tfboot {
namespace {

// What resolve_identity says, as one comparable line: "worker:3 from <source>" or "error 2: <message>".
std::string describe(const Result<Identity>& identity) {
  if (!identity) return "error " + std::to_string(identity.error().code) + ": " + identity.error().message;
  return identity->task() + " from " + identity->source;
}

struct Situation {
  std::vector<std::string> args;
  Environment env;
  std::string system_hostname;
  std::optional<TfConfig> operator_config;
  std::optional<Setting> ptr_name;
};

// The way run() does it: options from argv and env, the hostname chosen, then the identity.
std::string identity_in(const Situation& situation) {
  auto options = parse_options(situation.args, situation.env);
  if (!options) return "options error: " + options.error().message;
  Hostname hostname = choose_hostname(options->hostname, situation.env, situation.system_hostname);
  auto parsed = parse_plan_inputs(*options, situation.env);
  if (!parsed) return describe(std::unexpected(parsed.error()));
  if (auto flags = parse_identity_flags(*options, *parsed); !flags) return describe(std::unexpected(flags.error()));
  parsed->operator_config = situation.operator_config;
  return describe(resolve_identity({situation.env, hostname, *parsed, situation.ptr_name}));
}

TfConfig operator_config(TaskType type, int index) {
  TfConfig config;
  config.job(TaskType::chief) = {"mnist-chief-0.mnist:2222"};
  config.job(TaskType::worker) = {"mnist-worker-0.mnist:2222", "mnist-worker-1.mnist:2222"};
  config.job(TaskType::ps) = {"mnist-ps-0.mnist:2222", "mnist-ps-1.mnist:2222"};
  config.task_type = type;
  config.task_index = index;
  return config;
}

struct Row {
  std::string behaviour;
  Situation situation;
  std::string expected;
};

void check_rows(const std::vector<Row>& rows) {
  for (const auto& row : rows) {
    CAPTURE(row.behaviour);
    CHECK(identity_in(row.situation) == row.expected);
  }
}

}  // namespace

TEST_CASE("identity::choose_hostname") {
  auto hostname_for = [](std::vector<std::string> args, const Environment& env) {
    auto options = parse_options(args, env);
    REQUIRE(options);
    Hostname chosen = choose_hostname(options->hostname, env, "3a8f9c2d1e0b");
    return chosen.name + " from " + chosen.source;
  };
  SUBCASE("gethostname() when nothing else is given") { CHECK(hostname_for({}, {}) == "3a8f9c2d1e0b from gethostname()"); }
  SUBCASE("POD_NAME beats gethostname()") {
    CHECK(hostname_for({}, {{"POD_NAME", "mnist-worker-1"}}) == "mnist-worker-1 from POD_NAME");
  }
  SUBCASE("an empty POD_NAME is ignored") { CHECK(hostname_for({}, {{"POD_NAME", ""}}) == "3a8f9c2d1e0b from gethostname()"); }
  SUBCASE("TFBOOT_HOSTNAME beats POD_NAME") {
    CHECK(hostname_for({}, {{"POD_NAME", "a-1"}, {"TFBOOT_HOSTNAME", "b-2"}}) == "b-2 from TFBOOT_HOSTNAME");
  }
  SUBCASE("--hostname beats TFBOOT_HOSTNAME and POD_NAME") {
    CHECK(hostname_for({"--hostname", "c-3"}, {{"POD_NAME", "a-1"}, {"TFBOOT_HOSTNAME", "b-2"}}) == "c-3 from --hostname");
  }
}

TEST_CASE("identity::resolve_identity from the hostname") {
  SUBCASE("<prefix>-<type>-<ordinal> gives type and index") {
    check_rows({
        {"worker", {{}, {}, "mnist-worker-3"}, "worker:3 from hostname 'mnist-worker-3' (from gethostname())"},
        {"ps", {{}, {}, "mnist-ps-1"}, "ps:1 from hostname 'mnist-ps-1' (from gethostname())"},
        {"chief", {{}, {}, "mnist-chief-0"}, "chief:0 from hostname 'mnist-chief-0' (from gethostname())"},
        {"evaluator", {{}, {}, "mnist-evaluator-0"}, "evaluator:0 from hostname 'mnist-evaluator-0' (from gethostname())"},
        {"master is read as chief", {{}, {}, "job-master-0"}, "chief:0 from hostname 'job-master-0' (from gethostname())"},
        {"a prefix with dashes", {{}, {}, "my-big-job-ps-12"}, "ps:12 from hostname 'my-big-job-ps-12' (from gethostname())"},
        {"no prefix", {{}, {}, "worker-0"}, "worker:0 from hostname 'worker-0' (from gethostname())"},
        {"a fully qualified name: first label only",
         {{}, {}, "mnist-worker-3.mnist.default.svc.cluster.local"},
         "worker:3 from hostname 'mnist-worker-3.mnist.default.svc.cluster.local' (from gethostname())"},
        {"large ordinal", {{}, {}, "mnist-worker-999999"}, "worker:999999 from hostname 'mnist-worker-999999' (from gethostname())"},
        {"a matching --task-type is fine",
         {{"--task-type", "ps"}, {}, "mnist-ps-1"},
         "ps:1 from hostname 'mnist-ps-1' (from gethostname())"},
        {"--task-type master matches a chief hostname",
         {{"--task-type", "master"}, {}, "mnist-chief-0"},
         "chief:0 from hostname 'mnist-chief-0' (from gethostname())"},
    });
  }
  SUBCASE("<prefix>-<ordinal> takes the type from --task-type, default worker") {
    check_rows({
        {"default worker", {{}, {}, "trainer-2"}, "worker:2 from hostname 'trainer-2' (from gethostname())"},
        {"--task-type ps", {{"--task-type", "ps"}, {}, "trainer-2"}, "ps:2 from hostname 'trainer-2' (from gethostname())"},
        {"TFBOOT_TASK_TYPE evaluator",
         {{}, {{"TFBOOT_TASK_TYPE", "evaluator"}}, "trainer-0"},
         "evaluator:0 from hostname 'trainer-0' (from gethostname())"},
        {"a prefix with a non-type last word", {{}, {}, "my-job-trainer-4"}, "worker:4 from hostname 'my-job-trainer-4' (from gethostname())"},
    });
  }
  SUBCASE("--chief-at-ordinal-0: ordinal 0 is chief 0, ordinal k is worker k-1") {
    check_rows({
        {"ordinal 0", {{"--chief-at-ordinal-0"}, {}, "trainer-0"},
         "chief:0 from hostname 'trainer-0' (from gethostname()), chief at ordinal 0"},
        {"ordinal 3", {{"--chief-at-ordinal-0"}, {}, "trainer-3"},
         "worker:2 from hostname 'trainer-3' (from gethostname()), chief at ordinal 0"},
        {"ordinal 1", {{"--chief-at-ordinal-0"}, {{"POD_NAME", "trainer-1"}}, "x"},
         "worker:0 from hostname 'trainer-1' (from POD_NAME), chief at ordinal 0"},
        {"the twin", {{}, {{"TFBOOT_CHIEF_AT_ORDINAL_0", "1"}}, "trainer-0"},
         "chief:0 from hostname 'trainer-0' (from gethostname()), chief at ordinal 0"},
        {"the twin off", {{}, {{"TFBOOT_CHIEF_AT_ORDINAL_0", "0"}}, "trainer-0"},
         "worker:0 from hostname 'trainer-0' (from gethostname())"},
        {"ps are not shifted", {{"--chief-at-ordinal-0", "--task-type", "ps"}, {}, "trainer-0"},
         "ps:0 from hostname 'trainer-0' (from gethostname())"},
    });
  }
  SUBCASE("the hostname comes from --hostname, else POD_NAME, else gethostname()") {
    check_rows({
        {"POD_NAME beats gethostname()", {{}, {{"POD_NAME", "mnist-worker-1"}}, "mnist-worker-9"},
         "worker:1 from hostname 'mnist-worker-1' (from POD_NAME)"},
        {"--hostname beats POD_NAME", {{"--hostname", "mnist-ps-0"}, {{"POD_NAME", "mnist-worker-1"}}, "mnist-worker-9"},
         "ps:0 from hostname 'mnist-ps-0' (from --hostname)"},
        {"TFBOOT_HOSTNAME beats POD_NAME", {{}, {{"TFBOOT_HOSTNAME", "mnist-ps-1"}, {"POD_NAME", "mnist-worker-1"}}, "x"},
         "ps:1 from hostname 'mnist-ps-1' (from TFBOOT_HOSTNAME)"},
    });
  }
}

TEST_CASE("identity::resolve_identity from other sources") {
  SUBCASE("--task-type and --task-index, and their twins, come first") {
    check_rows({
        {"both flags beat the hostname", {{"--task-type", "chief", "--task-index", "0"}, {}, "mnist-worker-3"},
         "chief:0 from --task-index and --task-type"},
        {"both flags, unparseable hostname", {{"--task-type", "ps", "--task-index", "1"}, {}, "3a8f9c2d1e0b"},
         "ps:1 from --task-index and --task-type"},
        {"both twins", {{}, {{"TFBOOT_TASK_TYPE", "evaluator"}, {"TFBOOT_TASK_INDEX", "0"}}, "3a8f9c2d1e0b"},
         "evaluator:0 from TFBOOT_TASK_INDEX and TFBOOT_TASK_TYPE"},
        {"index alone: worker", {{"--task-index", "5"}, {}, "3a8f9c2d1e0b"}, "worker:5 from --task-index"},
        {"flags beat the environment index", {{"--task-index", "1"}, {{"JOB_COMPLETION_INDEX", "7"}}, "3a8f9c2d1e0b"},
         "worker:1 from --task-index"},
        {"flags beat TF_CONFIG", {{"--task-type", "ps", "--task-index", "0"}, {}, "3a8f9c2d1e0b", operator_config(TaskType::worker, 1)},
         "ps:0 from --task-index and --task-type"},
        {"flags beat the hostname's ordinal", {{"--task-index", "2"}, {}, "trainer-7"}, "worker:2 from --task-index"},
    });
  }
  SUBCASE("an operator's TF_CONFIG is adopted") {
    check_rows({
        {"TF_CONFIG", {{}, {}, "3a8f9c2d1e0b", operator_config(TaskType::ps, 1)}, "ps:1 from TF_CONFIG"},
        {"TF_CONFIG beats the environment index",
         {{}, {{"JOB_COMPLETION_INDEX", "0"}}, "mnist-worker-0", operator_config(TaskType::worker, 1)}, "worker:1 from TF_CONFIG"},
        {"TF_CONFIG beats the hostname", {{}, {}, "mnist-worker-0", operator_config(TaskType::chief, 0)}, "chief:0 from TF_CONFIG"},
        {"--identity-from hostname ignores TF_CONFIG",
         {{"--identity-from", "hostname"}, {}, "mnist-worker-0", operator_config(TaskType::chief, 0)},
         "worker:0 from hostname 'mnist-worker-0' (from gethostname())"},
    });
  }
  SUBCASE("an index from the environment") {
    check_rows({
        {"JOB_COMPLETION_INDEX", {{}, {{"JOB_COMPLETION_INDEX", "2"}}, "3a8f9c2d1e0b"}, "worker:2 from JOB_COMPLETION_INDEX"},
        {"TFBOOT_POD_INDEX with --task-type", {{"--task-type", "ps"}, {{"TFBOOT_POD_INDEX", "4"}}, "3a8f9c2d1e0b"},
         "ps:4 from TFBOOT_POD_INDEX"},
        {"JOB_COMPLETION_INDEX beats TFBOOT_POD_INDEX", {{}, {{"JOB_COMPLETION_INDEX", "1"}, {"TFBOOT_POD_INDEX", "6"}}, "x"},
         "worker:1 from JOB_COMPLETION_INDEX"},
        {"an empty JOB_COMPLETION_INDEX is skipped", {{}, {{"JOB_COMPLETION_INDEX", ""}, {"TFBOOT_POD_INDEX", "6"}}, "x"},
         "worker:6 from TFBOOT_POD_INDEX"},
        {"the environment index beats the hostname's ordinal; the type still comes from the hostname",
         {{}, {{"JOB_COMPLETION_INDEX", "3"}}, "mnist-ps-1"}, "ps:3 from JOB_COMPLETION_INDEX"},
        {"chief at ordinal 0, index 0", {{"--chief-at-ordinal-0"}, {{"TFBOOT_POD_INDEX", "0"}}, "x"},
         "chief:0 from TFBOOT_POD_INDEX, chief at ordinal 0"},
        {"chief at ordinal 0, index 3", {{"--chief-at-ordinal-0"}, {{"JOB_COMPLETION_INDEX", "3"}}, "x"},
         "worker:2 from JOB_COMPLETION_INDEX, chief at ordinal 0"},
        {"Indexed Job (examples/kubernetes/indexed-job.yaml)", {{}, {{"JOB_COMPLETION_INDEX", "1"}, {"TFBOOT_CLUSTER", "worker=3"}}, "resnet-1"},
         "worker:1 from JOB_COMPLETION_INDEX"},
        {"JobSet (examples/kubernetes/jobset.yaml): type from the twin, index from the Job",
         {{}, {{"JOB_COMPLETION_INDEX", "1"}, {"TFBOOT_TASK_TYPE", "worker"}, {"TFBOOT_PEER_TEMPLATE", "bert-{type}-0-{index}"}},
          "bert-worker-0-1"},
         "worker:1 from JOB_COMPLETION_INDEX"},
        {"--identity-from hostname ignores the environment index",
         {{"--identity-from=hostname"}, {{"JOB_COMPLETION_INDEX", "3"}}, "mnist-worker-1"},
         "worker:1 from hostname 'mnist-worker-1' (from gethostname())"},
    });
  }
  SUBCASE("--identity-from ptr: compose replica N is index N-1") {
    check_rows({
        {"replica 1", {{"--identity-from", "ptr"}, {}, "3a8f9c2d1e0b", std::nullopt, Setting{"proj-trainer-1.proj_default", "PTR of 172.18.0.5"}},
         "worker:0 from PTR of 172.18.0.5 'proj-trainer-1.proj_default'"},
        {"replica 3 as ps", {{"--identity-from", "ptr", "--task-type", "ps"}, {}, "3a8f9c2d1e0b", std::nullopt,
                              Setting{"proj-param-server-3.proj_default", "PTR of 172.18.0.7"}},
         "ps:2 from PTR of 172.18.0.7 'proj-param-server-3.proj_default'"},
        {"ptr ignores the environment index", {{"--identity-from", "ptr"}, {{"JOB_COMPLETION_INDEX", "5"}}, "3a8f9c2d1e0b",
                                               std::nullopt, Setting{"proj-trainer-2.net", "PTR of 10.0.0.2"}},
         "worker:1 from PTR of 10.0.0.2 'proj-trainer-2.net'"},
        {"a compose service named after a type gives the type", {{"--identity-from", "ptr"}, {}, "3a8f9c2d1e0b", std::nullopt,
                                                                 Setting{"proj-ps-2.proj_default", "PTR of 172.18.0.6"}},
         "ps:1 from PTR of 172.18.0.6 'proj-ps-2.proj_default'"},
        {"--task-type contradicting the PTR name", {{"--identity-from", "ptr", "--task-type", "worker"}, {}, "x", std::nullopt,
                                                    Setting{"proj-ps-2.net", "PTR of 10.0.0.6"}},
         "error 2: --task-type 'worker' contradicts PTR of 10.0.0.6 'proj-ps-2.net'"},
        {"no PTR name", {{"--identity-from", "ptr"}, {}, "3a8f9c2d1e0b"},
         "error 2: --identity-from ptr: no PTR name found for the own address"},
        {"replica 0 does not exist in compose", {{"--identity-from", "ptr"}, {}, "x", std::nullopt, Setting{"proj-trainer-0.net", "PTR of 10.0.0.2"}},
         "error 2: PTR of 10.0.0.2 'proj-trainer-0.net' is not of the form <project>-<service>-<N>.<network> with N >= 1"},
        {"no replica number", {{"--identity-from", "ptr"}, {}, "x", std::nullopt, Setting{"gateway.net", "PTR of 10.0.0.1"}},
         "error 2: PTR of 10.0.0.1 'gateway.net' is not of the form <project>-<service>-<N>.<network> with N >= 1"},
    });
  }
}

TEST_CASE("identity::resolve_identity usage errors name their source") {
  const std::string form =
      " is not of the form <prefix>-<type>-<ordinal> or <prefix>-<ordinal>; set --task-type and --task-index, and "
      "--peer-template for the peers' names; or run every task on this machine with `tfboot local`";
  check_rows({
      {"container id", {{}, {}, "3a8f9c2d1e0b"}, "error 2: hostname '3a8f9c2d1e0b' (from gethostname())" + form},
      {"no ordinal", {{}, {{"POD_NAME", "mnist-worker"}}, "x"}, "error 2: hostname 'mnist-worker' (from POD_NAME)" + form},
      {"no ordinal, peers from a template", {{"--peer-template", "w-{index}"}, {{"POD_NAME", "laptop"}}, "x"},
       "error 2: hostname 'laptop' (from POD_NAME) is not of the form <prefix>-<type>-<ordinal> or <prefix>-<ordinal>; set "
       "--task-type and --task-index; or run every task on this machine with `tfboot local`"},
      {"trailing dash", {{"--hostname", "trainer-"}, {}, "x"}, "error 2: hostname 'trainer-' (from --hostname)" + form},
      {"leading zero", {{}, {}, "mnist-worker-03"}, "error 2: hostname 'mnist-worker-03' (from gethostname())" + form},
      {"only an ordinal", {{}, {}, "-3"}, "error 2: hostname '-3' (from gethostname())" + form},
      {"non-numeric ordinal", {{}, {}, "mnist-worker-x"}, "error 2: hostname 'mnist-worker-x' (from gethostname())" + form},
      {"empty hostname", {{}, {}, ""}, "error 2: hostname '' (from gethostname())" + form},
      {"bad --task-type", {{"--task-type", "gpu"}, {}, "mnist-worker-3"},
       "error 2: --task-type 'gpu' is not a task type (use chief, worker, ps or evaluator)"},
      {"bad TFBOOT_TASK_TYPE", {{}, {{"TFBOOT_TASK_TYPE", "Worker"}}, "trainer-1"},
       "error 2: TFBOOT_TASK_TYPE 'Worker' is not a task type (use chief, worker, ps or evaluator)"},
      {"negative --task-index", {{"--task-index", "-1"}, {}, "x"}, "error 2: --task-index '-1' is not a non-negative integer"},
      {"non-numeric --task-index", {{"--task-index=one"}, {}, "x"}, "error 2: --task-index 'one' is not a non-negative integer"},
      {"fractional TFBOOT_TASK_INDEX", {{}, {{"TFBOOT_TASK_INDEX", "1.5"}}, "x"},
       "error 2: TFBOOT_TASK_INDEX '1.5' is not a non-negative integer"},
      {"bad JOB_COMPLETION_INDEX", {{}, {{"JOB_COMPLETION_INDEX", "x"}}, "mnist-worker-0"},
       "error 2: JOB_COMPLETION_INDEX 'x' is not a non-negative integer"},
      {"negative TFBOOT_POD_INDEX", {{}, {{"TFBOOT_POD_INDEX", "-2"}}, "mnist-worker-0"},
       "error 2: TFBOOT_POD_INDEX '-2' is not a non-negative integer"},
      {"--task-type contradicting the hostname", {{"--task-type", "ps"}, {}, "mnist-worker-3"},
       "error 2: --task-type 'ps' contradicts hostname 'mnist-worker-3' (from gethostname())"},
      {"a bad --task-type is reported even when TF_CONFIG would answer",
       {{"--task-type", "gpu"}, {}, "x", operator_config(TaskType::worker, 0)},
       "error 2: --task-type 'gpu' is not a task type (use chief, worker, ps or evaluator)"},
  });
}

// docs/command-line.md: --task-type defaults "from identity sources". When only the index is given
// explicitly, the type must still come from the hostname, as it does for an index from the
// environment (JOB_COMPLETION_INDEX) and for TF_CONFIG.
TEST_CASE("identity::resolve_identity --task-index alone keeps the hostname's type") {
  check_rows({
      {"--task-index with a ps hostname", {{"--task-index", "1"}, {}, "mnist-ps-1"}, "ps:1 from --task-index"},
      {"TFBOOT_TASK_INDEX with a chief hostname", {{}, {{"TFBOOT_TASK_INDEX", "0"}}, "mnist-chief-0"},
       "chief:0 from TFBOOT_TASK_INDEX"},
  });
}

TEST_CASE("identity::identity_from_ordinal") {
  auto text = [](const Identity& identity) { return identity.task() + " from " + identity.source; };
  CHECK(text(identity_from_ordinal(TaskType::worker, 3, false, "Slurm (SLURM_PROCID)")) == "worker:3 from Slurm (SLURM_PROCID)");
  CHECK(text(identity_from_ordinal(TaskType::worker, 0, true, "s")) == "chief:0 from s, chief at ordinal 0");
  CHECK(text(identity_from_ordinal(TaskType::worker, 3, true, "s")) == "worker:2 from s, chief at ordinal 0");
  CHECK(text(identity_from_ordinal(TaskType::ps, 0, true, "s")) == "ps:0 from s");
}

// docs/identity.md. A platform answers after the flags; --task-index still wins.
TEST_CASE("identity::identity_with_platform") {
  const Identity slurm{TaskType::worker, 2, "Slurm (SLURM_PROCID)"};
  auto with_flags = [&](std::vector<std::string> args, const Environment& env = {}) {
    auto options = parse_options(args, env);
    REQUIRE(options);
    auto parsed = parse_plan_inputs(*options, env);
    if (!parsed) return describe(std::unexpected(parsed.error()));
    if (auto flags = parse_identity_flags(*options, *parsed); !flags) return describe(std::unexpected(flags.error()));
    return describe(identity_with_platform(*parsed, slurm));
  };
  CHECK(with_flags({}) == "worker:2 from Slurm (SLURM_PROCID)");
  CHECK(with_flags({"--task-type", "worker"}) == "worker:2 from Slurm (SLURM_PROCID)");
  CHECK(with_flags({"--task-index", "0"}) == "worker:0 from --task-index");
  CHECK(with_flags({"--task-index", "0", "--task-type", "chief"}) == "chief:0 from --task-index and --task-type");
  CHECK(with_flags({}, {{"TFBOOT_TASK_INDEX", "1"}}) == "worker:1 from TFBOOT_TASK_INDEX");
  CHECK(with_flags({"--task-type", "ps"}) == "error 2: --task-type 'ps' contradicts worker:2 from Slurm (SLURM_PROCID)");
  CHECK(with_flags({"--task-type", "boss"}) == "error 2: --task-type 'boss' is not a task type (use chief, worker, ps or evaluator)");
  CHECK(with_flags({"--task-index", "x"}) == "error 2: --task-index 'x' is not a non-negative integer");
}

TEST_CASE("identity::check_identity_in_cluster") {
  const Setting cluster{"chief=1,ps=2,worker=4,evaluator=1", "--cluster"};
  auto spec = parse_cluster_spec(cluster);
  REQUIRE(spec);
  auto check = [&](TaskType type, int index, const std::string& source = "hostname 'h' (from POD_NAME)") {
    auto inside = check_identity_in_cluster(Identity{type, index, source}, *spec, cluster);
    return inside ? std::string("inside") : "error " + std::to_string(inside.error().code) + ": " + inside.error().message;
  };
  SUBCASE("every task of the cluster is inside") {
    CHECK(check(TaskType::chief, 0) == "inside");
    CHECK(check(TaskType::worker, 0) == "inside");
    CHECK(check(TaskType::worker, 3) == "inside");
    CHECK(check(TaskType::ps, 1) == "inside");
    CHECK(check(TaskType::evaluator, 0) == "inside");
  }
  SUBCASE("an index past the count is outside, naming both sources") {
    CHECK(check(TaskType::worker, 4, "hostname 'mnist-worker-4' (from POD_NAME)") ==
          "error 2: task worker:4 from hostname 'mnist-worker-4' (from POD_NAME) is outside --cluster "
          "'chief=1,ps=2,worker=4,evaluator=1'");
    CHECK(check(TaskType::ps, 2, "JOB_COMPLETION_INDEX") ==
          "error 2: task ps:2 from JOB_COMPLETION_INDEX is outside --cluster 'chief=1,ps=2,worker=4,evaluator=1'");
    CHECK(check(TaskType::chief, 1, "--task-index and --task-type") ==
          "error 2: task chief:1 from --task-index and --task-type is outside --cluster 'chief=1,ps=2,worker=4,evaluator=1'");
    CHECK(check(TaskType::evaluator, 1, "TFBOOT_POD_INDEX") ==
          "error 2: task evaluator:1 from TFBOOT_POD_INDEX is outside --cluster 'chief=1,ps=2,worker=4,evaluator=1'");
  }
  SUBCASE("a type with no tasks is outside") {
    const Setting workers_only{"worker=2", "TFBOOT_CLUSTER"};
    auto workers = parse_cluster_spec(workers_only);
    REQUIRE(workers);
    auto inside = check_identity_in_cluster(Identity{TaskType::chief, 0, "hostname 'job-master-0' (from POD_NAME)"}, *workers,
                                            workers_only);
    CHECK(code_of(inside) == 2);
    CHECK(error_of(inside) == "task chief:0 from hostname 'job-master-0' (from POD_NAME) is outside TFBOOT_CLUSTER 'worker=2'");
  }
}

}  // namespace tfboot
