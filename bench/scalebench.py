"""The start barrier at scale (``scripts/bench scale``): how the coordinator's cost grows with the
number of tasks P of one job, for two tfboot binaries in the same run (bench/README.md says what
each number means).

One job is P tfboot processes on this machine, worker:0 .. worker:P-1 of ``worker=P``, each in init
mode (``--init``, supervised), worker:0 the coordinator on control port 2220. They share one
network namespace made for the job: the coordinator's work (hellos, every name checked once, the
start message to every task, heartbeats) is the same over loopback, and 1,024 namespaces of their
own, as the harness gives its pods, would cost more than the tasks. What they need of a pod, a
routable address and /etc files, the namespace gives them all alike: eth0 (one end of a veth pair
inside it; the dummy driver is missing in some containers) with 10.77.0.1, and one mount namespace,
held by a sleeping process, with a generated /etc/hosts in which every task's name
``job-worker-<i>`` is that address. Names without a Service suffix are bare, and tfboot answers bare
names from /etc/hosts itself (docs/peers-and-dns.md, Peers); resolv.conf names 127.0.0.1, where nothing listens,
and a counter on UDP port 53 shows that no task sent a DNS query.

The tasks, spawned one by one (setpriv -> nsenter -> sh; spawning 1,024 takes seconds), each wait
at a gate, a FIFO, and are released together, the coordinator with the others, when its last writer
closes (a shell per task, where start_gate.py would be a Python interpreter per task: gigabytes at
1,024). From that moment the benchmark measures

* the time until every worker's command ran (each writes the time it started, then sleeps; the
  coordinator's command is ``true``: once it exits the job is done and every tfboot ends its sleep
  and exits 0), and from the tasks' logs when the coordinator saw every task, had checked every
  name, and when the last task was told to start;
* the coordinator's CPU time and peak RSS: its tfboot runs under build-bench/measure (measure.c,
  the benchmarks' static stopwatch, so that the peak RSS is tfboot's own);
* the bytes the coordinator sent from port 2220: an iptables counter in the namespace, IP packets
  with their headers;
* every tfboot's exit code.

Every job ends: once all its tfboots exited, or after ``--timeout`` (120 s), when everything in the
namespace is killed; then the namespace is deleted (named as the harness names its namespaces, so
``cleanup_stale`` removes what a killed run left). A job where a task did not run its command, a
tfboot exited non-zero or that outlived ``--timeout`` is reported as failed, with what was measured
all the same and the first error lines of the coordinator's log and of a failing worker's, and left
out of the medians and fits.

Then per binary: a·P^k fitted to each figure (least squares on logs), the marginal cost of one more
task between the two largest sizes, and both carried on paper to 10,000 tasks; per P the ratios of
the new binary to the baseline. Output: bench-results/scale_results.md (also printed) and
scale_results.json.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from harness.namespaces import add_netns, cleanup_stale, delete_netns, netns_pids, new_prefix
from harness.processes import HarnessError, kill_and_reap_pids, run_command
from jobbench import ALL_PRESENT, NAMES_VERIFIED, TOLD_START, log_time
from jobreport import fit_exponent

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

ADDRESS = "10.77.0.1"
CONTROL_PORT = 2220
PEER_TEMPLATE = "job-{type}-{index}"
TASK_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# A task's program until the gate opens: open the FIFO (the benchmark holds a writer, so this does
# not block), wait for its end of file (the last writer closed), then exec the task.
GATE_SCRIPT = 'exec 3<"$0"; read _ <&3; exec 3<&-; exec "$@"'
# A worker's command: the moment it ran (CLOCK_REALTIME, the benchmark's clock too), then sleep
# until the job is done and tfboot ends it.
WORKER_SCRIPT = 'date +%s.%N > "$0"; exec sleep "$1"'
GATE_WAIT_S = 120      # spawning 1,024 tasks on a busy machine takes seconds
PAPER_TASKS = 10000
FIGURES = {   # figure -> its column in the tables
    "all_running_s": "time to every command",
    "all_present_s": "all present",
    "names_checked_s": "names checked",
    "last_told_start_s": "last told start",
    "coordinator_cpu_s": "coordinator CPU",
    "coordinator_maxrss_kb": "coordinator peak RSS",
    "sent_bytes": "sent from port 2220",
}
PER_TASK = ("coordinator_cpu_s", "coordinator_maxrss_kb", "sent_bytes")   # carried to 10,000 tasks
LOGGED = ("all_running_s", *PER_TASK)   # on stderr as each job ends


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class JobNamespace:
    """One job's network namespace (lo; eth0 with ADDRESS; iptables counters for what the
    coordinator sends from the control port and for DNS queries) and the mount namespace with its
    /etc/hosts and resolv.conf, held by a sleeping process that every task joins. Leaving it kills
    everything that still runs in the namespace and deletes it."""

    def __init__(self, name: str, run_dir: str, p: int, lifetime_s: float):
        self.name = name
        self.run_dir = run_dir
        self.p = p
        self.lifetime_s = lifetime_s
        self.holder: subprocess.Popen | None = None

    def __enter__(self) -> JobNamespace:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _create(self) -> None:
        add_netns(self.name)
        for args in (["link", "set", "lo", "up"], ["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"],
                     ["addr", "add", f"{ADDRESS}/16", "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "eth1", "up"]):
            run_command(["ip", "-n", self.name, *args])
        iptables = ["ip", "netns", "exec", self.name, "iptables", "-w", "5", "-A", "OUTPUT"]
        run_command([*iptables, "-p", "tcp", "--sport", str(CONTROL_PORT)])
        run_command([*iptables, "-p", "udp", "--dport", "53"])
        hosts = os.path.join(self.run_dir, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            f.writelines(f"{ADDRESS} {PEER_TEMPLATE.format(type='worker', index=i)}\n" for i in range(self.p))
        resolv = os.path.join(self.run_dir, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver 127.0.0.1\n")
        script = (f'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/resolv.conf && echo ready '
                  f'&& exec sleep {self.lifetime_s:.0f}')
        self.holder = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", "--", "nsenter", f"--net=/run/netns/{self.name}", "--",
             "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, hosts, resolv],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True)
        ready, _, _ = select.select([self.holder.stdout], [], [], 10)
        line = self.holder.stdout.readline() if ready else ""
        if line.strip() != "ready":
            raise HarnessError(f"the job's mount namespace is not ready: {line.strip() or 'no answer in 10 s'}")

    def enter(self) -> list[str]:
        """The argv prefix that runs a program in both namespaces, killed if the benchmark dies."""
        return ["setpriv", "--pdeathsig", "KILL", "--", "nsenter", f"--net=/run/netns/{self.name}",
                f"--mount=/proc/{self.holder.pid}/ns/mnt", "--"]

    def counters(self) -> dict:
        """Packets and bytes of the two iptables rules: sent from the control port, sent to port 53."""
        listed = run_command(["ip", "netns", "exec", self.name, "iptables", "-w", "5", "-L", "OUTPUT", "-n", "-v", "-x"])
        found = {}
        for line in listed.stdout.splitlines():
            fields = line.split()
            for key, mark in (("control", f"spt:{CONTROL_PORT}"), ("dns", "dpt:53")):
                if mark in fields:
                    found[key] = (int(fields[0]), int(fields[1]))
        return found

    def kill_all(self) -> None:
        """SIGKILL everything in the namespace (the tasks, their commands, the holder)."""
        kill_and_reap_pids(netns_pids(self.name))

    def close(self) -> None:
        delete_netns(self.name)   # kills what still runs inside first
        if self.holder is not None:
            reap([self.holder])
            self.holder.stdout.close()


class ScaleBench:
    def __init__(self, args, workdir: str):
        self.args = args
        self.workdir = workdir
        self.netns = new_prefix() + "scale"
        self.runs = 0

    def job(self, binary: dict, p: int) -> dict:
        """One job of P tasks with this binary, from spawning them to the namespace deleted."""
        self.runs += 1
        run_dir = os.path.join(self.workdir, f"{self.runs:03d}-{binary['label']}-{p}")
        os.makedirs(os.path.join(run_dir, "started"))
        try:
            with JobNamespace(self.netns, run_dir, p, GATE_WAIT_S + self.args.timeout + 60) as ns:
                spawned = time.monotonic()
                procs, released = self.release(ns, binary, p, run_dir)
                spawn_s = time.monotonic() - spawned
                codes, timed_out = self.wait(ns, procs)
                counters = ns.counters()
            result = {"binary": binary["label"], "p": p, "spawn_s": spawn_s,
                      **self.outcome(run_dir, p, codes, timed_out, released)}
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        result["sent_packets"], result["sent_bytes"] = counters.get("control", (None, None))
        result["dns_packets"] = counters.get("dns", (None, None))[0]
        return result

    def release(self, ns: JobNamespace, binary: dict, p: int, run_dir: str) -> tuple[list[subprocess.Popen], float]:
        """Every task spawned and waiting at the gate, then released: their processes, the moment."""
        gate = os.path.join(run_dir, "gate")
        os.mkfifo(gate)
        gate_fd = os.open(gate, os.O_RDWR)
        procs = []
        try:
            for index in range(p):
                procs.append(self.spawn(ns, binary, p, index, run_dir, gate))
            wait_at_gate(procs, gate, run_dir)
        except BaseException:
            os.close(gate_fd)
            ns.kill_all()
            reap(procs)
            raise
        released = time.time()
        os.close(gate_fd)   # the last writer: every task reads its end of file and execs tfboot
        return procs, released

    def wait(self, ns: JobNamespace, procs: list[subprocess.Popen]) -> tuple[list[int], bool]:
        """Every tfboot's exit code, and whether the job outlived --timeout (then everything in the
        namespace was killed)."""
        deadline = time.monotonic() + self.args.timeout
        try:
            for proc in procs:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            ns.kill_all()
            return reap(procs), True
        return reap(procs), False

    def spawn(self, ns: JobNamespace, binary: dict, p: int, index: int, run_dir: str, gate: str) -> subprocess.Popen:
        env = {"PATH": TASK_PATH, "TFBOOT_CLUSTER": f"worker={p}", "TFBOOT_PEER_TEMPLATE": PEER_TEMPLATE,
               "TFBOOT_LOG_ROOT": os.path.join(run_dir, "logs"), "TFBOOT_STOP_GRACE": "5s"}
        tfboot = [binary["path"], "--init", "--task-type", "worker", "--task-index", str(index), "--"]
        log_path = os.path.join(run_dir, f"task-{index}.log")
        if index == 0:
            argv = [self.args.measure, "once", "--stderr", log_path, "--", *tfboot, "/bin/true"]
            out_path = os.path.join(run_dir, "measure.json")
        else:
            argv = [*tfboot, "/bin/sh", "-c", WORKER_SCRIPT, os.path.join(run_dir, "started", str(index)),
                    str(self.args.timeout + 30)]
            out_path = log_path
        with open(out_path, "w") as out:
            return subprocess.Popen([*ns.enter(), "/bin/sh", "-c", GATE_SCRIPT, gate, *argv], env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def outcome(self, run_dir: str, p: int, codes: list[int], timed_out: bool, released: float) -> dict:
        """What the files say: the coordinator's measurement, every command's start, the phases."""
        result = {"timed_out": timed_out}
        try:
            with open(os.path.join(run_dir, "measure.json")) as f:
                measured = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            measured = None
        statuses = [measured["status"] if measured else None] + codes[1:]   # None: measure was killed
        result["exit_codes"] = {"unknown" if code is None else str(code): statuses.count(code)
                                for code in sorted(set(statuses), key=str)}
        if measured:
            result.update(coordinator_cpu_s=measured["user_s"] + measured["system_s"],
                          coordinator_maxrss_kb=measured["maxrss_kb"])
        started = []
        for index in range(1, p):
            try:
                with open(os.path.join(run_dir, "started", str(index))) as f:
                    started.append(float(f.read()))
            except (OSError, ValueError):
                pass
        result["commands_run"] = len(started) + (measured is not None and measured["status"] == 0)
        if len(started) == p - 1:
            result["all_running_s"] = max(started) - released
        phases = barrier_phases(run_dir, p)
        result.update({key: at - released for key, at in phases.items()})
        problems = []
        if len(started) < p - 1:
            problems.append(f"{p - 1 - len(started)} of {p - 1} workers did not run their command")
        if any(status != 0 for status in statuses):
            problems.append("exit codes " + ", ".join(f"{code}: {n}" for code, n in result["exit_codes"].items()))
        if timed_out:
            problems.append(f"still running after --timeout {self.args.timeout:.0f} s, killed")
        result["ok"] = not problems
        if problems:
            result["problem"] = "; ".join(problems)
            # The coordinator's side and a worker's: the first that did not run its command, else
            # the first that exited non-zero.
            worker = next((i for i in range(1, p) if not os.path.exists(os.path.join(run_dir, "started", str(i)))),
                          next((i for i in range(1, p) if statuses[i] != 0), None))
            result["logs"] = {f"worker:{i}": first_error_lines(os.path.join(run_dir, f"task-{i}.log"))
                              for i in (0, worker) if i is not None}
        return result


def wait_at_gate(procs: list[subprocess.Popen], gate: str, run_dir: str) -> None:
    """Until every task has the gate open (its descriptor 3), bounded by GATE_WAIT_S; a task that
    ended before is a setup failure (nsenter, a binary that does not run)."""
    deadline = time.monotonic() + GATE_WAIT_S
    waiting = list(procs)
    while waiting:
        for proc in waiting:
            if proc.poll() is not None:
                index = procs.index(proc)
                path = os.path.join(run_dir, "measure.json" if index == 0 else f"task-{index}.log")
                with open(path, errors="replace") as f:
                    raise HarnessError(f"task {index} ended at the gate with {proc.returncode}: {f.read()[-500:]}")
        waiting = [proc for proc in waiting if not _holds(proc.pid, gate)]
        if waiting and time.monotonic() > deadline:
            raise HarnessError(f"{len(waiting)} of {len(procs)} tasks not at the gate after {GATE_WAIT_S} s")
        time.sleep(0.05 if waiting else 0)


def _holds(pid: int, path: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/3") == path
    except OSError:
        return False


def reap(procs: list[subprocess.Popen]) -> list[int]:
    """The processes' exit codes; one still running is killed first, with its session (a task not
    yet in the namespace is out of the namespace-wide kill's reach)."""
    codes = []
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        codes.append(proc.wait(timeout=10))
    return codes


