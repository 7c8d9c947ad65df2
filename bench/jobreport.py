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
* ``render_torch(torch)`` -> torch_results.md, the PyTorch start-up comparison (torchbench.py):
  tfboot and torchrun per P with their ratio, where a rank's time goes, the late master;
  ``torch_summary(torch)``: its ratios, for the line job_results.md gives it.
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
# The PyTorch comparison's figures per run (torchbench.py), medians over the repetitions.
TORCH_FIGURES = ("ready_max_s", "ready_median_s", "reduced_max_s", "all_exited_s", "job_cpu_s", "launch_s",
                 "import_s", "init_s", "init_after_last_import_s", "all_reduce_s")
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
    metrics_rows = [(p, server, medians[(server, p, "control")], medians[(server, p, "metrics")])
                    for p in report["sizes"] for server in ("dnsmasq", "coredns")
                    if (server, p, "control") in medians and (server, p, "metrics") in medians]
    if metrics_rows:
        lines.append("")
        lines.append("The metrics server's cost on the start (docs/observing.md): the same jobs with "
                     "`--metrics-port` on every task, alternating with the control channel alone in one run; "
                     "medians of the repetitions.\n")
        lines.append("| P | server | time: without | with --metrics-port | with / without | all present: without | with "
                     "| coordinator sent: without | with | failed pods |")
        lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p, server, c, m in metrics_rows:
            lines.append(f"| {p} | {server} | {_fmt_s(c['last_start_to_all_running_s'])} "
                         f"| {_fmt_s(m['last_start_to_all_running_s'])} "
                         f"| {_ratio(m['last_start_to_all_running_s'], c['last_start_to_all_running_s'])} "
                         f"| {_fmt_s(c.get('barrier_s'))} | {_fmt_s(m.get('barrier_s'))} "
                         f"| {_fmt_bytes(c['coordinator_sent_bytes'])} | {_fmt_bytes(m['coordinator_sent_bytes'])} "
                         f"| {c['failures'] + m['failures']} |")
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
    summary = report.get("torch_summary")
    if summary:
        lines.append("")
        lines.append("PyTorch start-up, tfboot against torchrun, in the same run: "
                     + (f"skipped ({summary['skipped']})." if summary.get("skipped") else
                        "`torch_results.md` (tfboot / torchrun, time to every rank past `init_process_group`: "
                        + ", ".join(f"{ratio} at P = {p}" for p, ratio in summary["ratios"]) + ")."))
    lines.append("")
    return "\n".join(lines)


def _ratio(a, b) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "n/a"


def torch_medians(torch: dict) -> dict:
    """(P, launcher) -> median of each figure over the repetitions, and the failed runs."""
    grouped: dict = {}
    for run in torch["runs"]:
        grouped.setdefault((run["p"], run["contender"]), []).append(run)
    medians = {}
    for (p, contender), runs in grouped.items():
        medians[(p, contender)] = m = {key: _median([r.get(key) for r in runs]) for key in TORCH_FIGURES}
        last = [r["ready_max_s"] for r in runs if r.get("ready_max_s") is not None]
        m["ready_max_range"] = (min(last), max(last)) if last else None
        m["failed"] = sum(1 for r in runs if any(r["exit_codes"]) or r["ranks_initialized"] != p or not r["sums_ok"])
        m["runs"] = len(runs)
    return medians


def torch_summary(torch: dict) -> dict:
    """For job_results.md: tfboot / torchrun per P (time to every rank initialized), or why skipped."""
    if torch.get("skipped"):
        return {"skipped": torch["skipped"]}
    medians = torch_medians(torch)
    return {"ratios": [(p, _ratio(medians[(p, "tfboot")]["ready_max_s"], medians[(p, "torchrun")]["ready_max_s"]))
                       for p in torch["sizes"] if (p, "tfboot") in medians and (p, "torchrun") in medians]}


