// The job machine through a fake world, as ninja tests its builder through a fake command runner:
// no processes, no sockets, simulated time. Each case is one rule of docs/supervision.md.
#include <signal.h>

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "supervise/loop.h"
#include "supervise/machine.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// The machine driven by the loop's own dispatcher (perform_actions) over an imitation of the
// processes and of the job: each action is written as a line ("SIGTERM to 0,1", "leftovers of 2:
// SIGKILL", "report worker:1 status 7") for the test to compare. The job is either decided here
// (LocalJob, as `tfboot local` and a one-task job) or a link whose verdict is pending or not.
struct FakeWorld final : ProcessControl, Job {
  FakeWorld(std::vector<std::string> tasks, std::vector<WatchedProcess> processes, MachineSettings settings)
      : names(tasks), machine(tasks, processes, settings) {}

  std::vector<std::string> names;
  JobMachine machine;
  std::optional<LocalJob> local;  // a job decided here; unset: a link
  bool link_verdict_pending = false;
  Instant now{};
  std::vector<std::string> done;      // the actions, in order
  std::map<std::size_t, bool> group;  // an ended process's group still holds something

  void pump() { perform_actions(machine, *this, this, now); }

  // ProcessControl
  void signal(const std::vector<std::size_t>& processes, int signal_number) override {
    std::string ids;
    for (std::size_t id : processes) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    if (!processes.empty()) done.push_back(signal_name(signal_number) + " to " + ids);
  }
  bool signal_leftovers(std::size_t process, int signal_number) override {
    if (!group[process]) return false;
    done.push_back("leftovers of " + std::to_string(process) + ": " + signal_name(signal_number));
    if (signal_number == SIGKILL) group[process] = false;
    return true;
  }
  void suspend_self() override { done.push_back("suspend"); }

  // Job
  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant at) override {
    return local ? local->process(fds, at) : std::vector<JobEvent>{};
  }
  void report_exit(std::size_t task, int status, const std::string& detail, bool rejoins) override {
    done.push_back("report " + names[task] + " status " + std::to_string(status) + (rejoins ? "" : " (not rejoining)"));
    if (local) local->report_exit(task, status, detail, rejoins);
  }
  void report_stop_signal(int signal_number) override { done.push_back("report " + signal_name(signal_number)); }
  bool verdict_pending() const override { return local ? local->verdict_pending() : link_verdict_pending; }

  // What happens to the world, then the machine's answer performed:
  void exit(std::size_t process, int status, const std::string& detail = "") {
    machine.on_process_exit(process, status, detail, now);
    pump();
  }
  void signal(int signal_number) {
    machine.on_signal(signal_number, now);
    pump();
  }
  void verdict(JobEvent event) {
    machine.on_job_event(event, now);
    pump();
  }
  void advance(std::chrono::milliseconds by) {
    now += by;
    for (auto& [id, left] : group) {
      if (!left) machine.on_group_empty(id);
    }
    machine.on_time(now);
    pump();
  }
  std::vector<std::string> take() { return std::exchange(done, {}); }
};

using Lines = std::vector<std::string>;

MachineSettings local_settings(int restarts = 0, int max_restarts = 0) {
  MachineSettings settings;
  settings.stop_grace = 10s;
  settings.local = true;
  settings.job_decides = true;
  settings.may_restart = restarts < max_restarts;
  settings.max_restarts = max_restarts;
  return settings;
}

FakeWorld local_job(int tasks, bool every_task_must_finish, int restarts = 0, int max_restarts = 0) {
  std::vector<std::string> names;
  std::vector<WatchedProcess> processes;
  std::vector<JobMember> members;
  for (int i = 0; i < tasks; ++i) {
    names.push_back("worker:" + std::to_string(i));
    processes.push_back({static_cast<std::size_t>(i), "worker:" + std::to_string(i)});
    members.push_back(JobMember{TaskType::worker, i});
  }
  FakeWorld world(names, processes, local_settings(restarts, max_restarts));
  world.local.emplace(members, JobRules{every_task_must_finish, restarts, max_restarts, false});
  return world;
}

MachineSettings pod_settings() {
  MachineSettings settings;
  settings.stop_grace = 10s;
  settings.job_decides = true;
  return settings;
}

}  // namespace

