// TF_CONFIG: exact JSON out, and the checks TensorFlow would make on what comes in (docs/frameworks.md: TF_CONFIG).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "plan/tf_config.h"
#include "test_support.h"

namespace tfboot {
namespace {

using Strings = std::vector<std::string>;

TfConfig config_of(Strings chief, Strings worker, Strings ps, Strings evaluator, TaskType type, int index) {
  TfConfig config;
  config.job(TaskType::chief) = std::move(chief);
  config.job(TaskType::worker) = std::move(worker);
  config.job(TaskType::ps) = std::move(ps);
  config.job(TaskType::evaluator) = std::move(evaluator);
  config.task_type = type;
  config.task_index = index;
  return config;
}

// The peers of chief=1,worker=2,ps=1,evaluator=1 named after mnist-worker-N, and their "host:port".
std::vector<PeerAddress> mnist_peers() {
  auto parts = split_hostname("mnist-worker-0");
  auto peers = plan_peers(*parse_cluster_spec(Setting{"chief=1,worker=2,ps=1,evaluator=1", "--cluster"}),
                          *parse_port_spec(Setting{"2222,ps=2223", "--port"}), derive_peer_template(*parts, "mnist-worker-0"),
                          std::nullopt, false);
  REQUIRE(peers);
  return *peers;
}

Strings addresses_of(const std::vector<PeerAddress>& peers) {
  Strings addresses;
  for (const auto& peer : peers) addresses.push_back(peer.name + ":" + std::to_string(peer.port));
  return addresses;
}

std::string parsed(std::string_view json) {
  auto config = parse_tf_config(json, "TF_CONFIG");
  return config ? to_json(*config) : "error " + std::to_string(config.error().code) + ": " + config.error().message;
}

}  // namespace

TEST_CASE("tf_config::to_json") {
  SUBCASE("keys in the order cluster then task; jobs chief, worker, ps, evaluator") {
    auto config = config_of({"c:2222"}, {"w0:2222", "w1:2222"}, {"p0:2223"}, {"e:2224"}, TaskType::worker, 1);
    CHECK(to_json(config) ==
          R"({"cluster":{"chief":["c:2222"],"worker":["w0:2222","w1:2222"],"ps":["p0:2223"],"evaluator":["e:2224"]},)"
          R"("task":{"type":"worker","index":1}})");
  }
  SUBCASE("empty jobs are left out") {
    CHECK(to_json(config_of({}, {"w0:2222", "w1:2222"}, {}, {}, TaskType::worker, 0)) ==
          R"({"cluster":{"worker":["w0:2222","w1:2222"]},"task":{"type":"worker","index":0}})");
    CHECK(to_json(config_of({"c:1"}, {}, {"p:2"}, {}, TaskType::ps, 0)) ==
          R"({"cluster":{"chief":["c:1"],"ps":["p:2"]},"task":{"type":"ps","index":0}})");
  }
  SUBCASE("an evaluator outside the cluster still says it is an evaluator") {
    CHECK(to_json(config_of({"c:1"}, {"w:1"}, {}, {}, TaskType::evaluator, 0)) ==
          R"({"cluster":{"chief":["c:1"],"worker":["w:1"]},"task":{"type":"evaluator","index":0}})");
  }
  SUBCASE("every type name") {
    CHECK(to_json(config_of({"c:1"}, {}, {}, {}, TaskType::chief, 0)) == R"({"cluster":{"chief":["c:1"]},"task":{"type":"chief","index":0}})");
  }
  SUBCASE("an empty cluster is an empty object") {
    CHECK(to_json(config_of({}, {}, {}, {}, TaskType::worker, 0)) == R"({"cluster":{},"task":{"type":"worker","index":0}})");
  }
  SUBCASE("an operator's environment and rpc_layer come after task") {
    auto config = config_of({}, {"w:1"}, {}, {}, TaskType::worker, 0);
    config.environment = "cloud";
    config.rpc_layer = "grpc";
    CHECK(to_json(config) == R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0},"environment":"cloud","rpc_layer":"grpc"})");
  }
  SUBCASE("IPv6 addresses and names needing JSON escapes are written as valid JSON") {
    CHECK(to_json(config_of({}, {"[fd00::1]:2222", "w\"1:2"}, {}, {}, TaskType::worker, 0)) ==
          R"({"cluster":{"worker":["[fd00::1]:2222","w\"1:2"]},"task":{"type":"worker","index":0}})");
  }
}

