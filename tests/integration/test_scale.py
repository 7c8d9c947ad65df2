"""A job of 2,000 tasks starts (docs/supervision.md: Job supervision; launcher/control/protocol/messages.h),
through the start tree (docs/supervision.md: The start tree): real relays worker:128, 256, ... 1920 carry their groups.

One real tfboot coordinator, worker:0 of `--cluster worker=2000`, supervised (`--init`), and the
15 relays, real tfboots too; 1,983 fake tasks, the rest of worker:1..1998, in this process (tests/harness/imitated_tasks.py, which
`scripts/bench scale` uses for up to ~100,000), speaking the control channel's protocol on
loopback as a real task does; then one real tfboot task, worker:1999, joining last. Every task must
get `start` (not `abort`, not a closed or silent connection) soon after the last hello, stay
connected with heartbeats while the coordinator's command runs, and get `done` when it ends.

The start is one message, the same for every task. Built again for every task, in one loop
without heartbeats and each time holding every task's entry (O(N) work per task, O(N^2) in all),
it keeps the coordinator quiet for seconds at a few thousand tasks: the last tasks, hearing
nothing for 10 s, drop the connection as a real task does and are refused when they come back
("job already started").

Names: `--peer-template scale-{index}` and `--wait 0` on both real tfboots, so the coordinator
resolves no name at all (docs/supervision.md: "A coordinator running with `--wait 0` resolves nothing") and the
real task waits for none. The one name a task must still resolve, the coordinator's (worker:1999
asks it before each connection), is answered by a tiny DNS responder on loopback given with
`--dns-server`. That needs no root, no namespace and no private /etc/hosts (which would need a
mount namespace, hence root), so the test runs in every integration run: scripts/check's
`-m "not root"` as well as scripts/test.

The fakes report the fingerprint a real tfboot task reports here, taken from a two-task warm-up
job run first with the same environment, so the environment check finds no difference.
"""

import asyncio
import collections
import json
import os
import resource
import statistics
import time

import pytest

from harness.imitated_tasks import (HEARTBEAT, SILENT_AFTER, Fleet, LoopbackDns, Tfboot, fingerprint_of_a_real_task,
                                    free_tcp_port, relay_names, relay_of, relays, task_ranges, tfboot_argv, wait_until)

TASKS = 2000
RELAYS = relays(TASKS)             # worker:128, 256, ... 1920: real tfboots, each carrying its group
FAKES = [i for i in range(1, TASKS - 1) if i not in RELAYS]  # the rest of worker:1 .. worker:1998
REAL_TASK = TASKS - 1              # worker:1999, the last to join, through its relay worker:1920
# The last fake must hear the start this soon after the last hello was accepted. The start is
# the same message for every task: built once, handing it to 1,998 sockets takes well under a
# second here (at most a few hundred KB each, even with one entry per task). Built again for
# every task (the bug), it is N times the work before the last task hears anything, and seconds
# pass without a heartbeat. 5 s is half the silence limit: a failure means the design lets a
# task's silence limit come near at this size, not that the machine is slow.
START_WITHIN = 5.0
# Every wait of the test ends by then; then every process is stopped (SIGTERM, SIGKILL 3 s later).
GLOBAL_DEADLINE = 120.0
# The coordinator accepts at most 2 x tasks + 16 connections and has one descriptor per
# connection; this process holds one per fake. The soft limit is raised to the hard one (and
# inherited by the tfboots); a hard limit below this cannot hold the job.
NEEDED_NOFILE = 2 * TASKS + 200
# Hellos in flight at once: a job's pods do not all connect in the same millisecond either.
HANDSHAKES_AT_ONCE = 64
# After every task got the start, the coordinator's command keeps running this long, so that
# heartbeats flow both ways after the start before the job ends.
HOLD_AFTER_START = 2.5 * HEARTBEAT


@pytest.fixture
def nofile_raised():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < NEEDED_NOFILE:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {NEEDED_NOFILE}: a job of {TASKS} tasks needs a "
                    f"descriptor per connection in the coordinator and per fake task in this process")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def job_size_in(start: dict):
    """The job's size as a start says it: `tasks` (a start without the table of every task's
    entry), else one `members` entry per task (the start as it was)."""
    if "tasks" in start:
        return start["tasks"]
    return len(start.get("members", []))


