// The plan: options + environment + host facts -> identity, peers and TF_CONFIG, before any lookup.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan.h"
#include "test_support.h"

namespace tfboot {
namespace {

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
      {"no cluster and no TF_CONFIG", {}, {}, "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set"},
      {"a bad port spec", {"--cluster", "worker=2", "--port", "22x"}, {}, "--port '22x': '22x' is not a port in 1..65535"},
      {"a DNS server with a port out of range, even with --wait 0", {"--cluster", "worker=2", "--wait", "0", "--dns-server", "127.0.0.1:65589"},
       {}, "--dns-server '127.0.0.1:65589': port '65589' is not a number in 1..65535"},
      {"an operator TF_CONFIG that TensorFlow would refuse", {}, {{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{}})"}},
       "TF_CONFIG from the environment: task.type is missing or not a string"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    auto checked = check_options(options_from(row.args, row.env), row.env);
    CHECK(code_of(checked) == 2);
    CHECK(error_of(checked) == row.error);
  }
  CHECK(check_options(options_from({"--cluster", "worker=2"}), {}));
  CHECK_FALSE(needs_own_ptr_name(options_from({"--identity-from", "ptr", "--task-index", "1", "--cluster", "worker=2"})));
  CHECK(needs_own_ptr_name(options_from({"--identity-from", "ptr", "--cluster", "worker=2"})));
}

TEST_CASE("plan::make_plan from host facts alone") {
  SUBCASE("zero configuration in a StatefulSet pod: identity and Service from the facts") {
    auto plan = make_plan(options_from({"--cluster", "worker=2"}), {}, statefulset_pod(), std::nullopt);
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
    auto plan = make_plan(options_from({"--cluster", "worker=3"}), {}, bare, std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:2");
    CHECK_FALSE(plan->suffix);
    CHECK(names_of(*plan) == "trainer-0:2222 trainer-1:2222 trainer-2:2222");
  }
  SUBCASE("the PTR name gives identity and peers for compose replicas") {
    HostFacts container{"3f2a9c0d1e4b", "", "", {"172.18.0.4"}};
    auto plan = make_plan(options_from({"--identity-from", "ptr", "--cluster", "worker=2"}), {}, container,
                          Setting{"proj-worker-2.proj_default", "PTR of 172.18.0.4"});
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    CHECK(names_of(*plan) == "proj-worker-1:2222 proj-worker-2:2222");
  }
  SUBCASE("an index outside the cluster is a usage error naming its source") {
    auto plan = make_plan(options_from({"--cluster", "worker=1"}), {}, statefulset_pod(), std::nullopt);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan).find("worker:1") != std::string::npos);
  }
  SUBCASE("--cluster replaces an operator's TF_CONFIG, with a warning") {
    Environment env{{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}})"}};
    auto plan = make_plan(options_from({"--cluster", "worker=2"}, env), env, statefulset_pod(), std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK_FALSE(plan->operator_config);
    CHECK(plan->warnings == std::vector<std::string>{"TF_CONFIG from the environment is replaced, since --cluster is given"});
  }
  SUBCASE("an operator's TF_CONFIG is adopted and its names are used as written") {
    Environment env{{"TF_CONFIG", R"({"cluster":{"worker":["w0.x:2000","w1.x:2001"]},"task":{"type":"worker","index":1}})"}};
    auto plan = make_plan(options_from({}, env), env, HostFacts{"pod-abc", "", "", {}}, std::nullopt);
    REQUIRE_MESSAGE(plan, error_of(plan));
    CHECK(plan->identity.task() == "worker:1");
    CHECK(names_of(*plan) == "w0.x:2000 w1.x:2001");
  }
  SUBCASE("a job too large for one environment string fails before the DNS wait") {
    auto plan = make_plan(options_from({"--cluster", "worker=4000"}), {}, statefulset_pod(), std::nullopt);
    CHECK(code_of(plan) == 2);
    CHECK(error_of(plan).starts_with("TF_CONFIG for 4000 tasks would be about "));
  }
}

TEST_CASE("plan::make_tf_config_text") {
  auto options = options_from({"--cluster", "worker=2"});
  auto plan = make_plan(options, {}, statefulset_pod(), std::nullopt);
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