TEST_CASE("tf_config::build_tf_config") {
  const auto peers = mnist_peers();
  const auto addresses = addresses_of(peers);
  SUBCASE("the evaluator is left out of the cluster by default, for every task") {
    CHECK(to_json(build_tf_config(peers, addresses, TaskType::worker, 1, false)) ==
          R"({"cluster":{"chief":["mnist-chief-0:2222"],"worker":["mnist-worker-0:2222","mnist-worker-1:2222"],)"
          R"("ps":["mnist-ps-0:2223"]},"task":{"type":"worker","index":1}})");
    auto evaluator = build_tf_config(peers, addresses, TaskType::evaluator, 0, false);
    CHECK(to_json(evaluator) ==
          R"({"cluster":{"chief":["mnist-chief-0:2222"],"worker":["mnist-worker-0:2222","mnist-worker-1:2222"],)"
          R"("ps":["mnist-ps-0:2223"]},"task":{"type":"evaluator","index":0}})");
    CHECK(validate_tf_config(evaluator, "generated TF_CONFIG"));
  }
  SUBCASE("--evaluator-in-cluster lists it") {
    CHECK(to_json(build_tf_config(peers, addresses, TaskType::chief, 0, true)) ==
          R"({"cluster":{"chief":["mnist-chief-0:2222"],"worker":["mnist-worker-0:2222","mnist-worker-1:2222"],)"
          R"("ps":["mnist-ps-0:2223"],"evaluator":["mnist-evaluator-0:2222"]},"task":{"type":"chief","index":0}})");
  }
  SUBCASE("addresses are taken as given, in plan order (e.g. resolved IPs)") {
    Strings ips{"10.0.0.1:2222", "10.0.0.2:2222", "[fd00::3]:2222", "10.0.0.4:2223", "10.0.0.5:2222"};
    auto config = build_tf_config(peers, ips, TaskType::ps, 0, false);
    CHECK(config.job(TaskType::chief) == Strings{"10.0.0.1:2222"});
    CHECK(config.job(TaskType::worker) == Strings{"10.0.0.2:2222", "[fd00::3]:2222"});
    CHECK(config.job(TaskType::ps) == Strings{"10.0.0.4:2223"});
    CHECK(config.job(TaskType::evaluator).empty());
    CHECK(validate_tf_config(config, "generated TF_CONFIG"));
  }
  SUBCASE("no environment or rpc_layer of its own") {
    auto config = build_tf_config(peers, addresses, TaskType::worker, 0, false);
    CHECK_FALSE(config.environment.has_value());
    CHECK_FALSE(config.rpc_layer.has_value());
  }
}

