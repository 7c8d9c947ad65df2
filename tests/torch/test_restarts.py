"""examples/train_torch.py restarted in place by tfboot --max-restarts in two pods: a rank killed
mid-training, every rank stopped and started again without a pod restart, resuming from rank 0's
checkpoint with the job's restart count (docs/supervision.md: Job supervision, Restarts in place)."""

import json
import os
import re
import signal

import pytest

from harness.cluster import ClusterNetwork
from harness.processes import children, cmdline
from paths import REPO_DIR

from harness.pod_job import PodJob

pytestmark = pytest.mark.root

# examples/train_torch.py, run by run_example.py, which ends it with a TFBOOT_RESULT line.
TRAIN_TORCH = [os.path.join(REPO_DIR, "tests", "torch", "run_example.py"), os.path.join(REPO_DIR, "examples", "train_torch.py")]
RESULT = re.compile(r"TFBOOT_RESULT task=worker:(\d) rank=(\d) world_size=2 resumed_after_epoch=(\d+) loss=\S+ "
                    r"weights_sha256=([0-9a-f]{64})")


def rank_pid(pod_process):
    """The rank's host pid: the only child of tfboot (PID 1 of the pod)."""
    pids = children(pod_process.program_pid)
    assert len(pids) == 1, pids
    assert b"train_torch.py" in cmdline(pids[0])
    return pids[0]


def test_a_killed_rank_restarts_the_job_in_place_and_every_rank_resumes(tfboot, task_env, tmp_path):
    epochs = 40
    checkpoint = tmp_path / "checkpoint"
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        for pod in pods:
            net.publish(pod)
        job = PodJob(net, tmp_path, "job")
        procs = [job.start(pod, [tfboot, "--framework", "pytorch", "--cluster", "worker=2", "--wait", "1m",
                                 "--stop-grace", "10s", "--max-restarts", "1", "--log-root", str(tmp_path / "logs"), "--",
                                 "python", *TRAIN_TORCH, "--epochs", str(epochs), "--checkpoint-dir", str(checkpoint)],
                           task_env) for pod in pods]
        job.wait_for(pods[0], f"epoch 3/{epochs} loss=", timeout=180)
        os.kill(rank_pid(procs[1]), signal.SIGKILL)
        job.wait_for(pods[0], "[train_torch.py] resumed from", timeout=120)
        for proc in procs:
            environ = open(f"/proc/{rank_pid(proc)}/environ", "rb").read().split(b"\0")
            assert b"TORCHELASTIC_RESTART_COUNT=1" in environ and b"TORCHELASTIC_MAX_RESTARTS=1" in environ
        ended = job.finish(timeout=300)
    texts = [ended[pod.name].text for pod in pods]
    assert [ended[pod.name].code for pod in pods] == [0, 0], [text[-3000:] for text in texts]
    resumed = int(re.search(r"resumed from \S+ after epoch (\d+) \(restart 1\)", texts[0]).group(1))
    assert 3 <= resumed < epochs
    found = [RESULT.search(text) for text in texts]
    assert all(found), [text[-3000:] for text in texts]
    assert [int(match.group(3)) for match in found] == [resumed, resumed]
    assert found[0].group(4) == found[1].group(4), "every rank ends with the same weights"
    for index, text in enumerate(texts):
        assert "restarting the job in place (restart 1 of 1): worker:1 failed with signal SIGKILL (status 137)" in text
        startup = json.loads((tmp_path / "logs" / f"worker_{index}" / "startup.json").read_text())
        assert startup["job"]["restarts_in_place"] == 1
