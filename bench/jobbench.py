"""The job-wide DNS benchmark (issue 13): a whole job of P pods, each with tfboot as PID 1, against
dnsmasq and against CoreDNS with kubeadm's ``cache 30``, with the control channel and without.
Run it through ``scripts/bench job`` (needs root); bench/README.md says what each number means.

Scenarios, on the namespace network of tests/harness (pods ``worker-<i>``, hostname under the
headless Service ``mnist``'s subdomain, ``TFBOOT_CLUSTER=worker=P``, command: write the time it
started, exit 0):

* job: every record published, the server restarted (empty cache), the P pods started at the
  same moment (each held by start_gate.py until all are there): DNS queries the server received,
  its CPU seconds, and the time from the pods' start to every command running;
* late: P-1 pods started at once, the last one 5 s after them with its record published as it starts
  (and, as a variant, served before it starts); the late pod is the last worker or the
  coordinator worker-0: the time from its start to every command running;
* cost: dnsperf from a pod, names that exist (answered from the zone, then the cache) and names
  that do not (each NXDOMAIN once): the server's CPU time per query.

Before them, scalebench.py's start barrier at scale (P tasks in one namespace, no DNS server;
scale_results.md) at ``--scale-sizes``; after them, in the same run, torchbench.py's PyTorch
start-up under tfboot and under torchrun (its own network on dnsmasq; torch_results.md), or a line
saying why it was skipped.

Nothing here knows how many queries tfboot should send: the figures are what the binary did.
jobreport.py renders them, extrapolates to 1,000 and 10,000 pods and plots queries against P.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from harness.cluster import ClusterNetwork, Pod
from harness.coredns import VERSION as COREDNS_VERSION, cpu_seconds, missing_reason
from jobreport import plot, render, render_torch, torch_summary
from netbench import udp_counters
from start_gate import StartGate
from torchbench import bench_torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

SERVERS = ("dnsmasq", "coredns")
MODES = ("control", "no-control")   # the control channel (default), --control-port 0
# With --modes: the control channel and --metrics-port on every task (docs/observing.md),
# for the metrics server's cost on the start beside "control" in the same run.
METRICS_MODE = "metrics"
METRICS_PORT = "9400"
DNSPERF = "/usr/bin/dnsperf"
LATE_AFTER_S = 5.0
RUN_TIMEOUT_S = 150


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class JobBench:
    def __init__(self, args, net: ClusterNetwork, server: str, workdir: str):
        self.args = args
        self.net = net
        self.server = server
        self.workdir = workdir
        self.pods = [net.add_pod(f"worker-{i}") for i in range(max(args.sizes + [args.late_p]))]
        pin_neighbours(net, self.pods)
        self.published: set[str] = set()
        self.runs = 0

    # ---- the DNS server: records, a fresh start, what it did

    def fresh_server(self, published: list[Pod]) -> None:
        """Exactly these pods' records, served by a freshly started server (nothing cached)."""
        self.net.stop_dns()
        wanted = {pod.name for pod in published}
        for pod in self.pods:
            if pod.name in self.published and pod.name not in wanted:
                self.net.unpublish(pod, wait=False)
            elif pod.name in wanted and pod.name not in self.published:
                self.net.publish(pod, wait=False)
        self.published = wanted
        self.net.start_dns()
        if self.server == "dnsmasq" and published:   # it reads its hostsdir after it listens
            deadline = time.monotonic() + 10
            while self.net.dns_query(published[-1].fqdn).addresses != [published[-1].ip]:
                if time.monotonic() > deadline:
                    raise RuntimeError("dnsmasq does not answer for its records")
                time.sleep(0.02)

    def server_state(self) -> dict:
        state = {"cpu_s": cpu_seconds(self.net.dns.pid),
                 "udp_in": udp_counters(self.net.dns_ns)["InDatagrams"]}
        if self.server == "coredns":
            state.update(self.net.dns.metrics())
        return state

    @staticmethod
    def server_delta(before: dict, after: dict) -> dict:
        delta = {"queries": after["udp_in"] - before["udp_in"], "server_cpu_s": after["cpu_s"] - before["cpu_s"]}
        for key in ("requests", "cache_hits", "cache_misses"):
            if key in after:
                delta[key] = after[key] - before[key]
        return delta

    # ---- one job

    def start_pod(self, pod: Pod, p: int, mode: str, run_dir: str, gate: StartGate | None = None):
        env = {"TFBOOT_CLUSTER": f"worker={p}", "TFBOOT_LOG_ROOT": os.path.join(run_dir, "logs"),
               "TFBOOT_STOP_GRACE": "5s"}
        if mode == "no-control":
            env["TFBOOT_CONTROL_PORT"] = "0"
        if mode == METRICS_MODE:
            env["TFBOOT_METRICS_PORT"] = METRICS_PORT
        env.update(self.args.tfboot_env)
        stamp = os.path.join(run_dir, f"started-{pod.name}")
        # The command: the time it started (CLOCK_REALTIME: one clock for every namespace here).
        argv = [*(gate.argv() if gate else []), self.args.tfboot, "--", "/bin/sh", "-c", 'date +%s.%N > "$0"', stamp]
        with open(os.path.join(run_dir, f"{pod.name}.log"), "w") as out:
            proc = self.net.run(pod, argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        return proc, time.time()

    def finish(self, procs, run_dir: str, pods: list[Pod]) -> dict:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.net.signal(proc, 9)
                codes.append(proc.wait(timeout=10))
        started = []
        for pod in pods:
            try:
                with open(os.path.join(run_dir, f"started-{pod.name}")) as f:
                    started.append(float(f.read()))
            except (OSError, ValueError):
                pass
        failed = [(pod.name, code) for pod, code in zip(pods, codes) if code != 0]
        result = {"exit_codes_nonzero": failed, "commands_run": len(started)}
        if failed:
            with open(os.path.join(run_dir, f"{failed[0][0]}.log"), errors="replace") as f:
                result["first_failure_log"] = f.read()[-1500:]
        result["last_command_at"] = max(started) if len(started) == len(pods) else None
        cached = 0
        for pod in pods:   # tfboot says so once when a negative answer comes from a cache
            with open(os.path.join(run_dir, f"{pod.name}.log"), errors="replace") as f:
                cached += "comes from a DNS cache" in f.read()
        result["pods_logging_a_cache"] = cached
        result.update(barrier_phases(run_dir, pods))
        return result

    def run_dir(self, tag: str) -> str:
        self.runs += 1
        path = os.path.join(self.workdir, f"{self.server}-{self.runs:03d}-{tag}")
        os.makedirs(path)
        return path

    def start_all(self, pods: list[Pod], p: int, mode: str, run_dir: str) -> tuple[list, float]:
        """Every pod started at once (through the gate): their processes and the moment."""
        gate = StartGate(os.path.join(run_dir, "gate"))
        try:
            procs = [self.start_pod(pod, p, mode, run_dir, gate)[0] for pod in pods]
            return procs, gate.open(len(pods))
        finally:
            gate.close()

    def job(self, p: int, mode: str) -> dict:
        pods = self.pods[:p]
        self.fresh_server(pods)
        run_dir = self.run_dir(f"job-{p}-{mode}")
        before = self.server_state()
        sent_before = coordinator_tx_bytes(pods[0].netns)
        procs, started = self.start_all(pods, p, mode, run_dir)
        result = self.finish(procs, run_dir, pods)
        after = self.server_state()
        result.update(self.server_delta(before, after), server=self.server, p=p, mode=mode,
                      coordinator_sent_bytes=coordinator_tx_bytes(pods[0].netns) - sent_before)
        result["last_start_to_all_running_s"] = (result["last_command_at"] - started
                                                 if result["last_command_at"] else None)
        # The start barrier's phases, from the pods' start: all present, names checked, last told.
        for key in ("all_present_at", "names_verified_at", "last_told_start_at"):
            if result.get(key):
                result[key.replace("_at", "_s")] = result[key] - started
        return result

    def late(self, p: int, mode: str, late_index: int, publish: str) -> dict:
        """publish: "at-start" (record published as the pod starts) or "before" (served before)."""
        pods = self.pods[:p]
        late_pod = pods[late_index]
        early = [pod for pod in pods if pod is not late_pod]
        self.fresh_server(early)
        run_dir = self.run_dir(f"late-{p}-{mode}-{late_index}-{publish}")
        before = self.server_state()
        procs, _ = self.start_all(early, p, mode, run_dir)
        time.sleep(LATE_AFTER_S)
        self.net.publish(late_pod, wait=publish == "before")   # with wait: once it is served
        self.published.add(late_pod.name)
        proc, late_start = self.start_pod(late_pod, p, mode, run_dir)
        procs.insert(late_index, proc)
        served_after = None   # seconds from the pod's start until CoreDNS serves its record
        if publish == "at-start" and self.server == "coredns":
            self.net.dns.records.wait()   # polls CoreDNS's log every 10 ms
            served_after = time.time() - late_start
        result = self.finish(procs, run_dir, pods)
        after = self.server_state()
        result.update(self.server_delta(before, after), server=self.server, p=p, mode=mode,
                      late=f"worker-{late_index}", coordinator_late=late_index == 0, publish=publish,
                      record_served_after_s=served_after)
        result["late_start_to_all_running_s"] = (result["last_command_at"] - late_start
                                                 if result["last_command_at"] else None)
        return result

    # ---- the server's CPU per query

    def cost(self, queries: int) -> dict:
        names = self.pods
        self.fresh_server(names)
        client = self.pods[0]
        result = {"server": self.server}
        domain = self.pods[0].fqdn.split(".", 1)[1]
        files = {"existing": [f"{pod.fqdn} A\n" for pod in names],
                 "missing": [f"missing-{k}.{domain} A\n" for k in range(queries)]}
        for kind, lines in files.items():
            path = os.path.join(self.workdir, f"dnsperf-{self.server}-{kind}.txt")
            with open(path, "w") as f:
                f.writelines(lines)
            repeat = max(1, queries // len(lines))
            before = self.server_state()
            cp = self.net.exec_in_pod(client, [DNSPERF, "-s", self.net.dns_ip, "-d", path, "-n", str(repeat),
                                               "-c", "1", "-q", "64"], timeout=300)
            after = self.server_state()
            if cp.returncode != 0:
                raise RuntimeError(f"dnsperf failed: {cp.stderr.strip()} {cp.stdout.strip()}")
            delta = self.server_delta(before, after)
            completed = int(_dnsperf_field(cp.stdout, "Queries completed"))
            result[kind] = {"queries": completed, "server_cpu_s": delta["server_cpu_s"],
                            "us_per_query": delta["server_cpu_s"] / completed * 1e6,
                            "qps": float(_dnsperf_field(cp.stdout, "Queries per second")),
                            **{k: v for k, v in delta.items() if k.startswith("cache")}}
            log(f"  cost {self.server:8s} {kind:8s} {completed} queries, "
                f"{result[kind]['us_per_query']:.1f} us CPU each, {result[kind]['qps']:.0f} qps")
        return result


# tfboot's log lines that mark the start barrier's phases (docs/supervision.md, Job supervision).
ALL_PRESENT = "tasks present; resolving their names once"
NAMES_VERIFIED = "every task's name resolves to that task"
TOLD_START = "the coordinator says start"


def log_time(line: str) -> float | None:
    """The UTC timestamp a tfboot text log line starts with, as seconds since the epoch."""
    try:
        stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return None
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def barrier_phases(run_dir: str, pods: list[Pod]) -> dict:
    """When the coordinator (worker-0) saw every task, had checked every name, and when the last
    task was told to start: from the pods' logs; {} without the control channel."""
    marks: dict[str, float] = {}
    told = []
    for pod in pods:
        with open(os.path.join(run_dir, f"{pod.name}.log"), errors="replace") as f:
            for line in f:
                for key, text in (("all_present_at", ALL_PRESENT), ("names_verified_at", NAMES_VERIFIED)):
                    if text in line and pod is pods[0]:
                        marks[key] = log_time(line)
                if TOLD_START in line and log_time(line):
                    told.append(log_time(line))
    if len(told) == len(pods) - 1 and told:
        marks["last_told_start_at"] = max(told)
    return marks


def pin_neighbours(net: ClusterNetwork, pods: list[Pod]) -> None:
    """Permanent ARP entries between every pod and the two it talks to (the DNS server and the
    coordinator worker-0), in both directions. The kernel's neighbour table is one for all
    network namespaces of the machine (gc_thresh3, default 1024 entries); a job of 256 pods fills
    it with learned entries, and packets to a neighbour that finds no room are dropped
    ("neighbor table overflow"): connections to the coordinator stall for 10 s and more, which
    a real cluster, a kernel per node, never sees. Permanent entries are not counted."""
    def mac(netns: str) -> str:
        cp = subprocess.run(["ip", "-n", netns, "-o", "link", "show", "eth0"], capture_output=True, text=True,
                            timeout=10, check=True)
        return cp.stdout.split("link/ether ", 1)[1].split()[0]

    def add(netns: str, entries: list[tuple[str, str]]) -> None:
        batch = "".join(f"neigh replace {ip} lladdr {address} dev eth0 nud permanent\n" for ip, address in entries)
        subprocess.run(["ip", "-n", netns, "-batch", "-"], input=batch, text=True, capture_output=True,
                       timeout=60, check=True)

    dns = (net.dns_ip, mac(net.dns_ns))
    coordinator = (pods[0].ip, mac(pods[0].netns))
    everyone = [(pod.ip, mac(pod.netns)) for pod in pods]
    add(net.dns_ns, everyone)
    add(pods[0].netns, everyone[1:] + [dns])
    for pod in pods[1:]:
        add(pod.netns, [dns, coordinator])


def coordinator_tx_bytes(netns: str) -> int:
    """Bytes sent so far from eth0 of a pod's namespace (the coordinator's: its share of the job)."""
    cp = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/dev"], capture_output=True, text=True,
                        timeout=10, check=True)
    for line in cp.stdout.splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "eth0":
            return int(counters.split()[8])   # receive: 8 fields, then transmit bytes
    raise RuntimeError(f"no eth0 in {netns}")


def _dnsperf_field(text: str, label: str) -> str:
    for line in text.splitlines():
        if line.strip().startswith(label + ":"):
            return line.split(":", 1)[1].split()[0]
    raise RuntimeError(f"dnsperf output lacks {label!r}: {text}")


def bench_server(args, server: str, workdir: str, report: dict) -> None:
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local",
                        log_queries=False, dns_server=server) as net:
        bench = JobBench(args, net, server, workdir)
        for p in args.sizes:
            for rep in range(args.reps):
                for mode in args.modes:
                    r = bench.job(p, mode)
                    r["rep"] = rep
                    report["jobs"].append(r)
                    log(f"  {server:8s} P={p:4d} {mode:10s} queries {r['queries']:7d}  server CPU "
                        f"{r['server_cpu_s']:.2f}s  last start -> all running "
                        f"{_seconds(r['last_start_to_all_running_s'])}  failures {r['exit_codes_nonzero'][:3]}")
        if args.late_p:
            for late_index in (args.late_p - 1, 0):
                for publish in args.late_publish:
                    for mode in args.modes:
                        r = bench.late(args.late_p, mode, late_index, publish)
                        report["late"].append(r)
                        log(f"  {server:8s} late worker-{late_index} ({publish}) {mode:10s} late start -> all "
                            f"running {_seconds(r['late_start_to_all_running_s'])}, record served after "
                            f"{_seconds(r['record_served_after_s'])}, queries {r['queries']}, pods logging a "
                            f"cache {r['pods_logging_a_cache']}, failures {r['exit_codes_nonzero'][:3]}")
        if args.cost_queries:
            report["cost"].append(bench.cost(args.cost_queries))


