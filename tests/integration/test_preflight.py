"""--preflight quick across pods (docs/preflight.md): the job starts when every node is healthy,
and a node that cannot run it (a full log root, other accelerators, a GPU that does not answer, a
clock off) is named in one line while every task exits 8 and nothing is run or written.

Pods are network namespaces with a real dnsmasq (tests/harness), as in test_supervision.py. A
pod's GPUs are faked by bind-mounting a directory over /proc/driver in its mount namespace (what
the fingerprint reads: /proc/driver/nvidia/gpus/*/information), and their devices by one over
/dev holding real device nodes; tfboot then runs as a child subreaper, not PID 1, since a pod run
as PID 1 mounts a fresh /proc over it.
"""

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from harness.exit_codes import PREFLIGHT_REFUSED
from harness.processes import communicate_all

pytestmark = pytest.mark.root  # namespace pods, a tmpfs mount


def start(net, tfboot, pod, log_root, count, extra_env=None, command=("true",), **run):
    env = {"TFBOOT_CLUSTER": f"worker={count}", "TFBOOT_LOG_ROOT": str(log_root), "TFBOOT_WAIT": "30s",
           "TFBOOT_START_TIMEOUT": "30s", "TFBOOT_STOP_GRACE": "5s", "TFBOOT_PREFLIGHT": "quick"}
    env.update(extra_env or {})
    return net.run(pod, [tfboot, "--", *command], env=env, **run)


def fake_gpus(directory, count, minors=False):
    """A /proc/driver with `count` NVIDIA GPUs, as the driver lists them (with `minors`, each with
    its "Device Minor:", as drivers since long write it: GPU i is /dev/nvidia<i>)."""
    for index in range(count):
        gpu = directory / "nvidia" / "gpus" / f"0000:0{index}:00.0"
        gpu.mkdir(parents=True)
        minor = f"Device Minor: \t {index}\n" if minors else ""
        (gpu / "information").write_text(f"Model: \t\t Tesla T4\nIRQ:   \t\t 42\n{minor}")
    directory.mkdir(parents=True, exist_ok=True)
    return str(directory)


def unused_char_major():
    """A character-device major no driver of this kernel registered: opening such a node fails
    with ENXIO, as opening a GPU the driver lost does."""
    text = open("/proc/devices").read().split("Block devices:")[0]
    used = {int(line.split()[0]) for line in text.splitlines() if line.strip()[:1].isdigit()}
    return next(major for major in range(240, 255) if major not in used)


