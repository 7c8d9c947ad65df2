"""`tfboot local`: every task of the cluster as a process on this machine."""

import json
import os
import signal
import subprocess
import time

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def start_two_workers(tfboot, tmp_path, script):
    """tfboot local with two workers running `script`, once both printed "ready"."""
    proc = subprocess.Popen([tfboot, "local", "--cluster", "worker=2", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert next_lines(proc, 2) == ["[worker:0] ready", "[worker:1] ready"]
    return proc


def next_lines(proc, count):
    """The next `count` lines of the tasks' output, sorted (the tasks run concurrently)."""
    return sorted(proc.stdout.readline().strip() for _ in range(count))


def test_default_two_workers_with_own_tf_config_and_prefixed_output(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--", "sh", "-c", 'echo "$TF_CONFIG"; echo "to stderr" >&2'],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert [line.split(" ", 1)[0] for line in lines] == ["[worker:0]", "[worker:1]"]
    configs = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in lines}
    addresses = configs["[worker:0]"]["cluster"]["worker"]
    assert len(addresses) == 2 and len(set(addresses)) == 2
    assert all(a.startswith("127.0.0.1:") and 0 < int(a.split(":")[1]) < 65536 for a in addresses)
    assert configs["[worker:1]"] == {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": 1}}
    assert "[worker:0] to stderr" in result.stderr and "[worker:1] to stderr" in result.stderr
    for index in range(2):
        log_dir = tmp_path / "logs" / f"worker_{index}"
        assert json.loads((log_dir / "tf_config.json").read_text())["task"]["index"] == index


def test_every_task_type_and_environment(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "chief=1,ps=1,worker=2,evaluator=1", "--log-root",
                             str(tmp_path / "r"), "--", "sh", "-c",
                             'echo "$TFBOOT_TASK_TYPE $TFBOOT_TASK_INDEX $TFBOOT_LOG_DIR"'],
                            env=ENV, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    seen = sorted(line.split(" ", 1)[1] for line in result.stdout.splitlines())
    assert seen == sorted(f"{t} {i} {tmp_path}/r/{t}_{i}" for t, i in
                          [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1), ("evaluator", 0)])
    evaluator = json.loads((tmp_path / "r" / "evaluator_0" / "tf_config.json").read_text())
    assert "evaluator" not in evaluator["cluster"]
    assert evaluator["task"] == {"type": "evaluator", "index": 0}


def test_first_failure_stops_the_others_and_sets_the_exit_code(tfboot, tmp_path):
    script = 'if [ "$TFBOOT_TASK_INDEX" = 1 ]; then exit 7; fi; trap "exit 0" TERM; while :; do sleep 0.1; done'
    started = time.monotonic()
    result = subprocess.run([tfboot, "local", "--cluster", "worker=3", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 7, result.stderr
    assert time.monotonic() - started < 8
    assert "[worker:1] failed; stopping the other tasks" in result.stderr
    assert result.stderr.splitlines()[-1].endswith(" error job failed: worker:1 exited with status 7; exiting 7")


def test_max_restarts_restarts_every_task_with_the_count_until_none_is_left(tfboot, tmp_path):
    # worker:1 fails in the first two runs; the coordinator finishes in each run it is not stopped.
    script = ('echo "$TFBOOT_RESTART_COUNT" >> "$TFBOOT_LOG_DIR/counts"; '
              'if [ "$TFBOOT_TASK_INDEX" = 1 ] && [ "$TFBOOT_RESTART_COUNT" -lt 2 ]; then sleep 0.5; exit 7; fi; '
              'if [ "$TFBOOT_TASK_INDEX" = 0 ]; then sleep 1; exit 0; fi; exec sleep 30')
    result = subprocess.run([tfboot, "local", "--cluster", "worker=3", "--max-restarts", "2", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for index in range(3):
        assert (tmp_path / "logs" / f"worker_{index}" / "counts").read_text().split() == ["0", "1", "2"]
    assert "job failed: worker:1 exited with status 7; restarting every task in place (restart 1 of 2, --max-restarts)" \
        in result.stderr
    assert "(restart 2 of 2, --max-restarts)" in result.stderr
    # One restart fewer: the last failure ends the job as without restarts.
    result = subprocess.run([tfboot, "local", "--cluster", "worker=3", "--max-restarts", "1", "--log-root", "again", "--",
                             "sh", "-c", script], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 7, result.stderr
    assert result.stderr.splitlines()[-1].endswith(" error job failed: worker:1 exited with status 7; exiting 7")
    assert (tmp_path / "again" / "worker_0" / "counts").read_text().split() == ["0", "1"]


def test_coordinator_done_ends_servers_that_never_exit(tfboot, tmp_path):
    # A ParameterServerStrategy job's ps and workers only server.join(): the chief's success ends them.
    script = 'if [ "$TFBOOT_TASK_TYPE" = chief ]; then sleep 1; exit 0; fi; exec sleep 600'
    started = time.monotonic()
    result = subprocess.run([tfboot, "local", "--cluster", "chief=1,ps=1,worker=2", "--", "sh", "-c", script],
                            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 15  # 1 s of work, 5 s to end by themselves, then SIGTERM
    assert "[chief:0] is done, and so is the job" in result.stderr
    for task in ("ps:0", "worker:0", "worker:1"):
        assert f"[{task}] stopped by tfboot (SIGTERM)" in result.stderr
    assert result.stderr.splitlines()[-1].endswith(f" job done; exiting 0; logs under ./logs")


def test_sigterm_stops_all_tasks(tfboot, tmp_path):
    proc = subprocess.Popen([tfboot, "local", "--cluster", "worker=2", "--", "sh", "-c", "echo $$; exec sleep 30"],
                            env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = [int(proc.stdout.readline().split()[1]) for _ in range(2)]
        assert all(os.path.exists(f"/proc/{pid}") for pid in pids)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids), "every task was stopped and reaped"


def test_sighup_is_passed_on_to_every_task(tfboot, tmp_path):
    # Each task says HUP once it has one and then ends: the job ends with the tasks' own status.
    script = 'trap "echo HUP; exit 0" HUP; echo ready; while :; do sleep 0.1; done'
    proc = start_two_workers(tfboot, tmp_path, script)
    try:
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert sorted(out.splitlines()) == ["[worker:0] HUP", "[worker:1] HUP"]
    assert "stopping all tasks" not in err


def test_a_cluster_without_chief_or_worker_is_a_usage_error(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "ps=2", "--", "touch", "ran"], env=ENV, cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stderr
    assert ("tfboot local: --cluster 'ps=2' has no chief or worker, whose end would end the job; add one (e.g. worker=1)"
            in result.stderr)
    assert os.listdir(tmp_path) == []


def test_python_output_is_unbuffered_unless_the_user_says_otherwise(tfboot, tmp_path):
    # A print() shows while the task runs, not at its exit: Python buffers a pipe unless told.
    script = 'echo "PYTHONUNBUFFERED=${PYTHONUNBUFFERED-unset}"'
    for env, expected in (({}, "1"), ({"PYTHONUNBUFFERED": "0"}, "0")):
        result = subprocess.run([tfboot, "local", "--cluster", "worker=1", "--", "sh", "-c", script],
                                env={**ENV, **env}, cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"[worker:0] PYTHONUNBUFFERED={expected}\n"


def test_options_that_do_not_apply_are_named(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "worker=1", "--port", "3000", "--", "true"],
                            env={**ENV, "TFBOOT_WAIT": "1m"}, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    warnings = [line.split(" warning ", 1)[1] for line in result.stderr.splitlines() if " warning " in line]
    assert warnings == ["--port does not apply to tfboot local and is ignored",
                        "TFBOOT_WAIT does not apply to tfboot local and is ignored"]


def test_ctrl_c_reaches_the_tasks_as_sigint_and_a_second_one_kills_at_once(tfboot, tmp_path):
    # The tasks say INT and carry on (as TensorFlow's coordination service may while it waits for
    # peers): the first Ctrl-C says what tfboot waits for, the second one kills without waiting.
    script = 'trap "echo INT" INT; echo ready; while :; do sleep 0.1; done'
    proc = start_two_workers(tfboot, tmp_path, script)
    try:
        proc.send_signal(signal.SIGINT)
        assert next_lines(proc, 2) == ["[worker:0] INT", "[worker:1] INT"]
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert time.monotonic() - started < 5, "not the 30 s of --stop-grace"
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "waiting up to 30s (--stop-grace) for worker:0, worker:1 to end after SIGINT; Ctrl-C again to kill now" in err
    assert "second stop signal: killing worker:0, worker:1 now" in err
    assert "[worker:0] stopped by tfboot (SIGKILL)" in err and "[worker:1] stopped by tfboot (SIGKILL)" in err
    assert err.splitlines()[-1].endswith(" info stopped by SIGINT; exiting 130")


def test_missing_command_is_127(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--", "no-such-command-xyz"], env=ENV, cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 127
    assert "not found" in result.stderr or "No such file" in result.stderr


def test_bad_cluster_is_a_usage_error_and_starts_nothing(tfboot, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "worker=two", "--", "touch", "ran"], env=ENV, cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "--cluster 'worker=two'" in result.stderr
    assert os.listdir(tmp_path) == []


def test_a_reused_log_dir_is_said_and_startup_json_has_no_dns_fields(tfboot, tmp_path):
    first = subprocess.run([tfboot, "local", "--", "true"], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert first.returncode == 0, first.stderr
    assert "reusing" not in first.stderr
    startup = json.loads((tmp_path / "logs" / "worker_0" / "startup.json").read_text())
    # No DNS, no peers to look up and no hostname here: those fields would only be empty.
    assert not {"hostname", "dns_servers", "dns_wait_seconds", "peers"} & startup.keys()
    assert startup["identity_source"] == "tfboot local" and startup["restarts"] == 0
    assert startup["started_at_iso"].endswith("Z")

    again = subprocess.run([tfboot, "local", "--", "true"], env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert again.returncode == 0, again.stderr
    assert ("reusing 2 of 2 log dirs under ./logs from an earlier run (startup.json: restarts 1): their files stay, "
            "a trainer's checkpoint there included; another --log-root starts afresh") in again.stderr