async def run_the_job(tfboot, tmp_path):
    deadline = time.monotonic() + GLOBAL_DEADLINE
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    result = {"coordinator": Tfboot("coordinator worker:0"), "task": Tfboot(f"real task worker:{REAL_TASK}"),
              "relays": [Tfboot(f"relay worker:{i}") for i in RELAYS], "phase": "warm-up", "fakes": []}
    with LoopbackDns(relay_names()) as dns_server:
        fingerprint = await fingerprint_of_a_real_task(tfboot, env, dns_server.address, tmp_path)
        result["fingerprint"] = fingerprint
        port = free_tcp_port()
        relay_port = free_tcp_port()
        tree = ["--relay-port", str(relay_port)]
        log_root = tmp_path / "logs"
        release = tmp_path / "release"       # the coordinator's command ends once this exists
        tf_config = tmp_path / "tf_config.json"  # what the real task's command got
        # Bounded by itself too: 120 s at most, then exit 1.
        hold = ["sh", "-c", 'i=0; while [ ! -e "$1" ] && [ "$i" -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e "$1" ]',
                "sh", str(release)]
        write_tf_config = ["sh", "-c", 'printf %s "$TF_CONFIG" > "$1"', "sh", str(tf_config)]
        coordinator, task = result["coordinator"], result["task"]
        fleet = result["job"] = Fleet(port, fingerprint, FAKES, deadline, handshakes_at_once=HANDSHAKES_AT_ONCE, tasks=TASKS,
                                      relay_port=relay_port)
        fakes = result["fakes"] = list(fleet)
        try:
            result["phase"] = "hellos"
            await coordinator.start(tfboot_argv(tfboot, 0, TASKS, port, dns_server.address, log_root, hold, extra=tree), env, tmp_path)
            for index, relay in zip(RELAYS, result["relays"]):
                await relay.start(tfboot_argv(tfboot, index, TASKS, port, dns_server.address, log_root, hold, extra=tree), env, tmp_path)
            fleet.join(FAKES)
            await wait_until(lambda: all(f.accepted or f.outcome for f in fakes) or coordinator.returncode is not None,
                             min(deadline, time.monotonic() + 60))
            result["accepted"] = sum(f.accepted for f in fakes)
            result["hellos_took"] = time.monotonic() - coordinator.spawned_at
            if result["accepted"] < len(fakes):
                return result

            # Every fake is present: the last task joins.
            result["phase"] = "start"
            await task.start(tfboot_argv(tfboot, REAL_TASK, TASKS, port, dns_server.address, log_root, write_tf_config,
                                         extra=tree), env, tmp_path)
            # Twice the silence limit and more: time enough to see every fake's fate (start, or
            # silent after 10 s, or closed) and the real task's command run (it then waits for the
            # job's outcome) or its exit, whatever the binary does.
            await wait_until(lambda: all(f.outcome for f in fakes) and (tf_config.exists() or task.returncode is not None),
                             min(deadline, time.monotonic() + 3 * SILENT_AFTER))
            accepted = task.first("accepted us")
            if accepted:
                result["reference"], result["reference_what"] = accepted[0], "the last task's hello was accepted"
            else:
                result["reference"], result["reference_what"] = task.spawned_at, "the last task was started"
            if not all(f.outcome == "start" for f in fakes) or task.returncode not in (None, 0):
                return result

            # Heartbeats after the start, then the coordinator's command ends: done for everyone.
            result["phase"] = "done"
            await asyncio.sleep(HOLD_AFTER_START)
            result["coordinator_descriptors"] = len(os.listdir(f"/proc/{coordinator.proc.pid}/fd"))
            release.touch()
            await wait_until(lambda: all(f.after for f in fakes) and coordinator.returncode is not None
                             and task.returncode is not None, min(deadline, time.monotonic() + 30))
            result["phase"] = "finished"
            result["tf_config"] = tf_config.read_text() if tf_config.exists() else None
            return result
        finally:
            release.touch()  # a command left behind ends within 0.1 s
            await fleet.close()
            await task.stop()
            for relay in result["relays"]:
                await relay.stop()
            await coordinator.stop()
            result["startup"] = None
            startup = log_root / "worker_0" / "startup.json"
            if startup.exists():
                result["startup"] = json.loads(startup.read_text())


