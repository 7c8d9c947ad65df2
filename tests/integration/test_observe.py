"""Observing a start (docs/observing.md): the termination message, the metrics server's pages, and a real
Prometheus scraping a supervised job of namespace pods.

The tests without `root` run one task on this machine (--control-port 0, loopback only); the
others build namespace pods behind dnsmasq (tests/harness) and reach the pods' ports from inside
the namespaces only.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.processes import communicate_all

METRICS_PORT = 9400
PHASES = ("plan", "dns_wait", "barrier", "files")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_task(tfboot, tmp_path, command, *args, env=None):
    """A job of one task, supervised as init, with no DNS and no control channel."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TFBOOT_CLUSTER": "worker=1",
                "TFBOOT_HOSTNAME": "job-worker-0", "TFBOOT_LOG_ROOT": str(tmp_path / "logs"), "TFBOOT_WAIT": "0",
                "TFBOOT_CONTROL_PORT": "0"}
    full_env.update(env or {})
    return subprocess.Popen([tfboot, "--init", *args, "--", *command], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)


# Straight to the address, whatever proxy the environment names.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url, timeout=5):
    """(status, body) of a GET; status 0 when nothing answered."""
    try:
        with OPENER.open(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}")


def families(text):
    return {family.name: family for family in text_string_to_metric_families(text)}


def value_of(parsed, name, **labels):
    for family in parsed.values():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def check_with_promtool(text):
    if shutil.which("promtool") is None:
        return
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout + checked.stderr == ""  # no lint warning either


def error_line(err):
    lines = [line for line in err.splitlines() if " error " in line]
    assert len(lines) == 1, err
    return lines[0]


def logged_as(err, message):
    """The log line whose text the termination message is: the error, or the closing line."""
    assert message.endswith("\n") and message.count("\n") == 1, message
    lines = [line for line in err.splitlines() if line.endswith(" " + message.strip())]
    assert len(lines) == 1, (message, err)
    return lines[0]


# ---- the metrics server, one task on loopback