def fake_dev(directory, count, silent=()):
    """A /dev with null, zero and urandom, and nvidia<i> for i < count: a real character device
    that opens (/dev/null's numbers), or for i in `silent` one whose driver is not there."""
    directory.mkdir(parents=True)
    for name, minor in (("null", 3), ("zero", 5), ("urandom", 9)):
        os.mknod(directory / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    for index in range(count):
        numbers = os.makedev(unused_char_major(), 0) if index in silent else os.makedev(1, 3)
        os.mknod(directory / f"nvidia{index}", 0o666 | stat.S_IFCHR, numbers)
    return str(directory)


def error_lines(err):
    return [line for line in err.splitlines() if " error " in line]


def assert_refused_everywhere(results, expected):
    assert [code for code, _, _ in results] == [PREFLIGHT_REFUSED] * len(results), [err for _, _, err in results]
    for _, _, err in results:
        errors = error_lines(err)
        assert len(errors) == 1, err
        assert expected in errors[0], errors[0]


def test_healthy_nodes_start_and_startup_json_records_the_check(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    logs = tmp_path / "logs"
    # The three tasks share a log root and are each PID 1; a probe that a killed tfboot (PID 1 too)
    # left behind stands in nobody's way.
    stale = tmp_path / ".tfboot-preflight.1"
    stale.write_text("left by a tfboot killed during its check\n")
    started = time.monotonic()
    procs = [start(net, tfboot, pod, logs, 3) for pod in pods]
    results = communicate_all(procs, 60)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert time.monotonic() - started < 20
    for index, (_, _, err) in enumerate(results):
        assert "preflight passed: log root " in err
        preflight = json.loads((logs / f"worker_{index}" / "startup.json").read_text())["preflight"]
        assert preflight["level"] == "quick"
        assert preflight["verdict"] == "passed"
        assert 0 <= preflight["seconds"] < 2
        assert preflight["log_root"]["writable"] is True
        assert preflight["log_root"]["path"] == str(tmp_path)  # logs/ is made after the check
        assert preflight["log_root"]["free_mib"] > 64
        assert preflight["accelerators"] == 0
        # The pods share this machine's clock: the offset is the measurement's error.
        assert abs(preflight["clock_offset_ms"]) < 200
    assert list(tmp_path.glob(".tfboot-preflight*")) == [stale]


@pytest.fixture
def full_tmpfs(tmp_path):
    """A tiny tmpfs, filled: every write there fails with ENOSPC."""
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={mount}/filler", "bs=4k"], capture_output=True)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_log_root_is_named_and_no_task_starts(net, tfboot, tmp_path, full_tmpfs):
    pods = net.add_job_pods(3)
    logs = tmp_path / "logs"
    roots = [logs, logs, full_tmpfs]
    procs = [start(net, tfboot, pod, root, 3, {"TFBOOT_TERMINATION_LOG": str(tmp_path / f"termination-{i}")},
                   command=("sh", "-c", f"touch {tmp_path}/ran"))
             for i, (pod, root) in enumerate(zip(pods, roots))]
    results = communicate_all(procs, 60)
    expected = (f"preflight refused the start: worker:2 (host 'mnist-worker-2'): log root {full_tmpfs} not writable: "
                "No space left on device")
    assert_refused_everywhere(results, expected)
    assert "worker:0" not in error_lines(results[0][2])[0].split("refused the start:")[1]
    for i in range(3):  # the pod's termination message, as kubectl describe shows it
        assert expected in (tmp_path / f"termination-{i}").read_text()
    assert not (tmp_path / "ran").exists()
    assert not logs.exists()


def test_a_task_alone_checks_its_own_log_root(tfboot, tmp_path, full_tmpfs):
    env = {"PATH": "/usr/bin:/bin", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_TASK_TYPE": "worker", "TFBOOT_TASK_INDEX": "0",
           "TFBOOT_WAIT": "0", "TFBOOT_PREFLIGHT": "quick", "TFBOOT_LOG_ROOT": str(full_tmpfs / "logs")}
    done = subprocess.run([tfboot, "--hostname", "mnist-worker-0", "--", "true"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == PREFLIGHT_REFUSED, done.stderr
    assert (f"preflight refused the start: worker:0 (host 'mnist-worker-0'): log root {full_tmpfs} not writable: "
            "No space left on device") in done.stderr
    env["TFBOOT_LOG_ROOT"] = str(tmp_path / "logs")
    done = subprocess.run([tfboot, "--hostname", "mnist-worker-0", "--", "true"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    preflight = json.loads((tmp_path / "logs" / "worker_0" / "startup.json").read_text())["preflight"]
    assert preflight["verdict"] == "passed" and preflight["clock_offset_ms"] is None


def test_a_full_checkpoint_dir_is_named_and_a_url_is_left_to_the_trainer(net, tfboot, tmp_path, full_tmpfs):
    pods = net.add_job_pods(2)
    logs = tmp_path / "logs"
    checkpoints = tmp_path / "checkpoints"
    dirs = [checkpoints / "run-1", full_tmpfs / "run-1"]   # neither made yet: the trainer makes them
    procs = [start(net, tfboot, pod, logs, 2, {"TFBOOT_CHECKPOINT_DIR": str(d)}) for pod, d in zip(pods, dirs)]
    results = communicate_all(procs, 60)
    assert_refused_everywhere(results, f"preflight refused the start: worker:1 (host 'mnist-worker-1'): checkpoint dir "
                                       f"{full_tmpfs} not writable: No space left on device")
    # A URL (gs://, s3://) is the trainer's to reach: said, not probed, and the job starts.
    procs = [start(net, tfboot, pod, logs, 2, {"TFBOOT_CHECKPOINT_DIR": d})
             for pod, d in zip(pods, [str(checkpoints), "gs://bucket/run-1"])]
    results = communicate_all(procs, 60)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert f"checkpoint dir {tmp_path} writable (" in results[0][2]
    assert "checkpoint dir gs://bucket/run-1 not checked (not a local path)" in results[1][2]
    first = json.loads((logs / "worker_0" / "startup.json").read_text())["preflight"]
    assert first["checkpoint_dir"]["path"] == str(tmp_path) and first["checkpoint_dir"]["writable"] is True
    second = json.loads((logs / "worker_1" / "startup.json").read_text())["preflight"]
    assert second["checkpoint_dir"] == {"path": "gs://bucket/run-1", "checked": False}
    assert not checkpoints.exists()


# Prints each page as one JSON string per line.
FETCH = ("import json, sys, urllib.request\n"
         "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
         "for url in sys.argv[1:]:\n"
         "    print(json.dumps(opener.open(url, timeout=5).read().decode()))\n")


def test_the_verdict_is_in_metrics_and_status(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    flag = tmp_path / "flag"
    wait = ("sh", "-c", f"i=0; while [ ! -e {flag} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")
    procs = [start(net, tfboot, pod, tmp_path / "logs", 2, {"TFBOOT_METRICS_PORT": "9400"}, command=wait) for pod in pods]
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "logs" / "worker_0" / "startup.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        fetched = net.exec_in_pod(pods[0], [sys.executable, "-c", FETCH, "http://127.0.0.1:9400/metrics",
                                            "http://127.0.0.1:9400/status"], timeout=30, check=True).stdout.splitlines()
    finally:
        flag.touch()
    metrics, status = (json.loads(page) for page in fetched)
    assert "\ntfboot_preflight_passed 1\n" in metrics
    assert "tfboot_preflight_seconds " in metrics
    assert '\ntfboot_preflight_writable{directory="log_root"} 1\n' in metrics
    assert 'tfboot_preflight_free_bytes{directory="log_root"} ' in metrics
    assert "\ntfboot_preflight_accelerators 0\n" in metrics
    assert "\ntfboot_preflight_clock_offset_seconds " in metrics
    assert json.loads(status)["preflight"]["passed"] is True
    results = communicate_all(procs, 60)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]


def test_a_node_that_sees_other_accelerators_is_named(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    drivers = [fake_gpus(tmp_path / f"driver-{i}", count) for i, count in enumerate([2, 2, 1])]
    procs = [start(net, tfboot, pod, tmp_path / "logs", 3, pid1=False, extra_mounts=[(driver, "/proc/driver")])
             for pod, driver in zip(pods, drivers)]
    results = communicate_all(procs, 60)
    assert_refused_everywhere(
        results, "preflight refused the start: worker:2 (host 'mnist-worker-2'): sees 1 accelerators, "
                 "the other worker tasks 2 (most of them)")


def test_a_gpu_the_driver_lists_but_that_does_not_answer_is_named(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    drivers = [fake_gpus(tmp_path / f"driver-{i}", 2, minors=True) for i in range(3)]

    def run(devs, logs):
        procs = [start(net, tfboot, pod, logs, 3, pid1=False, extra_mounts=[(driver, "/proc/driver"), (dev, "/dev")])
                 for pod, driver, dev in zip(pods, drivers, devs)]
        return communicate_all(procs, 60)

    # Every GPU's device opens: the job starts, each task's two GPUs counted as answering.
    healthy = run([fake_dev(tmp_path / f"dev-{i}", 2) for i in range(3)], tmp_path / "logs")
    assert [code for code, _, _ in healthy] == [0, 0, 0], [err for _, _, err in healthy]
    for index in range(3):
        preflight = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())["preflight"]
        assert (preflight["accelerators"], preflight["accelerators_answering"]) == (2, 2)
    # On worker:2 the driver still lists GPU 1, but its device does not open: named, nobody starts.
    results = run([fake_dev(tmp_path / f"dev-bad-{i}", 2, silent={1} if i == 2 else ()) for i in range(3)],
                  tmp_path / "logs-bad")
    assert_refused_everywhere(
        results, "preflight refused the start: worker:2 (host 'mnist-worker-2'): GPU 0000:01:00.0 is listed by "
                 "the driver but does not answer (/dev/nvidia1: No such device or address)")
    assert not (tmp_path / "logs-bad").exists()


def test_a_clock_off_the_coordinators_is_named(net, tfboot, tmp_path):
    """TFBOOT_TEST_CLOCK_OFFSET_MS (tests only) shifts the wall clock that worker:1's hello reports."""
    pods = net.add_job_pods(2)
    skews = [{}, {"TFBOOT_TEST_CLOCK_OFFSET_MS": "-5000"}]
    procs = [start(net, tfboot, pod, tmp_path / "logs", 2, skew) for pod, skew in zip(pods, skews)]
    results = communicate_all(procs, 60)
    assert_refused_everywhere(results, "preflight refused the start: worker:1 (host 'mnist-worker-1'): clock -")
    assert "ms off the coordinator's (at most 2000 ms)" in error_lines(results[0][2])[0]


def test_off_by_default_nothing_is_checked(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    procs = [net.run(pod, [tfboot, "--", "true"], env={"TFBOOT_CLUSTER": "worker=2", "TFBOOT_LOG_ROOT": str(tmp_path / "logs"),
                                                         "TFBOOT_WAIT": "30s", "TFBOOT_TEST_CLOCK_OFFSET_MS": "-9000"})
             for pod in pods]
    results = communicate_all(procs, 60)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert "preflight" not in json.loads((tmp_path / "logs" / "worker_0" / "startup.json").read_text())


# --preflight network: every task measures its links to a few partners (a ring and far shifts),
# the coordinator judges them against the job's median. One pod's link slowed with tc's token
# bucket (4 Mbit/s, both ways) is the bad node.

def network_env(**extra):
    return {"TFBOOT_PREFLIGHT": "network", "TFBOOT_START_TIMEOUT": "60s", **extra}


def test_network_level_refuses_a_job_with_a_slow_node_and_names_it(net, tfboot, tmp_path):
    pods = net.add_job_pods(8)
    net.throttle(pods[5])
    procs = [start(net, tfboot, pod, tmp_path / "logs", 8, network_env()) for pod in pods]
    results = communicate_all(procs, 90)
    assert_refused_everywhere(results, "preflight refused the start: worker:5 (host 'mnist-worker-5'): network: slow with every partner")
    message = error_lines(results[0][2])[0]
    assert " Gbit/s (median " in message, message
    assert not (tmp_path / "logs").exists()  # nothing run, nothing written


def test_network_level_only_warns_below_the_warning_bound_and_starts(net, tfboot, tmp_path):
    pods = net.add_job_pods(8)
    net.throttle(pods[2])
    env = network_env(TFBOOT_PREFLIGHT_REFUSE_BELOW="0")
    procs = [start(net, tfboot, pod, tmp_path / "logs", 8, env) for pod in pods]
    results = communicate_all(procs, 90)
    assert [code for code, _, _ in results] == [0] * 8, [err[-2000:] for _, _, err in results]
    warnings = [line for line in results[0][2].splitlines() if "preflight network: worker:2 (host 'mnist-worker-2'): network: slow" in line]
    assert len(warnings) == 1, results[0][2]
    for index in range(8):
        network = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())["preflight"]["network"]
        assert network["bounds"] == {"warn_below": 0.5, "refuse_below": 0}
        assert any("worker:2" in warning for warning in network["warnings"]), network


def test_network_level_with_healthy_nodes_starts_and_records_the_figures(net, tfboot, tmp_path):
    pods = net.add_job_pods(8)
    started = time.monotonic()
    procs = [start(net, tfboot, pod, tmp_path / "logs", 8, network_env()) for pod in pods]
    results = communicate_all(procs, 90)
    took = time.monotonic() - started
    assert [code for code, _, _ in results] == [0] * 8, [err[-2000:] for _, _, err in results]
    print(f"8 pods: the start with --preflight network took {took:.1f} s")
    figures = []
    for index in range(8):
        preflight = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())["preflight"]
        assert preflight["level"] == "network"
        figures.append(preflight["network"])
    assert all(network == figures[0] for network in figures)  # the job's figures, the same on every task
    network = figures[0]
    assert network["links"] == 8 * 3  # a ring and two far shifts
    assert 0 < network["seconds"] < 15
    assert network["median_bits_per_second"] > 50e6  # veth pairs on one machine: far above the 4 Mbit/s of a slowed one
    assert network["median_rtt_ms"] < 50
    assert "preflight passed the network: 24 links in " in results[3][2]


def test_network_level_port_clash_and_local_are_usage_errors(tfboot, tmp_path):
    clash = subprocess.run([tfboot, "--preflight", "network", "--preflight-port", "2220", "--print", "--", "true"],
                           capture_output=True, text=True, timeout=30,
                           env={"TFBOOT_CLUSTER": "worker=2", "TFBOOT_TASK_INDEX": "0", "PATH": "/usr/bin:/bin"})
    assert clash.returncode == 2, clash.stderr
    assert "--preflight-port '2220' is the control channel's port too (default '2220'); choose another" in clash.stderr, clash.stderr
    local = subprocess.run([tfboot, "local", "--preflight", "network", "--log-root", str(tmp_path), "--", "true"],
                           capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert local.returncode == 2, local.stderr
    assert "tfboot local: --preflight network measures the links between nodes" in local.stderr
    assert not any(tmp_path.iterdir())