def barrier_phases(run_dir: str, p: int) -> dict:
    """When the coordinator saw every task and had checked every name, and when the last worker
    was told to start (seconds since the epoch, from the text logs' timestamps); a mark a binary
    does not log is left out."""
    marks = {}
    with open(os.path.join(run_dir, "task-0.log"), errors="replace") as f:
        for line in f:
            for key, text in (("all_present_s", ALL_PRESENT), ("names_checked_s", NAMES_VERIFIED)):
                if text in line and log_time(line):
                    marks[key] = log_time(line)
    told = []
    for index in range(1, p):
        with open(os.path.join(run_dir, f"task-{index}.log"), errors="replace") as f:
            told += [log_time(line) for line in f if TOLD_START in line and log_time(line)]
    if len(told) == p - 1:
        marks["last_told_start_s"] = max(told)
    return marks


def is_error(line: str) -> bool:
    return " tfboot error " in line


def first_error_lines(path: str, count: int = 5) -> list[str]:
    """A log's first error lines (tfboot's text format), else its last lines."""
    try:
        with open(path, errors="replace") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError:
        return []
    errors = [line for line in lines if is_error(line)]
    return (errors or lines[-count:])[:count]


# ---- the report


def medians(report: dict) -> dict:
    """{label: {p: {figure: median over the successful repetitions}, with "runs" and "failed"}}."""
    table: dict = {}
    for job in report["jobs"]:
        entry = table.setdefault(job["binary"], {}).setdefault(job["p"], {"runs": 0, "failed": 0})
        entry["runs"] += 1
        entry["failed"] += not job["ok"]
    for label, sizes in table.items():
        for p, entry in sizes.items():
            ok = [job for job in report["jobs"] if job["binary"] == label and job["p"] == p and job["ok"]]
            for figure in FIGURES:
                values = [job[figure] for job in ok if job.get(figure) is not None]
                if values:
                    entry[figure] = statistics.median(values)
    return table


