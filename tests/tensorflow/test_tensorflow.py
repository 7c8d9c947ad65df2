"""Real multi-worker TensorFlow runs started by tfboot: on one machine and across namespace "hosts"."""

import json
import subprocess
import time

import pytest

from harness.cluster import ClusterNetwork

from harness.pod_job import PodJob
from jobs import TRAIN, TRAIN_PS, results

NO_TENSORBOARD = "TensorBoard is not installed: no summaries"


def test_local_two_workers_train_together(tfboot, tensorflow, task_env, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "worker=2", "--log-root", str(tmp_path), "--",
                             "python", *TRAIN], env=task_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = results(result.stdout)
    assert set(found) == {("worker", 0), ("worker", 1)}
    assert found[("worker", 0)]["weights_sha256"] == found[("worker", 1)]["weights_sha256"]
    assert found[("worker", 0)]["weights_sha256"] != found[("worker", 0)]["init_sha256"], "the model trained"
    assert "[worker:1] TFBOOT_RESULT" in result.stdout
    assert (tmp_path / "worker_0" / "model" / "model.keras").exists(), "the chief saved the final model"
    assert not (tmp_path / "worker_1" / "model").exists()
    for index in (0, 1):
        assert json.loads((tmp_path / f"worker_{index}" / "startup.json").read_text())["task"]["index"] == index
        # Summaries where TensorBoard is installed; without it one line says so and training goes on.
        assert (tmp_path / f"worker_{index}" / "tensorboard").is_dir() == bool(tensorflow.tensorboard)
        assert result.stdout.count(f"[worker:{index}] {NO_TENSORBOARD}") == \
            (0 if tensorflow.tensorboard else 1)


@pytest.mark.root
def test_statefulset_pods_one_published_late(tfboot, tensorflow, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        net.publish(pods[0])
        env = {**task_env, "TFBOOT_CLUSTER": "worker=2", "TFBOOT_LOG_ROOT": str(tmp_path)}
        job = PodJob(net, tmp_path, "sts")
        procs = [job.start(pod, [tfboot, "--", "python", *TRAIN], env) for pod in pods]
        time.sleep(6)
        assert all(proc.poll() is None for proc in procs), "both wait for worker-1's record"
        net.publish(pods[1], wait=False)
        ended = job.finish(timeout=300)
        for pod in pods:
            assert ended[pod.name].code == 0, ended[pod.name].text[-4000:]
            assert "supervised as init" in ended[pod.name].text, "tfboot ran as PID 1"
        found = [results(ended[pod.name].text) for pod in pods]
        assert found[0][("worker", 0)]["weights_sha256"] == found[1][("worker", 1)]["weights_sha256"]
        # worker-0, the coordinator, resolved worker-1's name once every task was present, and
        # waited for its record (docs/supervision.md: DNS behind the barrier); worker-1 learned it from the
        # start (without the table of addresses, which only --address ip asks for).
        for index in range(2):
            startup = json.loads((tmp_path / f"worker_{index}" / "startup.json").read_text())
            assert startup["job"]["names_resolved_by_coordinator"] is True
            late = startup["peers"][1]
            assert late["name"] == "mnist-worker-1.mnist.default.svc.cluster.local"
            assert late["resolved"] is True
            assert late["addresses"] == ([pods[1].ip] if index == 0 else [])
        config = json.loads((tmp_path / "worker_1" / "tf_config.json").read_text())
        assert config["cluster"]["worker"] == [f"mnist-worker-{i}.mnist.default.svc.cluster.local:2222" for i in range(2)]


@pytest.mark.root
def test_parameter_server_job_ends_when_the_chief_is_done(tfboot, tensorflow, task_env, tmp_path):
    """ps and workers only server.join(): the chief's exit 0 ends the job, and every tfboot exits 0."""
    with ClusterNetwork(service="job", namespace="ml", cluster_domain="cluster.local") as net:
        names = ["job-chief-0", "job-ps-0", "job-worker-0", "job-worker-1", "job-evaluator-0"]
        pods = {name: net.add_pod(name) for name in names}
        for pod in pods.values():
            net.publish(pod)
        env = {**task_env, "TFBOOT_CLUSTER": "chief=1,ps=1,worker=2,evaluator=1", "TFBOOT_LOG_ROOT": str(tmp_path),
               "TFBOOT_PORT": "2222,ps=2223"}
        job = PodJob(net, tmp_path, "ps")
        for pod in pods.values():
            job.start(pod, [tfboot, "--", "python", *TRAIN_PS], env)
        ended = job.finish(timeout=400)
        for name in names:
            assert ended[name].code == 0, f"{name}: {ended[name].text[-4000:]}"
        chief = results(ended["job-chief-0"].text)[("chief", 0)]
        assert int(chief["steps"]) > 0
        assert float(chief["loss"]) < float(chief["init_loss"]), "the job trained"
        for name in ["job-ps-0", "job-worker-0", "job-worker-1"]:
            assert "until tfboot ends the job" in ended[name].text, "the server was up"
            assert "the job is done: chief:0 finished" in ended[name].text
            assert results(ended[name].text) == {}, "a server never ends by itself"
            # 5 s to end by themselves, then SIGTERM: never the hour TensorFlow would wait.
            assert ended[name].at - ended["job-chief-0"].at < 15
        assert results(ended["job-evaluator-0"].text) == {("evaluator", 0): {"status": "idle"}}
        evaluator = json.loads((tmp_path / "evaluator_0" / "tf_config.json").read_text())
        assert "evaluator" not in evaluator["cluster"]
        assert evaluator["task"] == {"type": "evaluator", "index": 0}
        assert evaluator["cluster"]["ps"] == ["job-ps-0.job.ml.svc.cluster.local:2223"]
