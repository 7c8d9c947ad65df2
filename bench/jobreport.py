"""The job-wide benchmark's report (jobbench.py): tables, an extrapolation on paper to 1,000 and
10,000 pods, and the plot of queries against P.

* ``render(report)`` -> markdown: job-wide figures per P, server and mode; the late pod; the
  server's CPU per query; the extrapolation.
* ``extrapolate(report)``: per mode, the exponent k of queries ~ P^k fitted (least squares on
  log-log) to CoreDNS's measured counts, and for 1,000 and 10,000 pods the queries, the server's
  CPU seconds (queries x CoreDNS's measured CPU per query for names that exist), the bytes the
  coordinator sends (fitted the same way) and a time to start: with the control channel the sum
  of the start barrier's phases (every task present, names checked, start sent to all, commands
  run), each fitted as a * P^k on its own; without it the server-bound part (CPU seconds / this
  machine's cores) plus the rest of the measured time fitted as a + b*P.
* ``plot(report, path)``: queries against P, log-log, both servers and both modes, the fitted
  lines drawn on to 10,000 pods.
"""

from __future__ import annotations

import math
import os
import statistics

MODES = ("control", "no-control")
MODE_LABELS = {"control": "control channel (default)", "no-control": "--control-port 0"}
PAPER_SIZES = (1000, 10000)
# The start barrier's phases (control channel), each from the end of the one before:
# name -> (its end, its beginning); the first begins when the pods start.
PHASES = {"barrier_s": ("all_present_s", None),                     # every task present
          "names_s": ("names_verified_s", "all_present_s"),         # the coordinator checks every name
          "fanout_s": ("last_told_start_s", "names_verified_s"),    # the last task told to start
          "commands_s": ("last_start_to_all_running_s", "last_told_start_s")}   # every command runs
PHASE_LABELS = {"barrier_s": "all present", "names_s": "names checked", "fanout_s": "start sent to all",
                "commands_s": "commands run"}


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def job_medians(report: dict) -> dict:
    """(server, P, mode) -> median of each figure over the repetitions."""
    grouped: dict = {}
    for run in report["jobs"]:
        grouped.setdefault((run["server"], run["p"], run["mode"]), []).append(run)
    medians = {}
    for key, runs in grouped.items():
        for run in runs:
            for phase, (end, begin) in PHASES.items():
                if run.get(end) is not None and (begin is None or run.get(begin) is not None):
                    run[phase] = run[end] - (run[begin] if begin else 0.0)
        medians[key] = {field: _median([r.get(field) for r in runs])
                        for field in ("queries", "server_cpu_s", "last_start_to_all_running_s", "requests",
                                      "cache_hits", "coordinator_sent_bytes", *PHASES)}
        medians[key]["failures"] = sum(len(r["exit_codes_nonzero"]) for r in runs)
        medians[key]["runs"] = len(runs)
    return medians


def fit_exponent(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(k, a) of y = a * x^k, least squares on logs; None with fewer than two distinct x."""
    points = [(x, y) for x, y in points if y and y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    lx = [math.log(x) for x, _ in points]
    ly = [math.log(y) for _, y in points]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    k = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return k, math.exp(my - k * mx)


def fit_line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept, slope) of y = intercept + slope * x, least squares, neither below 0."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if len(set(xs)) < 2:
        return max(0.0, statistics.fmean(ys)), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs))
    return max(0.0, my - slope * mx), slope


def cost_per_query(report: dict, server: str, kind: str = "existing") -> float | None:
    for cost in report.get("cost", []):
        if cost["server"] == server and kind in cost:
            return cost[kind]["us_per_query"] * 1e-6
    return None


def _power(points: list[tuple[int, float]], p: int) -> float:
    """points fitted as a * P^k (k >= 0) at p; the largest P's value where no fit is possible."""
    fit = fit_exponent(points)
    if fit is None:
        return max((y for _, y in points), default=0.0)
    k, a = fit
    if k < 0:   # noise at small values: take it as constant
        return statistics.fmean(y for _, y in points)
    return a * p ** k


def extrapolate(report: dict, server: str = "coredns") -> dict:
    medians = job_medians(report)
    cores = int(report["environment"]["machine"].split()[0])
    per_query = cost_per_query(report, server)
    paper = {}
    for mode in MODES:
        points = sorted((p, m) for (s, p, md), m in medians.items() if s == server and md == mode)
        fit = fit_exponent([(p, m["queries"]) for p, m in points])
        if fit is None or per_query is None:
            continue
        k, a = fit
        phases = {phase: [(p, m[phase]) for p, m in points if m.get(phase) is not None] for phase in PHASES}
        phased = mode == "control" and all(len(v) == len(points) for v in phases.values())
        # Without the phases: the measured time less its server-bound part, as intercept + slope * P.
        rest = fit_line([(p, (m["last_start_to_all_running_s"] or 0.0) - m["queries"] * per_query / cores)
                         for p, m in points])
        sent = [(p, m["coordinator_sent_bytes"]) for p, m in points if m.get("coordinator_sent_bytes")]
        rows = []
        for p in PAPER_SIZES:
            queries = a * p ** k
            cpu = queries * per_query
            start = (sum(_power(values, p) for values in phases.values()) if phased
                     else cpu / cores + rest[0] + rest[1] * p)
            rows.append({"p": p, "queries": queries, "server_cpu_s": cpu, "start_s": start,
                         "coordinator_sent_bytes": _power(sent, p) if sent and mode == "control" else None})
        paper[mode] = {"k": k, "a": a, "p_max": points[-1][0], "rest": rest, "rows": rows, "phased": phased,
                       "phase_k": {phase: (fit_exponent(v) or (None,))[0] for phase, v in phases.items()},
                       "sent_k": (fit_exponent(sent) or (None,))[0]}
    return {"server": server, "cores": cores, "per_query_s": per_query, "modes": paper}


def _fmt_s(value) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.1f} s"


