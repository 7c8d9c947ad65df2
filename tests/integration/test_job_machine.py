"""One job machine for pods, `tfboot local` and a task alone (docs/supervision.md: Job supervision).

Each test is a defect the supervisors had while the rules of a job were written three times:
restarts in the start directory, leftovers stopped all at once and while heartbeats flow, what a
`tfboot local` task leaves behind, --max-restarts for a task alone, reaping while idle, and a
restart that leaves alone what the job never started.
"""

import datetime
import json
import os
import signal
import subprocess
import time

import pytest

from harness.exit_codes import USAGE
from harness.processes import communicate_all
from test_restarts import start
from init_support import PATH, Supervised, entrypoint_args, is_running, process_state, wait_until

ENV = {"PATH": PATH}


def pid_alive(pid):
    return is_running(pid)


# --- a task alone, and the directory every run starts in -----------------------------------------

def test_a_restart_runs_the_command_in_the_directory_tfboot_started_in(tfboot, tmp_path):
    # README's image: WORKDIR /app, CMD relative to it. The first run fails; the restart must find
    # the script again, and relative --log-root and --termination-log land under the same directory.
    app = tmp_path / "app"
    app.mkdir()
    (app / "train.sh").write_text('echo "$TFBOOT_RESTART_COUNT $(pwd)" >> ran; [ "$TFBOOT_RESTART_COUNT" -ge 1 ] && exit 9; exit 3\n')
    args = entrypoint_args("logs", "--init", "--max-restarts", "1", "--termination-log", "termination", "--", "sh", "train.sh")
    result = subprocess.run([tfboot, *args], env=ENV, cwd=app, capture_output=True, text=True, timeout=60)
    assert result.returncode == 9, result.stderr
    assert (app / "ran").read_text().splitlines() == [f"0 {app}", f"1 {app}"]
    assert json.loads((app / "logs" / "worker_0" / "startup.json").read_text())["restarts"] == 1
    assert (app / "termination").read_text() == "exiting 9: the command failed\n"
    assert "restarting the job in place (restart 1 of 1): worker:0 failed with status 3" in result.stderr