def fits(sizes: dict) -> dict:
    """{figure: (k, a)} of figure = a * P^k over the sizes that succeeded."""
    found = {}
    for figure in FIGURES:
        fitted = fit_exponent([(p, entry[figure]) for p, entry in sorted(sizes.items()) if figure in entry])
        if fitted:
            found[figure] = fitted
    return found


def per_task(sizes: dict, fitted: dict) -> dict | None:
    """Between the two largest successful sizes: each PER_TASK figure's cost per extra task, and at
    PAPER_TASKS tasks the largest size plus that cost per further task (linear) and a * P^k (power)."""
    done = [p for p, entry in sorted(sizes.items()) if all(figure in entry for figure in PER_TASK)]
    if len(done) < 2:
        return None
    small, large = done[-2], done[-1]
    found = {"between": [small, large]}
    for figure in PER_TASK:
        marginal = (sizes[large][figure] - sizes[small][figure]) / (large - small)
        power = fitted[figure][1] * PAPER_TASKS ** fitted[figure][0] if figure in fitted else None
        found[figure] = {"per_task": marginal, "linear": sizes[large][figure] + marginal * (PAPER_TASKS - large),
                         "power": power}
    return found


def fmt(figure: str, value) -> str:
    if value is None:
        return "—"
    if figure.endswith("_kb"):
        return f"{value / 1024:.1f} MB" if abs(value) < 1024 ** 2 else f"{value / 1024 ** 2:.2f} GB"
    if figure.endswith("_bytes"):
        for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if abs(value) >= size:
                return f"{value / size:.2f} {unit}"
        return f"{value:.0f} B"
    return f"{value * 1e3:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"