def test_one_supervised_task_serves_its_start_until_it_exits(tfboot, tmp_path):
    port = free_port()
    flag = tmp_path / "go"
    command = ["sh", "-c", f"i=0; while [ ! -e {flag} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exit 0"]
    proc = one_task(tfboot, tmp_path, command, "--metrics-port", str(port))
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: fetch(base + "/readyz", 1)[0] == 200, 10, "/readyz ready")
        assert fetch(base + "/healthz") == (200, "ok\n")
        assert fetch(base + "/status") == (404, "only the job's coordinator serves /status\n")
        assert fetch(base + "/nothing")[0] == 404
        status, text = fetch(base + "/metrics")
        assert status == 200
        parsed = families(text)
        check_with_promtool(text)
        startup = json.loads((tmp_path / "logs" / "worker_0" / "startup.json").read_text())
        info = parsed["tfboot_build_info"].samples[0]
        assert info.labels["task"] == "worker:0" and info.labels["framework"] == "tensorflow"
        assert info.labels["version"] == startup["tfboot_version"] and info.labels["job_id"] == ""
        assert value_of(parsed, "tfboot_command_running") == 1
        assert value_of(parsed, "tfboot_restarts") == startup["restarts"] == 0
        assert value_of(parsed, "tfboot_start_time_seconds") == pytest.approx(startup["started_at"], abs=0.002)
        phases = {p: value_of(parsed, "tfboot_start_phase_seconds", phase=p) for p in PHASES}
        assert all(v is not None and v >= 0 for v in phases.values()), phases
        assert value_of(parsed, "tfboot_start_phase_seconds", phase="name_check") is None  # no job, no check
        assert sum(phases.values()) <= value_of(parsed, "tfboot_start_to_command_seconds")
        assert "tfboot_barrier_tasks_present" not in text  # not a coordinator
        assert "\ntfboot_command_exit_status " not in text   # still running
        flag.touch()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert f"metrics on port {port}" in err
    # Gone with tfboot.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_metrics_port_in_use_is_a_warning(tfboot, tmp_path):
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        taken.bind(("::", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = one_task(tfboot, tmp_path, ["sh", "-c", "exit 0"], "--metrics-port", str(port))
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f" warning [worker:0] no metrics: --metrics-port {port}: cannot listen: Address already in use\n" in err


def test_metrics_in_exec_mode_are_a_warning(tfboot, tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0",
           "TFBOOT_HOSTNAME": "job-worker-0",
           "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_METRICS_PORT": str(free_port())}
    run = subprocess.run([tfboot, "--no-init", "--", "true"], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "--metrics-port (TFBOOT_METRICS_PORT) serves from the supervising tfboot only" in run.stderr


def test_idling_in_exec_mode_is_a_warning(tfboot, tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0",
           "TFBOOT_HOSTNAME": "job-worker-0", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_IDLE_WHEN_DONE": "1",
           "TFBOOT_MAX_RESTARTS": "1"}
    run = subprocess.run([tfboot, "--no-init", "--", "true"], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "--idle-when-done (TFBOOT_IDLE_WHEN_DONE) idles in the supervising tfboot only" in run.stderr
    assert "--max-restarts (TFBOOT_MAX_RESTARTS) restarts from the supervising tfboot only" in run.stderr


@pytest.mark.parametrize("args,env,message", [
    (["--metrics-port", "70000"], {}, "--metrics-port '70000' must be a port number 1..65535, or 0 for no metrics server"),
    ([], {"TFBOOT_METRICS_PORT": "-1"}, "TFBOOT_METRICS_PORT '-1' must be a port number 1..65535, or 0 for no metrics server"),
    (["--metrics-port", "2220"], {}, "--metrics-port '2220' is the control channel's port too (default '2220'); choose another"),
    (["--termination-log="], {}, "option --termination-log needs a non-empty value"),
])
def test_bad_metrics_settings_are_usage_errors(run_tfboot, args, env, message):
    run = run_tfboot([*args, "--cluster", "worker=1", "--", "true"], env=env)
    assert run.returncode == 2
    assert error_line(run.stderr).endswith(" " + message)


# The metrics server would take the port before the trainer binds it. The hostname gives the
# names: job-worker-<i>; Slurm's two tasks on one node share its ports.
@pytest.mark.parametrize("args,env,message", [
    (["--cluster", "worker=1", "--metrics-port", "2222"], {},
     "--metrics-port (or TFBOOT_METRICS_PORT) 2222 is the port task worker:0 listens on (job-worker-0:2222, this task's own); "
     "choose another"),
    (["--cluster", "worker=1", "--metrics-port", "3000", "--port", "3000"], {},
     "--metrics-port (or TFBOOT_METRICS_PORT) 3000 is the port task worker:0 listens on (job-worker-0:3000, this task's own); "
     "choose another"),
    (["--cluster", "worker=1", "--metrics-port", "29500", "--framework", "pytorch"], {},
     "--metrics-port (or TFBOOT_METRICS_PORT) 29500 is MASTER_PORT, where node 0 (worker:0) listens on job-worker-0; "
     "choose another"),
    (["--metrics-port", "2223"], {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node7",
                                  "SLURM_STEP_TASKS_PER_NODE": "2", "TFBOOT_HOSTNAME": "node7"},
     "--metrics-port (or TFBOOT_METRICS_PORT) 2223 is the port task worker:1 listens on (node7:2223, on this task's host); "
     "choose another"),
])
def test_a_metrics_port_a_command_listens_on_is_a_usage_error(run_tfboot, tmp_path, args, env, message):
    base = {"TFBOOT_HOSTNAME": "job-worker-0", "TFBOOT_LOG_ROOT": str(tmp_path / "logs")}
    run = run_tfboot(["--init", "--wait", "0", "--control-port", "0", *args, "--", "true"], env={**base, **env})
    assert run.returncode == 2, run.stderr
    assert error_line(run.stderr).endswith(" " + message)
    assert not (tmp_path / "logs").exists()


def test_a_metrics_port_no_command_of_this_host_listens_on_is_fine(run_tfboot, tmp_path):
    # Node 1 of a PyTorch job listens on nothing of its own: 29500 is node 0's, on another host.
    env = {"TFBOOT_HOSTNAME": "job-worker-1", "TFBOOT_LOG_ROOT": str(tmp_path / "logs")}
    run = run_tfboot(["--init", "--wait", "0", "--control-port", "0", "--cluster", "worker=2", "--framework", "pytorch",
                      "--metrics-port", "29500", "--", "true"], env=env)
    assert run.returncode == 0, run.stderr


# ---- the termination message


def test_the_reason_of_a_failing_command_is_the_termination_message(tfboot, tmp_path):
    path = tmp_path / "termination-log"
    proc = one_task(tfboot, tmp_path, ["sh", "-c", "exit 3"], "--termination-log", str(path))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert path.read_text() == "exiting 3: the command failed\n"
    logged_as(err, path.read_text())


# A trainer's traceback: the exception line is what the termination message names, even with a
# line or two after it (a library's farewell on stderr); stdout is no candidate.
FAILING_TRAINER = textwrap.dedent("""
    import sys
    print("epoch 1 loss 0.5", flush=True)
    print("a warning", file=sys.stderr, flush=True)
    try:
        raise ValueError("inner")
    except ValueError:
        try:
            raise RuntimeError("CUDA error: out of memory")
        finally:
            import atexit
            atexit.register(lambda: print("[W] process group destroyed", file=sys.stderr))
""")


def test_the_trainers_exception_is_in_the_termination_message(tfboot, tmp_path):
    path = tmp_path / "termination-log"
    proc = one_task(tfboot, tmp_path, [sys.executable, "-c", FAILING_TRAINER], "--termination-log", str(path))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert path.read_text() == "exiting 1: the command failed: RuntimeError: CUDA error: out of memory\n"
    logged_as(err, path.read_text())
    # The command's stderr still reaches ours whole, the traceback in it, and stdout is untouched.
    assert "Traceback (most recent call last):" in err and "ValueError: inner" in err
    assert "[W] process group destroyed" in err
    assert out == "epoch 1 loss 0.5\n"


def test_a_command_that_cannot_run_is_named_in_the_termination_message(tfboot, tmp_path):
    path = tmp_path / "termination-log"
    proc = one_task(tfboot, tmp_path, ["pythn", "train.py"], "--termination-log", str(path))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 127, err
    assert path.read_text() == "exiting 127: the command failed: cannot run command 'pythn': not found\n"
    logged_as(err, path.read_text())


def test_a_failing_commands_endless_stderr_line_is_cut(tfboot, tmp_path):
    path = tmp_path / "termination-log"
    script = "import sys; sys.stderr.write('x' * 200000 + '\\n'); sys.exit(4)"
    proc = one_task(tfboot, tmp_path, [sys.executable, "-c", script], "--termination-log", str(path))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err[-500:]
    message = path.read_text()
    assert message.startswith("exiting 4: the command failed: xxx") and message.endswith("...\n"), message[:100]
    assert len(message) < 1000


def test_a_usage_error_is_the_termination_message_and_success_writes_none(run_tfboot, tmp_path):
    path = tmp_path / "termination-log"
    bad = run_tfboot(["--cluster", "worker=x", "--", "true"], env={"TFBOOT_TERMINATION_LOG": str(path)})
    assert bad.returncode == 2
    assert error_line(bad.stderr).endswith(" " + path.read_text().strip())
    path.unlink()
    good = run_tfboot(["--cluster", "worker=1", "--hostname", "job-worker-0", "--wait", "0", "--log-root", str(tmp_path),
                       "--init", "--", "true"], env={"TFBOOT_TERMINATION_LOG": str(path)})
    assert good.returncode == 0, good.stderr
    assert not path.exists()


@pytest.mark.root
@pytest.mark.parametrize("where", ["missing directory", "read-only mount", "kubernetes default", "no default"])
def test_the_termination_file_never_changes_the_exit_code(tfboot, tmp_path, where):
    """In a mount namespace of its own: a read-only bind mount, and Kubernetes' own arrangement, a
    file bind-mounted on /dev/termination-log (which a rename cannot replace)."""
    outside = tmp_path / "termination-log"
    outside.write_text("old\n")
    setup = {
        "missing directory": f"set -- --termination-log {tmp_path}/missing/termination-log",
        "read-only mount": f"mount --bind -o ro {outside} {outside}; set -- --termination-log {outside}",
        "kubernetes default": (f"mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && touch /dev/termination-log && "
                               f"mount --bind {outside} /dev/termination-log; set --"),
        "no default": "mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3; set --",
    }[where]
    script = (f"{setup}; exec {tfboot} --init --cluster worker=1 --hostname job-worker-0 --wait 0 --control-port 0 "
              f'--log-root {tmp_path}/logs "$@" -- sh -c "exit 3"')
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, capture_output=True, text=True, timeout=30)
    assert run.returncode == 3, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "the termination message is not written" in line]
    if where == "kubernetes default":
        assert outside.read_text() == "exiting 3: the command failed\n"
        assert warnings == []
    elif where == "no default":
        assert outside.read_text() == "old\n" and warnings == []
    else:
        assert outside.read_text() == "old\n"
        assert len(warnings) == 1, run.stderr


@pytest.mark.root
@pytest.mark.parametrize("where", ["/dev/null", "a FIFO", "/dev/stderr"])
def test_a_termination_log_that_is_no_regular_file_is_written_into_never_replaced(tfboot, tmp_path, where):
    """/dev/null turns the message off; a FIFO's reader and /dev/stderr (a link to a pipe) get it.
    In a mount namespace of its own with /dev on a tmpfs: the host's /dev is never at stake."""
    fifo = tmp_path / "fifo"
    setup = {
        "/dev/null": "set -- /dev/null",
        # A reader that holds the FIFO open until the message came.
        "a FIFO": f"mkfifo {fifo}; (timeout 5 head -n 1 {fifo} > {tmp_path}/read) & sleep 0.2; set -- {fifo}",
        "/dev/stderr": "ln -s /proc/self/fd/2 /dev/stderr; set -- /dev/stderr",
    }[where]
    script = (f"mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && {setup}; "
              f"{tfboot} --init --cluster worker=1 --hostname job-worker-0 --wait 0 --control-port 0 "
              f'--log-root {tmp_path}/logs --termination-log "$1" -- sh -c "exit 3"; status=$?; wait; '
              f'stat -c "%F" "$1"; exit $status')
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, capture_output=True, text=True, timeout=30)
    assert run.returncode == 3, run.stderr
    assert "the termination message is not written" not in run.stderr
    kind = {"/dev/null": "character special file", "a FIFO": "fifo", "/dev/stderr": "symbolic link"}[where]
    assert run.stdout.splitlines()[-1] == kind
    if where == "a FIFO":
        assert (tmp_path / "read").read_text() == "exiting 3: the command failed\n"
    if where == "/dev/stderr":
        assert run.stderr.endswith("\nexiting 3: the command failed\n")


# ---- jobs of namespace pods


def start_task(net, tfboot, pod, command, tmp_path, cluster, *args):
    env = {"TFBOOT_CLUSTER": cluster, "TFBOOT_LOG_ROOT": str(tmp_path / "logs"), "TFBOOT_WAIT": "30s",
           "TFBOOT_STOP_GRACE": "5s", "TFBOOT_START_TIMEOUT": "60s"}
    return net.run(pod, [tfboot, *args, "--", *command], env=env)


def finish(procs, timeout=60):
    return [(code, err) for code, _, err in communicate_all(procs, timeout)]


# Fetches URLs from inside a pod's network namespace; prints one JSON line [status, body] per URL.
FETCH = textwrap.dedent("""
    import json, sys, urllib.error, urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for url in sys.argv[1:]:
        try:
            with opener.open(url, timeout=5) as answer:
                print(json.dumps([answer.status, answer.read().decode()]))
        except urllib.error.HTTPError as error:
            print(json.dumps([error.code, error.read().decode()]))
        except OSError as error:
            print(json.dumps([0, str(error)]))
""")


def fetch_in(net, pod, *urls):
    done = net.exec_in_pod(pod, [sys.executable, "-c", FETCH, *urls], timeout=30, check=True)
    return [tuple(json.loads(line)) for line in done.stdout.splitlines()]


def waiting_command(flag, seconds=60):
    """Runs until `flag` exists (bounded), then succeeds."""
    return ["sh", "-c", f"i=0; while [ ! -e {flag} ] && [ $i -lt {seconds * 10} ]; do sleep 0.1; i=$((i+1)); done"]


PROMETHEUS_CONFIG = """\
global: {{scrape_interval: 1s, scrape_timeout: 900ms}}
scrape_configs:
  - job_name: tfboot
    static_configs: [{{targets: [{targets}]}}]
"""


@pytest.mark.root
@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus is not installed (scripts/setup)")
def test_prometheus_scrapes_a_job_whose_phases_add_up_with_startup_json(net, tfboot, tmp_path):
    workers = [net.add_pod(f"mnist-worker-{i}") for i in range(3)]
    for pod in workers:
        net.publish(pod)
    observer = net.add_pod("observer", service="")
    config = tmp_path / "prometheus.yml"
    config.write_text(PROMETHEUS_CONFIG.format(targets=", ".join(f"'{pod.ip}:{METRICS_PORT}'" for pod in workers)))
    api = f"http://{observer.ip}:9090/api/v1"
    prometheus = net.run(observer, ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                    f"--web.listen-address={observer.ip}:9090", "--log.level=warn"], pid1=False)
    flag = tmp_path / "done"
    procs = []
    try:
        args = ("--metrics-port", str(METRICS_PORT))
        # Two tasks first: the coordinator's /status names the third as missing.
        procs = [start_task(net, tfboot, pod, waiting_command(flag), tmp_path, "worker=3", *args) for pod in workers[:2]]
        coordinator = f"http://{workers[0].ip}:{METRICS_PORT}"

        def missing_one():
            (code, body), = fetch_in(net, observer, coordinator + "/status")
            return code == 200 and json.loads(body)["tasks_present"] == 2 and json.loads(body)
        status = wait_until(missing_one, 20, "the coordinator's /status with two tasks present")
        assert [(t["task"], t["present"], t["host"]) for t in status["tasks"]] == [
            ("worker:0", True, "mnist-worker-0"), ("worker:1", True, "mnist-worker-1"), ("worker:2", False, "")]
        assert status["started"] is False and status["tasks_expected"] == 3
        readyz, healthz = fetch_in(net, observer, coordinator + "/readyz", coordinator + "/healthz")
        assert readyz[0] == 503 and healthz == (200, "ok\n")

        procs.append(start_task(net, tfboot, workers[2], ["sleep", "600"], tmp_path, "worker=3", *args))

        def scraped():
            query = urllib.parse.quote("tfboot_start_to_command_seconds")
            (code, body), = fetch_in(net, observer, f"{api}/query?query={query}")
            return code == 200 and len(json.loads(body)["data"]["result"]) == 3
        wait_until(scraped, 30, "Prometheus has every task's time to its command")

        (code, body), = fetch_in(net, observer, f"{api}/query?query=tfboot_start_phase_seconds")
        assert code == 200
        phases = {}
        for series in json.loads(body)["data"]["result"]:
            phases.setdefault(series["metric"]["instance"], {})[series["metric"]["phase"]] = float(series["value"][1])
        for index, pod in enumerate(workers):
            mine = phases[f"{pod.ip}:{METRICS_PORT}"]
            startup = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())
            to_files = startup["written_at"] - startup["started_at"]
            before_files = sum(mine[p] for p in PHASES[:3])
            # The phases follow each other from tfboot's start: up to the files' writing they are
            # startup.json's own span, and the files take what is left of it. The phases run on
            # the monotonic clock, startup.json's times on the wall clock, which a machine's time
            # service may speed up or slow down (0.5% measured here): 1% of the span is allowed.
            slack = 0.005 + 0.01 * to_files
            assert before_files <= to_files + slack, (mine, startup)
            assert before_files + mine["files"] >= to_files - slack, (mine, startup)
            assert mine["dns_wait"] >= startup["dns_wait_seconds"] - 0.001, (mine, startup)
            assert ("name_check" in mine) == (index == 0)
            if index == 0:
                assert mine["name_check"] <= mine["barrier"]

        # The exposition itself, read by prometheus_client's parser and promtool.
        pages = fetch_in(net, observer, *(f"http://{pod.ip}:{METRICS_PORT}/metrics" for pod in workers),
                         coordinator + "/status", coordinator + "/readyz", f"http://{workers[1].ip}:{METRICS_PORT}/status")
        for index, (code, text) in enumerate(pages[:3]):
            assert code == 200
            check_with_promtool(text)
            parsed = families(text)
            startup = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())
            info = parsed["tfboot_build_info"].samples[0].labels
            assert (info["task"], info["job_id"]) == (f"worker:{index}", startup["job"]["job_id"])
            assert value_of(parsed, "tfboot_command_running") == 1
            assert value_of(parsed, "tfboot_restarts") == startup["restarts"] == 0
            # The coordinator resolves every name once all are present; the others its name only.
            assert value_of(parsed, "tfboot_dns_lookups_total", outcome="resolved") == (3 if index == 0 else 1)
        coordinator_metrics = families(pages[0][1])
        assert value_of(coordinator_metrics, "tfboot_barrier_tasks_present") == 3
        assert value_of(coordinator_metrics, "tfboot_barrier_tasks_expected") == 3
        status = json.loads(pages[3][1])
        assert status["started"] is True and [t["present"] for t in status["tasks"]] == [True] * 3
        assert pages[4] == (200, "ready\n")
        assert pages[5][0] == 404
        (code, body), = fetch_in(net, observer, f"{api}/query?query=up")
        assert sorted(float(s["value"][1]) for s in json.loads(body)["data"]["result"]) == [1.0, 1.0, 1.0]

        flag.touch()
        results = finish(procs)
        assert [code for code, _ in results] == [0, 0, 0], [err for _, err in results]
    finally:
        flag.touch()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        prometheus.terminate()
        prometheus.wait(timeout=10)