TEST_CASE("tf_config::parse_tf_config accepts what operators write") {
  SUBCASE("TFJob with environment: adopted as it is") {
    const std::string tfjob =
        R"({"cluster":{"chief":["mnist-chief-0.default.svc:2222"],)"
        R"("worker":["mnist-worker-0.default.svc:2222","mnist-worker-1.default.svc:2222"],)"
        R"("ps":["mnist-ps-0.default.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"})";
    auto config = parse_tf_config(tfjob, "TF_CONFIG");
    REQUIRE_MESSAGE(config, error_of(config));
    CHECK(config->job(TaskType::chief) == Strings{"mnist-chief-0.default.svc:2222"});
    CHECK(config->job(TaskType::worker) == Strings{"mnist-worker-0.default.svc:2222", "mnist-worker-1.default.svc:2222"});
    CHECK(config->job(TaskType::ps) == Strings{"mnist-ps-0.default.svc:2222"});
    CHECK(config->job(TaskType::evaluator).empty());
    CHECK(config->task_type == TaskType::worker);
    CHECK(config->task_index == 1);
    CHECK(config->environment == std::optional<std::string>("cloud"));
    CHECK_FALSE(config->rpc_layer.has_value());
    CHECK(to_json(*config) == tfjob);
  }
  SUBCASE("rpc_layer is kept") {
    CHECK(parsed(R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0},"rpc_layer":"grpc+verbs"})") ==
          R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0},"rpc_layer":"grpc+verbs"})");
  }
  SUBCASE("key order and whitespace do not matter; output is in TF_CONFIG order") {
    CHECK(parsed(R"(  { "task" : { "index" : 0, "type" : "ps" },
                      "cluster" : { "ps" : [ "p:2223" ], "worker" : [ "w:2222" ], "chief" : [ "c:2222" ] } } )") ==
          R"({"cluster":{"chief":["c:2222"],"worker":["w:2222"],"ps":["p:2223"]},"task":{"type":"ps","index":0}})");
  }
  SUBCASE("a missing task.index is 0") {
    CHECK(parsed(R"({"cluster":{"chief":["c:1"]},"task":{"type":"chief"}})") ==
          R"({"cluster":{"chief":["c:1"]},"task":{"type":"chief","index":0}})");
  }
  SUBCASE("an evaluator need not be in the cluster") {
    CHECK(parsed(R"({"cluster":{"worker":["w:1"]},"task":{"type":"evaluator","index":0}})") ==
          R"({"cluster":{"worker":["w:1"]},"task":{"type":"evaluator","index":0}})");
  }
  SUBCASE("an evaluator may be in the cluster") {
    CHECK(parsed(R"({"cluster":{"worker":["w:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}})") ==
          R"({"cluster":{"worker":["w:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}})");
  }
  SUBCASE("empty jobs and unknown top-level keys are tolerated") {
    CHECK(parsed(R"({"cluster":{"chief":[],"worker":["w:1"]},"task":{"type":"worker","index":0},"extra":{"x":1}})") ==
          R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0}})");
  }
  SUBCASE("IPv6 addresses in brackets") {
    CHECK(parsed(R"({"cluster":{"worker":["[fd00::1]:2222","[::1]:2223"]},"task":{"type":"worker","index":1}})") ==
          R"({"cluster":{"worker":["[fd00::1]:2222","[::1]:2223"]},"task":{"type":"worker","index":1}})");
  }
  SUBCASE("ports 1 and 65535") {
    CHECK(parsed(R"({"cluster":{"worker":["w:1","w:65535"]},"task":{"type":"worker","index":0}})") ==
          R"({"cluster":{"worker":["w:1","w:65535"]},"task":{"type":"worker","index":0}})");
  }
}

