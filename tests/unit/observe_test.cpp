// What a start shows from outside (docs/observing.md): the exposition text, /status,
// readiness, the HTTP request parser and the termination message.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/unique_fd.h"
#include "observe/http_server.h"
#include "observe/phase_clock.h"
#include "observe/prometheus.h"
#include "observe/status.h"
#include "observe/termination_log.h"
#include "test_support.h"

namespace tfboot {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

observe::StartRecord a_coordinator() {
  observe::StartRecord record;
  record.version = "0.1.0";
  record.commit = "3f2a9c1";
  record.task = "worker:0";
  record.job_id = "a1b2";
  record.framework = "tensorflow";
  record.started_at = 1700000000.5;
  record.phase_seconds[static_cast<std::size_t>(observe::Phase::plan)] = 0.25;
  record.phase_seconds[static_cast<std::size_t>(observe::Phase::barrier)] = 1.5;
  record.seconds_to_command = 2;
  record.dns_lookups["nxdomain"] = 3;
  record.dns_lookups["resolved"] = 2;
  record.dns_retries = 3;
  record.coordinator = true;
  record.tasks_expected = 2;
  record.tasks_present = 1;
  record.tasks = {{"worker:0", true, "pod-0", ""}, {"worker:1", false, "", "never said hello"}};
  record.restarts = 1;
  record.command_running = true;
  record.command_started = true;
  record.stop_events[static_cast<std::size_t>(observe::StopEvent::peer_failed)] = 1;
  return record;
}

TEST_CASE("observe::render_metrics") {
  SUBCASE("every family of a coordinator's start, in the exposition format") {
    const std::string text = observe::render_metrics(a_coordinator());
    for (const char* line : {
             "# TYPE tfboot_build_info gauge",
             "tfboot_build_info{version=\"0.1.0\",commit=\"3f2a9c1\",task=\"worker:0\",job_id=\"a1b2\",framework=\"tensorflow\"} 1",
             "tfboot_start_time_seconds 1700000000.5",
             "tfboot_start_phase_seconds{phase=\"plan\"} 0.25",
             "tfboot_start_phase_seconds{phase=\"barrier\"} 1.5",
             "tfboot_start_to_command_seconds 2",
             "# TYPE tfboot_dns_lookups_total counter",
             "tfboot_dns_lookups_total{outcome=\"resolved\"} 2",
             "tfboot_dns_lookups_total{outcome=\"nxdomain\"} 3",
             "tfboot_dns_lookups_total{outcome=\"timeout\"} 0",
             "tfboot_dns_retries_total 3",
             "tfboot_barrier_tasks_expected 2",
             "tfboot_barrier_tasks_present 1",
             "tfboot_restarts 1",
             "tfboot_command_running 1",
             "tfboot_job_stop_events_total{event=\"peer_failed\"} 1",
             "tfboot_job_stop_events_total{event=\"coordinator_lost\"} 0",
         }) {
      CHECK_MESSAGE(text.find(std::string(line) + "\n") != std::string::npos, line);
    }
    CHECK(text.find("phase=\"dns_wait\"") == std::string::npos);  // not ended: no sample
    CHECK(text.find("\ntfboot_command_exit_status ") == std::string::npos);
  }
  SUBCASE("a task that is not the coordinator has no barrier counts") {
    observe::StartRecord record = a_coordinator();
    record.coordinator = false;
    CHECK(observe::render_metrics(record).find("tfboot_barrier_tasks") == std::string::npos);
  }
  SUBCASE("label values are escaped") {
    observe::StartRecord record;
    record.task = "a\"b\\c\nd";
    CHECK(observe::render_metrics(record).find("task=\"a\\\"b\\\\c\\nd\"") != std::string::npos);
  }
  SUBCASE("the exit status once supervision ended") {
    observe::StartRecord record;
    record.exit_status = 200;
    CHECK(observe::render_metrics(record).find("\ntfboot_command_exit_status 200\n") != std::string::npos);
  }
}

TEST_CASE("observe::render_status and is_ready") {
  CHECK(observe::render_status(a_coordinator()) ==
        "{\"job_id\":\"a1b2\",\"started\":false,\"tasks_expected\":2,\"tasks_present\":1,\"tasks\":["
        "{\"task\":\"worker:0\",\"present\":true,\"host\":\"pod-0\",\"last_error\":\"\"},"
        "{\"task\":\"worker:1\",\"present\":false,\"host\":\"\",\"last_error\":\"never said hello\"}]}\n");
  SUBCASE("a large job: the first missing tasks, and a count of the others") {
    observe::StartRecord record = a_coordinator();
    record.tasks.clear();
    for (int i = 0; i < 100000; ++i) {
      const bool present = i % 1000 != 7;
      record.tasks.push_back({"worker:" + std::to_string(i), present, present ? "pod" : "", present ? "" : "never said hello"});
    }
    const std::string status = observe::render_status(record);
    CHECK(status.find("\"task\":\"worker:7\",\"present\":false") != std::string::npos);
    CHECK(status.find("\"present\":true") == std::string::npos);
    CHECK(status.find("\"tasks_not_listed\":99900") != std::string::npos);
    CHECK(status.size() < 100 * 100);
  }
  CHECK(observe::is_ready(a_coordinator()));
  CHECK_FALSE(observe::is_ready(observe::StartRecord{}));
}

TEST_CASE("observe::count_lookups") {
  observe::update([](observe::StartRecord& record) { record = {}; });
  observe::count_failed_lookup(LookupReason::nxdomain);
  observe::count_failed_lookup(LookupReason::nxdomain);
  observe::count_failed_lookup(LookupReason::servfail);
  observe::count_lookups({NameStatus{.name = "a", .resolved = true, .tries = 4}, NameStatus{.name = "b", .resolved = true, .tries = 1}});
  const auto record = observe::snapshot();
  CHECK(record.dns_lookups.at("nxdomain") == 2);
  CHECK(record.dns_lookups.at("servfail") == 1);
  CHECK(record.dns_lookups.at("resolved") == 2);
  CHECK(record.dns_retries == 3);
}

TEST_CASE("observe::PhaseClock") {
  observe::update([](observe::StartRecord& record) { record = {}; });
  observe::PhaseClock phases(SteadyClock::now());
  for (auto phase : {observe::Phase::plan, observe::Phase::dns_wait, observe::Phase::barrier, observe::Phase::files}) phases.ended(phase);
  phases.command_starts();
  auto record = observe::snapshot();
  double sum = 0;
  for (auto phase : {observe::Phase::plan, observe::Phase::dns_wait, observe::Phase::barrier, observe::Phase::files}) {
    REQUIRE(record.phase_seconds[static_cast<std::size_t>(phase)]);
    sum += *record.phase_seconds[static_cast<std::size_t>(phase)];
  }
  REQUIRE(record.seconds_to_command);
  CHECK(sum <= *record.seconds_to_command);
  CHECK(observe::is_ready(record));
  SUBCASE("a restart in place measures the barrier, the files and the time to the command anew") {
    phases.restarted();
    record = observe::snapshot();
    CHECK_FALSE(observe::is_ready(record));
    CHECK_FALSE(record.seconds_to_command);
    CHECK_FALSE(record.phase_seconds[static_cast<std::size_t>(observe::Phase::barrier)]);
    CHECK(record.phase_seconds[static_cast<std::size_t>(observe::Phase::dns_wait)]);
  }
}

TEST_CASE("http::parse_request_head") {
  struct Row {
    const char* behaviour;
    const char* head;
    int status;  // 0: parsed
    const char* path;
  };
  const Row rows[] = {
      {"a GET", "GET /metrics HTTP/1.1\r\nHost: x", 0, "/metrics"},
      {"HTTP/1.0", "GET /readyz HTTP/1.0", 0, "/readyz"},
      {"the query is not part of the path", "GET /metrics?name[]=x HTTP/1.1", 0, "/metrics"},
      {"a POST is refused", "POST /metrics HTTP/1.1", 405, ""},
      {"junk is a bad request", "\x16\x03\x01 hello", 400, ""},
      {"no version", "GET /metrics", 400, ""},
      {"HTTP/2's preface", "PRI * HTTP/2.0", 400, ""},
      {"an absolute target", "GET http://x/metrics HTTP/1.1", 400, ""},
      {"empty", "", 400, ""},
  };
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    auto parsed = parse_request_head(row.head);
    if (row.status == 0) {
      REQUIRE(std::holds_alternative<HttpRequest>(parsed));
      CHECK(std::get<HttpRequest>(parsed).path == row.path);
    } else {
      REQUIRE(std::holds_alternative<int>(parsed));
      CHECK(std::get<int>(parsed) == row.status);
    }
  }
  CHECK(std::get<HttpRequest>(parse_request_head("HEAD / HTTP/1.1")).head);
}