@pytest.mark.root
@pytest.mark.parametrize("case", ["a failing task", "a trainer's exception", "the barrier's deadline"])
def test_termination_messages_of_a_job(net, tfboot, tmp_path, case):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(3)]
    for pod in pods:
        net.publish(pod)
    logs = [tmp_path / f"termination-{i}" for i in range(3)]
    if case == "a failing task":
        commands = [["sleep", "600"], ["sh", "-c", "sleep 1; exit 3"], ["sleep", "600"]]
        extra = ()
        expected = [200, 3, 200]
    elif case == "a trainer's exception":
        commands = [["sleep", "600"], [sys.executable, "-c", "import time; time.sleep(1)\n" + FAILING_TRAINER], ["sleep", "600"]]
        extra = ()
        expected = [200, 1, 200]
    else:
        commands = [["true"], ["true"]]
        extra = ("--start-timeout", "3s")
        expected = [5, 5]
    procs = [start_task(net, tfboot, pod, command, tmp_path, "worker=3", "--termination-log", str(log), *extra)
             for pod, command, log in zip(pods, commands, logs)]
    results = finish(procs)
    assert [code for code, _ in results] == expected, [err for _, err in results]
    for (code, err), log in zip(results, logs):
        line = logged_as(err, log.read_text())
        assert (" error " in line) == (code == 5)
    if case == "a failing task":
        assert logs[0].read_text() == "exiting 200: stopping: worker:1 failed with status 3\n"
        assert logs[1].read_text() == "exiting 3: the command failed\n"
    elif case == "a trainer's exception":
        # The trainer's own words travel in the exit report: every task's message and log names them.
        oom = "worker:1 failed with status 1: RuntimeError: CUDA error: out of memory"
        assert logs[0].read_text() == logs[2].read_text() == f"exiting 200: stopping: {oom}\n"
        assert logs[1].read_text() == "exiting 1: the command failed: RuntimeError: CUDA error: out of memory\n"
        assert oom in results[0][1] and oom in results[2][1]
    else:
        assert logs[0].read_text().startswith("start barrier incomplete after 3s: 2/3 tasks present; missing worker:2")


