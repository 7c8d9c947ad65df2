"""The star at scale with imitated tasks (``scripts/bench scale``): one real tfboot coordinator,
worker:0 of ``worker=P``, and P-1 tasks imitated in this process (tests/harness/imitated_tasks.py,
the imitation tests/integration/test_scale.py uses), connecting from many loopback addresses, so
that one machine holds P up to ~100,000. Per size, three jobs, each timed from this process's
clock (CLOCK_MONOTONIC) as the imitated tasks send and receive:

* start: P-2 tasks present, then the last hello; until every task was told `start`;
  failure (same job, 1 s later): one task sends exit{status 1}; until every other task got `stop`;
* restart in place (`--max-restarts 1`): the same failure; until every task, having rejoined,
  was released by the restart's barrier (`start` again);
* environment check (`--env-check fail`): one task's fingerprint differs; from the last hello
  until every task got the `abort`, which must name that task.

For each figure, the coordinator's CPU (user + system, /proc/PID/stat) spent in it and its peak
RSS so far (VmHWM, /proc/PID/status), and this process's CPU: the times include the imitation's
own reading, which on a 2-core machine shares the CPU with the coordinator. Output:
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

from harness.imitated_tasks import (Fleet, LoopbackDns, Tfboot, fingerprint_of_a_real_task,  # noqa: E402
                                    free_tcp_port, tfboot_argv, wait_until)

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
    the end of a phase (a stop, an abort) leaves its last reading."""

    def __init__(self, coordinator: Tfboot):
        self.pid = coordinator.proc.pid
        self.last = coordinator_usage(self.pid)
        self.sampler = asyncio.create_task(self._sample())

    async def _sample(self):
        while True:
            self.now()
            await asyncio.sleep(0.02)

    def now(self):
        usage = coordinator_usage(self.pid)
        if usage:
            self.last = usage
        return self.last

    def close(self):
        self.sampler.cancel()


class Phase:
    """CPU of the coordinator and of this process between begin() and end()."""

    def __init__(self, usage: Usage):
        self.usage = usage
        self.before = usage.now()
        self.own = own_cpu()

    def end(self, figure: dict):
        after = self.usage.now()
        if self.before and after:
            figure["coordinator_cpu_s"] = round(after["cpu_s"] - self.before["cpu_s"], 2)
            figure["coordinator_hwm_kb"] = after["hwm_kb"]
        figure["harness_cpu_s"] = round(own_cpu() - self.own, 2)
        return figure


