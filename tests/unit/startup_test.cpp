// startup.json: identity, source, peers with their resolution, version, how the task ended, and the
// history of restarts.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "task/startup.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string tf_config_text =
    R"({"cluster":{"chief":["mnist-chief-0.mnist.default.svc.cluster.local:2222"],)"
    R"("worker":["mnist-worker-0.mnist.default.svc.cluster.local:2222"]},"task":{"type":"worker","index":0}})";

StartupReport sample_report(double started_at = 1700000000.5) {
  StartupReport report;
  report.version = "0.1.0";
  report.identity = Identity{TaskType::worker, 0, "hostname 'mnist-worker-0' (from POD_NAME)"};
  report.hostname = "mnist-worker-0";
  report.peers = {
      PeerAddress{TaskType::chief, 0, "mnist-chief-0.mnist.default.svc.cluster.local", 2222, true},
      PeerAddress{TaskType::worker, 0, "mnist-worker-0.mnist.default.svc.cluster.local", 2222, true},
  };
  NameStatus chief;
  chief.name = "mnist-chief-0.mnist.default.svc.cluster.local.";
  chief.resolved = true;
  chief.tries = 3;
  chief.addresses = {"10.244.1.5", "fd00::5"};
  chief.last_status = LookupStatus::resolved;
  chief.time_to_resolve = 1250ms;
  NameStatus worker;
  worker.name = "mnist-worker-0.mnist.default.svc.cluster.local.";
  worker.resolved = true;
  worker.tries = 1;
  worker.addresses = {"10.244.1.7"};
  worker.last_status = LookupStatus::resolved;
  worker.time_to_resolve = 4ms;
  report.resolution = {chief, worker};
  report.dns_servers = {"10.96.0.10:53"};
  report.warnings = {"own name resolves elsewhere"};
  report.tf_config = tf_config_text;
  report.command = {"python", "train.py", "--epochs", "3"};
  report.started_at = started_at;
  report.dns_wait_seconds = 1.25;
  report.written_at = started_at + 2;
  return report;
}

json parse(const std::string& text) {
  auto parsed = json::parse(text, nullptr, false);
  REQUIRE_MESSAGE(!parsed.is_discarded(), text);
  return parsed;
}

}  // namespace