# A stranger's flood, from a pod of its own: connections that say nothing, that send a byte a
# second (slowloris), and junk; bounded in count and time, it ends by itself.
FLOOD = textwrap.dedent("""
    import os, socket, sys, time
    host, port, seconds, ready = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    deadline = time.monotonic() + seconds
    held = []
    while time.monotonic() < deadline and len(held) < 200:
        try:
            held.append(socket.create_connection((host, port), timeout=1))
        except OSError:
            time.sleep(0.1)
    for i, s in enumerate(held[:50]):
        try:
            s.sendall(b"\\x16\\x03\\x01" + os.urandom(5000) if i % 2 else b"GARBAGE\\r\\n\\r\\n")
        except OSError:
            pass
    open(ready, "w").close()
    while time.monotonic() < deadline:
        for s in held[50:]:
            try:
                s.send(b"G")
            except OSError:
                pass
        time.sleep(0.5)
    print(len(held))
""")


# Fresh connections as fast as one process can open them, each kept until `keep` newer ones are
# open, for `seconds`: a flood that is never "oldest" for long. Prints how many were made.
FRESH_FLOOD = textwrap.dedent("""
    import collections, socket, sys, time
    host, port, keep, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    opened, made, end = collections.deque(), 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            opened.append(socket.create_connection((host, port), timeout=0.5))
            made += 1
        except OSError:
            time.sleep(0.01)
        while len(opened) > keep:
            opened.popleft().close()
    print(made, flush=True)
""")


