"""The PyTorch start-up comparison of ``scripts/bench job`` (bench/README.md): how long a job of P
pods takes from the moment its pods start to every rank past ``init_process_group``, with tfboot
as each pod's PID 1 and with torchrun, in the same pods on the same network.

On the namespace network of tests/harness with dnsmasq (pods ``worker-<i>`` under the headless
Service ``mnist``, every record published), each pod runs torch_rank.py (its stamps: started,
torch imported, init_process_group returned, one all_reduce done) under

* tfboot: ``tfboot --framework pytorch --cluster worker=P --nproc-per-node 1 -- python torch_rank.py``
  (DNS wait, start barrier on the control port, then the script with torchrun's variables; rank 0
  hosts the TCPStore on MASTER_PORT 29500);
* torchrun: ``python -m torch.distributed.run --nnodes P --node-rank K --nproc-per-node 1
  --master-addr <worker-0's FQDN> --master-port 29500 torch_rank.py`` (static rendezvous: node 0's
  agent hosts the TCPStore, every agent imports torch, then starts the script, which imports it
  again).

Scenarios (``bench_torch``): one untimed warm-up of each launcher; then for each P, ``reps``
repetitions of both in a rotating order, every pod released at once by start_gate.py; then the
late master: worker-0 started ``--torch-late-after`` (3 s) after the others, its record published as it starts.
Nothing is asserted: every run's figures, exit codes and the pods' log lines about retrying go
into the report (jobreport.render_torch).
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

from harness.cluster import ClusterNetwork, Pod
from start_gate import StartGate

HERE = os.path.dirname(os.path.abspath(__file__))
RANK_SCRIPT = os.path.join(HERE, "torch_rank.py")
CONTENDERS = ("tfboot", "torchrun")
MASTER_PORT = 29500
RUN_TIMEOUT_S = 180
# The pods' log lines the report counts and quotes (log_notes).
TFBOOT_WARNING = re.compile(r" tfboot (warning|error) ")
GLOG_WARNING = re.compile(r"^\[?[WE]\d{4} ")   # torch's C++ and Python logs: W1201 19:26:53.933 ...
STAMP = re.compile(r"^\S+ tfboot |^\[?[WE]\d{4} [\d:.]+ (\d+ )?")
DNS_WAIT = re.compile(r"resolves? after (\d+(?:\.\d+)?)s")
KEPT_LINES = 4


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def torch_version(python: str) -> tuple[str | None, str | None]:
    """(torch's version, None) or (None, why this Python cannot run the comparison)."""
    if not os.access(python, os.X_OK):
        return None, f"no {python}: scripts/setup --torch installs torch and jax into .venv-torch (some 6 GB)"
    cp = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                        timeout=300)
    if cp.returncode != 0:
        return None, f"{python} cannot import torch: {(cp.stderr.strip().splitlines() or ['?'])[-1]}"
    return cp.stdout.strip(), None