TEST_CASE("startup::build_startup_json") {
  SUBCASE("identity, its source, version and the run's facts") {
    const std::string text = build_startup_json(sample_report(), {});
    CHECK(text.starts_with("{\n  \"tfboot_version\": \"0.1.0\",\n"));
    CHECK(text.ends_with("}\n"));
    auto root = parse(text);
    CHECK(root["tfboot_version"] == "0.1.0");
    CHECK(root["task"] == json{{"type", "worker"}, {"index", 0}});
    CHECK(root["identity_source"] == "hostname 'mnist-worker-0' (from POD_NAME)");
    CHECK(root["hostname"] == "mnist-worker-0");
    CHECK(root["started_at"] == 1700000000.5);
    CHECK(root["written_at"] == 1700000002.5);
    CHECK_FALSE(root.contains("end"));  // until the task has ended
    CHECK(root["dns_wait_seconds"] == 1.25);
    CHECK(root["dns_servers"] == json{"10.96.0.10:53"});
    CHECK(root["warnings"] == json{"own name resolves elsewhere"});
  }
  SUBCASE("each peer with its addresses, tries and time to resolve") {
    auto root = parse(build_startup_json(sample_report(), {}));
    REQUIRE(root["peers"].size() == 2);
    CHECK(root["peers"][0].dump() ==
          R"({"addresses":["10.244.1.5","fd00::5"],"name":"mnist-chief-0.mnist.default.svc.cluster.local","port":2222,)"
          R"("resolved":true,"seconds_to_resolve":1.25,"task":"chief:0","tries":3})");
    CHECK(root["peers"][1].dump() ==
          R"({"addresses":["10.244.1.7"],"name":"mnist-worker-0.mnist.default.svc.cluster.local","port":2222,)"
          R"("resolved":true,"seconds_to_resolve":0.004,"task":"worker:0","tries":1})");
  }
  SUBCASE("a peer that never resolved carries its last error") {
    auto report = sample_report();
    report.resolution[1].resolved = false;
    report.resolution[1].addresses.clear();
    report.resolution[1].tries = 12;
    report.resolution[1].last_status = LookupStatus::not_published;
    report.resolution[1].last_error = "NXDOMAIN";
    auto root = parse(build_startup_json(report, {}));
    CHECK(root["peers"][1].dump() ==
          R"({"addresses":[],"last_error":"not published yet: NXDOMAIN","name":"mnist-worker-0.mnist.default.svc.cluster.local",)"
          R"("port":2222,"resolved":false,"seconds_to_resolve":-1.0,"task":"worker:0","tries":12})");
  }
  SUBCASE("without a DNS wait (--wait 0) peers have no resolution fields") {
    auto report = sample_report();
    report.resolution.clear();
    report.dns_servers.clear();
    auto root = parse(build_startup_json(report, {}));
    CHECK(root["peers"][0].dump() ==
          R"({"name":"mnist-chief-0.mnist.default.svc.cluster.local","port":2222,"task":"chief:0"})");
    CHECK(root["dns_servers"] == json::array());
  }
  SUBCASE("TF_CONFIG and the command are embedded as JSON, not as strings") {
    auto root = parse(build_startup_json(sample_report(), {}));
    CHECK(root["tf_config"] == json::parse(tf_config_text));
    CHECK(root["command"] == json{"python", "train.py", "--epochs", "3"});
  }
  SUBCASE("a first start: no restarts, empty history") {
    auto root = parse(build_startup_json(sample_report(), {}));
    CHECK(root["restarts"] == 0);
    CHECK(root["history"] == json::array());
  }
  SUBCASE("a previous startup.json raises restarts and keeps history, oldest first") {
    const std::string first = build_startup_json(sample_report(100), {});
    const std::string second = build_startup_json(sample_report(200), read_previous_starts(first));
    auto root = parse(second);
    CHECK(root["restarts"] == 1);
    CHECK(root["history"].dump() ==
          R"json([{"identity_source":"hostname 'mnist-worker-0' (from POD_NAME)","started_at":100.0,)json"
          R"json("started_at_iso":"1970-01-01T00:01:40.000Z"}])json");
    CHECK(root["started_at"] == 200.0);

    auto third_report = sample_report(300);
    third_report.identity.source = "JOB_COMPLETION_INDEX";
    auto third = parse(build_startup_json(third_report, read_previous_starts(second)));
    CHECK(third["restarts"] == 2);
    REQUIRE(third["history"].size() == 2);
    CHECK(third["history"][0]["started_at"] == 100.0);
    CHECK(third["history"][1]["started_at"] == 200.0);
    CHECK(third["identity_source"] == "JOB_COMPLETION_INDEX");
  }
  SUBCASE("history keeps the last 20 starts") {
    std::string previous;
    for (int run = 0; run < 25; ++run) previous = build_startup_json(sample_report(run), run == 0 ? PreviousStarts{} : read_previous_starts(previous));
    auto root = parse(previous);
    CHECK(root["restarts"] == 24);
    REQUIRE(root["history"].size() == 20);
    CHECK(root["history"].front()["started_at"] == 4.0);
    CHECK(root["history"].back()["started_at"] == 23.0);
  }
  SUBCASE("an unreadable previous file starts afresh") {
    for (const std::string previous : {"", "{not json", "[1,2]", "\"text\""}) {
      CAPTURE(previous);
      auto root = parse(build_startup_json(sample_report(), read_previous_starts(previous)));
      CHECK(root["restarts"] == 0);
      CHECK(root["history"] == json::array());
    }
  }
  SUBCASE("command arguments and hostnames that are not UTF-8 are replaced, never an abort") {
    auto report = sample_report();
    report.command = {"echo", "caf\xe9"};
    report.hostname = "host\xff";
    auto root = parse(build_startup_json(report, {}));
    CHECK(root["command"] == json{"echo", "caf\xef\xbf\xbd"});
    CHECK(root["hostname"] == "host\xef\xbf\xbd");
  }
}