def render_torch(torch: dict) -> str:
    """torch_results.md: the PyTorch start-up comparison (torchbench.py), tfboot and torchrun side
    by side per P, where the time goes, and the late master."""
    lines = ["# PyTorch start-up: tfboot and torchrun\n"]
    env = torch.get("environment")
    if env:
        lines.append(f"{env['date']}, {env['machine']}; {env['tfboot']} (sha256 {env['tfboot_sha256'][:12]}), "
                     f"dnsmasq {env['dnsmasq']}. Part of `scripts/bench job` (bench/README.md).\n")
    if torch.get("skipped"):
        return "\n".join(lines + [f"Skipped: {torch['skipped']}.", ""])
    if max(torch["load_start"], torch["load_end"]) > 0.5 * (os.cpu_count() or 1):
        lines.append("**Warning: the machine was busy with other work; times are inflated.**\n")
    lines.append(f"torch {torch['torch']} (gloo, CPU). P pods on dnsmasq, one process each running `torch_rank.py`, "
                 "released at the same moment; time = the pods' start → every rank past `init_process_group` "
                 "(the last rank; the median rank beside it). tfboot: `tfboot --framework pytorch --cluster worker=P "
                 "--nproc-per-node 1 -- python torch_rank.py` as PID 1; torchrun: `python -m torch.distributed.run "
                 f"--nnodes P --node-rank K --nproc-per-node 1 --master-addr <worker-0's FQDN> --master-port "
                 f"{torch['master_port']} torch_rank.py` as PID 1. Medians of {torch['reps']} repetitions, the two "
                 "alternating (min–max of the last rank in brackets), after one untimed warm-up of each. "
                 f"Load average at start / end: {torch['load_start']:.1f} / {torch['load_end']:.1f}; "
                 f"{torch['bench_seconds']:.0f} s in all.\n")
    medians = torch_medians(torch)
    lines.append("| P | launcher | every rank initialized | median rank | after one all_reduce | every pod exited "
                 "| CPU of the job | failed runs |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for p in torch["sizes"]:
        row = {contender: medians[(p, contender)] for contender in ("tfboot", "torchrun") if (p, contender) in medians}
        for contender, m in row.items():
            spread = (f" ({m['ready_max_range'][0]:.1f}–{m['ready_max_range'][1]:.1f} s)"
                      if m["ready_max_range"] else "")
            lines.append(f"| {p} | {contender} | {_fmt_s(m['ready_max_s'])}{spread} | {_fmt_s(m['ready_median_s'])} "
                         f"| {_fmt_s(m['reduced_max_s'])} | {_fmt_s(m['all_exited_s'])} | {_fmt_s(m['job_cpu_s'])} "
                         f"| {m['failed']} of {m['runs']} |")
        if len(row) == 2:
            t, r = row["tfboot"], row["torchrun"]
            lines.append(f"| {p} | **tfboot / torchrun** | **{_ratio(t['ready_max_s'], r['ready_max_s'])}** "
                         f"| {_ratio(t['ready_median_s'], r['ready_median_s'])} "
                         f"| {_ratio(t['reduced_max_s'], r['reduced_max_s'])} | {_ratio(t['all_exited_s'], r['all_exited_s'])} "
                         f"| {_ratio(t['job_cpu_s'], r['job_cpu_s'])} | |")
        rows.append((p, row))
    lines.append("")
    lines.append("Where a rank's time goes (median over the ranks, then over the repetitions): before the script "
                 "(tfboot: DNS wait, start barrier, exec; torchrun: its agent imports torch, the static rendezvous, "
                 "spawning the script), then the script's `import torch`, `init_process_group` (which waits for the "
                 "slowest rank's import; beside it, the last rank past it less the last rank's import: what the "
                 "store's rendezvous costs on top), one `all_reduce`. "
                 "All pods share this machine's cores: P imports of torch run at once, and torchrun has two rounds of "
                 "them (its agents', then the scripts').\n")
    lines.append("| P | launcher | before the script | import torch | init_process_group | after the last import "
                 "| all_reduce |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|")
    for p, row in rows:
        for contender, m in row.items():
            lines.append(f"| {p} | {contender} | {_fmt_s(m['launch_s'])} | {_fmt_s(m['import_s'])} "
                         f"| {_fmt_s(m['init_s'])} | {_fmt_s(m['init_after_last_import_s'])} "
                         f"| {_fmt_s(m['all_reduce_s'])} |")
    if torch["late"]:
        lines.append("")
        lines.append(f"Late master (P = {torch['late_p']}): worker-0 started {torch['late_after_s']:g} s after the "
                     "others, its DNS record published as it starts. Every run, in order; times to every rank past "
                     "`init_process_group`, from the others' start and from the master's; tfboot's longest DNS "
                     "wait as its pods logged it; warning and error lines in the pods' logs, and the first distinct "
                     "ones.\n")
        lines.append("| launcher | exit codes | ranks initialized | from the others' start | from the master's start "
                     "| longest DNS wait | warnings | first warnings |")
        lines.append("|---|---|---:|---:|---:|---:|---:|---|")
        for run in torch["late"]:
            notes = run["logs"]
            quoted = "; ".join(f"`{e.replace('|', '/').replace('`', '')}`" for e in notes["examples"][:2]) or "—"
            lines.append(f"| {run['contender']} | {' '.join(map(str, run['exit_codes']))} "
                         f"| {run['ranks_initialized']} of {run['p']} | {_fmt_s(run.get('ready_max_s'))} "
                         f"| {_fmt_s(run.get('ready_after_master_s'))} | {_fmt_s(notes['dns_wait_max_s'])} "
                         f"| {notes['warnings']} | {quoted} |")
    failures = [r for r in torch["warmup"] + torch["runs"] + torch["late"] if r.get("first_failure_log")]
    if failures:
        lines.append("")
        lines.append(f"{len(failures)} run(s) had a pod exit non-zero; the first one's log ends:\n")
        lines.append("```\n" + failures[0]["first_failure_log"].strip() + "\n```")
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