def children_cpu_seconds() -> float:
    """User + system time of every reaped descendant (the pods' shims reap their PID 1, which reaps
    its processes), so the difference around a run is the job's CPU."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class TorchBench:
    def __init__(self, args, net: ClusterNetwork, workdir: str):
        self.tfboot, self.python, self.late_after = args.tfboot, args.torch_python, args.torch_late_after
        self.net = net
        self.workdir = workdir
        self.home = os.path.join(workdir, "torch-home")   # one HOME for every pod and launcher
        os.makedirs(self.home)
        self.pods = [net.add_pod(f"worker-{i}") for i in range(max(args.torch_sizes + [args.torch_late_p]))]
        for pod in self.pods:
            net.publish(pod)
        self.runs = 0

    def argv(self, contender: str, p: int, node: int, out_dir: str) -> list[str]:
        if contender == "tfboot":
            return [self.tfboot, "--framework", "pytorch", "--cluster", f"worker={p}", "--nproc-per-node", "1",
                    "--", self.python, RANK_SCRIPT, out_dir]
        return [self.python, "-m", "torch.distributed.run", "--nnodes", str(p), "--node-rank", str(node),
                "--nproc-per-node", "1", "--master-addr", self.pods[0].fqdn, "--master-port", str(MASTER_PORT),
                RANK_SCRIPT, out_dir]

    def start_pod(self, contender: str, p: int, node: int, run_dir: str, gate: StartGate | None = None):
        env = {"HOME": self.home}
        if contender == "tfboot":
            env.update(TFBOOT_LOG_ROOT=os.path.join(run_dir, "logs"), TFBOOT_STOP_GRACE="5s")
        argv = [*(gate.argv() if gate else []), *self.argv(contender, p, node, os.path.join(run_dir, "ranks"))]
        with open(os.path.join(run_dir, f"{self.pods[node].name}.log"), "w") as out:
            return self.net.run(self.pods[node], argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def run(self, contender: str, p: int, *, late: bool = False) -> dict:
        """One job of p pods. late: worker-0 (the master) starts late_after seconds after the
        others, its record published as it starts."""
        pods = self.pods[:p]
        self.runs += 1
        run_dir = os.path.join(self.workdir, f"torch-{self.runs:03d}-{contender}-{p}{'-late' if late else ''}")
        os.makedirs(os.path.join(run_dir, "ranks"))
        if late:
            self.net.unpublish(pods[0])
        first = 1 if late else 0
        cpu_before = children_cpu_seconds()
        gate = StartGate(os.path.join(run_dir, "gate"))
        try:
            procs = [self.start_pod(contender, p, node, run_dir, gate) for node in range(first, p)]
            started = gate.open(len(procs))
        finally:
            gate.close()
        master_started = started
        if late:
            time.sleep(self.late_after)
            self.net.publish(pods[0], wait=False)
            procs.insert(0, self.start_pod(contender, p, 0, run_dir))
            master_started = time.time()
        codes, exited = wait_all(self.net, procs)
        result = {"contender": contender, "p": p, "late": late, "exit_codes": codes,
                  "all_exited_s": exited - started if exited else None,
                  "job_cpu_s": children_cpu_seconds() - cpu_before,
                  "master_started_s": master_started - started}
        result.update(rank_figures(os.path.join(run_dir, "ranks"), p, started, master_started))
        result["logs"] = log_notes(run_dir, pods)
        failed = [pod.name for pod, code in zip(pods, codes) if code != 0]
        if failed:
            with open(os.path.join(run_dir, f"{failed[0]}.log"), errors="replace") as f:
                result["first_failure_log"] = f.read()[-1500:]
        return result


def wait_all(net: ClusterNetwork, procs) -> tuple[list[int], float | None]:
    """Every pod's exit code (killed after RUN_TIMEOUT_S: -9) and when the last one ended (None
    when one had to be killed)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    codes, ended, killed = [], 0.0, False
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
            ended = time.time()
        except subprocess.TimeoutExpired:
            net.signal(proc, 9)
            codes.append(proc.wait(timeout=10))
            killed = True
    return codes, None if killed else ended


def rank_figures(ranks_dir: str, p: int, started: float, master_started: float) -> dict:
    """From the ranks' files: how many got past init_process_group, when the last and the median
    one did (from the pods' start, and from the master's), each phase's median over ranks, and
    how long after the last rank's import of torch the last one was past init_process_group."""
    records = []
    for name in sorted(os.listdir(ranks_dir)):
        if name.endswith(".json"):
            with open(os.path.join(ranks_dir, name)) as f:
                records.append(json.load(f))
    figures = {"ranks_initialized": len(records),
               "sums_ok": all(r["all_reduce_sum"] == r["world_size"] == p for r in records)}
    if records:
        figures["env_rank0"] = next((r["env"] for r in records if r["rank"] == 0), None)
    if len(records) != p:
        return figures
    initialized = [r["initialized"] - started for r in records]
    figures.update(ready_max_s=max(initialized), ready_median_s=statistics.median(initialized),
                   reduced_max_s=max(r["reduced"] for r in records) - started,
                   ready_after_master_s=max(r["initialized"] for r in records) - master_started,
                   launch_s=statistics.median(r["started"] - started for r in records),
                   import_s=statistics.median(r["imported"] - r["started"] for r in records),
                   init_s=statistics.median(r["initialized"] - r["imported"] for r in records),
                   # what init_process_group costs beyond waiting for the slowest rank's import
                   init_after_last_import_s=max(r["initialized"] for r in records) - max(r["imported"] for r in records),
                   all_reduce_s=statistics.median(r["reduced"] - r["initialized"] for r in records))
    return figures