class Job:
    """One coordinator and P-1 imitated tasks."""

    def __init__(self, args, p: int, fingerprint: dict, dns: str, workdir: Path, name: str, extra=(), odd=None):
        self.args, self.p, self.name = args, p, name
        self.dir = workdir / f"{name}-{p}"
        self.dir.mkdir()
        self.port = free_tcp_port()
        self.deadline = time.monotonic() + args.timeout
        self.fleet = Fleet(self.port, fingerprint, range(1, p), self.deadline, per_source=args.per_source,
                           handshakes_at_once=args.handshakes)
        if odd is not None:  # one task reports another environment
            self.fleet.tasks[odd].fingerprint = odd_fingerprint(fingerprint)
        self.coordinator = Tfboot(f"coordinator of {name} at P={p}", log_file=self.dir / "coordinator.log")
        self.metrics_port = free_tcp_port()
        self.argv = tfboot_argv(args.tfboot, 0, p, self.port, dns, self.dir / "logs", HOLD,
                                start_timeout=f"{int(args.timeout)}s",
                                extra=("--metrics-port", str(self.metrics_port), "--framework", args.framework, *extra))
        self.result = {"job": name, "p": p, "problems": []}
        self.usage = None

    def problem(self, text: str):
        self.result["problems"].append(text)
        log(f"    {self.name} P={self.p}: {text}")

    def fates(self, tasks, attribute="last") -> str:
        counts = {}
        for task in tasks:
            what = getattr(task, attribute)
            key = (what[0] if isinstance(what, tuple) else what) or "nothing yet"
            counts[key] = counts.get(key, 0) + 1
        return ", ".join(f"{what} {count}" for what, count in sorted(counts.items(), key=lambda kv: -kv[1]))

    async def gather(self) -> bool:
        """Every task but the last present; the last not yet connected."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        await self.coordinator.start(self.argv, env, self.dir)
        self.usage = Usage(self.coordinator)
        began = time.monotonic()
        first = list(range(1, self.p - 1))
        self.fleet.join(first)
        tasks = [self.fleet.tasks[i] for i in first]
        until = self.deadline
        await wait_until(lambda: all(t.accepted or t.outcome for t in tasks) or self.coordinator.returncode is not None,
                         until, step=0.2)
        self.result["hellos_s"] = round(time.monotonic() - began, 2)
        accepted = sum(t.accepted for t in tasks)
        log(f"    {self.name} P={self.p}: {accepted}/{len(tasks)} present in {self.result['hellos_s']:.1f} s "
            f"(harness CPU {own_cpu():.1f} s so far)")
        if accepted < len(tasks):
            self.problem(f"only {accepted} of {len(tasks)} tasks present ({self.fates(tasks)}; connect errors: "
                         f"{dict(self.fleet.connect_errors) or 'none'}; coordinator exit {self.coordinator.returncode})")
            return False
        await asyncio.sleep(1.0)  # the barrier settles: heartbeats both ways, nothing in flight
        if self.name == "start+failure":  # what an operator reads of a stuck start, one task missing
            for path in ("/status", "/metrics"):
                self.result[f"http{path}"] = await http_get(self.metrics_port, path)
        return True

    async def last_hello(self, figure: dict, ended, until_s: float):
        """The last task joins; `figure` gets the time from its hello until `ended(task)` holds for
        every task (each task's time: the second element of what `ended` returns)."""
        phase = Phase(self.usage)
        last = self.fleet.tasks[self.p - 1]
        self.fleet.join([self.p - 1])
        await wait_until(lambda: last.hello_at is not None or last.outcome, time.monotonic() + 30)
        tasks = list(self.fleet)
        done = await wait_until(lambda: all(ended(t)[0] is not None for t in tasks), time.monotonic() + until_s)
        if last.hello_at is None or not done:
            phase.end(figure)
            return self.problem(f"not every task got there: {self.fates(tasks)}")
        figure["s"] = round(max(ended(t)[1] for t in tasks) - last.hello_at, 3)
        phase.end(figure)

    async def stop(self):
        if self.usage:
            self.usage.close()
            self.result["coordinator_peak_rss_kb"] = (self.usage.last or {}).get("hwm_kb")
            self.result["coordinator_cpu_s"] = (self.usage.last or {}).get("cpu_s")
        await self.fleet.close()
        await self.coordinator.stop()
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


def odd_fingerprint(fingerprint: dict) -> dict:
    odd = json.loads(json.dumps(fingerprint))
    for key, value in odd.items():
        if isinstance(value, str) and value:
            odd[key] = value + "-other"
            return odd
    odd["python"] = "3.0.0-other"
    return odd


async def start_and_failure(args, p, fingerprint, dns, workdir) -> dict:
    job = Job(args, p, fingerprint, dns, workdir, "start+failure")
    try:
        if not await job.gather():
            return job.result
        start = job.result["start"] = {}
        await job.last_hello(start, lambda t: (t.start_at, t.start_at), args.phase_timeout)
        if "s" not in start:
            return job.result
        if differences := json.loads(job.fleet.start_line).get("environment_differences"):
            job.problem(f"the start found environment differences: {differences}")
        await asyncio.sleep(1.0)
        failing = job.fleet.tasks[p // 2]
        others = [t for t in job.fleet if t is not failing]
        failure = job.result["failure"] = {}
        phase = Phase(job.usage)
        sent = failing.exit(1, "imitated failure")
        done = await wait_until(lambda: all(t.after is not None for t in others), time.monotonic() + args.phase_timeout)
        stopped = [t for t in others if t.after == "stop"]
        if done and len(stopped) == len(others):
            failure["s"] = round(max(t.after_at for t in stopped) - sent, 3)
            if failing.task not in (stopped[0].stop_message or ""):
                job.problem(f"the stop does not name {failing.task}: {stopped[0].stop_message!r}")
        else:
            job.problem(f"not every task was told to stop: {job.fates(others, 'after')}")
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
        await job.last_hello(start, lambda t: (t.start_at, t.start_at), args.phase_timeout)
        job.result["first_start_s"] = start.get("s")
        if "s" not in start:
            return job.result
        await asyncio.sleep(1.0)
        failing = job.fleet.tasks[p // 2]
        tasks = list(job.fleet)
        figure = job.result["restart"] = {}
        phase = Phase(job.usage)
        sent = failing.exit(1, "imitated failure")
        told = await wait_until(lambda: all(t.after is not None for t in tasks), time.monotonic() + args.phase_timeout)
        if told and all(t.after == "restart" for t in tasks):
            figure["told_s"] = round(max(t.after_at for t in tasks) - sent, 3)
        done = await wait_until(lambda: all(len(t.starts) >= 2 or (t.last and t.last[0] not in ("start", "restart"))
                                            for t in tasks), time.monotonic() + args.phase_timeout)
        if done and all(len(t.starts) >= 2 for t in tasks):
            figure["s"] = round(max(t.starts[1] for t in tasks) - sent, 3)
        else:
            job.problem(f"not every task was released again: {job.fates(tasks)}; connect errors "
                        f"{dict(job.fleet.connect_errors) or 'none'}")
        phase.end(figure)
        return job.result
    finally:
        await job.stop()


async def environment_check(args, p, fingerprint, dns, workdir) -> dict:
    odd = p // 3
    job = Job(args, p, fingerprint, dns, workdir, "env-check", extra=("--env-check", "fail"), odd=odd)
    try:
        if not await job.gather():
            return job.result
        figure = job.result["env_check"] = {}
        await job.last_hello(figure, lambda t: (t.outcome, t.ended_at), args.phase_timeout)
        tasks = list(job.fleet)
        aborted = [t for t in tasks if t.outcome == "abort"]
        if len(aborted) != len(tasks):
            figure.pop("s", None)
            job.problem(f"not every task got the abort: {job.fates(tasks, 'outcome')}")
        elif f"worker:{odd}" not in (aborted[0].abort_message or ""):
            figure.pop("s", None)
            job.problem(f"the abort does not name worker:{odd}: {aborted[0].abort_message[:300]!r}")
        else:
            figure["abort_bytes"] = len(aborted[0].abort_message)
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
                f"{figure.get('coordinator_hwm_kb', 0) / 1024:.0f} MB)")

    out = ["# The star at scale, imitated tasks (`scripts/bench scale`)", "",
           f"{report['date']}, {report['machine']}; load {report['load_start']:.1f} at the start. One real coordinator, "
           "P-1 tasks imitated in one asyncio process on loopback. Each cell: time (coordinator CPU in it, its peak "
           "RSS so far).", "",
           "| P | start after last hello | failure to every stop | restart re-released | env check: abort naming it | hellos (P-2) |",
           "|---:|---:|---:|---:|---:|---:|"]
    for p, jobs in sorted(rows.items()):
        a, r, e = jobs.get("start+failure"), jobs.get("restart"), jobs.get("env-check")
        hellos = a.get("hellos_s") if a else None
        out.append(f"| {p:,} | {cell(a, 'start')} | {cell(a, 'failure')} | {cell(r, 'restart')} | {cell(e, 'env_check')} | "
                   f"{f'{hellos:.1f} s' if hellos else '—'} |")
    out += ["", "The imitation's own CPU in each figure (it shares the cores with the coordinator), and what an "
            "operator reads (item 4 of issue 38: bounded at any size?), with one task missing:", "",
            "| P | imitation CPU: start / failure / restart / env check | /status | /metrics | "
            "startup.json | longest missing-task line |", "|---:|---|---:|---:|---:|---:|"]
    for p, jobs in sorted(rows.items()):
        a, r, e = jobs.get("start+failure") or {}, jobs.get("restart") or {}, jobs.get("env-check") or {}
        cpu = " / ".join(f"{(job.get(key) or {}).get('harness_cpu_s', float('nan')):.2f} s"
                         for job, key in ((a, "start"), (a, "failure"), (r, "restart"), (e, "env_check")))

        def size(value):
            return f"{value / 1e3:,.1f} kB" if isinstance(value, int) else "—"
        missing = a.get("longest_missing_line")
        out.append(f"| {p:,} | {cpu} | {size(a.get('http/status', {}).get('bytes'))} | "
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


def raise_descriptor_limit(p: int) -> int:
    """This process holds a connection per imitated task and the coordinator (which inherits the
    limit) one per task: the hard limit is raised towards fs.nr_open, which needs CAP_SYS_RESOURCE
    (a container may lack it even as root). The limit in force."""
    needed = 2 * p + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        with open("/proc/sys/fs/nr_open") as f:
            nr_open = int(f.read())
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, nr_open),) * 2)
            return min(needed, nr_open)
        except (ValueError, OSError) as why:
            log(f"imitated scale: the descriptor limit stays at {hard} ({why}: no CAP_SYS_RESOURCE)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def too_large(p: int, limit: int) -> str | None:
    """Why a job of p tasks cannot run under this descriptor limit, if it cannot: the coordinator
    needs p + p/8 + 64 (launcher/control/socket.cpp, make_room_for_tasks; else it exits 7), this
    process one per imitated task and some."""
    coordinator, imitation = p + p // 8 + 64, p + 256
    if limit == resource.RLIM_INFINITY or max(coordinator, imitation) <= limit:
        return None
    return (f"descriptors: the coordinator needs {coordinator:,} and the imitation {imitation:,}, the hard "
            f"RLIMIT_NOFILE is {limit:,} and cannot be raised here")


async def amain(args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="tfboot-imitated-scale-"))
    report = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
              "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}", "load_start": os.getloadavg()[0],
              "sizes": args.sizes, "jobs": []}
    try:
        with LoopbackDns() as dns:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            fingerprint = await fingerprint_of_a_real_task(args.tfboot, env, dns.address, workdir)
            for p in args.sizes:
                if why := too_large(p, args.nofile):
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
    ap.add_argument("--handshakes", type=int, default=64, help="hellos in flight at once")
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
    args.nofile = raise_descriptor_limit(max(args.sizes))
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
