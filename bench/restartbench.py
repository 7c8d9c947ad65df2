#!/usr/bin/env python3
"""From a failure to every command running again: a restart in place (--max-restarts) against a
whole pod restart (every tfboot exits and is started again), in the same run.

P pods (network namespaces behind a real dnsmasq, tfboot as PID 1, tests/harness) run a shell
command that notes when it started (its log dir's ``started-<TFBOOT_RESTART_COUNT>``); worker:1's
first command notes the time and exits 1. In place, the job restarts with no tfboot exiting; for a
pod restart the job runs with --max-restarts 0 (every tfboot exits: 1 on worker:1, 200 elsewhere),
and the benchmark starts tfboot again in every pod the moment the last one has exited, as a
kubelet would at best (no back-off, no image check, no rescheduling: a lower bound for a real
pod restart). Each figure is the time from worker:1's failure to the last command's start, the
median of --reps jobs, the two kinds alternating.

    scripts/bench restart [--pods 4] [--reps 5]   output: bench-results/restart_results.md (also printed),
                                                  restart_results.json
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from harness.cluster import ClusterNetwork  # noqa: E402

COMMAND = ('date +%s.%N > "$TFBOOT_LOG_DIR/started-$TFBOOT_RESTART_COUNT"; '
           'if [ "$TFBOOT_TASK_INDEX" = 1 ] && [ "$TFBOOT_RESTART_COUNT" = 0 ] && [ ! -e "$TFBOOT_LOG_DIR/../failed" ]; then '
           '  sleep 1; date +%s.%N > "$TFBOOT_LOG_DIR/../failed"; exit 1; fi; '
           'exec sleep 600')


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def read_time(path: str, until: float) -> float:
    """The Unix time a command wrote into path, once it exists (waiting until the monotonic `until`)."""
    while time.monotonic() < until:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return float(text)
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"{path} never written")


def run_job(net, tfboot: str, pods, log_root: str, in_place: bool, timeout: float) -> float:
    """Seconds from worker:1's failure to the last command's start after it."""
    env = {"TFBOOT_CLUSTER": f"worker={len(pods)}", "TFBOOT_LOG_ROOT": log_root, "TFBOOT_WAIT": "30s",
           "TFBOOT_STOP_GRACE": "5s", "TFBOOT_MAX_RESTARTS": "1" if in_place else "0"}
    argv = [tfboot, "--", "sh", "-c", COMMAND]
    until = time.monotonic() + timeout
    procs = [net.run(pod, argv, env=env, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w")) for pod in pods]
    try:
        failed = read_time(os.path.join(log_root, "failed"), until)
        if not in_place:
            for proc in procs:  # every tfboot ends with the job, then every pod starts again
                proc.wait(timeout=max(1, until - time.monotonic()))
            procs = [net.run(pod, argv, env=env, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w")) for pod in pods]
        again = "started-1" if in_place else "started-0"
        # A pod restart writes started-0 anew; the first run's file was written before the failure.
        starts = []
        for index in range(len(pods)):
            path = os.path.join(log_root, f"worker_{index}", again)
            while True:
                moment = read_time(path, until)
                if moment > failed:
                    break
                time.sleep(0.01)
                if time.monotonic() > until:
                    raise TimeoutError(f"{path} not written after the failure")
            starts.append(moment)
        return max(starts) - failed
    finally:
        for proc in procs:
            if proc.poll() is None:
                net.signal(proc, 9)
        for proc in procs:
            proc.wait(timeout=30)


def render(report: dict) -> str:
    lines = [f"# From a failure to every command running again ({report['pods']} pods, median of {report['reps']})", "",
             f"{report['environment']['date']}, {report['environment']['machine']}, {report['environment']['tfboot']}", "",
             "| | seconds (median) | all runs |", "|---|---|---|"]
    for kind, label in (("in_place", "restart in place (--max-restarts)"),
                        ("pod_restart", "every tfboot exits and starts again")):
        runs = report[kind]
        lines.append(f"| {label} | {statistics.median(runs):.2f} | {', '.join(f'{r:.2f}' for r in runs)} |")
    lines += ["", f"ratio pod restart / in place: {report['ratio']:.2f} (a real pod restart adds the kubelet's "
                  "back-off, rescheduling, the image check and the DNS record's republication)"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    build_dir = os.environ.get("TFBOOT_BUILD_DIR", "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, build_dir, "launcher", "tfboot"))
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=120, help="seconds one job may take")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    args = ap.parse_args(argv)
    if not 2 <= args.pods <= 32 or not 1 <= args.reps <= 20:
        log("restartbench: --pods 2..32, --reps 1..20")
        return 2
    if os.geteuid() != 0:
        log("restartbench: needs root (network namespaces)")
        return 2
    if not os.access(args.tfboot, os.X_OK):
        log(f"restartbench: {args.tfboot} is not an executable (scripts/bench restart builds it)")
        return 2
    import subprocess
    version = subprocess.run([args.tfboot, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    report = {"environment": {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                              "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}", "tfboot": version},
              "pods": args.pods, "reps": args.reps, "in_place": [], "pod_restart": []}
    with ClusterNetwork(service="bench", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"bench-worker-{i}") for i in range(args.pods)]
        for pod in pods:
            net.publish(pod)
        for rep in range(args.reps):
            for kind in ("in_place", "pod_restart"):
                with tempfile.TemporaryDirectory(prefix="tfboot-restartbench-") as log_root:
                    seconds = run_job(net, args.tfboot, pods, log_root, kind == "in_place", args.timeout)
                report[kind].append(seconds)
                log(f"restartbench: rep {rep + 1}/{args.reps} {kind}: {seconds:.2f}s")
    report["ratio"] = statistics.median(report["pod_restart"]) / statistics.median(report["in_place"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "restart_results.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = render(report)
    with open(os.path.join(args.out, "restart_results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
