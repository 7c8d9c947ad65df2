// Cluster and port specs, hostname parts, peer templates and peer names (docs/peers-and-dns.md).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan/cluster.h"
#include "test_support.h"

namespace tfboot {
namespace {

std::string counts(const ClusterSpec& spec) {
  return "chief=" + std::to_string(spec.count(TaskType::chief)) + ",worker=" + std::to_string(spec.count(TaskType::worker)) +
         ",ps=" + std::to_string(spec.count(TaskType::ps)) + ",evaluator=" + std::to_string(spec.count(TaskType::evaluator));
}

std::string ports(const PortSpec& spec) {
  return "chief=" + std::to_string(spec.port(TaskType::chief)) + ",worker=" + std::to_string(spec.port(TaskType::worker)) +
         ",ps=" + std::to_string(spec.port(TaskType::ps)) + ",evaluator=" + std::to_string(spec.port(TaskType::evaluator));
}

std::string parts_text(const std::optional<HostnameParts>& parts) {
  if (!parts) return "<none>";
  return "prefix='" + parts->prefix + "' type=" + (parts->type ? std::string(to_string(*parts->type)) : "-") +
         (parts->type_spelled_master ? "(master)" : "") + " ordinal=" + std::to_string(parts->ordinal);
}

// "task name:port" per peer, one per line, so that a whole plan compares at once.
std::string plan_text(const std::vector<PeerAddress>& peers) {
  std::string text;
  for (const auto& peer : peers) {
    text += peer.task() + " " + peer.name + ":" + std::to_string(peer.port) + (peer.fully_qualified ? " fq" : "") + "\n";
  }
  return text;
}

ClusterSpec cluster(const std::string& text) {
  auto spec = parse_cluster_spec(Setting{text, "--cluster"});
  REQUIRE_MESSAGE(spec, error_of(spec));
  return *spec;
}

PortSpec port_spec(const std::string& text) {
  auto spec = parse_port_spec(Setting{text, "--port"});
  REQUIRE_MESSAGE(spec, error_of(spec));
  return *spec;
}

// The default template, from the own hostname, as run() derives it.
PeerTemplate derived(const std::string& hostname) {
  auto parts = split_hostname(hostname);
  REQUIRE(parts);
  return derive_peer_template(*parts, hostname);
}

Result<std::vector<PeerAddress>> plan(const std::string& spec, const PeerTemplate& peer_template,
                                      const std::optional<DnsSuffix>& suffix = std::nullopt, bool chief_at_ordinal_0 = false,
                                      const std::string& port = "2222") {
  return plan_peers(cluster(spec), port_spec(port), peer_template, suffix, chief_at_ordinal_0);
}

std::string planned(const Result<std::vector<PeerAddress>>& peers) {
  return peers ? plan_text(*peers) : "error " + std::to_string(peers.error().code) + ": " + peers.error().message;
}

}  // namespace

TEST_CASE("cluster::parse_task_type") {
  CHECK(parse_task_type("chief") == TaskType::chief);
  CHECK(parse_task_type("master") == TaskType::chief);
  CHECK(parse_task_type("worker") == TaskType::worker);
  CHECK(parse_task_type("ps") == TaskType::ps);
  CHECK(parse_task_type("evaluator") == TaskType::evaluator);
  for (const std::string text : {"", "Worker", "PS", "workers", "gpu", " worker", "eval"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_task_type(text).has_value());
  }
  CHECK(to_string(TaskType::chief) == "chief");
  CHECK(to_string(TaskType::worker) == "worker");
  CHECK(to_string(TaskType::ps) == "ps");
  CHECK(to_string(TaskType::evaluator) == "evaluator");
}

TEST_CASE("cluster::parse_index") {
  CHECK(parse_index("0").value_or(-1) == 0);
  CHECK(parse_index("7").value_or(-1) == 7);
  CHECK(parse_index("10").value_or(-1) == 10);
  CHECK(parse_index("999999").value_or(-1) == 999999);
  for (const std::string text : {"", "-1", "+1", "01", "00", "1000000", "1a", " 1", "1 ", "1.0", "0x1", "a"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_index(text).has_value());
  }
}

TEST_CASE("cluster::parse_cluster_spec") {
  SUBCASE("valid specs, in any order") {
    const std::vector<std::pair<std::string, std::string>> rows{
        {"chief=1,ps=2,worker=4,evaluator=1", "chief=1,worker=4,ps=2,evaluator=1"},
        {"worker=2", "chief=0,worker=2,ps=0,evaluator=0"},
        {"ps=1", "chief=0,worker=0,ps=1,evaluator=0"},
        {"chief=1", "chief=1,worker=0,ps=0,evaluator=0"},
        {"evaluator=1,worker=3", "chief=0,worker=3,ps=0,evaluator=1"},
        {"chief=0,worker=1", "chief=0,worker=1,ps=0,evaluator=0"},
        {"worker=100000", "chief=0,worker=100000,ps=0,evaluator=0"},
    };
    for (const auto& [text, expected] : rows) {
      CAPTURE(text);
      auto spec = parse_cluster_spec(Setting{text, "--cluster"});
      REQUIRE_MESSAGE(spec, error_of(spec));
      CHECK(counts(*spec) == expected);
    }
  }
  SUBCASE("usage errors name the setting and what is wrong") {
    const std::vector<std::pair<std::string, std::string>> rows{
        {"", "TFBOOT_CLUSTER '': '' is not type=count"},
        {"worker", "TFBOOT_CLUSTER 'worker': 'worker' is not type=count"},
        {"worker=2,", "TFBOOT_CLUSTER 'worker=2,': '' is not type=count"},
        {"worker=2,,ps=1", "TFBOOT_CLUSTER 'worker=2,,ps=1': '' is not type=count"},
        {"worker=4,worker=2", "TFBOOT_CLUSTER 'worker=4,worker=2': task type 'worker' is given twice"},
        {"gpu=1", "TFBOOT_CLUSTER 'gpu=1': unknown task type 'gpu' (use chief, worker, ps or evaluator)"},
        {"master=1,worker=2", "TFBOOT_CLUSTER 'master=1,worker=2': unknown task type 'master' (use chief, worker, ps or evaluator)"},
        {"Worker=2", "TFBOOT_CLUSTER 'Worker=2': unknown task type 'Worker' (use chief, worker, ps or evaluator)"},
        {" worker=2", "TFBOOT_CLUSTER ' worker=2': unknown task type ' worker' (use chief, worker, ps or evaluator)"},
        {"=2", "TFBOOT_CLUSTER '=2': unknown task type '' (use chief, worker, ps or evaluator)"},
        {"chief=2,worker=1", "TFBOOT_CLUSTER 'chief=2,worker=1': at most one chief"},
        {"evaluator=2,worker=1", "TFBOOT_CLUSTER 'evaluator=2,worker=1': at most one evaluator"},
        {"worker=-1", "TFBOOT_CLUSTER 'worker=-1': count '-1' is not a number from 0 to 100000"},
        {"worker=", "TFBOOT_CLUSTER 'worker=': count '' is not a number from 0 to 100000"},
        {"worker=two", "TFBOOT_CLUSTER 'worker=two': count 'two' is not a number from 0 to 100000"},
        {"worker=02", "TFBOOT_CLUSTER 'worker=02': count '02' is not a number from 0 to 100000"},
        {"worker=100001", "TFBOOT_CLUSTER 'worker=100001': count '100001' is not a number from 0 to 100000"},
        {"worker=99999999999", "TFBOOT_CLUSTER 'worker=99999999999': count '99999999999' is not a number from 0 to 100000"},
        {"worker=0", "TFBOOT_CLUSTER 'worker=0': needs at least one chief, worker or ps task"},
        {"evaluator=1", "TFBOOT_CLUSTER 'evaluator=1': needs at least one chief, worker or ps task"},
        {"chief=0,worker=0,ps=0", "TFBOOT_CLUSTER 'chief=0,worker=0,ps=0': needs at least one chief, worker or ps task"},
    };
    for (const auto& [text, message] : rows) {
      CAPTURE(text);
      auto spec = parse_cluster_spec(Setting{text, "TFBOOT_CLUSTER"});
      CHECK(code_of(spec) == 2);
      CHECK(error_of(spec) == message);
    }
  }
}

TEST_CASE("cluster::parse_port_spec") {
  SUBCASE("a default port and per-type overrides") {
    const std::vector<std::pair<std::string, std::string>> rows{
        {"2222", "chief=2222,worker=2222,ps=2222,evaluator=2222"},
        {"2222,ps=2223", "chief=2222,worker=2222,ps=2223,evaluator=2222"},
        {"ps=2223,2222", "chief=2222,worker=2222,ps=2223,evaluator=2222"},
        {"ps=2223", "chief=2222,worker=2222,ps=2223,evaluator=2222"},
        {"9000,chief=9001,evaluator=9003", "chief=9001,worker=9000,ps=9000,evaluator=9003"},
        {"1", "chief=1,worker=1,ps=1,evaluator=1"},
        {"65535", "chief=65535,worker=65535,ps=65535,evaluator=65535"},
        {"worker=1,chief=2,ps=3,evaluator=4", "chief=2,worker=1,ps=3,evaluator=4"},
    };
    for (const auto& [text, expected] : rows) {
      CAPTURE(text);
      CHECK(ports(port_spec(text)) == expected);
    }
  }
  SUBCASE("usage errors name the setting") {
    const std::vector<std::pair<std::string, std::string>> rows{
        {"0", "--port '0': '0' is not a port in 1..65535"},
        {"65536", "--port '65536': '65536' is not a port in 1..65535"},
        {"http", "--port 'http': 'http' is not a port in 1..65535"},
        {"", "--port '': '' is not a port in 1..65535"},
        {"-1", "--port '-1': '-1' is not a port in 1..65535"},
        {"2222,", "--port '2222,': more than one default port"},
        {",2222", "--port ',2222': '' is not a port in 1..65535"},
        {"2222,2223", "--port '2222,2223': more than one default port"},
        {"ps=0", "--port 'ps=0': '0' is not a port in 1..65535"},
        {"ps=", "--port 'ps=': '' is not a port in 1..65535"},
        {"ps=2223,ps=2224", "--port 'ps=2223,ps=2224': port for 'ps' is given twice"},
        {"gpu=2223", "--port 'gpu=2223': unknown task type 'gpu'"},
        {"master=2223", "--port 'master=2223': unknown task type 'master'"},
    };
    for (const auto& [text, message] : rows) {
      CAPTURE(text);
      auto spec = parse_port_spec(Setting{text, "--port"});
      CHECK(code_of(spec) == 2);
      CHECK(error_of(spec) == message);
    }
  }
}

TEST_CASE("cluster::split_hostname") {
  const std::vector<std::pair<std::string, std::string>> rows{
      {"mnist-worker-3", "prefix='mnist' type=worker ordinal=3"},
      {"my-big-job-ps-12", "prefix='my-big-job' type=ps ordinal=12"},
      {"job-master-0", "prefix='job' type=chief(master) ordinal=0"},
      {"job-chief-0", "prefix='job' type=chief ordinal=0"},
      {"mnist-evaluator-0", "prefix='mnist' type=evaluator ordinal=0"},
      {"worker-0", "prefix='' type=worker ordinal=0"},
      {"trainer-2", "prefix='trainer' type=- ordinal=2"},
      {"a-b-7", "prefix='a-b' type=- ordinal=7"},
      {"mnist-worker-3.mnist.default.svc.cluster.local", "prefix='mnist' type=worker ordinal=3"},
      {"trainer-2.", "prefix='trainer' type=- ordinal=2"},
      {"trainer-999999", "prefix='trainer' type=- ordinal=999999"},
      {"trainer", "<none>"},
      {"trainer-", "<none>"},
      {"-3", "<none>"},
      {"trainer-03", "<none>"},
      {"trainer-x", "<none>"},
      {"trainer-1000000", "<none>"},
      {"3a8f9c2d1e0b", "<none>"},
      {"", "<none>"},
      {"trainer.mnist-2", "<none>"},
  };
  for (const auto& [hostname, expected] : rows) {
    CAPTURE(hostname);
    CHECK(parts_text(split_hostname(hostname)) == expected);
  }
}

TEST_CASE("cluster::derive_peer_template") {
  SUBCASE("type and ordinal are replaced (docs/peers-and-dns.md: Peers examples)") {
    auto worker = derived("mnist-worker-3");
    CHECK(worker.text == "mnist-{type}-{index}");
    CHECK(worker.prefix == "mnist");
    CHECK(worker.source == "hostname 'mnist-worker-3'");
    CHECK_FALSE(worker.chief_spelled_master);

    auto trainer = derived("trainer-2");
    CHECK(trainer.text == "trainer-{ordinal}");
    CHECK(trainer.prefix == "trainer");
    CHECK(trainer.source == "hostname 'trainer-2'");
  }
  SUBCASE("no prefix") {
    auto bare = derived("worker-0");
    CHECK(bare.text == "{type}-{index}");
    CHECK(bare.prefix == "");
  }
  SUBCASE("master spelling is remembered") {
    auto master = derived("job-master-0");
    CHECK(master.text == "job-{type}-{index}");
    CHECK(master.chief_spelled_master);
  }
  SUBCASE("from a compose PTR name (replicas count from 1): ordinals shifted by one") {
    auto parts = split_hostname("proj-worker-2.proj_default");
    REQUIRE(parts);
    auto compose = derive_peer_template(*parts, "proj-worker-2.proj_default", 1);
    CHECK(compose.text == "proj-{type}-{ordinal}");
    CHECK(compose.source == "PTR name 'proj-worker-2.proj_default'");
    CHECK(planned(plan("chief=1,worker=2", compose)) == "chief:0 proj-chief-1:2222\nworker:0 proj-worker-1:2222\nworker:1 proj-worker-2:2222\n");

    auto untyped_parts = split_hostname("proj-trainer-3.net");
    REQUIRE(untyped_parts);
    auto untyped = derive_peer_template(*untyped_parts, "proj-trainer-3.net", 1);
    CHECK(untyped.text == "proj-trainer-{ordinal}");
    CHECK(planned(plan("worker=3", untyped)) == "worker:0 proj-trainer-1:2222\nworker:1 proj-trainer-2:2222\nworker:2 proj-trainer-3:2222\n");
  }
  SUBCASE("a fully qualified hostname keeps only the first label's shape") {
    auto fq = derived("mnist-ps-1.mnist.default.svc.cluster.local");
    CHECK(fq.text == "mnist-{type}-{index}");
    CHECK(fq.source == "hostname 'mnist-ps-1.mnist.default.svc.cluster.local'");
  }
}

TEST_CASE("cluster::make_peer_template") {
  SUBCASE("placeholders are accepted and {prefix} comes from the own hostname") {
    auto made = make_peer_template(Setting{"{prefix}-{type}-{index}", "--peer-template"}, split_hostname("mnist-worker-3"));
    REQUIRE_MESSAGE(made, error_of(made));
    CHECK(made->text == "{prefix}-{type}-{index}");
    CHECK(made->prefix == "mnist");
    CHECK(made->source == "--peer-template '{prefix}-{type}-{index}'");
    CHECK_FALSE(made->chief_spelled_master);
  }
  SUBCASE("a template without {prefix} needs no parseable hostname") {
    for (const std::string text : {"node{ordinal}", "tf-{type}-{index}", "static-host", "{type}.{index}.example.org"}) {
      CAPTURE(text);
      auto made = make_peer_template(Setting{text, "TFBOOT_PEER_TEMPLATE"}, std::nullopt);
      REQUIRE_MESSAGE(made, error_of(made));
      CHECK(made->text == text);
      CHECK(made->prefix == "");
    }
  }
  SUBCASE("{prefix} from a master hostname keeps the master spelling") {
    auto made = make_peer_template(Setting{"{prefix}-{type}-{index}", "--peer-template"}, split_hostname("job-master-0"));
    REQUIRE_MESSAGE(made, error_of(made));
    CHECK(made->chief_spelled_master);
    CHECK(planned(plan("chief=1,worker=1", *made)) == "chief:0 job-master-0:2222\nworker:0 job-worker-0:2222\n");
  }
  SUBCASE("usage errors name the setting") {
    struct Row {
      std::string text;
      std::optional<HostnameParts> hostname;
      std::string message;
    };
    const std::vector<Row> rows{
        {"{host}-{index}", split_hostname("mnist-worker-3"),
         "--peer-template '{host}-{index}': unknown placeholder '{host}' (use {prefix} {type} {index} {ordinal})"},
        {"w-{}", std::nullopt, "--peer-template 'w-{}': unknown placeholder '{}' (use {prefix} {type} {index} {ordinal})"},
        {"w-{Index}", std::nullopt, "--peer-template 'w-{Index}': unknown placeholder '{Index}' (use {prefix} {type} {index} {ordinal})"},
        {"trainer-{index", std::nullopt, "--peer-template 'trainer-{index': unclosed '{'"},
        {"{prefix}-{index}", std::nullopt,
         "--peer-template '{prefix}-{index}' uses {prefix}, but the hostname has no '<prefix>-[<type>-]<ordinal>' form"},
        {"{prefix}-{type}-{index}", split_hostname("worker-0"),
         "--peer-template '{prefix}-{type}-{index}' uses {prefix}, but the hostname has no '<prefix>-[<type>-]<ordinal>' form"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.text);
      auto made = make_peer_template(Setting{row.text, "--peer-template"}, row.hostname);
      CHECK(code_of(made) == 2);
      CHECK(error_of(made) == row.message);
    }
  }
}

TEST_CASE("cluster::ordinal_of") {
  CHECK(ordinal_of(TaskType::worker, 0, false) == 0);
  CHECK(ordinal_of(TaskType::worker, 2, false) == 2);
  CHECK(ordinal_of(TaskType::chief, 0, true) == 0);
  CHECK(ordinal_of(TaskType::worker, 0, true) == 1);
  CHECK(ordinal_of(TaskType::worker, 2, true) == 3);
  CHECK(ordinal_of(TaskType::ps, 1, true) == 1);
  CHECK(ordinal_of(TaskType::evaluator, 0, true) == 0);
}

TEST_CASE("cluster::dns_name_problem") {
  const std::string label63(63, 'a');
  const std::vector<std::pair<std::string, std::optional<std::string>>> rows{
      {"mnist-worker-0", std::nullopt},
      {"mnist-worker-0.mnist.default.svc.cluster.local", std::nullopt},
      {"under_score", std::nullopt},
      {label63, std::nullopt},
      {"", "is empty"},
      {label63 + "a", "has a label longer than 63 characters"},
      {"a..b", "has an empty label"},
      {"a.", "has an empty label"},
      {".a", "has an empty label"},
      {"mnist worker", "has a character that is not a letter, digit, '-' or '_'"},
      {"tr@iner", "has a character that is not a letter, digit, '-' or '_'"},
      {"-trainer", "has a label starting or ending with '-'"},
      {"trainer-.svc", "has a label starting or ending with '-'"},
      {label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b'), std::nullopt},
      {label63 + "." + label63 + "." + label63 + "." + std::string(62, 'b'), "is longer than 253 characters"},
  };
  for (const auto& [name, expected] : rows) {
    CAPTURE(name);
    CHECK(dns_name_problem(name).value_or("fine") == expected.value_or("fine"));
  }
}

TEST_CASE("cluster::plan_peers") {
  const DnsSuffix mnist_service{"mnist", "default", "cluster.local"};

  SUBCASE("mnist-worker-3: every task by type and index, chief, worker, ps, evaluator order") {
    CHECK(planned(plan("evaluator=1,ps=2,worker=3,chief=1", derived("mnist-worker-3"))) ==
          "chief:0 mnist-chief-0:2222\n"
          "worker:0 mnist-worker-0:2222\n"
          "worker:1 mnist-worker-1:2222\n"
          "worker:2 mnist-worker-2:2222\n"
          "ps:0 mnist-ps-0:2222\n"
          "ps:1 mnist-ps-1:2222\n"
          "evaluator:0 mnist-evaluator-0:2222\n");
  }
  SUBCASE("trainer-2: workers by ordinal") {
    CHECK(planned(plan("worker=3", derived("trainer-2"))) ==
          "worker:0 trainer-0:2222\n"
          "worker:1 trainer-1:2222\n"
          "worker:2 trainer-2:2222\n");
  }
  SUBCASE("worker-0: no prefix") {
    CHECK(planned(plan("chief=1,worker=1", derived("worker-0"))) == "chief:0 chief-0:2222\nworker:0 worker-0:2222\n");
  }
  SUBCASE("with a Service the names are fully qualified and looked up with a trailing dot") {
    auto peers = plan("chief=1,worker=2", derived("mnist-worker-1"), mnist_service);
    CHECK(planned(peers) ==
          "chief:0 mnist-chief-0.mnist.default.svc.cluster.local:2222 fq\n"
          "worker:0 mnist-worker-0.mnist.default.svc.cluster.local:2222 fq\n"
          "worker:1 mnist-worker-1.mnist.default.svc.cluster.local:2222 fq\n");
    REQUIRE(peers);
    CHECK((*peers)[1].lookup_name() == "mnist-worker-0.mnist.default.svc.cluster.local.");
  }
  SUBCASE("without a Service the names are bare and looked up as given") {
    auto peers = plan("worker=1", derived("trainer-0"));
    REQUIRE(peers);
    CHECK_FALSE((*peers)[0].fully_qualified);
    CHECK((*peers)[0].lookup_name() == "trainer-0");
  }
  SUBCASE("per-type ports") {
    CHECK(planned(plan("chief=1,worker=1,ps=2,evaluator=1", derived("mnist-ps-0"), std::nullopt, false,
                       "2222,ps=2223,evaluator=2224")) ==
          "chief:0 mnist-chief-0:2222\n"
          "worker:0 mnist-worker-0:2222\n"
          "ps:0 mnist-ps-0:2223\n"
          "ps:1 mnist-ps-1:2223\n"
          "evaluator:0 mnist-evaluator-0:2224\n");
  }
  SUBCASE("a chief hostname spelled master: the chief's peers name it master") {
    CHECK(planned(plan("chief=1,worker=2", derived("job-master-0"))) ==
          "chief:0 job-master-0:2222\n"
          "worker:0 job-worker-0:2222\n"
          "worker:1 job-worker-1:2222\n");
  }
  SUBCASE("--chief-at-ordinal-0: chief is ordinal 0, worker k is ordinal k+1") {
    CHECK(planned(plan("chief=1,worker=3", derived("trainer-2"), std::nullopt, true)) ==
          "chief:0 trainer-0:2222\n"
          "worker:0 trainer-1:2222\n"
          "worker:1 trainer-2:2222\n"
          "worker:2 trainer-3:2222\n");
  }
  SUBCASE("{index} is not shifted by --chief-at-ordinal-0, {ordinal} is") {
    auto made = make_peer_template(Setting{"t-{type}-{index}-o{ordinal}", "--peer-template"}, std::nullopt);
    REQUIRE(made);
    CHECK(planned(plan("chief=1,worker=2", *made, std::nullopt, true)) ==
          "chief:0 t-chief-0-o0:2222\n"
          "worker:0 t-worker-0-o1:2222\n"
          "worker:1 t-worker-1-o2:2222\n");
  }
  SUBCASE("a JobSet's template spells out <jobset>-<replicatedJob>-<jobIndex>-<podIndex>") {
    auto made = make_peer_template(Setting{"bert-{type}-0-{index}", "TFBOOT_PEER_TEMPLATE"}, split_hostname("bert-chief-0-0"));
    REQUIRE(made);
    CHECK(planned(plan("chief=1,worker=2", *made, DnsSuffix{"bert", "default", "cluster.local"})) ==
          "chief:0 bert-chief-0-0.bert.default.svc.cluster.local:2222 fq\n"
          "worker:0 bert-worker-0-0.bert.default.svc.cluster.local:2222 fq\n"
          "worker:1 bert-worker-0-1.bert.default.svc.cluster.local:2222 fq\n");
  }
  SUBCASE("an explicit template with {prefix} and a Service") {
    auto made = make_peer_template(Setting{"{prefix}-{type}-{index}", "--peer-template"}, split_hostname("mnist-ps-0"));
    REQUIRE(made);
    CHECK(planned(plan("ps=1,worker=1", *made, DnsSuffix{"tf", "team-a", "corp.example"})) ==
          "worker:0 mnist-worker-0.tf.team-a.svc.corp.example:2222 fq\n"
          "ps:0 mnist-ps-0.tf.team-a.svc.corp.example:2222 fq\n");
  }
  SUBCASE("two tasks with the same name are rejected") {
    auto chief_and_worker = plan("chief=1,worker=2", derived("trainer-2"));
    CHECK(code_of(chief_and_worker) == 2);
    CHECK(error_of(chief_and_worker) ==
          "peer template hostname 'trainer-2' gives chief:0 and worker:0 the same name 'trainer-0' (add {type} or use "
          "--chief-at-ordinal-0)");

    auto ps_and_chief = plan("chief=1,worker=1,ps=1", derived("trainer-1"), std::nullopt, true);
    CHECK(code_of(ps_and_chief) == 2);
    CHECK(error_of(ps_and_chief) ==
          "peer template hostname 'trainer-1' gives chief:0 and ps:0 the same name 'trainer-0' (add {type} or use "
          "--chief-at-ordinal-0)");

    auto fixed = make_peer_template(Setting{"static-host", "TFBOOT_PEER_TEMPLATE"}, std::nullopt);
    REQUIRE(fixed);
    auto same = plan("worker=2", *fixed);
    CHECK(code_of(same) == 2);
    CHECK(error_of(same) ==
          "peer template TFBOOT_PEER_TEMPLATE 'static-host' gives worker:0 and worker:1 the same name 'static-host' (add "
          "{type} or use --chief-at-ordinal-0)");
  }
  SUBCASE("a single task needs no distinguishing placeholder") {
    auto fixed = make_peer_template(Setting{"static-host", "--peer-template"}, std::nullopt);
    REQUIRE(fixed);
    CHECK(planned(plan("worker=1", *fixed)) == "worker:0 static-host:2222\n");
  }
  SUBCASE("names of 253 characters pass, 254 do not") {
    const std::string label63(63, 'a');
    const std::string text = label63 + "." + label63 + "." + label63 + "." + std::string(59, 'd') + "-{index}";
    auto made = make_peer_template(Setting{text, "--peer-template"}, std::nullopt);
    REQUIRE(made);
    auto ten = plan("worker=10", *made);
    REQUIRE_MESSAGE(ten, error_of(ten));
    CHECK(ten->back().name.size() == 253);

    auto eleven = plan("worker=11", *made);
    CHECK(code_of(eleven) == 2);
    const std::string long_name = label63 + "." + label63 + "." + label63 + "." + std::string(59, 'd') + "-10";
    CHECK(error_of(eleven) == "peer name '" + long_name + "' for worker:10 from peer template --peer-template '" + text +
                                  "' is longer than 253 characters");
  }
  SUBCASE("a Service suffix that makes a name too long is rejected") {
    const std::string label63(63, 'a');
    const std::string host = label63 + "." + label63 + "." + label63 + "." + std::string(50, 'c');  // 244 with "-0"
    auto made = make_peer_template(Setting{host + "-{index}", "--peer-template"}, std::nullopt);
    REQUIRE(made);
    CHECK(planned(plan("worker=1", *made)) == "worker:0 " + host + "-0:2222\n");
    auto peers = plan("worker=1", *made, mnist_service);
    CHECK(code_of(peers) == 2);
    CHECK(error_of(peers) == "peer name '" + host + "-0.mnist.default.svc.cluster.local' for worker:0 from peer template " +
                                 "--peer-template '" + host + "-{index}' is longer than 253 characters");
  }
  SUBCASE("labels over 63 characters are rejected") {
    const std::string prefix(62, 'p');
    auto hostname = prefix + "-0";  // 64 characters: the worker's label is too long for DNS
    auto peers = plan("worker=1", derived(hostname));
    CHECK(code_of(peers) == 2);
    CHECK(error_of(peers) == "peer name '" + prefix + "-0' for worker:0 from peer template hostname '" + hostname +
                                 "' has a label longer than 63 characters");

    auto sixty_three = plan("worker=1", derived(std::string(61, 'p') + "-0"));
    CHECK(planned(sixty_three) == "worker:0 " + std::string(61, 'p') + "-0:2222\n");
  }
  SUBCASE("a template with a character DNS does not allow is rejected") {
    auto made = make_peer_template(Setting{"tr@iner-{index}", "--peer-template"}, std::nullopt);
    REQUIRE(made);
    auto peers = plan("worker=1", *made);
    CHECK(code_of(peers) == 2);
    CHECK(error_of(peers) ==
          "peer name 'tr@iner-0' for worker:0 from peer template --peer-template 'tr@iner-{index}' has a character that is not a "
          "letter, digit, '-' or '_'");
  }
}

}  // namespace tfboot
