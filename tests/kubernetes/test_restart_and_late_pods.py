"""Job supervision on a real cluster, on indexed-job.yaml: a restart in place (--max-restarts)
keeps the pods (same UIDs, restartCount 0) and runs the image's command again in its WORKDIR;
a pod whose container starts late (an init container that sleeps, as a slow image pull would)
is waited for, and every task's command starts together with it (docs/supervision.md)."""

import pytest

import manifests
from images import TRAINER_IMAGE
from workloads import condition, pods_of, runs, timestamp, trainer_status, wait_job_finished

pytestmark = pytest.mark.root

SELECTOR = "app.kubernetes.io/name=resnet"
LATE_SECONDS = 10


def test_restart_in_place_keeps_the_pods_and_runs_the_command_again_in_workdir(k8s):
    objects = manifests.for_cluster(manifests.load("indexed-job.yaml"), checkpoints=k8s.host_dir("restart"))
    manifests.resize_job(objects, 2)
    manifests.set_env(objects, TFBOOT_MAX_RESTARTS="1", TRAIN_FAIL_ONCE="worker:1", TRAIN_SECONDS="5")
    k8s.apply(objects)
    first = k8s.wait_for("2 pods of Job resnet", lambda: (lambda p: p if len(p) == 2 else None)(
        pods_of(k8s, SELECTOR)), timeout=60)
    uids = {name: pod["metadata"]["uid"] for name, pod in first.items()}

    job = wait_job_finished(k8s, "resnet")
    pods = pods_of(k8s, SELECTOR)
    assert {name: pod["metadata"]["uid"] for name, pod in pods.items()} == uids
    for name, pod in pods.items():
        assert trainer_status(pod)["restartCount"] == 0
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        # Both runs of the image's CMD (sh train.sh, relative to WORKDIR /app), one per restart.
        assert [(r["task"], r["restart"], r["pwd"]) for r in runs(k8s.logs(name, "trainer"))] == [
            (f"worker:{index}", 0, "/app"), (f"worker:{index}", 1, "/app")]
    assert condition(job, "Complete"), job["status"]
    assert job["status"].get("failed", 0) == 0


def test_a_late_pod_is_waited_for_and_every_command_starts_with_it(k8s):
    objects = manifests.for_cluster(manifests.load("indexed-job.yaml"), checkpoints=k8s.host_dir("late"))
    tasks = manifests.workload(objects)["spec"]["completions"]
    late = f"resnet-{tasks - 1}"
    spec = manifests.workload(objects)["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "slow-pull", "image": TRAINER_IMAGE, "imagePullPolicy": "Never",
                               "command": ["sh", "-c", f'[ "$(hostname)" != {late} ] || sleep {LATE_SECONDS}']}]
    k8s.apply(objects)

    job = wait_job_finished(k8s, "resnet")
    assert condition(job, "Complete"), job["status"]
    pods = pods_of(k8s, SELECTOR)
    started = {}   # hostname -> (the trainer container's start, its command's start), Unix seconds
    for name, pod in pods.items():
        [run] = runs(k8s.logs(name, "trainer"))
        container = trainer_status(pod)["state"]["terminated"]["startedAt"]
        started[pod["spec"]["hostname"]] = (timestamp(container), run["started"])
    early = [host for host in started if host != late]
    assert all(started[late][0] - started[host][0] >= LATE_SECONDS - 2 for host in early), started
    commands = [command for _, command in started.values()]
    assert max(commands) - min(commands) <= 2, started
    assert min(commands) >= started[late][0], started
