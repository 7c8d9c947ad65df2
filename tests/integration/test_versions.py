"""Two tfboot versions in one job (an image rollout half done): the control channel's protocol
version makes it a clear start failure, exit 6, naming both versions and the task of the other one.

The other version is a Python imitation of the protocol as tfboot spoke it before the version was
carried (protocol 1: a challenge and a hello without "protocol" and "tfboot"), the same
imitation that test_scale.py's tasks speak with the version added."""

import textwrap
import time

import pytest

from harness.processes import communicate_all

pytestmark = pytest.mark.root  # every test builds namespace pods

ENVIRONMENT_MISMATCH = 6
CONTROL_PORT = 2220

# A task of protocol 1: answers the challenge with a hello without a version (proving the secret
# when given one, as tfboot did), then prints every message the coordinator sends until it closes.
OLD_TASK = textwrap.dedent("""
    import hashlib, hmac, json, secrets, socket, sys, time
    host, task, secret = sys.argv[1], sys.argv[2], sys.argv[3]
    for _ in range(100):
        try:
            c = socket.create_connection((host, 2220), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    reader = c.makefile("r")
    challenge = json.loads(reader.readline())
    nonce = proof = ""
    if secret:
        nonce = secrets.token_hex(16)
        text = "\\n".join(["tfboot task", challenge["job"], task, challenge["nonce"], nonce])
        proof = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
    hello = {"type": "hello", "job": challenge["job"], "task": task, "host": "old-tfboot", "instance": "ab" * 8,
             "supervised": True, "name": "x", "addresses": [], "fingerprint": {}, "nonce": nonce, "proof": proof,
             "started_ms_ago": 0}
    c.sendall((json.dumps(hello) + "\\n").encode())
    c.settimeout(30)
    for line in reader:
        print(line.strip(), flush=True)
        c.sendall(b'{"type":"ping"}\\n')
    print("closed", flush=True)
""")

# A coordinator of protocol 1: listens on the control port and sends a challenge without a
# version to whoever connects, then prints what it hears.
OLD_COORDINATOR = textwrap.dedent("""
    import json, secrets, socket, sys
    server = socket.create_server(("0.0.0.0", 2220))
    server.settimeout(60)
    c, _ = server.accept()
    challenge = {"type": "challenge", "job": sys.argv[1], "nonce": secrets.token_hex(16), "secret": False}
    c.sendall((json.dumps(challenge) + "\\n").encode())
    c.settimeout(30)
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    print("heard:", data.decode().strip() or "nothing", flush=True)
""")


def start(net, tfboot, pod, log_root, cluster, extra_env=None, args=()):
    env = {"TFBOOT_CLUSTER": cluster, "TFBOOT_LOG_ROOT": str(log_root), "TFBOOT_WAIT": "30s", "TFBOOT_STOP_GRACE": "5s"}
    env.update(extra_env or {})
    return net.run(pod, [tfboot, *args, "--", "true"], env=env)


def error_lines(err):
    return [line for line in err.splitlines() if " error " in line]


def run_script(net, pod, tmp_path, name, text, argv):
    script = tmp_path / name
    script.write_text(text)
    return net.run(pod, ["python3", str(script), *argv], env={})


def test_a_task_of_the_older_protocol_ends_the_start_with_exit_6_on_every_task(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    started = time.monotonic()
    coordinator = start(net, tfboot, pods[0], tmp_path, "worker=3", args=["--start-timeout", "60s"])
    new_task = start(net, tfboot, pods[2], tmp_path, "worker=3", args=["--start-timeout", "60s"])
    old_task = run_script(net, pods[1], tmp_path, "old_task.py", OLD_TASK, [pods[0].ip, "worker:1", ""])
    results = communicate_all([coordinator, new_task, old_task], 90)
    assert time.monotonic() - started < 50  # at the barrier's start, not its deadline
    assert [code for code, _, _ in results] == [ENVIRONMENT_MISMATCH, ENVIRONMENT_MISMATCH, 0], [e for _, _, e in results]
    expected = (f"tfboot versions differ in this job: worker:1 (host 'old-tfboot', {pods[1].ip}:")
    said = ("speaks control protocol 1 (an older tfboot that does not say its version), the coordinator worker:0 "
            "speaks control protocol 3 (tfboot 0.1.0")
    for _, _, err in results[:2]:
        errors = error_lines(err)
        assert len(errors) == 1, err
        assert expected in errors[0] and said in errors[0], errors[0]
        assert "run one tfboot version on every task of a job" in errors[0]
    # The older task is accepted, then told why: it exits 6 with this message, as tfboot did then.
    # It reads the coordinator's close after that, not a reset (its script would exit 1).
    heard = results[2][1].splitlines()
    assert heard[0].startswith('{"type":"accepted"'), heard
    assert any(line.startswith('{"type":"abort","code":6,') and said in line for line in heard), heard
    assert not (tmp_path / "worker_0").exists()


def test_with_a_secret_a_task_of_the_older_protocol_ends_the_start_at_once(net, tfboot, tmp_path):
    pods = net.add_job_pods(3)
    secret = tmp_path / "secret"
    secret.write_text("s3cret-shared-by-the-job\n")
    env = {"TFBOOT_CONTROL_SECRET_FILE": str(secret)}
    started = time.monotonic()
    coordinator = start(net, tfboot, pods[0], tmp_path, "worker=3", env, ["--start-timeout", "60s"])
    # worker:2 never comes: the job cannot start whatever it does, and says so at once.
    old_task = run_script(net, pods[1], tmp_path, "old_task.py", OLD_TASK, [pods[0].ip, "worker:1", "s3cret-shared-by-the-job"])
    results = communicate_all([coordinator, old_task], 90)
    assert time.monotonic() - started < 30
    assert [code for code, _, _ in results] == [ENVIRONMENT_MISMATCH, 0], [e for _, _, e in results]
    assert "worker:1 (host 'old-tfboot'" in error_lines(results[0][2])[0]
    heard = results[1][1].splitlines()
    assert heard[0].startswith('{"type":"accepted"'), heard
    assert any(line.startswith('{"type":"abort","code":6,') for line in heard), heard
    assert heard[-1] == "closed", heard


def test_a_coordinator_of_the_older_protocol_is_refused_at_once_with_exit_6(net, tfboot, tmp_path):
    pods = net.add_job_pods(2)
    # The version is checked before anything else the challenge says (the job id here is another's).
    old = run_script(net, pods[0], tmp_path, "old_coordinator.py", OLD_COORDINATOR, ["0123456789abcdef"])
    started = time.monotonic()
    task = start(net, tfboot, pods[1], tmp_path, "worker=2", args=["--start-timeout", "60s"])
    results = communicate_all([task, old], 90)
    assert time.monotonic() - started < 30
    code, _, err = results[0]
    assert code == ENVIRONMENT_MISMATCH, err
    errors = error_lines(err)
    assert len(errors) == 1, err
    assert (f"tfboot versions differ in this job: the coordinator worker:0 (mnist-worker-0.mnist.default.svc.cluster.local) "
            f"at {pods[0].ip}:2220 speaks control protocol 1 (an older tfboot that does not say its version), this task "
            f"worker:1 speaks control protocol 3 (tfboot 0.1.0") in errors[0], errors[0]
    # The task said nothing to it: no hello in another protocol.
    assert results[1][1].strip() == "heard: nothing", results[1]