TEST_CASE("startup::build_startup_json times, the end, tfboot local") {
  SUBCASE("each epoch time has an ISO 8601 UTC twin beside it") {
    const std::string text = build_startup_json(sample_report(), {});
    CHECK(text.find("\"started_at\": 1700000000.5,\n  \"started_at_iso\": \"2023-11-14T22:13:20.500Z\",") != std::string::npos);
    CHECK(text.find("\"written_at\": 1700000002.5,\n  \"written_at_iso\": \"2023-11-14T22:13:22.500Z\",") != std::string::npos);
  }
  SUBCASE("the end: when, the status tfboot exits with, why, and the task whose failure stopped it") {
    auto report = sample_report();
    report.end = TaskEnd{.ended_at = 1700000060.25, .exit_status = 200, .reason = "job_failed",
                         .message = "stopping: worker:1 failed with status 3", .failed_task = "worker:1"};
    auto root = parse(build_startup_json(report, {}));
    CHECK(root["end"].dump() ==
          R"({"ended_at":1700000060.25,"ended_at_iso":"2023-11-14T22:14:20.250Z","exit_status":200,)"
          R"("failed_task":"worker:1","message":"stopping: worker:1 failed with status 3","reason":"job_failed"})");
    report.end = TaskEnd{.ended_at = 1700000060.25, .exit_status = 0, .reason = "command_succeeded"};
    CHECK_FALSE(parse(build_startup_json(report, {}))["end"].contains("failed_task"));
  }
  SUBCASE("the next start keeps how the earlier one ended in its history") {
    auto first = sample_report(100);
    first.end = TaskEnd{.ended_at = 160, .exit_status = 137, .reason = "command_failed", .message = "the command failed"};
    auto root = parse(build_startup_json(sample_report(200), read_previous_starts(build_startup_json(first, {}))));
    REQUIRE(root["history"].size() == 1);
    CHECK(root["history"][0]["exit_status"] == 137);
    CHECK(root["history"][0]["reason"] == "command_failed");
    CHECK(root["history"][0]["ended_at_iso"] == "1970-01-01T00:02:40.000Z");
    CHECK_FALSE(root.contains("end"));
    // And the one after that still reads it.
    auto third = parse(build_startup_json(sample_report(300), read_previous_starts(root.dump())));
    CHECK(third["history"][0]["exit_status"] == 137);
    CHECK_FALSE(third["history"][1].contains("exit_status"));  // a start that recorded no end (exec mode)
  }
  SUBCASE("tfboot local has no DNS: no hostname, DNS servers, DNS wait or peers") {
    auto report = sample_report();
    report.local = true;
    auto root = parse(build_startup_json(report, {}));
    for (const char* absent : {"hostname", "dns_servers", "dns_wait_seconds", "peers"}) {
      CAPTURE(absent);
      CHECK_FALSE(root.contains(absent));
    }
    CHECK(root["tf_config"] == json::parse(tf_config_text));
    CHECK(root.contains("restarts"));
  }
  SUBCASE("the commit when known") {
    auto report = sample_report();
    CHECK_FALSE(parse(build_startup_json(report, {})).contains("tfboot_commit"));
    report.commit = "3f2a9c1-dirty";
    CHECK(parse(build_startup_json(report, {}))["tfboot_commit"] == "3f2a9c1-dirty");
  }
}

