"""Real multi-worker TensorFlow runs started by tfboot: on one machine and across namespace "hosts"."""

import json
import os
import re
import subprocess
import time

from harness.cluster import ClusterNetwork

from conftest import REPO_DIR

TRAIN = os.path.join(REPO_DIR, "examples", "train.py")
TRAIN_PS = os.path.join(REPO_DIR, "examples", "train_ps.py")
RESULT = re.compile(r"TFBOOT_RESULT task=(\w+):(\d+) (.*)")


def results(text):
    """{(type, index): {key: value}} from the examples' TFBOOT_RESULT lines."""
    found = {}
    for line in text.splitlines():
        match = RESULT.search(line)
        if match:
            fields = dict(item.split("=", 1) for item in match.group(3).split())
            found[(match.group(1), int(match.group(2)))] = fields
    return found


def test_local_two_workers_train_together(tfboot, python_with_tensorflow, task_env, tmp_path):
    result = subprocess.run([tfboot, "local", "--cluster", "worker=2", "--log-root", str(tmp_path), "--",
                             "python", TRAIN], env=task_env, capture_output=True, text=True, timeout=300)
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


def test_statefulset_pods_one_published_late(tfboot, python_with_tensorflow, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        net.publish(pods[0])
        env = {**task_env, "TFBOOT_CLUSTER": "worker=2", "TFBOOT_LOG_ROOT": str(tmp_path)}
        outputs = [open(tmp_path / f"pod{i}.out", "w+") for i in range(2)]
        procs = [net.run(pod, [tfboot, "--", "python", TRAIN], env=env, stdout=outputs[i], stderr=subprocess.STDOUT)
                 for i, pod in enumerate(pods)]
        time.sleep(6)
        assert all(proc.poll() is None for proc in procs), "both wait for worker-1's record"
        net.publish(pods[1], wait=False)
        for proc in procs:
            proc.wait(timeout=300)
        texts = []
        for out in outputs:
            out.seek(0)
            texts.append(out.read())
            out.close()
        for proc, text in zip(procs, texts):
            assert proc.returncode == 0, text[-4000:]
            assert "supervised as init" in text, "tfboot ran as PID 1"
        found = [results(text) for text in texts]
        assert found[0][("worker", 0)]["weights_sha256"] == found[1][("worker", 1)]["weights_sha256"]
        startup = json.loads((tmp_path / "worker_0" / "startup.json").read_text())
        late = startup["peers"][1]
        assert late["name"] == "mnist-worker-1.mnist.default.svc.cluster.local"
        assert late["seconds_to_resolve"] >= 5 and late["tries"] > 3
        config = json.loads((tmp_path / "worker_1" / "tf_config.json").read_text())
        assert config["cluster"]["worker"] == [f"mnist-worker-{i}.mnist.default.svc.cluster.local:2222" for i in range(2)]


def test_parameter_server_job_with_evaluator(tfboot, python_with_tensorflow, task_env, tmp_path):
    with ClusterNetwork(service="job", namespace="ml", cluster_domain="cluster.local") as net:
        names = ["job-chief-0", "job-ps-0", "job-worker-0", "job-worker-1", "job-evaluator-0"]
        pods = [net.add_pod(name) for name in names]
        for pod in pods:
            net.publish(pod)
        env = {**task_env, "TFBOOT_CLUSTER": "chief=1,ps=1,worker=2,evaluator=1", "TFBOOT_LOG_ROOT": str(tmp_path),
               "TFBOOT_PORT": "2222,ps=2223"}
        outputs = {name: open(tmp_path / f"{name}.out", "w+") for name in names}
        procs = {pod.name: net.run(pod, [tfboot, "--", "python", TRAIN_PS], env=env, stdout=outputs[pod.name],
                                   stderr=subprocess.STDOUT) for pod in pods}
        texts = {}
        for name, proc in procs.items():
            proc.wait(timeout=400)
            outputs[name].seek(0)
            texts[name] = outputs[name].read()
            outputs[name].close()
        for name, proc in procs.items():
            assert proc.returncode == 0, f"{name}: {texts[name][-4000:]}"
        chief = results(texts["job-chief-0"])[("chief", 0)]
        assert int(chief["steps"]) > 0
        assert float(chief["loss"]) < float(chief["init_loss"]), "the job trained"
        for name, task in [("job-ps-0", ("ps", 0)), ("job-worker-0", ("worker", 0)), ("job-worker-1", ("worker", 1))]:
            assert results(texts[name])[task]["status"] == "done"
        evaluator = json.loads((tmp_path / "evaluator_0" / "tf_config.json").read_text())
        assert "evaluator" not in evaluator["cluster"]
        assert evaluator["task"] == {"type": "evaluator", "index": 0}
        assert evaluator["cluster"]["ps"] == ["job-ps-0.job.ml.svc.cluster.local:2223"]
