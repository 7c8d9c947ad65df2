"""Job supervision across pods: start barrier, environment check, job end, failure propagation.

Pods are network namespaces with tfboot as PID 1 behind a real dnsmasq (tests/harness); the
commands are plain shell, which is all these rules need (the TensorFlow tier runs real jobs).
"""

import json
import os
import signal
import socket
import textwrap
import threading
import time

import pytest

from harness.exit_codes import STOPPED_BY_JOB
from harness.processes import communicate_all

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

BARRIER_INCOMPLETE = 5
ENVIRONMENT_MISMATCH = 6


def start(net, tfboot, pod, command, log_root, cluster, extra_env=None, args=()):
    env = {"TFBOOT_CLUSTER": cluster, "TFBOOT_LOG_ROOT": str(log_root), "TFBOOT_WAIT": "30s",
           "TFBOOT_STOP_GRACE": "5s"}
    env.update(extra_env or {})
    return net.run(pod, [tfboot, *args, "--", *command], env=env)


def finish_all(procs, timeout=60):
    return communicate_all(procs, timeout)


def error_lines(err):
    return [line for line in err.splitlines() if " error " in line]


def test_coordinator_done_ends_the_job_everywhere_with_exit_0(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    started = time.monotonic()
    procs = [start(net, tfboot, pods[0], ["sh", "-c", "sleep 1; exit 0"], tmp_path, "worker=3")]
    procs += [start(net, tfboot, pod, ["sleep", "600"], tmp_path, "worker=3") for pod in pods[1:]]
    results = finish_all(procs)
    elapsed = time.monotonic() - started
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    # 1 s of work, 5 s for the others to end by themselves, then SIGTERM: well under the 600 s.
    assert elapsed < 20
    for _, _, err in results[1:]:
        assert "the job is done: worker:0 finished" in err
    startup = json.loads((tmp_path / "worker_1" / "startup.json").read_text())
    assert startup["job"]["coordinator"] == "worker:0"
    assert startup["job"]["tasks_present"] == 3


def test_a_failing_worker_stops_the_others_with_the_job_code_naming_it(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    started = time.monotonic()
    commands = [["sleep", "600"], ["sh", "-c", "sleep 1; exit 3"], ["sleep", "600"]]
    procs = [start(net, tfboot, pod, command, tmp_path, "worker=3") for pod, command in zip(pods, commands)]
    results = finish_all(procs)
    assert time.monotonic() - started < 20
    assert [code for code, _, _ in results] == [STOPPED_BY_JOB, 3, STOPPED_BY_JOB], [err for _, _, err in results]
    for index in (0, 2):
        errors = error_lines(results[index][2])
        assert len(errors) == 1, results[index][2]
        assert "worker:1 failed with status 3" in errors[0]


def test_a_task_that_never_starts_is_named_at_the_barrier_deadline(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    args = ["--start-timeout", "4s"]
    procs = [start(net, tfboot, pod, ["true"], tmp_path, "worker=3", args=args) for pod in pods[:2]]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [BARRIER_INCOMPLETE, BARRIER_INCOMPLETE], [e for _, _, e in results]
    coordinator_errors = error_lines(results[0][2])
    assert len(coordinator_errors) == 1
    assert "worker:2" in coordinator_errors[0]
    assert "worker:1" not in coordinator_errors[0].split("missing")[-1]
    # Nothing was run or written for a job that never started.
    assert not (tmp_path / "worker_0").exists() and not (tmp_path / "worker_1").exists()


def fake_tensorflow(directory, version):
    dist = directory / f"tensorflow-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {version}\n")
    return str(directory)


@pytest.mark.parametrize("mode", ["warn", "fail"])
def test_different_tensorflow_versions_are_warned_or_refused(net, tfboot, tmp_path, mode):
    pods = net.add_job_pods(2)
    old = fake_tensorflow(tmp_path / "old", "2.16.1")
    new = fake_tensorflow(tmp_path / "new", "2.17.0")
    logs = tmp_path / "logs"
    procs = [start(net, tfboot, pod, ["true"], logs, "worker=2", {"PYTHONPATH": path, "TFBOOT_ENV_CHECK": mode})
             for pod, path in zip(pods, [old, new])]
    results = finish_all(procs)
    expected = "tensorflow: 2.16.1 on worker:0; 2.17.0 on worker:1"
    for code, _, err in results:
        assert expected in err
        assert code == (0 if mode == "warn" else ENVIRONMENT_MISMATCH), err
    if mode == "warn":
        for index in range(2):
            startup = json.loads((logs / f"worker_{index}" / "startup.json").read_text())
            assert expected in startup["job"]["environment_differences"]
            assert startup["job"]["fingerprint"]["tensorflow"] == ["2.16.1", "2.17.0"][index]
    else:
        assert not logs.exists()


STRANGER = textwrap.dedent("""
    import socket, sys, time
    host, port = sys.argv[1], int(sys.argv[2])
    opened = []
    def connect():
        for _ in range(100):
            try:
                return socket.create_connection((host, port), timeout=2)
            except OSError:
                time.sleep(0.1)
        raise SystemExit("coordinator port never opened")
    junk = connect(); junk.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n" + bytes(range(256)) + b"\\n"); opened.append(junk)
    huge = connect()
    try:
        huge.sendall(b"{" + b"x" * (4 << 20))
    except OSError:
        pass
    opened.append(huge)
    for _ in range(40):          # half-open, silent connections
        opened.append(connect())
    slow = connect(); slow.sendall(b'{"type":'); opened.append(slow)
    print("stranger done", flush=True)
    time.sleep(30)
""")


def test_strangers_on_the_control_port_do_not_stall_the_job(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    stranger = net.add_pod("stranger", service="")
    script = tmp_path / "stranger.py"
    script.write_text(STRANGER)
    intruder = net.run(stranger, ["python3", str(script), pods[0].ip, "2220"], env={})
    time.sleep(1)
    procs = [start(net, tfboot, pods[0], ["sh", "-c", "sleep 1"], tmp_path, "worker=2"),
             start(net, tfboot, pods[1], ["sleep", "600"], tmp_path, "worker=2")]
    results = finish_all(procs, timeout=90)
    intruder.kill()
    intruder.communicate(timeout=10)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]


def test_the_coordinators_pod_lost_stops_the_others_in_bounded_time(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    procs = [start(net, tfboot, pod, ["sleep", "600"], tmp_path, "worker=3") for pod in pods]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"worker_{i}" / "startup.json").exists() for i in range(3)):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    time.sleep(1)
    lost_at = time.monotonic()
    net.signal(procs[0], signal.SIGKILL)  # the coordinator's tfboot (PID 1): its pod is gone
    results = finish_all(procs[1:])
    assert time.monotonic() - lost_at < 30
    for code, _, err in results:
        assert code == STOPPED_BY_JOB, err
        assert "coordinator worker:0" in error_lines(err)[0]
    procs[0].communicate(timeout=10)


def test_with_a_secret_a_task_with_the_wrong_one_cannot_join(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("s3cret-shared-by-the-job\n")
    bad.write_text("a guess\n")
    args = ["--start-timeout", "4s"]
    procs = [start(net, tfboot, pods[0], ["true"], tmp_path / "logs", "worker=2", {"TFBOOT_CONTROL_SECRET_FILE": str(good)}, args),
             start(net, tfboot, pods[1], ["true"], tmp_path / "logs", "worker=2", {"TFBOOT_CONTROL_SECRET_FILE": str(bad)}, args)]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [BARRIER_INCOMPLETE, BARRIER_INCOMPLETE], [e for _, _, e in results]
    assert "worker:1" in error_lines(results[0][2])[0]
    assert "refused us: authentication failed" in error_lines(results[1][2])[0]
    assert not (tmp_path / "logs").exists()


def test_with_the_same_secret_the_job_runs(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    secret = tmp_path / "secret"
    secret.write_text("s3cret-shared-by-the-job")
    env = {"TFBOOT_CONTROL_SECRET_FILE": str(secret)}
    procs = [start(net, tfboot, pod, ["true"], tmp_path / "logs", "worker=2", env) for pod in pods]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]


FLOOD = textwrap.dedent("""
    import socket, sys, time
    host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    opened, reopened = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:                       # keep `count` silent connections open
        alive = []
        for c in opened:
            try:
                c.setblocking(False)
                gone = c.recv(65536, socket.MSG_PEEK) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                c.close()
            else:
                alive.append(c)
        opened = alive
        while len(opened) < count and time.monotonic() < end:
            try:
                opened.append(socket.create_connection((host, port), timeout=1))
                reopened += 1
            except OSError:
                break
        time.sleep(0.2)
    print("opened", reopened, flush=True)
""")


def test_with_a_secret_strangers_holding_connections_cannot_keep_the_job_from_starting(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    secret = tmp_path / "secret"
    secret.write_text("s3cret-shared-by-the-job")
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    stranger = net.add_pod("stranger", service="")
    env = {"TFBOOT_CONTROL_SECRET_FILE": str(secret)}
    coordinator = start(net, tfboot, pods[0], ["true"], tmp_path / "logs", "worker=3", env, ["--start-timeout", "25s"])
    # 100 silent connections, each reopened as soon as it is closed, before and while the tasks join.
    flood = net.run(stranger, ["python3", str(script), pods[0].ip, "2220", "100", "35"], env={})
    time.sleep(4)
    procs = [coordinator] + [start(net, tfboot, pod, ["true"], tmp_path / "logs", "worker=3", env, ["--start-timeout", "25s"])
                             for pod in pods[1:]]
    results = finish_all(procs, timeout=60)
    flood.kill()
    flood.communicate(timeout=10)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]


# The review's lock-out: silent connections (more than the 67 this job's coordinator has room
# for), each replaced by a fresh one before it is 2 s old, so that none is ever old enough to
# give room, and each one refused opened again at once.
RECYCLING_FLOOD = textwrap.dedent("""
    import socket, sys, time
    host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    opened = []                                          # (socket, when)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now, kept = time.monotonic(), []
        for c, when in opened:
            try:
                c.setblocking(False)
                gone = c.recv(65536) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if not gone and now - when > 1.5:
                try:
                    kept.append((socket.create_connection((host, port), timeout=1), time.monotonic()))
                except OSError:
                    pass
                gone = True
            if gone:
                c.close()
            else:
                kept.append((c, when))
        opened = kept
        while len(opened) < count and time.monotonic() < end:
            try:
                opened.append((socket.create_connection((host, port), timeout=1), time.monotonic()))
            except OSError:
                break
        time.sleep(0.002)
""")


def test_strangers_recycling_fresh_connections_cannot_lock_out_the_tasks(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    secret = tmp_path / "secret"
    secret.write_text("s3cret-shared-by-the-job")
    script = tmp_path / "flood.py"
    script.write_text(RECYCLING_FLOOD)
    stranger = net.add_pod("stranger", service="")
    env = {"TFBOOT_CONTROL_SECRET_FILE": str(secret)}
    args = ["--start-timeout", "20s"]
    coordinator = start(net, tfboot, pods[0], ["true"], tmp_path / "logs", "worker=3", env, args)
    flood = net.run(stranger, ["python3", str(script), pods[0].ip, "2220", "100", "30"], env={})
    time.sleep(4)
    procs = [coordinator] + [start(net, tfboot, pod, ["true"], tmp_path / "logs", "worker=3", env, args) for pod in pods[1:]]
    results = finish_all(procs, timeout=60)
    flood.kill()
    flood.communicate(timeout=10)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]


# Connections opened and closed as fast as one process can, for `seconds`: how many.
CONNECT_FLOOD = textwrap.dedent("""
    import socket, sys, time
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    made, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            made += 1
        except OSError:
            pass
    print(made, flush=True)
""")


def test_a_flood_of_connections_after_the_start_neither_ends_the_job_nor_floods_the_log(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    script = tmp_path / "flood.py"
    script.write_text(CONNECT_FLOOD)
    stranger = net.add_pod("stranger", service="")
    procs = [start(net, tfboot, pods[0], ["sleep", "14"], tmp_path, "worker=2"),
             start(net, tfboot, pods[1], ["sleep", "600"], tmp_path, "worker=2")]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"worker_{i}" / "startup.json").exists() for i in range(2)):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    # Four flooding processes for 10 s, longer than the 10 s the tasks wait for a silent coordinator.
    floods = [net.run(stranger, ["python3", str(script), pods[0].ip, "2220", "10"], env={}) for _ in range(4)]
    flood_results = finish_all(floods, timeout=60)
    made = sum(int(out) for _, out, _ in flood_results)
    results = finish_all(procs, timeout=60)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert made > 2000, flood_results
    refusals = [line for line in results[0][2].splitlines() if "control channel: refused" in line]
    assert 1 <= len(refusals) <= 3, refusals  # the first at once, then one per 10 s
    assert "job already started" in refusals[-1]


IMPOSTOR = textwrap.dedent("""
    import json, socket, sys, time
    host, claimed, address = sys.argv[1], sys.argv[2], sys.argv[3]
    for _ in range(100):
        try:
            c = socket.create_connection((host, 2220), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    reader = c.makefile("r")
    challenge = json.loads(reader.readline())
    hello = {"type": "hello", "job": challenge["job"], "task": claimed, "host": "impostor", "instance": "ab" * 8,
             "supervised": True, "name": "x", "addresses": [address], "fingerprint": {}, "nonce": "", "proof": ""}
    c.sendall((json.dumps(hello) + "\\n").encode())
    print("said:", reader.readline().strip(), flush=True)
    c.settimeout(2)
    end = time.monotonic() + 60
    while time.monotonic() < end:              # heartbeats, as a real task sends them
        try:
            c.sendall(b'{"type":"ping"}\\n')
            if not c.recv(65536):
                break
        except socket.timeout:
            continue
        except OSError:
            break
    print("closed", flush=True)
""")


def test_a_stranger_claiming_a_task_is_dropped_and_the_real_task_joins(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    stranger = net.add_pod("stranger", service="")
    script = tmp_path / "impostor.py"
    script.write_text(IMPOSTOR)
    args = ["--start-timeout", "40s"]
    env = {"TFBOOT_WAIT": "10s"}
    coordinator = start(net, tfboot, pods[0], ["true"], tmp_path, "worker=3", env, args)
    # worker:2's place taken first, by a connection that copies its address into the hello.
    impostor = net.run(stranger, ["python3", str(script), pods[0].ip, "worker:2", pods[2].ip], env={})
    time.sleep(2)
    procs = [coordinator] + [start(net, tfboot, pod, ["true"], tmp_path, "worker=3", env, args) for pod in pods[1:]]
    results = finish_all(procs, timeout=90)
    impostor.kill()
    impostor.communicate(timeout=10)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert (f"dropped the connection in worker:2's place: a connection from {stranger.ip} claimed it, but "
            f"mnist-worker-2.mnist.default.svc.cluster.local resolves to {pods[2].ip}") in results[0][2], results[0][2]


def test_control_port_0_runs_each_task_alone(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    proc = start(net, tfboot, pods[1], ["true"], tmp_path, "worker=3", {"TFBOOT_CONTROL_PORT": "0"})
    code, _, err = finish_all([proc])[0]
    assert code == 0, err
    assert "job" not in json.loads((tmp_path / "worker_1" / "startup.json").read_text())


def test_idle_when_done_keeps_finished_tasks_until_they_are_stopped(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    idle = {"TFBOOT_IDLE_WHEN_DONE": "1"}
    procs = [start(net, tfboot, pods[0], ["true"], tmp_path, "worker=2", idle),
             start(net, tfboot, pods[1], ["sleep", "600"], tmp_path, "worker=2", idle)]
    # One reader per task, so that a task that never says it is idle cannot block the test.
    seen = [[], []]
    readers = [threading.Thread(target=lambda i=i: seen[i].extend(iter(procs[i].stderr.readline, "")), daemon=True)
               for i in range(2)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 40
    while not all(any("staying idle" in line for line in lines) for lines in seen):
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
    time.sleep(2)
    assert [proc.poll() for proc in procs] == [None, None], "a StatefulSet would restart a task that exits"
    for proc in procs:
        net.signal(proc, signal.SIGTERM)
    assert [proc.wait(timeout=10) for proc in procs] == [0, 0]
    for reader in readers:
        reader.join(timeout=10)


def test_a_coordinator_raises_its_descriptor_limit_for_the_job(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    procs = [net.run(pods[0], ["prlimit", "--nofile=40:4096", tfboot, "--", "true"],
                     env={"TFBOOT_CLUSTER": "worker=3", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "30s"})]
    procs += [start(net, tfboot, pod, ["sleep", "600"], tmp_path, "worker=3") for pod in pods[1:]]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert "control channel: descriptor limit raised from 40 to 4096 for a job of 3 tasks" in results[0][2]


def test_a_coordinator_whose_descriptor_limit_is_too_low_exits_7_before_listening(net, tfboot, tmp_path):
    pod = net.add_job_pods(1)[0]
    # Through the start tree (above 128 tasks) the coordinator holds 127 connections of its own group's
    # and two per relay (7 here): 141, an eighth more and 64.
    proc = net.run(pod, ["prlimit", "--nofile=200:200", tfboot, "--", "true"],
                   env={"TFBOOT_CLUSTER": "worker=1000", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "0"})
    [(code, _, err)] = finish_all([proc])
    assert code == 7, err
    assert error_lines(err) and error_lines(err)[0].endswith(
        "the descriptor limit (ulimit -n) is 200 at most, too low for the coordinator of a job of 1000 tasks "
        "(222 needed): raise the container's nofile limit"), err
    assert "start barrier: waiting" not in err
    assert not (tmp_path / "worker_0").exists()


def test_a_task_done_early_waits_for_the_job_and_fails_with_it_so_the_retry_runs_it_again(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    commands = [["sh", "-c", "sleep 2; exit 3"], ["true"], ["sleep", "600"]]
    procs = [start(net, tfboot, pod, command, tmp_path / "first", "worker=3") for pod, command in zip(pods, commands)]
    results = finish_all(procs)
    # worker:1 finished first, yet an Indexed Job must run it again with the others: not 0.
    assert [code for code, _, _ in results] == [3, STOPPED_BY_JOB, STOPPED_BY_JOB], [err for _, _, err in results]
    done_early = results[1][2]
    assert "this task is done; waiting for the job's outcome" in done_early
    assert done_early.rstrip().splitlines()[-1].endswith("exiting 200: stopping: worker:0 failed with status 3"), done_early
    assert "command stopped by tfboot (SIGTERM); status 143" in results[2][2]
    assert results[0][2].rstrip().splitlines()[-1].endswith("exiting 3: the command failed"), results[0][2]
    # The retry: every task runs again, together.
    procs = [start(net, tfboot, pod, ["true"], tmp_path / "retry", "worker=3") for pod in pods]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert results[1][2].rstrip().splitlines()[-1].endswith("exiting 0: the job is done: worker:0 finished")


def test_a_job_supervises_its_tasks_when_tfboot_is_not_pid_1(net, tfboot, tmp_path):
    # As under `srun ... apptainer run` or in a pod with shareProcessNamespace: tfboot is not PID 1.
    # A job with the control channel is supervised all the same (a child subreaper reaps), so a
    # failed task still stops the others instead of each running on alone after an exec.
    pods = net.add_job_pods(2)
    env = {"TFBOOT_CLUSTER": "worker=2", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "30s", "TFBOOT_STOP_GRACE": "5s"}
    commands = [["sleep", "600"], ["sh", "-c", "sleep 1; exit 3"]]
    procs = [net.run(pod, [tfboot, "--", *command], env=env, pid1=False) for pod, command in zip(pods, commands)]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [STOPPED_BY_JOB, 3], [err for _, _, err in results]
    for _, _, err in results:
        assert "(supervised as init; not PID 1, a child subreaper)" in err, err
    assert "worker:1 failed with status 3" in error_lines(results[0][2])[0]
    # --no-init still means exec: only the start barrier applies.
    procs = [net.run(pod, [tfboot, "--no-init", "--", "sh", "-c", "exit 0"], env=env, pid1=False) for pod in pods]
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    for _, _, err in results:
        assert "(exec)" in err and "--no-init: this task's command runs by exec, so the job does not supervise it" in err, err
