"""The start tree (docs/supervision.md: The start tree) when a relay fails, is slow, or is joined the
wrong way: a job of 300 tasks, worker:0 the coordinator and the relays worker:128 and worker:256
real tfboots, the other 297 tasks imitated in this process (tests/harness/imitated_tasks.py, as in
test_scale.py), all on loopback; each relay listens on an address of its own, which its name
resolves to (LoopbackDns with relay_names()).

* A relay killed after the start is a lost task: every task it did not carry is told to stop,
  naming it, within the heartbeat's 2 s; the tasks it carried lose their connection at once.
* A relay stopped (SIGSTOP) for 4 s is slow, not lost: the job goes on, no task is lost. Stopped
  for longer than the 10 s silence limit, it is lost: every other task is told to stop.
* An environment check that fails reaches every task through the relays: the abort, naming the
  odd task, gets to every imitated task, the relays' groups included, before the relays exit.
* A restart in place (`--max-restarts 1`) after a task of a relay's group failed releases every
  task again, through the relays that carried its group before.
* A task that joins the coordinator instead of its relay, or another group's relay, is refused
  naming its relay, and its proper twin (the same task the right way) then joins and the job starts.
"""

import asyncio
import os
import resource
import signal
import time

import pytest

from harness.imitated_tasks import (HEARTBEAT, SILENT_AFTER, Fleet, LoopbackDns, Tfboot, fingerprint_of_a_real_task, free_tcp_port,
                                    relay_address, relay_names, relay_of, relays, tfboot_argv, wait_until)

TASKS = 300
RELAYS = relays(TASKS)  # worker:128, worker:256
FAKES = [i for i in range(1, TASKS) if i not in RELAYS]
GLOBAL_DEADLINE = 120.0
# The coordinator's and the relays' command: until the release file exists, 120 s at most.
HOLD = ["sh", "-c", 'i=0; while [ ! -e "$1" ] && [ "$i" -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e "$1" ]', "sh"]


@pytest.fixture
def nofile_raised():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4 * TASKS:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {4 * TASKS}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class TreeJob:
    """The job above, started: the coordinator, the relays, the fakes (and any `wrong` fleet first)."""

    def __init__(self, tfboot, tmp_path, wrong=None, extra=(), odd=None):
        self.tfboot, self.tmp_path, self.wrong_targets = tfboot, tmp_path, wrong or {}
        self.extra, self.odd = list(extra), odd
        self.deadline = time.monotonic() + GLOBAL_DEADLINE
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.coordinator = Tfboot("coordinator worker:0")
        self.relays = {i: Tfboot(f"relay worker:{i}") for i in RELAYS}
        self.release = tmp_path / "release"
        self.fleet = self.wrong = None
        self.port, self.relay_port = free_tcp_port(), free_tcp_port()

    async def __aenter__(self):
        self.dns = LoopbackDns(relay_names()).__enter__()
        fingerprint = await fingerprint_of_a_real_task(self.tfboot, self.env, self.dns.address, self.tmp_path)
        port, relay_port = self.port, self.relay_port
        argv = lambda index: tfboot_argv(self.tfboot, index, TASKS, port, self.dns.address, self.tmp_path / "logs",
                                         [*HOLD, str(self.release)], extra=["--relay-port", str(relay_port), *self.extra])
        await self.coordinator.start(argv(0), self.env, self.tmp_path)
        for index, relay in self.relays.items():
            await relay.start(argv(index), self.env, self.tmp_path)
        # A relay closes what connects before the coordinator accepted it (a task then tries again).
        await wait_until(lambda: all(relay.first("accepted this relay") for relay in self.relays.values()), time.monotonic() + 20)
        if self.wrong_targets:
            self.wrong = Fleet(port, fingerprint, list(self.wrong_targets), self.deadline, tasks=TASKS, relay_port=relay_port,
                               targets=self.wrong_targets)
            self.wrong.join(list(self.wrong_targets))
            await wait_until(lambda: all(f.outcome for f in self.wrong), time.monotonic() + 30)
        self.fleet = Fleet(port, fingerprint, FAKES, self.deadline, tasks=TASKS, relay_port=relay_port)
        if self.odd is not None:
            self.fleet.tasks[self.odd].fingerprint = dict(fingerprint, python="3.0.0-other")
        self.fleet.join(FAKES)
        await wait_until(lambda: all(f.outcome for f in self.fleet), time.monotonic() + 60)
        return self

    async def __aexit__(self, *exc):
        self.release.touch()
        for fleet in (self.fleet, self.wrong):
            if fleet:
                await fleet.close()
        for relay in self.relays.values():
            if relay.proc and relay.returncode is None:
                relay.proc.send_signal(signal.SIGCONT)
            await relay.stop()
        await self.coordinator.stop()
        self.dns.__exit__(None, None, None)

    def report(self) -> str:
        return "\n".join([self.coordinator.report(), *(relay.report() for relay in self.relays.values())])

    def carried_by(self, relay: int):
        return [f for f in self.fleet if relay_of(f.index, TASKS) == relay]

    def not_carried_by(self, relay: int):
        return [f for f in self.fleet if relay_of(f.index, TASKS) != relay]


def started(job: TreeJob):
    outcomes = sorted({f.outcome for f in job.fleet})
    assert outcomes == ["start"], f"{outcomes}\n{job.report()}"


