#!/usr/bin/env python3
"""What --preflight costs a start: off, quick and network, at several job sizes, in the same run.

P pods (network namespaces behind a real dnsmasq, tfboot as PID 1, tests/harness) run `true`;
each figure is the time from launching every tfboot to the last one's exit (the start barrier,
the checks, the command, the job's end), the median of --reps jobs, the levels alternating so
that the machine's load falls on each alike. For the network level it also gives what the
coordinator's startup.json says the check took (preflight.network.seconds) and the links measured.
The ratio is each level against `off` at the same size.

    scripts/bench preflight [--sizes 4,16,64] [--reps 3]   output: bench-results/preflight_results.md
                                                         (also printed), preflight_results.json
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from harness.cluster import ClusterNetwork  # noqa: E402

LEVELS = ("off", "quick", "network")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_job(net, tfboot: str, pods, log_root: str, level: str, timeout: float) -> dict:
    env = {"TFBOOT_CLUSTER": f"worker={len(pods)}", "TFBOOT_LOG_ROOT": log_root, "TFBOOT_WAIT": "60s",
           "TFBOOT_START_TIMEOUT": "120s", "TFBOOT_PREFLIGHT": level}
    began = time.monotonic()
    procs = [net.run(pod, [tfboot, "--", "true"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for pod in pods]
    codes, errors = [], []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=max(1, began + timeout - time.monotonic()))
            codes.append(proc.returncode)
            errors.append(err)
    finally:
        for proc in procs:
            if proc.poll() is None:
                net.signal(proc, 9)
                proc.wait(timeout=30)
    seconds = time.monotonic() - began
    if codes != [0] * len(pods):
        bad = next(i for i, code in enumerate(codes) if code != 0)
        raise RuntimeError(f"{level} at {len(pods)} pods: exit codes {codes}; worker:{bad}: {errors[bad][-1500:]}")
    result = {"seconds": seconds}
    if level != "off":
        with open(os.path.join(log_root, "worker_0", "startup.json")) as f:
            preflight = json.load(f)["preflight"]
        result["checks_seconds"] = preflight["seconds"]
        if level == "network":
            result["network_seconds"] = preflight["network"]["seconds"]
            result["links"] = preflight["network"]["links"]
            result["median_gbits"] = preflight["network"]["median_bits_per_second"] / 1e9
    return result


def render(report: dict) -> str:
    env = report["environment"]
    lines = [f"# What --preflight costs a start (median of {report['reps']})", "",
             f"{env['date']}, {env['machine']}, {env['tfboot']}", "",
             "| pods | level | launch to every exit, s | ratio to off | network check, s (coordinator) | links | median link |",
             "|---|---|---|---|---|---|---|"]
    for size in report["sizes"]:
        runs = report["runs"][str(size)]
        off = statistics.median(r["seconds"] for r in runs["off"])
        for level in LEVELS:
            seconds = statistics.median(r["seconds"] for r in runs[level])
            network = links = gbits = ""
            if level == "network":
                network = f"{statistics.median(r['network_seconds'] for r in runs[level]):.2f}"
                links = str(runs[level][0]["links"])
                gbits = f"{statistics.median(r['median_gbits'] for r in runs[level]):.2f} Gbit/s"
            lines.append(f"| {size} | {level} | {seconds:.2f} | {seconds / off:.2f} | {network} | {links} | {gbits} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    build_dir = os.environ.get("TFBOOT_BUILD_DIR", "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, build_dir, "launcher", "tfboot"))
    ap.add_argument("--sizes", default="4,16,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=180, help="seconds one job may take")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    args = ap.parse_args(argv)
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        log(f"preflightbench: --sizes '{args.sizes}' must be numbers, e.g. 4,16,64")
        return 2
    if not all(2 <= size <= 128 for size in sizes) or not 1 <= args.reps <= 20:
        log("preflightbench: --sizes each 2..128, --reps 1..20")
        return 2
    if os.geteuid() != 0:
        log("preflightbench: needs root (network namespaces)")
        return 2
    if not os.access(args.tfboot, os.X_OK):
        log(f"preflightbench: {args.tfboot} is not an executable (scripts/bench preflight builds it)")
        return 2
    version = subprocess.run([args.tfboot, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    report = {"environment": {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                              "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}", "tfboot": version},
              "sizes": sizes, "reps": args.reps, "runs": {}}
    for size in sizes:
        runs = {level: [] for level in LEVELS}
        with ClusterNetwork(service="bench", namespace="default", cluster_domain="cluster.local") as net:
            pods = [net.add_pod(f"bench-worker-{i}") for i in range(size)]
            for pod in pods:
                net.publish(pod)
            for rep in range(args.reps):
                for level in LEVELS:
                    with tempfile.TemporaryDirectory(prefix="tfboot-preflightbench-") as log_root:
                        result = run_job(net, args.tfboot, pods, log_root, level, args.timeout)
                    runs[level].append(result)
                    log(f"preflightbench: {size} pods, rep {rep + 1}/{args.reps}, {level}: {result['seconds']:.2f}s")
        report["runs"][str(size)] = runs
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "preflight_results.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = render(report)
    with open(os.path.join(args.out, "preflight_results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
