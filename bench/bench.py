"""tfboot's DNS-wait benchmark (issue 6): tfboot against the entrypoint a user would write and
against dnsperf, on the namespace network of tests/harness with a real dnsmasq. Run it through
``scripts/bench`` (needs root); bench/README.md says what each number means.

For each N (peers, all published): dnsmasq holds N records, one pod ``mnist-worker-0`` with a
kubelet-like /etc/hosts runs, alternating in each repetition, the three contenders:

* tfboot with ``TFBOOT_CLUSTER=worker=N`` (DNS wait on, defaults; the control channel off and
  ``--address ip``, running ``printenv TF_CONFIG``: ``--print`` is a dry run without lookups),
* bench/baseline_entrypoint.py (python3, getaddrinfo per peer in turn),
* dnsperf sending the same 2N queries (A and AAAA per peer) to the same server,

each timed by bench/measure.c (spawn to first line of stdout; peak RSS from wait4) with
dnsmasq's query logging off. Then, with query logging on, one counted run of each. Finally a
DNS server that stalls as the job starts (tfboot and the baseline), the ``--wait 0`` start-up
time (many runs) and the binary's size.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from harness.coredns import VERSION as COREDNS_VERSION, missing_reason
from netbench import BenchNetwork, peer_ip, udp_counters

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CONTENDERS = ("tfboot", "python", "dnsperf")
LABELS = {"tfboot": "tfboot -- printenv TF_CONFIG", "python": "Python getaddrinfo entrypoint", "dnsperf": "dnsperf (limit)"}
SERVICE, NAMESPACE, DOMAIN = "mnist", "default", "cluster.local"
PYTHON = "/usr/bin/python3"
DNSPERF = "/usr/bin/dnsperf"
# dnsperf may keep as many queries outstanding as tfboot does: 64 lookups of A + AAAA.
DNSPERF_OUTSTANDING = 128
RUN_TIMEOUT = 300


def fqdn(index: int) -> str:
    return f"mnist-worker-{index}.{SERVICE}.{NAMESPACE}.svc.{DOMAIN}"


def median(values):
    return statistics.median(values) if values else float("nan")


def after_the_wait(tfboot, *args):
    """tfboot that prints TF_CONFIG as soon as the DNS wait is over (--print is a dry run without
    lookups): the control channel off, the files written to a fresh log root, `printenv TF_CONFIG`
    run by exec, TF_CONFIG with addresses (--address ip: under Linux's 128 KiB for one environment
    string at every size measured)."""
    log_root = tempfile.mkdtemp(prefix="tfboot-bench-")
    return [tfboot, *args, "--control-port", "0", "--address", "ip", "--log-root", log_root, "--", "printenv", "TF_CONFIG"]


class Bench:
    def __init__(self, args, net: BenchNetwork, workdir: str):
        self.args = args
        self.net = net
        self.workdir = workdir
        self.pod = net.add_pod("mnist-worker-0")
        self.measure = args.measure
        self.tfboot = args.tfboot

    # ---- one measured run inside the pod

    def measure_once(self, argv: list[str], env: dict, tag: str, allow_failure: bool = False) -> dict:
        out = os.path.join(self.workdir, f"{tag}.stdout")
        err = os.path.join(self.workdir, f"{tag}.stderr")
        before_dns, before_pod = udp_counters(self.net.dns_ns), udp_counters(self.pod.netns)
        cpu_before = self.net.dns_server_cpu_seconds()
        cp = self.net.exec_in_pod(self.pod, [self.measure, "once", "--stdout", out, "--stderr", err, "--", *argv],
                                  env=env, timeout=RUN_TIMEOUT)
        cpu_after = self.net.dns_server_cpu_seconds()
        after_dns, after_pod = udp_counters(self.net.dns_ns), udp_counters(self.pod.netns)
        if cp.returncode != 0:
            raise RuntimeError(f"measure failed for {argv}: {cp.stderr.strip()}")
        result = json.loads(cp.stdout)
        with open(out) as f:
            result["stdout"] = f.read()
        with open(err, errors="replace") as f:
            result["stderr_full"] = f.read()
        result["stderr_tail"] = result["stderr_full"][-2000:]
        # Datagrams the server's namespace received (= UDP queries) and drops for full buffers.
        result["server_cpu_s"] = cpu_after - cpu_before
        result["server_datagrams"] = after_dns["InDatagrams"] - before_dns["InDatagrams"]
        result["server_drops"] = after_dns["RcvbufErrors"] - before_dns["RcvbufErrors"]
        result["client_drops"] = after_pod["RcvbufErrors"] - before_pod["RcvbufErrors"]
        result["udp_drops"] = result["server_drops"] + result["client_drops"]
        if result["status"] != 0 and not allow_failure:
            raise RuntimeError(f"{argv[0]} exited {result['status']}: {result['stderr_tail']}")
        return result

    def contender_run(self, name: str, n: int, queries_file: str, tag: str, log_root: str | None = None,
                      tfboot_args: tuple = ()) -> dict:
        if name == "tfboot":
            env = {"TFBOOT_CLUSTER": f"worker={n}"}
            argv = [*after_the_wait(self.tfboot, *tfboot_args)]
            if log_root:   # counted run: write startup.json (tries per peer), run `true`
                # --address ip: with names, TF_CONFIG for 4096 tasks is over Linux's 128 KiB limit
                # for one environment string, which tfboot refuses before it sends any query.
                env["TFBOOT_LOG_ROOT"] = log_root
                # One pod of the job alone: without the control channel, which would wait at the
                # start barrier for the N - 1 others.
                env["TFBOOT_CONTROL_PORT"] = "0"
                argv = [self.tfboot, "--address", "ip", "--", "/bin/true"]
        elif name == "python":
            env = {"NUM_WORKERS": str(n)}
            argv = [PYTHON, os.path.join(HERE, "baseline_entrypoint.py")]
        else:
            env = {}
            argv = [DNSPERF, "-s", self.net.dns_ip, "-d", queries_file, "-n", "1", "-c", "1",
                    "-q", str(DNSPERF_OUTSTANDING)]
        # The counted tfboot run execs `true` with TF_CONFIG in its environment, which may fail
        # (E2BIG: one environment string is limited to 128 KiB); that is recorded, not fatal.
        result = self.measure_once(argv, env, tag, allow_failure=bool(log_root))
        if name == "dnsperf":
            result.update(parse_dnsperf(result["stdout"]))
            result["seconds"] = result["exit_s"]
            if result["completed"] != 2 * n or result["lost"]:
                raise RuntimeError(f"dnsperf completed {result['completed']} of {2 * n} queries: {result['stdout']}")
        else:
            result["seconds"] = result["first_line_s"] if result["first_line_s"] >= 0 else result["exit_s"]
            if not log_root:
                config = json.loads(result["stdout"])
                # tfboot runs with --address ip (after_the_wait); the baseline prints names.
                expected = [f"{peer_ip(self.net.subnet, i) if name == 'tfboot' else fqdn(i)}:2222" for i in range(n)]
                if config != {"cluster": {"worker": expected}, "task": {"type": "worker", "index": 0}}:
                    raise RuntimeError(f"{name} printed an unexpected TF_CONFIG: {result['stdout'][:300]}")
        # With --log-level debug tfboot logs "<name> resolves to <ip> after <k> tries" per name.
        tries = [int(t) for t in re.findall(r"resolves to \S+ after (\d+) tries", result.pop("stderr_full"))]
        if tries:
            result["retried_lookups"] = sum(1 for t in tries if t > 1)
            result["max_tries"] = max(tries)
        result.pop("stdout", None)
        return result

    # ---- per N

    def run_size(self, n: int) -> dict:
        records = [(fqdn(i), peer_ip(self.net.subnet, i)) for i in range(n)]
        assert records[0][1] == self.pod.ip
        self.net.set_query_logging(False)
        self.net.load_peer_records(records)
        queries_file = os.path.join(self.workdir, f"queries-{n}.txt")
        with open(queries_file, "w") as f:
            f.writelines(f"{name} A\n{name} AAAA\n" for name, _ in records)

        runs: dict[str, list[dict]] = {c: [] for c in CONTENDERS}
        for c in CONTENDERS:   # warm-up (page cache, dnsmasq's first answers): not counted
            self.contender_run(c, n, queries_file, f"warmup-{n}-{c}")
        for rep in range(self.args.reps):
            order = CONTENDERS[rep % 3:] + CONTENDERS[:rep % 3]
            for c in order:
                r = self.contender_run(c, n, queries_file, f"time-{n}-{c}-{rep}")
                runs[c].append(r)
                log(f"  N={n:5d} rep {rep + 1}/{self.args.reps} {c:8s} {r['seconds'] * 1e3:9.1f} ms"
                    f"  rss {r['maxrss_kb'] / 1024:6.1f} MB  server datagrams {r['server_datagrams']}"
                    f"  udp drops {r['udp_drops']}")

        counted = self.counted_runs(n, queries_file)
        summary = {"n": n, "runs": runs, "counted": counted}
        for c in CONTENDERS:
            summary[c] = {
                "median_s": median([r["seconds"] for r in runs[c]]),
                "min_s": min(r["seconds"] for r in runs[c]),
                "max_s": max(r["seconds"] for r in runs[c]),
                "median_maxrss_kb": median([r["maxrss_kb"] for r in runs[c]]),
                "max_maxrss_kb": max(r["maxrss_kb"] for r in runs[c]),
                "median_cpu_s": median([r["user_s"] + r["system_s"] for r in runs[c]]),
                "median_server_cpu_s": median([r["server_cpu_s"] for r in runs[c]]),
                "server_datagrams": [r["server_datagrams"] for r in runs[c]],
                "udp_drops": sum(r["udp_drops"] for r in runs[c]),
            }
        summary["dnsperf"]["median_runtime_s"] = median([r["runtime_s"] for r in runs["dnsperf"]])
        return summary

    def counted_runs(self, n: int, queries_file: str) -> dict:
        """One run of each with dnsmasq's query logging on: queries counted at the server."""
        self.net.set_query_logging(True)
        counted = {}
        try:
            for c in CONTENDERS:
                log_root = os.path.join(self.workdir, f"logs-{n}") if c == "tfboot" else None
                before = len(self.net.dns_queries())
                r = self.contender_run(c, n, queries_file, f"counted-{n}-{c}", log_root=log_root)
                queries = self.net.dns_queries()[before:]
                per_name: dict[str, int] = {}
                for qtype, name, _client in queries:
                    per_name[name] = per_name.get(name, 0) + 1
                entry = {
                    "queries": len(queries),
                    "by_type": {t: sum(1 for q in queries if q[0] == t) for t in sorted({q[0] for q in queries})},
                    "names": len(per_name),
                    "max_per_name": max(per_name.values(), default=0),
                    "unexpected_names": sorted(set(per_name) - {fqdn(i) for i in range(n)})[:5],
                    "seconds": r["seconds"],
                    "udp_drops": r["udp_drops"],
                    "server_drops": r["server_drops"],
                    "client_drops": r["client_drops"],
                }
                if c == "tfboot":
                    log_dir = os.path.join(log_root, "worker_0")
                    with open(os.path.join(log_dir, "startup.json")) as f:
                        startup = json.load(f)
                    tries = [p["tries"] for p in startup["peers"]]
                    errors = [line for line in r["stderr_tail"].splitlines() if " error " in line]
                    entry.update(peers=len(tries), max_tries=max(tries), total_tries=sum(tries),
                                 all_resolved=all(p["resolved"] for p in startup["peers"]),
                                 warnings=startup.get("warnings", []),
                                 tf_config_bytes=os.path.getsize(os.path.join(log_dir, "tf_config.json")) - 1,
                                 exec_status=r["status"], exec_error=errors[-1] if errors else "")
                counted[c] = entry
                log(f"  N={n:5d} counted  {c:8s} {entry['queries']} queries for {n} peers "
                    f"({entry['queries'] / n:.2f}/peer), max {entry['max_per_name']} per name"
                    + (f", max tries {entry['max_tries']}, TF_CONFIG {entry['tf_config_bytes']} bytes, "
                       f"exec of the command: {entry['exec_status']} {entry['exec_error']}" if c == "tfboot" else ""))
        finally:
            self.net.set_query_logging(False)
        return counted

    # ---- a DNS server that stalls while the job starts

    def stall_runs(self, n: int) -> dict:
        """dnsmasq restarted right before each run: it listens at once but answers only after it
        has read its records (seconds at N = 4096, see netbench), like a cluster DNS that restarts
        or reloads as a job starts. Queries sent meanwhile queue up in its socket buffer."""
        self.net.set_query_logging(False)
        self.net.load_peer_records([(fqdn(i), peer_ip(self.net.subnet, i)) for i in range(n)])
        t0 = time.monotonic()
        self.net.restart_dns_unready()
        self.net.wait_records_loaded()
        stall = time.monotonic() - t0
        result = {"n": n, "stall_s": stall}
        for c in ("tfboot", "python"):
            self.net.restart_dns_unready()
            r = self.contender_run(c, n, "", f"stall-{n}-{c}", tfboot_args=("--log-level", "debug"))
            self.net.wait_records_loaded()
            result[c] = {"seconds": r["seconds"], "server_drops": r["server_drops"],
                         "server_datagrams": r["server_datagrams"],
                         "retried_lookups": r.get("retried_lookups", 0), "max_tries": r.get("max_tries", 0)}
            log(f"  stall N={n} {c:8s} {r['seconds']:.2f} s, server drops {r['server_drops']}, "
                f"datagrams received {r['server_datagrams']}"
                + (f", lookups retried {result[c]['retried_lookups']}" if c == "tfboot" else ""))
        return result

    # ---- start-up without DNS

    def startup_time(self) -> dict:
        n = self.args.startup_n
        env = {"TFBOOT_CLUSTER": f"worker={n}"}
        loops = {}
        for tag, argv in (("spawn_floor", [self.measure]),   # usage error, exits at once: the floor
                          ("tfboot", [self.tfboot, "--print", "--wait", "0"])):  # the plan, printed
            cp = self.net.exec_in_pod(self.pod, [self.measure, "loop", str(self.args.startup_runs), "--", *argv],
                                      env=env, timeout=RUN_TIMEOUT)
            result = json.loads(cp.stdout)
            if tag == "tfboot" and result["status"] != 0:
                raise RuntimeError(f"tfboot --wait 0 exited {result['status']}")
            seconds = result["seconds"]
            loops[tag] = {"median_s": median(seconds), "min_s": min(seconds), "p90_s": quantile(seconds, 0.9),
                          "runs": len(seconds)}
        return {"n": n, **loops}


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def parse_dnsperf(text: str) -> dict:
    def number(label):
        m = re.search(rf"{re.escape(label)}:\s+([0-9.]+)", text)
        if not m:
            raise RuntimeError(f"dnsperf output lacks '{label}': {text}")
        return float(m.group(1))
    return {"sent": int(number("Queries sent")), "completed": int(number("Queries completed")),
            "lost": int(number("Queries lost")), "runtime_s": number("Run time (s)"),
            "qps": number("Queries per second")}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rss_floor(measure: str) -> int:
    """ru_maxrss the stopwatch itself lends a child (the child of a spawn starts from its mm)."""
    cp = subprocess.run([measure, "once", "--", measure], capture_output=True, text=True, timeout=10)
    return json.loads(cp.stdout)["maxrss_kb"]


