"""What users and environments feed tfboot cannot break it: bad input, leaks, stubborn commands."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

W = {"POD_NAME": "m-worker-0"}
# One task of a job, alone: the job's control channel is off (test_supervision.py covers it).
CLUSTER = {**W, "TFBOOT_CLUSTER": "worker=2", "TFBOOT_CONTROL_PORT": "0"}
LONG_LABEL = "a" * 64
LONG_NAME = ".".join(["b" * 60] * 5)  # 304 characters


def tf_config(cluster, task=None):
    return json.dumps({"cluster": cluster, "task": task or {"type": "worker", "index": 0}})


# (args, env, exit code, text the one error line must contain)
BAD_INPUTS = [
    # flags and env twins
    (["--nope"], W, 2, "'--nope'"),
    (["-x"], W, 2, "'-x'"),
    (["--print=1"], CLUSTER, 2, "--print takes no value"),
    (["--task-index"], W, 2, "--task-index needs a value"),
    (["--task-index="], W, 2, "--task-index needs a non-empty value"),
    ([], {**CLUSTER, "TFBOOT_INIT": "2"}, 2, "TFBOOT_INIT='2'"),
    ([], {**CLUSTER, "TFBOOT_CHIEF_AT_ORDINAL_0": "y"}, 2, "TFBOOT_CHIEF_AT_ORDINAL_0='y'"),
    (["--identity-from", "dns"], CLUSTER, 2, "--identity-from 'dns'"),
    (["--address", "dns"], CLUSTER, 2, "--address 'dns'"),
    (["--log-format", "xml"], CLUSTER, 2, "--log-format 'xml'"),
    # durations
    (["--wait", "-1"], CLUSTER, 2, "--wait '-1'"),
    (["--wait", "1.5s"], CLUSTER, 2, "--wait '1.5s'"),
    (["--wait", "99999999999999999999"], CLUSTER, 2, "--wait '99999999999999999999'"),
    (["--wait", "200h"], CLUSTER, 2, "longer than the maximum"),
    # identity
    (["--task-type", "master2", "--task-index", "0"], CLUSTER, 2, "--task-type 'master2'"),
    (["--task-index", "1e3"], CLUSTER, 2, "--task-index '1e3'"),
    (["--task-index", "99999999999"], CLUSTER, 2, "--task-index '99999999999'"),
    ([], {**CLUSTER, "TFBOOT_TASK_INDEX": " 1"}, 2, "TFBOOT_TASK_INDEX ' 1'"),
    ([], {**CLUSTER, "TFBOOT_POD_INDEX": "x"}, 2, "TFBOOT_POD_INDEX 'x'"),
    ([], {**CLUSTER, "POD_NAME": "m-worker-007"}, 2, "hostname 'm-worker-007'"),
    ([], {**CLUSTER, "POD_NAME": "wörker-0"}, 2, "peer name"),
    ([], {**CLUSTER, "POD_NAME": "../../etc-worker-0"}, 2, "hostname '../../etc-worker-0'"),
    ([], {**CLUSTER, "POD_NAME": "a/b-worker-1"}, 2, "'a/b-worker-0'"),
    ([], {**CLUSTER, "POD_NAME": LONG_LABEL + "-worker-0"}, 2, "label longer than 63"),
    (["--task-type", "ps"], {**CLUSTER, "POD_NAME": "m-worker-0"}, 2, "contradicts hostname"),
    # cluster specs
    (["--cluster", "worker"], W, 2, "'worker' is not type=count"),
    (["--cluster", "worker=2,worker=3"], W, 2, "given twice"),
    (["--cluster", "gpu=2"], W, 2, "unknown task type 'gpu'"),
    (["--cluster", "worker=-1"], W, 2, "count '-1'"),
    (["--cluster", "worker=100001"], W, 2, "count '100001'"),
    (["--cluster", "evaluator=2,worker=1"], W, 2, "at most one evaluator"),
    (["--cluster", "evaluator=1"], {"POD_NAME": "m-evaluator-0"}, 2, "needs at least one chief, worker or ps"),
    (["--cluster", ""], W, 2, "--cluster needs a non-empty value"),
    # ports and templates
    (["--port", "0"], CLUSTER, 2, "--port '0'"),
    (["--port", "65536"], CLUSTER, 2, "--port '65536'"),
    (["--port", "2222,2223"], CLUSTER, 2, "more than one default port"),
    (["--port", "gpu=1"], CLUSTER, 2, "unknown task type 'gpu'"),
    (["--peer-template", "x-{index"], CLUSTER, 2, "unclosed '{'"),
    (["--peer-template", "static-host"], CLUSTER, 2, "the same name"),
    (["--peer-template", LONG_NAME + "-{index}"], CLUSTER, 2, "longer than 253"),
    (["--service", "bad_svc!"], CLUSTER, 2, "--service 'bad_svc!'"),
    # operator TF_CONFIG
    ([], {**W, "TF_CONFIG": "[]"}, 2, "is not a JSON object"),
    ([], {**W, "TF_CONFIG": '{"task":{"type":"worker","index":0}}'}, 2, 'no "cluster" object'),
    ([], {**W, "TF_CONFIG": tf_config({"worker": "a:1"})}, 2, "is not a list of addresses"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": [1]})}, 2, "not a string"),
    ([], {**W, "TF_CONFIG": tf_config({"gpu": ["a:1"]})}, 2, "unknown job 'gpu'"),
    ([], {**W, "TF_CONFIG": tf_config({"master": ["a:1"], "worker": ["b:1"]})}, 2, "unknown job 'master'"),
    ([], {**W, "TF_CONFIG": '{"cluster":{"worker":["a:1"],"worker":["b:1"]},"task":{"type":"worker","index":0}}'}, 2,
     "key 'worker' appears twice"),
    ([], {**W, "TF_CONFIG": tf_config({"chief": ["a:1", "b:1"], "worker": ["c:1"]})}, 2, "more than one chief"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["c:1"], "evaluator": ["a:1", "b:1"]})}, 2, "more than one evaluator"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a"]})}, 2, "has no ':port'"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:1,b:2"]})}, 2, "contains a comma"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:0"]})}, 2, "port outside 1..65535"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:65536"]})}, 2, "port outside 1..65535"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:1"]}, {"type": "worker", "index": "0"})}, 2, 'task.index "0"'),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:1"]}, {"type": "worker", "index": 1e30})}, 2, "task.index"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:1"]}, {"type": "ps", "index": 0})}, 2, "'ps' is not in the cluster"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["a:1"]}, {"type": "worker", "index": -1})}, 2, "task.index -1"),
    ([], {**W, "TF_CONFIG": tf_config({"worker": ["::1:2222"]})}, 2, "IPv6 host without [brackets]"),
]


@pytest.mark.parametrize("args, env, code, needle", BAD_INPUTS, ids=[f"case{i}" for i in range(len(BAD_INPUTS))])
def test_bad_input(run_tfboot, tmp_path, args, env, code, needle):
    log_root = tmp_path / "logs"
    marker = tmp_path / "ran"
    # Flags that take a value must come before the log root; a dangling one swallows nothing else.
    if args and args[-1] in ("--task-index", "--cluster") or (args and args[-1].endswith("=")):
        full = ["--log-root", str(log_root), *args]
    else:
        full = ["--log-root", str(log_root), "--wait", "0", *args, "--", "touch", str(marker)]
        if "--wait" in args:
            full.remove("--wait")
            full.remove("0")
    result = run_tfboot(full, env=env)
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    errors = [line for line in lines if " error " in line]
    assert len(errors) == 1, result.stderr
    assert needle in errors[0]
    assert not marker.exists()
    assert os.listdir(tmp_path) == [], "no file or directory left behind"


def test_bad_input_matrix_has_at_least_forty_cases():
    assert len(BAD_INPUTS) >= 40


@pytest.mark.root
def test_read_only_log_root_is_exit_4(run_tfboot, tmp_path):
    # Root ignores permission bits, so use a read-only bind mount in a private mount namespace.
    root = tmp_path / "ro"
    root.mkdir()
    script = (f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
              f"exec \"$0\" --log-root {root}/logs --wait 0 -- touch {tmp_path}/ran")
    tfboot_path = os.environ.get("TFBOOT_BINARY", "build/launcher/tfboot")
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                             os.path.abspath(tfboot_path)], env={"PATH": os.environ["PATH"], **CLUSTER},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 4, result.stderr
    assert "Read-only file system" in result.stderr
    assert not (tmp_path / "ran").exists()
    assert os.listdir(root) == []


def test_no_descriptor_leaks_into_the_command(run_tfboot, tmp_path):
    env = {**CLUSTER, "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "0"}
    for mode in ["--init", "--no-init"]:
        result = run_tfboot([mode, "--", "sh", "-c", "ls /proc/$$/fd"], env=env)
        assert result.returncode == 0, result.stderr
        assert sorted(result.stdout.split()) == ["0", "1", "2"], mode


@pytest.mark.root
def test_no_descriptor_leaks_after_a_dns_wait(tfboot, tmp_path):
    # The DNS wait opens sockets (c-ares) and files; none may reach the command. The peers are
    # made resolvable by an /etc/hosts bind-mounted in a private mount namespace.
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost m-worker-0 m-worker-1\n")
    script = f'mount --bind {hosts} /etc/hosts && exec "$0" --wait 5s --log-root {tmp_path}/l -- sh -c "ls /proc/\\$\\$/fd"'
    for mode in ["--init", "--no-init"]:
        result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                 script.replace('--wait', f'{mode} --wait'), tfboot],
                                env={"PATH": os.environ["PATH"], **CLUSTER}, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert "all 2 names resolve" in result.stderr
        assert sorted(result.stdout.split()) == ["0", "1", "2"], mode


def test_no_other_environment_value_leaks(run_tfboot, tmp_path):
    secret = "s3cret-value-7f1d"
    env = {**CLUSTER, "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "0", "API_TOKEN": secret,
           "TFBOOT_LOG_LEVEL": "trace"}
    result = run_tfboot(["--", "true"], env=env)
    assert result.returncode == 0
    assert secret not in result.stderr + result.stdout
    for path in (tmp_path / "worker_0").iterdir():
        assert secret not in path.read_text(), path


def test_command_is_never_run_through_a_shell(run_tfboot, tmp_path):
    env = {**CLUSTER, "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "0"}
    result = run_tfboot(["--", f"touch {tmp_path}/injected; true"], env=env)
    assert result.returncode == 127
    assert not (tmp_path / "injected").exists()


def test_second_sigterm_kills_a_command_that_ignores_the_first(tfboot, tmp_path):
    env = {"PATH": os.environ["PATH"], **CLUSTER, "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "0"}
    proc = subprocess.Popen([tfboot, "--init", "--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None, "the first SIGTERM is only passed on"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGKILL
    assert "second stop signal" in proc.stderr.read()


@pytest.mark.root
def test_fork_failure_under_rlimit_nproc_is_a_clear_error(tfboot):
    # Root is exempt from RLIMIT_NPROC, so run as nobody with a process limit already reached,
    # and a log root nobody can reach (pytest's tmp dirs are private to root).
    base = tempfile.mkdtemp(prefix="tfboot-nproc-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        log_root = os.path.join(base, "logs")
        os.mkdir(log_root)
        os.chown(log_root, 65534, 65534)
        # (LeakSanitizer needs a thread of its own at exit, which this limit forbids; the release
        # binary ignores the variable.)
        env = {"PATH": os.environ["PATH"], **CLUSTER, "TFBOOT_LOG_ROOT": log_root, "TFBOOT_WAIT": "0",
               "ASAN_OPTIONS": "detect_leaks=0"}
        started = time.monotonic()
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "prlimit", "--nproc=1",
                                 tfboot, "--init", "--", "true"], env=env, capture_output=True, text=True, timeout=30)
        assert time.monotonic() - started < 10
        # A resource the system refused (exit 7), not a command that cannot be executed (126).
        assert result.returncode == 7, result.stderr
        errors = [line for line in result.stderr.splitlines() if " error " in line]
        assert len(errors) == 1 and "cannot start 'true': fork failed: Resource temporarily unavailable" in errors[0]
    finally:
        shutil.rmtree(base)