TEST_CASE("http::read_request") {
  using State = RequestReading::State;
  SUBCASE("a head without its blank line is incomplete") {
    CHECK(read_request("GET /metrics HTTP/1.1\r\nHost: x\r\n", 4096).state == State::incomplete);
    CHECK(read_request("", 4096).state == State::incomplete);
  }
  SUBCASE("the blank line completes it, with or without carriage returns") {
    for (const char* received : {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "GET /metrics HTTP/1.1\nHost: x\n\n"}) {
      CAPTURE(received);
      const RequestReading reading = read_request(received, 4096);
      REQUIRE(reading.state == State::complete);
      CHECK(reading.request.path == "/metrics");
      CHECK_FALSE(reading.request.head);
    }
  }
  SUBCASE("a complete head that is not GET or HEAD is refused with its status") {
    const RequestReading reading = read_request("POST /metrics HTTP/1.1\r\n\r\n", 4096);
    CHECK(reading.state == State::refused);
    CHECK(reading.status == 405);
  }
  SUBCASE("more than the limit without the blank line is refused with 431") {
    const std::string received = "GET /" + std::string(40, 'a');
    const RequestReading reading = read_request(received, 40);
    CHECK(reading.state == State::refused);
    CHECK(reading.status == 431);
    CHECK(read_request(received, 45).state == State::incomplete);
  }
  SUBCASE("a blank line past the limit is refused with 431 too") {
    const std::string received = "GET /" + std::string(40, 'a') + " HTTP/1.1\r\n\r\n";
    const RequestReading reading = read_request(received, 40);
    CHECK(reading.state == State::refused);
    CHECK(reading.status == 431);
    CHECK(read_request(received, received.size()).state == State::complete);
  }
}

