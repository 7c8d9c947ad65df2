// The quick preflight's verdict (control/protocol/preflight.h), the figures on the wire, and the
// barrier's refusal with its own exit code; the log root's probe on real directories.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "control/protocol/protocol.h"
#include "flow/preflight.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

NodeFigures writable(std::int64_t free_mib = 10'000) { return NodeFigures{{"/logs", "", free_mib, 0.4}, std::nullopt}; }

TaskPreflight task(const std::string& name, int accelerators = 4, std::optional<std::int64_t> offset = 0,
                   std::optional<NodeFigures> node = writable()) {
  return TaskPreflight{name, name.substr(0, name.find(':')), "host-" + name.substr(name.find(':') + 1), node, offset, accelerators};
}

const Instant t0{std::chrono::seconds(1000)};

// A character-device major no driver of this kernel registered (/proc/devices; the local and
// experimental range 240-254 first): opening a node of it is ENXIO.
unsigned unused_char_major() {
  std::ifstream devices("/proc/devices");
  std::set<unsigned> used;
  std::string line;
  while (std::getline(devices, line) && line != "Block devices:") {
    unsigned major = 0;
    if (std::sscanf(line.c_str(), "%u", &major) == 1) used.insert(major);
  }
  for (unsigned major = 240; major <= 254; ++major) {
    if (!used.contains(major)) return major;
  }
  FAIL("every major from 240 to 254 is registered");
  return 0;
}
const std::string job = "0123456789abcdef";

Hello hello_from(const std::string& task_text, int gpus, std::optional<NodeFigures> node) {
  Hello hello;
  hello.job = job;
  hello.task = *parse_member(task_text);
  hello.host = "host-" + task_text.substr(task_text.find(':') + 1);
  hello.instance = "aaaaaaaa";
  hello.name = hello.host + ".svc";
  hello.fingerprint.gpu_count = gpus == 0 ? std::string(fingerprint_absent) : std::to_string(gpus);
  hello.preflight = node;
  return hello;
}

}  // namespace

TEST_CASE("preflight::judge_preflight") {
  const PreflightBounds bounds;
  SUBCASE("healthy nodes pass") {
    CHECK(judge_preflight({task("worker:0"), task("worker:1"), task("worker:2", 4, -1500)}, bounds).passed());
  }
  SUBCASE("a log root that cannot be written is named with its host and the system's reason") {
    auto verdict = judge_preflight({task("worker:0"), task("worker:3", 4, 0, NodeFigures{{"/logs", "No space left on device", 0, 0.1}, std::nullopt})}, bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(preflight_refusal_message(verdict) ==
          "preflight refused the start: worker:3 (host 'host-3'): log root /logs not writable: No space left on device");
  }
  SUBCASE("a log root without room is named, with the bound") {
    auto verdict = judge_preflight({task("worker:0"), task("worker:1", 4, 0, writable(12))}, bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0] == "worker:1 (host 'host-1'): log root /logs has 12 MiB free (at least 64 needed)");
  }
  SUBCASE("a checkpoint dir that cannot be written, or has no room, is named beside the log root's") {
    NodeFigures read_only = writable();
    read_only.checkpoint_dir = DirectoryFigures{"/ckpt", "Read-only file system", 900, 0.2};
    NodeFigures full = writable(12);
    full.checkpoint_dir = DirectoryFigures{"/ckpt", "", 3, 0.2};
    auto verdict = judge_preflight({task("worker:0"), task("worker:1", 4, 0, read_only), task("worker:2", 4, 0, full)}, bounds);
    REQUIRE(verdict.refusals.size() == 3);
    CHECK(verdict.refusals[0] == "worker:1 (host 'host-1'): checkpoint dir /ckpt not writable: Read-only file system");
    CHECK(verdict.refusals[1] == "worker:2 (host 'host-2'): log root /logs has 12 MiB free (at least 64 needed)");
    CHECK(verdict.refusals[2] == "worker:2 (host 'host-2'): checkpoint dir /ckpt has 3 MiB free (at least 64 needed)");
  }
  SUBCASE("a clock beyond the bound either way is named; at the bound it passes") {
    auto verdict = judge_preflight({task("worker:0"), task("worker:1", 4, 2000), task("worker:2", 4, -2001), task("worker:3", 4, 2500)}, bounds);
    REQUIRE(verdict.refusals.size() == 2);
    CHECK(verdict.refusals[0] == "worker:2 (host 'host-2'): clock -2001 ms off the coordinator's (at most 2000 ms)");
    CHECK(verdict.refusals[1] == "worker:3 (host 'host-3'): clock 2500 ms off the coordinator's (at most 2000 ms)");
  }
  SUBCASE("the task whose accelerator count differs from most of its type is named") {
    auto verdict = judge_preflight({task("worker:0"), task("worker:1"), task("worker:2", 3), task("ps:0", 0)}, bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0] == "worker:2 (host 'host-2'): sees 3 accelerators, the other worker tasks 4 (most of them)");
  }
  SUBCASE("between two, the first task's count is the job's") {
    auto verdict = judge_preflight({task("worker:0", 8), task("worker:1", 0)}, bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0] == "worker:1 (host 'host-1'): sees 0 accelerators, the other worker tasks 8");
  }
  SUBCASE("each GPU the driver lists but that does not answer is named") {
    NodeFigures lost = writable();
    lost.silent_gpus = {"GPU 0000:3b:00.0 is listed by the driver but does not answer (/dev/nvidia2: No such device or address)",
                        "the driver's GPU listing /proc/driver/nvidia/gpus did not answer within 5000 ms"};
    auto verdict = judge_preflight({task("worker:0"), task("worker:1", 4, 0, lost)}, bounds);
    REQUIRE(verdict.refusals.size() == 2);
    CHECK(verdict.refusals[0] ==
          "worker:1 (host 'host-1'): GPU 0000:3b:00.0 is listed by the driver but does not answer (/dev/nvidia2: No such device or address)");
    CHECK(verdict.refusals[1] == "worker:1 (host 'host-1'): the driver's GPU listing /proc/driver/nvidia/gpus did not answer within 5000 ms");
  }
  SUBCASE("a task that reported nothing is named") {
    auto verdict = judge_preflight({task("worker:0"), task("worker:1", 4, std::nullopt, std::nullopt)}, bounds);
    REQUIRE(verdict.refusals.size() == 1);
    CHECK(verdict.refusals[0] == "worker:1 (host 'host-1'): reported no preflight figures (its --preflight is off, or its tfboot is older)");
  }
  SUBCASE("a long list is cut in the one line, saying how many more") {
    std::vector<TaskPreflight> tasks{task("worker:0")};
    for (int i = 1; i <= 12; ++i) tasks.push_back(task("worker:" + std::to_string(i), 4, 9000));
    const std::string message = preflight_refusal_message(judge_preflight(tasks, bounds));
    CHECK(message.ends_with("; and 2 more"));
    CHECK(message.find("worker:10 ") != std::string::npos);
    CHECK(message.find("worker:11 ") == std::string::npos);
  }
}