@pytest.mark.root
def test_a_scraper_gets_answers_beside_a_flood_of_fresh_connections(net, tfboot, tmp_path):
    # The server holds 32 connections; a stranger opening fresh ones faster than a request is read
    # once closed the scraper's every time it was the oldest. Room is made by fairness now: the
    # address holding the most gives up its own.
    pod = net.add_pod("mnist-worker-0")
    net.publish(pod)
    stranger = net.add_pod("stranger", service="")
    scraper = net.add_pod("observer", service="")
    flag = tmp_path / "done"
    task = flood = None
    try:
        task = start_task(net, tfboot, pod, waiting_command(flag), tmp_path, "worker=1", "--metrics-port", str(METRICS_PORT))
        url = f"http://{pod.ip}:{METRICS_PORT}/metrics"
        wait_until(lambda: fetch_in(net, scraper, url)[0][0] == 200, 20, "the metrics server answers")
        flood = net.run(stranger, [sys.executable, "-c", FRESH_FLOOD, pod.ip, str(METRICS_PORT), "64", "15"], pid1=False)
        time.sleep(2)
        answers = fetch_in(net, scraper, *[url] * 20)
        assert flood.poll() is None, "the flood ended before the scrapes"
        assert [code for code, _ in answers] == [200] * 20, [text for code, text in answers if code != 200][:3]
        out, _ = flood.communicate(timeout=30)
        assert int(out) > 1000, "the flood opened too few connections to test anything"
        flag.touch()
        (code, err), = finish([task])
        assert code == 0, err
    finally:
        flag.touch()
        for proc in [task, flood]:
            if proc is not None and proc.poll() is None:
                proc.kill()