def summary(result) -> str:
    fakes = result["fakes"]
    lines = [f"phase reached: {result['phase']}",
             f"fakes accepted: {sum(f.accepted for f in fakes)}/{len(fakes)}"
             + (f" ({result['hellos_took']:.1f} s from the coordinator's start)" if "hellos_took" in result else ""),
             "fakes at the start barrier: " + ", ".join(f"{what} {count}" for what, count in
                                                        collections.Counter(f.outcome or "nothing yet" for f in fakes).most_common())]
    reference = result.get("reference")
    if reference is not None:
        starts = sorted(f.start_at - reference for f in fakes if f.start_at is not None)
        if starts:
            lines.append(f"start heard, after {result['reference_what']}: first {starts[0]:.2f} s, "
                         f"median {statistics.median(starts):.2f} s, last {starts[-1]:.2f} s")
        by_outcome = collections.defaultdict(list)
        for f in fakes:
            if f.outcome != "start":
                by_outcome[f.outcome or "nothing yet"].append(f)
        for what, group in by_outcome.items():
            times = [f.ended_at - reference for f in group if f.ended_at is not None]
            when = f" at {min(times):.1f}..{max(times):.1f} s" if times else ""
            lines.append(f"no start, {what}{when}: {task_ranges(f.index for f in group)} "
                         f"({group[0].detail or 'no detail'})")
    if any(f.after for f in fakes):
        lines.append("fakes after the start: " + ", ".join(
            f"{what} {count}" for what, count in collections.Counter(f.after or "nothing yet" for f in fakes if f.outcome == "start").most_common()))
    lines.extend(relay.report(4) for relay in result["relays"] if relay.returncode not in (None, 0))
    lines.append(result["task"].report())
    lines.append(result["coordinator"].report())
    return "\n".join(lines)


def fleet_port(result) -> int:
    return result["job"].port


def test_a_job_of_2000_tasks_starts_and_ends(tfboot, tmp_path, nofile_raised):
    result = asyncio.run(run_the_job(tfboot, tmp_path))
    fakes, coordinator, task = result["fakes"], result["coordinator"], result["task"]
    report = summary(result)
    print(report)  # shown with -rP, and on a failure

    # Every task is present, and every one gets the start: no abort, no closed or silent connection.
    assert result.get("accepted") == len(fakes), report
    assert [f.task for f in fakes if f.outcome != "start"] == [], report
    # Soon: the last fake within START_WITHIN of the last hello's acceptance (see START_WITHIN).
    latest = max(f.start_at for f in fakes) - result["reference"]
    assert latest < START_WITHIN, f"the last fake heard the start {latest:.2f} s after {result['reference_what']}\n" + report
    # The real task, last to join, started too, and its command ran with the whole cluster.
    assert task.returncode == 0, report
    assert task.first("the coordinator says start"), report
    assert result.get("tf_config"), report
    tf_config = json.loads(result["tf_config"])
    assert tf_config["task"] == {"type": "worker", "index": REAL_TASK}
    assert len(tf_config["cluster"]["worker"]) == TASKS

    # One start for everyone, the same bytes, for the whole job, with no environment difference
    # (the fakes report what a real task does here).
    job = result["job"]
    assert job.different_starts == 0, f"{job.different_starts} fakes got a start unlike the first one's"
    start = json.loads(job.start_line)
    assert start["supervised"] is True
    assert job_size_in(start) == TASKS, {key: value for key, value in start.items() if key != "members"}
    assert start["environment_differences"] == [], start["environment_differences"]

    # After the start the fakes stayed connected, heard heartbeats, and got done when the
    # coordinator's command ended; the coordinator exits 0.
    assert all(f.after == "done" for f in fakes), report
    assert all(f.pings_after_start >= 1 for f in fakes), report
    assert coordinator.returncode == 0, report

    # Through the tree (docs/supervision.md: The start tree): every fake outside the coordinator's group joined through its
    # real relay, and the coordinator held a connection per relay and per task of its own group (and
    # each relay's task), not one per task of the job.
    assert all(relay_of(f.index, TASKS) is None or f.connected_to[1] != fleet_port(result) for f in fakes)
    assert [relay.returncode for relay in result["relays"]] == [0] * len(RELAYS), report
    assert all(relay.first("accepted this relay") for relay in result["relays"]), report
    assert result["coordinator_descriptors"] < 128 + 2 * len(RELAYS) + 64, result["coordinator_descriptors"]
    assert result["startup"]["job"]["tasks_present"] == TASKS, report
    assert result["startup"]["job"]["environment_differences"] == [], report