TEST_CASE("preflight::the figures travel in the hello and the offsets in the start") {
  Hello hello = hello_from("worker:1", 2, NodeFigures{{"/logs", "Read-only file system", 5, 1.25}, DirectoryFigures{"/ckpt", "", 900, 0.5},
                                                      {"GPU 0000:3b:00.0 is listed by the driver but does not answer (/dev/nvidia2: ...)"}});
  hello.wall_ms = 1'764'700'000'123;
  auto parsed = parse_message(encode(hello).substr(0, encode(hello).size() - 1), Sender::task);
  REQUIRE(parsed);
  const Hello& back = std::get<Hello>(*parsed);
  REQUIRE(back.preflight);
  CHECK(*back.preflight == *hello.preflight);
  CHECK(back.wall_ms == hello.wall_ms);

  Start start;
  start.tasks = 2;
  start.clock_offsets_ms = std::vector<std::int64_t>{0, -37};
  auto line = encode(start);
  auto start_back = parse_message(line.substr(0, line.size() - 1), Sender::coordinator);
  REQUIRE(start_back);
  CHECK(std::get<Start>(*start_back).clock_offsets_ms == start.clock_offsets_ms);
  SUBCASE("an older peer's messages carry neither") {
    Hello plain = hello_from("worker:1", 2, std::nullopt);
    auto plain_back = parse_message(encode(plain).substr(0, encode(plain).size() - 1), Sender::task);
    REQUIRE(plain_back);
    CHECK_FALSE(std::get<Hello>(*plain_back).preflight);
    CHECK_FALSE(std::get<Hello>(*plain_back).wall_ms);
  }
  SUBCASE("offsets that are not one per task are refused") {
    auto bad = parse_message(R"({"type":"start","supervised":true,"names_verified":false,"environment_differences":[],"tasks":2,)"
                             R"("preflight":{"clock_offsets_ms":[1]}})", Sender::coordinator);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "a bad 'start' message: 'preflight' 'clock_offsets_ms' does not have one entry per task");
  }
}

