"""tfboot as an init (PID 1 or --init), in the manner of tini's tests: exit codes, signals, reaping."""

import json
import os
import signal
import subprocess
import time
from datetime import datetime, timezone

import pytest

from harness.processes import children
from init_support import PATH, wait_until

BASE_ENV = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0"}


def env_for(tmp_path, **extra):
    return {"PATH": PATH, **BASE_ENV, "TFBOOT_LOG_ROOT": str(tmp_path), **extra}


def wait_for_line(proc, needle, timeout=10):
    """Reads stderr until `needle` shows; returns what was read."""
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not seen in: {seen}")


def start_as_pid1(tfboot, tmp_path, args):
    """tfboot as PID 1 of a new PID namespace; returns (unshare Popen, host pid of tfboot)."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", tfboot, *args],
                            env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    found = []

    def started():
        found[:] = children(proc.pid)
        return bool(found)

    if not wait_until(started, 5):
        proc.kill()
        raise AssertionError("tfboot did not start under unshare")
    return proc, found[0]


def test_every_exit_code_passes_through(tfboot, tmp_path):
    failures = []
    for code in range(256):
        result = subprocess.run([tfboot, "--init", "--log-level", "error", "--", "sh", "-c", f"exit {code}"],
                                env=env_for(tmp_path), capture_output=True, timeout=10)
        if result.returncode != code:
            failures.append((code, result.returncode))
    assert failures == []


def test_command_killed_by_signal_gives_128_plus_n(tfboot, tmp_path):
    result = subprocess.run([tfboot, "--init", "--", "sh", "-c", "kill -KILL $$"], env=env_for(tmp_path),
                            capture_output=True, timeout=10)
    assert result.returncode == 128 + 9


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                                 signal.SIGUSR2])
def test_signals_are_forwarded_to_the_command(tfboot, tmp_path, sig):
    name = signal.Signals(sig).name[3:]
    script = f'trap "echo got {name}; exit 5" {name}; echo ready; while :; do sleep 0.05; done'
    proc = subprocess.Popen([tfboot, "--init", "--", "sh", "-c", script], env=env_for(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 5
    assert f"got {name}" in out


@pytest.mark.root
def test_sigterm_to_pid1_ends_command_with_143(tfboot, tmp_path):
    proc, pid = start_as_pid1(tfboot, tmp_path, ["--", "sleep", "30"])
    try:
        log = wait_for_line(proc, "running")
        assert "supervised as init" in log, "PID 1 supervises without being asked"
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - started < 5
    finally:
        proc.kill()
    assert proc.returncode == 143


def test_signal_reaches_the_whole_process_group(tfboot, tmp_path):
    marker = tmp_path / "grandchild.pid"
    script = f"sleep 30 & echo $! > {marker}; wait"
    proc = subprocess.Popen([tfboot, "--init", "--", "sh", "-c", script], env=env_for(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 5
        while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        grandchild = int(marker.read_text())
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 143
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{grandchild}") or open(f"/proc/{grandchild}/stat").read().split()[2] == "Z"


@pytest.mark.root
def test_orphans_are_reaped_and_no_zombie_is_left(tfboot, tmp_path):
    # The command leaves orphans behind (double fork) that end at once; as PID 1 tfboot inherits
    # and must reap them. The command then checks the PID namespace for zombies.
    script = r"""
for i in 1 2 3 4 5; do ( sh -c 'exit 0' & ) ; done
sleep 1.5
zombies=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)
echo "zombies=$zombies"
test "$zombies" -eq 0
"""
    proc, _ = start_as_pid1(tfboot, tmp_path, ["--", "sh", "-c", script])
    out, err = proc.communicate(timeout=20)
    assert "zombies=0" in out, out + err
    assert proc.returncode == 0


def test_orphans_are_reaped_with_init_flag_too(tfboot, tmp_path):
    # Not PID 1: tfboot is a subreaper, so orphans of the command are re-parented to it.
    script = r"""
( sleep 0.2 & echo $! > orphan.pid )
sleep 1
"""
    result = subprocess.run([tfboot, "--init", "--", "sh", "-c", script], env=env_for(tmp_path), cwd=tmp_path,
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0
    orphan = int((tmp_path / "orphan.pid").read_text())
    assert not os.path.exists(f"/proc/{orphan}"), "orphan was reaped, not left a zombie"


def test_command_gets_an_empty_signal_mask_and_default_dispositions(tfboot, tmp_path):
    for mode in ["--init", "--no-init"]:
        result = subprocess.run([tfboot, mode, "--", "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"],
                                env=env_for(tmp_path), capture_output=True, text=True, timeout=10)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"], mode


def test_command_runs_in_its_own_process_group(tfboot, tmp_path):
    result = subprocess.run([tfboot, "--init", "--", "sh", "-c", "echo $$ $(ps -o pgid= -p $$)"],
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=10)
    pid, pgid = result.stdout.split()
    assert pid == pgid


def iso(seconds):
    """startup.json's ISO 8601 form of Unix seconds: UTC, milliseconds, "Z"."""
    return datetime.fromtimestamp(round(seconds, 3), timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_startup_json_records_how_the_task_ended(tfboot, tmp_path):
    # At exit in init mode startup.json gets an "end" (replaced whole, no temporary left); the next
    # start in the same log dir keeps it in its history. A relative log root still works although
    # the supervisor changes to "/" while the command runs.
    env = env_for(tmp_path, TFBOOT_LOG_ROOT="logs")
    log_dir = tmp_path / "logs" / "worker_0"
    failed = subprocess.run([tfboot, "--init", "--", "sh", "-c", "exit 3"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=10)
    assert failed.returncode == 3, failed.stderr
    assert sorted(os.listdir(log_dir)) == ["startup.json", "tf_config.json"]
    first = json.loads((log_dir / "startup.json").read_text())
    end = first["end"]
    assert {key: end[key] for key in ["exit_status", "reason", "message"]} == {
        "exit_status": 3, "reason": "command_failed", "message": "the command failed"}
    assert "failed_task" not in end
    assert first["started_at"] <= first["written_at"] <= end["ended_at"] <= time.time()
    assert end["ended_at_iso"] == iso(end["ended_at"])
    assert first["started_at_iso"] == iso(first["started_at"]) and first["written_at_iso"] == iso(first["written_at"])

    succeeded = subprocess.run([tfboot, "--init", "--", "true"], env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=10)
    assert succeeded.returncode == 0, succeeded.stderr
    second = json.loads((log_dir / "startup.json").read_text())
    assert (second["end"]["exit_status"], second["end"]["reason"]) == (0, "command_succeeded")
    assert second["restarts"] == 1
    assert second["history"][0]["exit_status"] == 3 and second["history"][0]["ended_at"] == end["ended_at"]

    # A stop signal to tfboot, passed on, ends the command: that is no failure of its own.
    proc = subprocess.Popen([tfboot, "--init", "--", "sh", "-c", "echo ready; exec sleep 30"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 143
    stopped = json.loads((log_dir / "startup.json").read_text())["end"]
    assert (stopped["exit_status"], stopped["reason"]) == (143, "stopped_by_signal")

    # Exec mode replaces tfboot with the command: nothing is left to write the end.
    subprocess.run([tfboot, "--no-init", "--", "true"], env=env, cwd=tmp_path, capture_output=True, timeout=10)
    assert "end" not in json.loads((log_dir / "startup.json").read_text())
