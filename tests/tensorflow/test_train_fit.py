"""examples/train_fit.py (Keras model.fit, BackupAndRestore) under tfboot: a whole run, and a job
whose worker dies mid-training: stopped everywhere by tfboot within seconds, refused when restarted
with a backup dir that is not shared, resumed when restarted with the shared one."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness.cluster import ClusterNetwork
from harness.exit_codes import STOPPED_BY_JOB
from harness.pod_job import PodJob
from harness.processes import children, cmdline

from jobs import TRAIN_FIT, results

NO_TENSORBOARD = "TensorBoard is not installed: no summaries"


def test_fit_local_two_workers_train_together(tfboot, tensorflow, task_env, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "worker=2", "--log-root", str(tmp_path), "--",
                             "python", *TRAIN_FIT, "--epochs", "3", "--steps-per-epoch", "10"],
                            env=task_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = results(result.stdout)
    assert set(found) == {("worker", 0), ("worker", 1)}
    for fields in found.values():
        assert fields["weights_sha256"] == found[("worker", 0)]["weights_sha256"]
        assert fields["weights_sha256"] != fields["init_sha256"], "the model trained"
        assert (fields["workers"], fields["epochs"], fields["steps"], fields["start_epoch"]) == ("2", "3", "30", "1")
    for index in (0, 1):
        assert f"[worker:{index}] epoch 3/3 loss=" in result.stdout
        assert "resuming" not in result.stdout
        assert (tmp_path / f"worker_{index}" / "tensorboard" / "train").is_dir() == \
            (bool(tensorflow.tensorboard) and index == 0), "the chief writes summaries when TensorBoard is there"
        assert result.stdout.count(f"[worker:{index}] {NO_TENSORBOARD}") == (0 if tensorflow.tensorboard else 1)
    assert (tmp_path / "worker_0" / "model" / "model.keras").exists()
    # The default backup dir is beside the tasks' log dirs; BackupAndRestore deletes its backup
    # once fit() has finished.
    assert (tmp_path / "backup").is_dir() and not (tmp_path / "backup" / "chief").exists()


def saved_epoch(backup_dir):
    """The epoch of the chief's last backup: its CheckpointManager numbers saves from 1, one per epoch."""
    index = (backup_dir / "chief" / "checkpoint").read_text()
    return int(re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', index, re.M).group(1))


def trainer_pid(pod_process):
    """The trainer's host pid: the only child of tfboot (PID 1 of the pod)."""
    pids = children(pod_process.program_pid)
    assert len(pids) == 1, pids
    assert b"train_fit.py" in cmdline(pids[0])
    return pids[0]


def fit_job(tfboot, task_env, tmp_path, epochs, steps_per_epoch):
    """The environment and command of a two-worker train_fit.py job, logs and backup under tmp_path."""
    env = {**task_env, "TFBOOT_CLUSTER": "worker=2", "TFBOOT_LOG_ROOT": str(tmp_path / "logs"), "TFBOOT_STOP_GRACE": "10s"}
    command = [tfboot, "--", "python", *TRAIN_FIT, "--epochs", str(epochs), "--steps-per-epoch", str(steps_per_epoch),
               "--backup-dir", str(tmp_path / "backup")]
    return env, command


def two_worker_pods(net):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    return pods


@pytest.mark.root
def test_a_killed_worker_stops_the_job_and_the_restarted_job_resumes(tfboot, tensorflow, task_env, tmp_path):
    epochs, steps_per_epoch = 8, 40
    logs, backup = tmp_path / "logs", tmp_path / "backup"
    env, command = fit_job(tfboot, task_env, tmp_path, epochs, steps_per_epoch)
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = two_worker_pods(net)

        first = PodJob(net, tmp_path, "first")
        procs = [first.start(pod, command, env) for pod in pods]
        # The chief prints an epoch after its BackupAndRestore saved it; worker 1 may print first.
        first.wait_for(pods[0], f"epoch 2/{epochs} loss=", timeout=300)
        killed_at = time.monotonic()
        os.kill(trainer_pid(procs[1]), signal.SIGKILL)  # the trainer only: the pod's tfboot stays
        ended = first.finish(timeout=60)
        worker0, worker1 = ended["mnist-worker-0"], ended["mnist-worker-1"]
        assert worker1.code == 128 + signal.SIGKILL, worker1.text[-4000:]
        assert worker0.code == STOPPED_BY_JOB, worker0.text[-4000:]
        assert "stopping: worker:1 failed with signal SIGKILL (status 137)" in worker0.text
        # tfboot ends the job within seconds; TensorFlow alone would wait for its peer far longer.
        seconds_to_stop = max(worker0.at, worker1.at) - killed_at
        assert seconds_to_stop < 10, seconds_to_stop
        print(f"job stopped {seconds_to_stop:.1f}s after worker 1's trainer was killed")
        for text in (worker0.text, worker1.text):
            assert "TFBOOT_RESULT" not in text, "killed mid-training"
        saved = saved_epoch(backup)
        assert 2 <= saved < epochs

        # A restart where worker 1 does not see the backup would train out of step: refused by both.
        elsewhere = tmp_path / "not-shared"
        unshared = PodJob(net, tmp_path, "unshared")
        unshared.start(pods[0], command, env)
        unshared.start(pods[1], [*command[:-1], str(elsewhere)], env)
        refused = unshared.finish(timeout=300)
        codes = sorted(run.code for run in refused.values())
        assert codes in ([2, 2], [2, STOPPED_BY_JOB]), codes
        assert any(f"the workers found different backups (replica 0: epoch {saved}, replica 1: none): --backup-dir "
                   f"must be one directory shared by every task" in run.text for run in refused.values())
        assert saved_epoch(backup) == saved and not (elsewhere / "chief").exists()

        second = PodJob(net, tmp_path, "second")
        for pod in pods:
            second.start(pod, command, env)
        ended = second.finish(timeout=300)
        for index, pod in enumerate(pods):
            run = ended[pod.name]
            assert run.code == 0, run.text[-4000:]
            assert f"resuming at epoch {saved + 1}/{epochs} from the backup in {backup}" in run.text
            assert f"epoch {saved}/{epochs} loss=" not in run.text, "no epoch ran twice"
            assert f"epoch {epochs}/{epochs} loss=" in run.text
            assert json.loads((logs / f"worker_{index}" / "startup.json").read_text())["restarts"] == 2
        found = [results(ended[pod.name].text)[("worker", index)] for index, pod in enumerate(pods)]
        assert found[0]["weights_sha256"] == found[1]["weights_sha256"]
        for fields in found:
            assert fields["start_epoch"] == str(saved + 1)
            assert fields["steps"] == str(epochs * steps_per_epoch), "the optimizer's step count was restored"
        assert not (backup / "chief").exists(), "the finished job deleted its backup"


@pytest.mark.root
def test_with_max_restarts_a_killed_trainer_restarts_the_job_in_place_and_it_resumes(tfboot, tensorflow, task_env, tmp_path):
    epochs, steps_per_epoch = 6, 40
    logs, backup = tmp_path / "logs", tmp_path / "backup"
    env, command = fit_job(tfboot, task_env, tmp_path, epochs, steps_per_epoch)
    env["TFBOOT_MAX_RESTARTS"] = "1"
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = two_worker_pods(net)
        job = PodJob(net, tmp_path, "job")
        procs = [job.start(pod, command, env) for pod in pods]
        job.wait_for(pods[0], f"epoch 2/{epochs} loss=", timeout=300)  # backed up by the chief
        os.kill(trainer_pid(procs[1]), signal.SIGKILL)  # the trainer only: no pod restarts
        job.wait_for(pods[0], "resuming at epoch", timeout=120)
        saved = int(re.search(r"resuming at epoch (\d+)/", job.text(pods[0])).group(1)) - 1
        # Every trainer of the restarted job sees the job's count.
        for proc in procs:
            environ = open(f"/proc/{trainer_pid(proc)}/environ", "rb").read().split(b"\0")
            assert b"TFBOOT_RESTART_COUNT=1" in environ
        ended = job.finish(timeout=300)
    for index, pod in enumerate(pods):
        run = ended[pod.name]
        assert run.code == 0, run.text[-4000:]
        assert "restarting the job in place (restart 1 of 1): worker:1 failed with signal SIGKILL (status 137)" in run.text
        assert f"resuming at epoch {saved + 1}/{epochs} from the backup in {backup} (restart 1)" in run.text
        startup = json.loads((logs / f"worker_{index}" / "startup.json").read_text())
        assert startup["job"]["restarts_in_place"] == 1
        assert startup["history"][-1]["reason"] == "restarting"
    found = [results(ended[pod.name].text)[("worker", index)] for index, pod in enumerate(pods)]
    assert found[0]["weights_sha256"] == found[1]["weights_sha256"]
    assert 2 <= saved < epochs
    for fields in found:
        assert fields["start_epoch"] == str(saved + 1)
        assert fields["steps"] == str(epochs * steps_per_epoch), "the optimizer's step count was restored"