TEST_CASE("preflight::the barrier refuses a bad node with its own exit code, and passes the offsets on") {
  BarrierSettings settings{job, {*parse_member("worker:0"), *parse_member("worker:1"), *parse_member("worker:2")},
                           hello_from("worker:0", 4, writable()), EnvCheck::warn, 10s, PreflightLevel::quick, {}};
  StartBarrier barrier(settings);
  REQUIRE(barrier.on_hello(1, hello_from("worker:1", 4, writable()), "10.0.0.2:1", t0, 12).accepted);
  SUBCASE("healthy") {
    REQUIRE(barrier.on_hello(2, hello_from("worker:2", 4, writable()), "10.0.0.3:1", t0, -40).accepted);
    auto start = std::get<Start>(barrier.decide(true));
    CHECK(start.clock_offsets_ms == std::vector<std::int64_t>{0, 12, -40});
  }
  SUBCASE("other accelerators on one node") {
    REQUIRE(barrier.on_hello(2, hello_from("worker:2", 2, writable()), "10.0.0.3:1", t0, 0).accepted);
    auto abort = std::get<Abort>(barrier.decide(true));
    CHECK(abort.code == exit_code::preflight_refused);
    CHECK(abort.message == "preflight refused the start: worker:2 (host 'host-2'): sees 2 accelerators, the other worker tasks 4 (most of them)");
  }
  SUBCASE("off: nothing is judged, nothing carried") {
    settings.preflight = PreflightLevel::off;
    StartBarrier off(settings);
    REQUIRE(off.on_hello(1, hello_from("worker:1", 1, std::nullopt), "10.0.0.2:1", t0).accepted);
    REQUIRE(off.on_hello(2, hello_from("worker:2", 2, std::nullopt), "10.0.0.3:1", t0).accepted);
    CHECK_FALSE(std::get<Start>(off.decide(true)).clock_offsets_ms);
  }
}

TEST_CASE("preflight::check_directory") {
  const auto directory = std::filesystem::temp_directory_path() / ("tfboot-preflight-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  SUBCASE("a writable directory: no problem, the room measured, nothing left behind") {
    DirectoryFigures figures = check_directory(directory.string());
    CHECK(figures.problem == "");
    CHECK(figures.path == directory.string());
    CHECK(figures.free_mib > 0);
    CHECK(std::filesystem::is_empty(directory));
  }
  SUBCASE("a directory not made yet is checked in its nearest parent") {
    DirectoryFigures figures = check_directory((directory / "a" / "b").string());
    CHECK(figures.problem == "");
    CHECK(figures.path == directory.string());
    CHECK_FALSE(std::filesystem::exists(directory / "a"));
  }
  SUBCASE("a file in the way is a problem") {
    std::filesystem::path file = directory / "file";
    { std::ofstream(file) << "x"; }
    DirectoryFigures figures = check_directory((file / "logs").string());
    CHECK(figures.problem == "neither it nor a parent is a directory");
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE("preflight::check_gpus opens each listed GPU's device") {
  const auto root = std::filesystem::temp_directory_path() / ("tfboot-gpus-test-" + std::to_string(::getpid()));
  const auto listing = root / "gpus";
  const auto devices = root / "dev";
  std::filesystem::create_directories(devices);
  auto list = [&](const std::string& bus, const std::string& information) {
    std::filesystem::create_directories(listing / bus);
    std::ofstream(listing / bus / "information") << information;
  };
  list("0000:01:00.0", "Model: \t\t Tesla T4\nIRQ:   \t\t 42\nDevice Minor: \t 0\n");
  list("0000:02:00.0", "Model: \t\t Tesla T4\nDevice Minor: \t 1\n");
  list("0000:03:00.0", "Model: \t\t Tesla T4\nDevice Minor: \t 2\nBlacklisted:\t No\n");
  list("0000:04:00.0", "Model: \t\t Tesla T4\n");  // no minor: nothing to open
  { std::ofstream(devices / "nvidia0") << ""; }      // opens
  // nvidia1 absent: another container's GPU, not this one's
  std::filesystem::create_directories(devices / "nvidia2");  // EISDIR: an open that fails, but says nothing of a GPU
  SUBCASE("one answers; one is not this container's and one fails for a reason no lost GPU gives: neither is named") {
    const GpuFigures figures = check_gpus(listing.string(), devices.string());
    CHECK(figures.answering == 1);
    CHECK(figures.silent.empty());
  }
  SUBCASE("a device whose driver is not there (ENXIO, as a lost GPU's) is named") {
    if (::geteuid() != 0) return;  // mknod needs root; the integration tier covers it too
    std::filesystem::remove(devices / "nvidia2");
    REQUIRE(::mknod((devices / "nvidia2").c_str(), S_IFCHR | 0600, ::makedev(unused_char_major(), 0)) == 0);
    const GpuFigures figures = check_gpus(listing.string(), devices.string());
    CHECK(figures.answering == 1);
    CHECK(figures.silent == std::vector<std::string>{"GPU 0000:03:00.0 is listed by the driver but does not answer (" +
                                                     (devices / "nvidia2").string() + ": No such device or address)"});
  }
  SUBCASE("no listing: no GPU, nothing named") {
    const GpuFigures figures = check_gpus((root / "none").string(), devices.string());
    CHECK(figures.answering == 0);
    CHECK(figures.silent.empty());
  }
  std::filesystem::remove_all(root);
}

}  // namespace tfboot

namespace tfboot {

TEST_CASE("fingerprint::accelerator_count") {
  Fingerprint fingerprint;
  CHECK(accelerator_count(fingerprint) == 0);  // "absent": a CPU-only node
  fingerprint.gpu_count = "8";
  CHECK(accelerator_count(fingerprint) == 8);
  fingerprint.gpu_count = "8 (cut)";
  CHECK(accelerator_count(fingerprint) == 0);
}

}  // namespace tfboot
