"""indexed-job.yaml on a real cluster: each pod is the task of its JOB_COMPLETION_INDEX, the Job
completes, and its podFailurePolicy does with tfboot's exit codes what docs/deploying.md says:
2 and 6 fail the Job at once (FailJob), 200 (stopped because another task failed) is ignored,
any other failure (5, a task missing at the start timeout, among them) is counted in status.failed and the whole job retried, resuming from the
checkpoint directory; the failed pods' termination messages hold tfboot's reason (docs/observing.md).
Also applied: the file's NetworkPolicy from networkpolicy.yaml (accepted; this network plugin
enforces none) and control-secret.yaml with the manifest's secret lines turned on."""

import json
import re

import pytest

import manifests
from harness.kubernetes import DOMAIN
from paths import REPO_DIR
from workloads import completion_indexes, condition, pods_of, runs, terminated, tf_configs, wait_job_finished

pytestmark = pytest.mark.root

SELECTOR = "app.kubernetes.io/name=resnet"
DOCS_BLOCK = re.compile(r"<!-- tf_config: kubernetes/indexed-job\.yaml pod=(?P<pod>\S+) -->\s*```json\n(?P<json>.*?)```", re.S)


def indexed_job(k8s, name: str, tasks: int, **env: str) -> list[dict]:
    objects = manifests.for_cluster(manifests.load("indexed-job.yaml"), checkpoints=k8s.host_dir(name))
    manifests.resize_job(objects, tasks)
    manifests.set_env(objects, **env)
    return objects


def test_indexed_job_completes_with_each_pod_the_task_of_its_index(k8s):
    objects = manifests.for_cluster(manifests.load("indexed-job.yaml", control_secret=True),
                                    checkpoints=k8s.host_dir("indexed-complete"))
    objects += manifests.for_cluster(manifests.load("control-secret.yaml"), checkpoints="")
    objects += manifests.labelled(manifests.load("networkpolicy.yaml"), "resnet")
    tasks = manifests.workload(objects)["spec"]["completions"]
    assert tasks == 3
    k8s.apply(objects)

    job = wait_job_finished(k8s, "resnet")
    assert condition(job, "Complete"), job["status"]
    assert (job["status"].get("succeeded"), job["status"].get("failed", 0)) == (tasks, 0)
    pods = pods_of(k8s, SELECTOR)
    assert len(pods) == tasks
    peers = [f"resnet-{i}.resnet.default.svc.{DOMAIN}:2222" for i in range(tasks)]
    by_index = {}
    for name, pod in pods.items():
        index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        log = k8s.logs(name, "trainer")
        assert completion_indexes(log) == [str(index)]
        [run] = runs(log)
        assert (run["task"], run["pwd"]) == (f"worker:{index}", "/app")
        assert tf_configs(log) == [{"cluster": {"worker": peers}, "task": {"type": "worker", "index": index}}]
        assert terminated(pod)["exitCode"] == 0
        by_index[index] = log
    with open(f"{REPO_DIR}/docs/deploying.md") as f:
        [(pod, block)] = DOCS_BLOCK.findall(f.read())
    assert tf_configs(by_index[int(pod.rsplit("-", 1)[1])]) == [json.loads(block)]


@pytest.mark.parametrize("status", [2, 6])
def test_indexed_job_fails_at_once_when_a_task_exits_2_or_6(k8s, status):
    k8s.apply(indexed_job(k8s, f"indexed-failjob-{status}", 2, TRAIN_FAIL_ONCE="worker:1",
                          TRAIN_FAIL_STATUS=str(status), TRAIN_SECONDS="5"))

    job = wait_job_finished(k8s, "resnet")
    failed = condition(job, "Failed")
    assert failed and failed["reason"] == "PodFailurePolicy", job["status"]
    assert f"failed with exit code {status} matching FailJob rule" in failed["message"]
    exits = sorted(terminated(p)["exitCode"] for p in pods_of(k8s, SELECTOR).values() if terminated(p))
    assert status in exits and job["status"].get("succeeded", 0) == 0


@pytest.mark.parametrize("status", [3, 5])
def test_indexed_job_counts_a_failure_once_ignores_200_and_retries_the_job(k8s, status):
    k8s.apply(indexed_job(k8s, f"indexed-retry-{status}", 2, TRAIN_FAIL_ONCE="worker:1",
                          TRAIN_FAIL_STATUS=str(status), TRAIN_SECONDS="5"))

    job = wait_job_finished(k8s, "resnet")
    assert condition(job, "Complete"), job["status"]
    # worker:1 failed with 3 or 5 (counted), worker:0 was stopped with 200 (ignored); both were
    # replaced and the job ran again, worker:1 resuming past its failure from /checkpoints.
    assert (job["status"].get("failed"), job["status"].get("succeeded")) == (1, 2)
    pods = pods_of(k8s, SELECTOR)
    ended = sorted((int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]),
                    terminated(p)["exitCode"], terminated(p).get("message", "")) for p in pods.values())
    # The termination message: tfboot's closing line, with its newline.
    assert ended == [
        (0, 0, ""),
        (0, 200, f"exiting 200: stopping: worker:1 failed with status {status}\n"),
        (1, 0, ""),
        (1, status, f"exiting {status}: the command failed\n"),
    ]


# The trainer of the non-root test: who it runs as, whether the root file system takes a file, and
# what tfboot wrote to the task's log dir, before the image's train.sh.
NON_ROOT_PROBE = ('echo "probe: uid=$(id -u) root=$(touch /probe 2>/dev/null && echo writable || echo read-only)'
                  ' tmp=$(touch /tmp/probe && echo writable) logs=$(ls "$TFBOOT_LOG_DIR" | tr "\\n" " ")"; exec sh train.sh')


def test_the_non_root_variant_runs_as_a_user_on_a_read_only_root(k8s):
    """indexed-job.yaml with its "non-root (optional)" lines on: tfboot writes its log dir to the
    /logs volume (not exit 4), the trainer runs as user 1000 with only /logs and /tmp writable,
    and the Job completes."""
    objects = manifests.for_cluster(manifests.load("indexed-job.yaml", non_root=True),
                                    checkpoints=k8s.host_dir("indexed-non-root"))
    manifests.resize_job(objects, 2)
    manifests.trainer(objects)["args"] = ["sh", "-c", NON_ROOT_PROBE]
    k8s.apply(objects)

    job = wait_job_finished(k8s, "resnet")
    assert condition(job, "Complete"), job["status"]
    pods = pods_of(k8s, SELECTOR)
    assert len(pods) == 2
    for name in pods:
        log = k8s.logs(name, "trainer")
        [probe] = re.findall(r"^probe: (.*)$", log, re.M)
        assert re.fullmatch(r"uid=1000 root=read-only tmp=writable logs=.*\bstartup\.json\b.*", probe), log
        assert len(runs(log)) == 1, log