def test_a_relay_killed_after_the_start_stops_the_job_at_once(tfboot, tmp_path, nofile_raised):
    async def scenario():
        async with TreeJob(tfboot, tmp_path) as job:
            started(job)
            killed_at = time.monotonic()
            job.relays[128].proc.kill()
            await wait_until(lambda: all(f.after for f in job.fleet), time.monotonic() + 3 * SILENT_AFTER)
            await job.coordinator.wait(15)
            return job, killed_at
    job, killed_at = asyncio.run(scenario())
    others, carried = job.not_carried_by(128), job.carried_by(128)
    assert {f.after for f in others} == {"stop"}, job.report()
    assert all("worker:128" in f.stop_message for f in others), others[0].stop_message
    latest = max(f.after_at for f in others) - killed_at
    assert latest < 2.0, f"the last task was told to stop {latest:.2f} s after the relay died"
    # The group it carried: their connection ended with the relay.
    assert {f.after for f in carried} == {"closed"}, {f.after for f in carried}
    assert max(f.after_at for f in carried) - killed_at < 2.0
    assert job.coordinator.returncode == 200, job.report()
    assert job.coordinator.first("worker:128"), job.report()


def test_a_slow_relay_is_waited_for_and_a_silent_one_is_lost(tfboot, tmp_path, nofile_raised):
    async def scenario():
        async with TreeJob(tfboot, tmp_path) as job:
            started(job)
            relay = job.relays[256].proc
            relay.send_signal(signal.SIGSTOP)
            await asyncio.sleep(4)
            relay.send_signal(signal.SIGCONT)
            await asyncio.sleep(3)
            after_slow = {f.after for f in job.fleet}
            stopped_at = time.monotonic()
            relay.send_signal(signal.SIGSTOP)
            await wait_until(lambda: all(f.after for f in job.not_carried_by(256)), time.monotonic() + 3 * SILENT_AFTER)
            await wait_until(lambda: all(f.after for f in job.carried_by(256)), time.monotonic() + 2 * SILENT_AFTER)
            relay.send_signal(signal.SIGCONT)
            await job.coordinator.wait(15)
            return job, after_slow, stopped_at
    job, after_slow, stopped_at = asyncio.run(scenario())
    assert after_slow == {None}, f"a relay stopped for 4 s lost tasks: {after_slow}\n{job.report()}"
    others, carried = job.not_carried_by(256), job.carried_by(256)
    assert {f.after for f in others} == {"stop"}, job.report()
    assert all("worker:256" in f.stop_message for f in others), others[0].stop_message
    lost_after = min(f.after_at for f in others) - stopped_at
    # Silent from its last word, up to a heartbeat (2 s) before it was stopped.
    assert SILENT_AFTER - HEARTBEAT - 0.5 < lost_after < SILENT_AFTER + 4, f"the silent relay was lost after {lost_after:.1f} s"
    # Its group heard nothing either, and gave up by its own silence limit.
    assert {f.after for f in carried} == {"silent"}, {f.after for f in carried}
    assert job.coordinator.returncode == 200, job.report()


def test_a_task_that_joins_the_wrong_way_is_refused_naming_its_relay(tfboot, tmp_path, nofile_raised):
    job = TreeJob(tfboot, tmp_path)
    # worker:130 is of worker:128's group, worker:260 of worker:256's, worker:5 of the coordinator's.
    job.wrong_targets = {130: ("127.0.0.1", job.port), 260: (relay_address(128), job.relay_port),
                         5: (relay_address(256), job.relay_port)}

    async def scenario():
        async with job:
            pass
    asyncio.run(scenario())
    refused = {f.index: (f.outcome, f.detail) for f in job.wrong}
    assert refused == {
        130: ("refused", "worker:130 joins through its relay worker:128, not the coordinator itself"),
        260: ("refused", "worker:260 joins through its relay worker:256, not the relay worker:128"),
        5: ("refused", "worker:5 joins the coordinator itself, not through the relay worker:256"),
    }, job.report()
    # Their twins, the right way, joined, and the job started.
    started(job)


def test_an_abort_reaches_every_task_through_the_relays_before_they_exit(tfboot, tmp_path, nofile_raised):
    job = TreeJob(tfboot, tmp_path, extra=["--env-check", "fail"], odd=200)

    async def scenario():
        async with job:
            await job.coordinator.wait(15)
            for relay in job.relays.values():
                await relay.wait(15)
    asyncio.run(scenario())
    assert {f.outcome for f in job.fleet} == {"abort"}, job.report()
    assert all("absent on" in f.abort_message or "3.0.0-other on worker:200" in f.abort_message for f in job.fleet)
    assert "worker:200" in job.carried_by(128)[0].abort_message
    assert [job.coordinator.returncode, *(relay.returncode for relay in job.relays.values())] == [6, 6, 6], job.report()


def test_a_restart_in_place_releases_every_task_again_through_the_relays(tfboot, tmp_path, nofile_raised):
    job = TreeJob(tfboot, tmp_path, extra=["--max-restarts", "1"])

    async def scenario():
        async with job:
            started(job)
            failing = next(f for f in job.fleet if relay_of(f.index, TASKS) == 256)
            failing.exit(1, "imitated failure")
            await wait_until(lambda: all(len(f.starts) >= 2 or (f.last and f.last[0] not in ("start", "restart"))
                                         for f in job.fleet), time.monotonic() + 60)
    asyncio.run(scenario())
    assert {f.after for f in job.fleet} == {"restart"}, job.report()
    assert all(len(f.starts) == 2 for f in job.fleet), {f.last for f in job.fleet if len(f.starts) < 2}
    assert all(relay.first("restarting the job in place") for relay in job.relays.values()), job.report()