# ---- report

def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def render(report: dict) -> str:
    lines = []
    env = report["environment"]
    lines.append(f"# tfboot DNS-wait benchmark\n")
    lines.append(f"{env['date']}, {env['machine']}; tfboot {env['tfboot_version']} "
                 f"(sha256 {env['tfboot_sha256'][:12]}), {report.get('dns_server_label', 'dnsmasq ' + env['dnsmasq'])}, dnsperf {env['dnsperf']}, "
                 f"Python {env['python']}. Medians of {report['reps']} alternating repetitions; "
                 f"the server's query logging off for timing. Load average at start / end: "
                 f"{report['load_start']:.1f} / {report['load_end']:.1f}.\n")
    if max(report["load_start"], report["load_end"]) > 0.5 * (os.cpu_count() or 1):
        lines.append("**Warning: the machine was busy with other work during the run; absolute times are "
                     "inflated and noisy (ratios between contenders, run alternately, hold better).**\n")
    lines.append("| N | tfboot ms | Python baseline ms | dnsperf ms | tfboot / dnsperf | Python / tfboot "
                 "| tfboot peak RSS MB | tfboot queries / peer | tfboot max tries | lost (drops, retries) |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for size in report["sizes"]:
        n = size["n"]
        t, p, d = (size[c]["median_s"] for c in CONTENDERS)
        counted = size["counted"]["tfboot"]
        drops = size["tfboot"]["udp_drops"] + counted["udp_drops"]
        lost = "none" if drops == 0 and counted["max_tries"] == 1 and counted["queries"] <= 2 * n else \
            f"{drops} drops, max tries {counted['max_tries']}"
        lines.append(f"| {n} | {ms(t)} | {ms(p)} | {ms(d)} | {t / d:.2f}× | {p / t:.1f}× "
                     f"| {size['tfboot']['max_maxrss_kb'] / 1024:.1f} | {counted['queries'] / n:.2f} "
                     f"| {counted['max_tries']} | {lost} |")
    lines.append("")
    lines.append("Ranges (min–max over the repetitions), ms:\n")
    lines.append("| N | tfboot | Python baseline | dnsperf (wall) | dnsperf own run time | CPU ms tfboot / dnsperf "
                 "| DNS server CPU ms during tfboot / dnsperf | Python peak RSS MB | dnsperf peak RSS MB "
                 "| queries / peer counted: Python, dnsperf |")
    lines.append("|---:|---|---|---|---:|---|---|---:|---:|---|")
    for size in report["sizes"]:
        n = size["n"]
        rng = {c: f"{ms(size[c]['min_s'])}–{ms(size[c]['max_s'])}" for c in CONTENDERS}
        lines.append(f"| {n} | {rng['tfboot']} | {rng['python']} | {rng['dnsperf']} "
                     f"| {ms(size['dnsperf']['median_runtime_s'])} "
                     f"| {ms(size['tfboot']['median_cpu_s'])} / {ms(size['dnsperf']['median_cpu_s'])} "
                     f"| {ms(size['tfboot']['median_server_cpu_s'])} / {ms(size['dnsperf']['median_server_cpu_s'])} "
                     f"| {size['python']['max_maxrss_kb'] / 1024:.1f} "
                     f"| {size['dnsperf']['max_maxrss_kb'] / 1024:.1f} "
                     f"| {size['counted']['python']['queries'] / n:.2f}, {size['counted']['dnsperf']['queries'] / n:.2f} |")
    lines.append("")
    lines.append("Running the command after the wait (the counted run, `tfboot -- /bin/true`, TF_CONFIG in its "
                 "environment; Linux limits one environment string to 128 KiB):\n")
    for size in report["sizes"]:
        counted = size["counted"]["tfboot"]
        outcome = "ok" if counted["exec_status"] == 0 else \
            f"**failed, exit {counted['exec_status']}**: `{counted['exec_error'].split(' error ', 1)[-1]}`"
        lines.append(f"* N = {size['n']}: TF_CONFIG {counted['tf_config_bytes']:,} bytes, exec {outcome}")
    if report.get("stall"):
        st = report["stall"]
        t, p = st["tfboot"], st["python"]
        lines.append("")
        lines.append(f"DNS server stalled at start (N = {st['n']}; dnsmasq restarted just before the run listens at "
                     f"once but answers only after reading its records, {st['stall_s']:.1f} s): tfboot "
                     f"{t['seconds']:.1f} s ({t['server_drops']} queries dropped at the server, "
                     f"{t['retried_lookups']} lookups retried, max tries {t['max_tries']}); Python baseline "
                     f"{p['seconds']:.1f} s ({p['server_drops']} dropped).")
    st = report["startup"]
    lines.append("")
    lines.append(f"`--wait 0` start-up (N = {st['n']}, {st['tfboot']['runs']} runs, spawn to reaped): median "
                 f"{st['tfboot']['median_s'] * 1e3:.2f} ms, min {st['tfboot']['min_s'] * 1e3:.2f} ms, p90 "
                 f"{st['tfboot']['p90_s'] * 1e3:.2f} ms; spawning a static no-op costs "
                 f"{st['spawn_floor']['median_s'] * 1e3:.2f} ms of that.  ")
    lines.append(f"Binary: `build/launcher/tfboot` {report['binary_bytes']:,} bytes "
                 f"({report['binary_bytes'] / 2**20:.2f} MiB).  ")
    lines.append(f"Peak RSS floor lent by the stopwatch: {report['rss_floor_kb']} KB.\n")
    lines.append("| target | measured | met |")
    lines.append("|---|---|---|")
    for target, measured, met in report["targets"]:
        lines.append(f"| {target} | {measured} | {'yes' if met else '**no**'} |")
    lines.append("")
    return "\n".join(lines)


def evaluate_targets(report: dict) -> list:
    by_n = {s["n"]: s for s in report["sizes"]}
    targets = []
    for n in (1024, 4096):
        if n in by_n:
            ratio = by_n[n]["tfboot"]["median_s"] / by_n[n]["dnsperf"]["median_s"]
            targets.append((f"N = {n}: tfboot within 1.5× of dnsperf", f"{ratio:.2f}×", ratio <= 1.5))
    if 1024 in by_n:
        ratio = by_n[1024]["python"]["median_s"] / by_n[1024]["tfboot"]["median_s"]
        targets.append(("N = 1024: ≥ 5× faster than the Python baseline", f"{ratio:.1f}×", ratio >= 5))
    worst = max(s["counted"]["tfboot"]["queries"] / s["n"] for s in report["sizes"])
    targets.append(("≤ 2 queries per peer (all records exist)", f"max {worst:.2f}", worst <= 2))
    lost = [(s["n"], s["counted"]["tfboot"]["max_tries"], s["tfboot"]["udp_drops"] + s["counted"]["tfboot"]["udp_drops"])
            for s in report["sizes"]]
    ok = all(tries == 1 and drops == 0 for _, tries, drops in lost)
    targets.append(("no lost queries at the default concurrency",
                    ", ".join(f"N={n}: max tries {t}, drops {d}" for n, t, d in lost), ok))
    if 4096 in by_n:
        rss = by_n[4096]["tfboot"]["max_maxrss_kb"] / 1024
        targets.append(("peak RSS ≤ 10 MB at N = 4096", f"{rss:.1f} MB", rss <= 10))
    size = report["binary_bytes"]
    targets.append(("static binary ≤ 3 MB", f"{size / 1e6:.2f} MB ({size / 2**20:.2f} MiB)", size <= 3_000_000))
    if report.get("stall"):
        st = report["stall"]
        targets.append((f"(no target) stalled server, N = {st['n']}: tfboot not slower than the Python baseline",
                        f"{st['tfboot']['seconds']:.1f} s vs {st['python']['seconds']:.1f} s",
                        st["tfboot"]["seconds"] <= st["python"]["seconds"]))
    start = report["startup"]["tfboot"]["median_s"] * 1e3
    targets.append(("`--wait 0` start ≤ 2 ms median", f"{start:.2f} ms", start <= 2))
    return targets


def replot(out: str, suffix: str = "") -> None:
    """Redraw dns_wait.png from results.json (for changes to the plot only)."""
    with open(os.path.join(out, f"results{suffix}.json")) as f:
        plot(json.load(f), os.path.join(out, f"dns_wait{suffix}.png"))


def plot(report: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = [s["n"] for s in report["sizes"]]
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    styles = {"tfboot": ("tab:blue", "o"), "python": ("tab:red", "s"), "dnsperf": ("tab:green", "^")}
    for c in CONTENDERS:
        med = [s[c]["median_s"] * 1e3 for s in report["sizes"]]
        lo = [m - s[c]["min_s"] * 1e3 for m, s in zip(med, report["sizes"])]
        hi = [s[c]["max_s"] * 1e3 - m for m, s in zip(med, report["sizes"])]
        color, marker = styles[c]
        ax.errorbar(sizes, med, yerr=[lo, hi], color=color, marker=marker, capsize=4, linewidth=2,
                    label=LABELS[c])
        # tfboot's labels left below its points, the others' right above: no overlaps where the
        # tfboot and dnsperf lines meet.
        offset, align = ((-8, -14), "right") if c == "tfboot" else ((8, 6), "left")
        for x, y in zip(sizes, med):
            ax.annotate(f"{y:.0f} ms" if y >= 10 else f"{y:.1f} ms", (x, y), textcoords="offset points",
                        xytext=offset, ha=align, fontsize=9, color=color,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("peers N (all records published; dnsperf sends A + AAAA per peer, tfboot A first)")
    ax.set_ylabel("wall time, ms (median; bars: min–max)")
    load = max(report["load_start"], report["load_end"])
    busy = f"\nmachine busy with other work (load average {load:.1f} on {os.cpu_count()} cores): absolute times inflated" \
        if load > 0.5 * (os.cpu_count() or 1) else ""
    ax.set_title(f"Time until every peer resolves — {report.get('dns_server', 'dnsmasq')} on a namespace network, "
                 f"{report['reps']} reps{busy}",
                 fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def version_of(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError:
        return "?"
    text = (out.stdout + out.stderr).strip().splitlines()
    return text[0] if text else "?"


def dnsperf_version() -> str:
    cp = subprocess.run([DNSPERF, "-h"], capture_output=True, text=True, timeout=10)
    m = re.search(r"Version\s+(\S+)", cp.stdout + cp.stderr)
    return m.group(1) if m else "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, "build", "launcher", "tfboot"))
    ap.add_argument("--measure", default=os.path.join(REPO, "build-bench", "measure"))
    ap.add_argument("--sizes", default="64,1024,4096", help="peer counts, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per N and contender")
    ap.add_argument("--startup-runs", type=int, default=200)
    ap.add_argument("--startup-n", type=int, default=64)
    ap.add_argument("--stall-n", type=int, default=4096,
                    help="peers for the stalled-server scenario (0: skip it)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    ap.add_argument("--dns-server", choices=("dnsmasq", "coredns"), default="dnsmasq",
                    help="the cluster DNS: dnsmasq, or CoreDNS as a Kubernetes cluster's (its files then end in "
                         "-coredns; it reads its records before it listens, so no stalled-server scenario)")
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from --out's results.json")
    args = ap.parse_args(argv)
    suffix = "" if args.dns_server == "dnsmasq" else f"-{args.dns_server}"
    if args.replot:
        replot(args.out, suffix)
        return 0
    if os.geteuid() != 0:
        log("bench: needs root (network, mount and PID namespaces)")
        return 2
    sizes = [int(x) for x in args.sizes.split(",")]
    if not 1 <= args.reps <= 100 or not 1 <= args.startup_runs <= 10000 or not all(1 <= n <= 10000 for n in sizes):
        log("bench: --reps 1..100, --startup-runs 1..10000, sizes 1..10000")
        return 2
    if args.dns_server == "coredns":
        if missing_reason():
            log(f"bench: {missing_reason()}")
            return 2
        args.stall_n = 0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, ".gitignore"), "w") as f:
        f.write("# benchmark output (scripts/bench), not sources\n*\n")

    workdir = tempfile.mkdtemp(prefix="tfboot-bench-")
    try:
        # A snapshot of the binary, so a rebuild during the run cannot change what is measured.
        tfboot = os.path.join(workdir, "tfboot")
        shutil.copy2(args.tfboot, tfboot)
        with open(tfboot, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        args.tfboot = tfboot
        report = {
            "environment": {
                "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                "machine": f"{os.cpu_count()} cores, Linux {os.uname().release}",
                "tfboot_version": version_of([tfboot, "--version"]).replace("tfboot ", ""),
                "tfboot_sha256": sha,
                "dnsmasq": version_of(["/usr/sbin/dnsmasq", "--version"]).split()[2],
                "dnsperf": dnsperf_version(),
                "python": version_of([PYTHON, "--version"]).replace("Python ", ""),
            },
            "reps": args.reps,
            "dns_server": args.dns_server,
            "dns_server_label": (f"dnsmasq {version_of(['/usr/sbin/dnsmasq', '--version']).split()[2]}"
                                 if args.dns_server == "dnsmasq" else f"CoreDNS {COREDNS_VERSION} (cache 30)"),
            "binary_bytes": os.path.getsize(args.tfboot),
            "rss_floor_kb": rss_floor(args.measure),
        }
        started = time.monotonic()
        report["load_start"] = os.getloadavg()[0]
        with BenchNetwork(service=SERVICE, namespace=NAMESPACE, cluster_domain=DOMAIN,
                          dns_server=args.dns_server) as net:
            bench = Bench(args, net, workdir)
            report["sizes"] = []
            for n in sizes:
                log(f"== N = {n}")
                report["sizes"].append(bench.run_size(n))
            if args.stall_n:
                log(f"== DNS server stalled at start, N = {args.stall_n}")
                report["stall"] = bench.stall_runs(args.stall_n)
            log("== --wait 0 start-up")
            report["startup"] = bench.startup_time()
        report["bench_seconds"] = time.monotonic() - started
        report["load_end"] = os.getloadavg()[0]
        report["targets"] = evaluate_targets(report)
        markdown = render(report)
        with open(os.path.join(args.out, f"results{suffix}.json"), "w") as f:
            json.dump(report, f, indent=1)
        with open(os.path.join(args.out, f"results{suffix}.md"), "w") as f:
            f.write(markdown)
        plot(report, os.path.join(args.out, f"dns_wait{suffix}.png"))
        print(markdown)
        log(f"bench: wrote {args.out}/results{suffix}.md, results{suffix}.json, dns_wait{suffix}.png "
            f"({report['bench_seconds']:.0f}s)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