TEST_CASE("supervise::JobMachine in tfboot local") {
  SUBCASE("the first failure stops the other tasks at once, and the job ends with its status") {
    FakeWorld world = local_job(3, false);
    world.exit(1, 7, "boom");
    CHECK(world.take() == Lines{"report worker:1 status 7", "SIGTERM to 0,2"});
    world.exit(0, 143);
    world.exit(2, 143);
    CHECK(world.take().empty());  // after the verdict, the others' ends are part of the stop
    REQUIRE(world.machine.ended());
    const SupervisionEnd end = world.machine.end();
    CHECK(end.exit_code == 7);
    CHECK(end.reason == EndReason::job_failed);
    CHECK(end.message == "worker:1 exited with status 7: boom");
    CHECK(end.failed_task == "worker:1");
  }
  SUBCASE("TensorFlow: the coordinator's success ends the job after the finish window, SIGKILL after the grace") {
    FakeWorld world = local_job(2, false);
    world.exit(0, 0);
    CHECK(world.take() == Lines{"report worker:0 status 0"});
    world.advance(4900ms);
    CHECK(world.take().empty());
    world.advance(100ms);
    CHECK(world.take() == Lines{"SIGTERM to 1"});
    world.advance(9900ms);
    CHECK(world.take().empty());
    world.advance(100ms);
    CHECK(world.take() == Lines{"SIGKILL to 1"});
    world.exit(1, 137);
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 0);
    CHECK(world.machine.end().reason == EndReason::job_done);
  }
  SUBCASE("PyTorch and JAX: the job is done when every task is, not when the coordinator is") {
    FakeWorld world = local_job(2, true);
    world.exit(0, 0);
    world.advance(60s);
    CHECK(world.take() == Lines{"report worker:0 status 0"});
    CHECK_FALSE(world.machine.ended());
    world.exit(1, 0);
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().reason == EndReason::job_done);
  }
  SUBCASE("a failure restarts the job while restarts remain, decided by the job's monitor") {
    FakeWorld world = local_job(2, false, 1, 2);
    world.exit(1, 3);
    CHECK(world.take() == Lines{"report worker:1 status 3", "SIGTERM to 0"});
    world.exit(0, 143);
    REQUIRE(world.machine.ended());
    const SupervisionEnd end = world.machine.end();
    CHECK(end.reason == EndReason::restarting);
    CHECK(end.message == "worker:1 exited with status 3; restarting every task in place (restart 2 of 2, --max-restarts)");
  }
  SUBCASE("no restart once the restarts are used up") {
    FakeWorld world = local_job(2, false, 2, 2);
    world.exit(1, 3);
    world.exit(0, 143);
    CHECK(world.machine.end().reason == EndReason::job_failed);
    CHECK(world.machine.end().exit_code == 3);
  }
  SUBCASE("a stop signal stops every task, and the job is not restarted") {
    FakeWorld world = local_job(2, false, 0, 5);
    world.signal(SIGINT);
    CHECK(world.take() == Lines{"SIGINT to 0,1"});
    world.exit(0, 130);
    world.exit(1, 130);
    CHECK(world.take() == Lines{"report worker:0 status 130 (not rejoining)"});
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 130);
    CHECK(world.machine.end().reason == EndReason::stopped_by_signal);
    CHECK(world.machine.end().message == "stopped by SIGINT");
  }
  SUBCASE("a second stop signal kills what still runs, leftovers included") {
    FakeWorld world = local_job(2, false);
    world.group[0] = true;
    world.signal(SIGTERM);
    world.exit(0, 143);
    world.take();
    world.signal(SIGTERM);
    CHECK(world.take() == Lines{"SIGKILL to 1", "leftovers of 0: SIGKILL"});
  }
}