def write_job_report(report: dict, started: float | None, json_path: str, out: str, show: bool = True) -> None:
    """job_results.json (with the run's time so far since the monotonic ``started``, unless None),
    job_results.md (printed with show) and job_queries.png from the DNS scenarios' report."""
    if started is not None:
        report["bench_seconds"] = time.monotonic() - started
        report["load_end"] = os.getloadavg()[0]
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)
    markdown = render(report)
    with open(os.path.join(out, "job_results.md"), "w") as f:
        f.write(markdown)
    plot(report, os.path.join(out, "job_queries.png"))
    if show:
        print(markdown)


def write_torch_report(torch: dict, out: str) -> None:
    """torch_results.md (also printed) from the PyTorch comparison's report."""
    markdown = render_torch(torch)
    with open(os.path.join(out, "torch_results.md"), "w") as f:
        f.write(markdown)
    print(markdown)


def _seconds(value) -> str:
    return "n/a" if value is None else f"{value:.2f}s"


def main(argv=None) -> int:
    build_dir = os.environ.get("TFBOOT_BUILD_DIR", "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, build_dir, "launcher", "tfboot"))
    ap.add_argument("--sizes", default="16,32,64", help="pods per job, comma-separated")
    ap.add_argument("--reps", type=int, default=1, help="repetitions of each job")
    ap.add_argument("--servers", default=",".join(SERVERS), help="dnsmasq,coredns; none: only the PyTorch comparison")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="control (the default channel), no-control, metrics (control with --metrics-port)")
    ap.add_argument("--late-p", type=int, default=16, help="pods in the late-pod jobs (0: skip them)")
    ap.add_argument("--late-publish", default="at-start,before",
                    help="when the late pod's record is published: at-start, before (served before it starts)")
    ap.add_argument("--cost-queries", type=int, default=20000, help="dnsperf queries per kind (0: skip)")
    ap.add_argument("--restart-pods", default="4", help="pods of restartbench.py's in place against pod restart, "
                                                         "run after the scale part (empty: skip it)")
    ap.add_argument("--scale-sizes", help="tasks per job of scalebench.py's start barrier at scale, run first "
                                          "(default: scalebench.py's sizes; empty: skip it)")
    ap.add_argument("--torch-sizes", default="2,4", help="pods per job in the PyTorch comparison (empty: skip it)")
    ap.add_argument("--torch-reps", type=int, default=3, help="repetitions of each PyTorch job")
    ap.add_argument("--torch-late-p", type=int, default=4, help="pods in the late-master PyTorch job (0: skip it)")
    ap.add_argument("--torch-late-after", type=float, default=3.0, help="seconds the late master starts after the others")
    ap.add_argument("--torch-python", default=os.path.join(REPO, ".venv-torch", "bin", "python"),
                    help="the Python with torch the pods run (missing: the comparison is skipped)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    ap.add_argument("--tfboot-env", action="append", default=[], metavar="NAME=VALUE",
                    help="one more variable for every tfboot, e.g. TFBOOT_LOG_LEVEL=debug (repeatable)")
    ap.add_argument("--keep-logs", action="store_true", help="copy every pod's log to --out/job-logs/")
    ap.add_argument("--replot", action="store_true",
                    help="only redraw the reports and plot from --out's job_results.json and torch_results.json")
    args = ap.parse_args(argv)
    json_path = os.path.join(args.out, "job_results.json")
    torch_json_path = os.path.join(args.out, "torch_results.json")
    if args.replot:
        if os.path.exists(json_path):
            with open(json_path) as f:
                write_job_report(json.load(f), None, json_path, args.out)
        if os.path.exists(torch_json_path):
            with open(torch_json_path) as f:
                write_torch_report(json.load(f), args.out)
        return 0
    if os.geteuid() != 0:
        log("jobbench: needs root (network, mount and PID namespaces)")
        return 2
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    args.tfboot_env = dict(item.split("=", 1) for item in args.tfboot_env if "=" in item)
    args.late_publish = [x for x in args.late_publish.split(",") if x]
    servers = [x for x in args.servers.split(",") if x and x != "none"]
    args.modes = [x for x in args.modes.split(",") if x]
    args.torch_sizes = [int(x) for x in args.torch_sizes.split(",") if x]
    if (not args.sizes or not all(2 <= p <= 1000 for p in args.sizes) or not 1 <= args.reps <= 20
            or set(servers) - set(SERVERS) or not args.modes or set(args.modes) - {*MODES, METRICS_MODE} or set(args.late_publish) - {"at-start", "before"}
            or not (args.late_p == 0 or 2 <= args.late_p <= 1000)
            or not all(2 <= p <= 64 for p in args.torch_sizes) or not 1 <= args.torch_reps <= 20
            or not (args.torch_late_p == 0 or 2 <= args.torch_late_p <= 64) or not 0 <= args.torch_late_after <= 120
            or not (servers or args.torch_sizes)):
        log("jobbench: sizes 2..1000, --reps 1..20, --servers dnsmasq,coredns (or none), --late-publish "
            "at-start,before, --torch-sizes 2..64, --torch-reps 1..20, --torch-late-p 0 or 2..64, "
            "--torch-late-after 0..120")
        return 2
    if "coredns" in servers and missing_reason():
        log(f"jobbench: {missing_reason()}")
        return 2
    if args.scale_sizes != "":
        # A process of its own (it imports this module), which bounds and tears down each of its
        # jobs; a bad --scale-sizes stops the run here, before the long part.
        log("== the start barrier at scale (scalebench.py)")
        sizes = ["--sizes", args.scale_sizes] if args.scale_sizes else []
        scale = subprocess.run([sys.executable, os.path.join(HERE, "scalebench.py"), *sizes, "--tfboot", args.tfboot,
                                "--out", args.out])
        if scale.returncode != 0:
            log(f"jobbench: scalebench.py exited {scale.returncode}; --scale-sizes '' skips it")
            return scale.returncode
    if args.restart_pods:
        log("== from a failure to every command running again (restartbench.py)")
        restart = subprocess.run([sys.executable, os.path.join(HERE, "restartbench.py"), "--pods", args.restart_pods,
                                  "--tfboot", args.tfboot, "--out", args.out])
        if restart.returncode != 0:
            log(f"jobbench: restartbench.py exited {restart.returncode}; --restart-pods '' skips it")
            return restart.returncode
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, ".gitignore"), "w") as f:
        f.write("# benchmark output (scripts/bench), not sources\n*\n")
    workdir = tempfile.mkdtemp(prefix="tfboot-jobbench-")
    try:
        tfboot = os.path.join(workdir, "tfboot")   # a snapshot: a rebuild meanwhile changes nothing
        shutil.copy2(args.tfboot, tfboot)
        with open(tfboot, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        args.tfboot = tfboot
        version = subprocess.run([tfboot, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        report = {"environment": {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                                  "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}",
                                  "tfboot": version, "tfboot_sha256": sha, "coredns": COREDNS_VERSION,
                                  "dnsmasq": subprocess.run(["/usr/sbin/dnsmasq", "--version"], capture_output=True,
                                                            text=True).stdout.split()[2]},
                  "sizes": args.sizes, "late_after_s": LATE_AFTER_S, "load_start": os.getloadavg()[0],
                  "jobs": [], "late": [], "cost": []}
        started = time.monotonic()
        for server in servers:
            log(f"== {server}")
            bench_server(args, server, workdir, report)
        written = []
        # A run of the PyTorch comparison alone (--servers none) leaves an earlier DNS report as it
        # was; the DNS report is written before that comparison, so a failure there loses nothing.
        if servers:
            write_job_report(report, started, json_path, args.out, show=not args.torch_sizes)
            written += ["job_results.md", "job_results.json", "job_queries.png"]
        if args.torch_sizes:
            log("== PyTorch: tfboot and torchrun")
            torch = bench_torch(args, workdir)
            torch["environment"] = report["environment"]
            with open(torch_json_path, "w") as f:
                json.dump(torch, f, indent=1)
            write_torch_report(torch, args.out)
            written += ["torch_results.md", "torch_results.json"]
            if servers:   # now with the line that points to torch_results.md
                report["torch_summary"] = torch_summary(torch)
                write_job_report(report, started, json_path, args.out)
        report["bench_seconds"] = time.monotonic() - started
        if args.keep_logs:
            kept = os.path.join(args.out, "job-logs")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(workdir, kept, ignore=lambda d, names: [n for n in names if n.startswith("logs")
                                                                    or n in ("tfboot", "gate", "torch-home")])
        log(f"jobbench: wrote {', '.join(written)} in {args.out} ({report['bench_seconds']:.0f}s)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