def fmt_per_task(figure: str, value: float) -> str:
    if figure.endswith("_kb"):
        return f"{value:.1f} kB"
    if figure.endswith("_bytes"):
        return f"{value / 1e3:.1f} kB"
    return f"{value * 1e3:.2f} ms"


def render(report: dict) -> str:
    env = report["environment"]
    table = medians(report)
    labels = [b["label"] for b in report["binaries"]]
    out = ["# The start barrier at scale (`scripts/bench scale`)", "",
           f"{env['date']}, {env['machine']}, load {report['load_start']:.1f} at the start, "
           f"{report['load_end']:.1f} at the end; {report['reps']} repetition{'s' if report['reps'] > 1 else ''} "
           f"per size (medians of the successful ones){', binaries alternating' if len(labels) > 1 else ''}; "
           f"each job bounded by {report['timeout_s']:.0f} s.",
           "P tfboot tasks (`--init`, `worker=P`) in one network namespace, released together from a gate; "
           "the coordinator worker:0's command `true`, the others' a time stamp and a sleep. Times from the "
           "release; CPU (user + system) and peak RSS of the coordinator's tfboot (`measure`); bytes: IP "
           "packets, headers included, sent from port 2220 (iptables).", ""]
    if max(report["load_start"], report["load_end"]) > (os.cpu_count() or 1) / 2:
        out += [f"**The machine was busy** (load above half of its {os.cpu_count()} cores): absolute times "
                "are inflated" + ("; the binaries alternate, so their ratios suffer less." if len(labels) > 1 else "."), ""]
    for binary in report["binaries"]:
        label = binary["label"]
        sizes = table.get(label, {})
        fitted = fits(sizes)
        out += [f"## {label}: `{binary['source']}`", "",
                f"{binary['version']}, sha256 {binary['sha256'][:12]}", "",
                "| P | result | " + " | ".join(FIGURES.values()) + " |",
                "|---:|---|" + "---:|" * len(FIGURES)]
        for p, entry in sorted(sizes.items()):
            result = "ok" if not entry["failed"] else f"**{entry['failed']} of {entry['runs']} failed**"
            out.append(f"| {p} | {result} | " + " | ".join(fmt(figure, entry.get(figure)) for figure in FIGURES) + " |")
        ok = [p for p, entry in sorted(sizes.items()) if entry["failed"] < entry["runs"]]
        span = f"{ok[0]}–{ok[-1]}" if len(ok) > 1 else "—"
        out.append(f"| k ({span}) | P^k | " + " | ".join(f"{fitted[f][0]:.2f}" if f in fitted else "—"
                                                      for f in FIGURES) + " |")
        out.append("")
        paper = per_task(sizes, fitted)
        if paper:
            small, large = paper["between"]
            out += [f"Per extra task between P = {small} and {large}, and on paper at {PAPER_TASKS:,} tasks "
                    f"(linear: P = {large} plus that cost per further task; P^k: the fit above):", "",
                    f"| figure | per task | at {PAPER_TASKS:,}: linear | at {PAPER_TASKS:,}: P^k |", "|---|---:|---:|---:|"]
            for figure in PER_TASK:
                cost = paper[figure]
                out.append(f"| {FIGURES[figure]} | {fmt_per_task(figure, cost['per_task'])} | "
                           f"{fmt(figure, cost['linear'])} | {fmt(figure, cost['power'])} |")
            out.append("")
    if len(labels) == 2:
        new, base = table.get(labels[0], {}), table.get(labels[1], {})
        ratio_figures = ("all_running_s", "coordinator_cpu_s", "coordinator_maxrss_kb", "sent_bytes")
        out += [f"## {labels[0]} / {labels[1]}", "",
                "| P | " + " | ".join(FIGURES[f] for f in ratio_figures) + " |", "|---:|" + "---:|" * len(ratio_figures)]
        for p in sorted(set(new) | set(base)):
            cells = []
            for figure in ratio_figures:
                a, b = new.get(p, {}).get(figure), base.get(p, {}).get(figure)
                cells.append(f"{a / b:.2f}×" if a is not None and b else "—")
            out.append(f"| {p} | " + " | ".join(cells) + " |")
        out.append("")
    dns = sum(job["dns_packets"] or 0 for job in report["jobs"])
    out.append("No task sent a DNS query (UDP port 53: 0 packets in every job)." if not dns
               else f"**{dns} DNS packets** were sent (UDP port 53): some name was not answered from /etc/hosts.")
    failed = [job for job in report["jobs"] if not job["ok"]]
    if failed:
        out += ["", "## Failed jobs", ""]
        for job in failed:
            measured = ", ".join(f"{FIGURES[figure]} {fmt(figure, job[figure])}" for figure in FIGURES
                                 if job.get(figure) is not None)
            out.append(f"* {job['binary']}, P = {job['p']}, repetition {job['rep'] + 1}: {job['problem']}; "
                       f"{job['commands_run']} of {job['p']} commands ran. Measured all the same: {measured or 'nothing'}.")
            for task, lines in job["logs"].items():
                out += ["", f"  {task}'s log ({'first error lines' if any(map(is_error, lines)) else 'last lines'}):",
                        "", "  ```", *(f"  {line}" for line in lines), "  ```"]
            out.append("")
    return "\n".join(out) + "\n"