TEST_CASE("startup::build_startup_json at any job size is read back whole") {
  // A job of 100,000 tasks with --address ip: every peer resolved, names of 253 bytes and four
  // addresses each, plus the warnings, the command and the environment differences at their worst.
  StartupReport report = sample_report();
  report.peers.clear();
  report.resolution.clear();
  for (int i = 0; i < 100'000; ++i) {
    const std::string name = std::string(240, 'n') + "-" + std::to_string(i);
    report.peers.push_back(PeerAddress{TaskType::worker, i, name, 2222, true});
    NameStatus status;
    status.name = name;
    status.resolved = i % 1000 != 999;  // one in a thousand never resolved
    status.tries = 3;
    if (status.resolved) status.addresses = {"10.1.2.3", "10.1.2.4", "fd00::1:2:3:4", "fd00::1:2:3:5"};
    status.last_error = status.resolved ? "" : "NXDOMAIN";
    status.time_to_resolve = 1250ms;
    report.resolution.push_back(status);
  }
  report.warnings.assign(64, std::string(65536, 'w'));
  report.command.assign(10'000, std::string(200, 'c'));
  std::string differences;
  for (int i = 0; i < 64; ++i) differences += std::string(i ? "," : "") + "\"" + std::string(65536, 'd') + "\"";
  report.job_json = R"({"job_id":"0123456789abcdef","environment_differences":[)" + differences + "]}";
  report.tf_config = R"({"cluster":{"worker":[")" + std::string(2'000'000, 'a') + R"("]}})";
  report.identity.source = std::string(100'000, '\xff');  // not UTF-8: each byte written as three
  PreviousStarts previous;
  for (std::size_t i = 0; i < max_history; ++i) {
    previous.history.push_back({1.0, std::string(4096, 's'), TaskEnd{2.0, 1, "command_failed", std::string(4096, 'm'), "worker:1"}});
  }

  const std::string text = build_startup_json(report, previous);
  CHECK(text.size() < max_previous_startup_json);
  auto read_back = read_previous_starts(text);
  CHECK_FALSE(read_back.damage);
  CHECK(read_back.history.size() == max_history);
  auto root = parse(text);
  const std::size_t listed = root["peers"].size();
  CHECK(listed > 500);
  CHECK(root["peers"][0]["task"] == "worker:0");
  CHECK(root["peers_not_listed"]["count"] == 100'000 - listed);
  CHECK(root["peers_not_listed"]["first"] == "worker:" + std::to_string(listed));
  CHECK(root["peers_not_listed"]["unresolved"] == 100 - (listed + 1) / 1000);
  CHECK(root["peers_not_listed"]["first_unresolved"].size() == 20);
  CHECK(root["warnings"].size() + root["warnings_not_listed"].get<std::size_t>() == 64);
  CHECK(root["warnings"][0].get<std::string>().size() == 4096);
  CHECK(root["command"].size() + root["command_not_listed"].get<std::size_t>() == 10'000);
  CHECK(root["job"]["environment_differences_not_listed"].get<std::size_t>() > 0);
  CHECK(root["job"]["job_id"] == "0123456789abcdef");
  CHECK(root["tf_config"].is_null());
  CHECK(root["tf_config_not_listed"] == "2000027 bytes: tf_config.json holds it");
}

TEST_CASE("startup::render_startup_json writes what one dump of the whole file would") {
  // Rendered member by member, and the end added to the same parts: the bytes are those of the
  // object dumped at once, with or without an end, with no peers, a few, or more than fit.
  auto same_as_one_dump = [](const std::string& text) {
    CHECK(text == nlohmann::ordered_json::parse(text).dump(2) + "\n");
  };
  auto report = sample_report();
  const TaskEnd end{.ended_at = 1700000060.25, .exit_status = 200, .reason = "job_failed", .message = "stopping", .failed_task = "worker:1"};
  PreviousStarts previous;
  previous.restarts = 1;
  previous.history.push_back({1.0, "hostname", end});
  SUBCASE("a small job, ended and not") {
    const StartupText parts = render_startup_json(report, previous);
    same_as_one_dump(startup_json_with_end(parts, std::nullopt));
    same_as_one_dump(startup_json_with_end(parts, end));
    report.end = end;
    CHECK(build_startup_json(report, previous) == startup_json_with_end(parts, end));
    CHECK(json::parse(build_startup_json(report, previous))["end"]["failed_task"] == "worker:1");
  }
  SUBCASE("no peers, tfboot local, no history") {
    report.peers.clear();
    report.resolution.clear();
    same_as_one_dump(build_startup_json(report, {}));
    report.local = true;
    same_as_one_dump(startup_json_with_end(render_startup_json(report, {}), end));
  }
  SUBCASE("more peers than the file lists") {
    report.peers.clear();
    report.resolution.clear();
    for (int i = 0; i < 20'000; ++i) report.peers.push_back(PeerAddress{TaskType::worker, i, "scale-" + std::to_string(i), 2222, true});
    const std::string text = startup_json_with_end(render_startup_json(report, previous), end);
    same_as_one_dump(text);
    CHECK(json::parse(text)["peers_not_listed"]["count"].get<int>() > 0);
  }
}

TEST_CASE("startup::build_startup_json lists a small job whole") {
  auto root = parse(build_startup_json(sample_report(), {}));
  CHECK(root["peers"].size() == 2);
  CHECK_FALSE(root.contains("peers_not_listed"));
  CHECK_FALSE(root.contains("warnings_not_listed"));
  CHECK_FALSE(root.contains("command_not_listed"));
  CHECK_FALSE(root.contains("tf_config_not_listed"));
}

TEST_CASE("startup::iso8601_utc") {
  CHECK(iso8601_utc(0) == "1970-01-01T00:00:00.000Z");
  CHECK(iso8601_utc(1700000000.5) == "2023-11-14T22:13:20.500Z");
  CHECK(iso8601_utc(951782400.999) == "2000-02-29T00:00:00.999Z");  // a leap day, to the nearest millisecond
  CHECK(iso8601_utc(59.9996) == "1970-01-01T00:01:00.000Z");
  CHECK(iso8601_utc(1e300) == "");  // an earlier file's number beyond year 9999
  CHECK(iso8601_utc(-0.5) == "1969-12-31T23:59:59.500Z");
}

TEST_CASE("startup::read_previous_starts") {
  SUBCASE("no earlier file: no restarts, no damage") {
    auto previous = read_previous_starts(std::nullopt);
    CHECK(previous.restarts == 0);
    CHECK(previous.history.empty());
    CHECK_FALSE(previous.damage);
  }
  SUBCASE("an earlier file without a counter still counts as one start") {
    auto previous = read_previous_starts(R"({"started_at": 5.5, "identity_source": "hostname"})");
    CHECK(previous.restarts == 1);
    REQUIRE(previous.history.size() == 1);
    CHECK(previous.history[0].started_at == 5.5);
    CHECK(previous.history[0].identity_source == "hostname");
    CHECK_FALSE(previous.damage);
  }
  struct Row {
    const char* behaviour;
    std::string text;
    std::string damage;
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Row rows[] = {
      {"not JSON", "{not json", "not a JSON object"},
      {"empty", "", "not a JSON object"},
      {"a list", "[1,2]", "not a JSON object"},
      {"started_at of the wrong type", R"({"started_at":"yesterday","identity_source":"x"})",
       "\"started_at\" or \"identity_source\" missing or of the wrong type"},
      {"restarts at INT_MAX", R"({"restarts":2147483647,"started_at":1,"identity_source":"x"})", "\"restarts\" is not a count"},
      {"negative restarts", R"({"restarts":-3,"started_at":1,"identity_source":"x"})", "\"restarts\" is not a count"},
      {"restarts as text", R"({"restarts":"7","started_at":1,"identity_source":"x"})", "\"restarts\" is not a count"},
      {"history not a list", R"({"history":{},"started_at":1,"identity_source":"x"})", "\"history\" is not a list"},
      {"a history entry of the wrong shape", R"({"history":[{"started_at":"x"}],"started_at":1,"identity_source":"x"})",
       "an entry of \"history\" is not a start"},
      {"deeply nested history", R"({"started_at":1,"identity_source":"x","history":)" + deep + "}", "nested deeper than 16 levels"},
      {"an end that is not one", R"({"started_at":1,"identity_source":"x","end":{"ended_at":2,"exit_status":"3","reason":"x"}})",
       "\"end\" is not how a task ended"},
      {"an end status out of range", R"({"started_at":1,"identity_source":"x","end":{"ended_at":2,"exit_status":256,"reason":"x"}})",
       "\"end\" is not how a task ended"},
      {"a history entry with half an end", R"({"history":[{"started_at":1,"identity_source":"x","ended_at":2}],"started_at":1,"identity_source":"x"})",
       "an entry of \"history\" has an unreadable end"},
      {"over 1 MiB", std::string(max_previous_startup_json + 1, ' '), "larger than 1 MiB"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    auto previous = read_previous_starts(row.text);
    REQUIRE(previous.damage);
    CHECK(*previous.damage == row.damage);
    CHECK(previous.restarts == 0);
    CHECK(previous.history.empty());
  }
  SUBCASE("a long history keeps its last 20 entries plus the earlier start, bounded") {
    std::string history;
    for (int i = 0; i < 30; ++i) history += std::string(i ? "," : "") + R"({"started_at":)" + std::to_string(i) + R"(,"identity_source":"h"})";
    auto previous = read_previous_starts(R"({"restarts":30,"started_at":99,"identity_source":"h","history":[)" + history + "]}");
    CHECK(previous.restarts == 31);
    REQUIRE(previous.history.size() == max_history);
    CHECK(previous.history.back().started_at == 99);
    CHECK(previous.history.front().started_at == 11);
  }
}

}  // namespace tfboot