def test_max_restarts_applies_to_a_job_of_one_task_with_several_processes(tfboot, tmp_path):
    script = ('echo "$TFBOOT_RESTART_COUNT" >> "$TFBOOT_LOG_DIR/counts-$LOCAL_RANK"; '
              '[ "$TFBOOT_RESTART_COUNT" -ge 2 ] || [ "$LOCAL_RANK" != 1 ] || { sleep 0.5; exit 4; }')
    args = entrypoint_args(tmp_path / "logs", "--init", "--framework", "pytorch", "--nproc-per-node", "2",
                           "--max-restarts", "2", "--", "sh", "-c", script)
    result = subprocess.run([tfboot, *args], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        assert (tmp_path / "logs" / "worker_0" / f"counts-{rank}").read_text().split() == ["0", "1", "2"]
    # Without restarts left the failure is the task's status, as before.
    args = entrypoint_args(tmp_path / "again", "--init", "--max-restarts", "1", "--", "sh", "-c", "exit 4")
    result = subprocess.run([tfboot, *args], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 4, result.stderr


# --- leftovers --------------------------------------------------------------------------------------

def test_the_leftovers_of_every_process_group_are_stopped_at_once(tfboot, tmp_path):
    # Each of three ranks leaves a helper that ignores SIGTERM; one grace for all of them, not three.
    script = 'sh -c \'trap "" TERM; sleep 600\' & echo $! > "$TFBOOT_LOG_DIR/helper-$LOCAL_RANK"; exit 0'
    args = entrypoint_args(tmp_path / "logs", "--init", "--framework", "pytorch", "--nproc-per-node", "3",
                           "--stop-grace", "3s", "--", "sh", "-c", script)
    started = time.monotonic()
    result = subprocess.run([tfboot, *args], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert took < 6, f"{took:.1f} s: the groups were stopped one after another"
    helpers = [int((tmp_path / "logs" / "worker_0" / f"helper-{rank}").read_text()) for rank in range(3)]
    assert not any(pid_alive(pid) for pid in helpers)
    assert result.stderr.count("left processes in its group: SIGTERM") == 3, result.stderr


def test_tfboot_local_stops_what_its_tasks_leave_behind(tfboot, tmp_path):
    # One helper in the task's process group, one daemon in a session of its own: neither outlives tfboot.
    script = ('sleep 600 & echo $! > "$TFBOOT_LOG_DIR/helper"; setsid sleep 600 & echo $! > "$TFBOOT_LOG_DIR/daemon"; '
              'sleep 0.2; exit 0')
    result = subprocess.run([tfboot, "local", "--cluster", "worker=2", "--stop-grace", "5s", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for index in range(2):
        for left in ("helper", "daemon"):
            pid = int((tmp_path / "logs" / f"worker_{index}" / left).read_text())
            assert wait_until(lambda: not pid_alive(pid), 2), f"worker_{index}'s {left} outlived tfboot local"


def test_tfboot_local_restarts_without_the_last_run_s_leftovers(tfboot, tmp_path):
    script = ('if [ "$TFBOOT_RESTART_COUNT" = 0 ]; then sleep 600 & echo $! > "$TFBOOT_LOG_DIR/helper"; '
              'setsid sleep 600 & echo $! > "$TFBOOT_LOG_DIR/daemon"; exit 5; fi; '
              'for left in helper daemon; do kill -0 "$(cat "$TFBOOT_LOG_DIR/$left")" 2>/dev/null && echo "$left alive" '
              '>> "$TFBOOT_LOG_DIR/seen"; done; exit 0')
    result = subprocess.run([tfboot, "local", "--cluster", "worker=1", "--max-restarts", "1", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "logs" / "worker_0" / "seen").exists(), (tmp_path / "logs" / "worker_0" / "seen").read_text()


# --- PID 1: reaping while idle, and a restart that stops only what the job started ----------------

@pytest.mark.root
def test_an_idle_pid_1_still_reaps_orphans(tfboot, tmp_path):
    # A daemon of the command's (a session of its own) ends while tfboot idles: it must not stay a zombie.
    command = ["sh", "-c", "setsid sh -c 'sleep 3' & sleep 0.5; echo started; exit 0"]
    with Supervised(tfboot, tmp_path, command, mode="pid1", args=("--idle-when-done",)) as run:
        assert run.out.readline(timeout=10) == "started"
        time.sleep(5)
        zombies = [pid for pid in children_of(run.tfboot_pid) if process_state(pid) == "Z"]
        assert zombies == [], "orphans left as zombies while idle"
        run.signal(signal.SIGTERM)
        assert run.wait(timeout=10) == 0


@pytest.mark.root
def test_a_restart_as_pid_1_leaves_a_session_it_did_not_start_alone(tfboot, tmp_path):
    # A `kubectl exec` shell: a process in the container whose parent is outside it.
    marker = tmp_path / "second-run"
    script = f'if [ "$TFBOOT_RESTART_COUNT" = 0 ]; then echo first; read go; exit 3; fi; touch {marker}; echo second; exec sleep 600'
    with Supervised(tfboot, tmp_path, ["sh", "-c", script], mode="pid1", args=("--max-restarts", "1")) as run:
        assert run.out.readline(timeout=10) == "first"
        visitor = subprocess.Popen(["nsenter", "--target", str(run.tfboot_pid), "--pid", "--mount", "sleep", "600"])
        try:
            assert wait_until(lambda: any(executable(pid) == "/usr/bin/sleep" for pid in descendants(visitor.pid)), 5)
            run.tell("go")
            assert run.out.readline(timeout=20) == "second"
            assert visitor.poll() is None, "the restart stopped a process the job never started"
        finally:
            visitor.kill()
            visitor.wait()


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def descendants(pid):
    found, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def executable(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


# --- pods: heartbeats while cleaning up, and a finished job's last moments ------------------------

@pytest.mark.root
def test_heartbeats_flow_while_the_coordinator_waits_for_its_leftovers(net, tfboot, tmp_path):
    # The coordinator's command exits 0 and leaves a helper that takes 12 s to go: longer than a
    # task's silence timeout (10 s). The job is done, not lost.
    pods = net.add_job_pods(2)
    script = ('if [ "$TFBOOT_TASK_INDEX" = 0 ]; then sh -c \'trap "sleep 12; exit 0" TERM; sleep 600 & wait\' & '
              'sleep 1; exit 0; fi; exec sleep 600')
    procs = [start(net, tfboot, pod, script, tmp_path, "worker=2", {"TFBOOT_STOP_GRACE": "30s"}) for pod in pods]
    results = communicate_all(procs, 90)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert "was lost" not in results[1][2], results[1][2]


@pytest.mark.root
def test_a_worker_that_fails_as_the_job_ends_is_part_of_its_end(net, tfboot, tmp_path):
    # The coordinator finishes (leaving a helper that takes 2 s to go); the worker's trainer fails
    # the moment the coordinator's command is gone (the lock its shell held is released as it
    # exits), as a trainer whose peer went away does, with no restart left. Five times: before
    # the job's verdict reached it the worker ended on its own failure, exit 1.
    pods = net.add_job_pods(2)
    for trial in range(5):
        log_root = tmp_path / f"trial-{trial}"
        lock, locked = log_root / "lock", log_root / "locked"
        script = (f'if [ "$TFBOOT_TASK_INDEX" = 0 ]; then sh -c \'trap "sleep 2; exit 0" TERM; sleep 600 & wait\' & '
                  f'exec 9>{lock}; flock 9; touch {locked}; sleep 1; exit 0; fi; '
                  f'while [ ! -e {locked} ]; do sleep 0.01; done; flock {lock} true; exit 1')
        log_root.mkdir()
        procs = [start(net, tfboot, pod, script, log_root, "worker=2") for pod in pods]
        results = communicate_all(procs, 90)
        assert [code for code, _, _ in results] == [0, 0], (trial, [err for _, _, err in results])


@pytest.mark.root
def test_nodes_that_resolve_nproc_per_node_differently_do_not_start(net, tfboot, tmp_path):
    # `--nproc-per-node gpu` on nodes with unequal GPUs (here: one node's flag differs): node 0 would
    # get WORLD_SIZE=4, node 1 WORLD_SIZE=2 and RANK 1 twice. The barrier refuses, on every task.
    pods = net.add_job_pods(2)
    procs = [start(net, tfboot, pod, 'echo "$RANK" >> "$TFBOOT_LOG_DIR/ran"', tmp_path, "worker=2",
                   {"TFBOOT_FRAMEWORK": "pytorch", "TFBOOT_NPROC_PER_NODE": str(2 - i)}) for i, pod in enumerate(pods)]
    results = communicate_all(procs, 90)
    assert [code for code, _, _ in results] == [USAGE, USAGE], [err for _, _, err in results]
    for _, _, err in results:
        assert "the nodes run different numbers of processes (--nproc-per-node): worker:1 runs 1; worker:0 runs 2" in err, err
    assert not any((tmp_path / task / "ran").exists() for task in ("worker_0", "worker_1"))


# --- a stop signal before the command starts ----------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_during_the_wait_still_leaves_the_termination_message(tfboot, tmp_path, sig):
    # The peer's name never resolves (no DNS server on 127.0.0.1:9): tfboot waits, and is stopped there. Kubernetes shows the
    # termination message in `kubectl describe pod`: it must say why, as any other exit does.
    message = tmp_path / "termination"
    args = ["--task-index", "0", "--cluster", "worker=2", "--peer-template", "tfboot-test-nowhere-{index}.invalid",
            "--wait", "60s", "--dns-server", "127.0.0.1:9", "--log-root", str(tmp_path / "logs"), "--termination-log", str(message), "--", "true"]
    proc = subprocess.Popen([tfboot, *args], env=ENV, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig
    assert message.read_text() == f"exiting {128 + sig}: stopped by a signal before the command started; nothing was run\n"


@pytest.mark.root
@pytest.mark.parametrize("ending", ["SIGTERM", "start-timeout"])
def test_a_task_that_ends_in_a_restart_s_barrier_records_how(net, tfboot, tmp_path, ending):
    # worker:1's tfboot is killed while the job runs: the job restarts in place, and worker:0 waits
    # in the restart's barrier for a task that never comes. Stopped there (or timed out there), its
    # startup.json must say how it ended, not "restarting" from the run before.
    pods = net.add_job_pods(2)
    env = {"TFBOOT_MAX_RESTARTS": "1", "TFBOOT_START_TIMEOUT": "4s" if ending == "start-timeout" else "60s",
           "TFBOOT_TERMINATION_LOG": str(tmp_path / "termination")}
    script = 'echo "$TFBOOT_RESTART_COUNT" >> "$TFBOOT_LOG_DIR/counts"; exec sleep 600'
    procs = [start(net, tfboot, pod, script, tmp_path, "worker=2", env) for pod in pods]
    try:
        assert wait_until(lambda: all((tmp_path / f"worker_{i}" / "counts").exists() for i in (0, 1)), 30)
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait(timeout=10)
        startup = tmp_path / "worker_0" / "startup.json"
        assert wait_until(lambda: (json.loads(startup.read_text()).get("end") or {}).get("reason") == "restarting", 30)
        if ending == "SIGTERM":
            time.sleep(0.5)  # in the restart's barrier
            procs[0].send_signal(signal.SIGTERM)
        code, _, err = communicate_all([procs[0]], 60)[0]
    finally:
        for proc in procs:
            proc.kill()
    end = json.loads((tmp_path / "worker_0" / "startup.json").read_text())["end"]
    message = (tmp_path / "termination").read_text()
    if ending == "SIGTERM":
        assert code == 143, err
        assert end["reason"] == "stopped_by_signal", end
        assert end["exit_status"] == 143
        assert end["message"] == "stopped by a signal while the job restarts in place; the command had ended and was not started again"
        assert message == "exiting 143: " + end["message"] + "\n"
        # Written by the signal handler: the time in both forms, the second derived from the first.
        assert abs(end["ended_at"] - time.time()) < 60, end
        iso = datetime.datetime.fromtimestamp(round(end["ended_at"], 3), datetime.timezone.utc)
        assert end["ended_at_iso"] == iso.strftime("%Y-%m-%dT%H:%M:%S.") + f"{iso.microsecond // 1000:03d}Z", end
    else:
        assert code == 5, err
        assert end["reason"] == "job_failed", end
        assert end["exit_status"] == 5
        assert end["message"].startswith("start barrier incomplete after 4s: 1/2 tasks present; missing worker:1"), end
        assert message == end["message"] + "\n"