# ---- the run


def snapshot(label: str, path: str, workdir: str) -> dict:
    """A copy of the binary (a rebuild meanwhile changes nothing), its hash and version."""
    copy = os.path.join(workdir, f"tfboot-{label}")
    shutil.copy2(path, copy)
    with open(copy, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    version = subprocess.run([copy, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return {"label": label, "source": os.path.abspath(path), "path": copy, "sha256": sha, "version": version}


def main(argv=None) -> int:
    build_dir = os.environ.get("TFBOOT_BUILD_DIR", "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, build_dir, "launcher", "tfboot"), help="the new binary")
    ap.add_argument("--baseline", help="a binary to compare it with (e.g. an older one), in the same run")
    ap.add_argument("--sizes", default="128,256,512,1024", help="tasks per job, comma-separated")
    ap.add_argument("--reps", type=int, default=1, help="repetitions of each job")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a job may take from the release")
    ap.add_argument("--measure", default=os.path.join(REPO, "build-bench", "measure"),
                    help="the stopwatch (scripts/bench compiles it from bench/measure.c)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if not sizes or not all(2 <= p <= 2048 for p in sizes) or not 1 <= args.reps <= 20 or not 10 <= args.timeout <= 1800:
        log("scalebench: sizes 2..2048, --reps 1..20, --timeout 10..1800")
        return 2
    if os.geteuid() != 0:
        log("scalebench: needs root (network and mount namespaces, iptables)")
        return 2
    for path in (args.tfboot, args.baseline, args.measure):
        if path and not os.access(path, os.X_OK):
            log(f"scalebench: {path} is not an executable (scripts/bench scale builds tfboot and measure)")
            return 2
    # The coordinator holds a connection per task, and the tasks inherit this limit.
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    cleanup_stale()   # namespaces and temp dirs a killed run of the harness or a benchmark left
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, ".gitignore"), "w") as f:
        f.write("# benchmark output (scripts/bench), not sources\n*\n")
    workdir = tempfile.mkdtemp(prefix=new_prefix())
    try:
        binaries = [snapshot("new", args.tfboot, workdir)]
        if args.baseline:
            binaries.append(snapshot("baseline", args.baseline, workdir))
        args.measure = os.path.abspath(args.measure)
        report = {"environment": {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                                  "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}"},
                  "binaries": binaries, "sizes": sizes, "reps": args.reps, "timeout_s": args.timeout,
                  "load_start": os.getloadavg()[0], "jobs": []}
        bench = ScaleBench(args, workdir)
        started = time.monotonic()
        for p in sizes:
            for rep in range(args.reps):
                order = binaries if (rep + sizes.index(p)) % 2 == 0 else binaries[::-1]
                for binary in order:
                    job = bench.job(binary, p)
                    job["rep"] = rep
                    report["jobs"].append(job)
                    log(f"  {binary['label']:8s} P={p:5d} " + "  ".join(
                        f"{FIGURES[figure]} {fmt(figure, job.get(figure))}" for figure in LOGGED)
                        + f"  {'ok' if job['ok'] else job['problem']}")
        report["bench_seconds"] = time.monotonic() - started
        report["load_end"] = os.getloadavg()[0]
        with open(os.path.join(args.out, "scale_results.json"), "w") as f:
            json.dump(report, f, indent=1)
        markdown = render(report)
        with open(os.path.join(args.out, "scale_results.md"), "w") as f:
            f.write(markdown)
        print(markdown)
        log(f"scalebench: wrote scale_results.md, scale_results.json in {args.out} ({report['bench_seconds']:.0f}s)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