TEST_CASE("http::render_response") {
  HttpResponse response{.status = 503, .body = "not ready\n"};
  CHECK(render_response(response, false) ==
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 10\r\n"
        "Connection: close\r\n\r\nnot ready\n");
  CHECK(render_response(response, true).ends_with("\r\n\r\n"));
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = "/tmp/tfboot-observe-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST_CASE("termination_log::termination_message") {
  SUBCASE("one line with a newline") { CHECK(termination_message("stopping: worker:1 failed") == "stopping: worker:1 failed\n"); }
  SUBCASE("cut to 4 KiB, never inside a character") {
    std::string long_reason(4094, 'x');
    long_reason += "\xc3\xa9\xc3\xa9";  // two two-byte characters across the limit
    const std::string message = termination_message(long_reason);
    CHECK(message.size() == 4095);
    CHECK(message == std::string(4094, 'x') + "\n");
  }
}

TEST_CASE("termination_log::write_termination_message") {
  TempDir dir;
  SUBCASE("a new file") {
    const std::string path = dir.path + "/termination-log";
    REQUIRE(write_termination_message(path, "exit 5"));
    CHECK(read_file(path) == "exit 5\n");
    CHECK(fs::directory_iterator(dir.path) != fs::directory_iterator());
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temporary left
  }
  SUBCASE("an earlier message replaced whole") {
    const std::string path = dir.path + "/termination-log";
    std::ofstream(path) << std::string(100, 'y');
    REQUIRE(write_termination_message(path, "short"));
    CHECK(read_file(path) == "short\n");
  }
  SUBCASE("a missing directory is an error, for a warning") {
    auto written = write_termination_message(dir.path + "/missing/termination-log", "x");
    CHECK_FALSE(written);
  }
  SUBCASE("a FIFO that is read gets the message and stays a FIFO") {
    const std::string path = dir.path + "/fifo";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    UniqueFd reader(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    REQUIRE(reader);
    REQUIRE_MESSAGE(write_termination_message(path, "exit 5"), "written into the FIFO");
    char buffer[64] = {};
    CHECK(::read(reader.get(), buffer, sizeof buffer) == 7);
    CHECK(std::string(buffer) == "exit 5\n");
    CHECK(fs::is_fifo(path));
  }
  SUBCASE("a FIFO that nobody reads is an error, never a wait, and stays a FIFO") {
    const std::string path = dir.path + "/fifo";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    auto written = write_termination_message(path, "x");
    CHECK(error_of(written) == path + " is a FIFO that nobody reads");
    CHECK(fs::is_fifo(path));
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temporary left
  }
  SUBCASE("a symbolic link is written through, never replaced") {
    const std::string target = dir.path + "/target";
    const std::string path = dir.path + "/termination-log";
    std::ofstream(target) << std::string(100, 'y');
    fs::create_symlink(target, path);
    REQUIRE_MESSAGE(write_termination_message(path, "exit 5"), "written through the link");
    CHECK(fs::is_symlink(path));
    CHECK(read_file(target) == "exit 5\n");
  }
  SUBCASE("a directory is an error and is left alone") {
    const std::string path = dir.path + "/termination-log";
    fs::create_directory(path);
    CHECK(error_of(write_termination_message(path, "x")) == "open " + path + ": Is a directory");
    CHECK(fs::is_directory(path));
  }
}

TEST_CASE("termination_log::termination_log_path") {
  CHECK(termination_log_path(Setting{"/x/y", "--termination-log"}) == std::optional<std::string>("/x/y"));
}

}  // namespace
}  // namespace tfboot
