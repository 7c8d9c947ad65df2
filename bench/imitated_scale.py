"""The start tree at scale with imitated tasks (``scripts/bench scale``): one real tfboot
coordinator, worker:0 of ``worker=P``, the relays worker:128, 256, ... real tfboots too (above 128
tasks), and the other tasks imitated in worker processes of 16,000 tasks each
(tests/harness/fleet_pool.py over tests/harness/imitated_tasks.py, the imitation
tests/integration/test_scale.py uses), connecting from many loopback addresses, so that one
machine holds P up to ~100,000. Per size, three jobs, each timed from this process's
clock (CLOCK_MONOTONIC) as the imitated tasks send and receive:

* start: P-2 tasks present, then the last hello; until every task was told `start`;
  failure (same job, once it runs: the coordinator and every relay wrote startup.json and started
  its command, then 1 s): one task sends exit{status 1}; until every other task got `stop`;
* restart in place (`--max-restarts 1`): the same failure, as late; until every task, having rejoined,
  was released by the restart's barrier (`start` again);
* environment check (`--env-check fail`): one task's fingerprint differs; from the last hello
  until every task got the `abort`, which must name that task.

For each figure, the coordinator's CPU (user + system, /proc/PID/stat) spent in it and its peak
RSS so far (VmHWM, /proc/PID/status), the relays' CPU summed and the largest relay's peak RSS: the
times include the imitation's own reading, which on a 2-core machine shares the CPU with them. Output:
bench-results/imitated_scale_results.md (also printed) and imitated_scale_results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from harness.fleet_pool import FleetPool  # noqa: E402
from harness.imitated_tasks import (LoopbackDns, Tfboot, fingerprint_of_a_real_task, free_tcp_port,  # noqa: E402
                                    relay_names, relays, tfboot_argv)

TICK = os.sysconf("SC_CLK_TCK")
# The coordinator's command: runs until stopped, bounded by itself (an hour).
HOLD = ["sleep", "3600"]
# Issue 38's targets, beside the figures: (start, failure, restart, CPU s, RSS MB) per size.
TARGETS = {16384: (1.0, 0.2, 1.0, 2.0, 64), 98304: (10.0, 1.0, 10.0, 10.0, 256)}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def coordinator_usage(pid: int) -> dict | None:
    """CPU seconds (user + system) and peak RSS (kB) so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return {"cpu_s": (int(fields[11]) + int(fields[12])) / TICK, "hwm_kb": hwm}


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Usage:
    """The coordinator's usage, read now, or while it runs every 20 ms: a coordinator that exits at
    the end of a phase (a stop, an abort) leaves its last reading. The relays' (real tfboots too),
    summed, read at each phase's ends."""

    def __init__(self, coordinator: Tfboot, relays, pool: FleetPool):
        self.pid = coordinator.proc.pid
        self.relays = relays
        self.pool = pool
        self.relay_last = {}  # pid -> its last reading: a relay that exits keeps it
        self.last = coordinator_usage(self.pid)
        self.relay_usage()
        self.sampler = asyncio.create_task(self._sample())

    async def _sample(self):
        rounds = 0
        while True:
            self.now()
            rounds += 1
            if rounds % 25 == 0:  # every 0.5 s: hundreds of relays cost more to read
                self.relay_usage()
            await asyncio.sleep(0.02)

    def now(self):
        usage = coordinator_usage(self.pid)
        if usage:
            self.last = usage
        return self.last

    def relay_usage(self):
        """CPU seconds of every relay together, and the largest peak RSS among them."""
        for relay in self.relays:
            if relay.proc and (reading := coordinator_usage(relay.proc.pid)):
                self.relay_last[relay.proc.pid] = reading
        readings = list(self.relay_last.values())
        if not readings:
            return None
        return {"cpu_s": sum(r["cpu_s"] for r in readings), "hwm_kb": max(r["hwm_kb"] for r in readings)}

    def imitation_cpu(self) -> float:
        """CPU seconds of this process and of the imitation's workers so far."""
        return own_cpu() + sum((coordinator_usage(pid) or {"cpu_s": 0.0})["cpu_s"] for pid in self.pool.pids)

    def close(self):
        self.sampler.cancel()