TEST_CASE("supervise::JobMachine leftovers") {
  SUBCASE("what each process left gets SIGTERM as it ends, every group at once, SIGKILL after one grace") {
    MachineSettings settings = pod_settings();
    settings.job_decides = false;
    FakeWorld world({"worker:0"}, {{0, "rank 0"}, {0, "rank 1"}, {0, "rank 2"}}, settings);
    for (std::size_t id : {0, 1, 2}) world.group[id] = true;
    world.exit(0, 0);
    world.exit(1, 0);
    world.exit(2, 0);
    CHECK(world.take() == Lines{"leftovers of 0: SIGTERM", "leftovers of 1: SIGTERM", "leftovers of 2: SIGTERM", "report worker:0 status 0"});
    CHECK_FALSE(world.machine.ended());
    world.advance(9999ms);
    CHECK(world.take().empty());
    world.advance(1ms);
    CHECK(world.take() == Lines{"leftovers of 0: SIGKILL", "leftovers of 1: SIGKILL", "leftovers of 2: SIGKILL"});
    world.advance(1ms);
    CHECK(world.machine.ended());
  }
  SUBCASE("the task's end is reported at once, before its leftovers are gone") {
    FakeWorld world({"worker:0"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.group[0] = true;
    world.exit(0, 0);
    CHECK(world.take() == Lines{"leftovers of 0: SIGTERM", "report worker:0 status 0"});
  }
}

TEST_CASE("supervise::JobMachine in a pod") {
  SUBCASE("a task done early waits for the job's verdict and ends with it") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.exit(0, 0);
    CHECK_FALSE(world.machine.ended());
    world.verdict({JobEventKind::task_failed, "worker:2", 3, "worker:2 failed with status 3"});
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == exit_code::job_stopped);
    CHECK(world.machine.end().reason == EndReason::job_failed);
  }
  SUBCASE("a stop signal ends the wait for the verdict") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.exit(0, 0);
    world.signal(SIGTERM);
    CHECK(world.take() == Lines{"report worker:1 status 0"});
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().reason == EndReason::command_succeeded);
  }
  SUBCASE("another task's failure stops the command at once; the task exits 200") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.verdict({JobEventKind::task_failed, "worker:2", 3, "worker:2 failed with status 3"});
    CHECK(world.take() == Lines{"SIGTERM to 0"});
    world.exit(0, 143);
    CHECK(world.take().empty());  // no report after the verdict
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == exit_code::job_stopped);
    CHECK(world.machine.end().message == "stopping: worker:2 failed with status 3");
  }
  SUBCASE("the job done after this task failed, as it ended: part of the job's end, exit 0") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.machine.on_process_exit(0, 1, "", world.now);  // its peer went away
    world.pump();
    CHECK(world.take() == Lines{"report worker:1 status 1"});
    CHECK_FALSE(world.machine.ended());  // no restart left, and still the verdict is waited for
    world.verdict({JobEventKind::job_done, "worker:0", 0, ""});
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 0);
    CHECK(world.machine.end().reason == EndReason::job_done);
  }
  SUBCASE("a failure after the job was done is part of the stop") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.verdict({JobEventKind::job_done, "worker:0", 0, ""});
    world.exit(0, 1);
    CHECK(world.take().empty());
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 0);
  }
  SUBCASE("the task's own failure is its status when the job then stops") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.exit(0, 42, "ValueError: bad shard");
    CHECK(world.machine.ended());  // no restart left: no verdict to wait for
    CHECK(world.machine.end().exit_code == 42);
    CHECK(world.machine.end().message == "the command failed: ValueError: bad shard");
  }
  SUBCASE("the job's stop for this task's own failure ends it with its own status") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.exit(0, 42, "ValueError: bad shard");
    CHECK_FALSE(world.machine.ended());
    world.verdict({JobEventKind::task_failed, "worker:1", 42, "worker:1 failed with status 42: ValueError: bad shard"});
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 42);
    CHECK(world.machine.end().reason == EndReason::command_failed);
  }
  SUBCASE("a failed task whose link is lost ends with its own status") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.link_verdict_pending = true;
    world.exit(0, 42);
    world.machine.on_no_verdict();
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().exit_code == 42);
  }
  SUBCASE("a stop signal is passed on, reported to the job, and no SIGKILL of ours follows") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.signal(SIGTERM);
    CHECK(world.take() == Lines{"report SIGTERM", "SIGTERM to 0"});
    world.advance(1h);
    CHECK(world.take().empty());
    world.signal(SIGTERM);
    CHECK(world.take() == Lines{"SIGKILL to 0"});
  }
  SUBCASE("another task's stop signal (--stop-together): the command gets SIGTERM, and ends with a retried status") {
    MachineSettings settings = pod_settings();
    settings.stop_together = true;
    FakeWorld world({"worker:1"}, {{0, ""}}, settings);
    world.verdict({JobEventKind::preempt, "worker:2", SIGTERM, "worker:2 was asked to stop (SIGTERM): every task stops together"});
    CHECK(world.take() == Lines{"SIGTERM to 0"});
    world.signal(SIGTERM);  // the kubelet's own, later: the command has it already
    CHECK(world.take().empty());
    world.exit(0, 0);
    CHECK(world.machine.end().exit_code == 143);
    CHECK(world.machine.end().reason == EndReason::stopped_together);
  }
  SUBCASE("one rank's failure stops the task's other ranks") {
    MachineSettings settings = pod_settings();
    settings.job_decides = false;
    FakeWorld world({"worker:1"}, {{0, "rank 0"}, {0, "rank 1"}, {0, "rank 2"}}, settings);
    world.exit(1, 1, "rank 1 on pod-1: RuntimeError: boom");
    CHECK(world.take() == Lines{"SIGTERM to 0,2"});
    world.exit(0, 143);
    world.exit(2, 143);
    CHECK(world.take() == Lines{"report worker:1 status 1"});
    CHECK(world.machine.end().exit_code == 1);
  }
  SUBCASE("job control: the command gets SIGSTOP and tfboot suspends itself") {
    FakeWorld world({"worker:1"}, {{0, ""}}, pod_settings());
    world.signal(SIGTSTP);
    CHECK(world.take() == Lines{"SIGSTOP to 0", "suspend"});
  }
}

TEST_CASE("supervise::LocalJob for a task alone") {
  SUBCASE("--max-restarts applies to a job of one task") {
    MachineSettings settings = pod_settings();
    settings.may_restart = true;
    settings.max_restarts = 1;
    FakeWorld world({"worker:0"}, {{0, ""}}, settings);
    world.local.emplace(std::vector<JobMember>{JobMember{TaskType::worker, 0}}, JobRules{false, 0, 1, false});
    world.exit(0, 5);
    REQUIRE(world.machine.ended());
    CHECK(world.machine.end().reason == EndReason::restarting);
    CHECK(world.machine.end().message == "restarting the job in place (restart 1 of 1): worker:0 failed with status 5");
  }
}

}  // namespace tfboot