@pytest.mark.root
def test_a_flood_on_the_metrics_port_does_not_hold_up_the_start(net, tfboot, tmp_path):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    stranger = net.add_pod("stranger", service="")
    flag = tmp_path / "done"
    flooding = tmp_path / "flooding"
    procs = []
    flood = None
    try:
        procs.append(start_task(net, tfboot, pods[0], waiting_command(flag), tmp_path, "worker=2",
                                "--metrics-port", str(METRICS_PORT)))
        flood = net.run(stranger, [sys.executable, "-c", FLOOD, pods[0].ip, str(METRICS_PORT), "10", str(flooding)], pid1=False)
        wait_until(flooding.exists, 20, "the flood's connections are open")
        procs.append(start_task(net, tfboot, pods[1], waiting_command(flag), tmp_path, "worker=2"))
        coordinator = f"http://{pods[0].ip}:{METRICS_PORT}"
        wait_until(lambda: fetch_in(net, stranger, coordinator + "/readyz")[0][0] == 200, 20, "the job started")
        # The flood is still on: the job started beside it, and the server answers.
        assert flood.poll() is None
        (code, text), = fetch_in(net, stranger, coordinator + "/metrics")
        assert code == 200 and value_of(families(text), "tfboot_barrier_tasks_present") == 2
        flag.touch()
        results = finish(procs)
        assert [code for code, _ in results] == [0, 0], [err for _, err in results]
        out, _ = flood.communicate(timeout=20)
        assert int(out) == 200  # every connection of the flood was made
    finally:
        flag.touch()
        for proc in [*procs, flood]:
            if proc is not None and proc.poll() is None:
                proc.kill()