class Phase:
    """CPU of the coordinator, of the relays and of the imitation (this process and its workers)
    between begin() and end()."""

    def __init__(self, usage: Usage):
        self.usage = usage
        self.before = usage.now()
        self.relays_before = usage.relay_usage()
        self.own = usage.imitation_cpu()

    def end(self, figure: dict):
        after = self.usage.now()
        if self.before and after:
            figure["coordinator_cpu_s"] = round(after["cpu_s"] - self.before["cpu_s"], 2)
            figure["coordinator_hwm_kb"] = after["hwm_kb"]
        relays_after = self.usage.relay_usage()
        if self.relays_before and relays_after:
            figure["relays_cpu_s"] = round(relays_after["cpu_s"] - self.relays_before["cpu_s"], 2)
            figure["relay_hwm_kb"] = relays_after["hwm_kb"]
        figure["harness_cpu_s"] = round(self.usage.imitation_cpu() - self.own, 2)
        return figure


class Job:
    """One coordinator, the relays (real tfboots above 128 tasks), and the rest imitated in worker
    processes (tests/harness/fleet_pool.py), the last task joining last."""

    def __init__(self, args, p: int, fingerprint: dict, dns: str, workdir: Path, name: str, extra=(), odd=None):
        self.args, self.p, self.name = args, p, name
        self.dir = workdir / f"{name}-{p}"
        self.dir.mkdir()
        self.port, self.relay_port = free_tcp_port(), free_tcp_port()
        self.deadline = time.monotonic() + args.timeout
        self.relay_indices = relays(p)
        taken = set(self.relay_indices)
        self.leaves = [i for i in range(1, p) if i not in taken]
        self.last = p - 1
        assert self.last not in taken
        # The imitation stands for tasks on nodes of their own: at nice -10 the relays' start work here
        # (at nice 10) does not starve it past its heartbeats, which a relay would take for silence.
        self.pool = FleetPool(self.leaves, max(1, -(-len(self.leaves) // args.per_process)), niceness=-10)
        self.fleet_settings = dict(port=self.port, fingerprint=fingerprint, deadline=self.deadline, per_source=args.per_source,
                                   handshakes=args.handshakes, tasks=p, relay_port=self.relay_port,
                                   odd=[] if odd is None else [odd], odd_fingerprint=odd_fingerprint(fingerprint))
        self.coordinator = Tfboot(f"coordinator of {name} at P={p}", log_file=self.dir / "coordinator.log")
        self.relays = [Tfboot(f"relay worker:{i}", log_file=self.dir / f"relay-{i}.log") for i in self.relay_indices]
        self.metrics_port = free_tcp_port()
        options = ("--framework", args.framework, "--relay-port", str(self.relay_port), *extra)
        self.argv = lambda index, more=(): tfboot_argv(args.tfboot, index, p, self.port, dns, self.dir / "logs", HOLD,
                                                       start_timeout=f"{int(args.timeout)}s", extra=(*more, *options))
        self.result = {"job": name, "p": p, "relays": len(self.relays), "problems": []}
        self.usage = None

    def problem(self, text: str):
        self.result["problems"].append(text)
        log(f"    {self.name} P={self.p}: {text}")

    @staticmethod
    def fates(summary: dict, key="last") -> str:
        return ", ".join(f"{what} {count}" for what, count in summary[key].most_common())

    async def until(self, predicate, seconds: float, exclude=()):
        """Polls the workers' summary until `predicate(summary)`; the last summary. A coordinator that
        exits ends the wait 5 s later: its relays may still be passing on its last word."""
        until = time.monotonic() + seconds
        while True:
            summary = await self.pool.summary(exclude)
            if predicate(summary) or time.monotonic() >= until:
                return summary
            if self.coordinator.returncode is not None:
                until = min(until, time.monotonic() + 5)
            await asyncio.sleep(0.2)

    async def gather(self) -> bool:
        """Every task but the last present; the last not yet connected."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        await self.coordinator.start(self.argv(0, ("--metrics-port", str(self.metrics_port))), env, self.dir)
        # On a cluster each relay's own start work (its plan, files and command, tens of ms at these
        # sizes) runs on a node of its own; here hundreds share 2 cores with the coordinator, which
        # runs first (nice 10 for the relays), so that it is not starved past its heartbeats.
        for index, relay in zip(self.relay_indices, self.relays):
            await relay.start(["nice", "-n", "10", *self.argv(index)], env, self.dir)
        self.usage = Usage(self.coordinator, self.relays, self.pool)
        await self.pool.start(**self.fleet_settings)
        began = time.monotonic()
        await self.pool.join([i for i in self.leaves if i != self.last])
        summary = await self.until(lambda s: s["accepted_or_ended"] == s["n"], self.deadline - time.monotonic(), [self.last])
        self.result["hellos_s"] = round(time.monotonic() - began, 2)
        log(f"    {self.name} P={self.p}: {summary['accepted']}/{summary['n']} imitated tasks present in "
            f"{self.result['hellos_s']:.1f} s, through {len(self.relays)} relays")
        if summary["accepted"] < summary["n"]:
            self.problem(f"only {summary['accepted']} of {summary['n']} tasks present ({self.fates(summary, 'outcome')}; connect "
                         f"errors: {dict(summary['connect_errors']) or 'none'}; coordinator exit {self.coordinator.returncode})")
            return False
        await asyncio.sleep(1.0)  # the barrier settles: heartbeats both ways, nothing in flight
        if self.name == "start+failure":  # what an operator reads of a stuck start, one task missing
            for path in ("/status", "/metrics"):
                self.result[f"http{path}"] = await http_get(self.metrics_port, path)
        return True

    async def last_hello(self, figure: dict, done, latest: str, until_s: float):
        """The last task joins; `figure` gets the time from its hello until `done(summary)`, to the
        summary's `latest` time."""
        phase = Phase(self.usage)
        await self.pool.join([self.last])
        until = time.monotonic() + 30
        while (last := await self.pool.task(self.last))["hello_at"] is None and not last["outcome"] and time.monotonic() < until:
            await asyncio.sleep(0.05)
        summary = await self.until(done, until_s)
        self.summary = summary
        if last["hello_at"] is None or not done(summary):
            phase.end(figure)
            return self.problem(f"not every task got there: {self.fates(summary)}")
        figure["s"] = round(summary[latest] - last["hello_at"], 3)
        phase.end(figure)

    async def running(self):
        """Until the coordinator and every relay wrote startup.json (their start work done, their
        command next), then 1 s: a failure comes to a job that runs, not to one still starting,
        whose start work here shares 2 cores that, on a cluster, are a node's each. The wait is
        `running_s` in the result."""
        began = time.monotonic()
        files = [self.dir / "logs" / f"worker_{i}" / "startup.json" for i in (0, *self.relay_indices)]
        until = began + self.args.phase_timeout
        while (waiting := [f for f in files if not f.exists()]) and time.monotonic() < until:
            await asyncio.sleep(0.1)
        self.result["running_s"] = round(time.monotonic() - began, 2)
        if waiting:
            self.problem(f"{len(waiting)} of coordinator and relays wrote no startup.json in {self.args.phase_timeout:.0f} s")
        await asyncio.sleep(1.0)

    async def stop(self):
        if self.usage:
            self.usage.close()
            self.result["coordinator_peak_rss_kb"] = (self.usage.last or {}).get("hwm_kb")
            self.result["coordinator_cpu_s"] = (self.usage.last or {}).get("cpu_s")
        await self.pool.close()
        for relay in self.relays:
            if relay.proc and relay.returncode is None:
                relay.proc.terminate()
        await self.coordinator.stop()
        for relay in self.relays:
            await relay.stop()
        lines = self.coordinator.read_log()
        self.result["coordinator_exit"] = self.coordinator.returncode
        self.result["coordinator_log_lines"] = len(lines)
        startup = self.dir / "logs" / "worker_0" / "startup.json"
        self.result["startup_json_bytes"] = startup.stat().st_size if startup.exists() else None
        missing = [line for _, line in lines if "; missing: " in line]
        self.result["longest_log_line"] = max((len(line) for _, line in lines), default=0)
        self.result["longest_missing_line"] = max((len(line) for line in missing), default=None)
        errors = [line for _, line in lines if " error " in line or " warning " in line][:5]
        if self.result["problems"] and errors:
            self.result["coordinator_errors"] = errors


async def http_get(port: int, path: str) -> dict:
    """The size of an answer of the coordinator's metrics server, and how long it took."""
    began = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        writer.write(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
        body = await asyncio.wait_for(reader.read(-1), 30)
        writer.close()
    except (OSError, asyncio.TimeoutError) as why:
        return {"error": repr(why)}
    head, _, content = body.partition(b"\r\n\r\n")
    return {"status": head.split(b"\r\n", 1)[0].decode(errors="replace"), "bytes": len(content),
            "s": round(time.monotonic() - began, 3)}


def spread(times: list[float], since: float) -> list[float]:
    """When the first, the median and the 90th-percentile task heard it, from `since`."""
    if not times:
        return []
    return [round(times[int(q * (len(times) - 1))] - since, 3) for q in (0.0, 0.5, 0.9)]


def odd_fingerprint(fingerprint: dict) -> dict:
    odd = json.loads(json.dumps(fingerprint))
    for key, value in odd.items():
        if isinstance(value, str) and value:
            odd[key] = value + "-other"
            return odd
    odd["python"] = "3.0.0-other"
    return odd


def a_leaf(p: int, near: int) -> int:
    """A task near `near` that is neither a relay nor the coordinator nor the last to join."""
    index = near
    while index % 128 == 0 or index == p - 1:
        index += 1
    return index


def everyone(key: str, what: str):
    return lambda s: s[key][what] == s["n"]


async def start_and_failure(args, p, fingerprint, dns, workdir) -> dict:
    job = Job(args, p, fingerprint, dns, workdir, "start+failure")
    try:
        if not await job.gather():
            return job.result
        start = job.result["start"] = {}
        await job.last_hello(start, everyone("outcome", "start"), "latest_start", args.phase_timeout)
        if "s" not in start:
            return job.result
        if job.summary["different_starts"]:
            job.problem(f"{job.summary['different_starts']} tasks got a start unlike the first one's")
        if differences := json.loads(job.summary["start_line"]).get("environment_differences"):
            job.problem(f"the start found environment differences: {differences}")
        await job.running()
        failing = a_leaf(p, p // 2)
        failure = job.result["failure"] = {}
        phase = Phase(job.usage)
        sent = await job.pool.exit(failing, 1, "imitated failure")
        summary = await job.until(lambda s: s["after"]["nothing yet"] == 0, args.phase_timeout, [failing])
        if summary["after"]["stop"] == summary["n"]:
            failure["s"] = round(summary["latest_after"] - sent, 3)
            failure["spread_s"] = spread(await job.pool.after_times([failing]), sent)
            if f"worker:{failing}" not in (summary["stop_message"] or ""):
                job.problem(f"the stop does not name worker:{failing}: {summary['stop_message']!r}")
        else:
            job.problem(f"not every task was told to stop: {job.fates(summary, 'after')}")
        phase.end(failure)
        return job.result
    finally:
        await job.stop()


async def restart(args, p, fingerprint, dns, workdir) -> dict:
    job = Job(args, p, fingerprint, dns, workdir, "restart", extra=("--max-restarts", "1"))
    try:
        if not await job.gather():
            return job.result
        start = {}
        await job.last_hello(start, everyone("outcome", "start"), "latest_start", args.phase_timeout)
        job.result["first_start_s"] = start.get("s")
        if "s" not in start:
            return job.result
        await job.running()
        failing = a_leaf(p, p // 2)
        figure = job.result["restart"] = {}
        phase = Phase(job.usage)
        sent = await job.pool.exit(failing, 1, "imitated failure")
        summary = await job.until(lambda s: s["after"]["nothing yet"] == 0, args.phase_timeout)
        if summary["after"]["restart"] == summary["n"]:
            figure["told_s"] = round(summary["latest_after"] - sent, 3)
            figure["told_spread_s"] = spread(await job.pool.after_times(), sent)
        summary = await job.until(lambda s: s["released_again"] + s["ended_otherwise"] == s["n"], args.phase_timeout)
        if summary["released_again"] == summary["n"]:
            figure["s"] = round(summary["latest_second_start"] - sent, 3)
        else:
            job.problem(f"not every task was released again: {job.fates(summary)} ({summary['error_detail']}); connect errors "
                        f"{dict(summary['connect_errors']) or 'none'}")
        phase.end(figure)
        return job.result
    finally:
        await job.stop()


async def environment_check(args, p, fingerprint, dns, workdir) -> dict:
    odd = a_leaf(p, p // 3)
    job = Job(args, p, fingerprint, dns, workdir, "env-check", extra=("--env-check", "fail"), odd=odd)
    try:
        if not await job.gather():
            return job.result
        figure = job.result["env_check"] = {}
        await job.last_hello(figure, lambda s: s["outcome"]["nothing yet"] == 0, "latest_ended", args.phase_timeout)
        summary = job.summary
        if summary["outcome"]["abort"] != summary["n"]:
            figure.pop("s", None)
            job.problem(f"not every task got the abort: {job.fates(summary, 'outcome')}")
        elif f"worker:{odd}" not in (summary["abort_message"] or ""):
            figure.pop("s", None)
            job.problem(f"the abort does not name worker:{odd}: {summary['abort_message'][:300]!r}")
        else:
            figure["abort_bytes"] = len(summary["abort_message"])
        return job.result
    finally:
        await job.stop()


SCENARIOS = {"start+failure": start_and_failure, "restart": restart, "env-check": environment_check}


async def run_size(args, p, fingerprint, dns, workdir) -> list[dict]:
    results = []
    for name in args.scenarios:
        began = time.monotonic()
        result = await SCENARIOS[name](args, p, fingerprint, dns, workdir)
        result["wall_s"] = round(time.monotonic() - began, 1)
        log(f"  P={p} {name}: " + json.dumps({k: v for k, v in result.items() if k not in ("job", "p")}))
        results.append(result)
    return results


def fit_exponent(points):
    points = [(p, v) for p, v in points if v and v > 0]
    if len(points) < 2:
        return None
    xs = [math.log(p) for p, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else None


def render(report: dict) -> str:
    rows = {}
    for result in report["jobs"]:
        rows.setdefault(result["p"], {})[result["job"]] = result

    def cell(result, key):
        figure = (result or {}).get(key) or {}
        if "s" not in figure:
            return "failed" if result else "—"
        return (f"{figure['s']:.2f} s ({figure.get('coordinator_cpu_s', float('nan')):.2f} s, "
                f"{figure.get('coordinator_hwm_kb', 0) / 1024:.0f} MB; relays {figure.get('relays_cpu_s', float('nan')):.2f} s, "
                f"{figure.get('relay_hwm_kb', 0) / 1024:.0f} MB)")

    out = ["# The start tree at scale, imitated tasks (`scripts/bench scale`)", "",
           f"{report['date']}, {report['machine']}; load {report['load_start']:.1f} at the start. One real coordinator and "
           "P/128-1 real relays, the other tasks imitated in worker processes on loopback. Each cell: time (coordinator "
           "CPU in it, its peak RSS so far; the relays' CPU in it summed, the largest relay's peak RSS).", "",
           "| P | start after last hello | failure to every stop | restart re-released | env check: abort naming it | hellos (P-2) |",
           "|---:|---:|---:|---:|---:|---:|"]
    for p, jobs in sorted(rows.items()):
        a, r, e = jobs.get("start+failure"), jobs.get("restart"), jobs.get("env-check")
        hellos = a.get("hellos_s") if a else None
        out.append(f"| {p:,} | {cell(a, 'start')} | {cell(a, 'failure')} | {cell(r, 'restart')} | {cell(e, 'env_check')} | "
                   f"{f'{hellos:.1f} s' if hellos else '—'} |")
    out += ["", "The imitation's own CPU in each figure (it shares the cores with the coordinator), and what an "
            "operator reads (item 4 of issue 38: bounded at any size?), with one task missing:", "",
            "| P | imitation CPU: start / failure / restart / env check | failure: first / median / 90% told | /status | /metrics | "
            "startup.json | longest missing-task line |", "|---:|---|---|---:|---:|---:|---:|"]
    for p, jobs in sorted(rows.items()):
        a, r, e = jobs.get("start+failure") or {}, jobs.get("restart") or {}, jobs.get("env-check") or {}
        cpu = " / ".join(f"{(job.get(key) or {}).get('harness_cpu_s', float('nan')):.2f} s"
                         for job, key in ((a, "start"), (a, "failure"), (r, "restart"), (e, "env_check")))

        def size(value):
            return f"{value / 1e3:,.1f} kB" if isinstance(value, int) else "—"
        missing = a.get("longest_missing_line")
        told = " / ".join(f"{t:.2f} s" for t in (a.get("failure") or {}).get("spread_s", [])) or "—"
        out.append(f"| {p:,} | {cpu} | {told} | {size(a.get('http/status', {}).get('bytes'))} | "
                   f"{size(a.get('http/metrics', {}).get('bytes'))} | {size(a.get('startup_json_bytes'))} | "
                   f"{f'{missing} chars' if missing else '—'} |")
    exps = []
    for label, job, key in (("start", "start+failure", "start"), ("failure", "start+failure", "failure"),
                            ("restart", "restart", "restart"), ("env check", "env-check", "env_check")):
        k = fit_exponent([(p, ((jobs.get(job) or {}).get(key) or {}).get("s")) for p, jobs in rows.items()])
        exps.append(f"{label} P^{k:.2f}" if k is not None else f"{label} —")
    out += ["", "Exponents (least squares on logs, sizes that ran): " + ", ".join(exps) + ".", ""]
    problems = [f"* {r['job']} at P={r['p']}: " + "; ".join(r["problems"]) for r in report["jobs"] if r["problems"]]
    problems += [f"* P={skipped['p']:,} not run: {skipped['why']}" for skipped in report.get("not_run", [])]
    if problems:
        out += ["Problems:", "", *problems, ""]
    return "\n".join(out) + "\n"


def raise_descriptor_limit() -> int:
    """The soft descriptor limit raised to the hard one (inherited by the tfboots and the workers)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def coordinator_connections(p: int) -> int:
    """launcher/control/protocol/tree.h: one per task in a star; above 128 tasks one per task of the
    coordinator's own group and two per relay."""
    return p if p <= 128 else 127 + 2 * ((p - 1) // 128)


def too_large(p: int, limit: int, per_process: int) -> str | None:
    """Why a job of p tasks cannot run under this descriptor limit, if it cannot: the coordinator
    needs its connections and an eighth (launcher/control/socket.cpp, make_room_for_tasks; else it
    exits 7), each imitation worker one per task it holds and some."""
    coordinator, imitation = coordinator_connections(p) * 9 // 8 + 64, min(per_process, p) + 256
    if limit == resource.RLIM_INFINITY or max(coordinator, imitation) <= limit:
        return None
    return (f"descriptors: the coordinator needs {coordinator:,} and each imitation worker {imitation:,}, the hard "
            f"RLIMIT_NOFILE is {limit:,}")


async def amain(args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="tfboot-imitated-scale-"))
    report = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
              "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}", "load_start": os.getloadavg()[0],
              "sizes": args.sizes, "jobs": []}
    try:
        with LoopbackDns(relay_names()) as dns:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            fingerprint = await fingerprint_of_a_real_task(args.tfboot, env, dns.address, workdir)
            for p in args.sizes:
                if why := too_large(p, args.nofile, args.per_process):
                    log(f"  P={p}: not run: {why}")
                    report.setdefault("not_run", []).append({"p": p, "why": why})
                    continue
                report["jobs"] += await run_size(args, p, fingerprint, dns.address, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"imitated scale: kept {workdir}")
    return report


def main(argv=None) -> int:
    build_dir = os.environ.get("TFBOOT_BUILD_DIR", "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, build_dir, "launcher", "tfboot"))
    ap.add_argument("--sizes", default="2048,16384,98304", help="tasks per job, comma-separated")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="of " + ", ".join(SCENARIOS))
    ap.add_argument("--timeout", type=float, default=900, help="seconds a job may take in all")
    ap.add_argument("--phase-timeout", type=float, default=300, help="seconds a measured phase may take")
    ap.add_argument("--per-source", type=int, default=2048, help="imitated tasks per loopback source address")
    ap.add_argument("--handshakes", type=int, default=64, help="hellos in flight at once, per imitation worker")
    ap.add_argument("--per-process", type=int, default=16000, help="imitated tasks per worker process")
    # TensorFlow's TF_CONFIG lists every task: past ~6,000 tasks it is over Linux's 128 KiB for one
    # environment variable, and tfboot refuses to start (exit 2). PyTorch's variables do not grow.
    ap.add_argument("--framework", default="pytorch", help="the coordinator's --framework")
    ap.add_argument("--keep", action="store_true", help="keep the coordinators' logs")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    args = ap.parse_args(argv)
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    args.scenarios = [x for x in args.scenarios.split(",") if x]
    if not args.sizes or not all(4 <= p <= 200_000 for p in args.sizes) or not set(args.scenarios) <= set(SCENARIOS):
        log("imitated scale: sizes 4..200000, scenarios of " + ", ".join(SCENARIOS))
        return 2
    if not os.access(args.tfboot, os.X_OK):
        log(f"imitated scale: {args.tfboot} is not an executable (scripts/build release)")
        return 2
    args.nofile = raise_descriptor_limit()
    report = asyncio.run(amain(args))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "imitated_scale_results.json"), "w") as f:
        json.dump(report, f, indent=1)
    markdown = render(report)
    with open(os.path.join(args.out, "imitated_scale_results.md"), "w") as f:
        f.write(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
