"""statefulset.yaml and parameter-server.yaml on a real cluster.

statefulset.yaml: three pods of a StatefulSet behind the headless Service with
publishNotReadyAddresses, as README's step 2 deploys them. Each pod is the task its name says,
waits for its peers' records (published by the real EndpointSlice controller and served by
CoreDNS's kubernetes plugin), passes the start barrier with them, gets the TF_CONFIG
docs/deploying.md shows, and idles once the job is done (TFBOOT_IDLE_WHEN_DONE), its pod Running
and never restarted. A pod deleted mid-job stops every task with it (exit 143, --stop-together),
the StatefulSet recreates it, and the job runs again with it to its end.

parameter-server.yaml: a chief, two parameter servers and two workers, three StatefulSets behind
one Service, each pod the task its name says, with the TF_CONFIG docs/deploying.md shows."""

import json

import pytest

import manifests
from harness.kubernetes import DOMAIN
from workloads import documented_tf_config, pods_of, runs, tf_configs, trainer_status, wait_logs

pytestmark = pytest.mark.root



def test_statefulset_pods_are_the_tasks_their_names_say_and_start_together(k8s):
    objects = manifests.for_cluster(manifests.load("statefulset.yaml"), checkpoints=k8s.host_dir("statefulset"))
    replicas = manifests.workload(objects)["spec"]["replicas"]
    assert replicas == 3 and manifests.env_value(objects, "TFBOOT_CLUSTER") == "worker=3"
    k8s.apply(objects)

    names = [f"mnist-worker-{i}" for i in range(replicas)]
    logs = wait_logs(k8s, names, "train: done", timeout=120)
    peers = [f"{name}.mnist.default.svc.{DOMAIN}:2222" for name in names]
    for index, name in enumerate(names):
        [run] = runs(logs[name])
        assert (run["task"], run["restart"], run["pwd"]) == (f"worker:{index}", 0, "/app")
        assert tf_configs(logs[name]) == [{"cluster": {"worker": peers}, "task": {"type": "worker", "index": index}}]
    pod, documented = documented_tf_config("statefulset.yaml")
    assert tf_configs(logs[pod]) == [documented]

    # The coordinator checked every task's name against the address its task reported: the
    # records CoreDNS served are the pods' own addresses.
    coordinator = k8s.kubectl("exec", "mnist-worker-0", "-c", "trainer", "--", "cat",
                              "/logs/worker_0/startup.json").stdout
    startup = json.loads(coordinator)
    assert startup["job"]["names_resolved_by_coordinator"] is True
    pods = pods_of(k8s, "app.kubernetes.io/name=mnist")
    addresses = {p["status"]["podIP"] for p in pods.values()}
    resolved = {a for peer in startup["peers"] for a in peer["addresses"]}
    assert resolved == addresses

    # The job is done: every pod idles, Running, never restarted.
    k8s.wait_for("every task idle", lambda: all(
        "staying idle" in k8s.logs(name, "trainer") for name in names), timeout=30)
    pods = pods_of(k8s, "app.kubernetes.io/name=mnist")
    assert sorted(pods) == names
    for pod in pods.values():
        status = trainer_status(pod)
        assert pod["status"]["phase"] == "Running" and status["restartCount"] == 0


def test_parameter_server_pods_are_chief_ps_and_workers_as_their_names_say(k8s):
    objects = manifests.for_cluster(manifests.load("parameter-server.yaml"), checkpoints=k8s.host_dir("recsys"))
    for statefulset in (o for o in objects if o["kind"] == "StatefulSet"):
        [container] = statefulset["spec"]["template"]["spec"]["containers"]
        assert container["args"] == ["python", "train_ps.py"]
        container["args"] = ["sh", "train.sh"]   # no TensorFlow in the tier's image
    k8s.apply(objects)

    tasks = {"chief": 1, "ps": 2, "worker": 2}
    names = [f"recsys-{kind}-{i}" for kind, count in tasks.items() for i in range(count)]
    logs = wait_logs(k8s, names, "train: done", timeout=120)
    for name in names:
        kind, index = name.split("-")[1:]
        [run] = runs(logs[name])
        assert run["task"] == f"{kind}:{index}"
        [tf_config] = tf_configs(logs[name])
        assert tf_config["task"] == {"type": kind, "index": int(index)}
    pod, documented = documented_tf_config("parameter-server.yaml")
    assert tf_configs(logs[pod]) == [documented]


def test_a_pod_deleted_mid_job_stops_every_task_and_the_job_runs_again_with_its_replacement(k8s):
    """`kubectl delete pod` of a worker mid-job (with its grace): its tfboot passes SIGTERM on and,
    with --stop-together (the default), every task's trainer is stopped too and every tfboot exits
    143 (docs/supervision.md, "Preemption reaches every rank"); the StatefulSet restarts the other
    pods' containers and recreates the deleted pod, which rejoins: a fresh start barrier, the same
    TF_CONFIG, the job done and every pod idle (TFBOOT_IDLE_WHEN_DONE)."""
    objects = manifests.for_cluster(manifests.load("statefulset.yaml"), checkpoints=k8s.host_dir("statefulset-delete"))
    manifests.set_env(objects, TRAIN_SECONDS="10")
    k8s.apply(objects)
    names = [f"mnist-worker-{i}" for i in range(3)]
    first = wait_logs(k8s, names, "train: task=", timeout=120)
    uids = {name: pod["metadata"]["uid"] for name, pod in pods_of(k8s, "app.kubernetes.io/name=mnist").items()}
    k8s.kubectl("delete", "pod", "mnist-worker-1", "--wait=false")
    assert not any("train: done" in log for log in first.values())

    def replaced():
        pods = pods_of(k8s, "app.kubernetes.io/name=mnist")
        pod = pods.get("mnist-worker-1")
        return pods if pod and pod["metadata"]["uid"] != uids["mnist-worker-1"] else None
    k8s.wait_for("mnist-worker-1 recreated", replaced, timeout=120)
    logs = wait_logs(k8s, names, "staying idle", timeout=120)

    pods = pods_of(k8s, "app.kubernetes.io/name=mnist")
    stopped = "exiting 143: worker:1 was asked to stop (SIGTERM): every task stops together\n"
    for index, name in enumerate(names):
        pod = pods[name]
        status = trainer_status(pod)
        assert pod["status"]["phase"] == "Running"
        if name == "mnist-worker-1":   # the replacement: a new pod, its first container
            assert pod["metadata"]["uid"] != uids[name] and status["restartCount"] == 0
        else:                          # stopped with the job, restarted in the same pod
            assert pod["metadata"]["uid"] == uids[name] and status["restartCount"] == 1
            last = status["lastState"]["terminated"]
            assert (last["exitCode"], last["message"]) == (143, stopped)
            previous = k8s.kubectl("logs", name, "-c", "trainer", "--previous").stdout
            assert "train: done" not in previous and tf_configs(previous) == tf_configs(first[name])
        # The job ran again from a fresh start barrier, and ran to its end this time.
        [run] = runs(logs[name])
        assert (run["task"], run["restart"]) == (f"worker:{index}", 0)
        assert "train: done" in logs[name]
        assert tf_configs(logs[name]) == tf_configs(first[name])

    # The coordinator checked the replacement's name against its new address.
    startup = json.loads(k8s.kubectl("exec", "mnist-worker-0", "-c", "trainer", "--", "cat",
                                     "/logs/worker_0/startup.json").stdout)
    assert startup["job"]["names_resolved_by_coordinator"] is True
    resolved = {a for peer in startup["peers"] for a in peer["addresses"]}
    assert resolved == {p["status"]["podIP"] for p in pods.values()}