TEST_CASE("tf_config::parse_tf_config rejects what TensorFlow would choke on") {
  struct Row {
    std::string behaviour;
    std::string json;
    std::string message;
  };
  const std::vector<Row> rows{
      {"malformed JSON", R"({"cluster":)", "TF_CONFIG is not valid JSON"},
      {"empty text", "", "TF_CONFIG is not valid JSON"},
      {"trailing garbage", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker"}} x)", "TF_CONFIG is not valid JSON"},
      {"not an object", R"(["w:1"])", "TF_CONFIG is not a JSON object"},
      {"a string", R"("w:1")", "TF_CONFIG is not a JSON object"},
      {"no cluster", R"({"task":{"type":"worker","index":0}})", R"(TF_CONFIG has no "cluster" object)"},
      {"cluster not an object", R"({"cluster":["w:1"],"task":{"type":"worker","index":0}})", R"(TF_CONFIG has no "cluster" object)"},
      {"unknown job", R"({"cluster":{"gpu":["g:1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: unknown job 'gpu' in cluster (only chief, worker, ps, evaluator)"},
      {"master job", R"({"cluster":{"master":["m:1"],"worker":["w:1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: unknown job 'master' in cluster (only chief, worker, ps, evaluator)"},
      {"job not a list", R"({"cluster":{"worker":"w:1"},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: job 'worker' is not a list of addresses"},
      {"job is null", R"({"cluster":{"worker":null},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: job 'worker' is not a list of addresses"},
      {"non-string address", R"({"cluster":{"worker":["w:1",2222]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: job 'worker' has an address that is not a string"},
      {"no task", R"({"cluster":{"worker":["w:1"]}})", R"(TF_CONFIG has no "task" object)"},
      {"task not an object", R"({"cluster":{"worker":["w:1"]},"task":"worker"})", R"(TF_CONFIG has no "task" object)"},
      {"no task.type", R"({"cluster":{"worker":["w:1"]},"task":{"index":0}})", "TF_CONFIG: task.type is missing or not a string"},
      {"task.type not a string", R"({"cluster":{"worker":["w:1"]},"task":{"type":1,"index":0}})",
       "TF_CONFIG: task.type is missing or not a string"},
      {"unknown task.type", R"({"cluster":{"worker":["w:1"]},"task":{"type":"gpu","index":0}})",
       "TF_CONFIG: task.type 'gpu' is not chief, worker, ps or evaluator"},
      {"task.type master", R"({"cluster":{"chief":["c:1"]},"task":{"type":"master","index":0}})",
       "TF_CONFIG: task.type 'master' is not chief, worker, ps or evaluator"},
      {"negative index", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":-1}})",
       "TF_CONFIG: task.index -1 is not a non-negative integer"},
      {"string index", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":"0"}})",
       R"(TF_CONFIG: task.index "0" is not a non-negative integer)"},
      {"fractional index", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0.5}})",
       "TF_CONFIG: task.index 0.5 is not a non-negative integer"},
      {"huge index", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":18446744073709551615}})",
       "TF_CONFIG: task.index 18446744073709551615 is not a non-negative integer"},
      {"null index", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":null}})",
       "TF_CONFIG: task.index null is not a non-negative integer"},
      {"environment not a string", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0},"environment":5})",
       R"(TF_CONFIG: "environment" is not a string)"},
      {"rpc_layer not a string", R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0},"rpc_layer":null})",
       R"(TF_CONFIG: "rpc_layer" is not a string)"},
      {"two chiefs", R"({"cluster":{"chief":["c0:1","c1:1"]},"task":{"type":"chief","index":0}})", "TF_CONFIG: more than one chief"},
      {"two evaluators", R"({"cluster":{"worker":["w:1"],"evaluator":["e0:1","e1:1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: more than one evaluator"},
      {"empty cluster", R"({"cluster":{},"task":{"type":"worker","index":0}})", "TF_CONFIG: cluster has no tasks"},
      {"only empty jobs", R"({"cluster":{"worker":[]},"task":{"type":"evaluator","index":0}})", "TF_CONFIG: cluster has no tasks"},
      {"own type missing", R"({"cluster":{"worker":["w:1"]},"task":{"type":"ps","index":0}})",
       "TF_CONFIG: task type 'ps' is not in the cluster"},
      {"own type missing: chief", R"({"cluster":{"worker":["w:1"],"ps":["p:1"]},"task":{"type":"chief","index":0}})",
       "TF_CONFIG: task type 'chief' is not in the cluster"},
      {"evaluator outside the cluster with index 1",
       R"({"cluster":{"worker":["w:1"]},"task":{"type":"evaluator","index":1}})",
       "TF_CONFIG: task evaluator:1 but there is only one evaluator"},
      {"index out of range", R"({"cluster":{"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":2}})",
       "TF_CONFIG: task worker:2 is outside the cluster's 2 worker task(s)"},
      {"evaluator index out of range in the cluster",
       R"({"cluster":{"worker":["w:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":1}})",
       "TF_CONFIG: task evaluator:1 is outside the cluster's 1 evaluator task(s)"},
      {"address without port", R"({"cluster":{"worker":["w0:1","w1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'w1' of worker:1 has no ':port'"},
      {"address with an empty port", R"({"cluster":{"worker":["w0:"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'w0:' of worker:0 has a port outside 1..65535"},
      {"port 0", R"({"cluster":{"ps":["p:0"],"worker":["w:1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'p:0' of ps:0 has a port outside 1..65535"},
      {"port 65536", R"({"cluster":{"chief":["c:65536"]},"task":{"type":"chief","index":0}})",
       "TF_CONFIG: address 'c:65536' of chief:0 has a port outside 1..65535"},
      {"named port", R"({"cluster":{"worker":["w:grpc"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'w:grpc' of worker:0 has a port outside 1..65535"},
      {"comma in address", R"({"cluster":{"worker":["w0:1,w1:1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'w0:1,w1:1' of worker:0 contains a comma or whitespace"},
      {"space in address", R"({"cluster":{"worker":["w0 :1"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'w0 :1' of worker:0 contains a comma or whitespace"},
      {"empty host", R"({"cluster":{"worker":[":2222"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address ':2222' of worker:0 has an empty host"},
      {"IPv6 without brackets", R"({"cluster":{"worker":["fd00::1:2222"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'fd00::1:2222' of worker:0 has an IPv6 host without [brackets]"},
      {"evaluator's bad address is checked even outside its own type",
       R"({"cluster":{"worker":["w:1"],"evaluator":["e"]},"task":{"type":"worker","index":0}})",
       "TF_CONFIG: address 'e' of evaluator:0 has no ':port'"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.behaviour);
    auto config = parse_tf_config(row.json, "TF_CONFIG");
    CHECK(code_of(config) == 2);
    CHECK(error_of(config) == row.message);
  }
}

TEST_CASE("tf_config::validate_tf_config") {
  SUBCASE("names the given source") {
    auto outside = validate_tf_config(config_of({}, {"w:1"}, {}, {}, TaskType::worker, 3),
                                      "TF_CONFIG with task worker:3 from hostname 'mnist-worker-3' (from POD_NAME)");
    CHECK(code_of(outside) == 2);
    CHECK(error_of(outside) ==
          "TF_CONFIG with task worker:3 from hostname 'mnist-worker-3' (from POD_NAME): task worker:3 is outside the cluster's 1 "
          "worker task(s)");
  }
  SUBCASE("a negative index set in code is outside") {
    auto negative = validate_tf_config(config_of({}, {"w:1"}, {}, {}, TaskType::worker, -1), "generated TF_CONFIG");
    CHECK(error_of(negative) == "generated TF_CONFIG: task worker:-1 is outside the cluster's 1 worker task(s)");
  }
  SUBCASE("a valid generated config passes") {
    CHECK(validate_tf_config(config_of({"c:1"}, {"w0:1", "w1:1"}, {"p:2"}, {}, TaskType::ps, 0), "generated TF_CONFIG"));
  }
}

TEST_CASE("tf_config::address_problem") {
  for (const std::string good : {"w:1", "mnist-worker-0.mnist.default.svc.cluster.local:2222", "10.0.0.1:65535", "[fd00::1]:2222",
                           "[::1]:1", "localhost:2222"}) {
    CAPTURE(good);
    CHECK(address_problem(good).value_or("fine") == "fine");
  }
  const std::vector<std::pair<std::string, std::string>> bad{
      {"w", "has no ':port'"},
      {"w:", "has a port outside 1..65535"},
      {"w:0", "has a port outside 1..65535"},
      {"w:65536", "has a port outside 1..65535"},
      {"w:-1", "has a port outside 1..65535"},
      {":2222", "has an empty host"},
      {"a:1,b:1", "contains a comma or whitespace"},
      {"a:1\n", "contains a comma or whitespace"},
      {"a\t:1", "contains a comma or whitespace"},
      {"fd00::1:2222", "has an IPv6 host without [brackets]"},
      {"::1:2222", "has an IPv6 host without [brackets]"},
      {"[]:2222", "has a malformed [IPv6] host"},
      {"[fd00::1:2222", "has a malformed [IPv6] host"},
  };
  for (const auto& [address, problem] : bad) {
    CAPTURE(address);
    CHECK(address_problem(address).value_or("fine") == problem);
  }
  SUBCASE("an IPv6 address in brackets without a port is rejected") {
    CHECK(address_problem("[fd00::1]").has_value());
  }
}

TEST_CASE("tf_config::split_address") {
  CHECK(split_address("mnist-worker-0.mnist:2222") == std::pair<std::string, int>{"mnist-worker-0.mnist", 2222});
  CHECK(split_address("10.0.0.1:1") == std::pair<std::string, int>{"10.0.0.1", 1});
  CHECK(split_address("[fd00::1]:2223") == std::pair<std::string, int>{"fd00::1", 2223});
  CHECK(split_address("[::1]:65535") == std::pair<std::string, int>{"::1", 65535});
}

}  // namespace tfboot

namespace tfboot {

TEST_CASE("tf_config::to_json escapes as a JSON library does") {
  TfConfig config;
  config.job(TaskType::worker) = {"w-0:2222", "[fd00::1]:2222"};
  config.task_index = 1;
  config.environment = std::string("cloud \"quoted\" back\\slash \n\t\x01 caf\xc3\xa9");
  config.rpc_layer = "grpc";
  nlohmann::ordered_json expected;
  expected["cluster"]["worker"] = config.job(TaskType::worker);
  expected["task"] = {{"type", "worker"}, {"index", 1}};
  expected["environment"] = *config.environment;
  expected["rpc_layer"] = "grpc";
  CHECK(to_json(config) == expected.dump());
  CHECK(nlohmann::json::parse(to_json(config))["environment"] == *config.environment);
}

}  // namespace tfboot