def _fmt_bytes(value) -> str:
    if value is None:
        return "n/a"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _fmt_count(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f} M"
    if value >= 1e4:
        return f"{value / 1e3:.0f} k"
    return f"{value:,.0f}"


def render(report: dict) -> str:
    env = report["environment"]
    lines = ["# tfboot job-wide DNS benchmark\n",
             f"{env['date']}, {env['machine']}; {env['tfboot']} (sha256 {env['tfboot_sha256'][:12]}), "
             f"CoreDNS {env['coredns']} (file zones, `cache 30`), dnsmasq {env['dnsmasq']} (`--no-negcache`). "
             f"Load average at start / end: {report['load_start']:.1f} / {report['load_end']:.1f}.\n"]
    if max(report["load_start"], report["load_end"]) > 0.5 * (os.cpu_count() or 1):
        lines.append("**Warning: the machine was busy with other work; times are inflated.**\n")
    medians = job_medians(report)
    lines.append("Job of P pods, every record published, server freshly started; queries = UDP datagrams the "
                 "server received; time = the pods' start (all at once) → every command running. Medians of the "
                 "repetitions.\n")
    lines.append("| P | server | queries: control | no control | per pod: control | no control "
                 "| server CPU: control | no control | time: control | no control | failed pods |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in report["sizes"]:
        for server in ("dnsmasq", "coredns"):
            row = [medians.get((server, p, mode)) for mode in MODES]
            if None in row:
                continue
            c, n = row
            lines.append(f"| {p} | {server} | {c['queries']:,.0f} | {n['queries']:,.0f} | {c['queries'] / p:.1f} "
                         f"| {n['queries'] / p:.1f} | {_fmt_s(c['server_cpu_s'])} | {_fmt_s(n['server_cpu_s'])} "
                         f"| {_fmt_s(c['last_start_to_all_running_s'])} | {_fmt_s(n['last_start_to_all_running_s'])} "
                         f"| {c['failures'] + n['failures']} |")
    phase_rows = [(p, server, medians[(server, p, "control")]) for p in report["sizes"] for server in ("dnsmasq", "coredns")
                  if (server, p, "control") in medians and medians[(server, p, "control")].get("fanout_s") is not None]
    if phase_rows:
        lines.append("")
        lines.append("The start barrier's phases with the control channel (from the coordinator's and the tasks' logs; "
                     "each from the end of the one before, medians), and the bytes the coordinator's pod sent:\n")
        lines.append("| P | server | " + " | ".join(PHASE_LABELS.values()) + " | coordinator sent |")
        lines.append("|---:|---|" + "---:|" * (len(PHASES) + 1))
        for p, server, m in phase_rows:
            lines.append(f"| {p} | {server} | " + " | ".join(_fmt_s(m[phase]) for phase in PHASES)
                         + f" | {_fmt_bytes(m['coordinator_sent_bytes'])} |")
    if report["late"]:
        lines.append("")
        lines.append(f"Late pod (P = {report['late'][0]['p']}; started {report['late_after_s']:.0f} s after the "
                     "others): time from its start to every command running. Record \"at start\": published as "
                     "the pod starts (CoreDNS serves it at its next `reload 1s` tick); \"before\": served before "
                     "it starts. \"told\": pods whose log says a negative answer came from a DNS cache.\n")
        lines.append("| late pod | record | server | control | no control | CoreDNS served it after | told: control, no control |")
        lines.append("|---|---|---|---:|---:|---:|---|")
        grouped: dict = {}
        for run in report["late"]:
            grouped.setdefault((run["late"], run["publish"], run["server"]), {})[run["mode"]] = run
        for (late, publish, server), runs in grouped.items():
            c, n = runs.get("control"), runs.get("no-control")
            who = f"{late} (coordinator)" if (c or n)["coordinator_late"] else late
            served = (c or n).get("record_served_after_s")
            fails = sum(len(r["exit_codes_nonzero"]) for r in runs.values())
            lines.append(f"| {who} | {publish} | {server} | {_fmt_s(c and c['late_start_to_all_running_s'])} "
                         f"| {_fmt_s(n and n['late_start_to_all_running_s'])} | {_fmt_s(served)} "
                         f"| {c and c['pods_logging_a_cache']}, {n and n['pods_logging_a_cache']}"
                         + (f" ({fails} pods failed)" if fails else "") + " |")
    if report.get("cost"):
        lines.append("")
        lines.append("The server's CPU per query (dnsperf from a pod, 64 in flight; /proc user+system time of "
                     "the server over the run):\n")
        lines.append("| server | names that exist: µs CPU / query | qps | names that do not (NXDOMAIN): µs / query | qps |")
        lines.append("|---|---:|---:|---:|---:|")
        for cost in report["cost"]:
            e, m = cost["existing"], cost["missing"]
            lines.append(f"| {cost['server']} | {e['us_per_query']:.1f} | {e['qps']:,.0f} "
                         f"| {m['us_per_query']:.1f} | {m['qps']:,.0f} |")
    paper = extrapolate(report)
    if paper["modes"]:
        lines.append("")
        lines.append(f"On paper, from CoreDNS's figures: queries ≈ a·P^k fitted to the measured counts; server CPU = "
                     f"queries × {paper['per_query_s'] * 1e6:.1f} µs (measured, names that exist); coordinator's bytes "
                     "fitted the same way. Time to start: with the control channel the sum of the barrier's phases, "
                     "each fitted as a·P^k (exponents below); without it server CPU / "
                     f"{paper['cores']} cores + the rest of the measured time fitted as a + b·P. Here all pods share "
                     f"{paper['cores']} cores, so the phases that run on every pod (all present, commands run) are "
                     "pessimistic; the coordinator's (names checked, start sent to all) are its own work. No retries "
                     "counted (an overloaded server adds timeouts and retries on top).\n")
        lines.append("| design | k (queries ∝ P^k) | pods | queries | server CPU | coordinator sends | time to start |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for mode, fit in paper["modes"].items():
            for row in fit["rows"]:
                lines.append(f"| {MODE_LABELS[mode]} | {fit['k']:.2f} | {row['p']:,} | {_fmt_count(row['queries'])} "
                             f"| {_fmt_s(row['server_cpu_s'])} | {_fmt_bytes(row['coordinator_sent_bytes'])} "
                             f"| {_fmt_s(row['start_s'])} |")
        control = paper["modes"].get("control")
        if control and control["phased"]:
            lines.append("")
            lines.append("Exponents fitted (time ∝ P^k) to the control channel's phases: "
                         + ", ".join(f"{PHASE_LABELS[phase]} {k:.2f}" for phase, k in control["phase_k"].items()
                                     if k is not None)
                         + (f"; coordinator's bytes sent {control['sent_k']:.2f}." if control["sent_k"] else "."))
    lines.append("")
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    medians = job_medians(report)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    colors = {"control": "tab:blue", "no-control": "tab:red"}
    markers = {"dnsmasq": "s", "coredns": "o"}
    for server in ("dnsmasq", "coredns"):
        for mode in MODES:
            points = sorted((p, m["queries"]) for (s, p, md), m in medians.items() if s == server and md == mode)
            if not points:
                continue
            ax.plot([p for p, _ in points], [q for _, q in points], marker=markers[server], linestyle="none",
                    color=colors[mode], markersize=7, label=f"{MODE_LABELS[mode]}, {server}")
            fit = fit_exponent(points)
            if fit and server == "coredns":
                k, a = fit
                xs = [points[0][0] * (10000 / points[0][0]) ** (i / 50) for i in range(51)]
                ax.plot(xs, [a * x ** k for x in xs], color=colors[mode], linestyle="--", linewidth=1,
                        label=f"fit: queries ∝ P^{k:.2f} ({mode})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pods P (TFBOOT_CLUSTER=worker=P, every record published)")
    ax.set_ylabel("DNS queries the server received, whole job")
    ax.set_title("Job-wide DNS queries: measured (markers) and extrapolated (dashed)", fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