def log_notes(run_dir: str, pods: list[Pod]) -> dict:
    """What the pods' logs say: warning and error lines (tfboot's, torch's glog-style ``[W...]``,
    torchrun's ``W1201 ...``) counted, the first few distinct ones kept without their time stamp,
    and the longest DNS wait a tfboot reported ("resolve(s) after N s")."""
    warnings, examples, seen, dns_waits = 0, [], set(), []
    for pod in pods:
        with open(os.path.join(run_dir, f"{pod.name}.log"), errors="replace") as f:
            for line in f:
                wait = DNS_WAIT.search(line)
                if wait and " tfboot " in line:
                    dns_waits.append(float(wait.group(1)))
                if not (TFBOOT_WARNING.search(line) or GLOG_WARNING.match(line)):
                    continue
                warnings += 1
                message = STAMP.sub("", line.strip())[:240]
                if len(examples) < KEPT_LINES and message not in seen:
                    seen.add(message)
                    examples.append(f"{pod.name}: {message}")
    return {"warnings": warnings, "examples": examples, "dns_wait_max_s": max(dns_waits, default=None)}


def _summary(r: dict) -> str:
    def s(value):
        return "n/a" if value is None else f"{value:.2f}s"
    return (f"ranks {r['ranks_initialized']}/{r['p']} initialized, last {s(r.get('ready_max_s'))} "
            f"(median {s(r.get('ready_median_s'))}, after the master's start {s(r.get('ready_after_master_s'))}), "
            f"exit codes {r['exit_codes']}, CPU {r['job_cpu_s']:.1f}s")


def bench_torch(args, workdir: str) -> dict:
    """Every scenario; {"skipped": why} without a Python that imports torch."""
    version, reason = torch_version(args.torch_python)
    if reason:
        log(f"jobbench: skipping the PyTorch comparison: {reason}")
        return {"skipped": reason}
    report = {"python": args.torch_python, "torch": version, "sizes": args.torch_sizes, "reps": args.torch_reps,
              "late_p": args.torch_late_p, "late_after_s": args.torch_late_after, "master_port": MASTER_PORT,
              "load_start": os.getloadavg()[0], "warmup": [], "runs": [], "late": []}
    began = time.monotonic()
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local",
                        log_queries=False) as net:
        bench = TorchBench(args, net, workdir)
        for contender in CONTENDERS:   # untimed: torch's files into the page cache
            r = bench.run(contender, min(args.torch_sizes))
            report["warmup"].append(r)
            log(f"  torch warm-up {contender:8s} P={r['p']}: {_summary(r)}")
        scenarios = [(p, False, "runs") for p in args.torch_sizes]
        if args.torch_late_p:
            scenarios.append((args.torch_late_p, True, "late"))
        for p, late, key in scenarios:
            for rep in range(args.torch_reps):
                order = CONTENDERS[rep % 2:] + CONTENDERS[:rep % 2]
                for contender in order:
                    r = bench.run(contender, p, late=late)
                    r["rep"] = rep
                    report[key].append(r)
                    log(f"  torch {contender:8s} P={p}{' late master' if late else ''} rep {rep}: {_summary(r)}")
    report["bench_seconds"] = time.monotonic() - began
    report["load_end"] = os.getloadavg()[0]
    return report
