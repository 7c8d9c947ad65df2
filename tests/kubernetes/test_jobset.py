"""jobset.yaml on a real cluster, with the JobSet controller (sigs.k8s.io/jobset) running beside
it (tests/harness/kubernetes.py): the controller creates the Service bert and the Jobs bert-chief-0
and bert-worker-0, whose pods bert-chief-0-0, bert-worker-0-0 and bert-worker-0-1 are the tasks
their names say (TFBOOT_TASK_TYPE, JOB_COMPLETION_INDEX, TFBOOT_PEER_TEMPLATE), get the TF_CONFIG
docs/deploying.md shows, and end with the chief: every pod exits 0 and the JobSet completes.
Also applied: the file's NetworkPolicy from networkpolicy.yaml (accepted; this network plugin
enforces none)."""

import pytest

import manifests
from harness.kubernetes import DOMAIN
from workloads import completion_indexes, documented_tf_config, pods_of, runs, terminated, tf_configs, wait_jobset_finished

pytestmark = pytest.mark.root

SELECTOR = "jobset.sigs.k8s.io/jobset-name=bert"


def test_jobset_completes_with_each_pod_the_task_of_its_name(k8s):
    objects = manifests.for_cluster(manifests.load("jobset.yaml"), checkpoints=k8s.host_dir("jobset"))
    objects += manifests.labelled(manifests.load("networkpolicy.yaml"), "bert")
    assert [o["kind"] for o in objects] == ["JobSet", "NetworkPolicy"]
    k8s.apply(objects)

    jobset = wait_jobset_finished(k8s, "bert")
    conditions = {c["type"]: c["status"] for c in jobset["status"]["conditions"]}
    assert conditions.get("Completed") == "True", jobset["status"]
    assert jobset["status"].get("restarts", 0) == 0

    service = k8s.get("service", "bert")
    assert (service["spec"]["clusterIP"], service["spec"]["publishNotReadyAddresses"]) == ("None", True)
    pods = pods_of(k8s, SELECTOR)
    names = {"bert-chief-0-0": ("chief", 0), "bert-worker-0-0": ("worker", 0), "bert-worker-0-1": ("worker", 1)}
    assert sorted(pod["spec"]["hostname"] for pod in pods.values()) == sorted(names)
    cluster = {"chief": [f"bert-chief-0-0.bert.default.svc.{DOMAIN}:2222"],
               "worker": [f"bert-worker-0-{i}.bert.default.svc.{DOMAIN}:2222" for i in range(2)]}
    logs = {}
    for pod in pods.values():
        hostname = pod["spec"]["hostname"]
        kind, index = names[hostname]
        assert pod["spec"]["subdomain"] == "bert"
        log = k8s.logs(pod["metadata"]["name"], "trainer")
        [run] = runs(log)
        assert (run["task"], run["pwd"]) == (f"{kind}:{index}", "/app")
        assert completion_indexes(log) == [str(index)]
        assert tf_configs(log) == [{"cluster": cluster, "task": {"type": kind, "index": index}}]
        assert terminated(pod)["exitCode"] == 0
        logs[hostname] = log
    pod, documented = documented_tf_config("jobset.yaml")
    assert tf_configs(logs[pod]) == [documented]
