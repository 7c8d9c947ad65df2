"""The deployment examples in examples/: the Kubernetes manifests pass the API schemas (strict: no
unknown field) and deploy the way tfboot needs, the compose files pass `docker compose config`, and
in every pod of every example tfboot prints exactly the TF_CONFIG that examples/README.md shows.

Each pod runs in a pod of the namespace network (tests/harness/netns.py) with the hostname, the
kubelet's /etc/hosts and resolv.conf (or Docker's), the environment and the args the example gives
it, and only the DNS records the example's Service publishes before the pods are Ready."""

import copy
import json
import os
import re
import shutil
import subprocess

import pytest

try:
    import kubernetes_validate
    import yaml
except ImportError as e:
    pytest.fail(f"{e.name} is not installed: run scripts/setup-containers", pytrace=False)

from harness.cluster import ClusterNetwork
from workloads import IMAGE_CMD, Pod, compose_containers, kubernetes_pods, tfjob_pods

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES_DIR = os.path.join(REPO_DIR, "examples")
README = os.path.join(EXAMPLES_DIR, "README.md")
KUBERNETES_FILES = sorted(f"kubernetes/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "kubernetes")) if f.endswith(".yaml"))
COMPOSE_FILES = sorted(f"compose/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "compose")) if f.endswith(".yaml"))
COMPOSE_PROJECT = "mnist"       # `docker compose -p mnist ...`, as examples/README.md says
TFJOB = "tfjob"                 # the README's operator example (no file: the operator writes TF_CONFIG)
# An old Kubernetes still in use (everything the examples rely on is older) and the newest
# release the validator knows.
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

# The ```json block right after "<!-- tf_config: <example> pod=<pod> -->" in examples/README.md
README_BLOCK = re.compile(r"<!-- tf_config: (?P<example>\S+) pod=(?P<pod>\S+) -->\s*```json\n(?P<json>.*?)```", re.S)

JOBSET_SPEC_FIELDS = {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
                      "coordinator", "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies"}
JOBSET_REPLICATED_JOB_FIELDS = {"name", "groupName", "template", "replicas", "dependsOn"}
JOBSET_NETWORK_FIELDS = {"enableDNSHostnames": bool, "subdomain": str, "publishNotReadyAddresses": bool}
JOBSET_FAILURE_POLICY_FIELDS = {"maxRestarts", "restartStrategy", "rules"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def ordered(text: str):
    """JSON with objects as lists of pairs, so that == also compares the order of keys."""
    return json.loads(text, object_pairs_hook=list)


def readme_blocks() -> dict[str, tuple[str, str]]:
    with open(README) as f:
        text = f.read()
    blocks = {}
    for m in README_BLOCK.finditer(text):
        assert m["example"] not in blocks, f"examples/README.md: two TF_CONFIG blocks for {m['example']}"
        blocks[m["example"]] = (m["pod"], m["json"])
    return blocks


def load_manifest(name: str) -> list[dict]:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    pytest.fail("neither docker-compose nor `docker compose` is installed: run scripts/setup-containers")


def compose_config(name: str) -> dict:
    cp = subprocess.run([*compose_command(), "-p", COMPOSE_PROJECT, "-f", os.path.join(EXAMPLES_DIR, name), "config"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, f"compose config {name}:\n{cp.stderr}"
    return yaml.safe_load(cp.stdout)


# --------------------------------------------------------------------------------------------
# schemas


def validate(doc: dict, where: str) -> None:
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = "/".join(str(p) for p in e.path)
            pytest.fail(f"{where}: Kubernetes {version} schema: {path}: {e.message}")


def check_jobset(doc: dict, where: str) -> None:
    """JobSet has no schema in the validator: its own fields by hand (jobset.x-k8s.io/v1alpha2),
    each replicated Job's template against batch/v1 Job."""
    assert doc["apiVersion"] == "jobset.x-k8s.io/v1alpha2", where
    assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}, where
    name = doc["metadata"]["name"]
    assert DNS_LABEL.match(name), f"{where}: metadata.name"
    spec = doc["spec"]
    assert set(spec) <= JOBSET_SPEC_FIELDS, f"{where}: unknown spec fields {set(spec) - JOBSET_SPEC_FIELDS}"
    network = spec.get("network", {})
    for key, value in network.items():
        assert isinstance(value, JOBSET_NETWORK_FIELDS.get(key, type(None))), f"{where}: spec.network.{key}"
    if "subdomain" in network:
        assert DNS_LABEL.match(network["subdomain"]), f"{where}: spec.network.subdomain"
    names = [job["name"] for job in spec["replicatedJobs"]]
    assert len(names) == len(set(names)), f"{where}: replicatedJobs names repeat"
    if "successPolicy" in spec:
        policy = spec["successPolicy"]
        assert set(policy) <= {"operator", "targetReplicatedJobs"} and policy["operator"] in ("All", "Any"), where
        assert set(policy.get("targetReplicatedJobs", [])) <= set(names), where
    if "failurePolicy" in spec:
        policy = spec["failurePolicy"]
        assert set(policy) <= JOBSET_FAILURE_POLICY_FIELDS, f"{where}: spec.failurePolicy"
        assert isinstance(policy.get("maxRestarts", 0), int) and policy.get("maxRestarts", 0) >= 0, where
    for job in spec["replicatedJobs"]:
        job_where = f"{where}: replicatedJobs[{job['name']}]"
        assert set(job) <= JOBSET_REPLICATED_JOB_FIELDS, f"{job_where}: unknown fields {set(job) - JOBSET_REPLICATED_JOB_FIELDS}"
        assert DNS_LABEL.match(job["name"]), job_where
        assert isinstance(job.get("replicas", 1), int) and job.get("replicas", 1) >= 1, job_where
        assert set(job["template"]) <= {"metadata", "spec"}, job_where
        validate({"apiVersion": "batch/v1", "kind": "Job",
                  "metadata": {**job["template"].get("metadata", {}), "name": f"{name}-{job['name']}-0"},
                  "spec": job["template"]["spec"]}, job_where)


@pytest.mark.parametrize("name", KUBERNETES_FILES)
def test_manifest_passes_the_kubernetes_schemas(name):
    docs = load_manifest(name)
    assert docs, name
    for doc in docs:
        where = f"{name}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        if doc.get("kind") == "JobSet":
            check_jobset(doc, where)
        else:
            validate(doc, where)


def test_schema_check_rejects_an_unknown_field():
    doc = copy.deepcopy(load_manifest("kubernetes/statefulset.yaml")[1])
    doc["spec"]["template"]["spec"]["containers"][0]["enviroment"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[0], strict=True)


@pytest.mark.parametrize("name", KUBERNETES_FILES)
def test_manifest_deploys_the_way_tfboot_needs(name):
    docs = load_manifest(name)
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for service in services.values():
        where = f"{name}: Service {service['metadata']['name']}"
        assert service["spec"]["clusterIP"] == "None", f"{where}: must be headless (one record per pod)"
        assert service["spec"]["publishNotReadyAddresses"] is True, f"{where}: records must exist before Ready"
        assert all(port.get("name") for port in service["spec"]["ports"]), f"{where}: ports must be named"
    for doc in docs:
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        if doc["kind"] == "StatefulSet":
            spec = doc["spec"]
            assert spec.get("podManagementPolicy") == "Parallel", f"{where}: OrderedReady deadlocks (README)"
            labels = spec["template"]["metadata"]["labels"]
            assert spec["selector"]["matchLabels"].items() <= labels.items(), where
            assert spec["serviceName"] in services, f"{where}: serviceName names no Service in the file"
            assert services[spec["serviceName"]]["spec"]["selector"].items() <= labels.items(), \
                f"{where}: its Service does not select its pods"
        if doc["kind"] == "Job":
            spec = doc["spec"]
            assert spec["completionMode"] == "Indexed", where
            assert spec["completions"] == spec["parallelism"], f"{where}: every task must run at once"
            subdomain = spec["template"]["spec"].get("subdomain")
            assert subdomain in services, f"{where}: subdomain names no Service in the file"
        if doc["kind"] == "JobSet":
            network = doc["spec"]["network"]
            assert network.get("enableDNSHostnames") is True, where
            assert network.get("publishNotReadyAddresses", True) is True, where
            for job in doc["spec"]["replicatedJobs"]:
                spec = job["template"]["spec"]
                assert spec.get("completions", 1) == spec.get("parallelism", 1), f"{where}: every task must run at once"
    for pod in kubernetes_pods(docs):
        assert pod.args[:1] in (["python"], ["python3"]), f"{name}: pod {pod.name}: args {pod.args}"


def test_kubernetes_model_publishes_records_only_with_publish_not_ready_addresses():
    docs = load_manifest("kubernetes/statefulset.yaml")
    assert all(pod.dns_names for pod in kubernetes_pods(docs))
    docs[0]["spec"]["publishNotReadyAddresses"] = False
    assert not any(pod.dns_names for pod in kubernetes_pods(docs))


@pytest.mark.parametrize("name", KUBERNETES_FILES)
def test_containers_keep_the_image_entrypoint(name):
    for doc in load_manifest(name):
        templates = []
        if doc["kind"] in ("StatefulSet", "Job"):
            templates.append(doc["spec"]["template"])
        if doc["kind"] == "JobSet":
            templates += [job["template"]["spec"]["template"] for job in doc["spec"]["replicatedJobs"]]
        for template in templates:
            for container in template["spec"]["containers"]:
                assert "command" not in container, f"{name}: `command:` would replace tfboot, the image's ENTRYPOINT"


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_passes_compose_config(name):
    config = compose_config(name)
    assert config["services"], name
    for service_name, service in config["services"].items():
        assert "entrypoint" not in service, f"{name}: {service_name}: entrypoint would replace tfboot"
        assert "TFBOOT_CLUSTER" in service.get("environment", {}), f"{name}: {service_name}"


# --------------------------------------------------------------------------------------------
# TF_CONFIG in every pod


def test_every_example_has_its_tf_config_in_the_readme():
    assert set(readme_blocks()) == {*KUBERNETES_FILES, *COMPOSE_FILES, TFJOB}


def run_tfboot_in_pods(tfboot: str, pods: list[Pod]) -> dict[str, tuple[int, str, str]]:
    """tfboot --print (with its DNS wait) in a pod of the namespace network for each example pod."""
    with ClusterNetwork(service="", namespace=pods[0].namespace or "default", cluster_domain="cluster.local") as net:
        harness_pods = {}
        for pod in pods:
            resolv = f"nameserver {net.dns_ip}\noptions ndots:0\n" if pod.compose else None
            harness_pods[pod.name] = net.add_pod(pod.name, hostname=pod.hostname, service=pod.subdomain, resolv=resolv)
        for pod in pods:
            if pod.dns_names:
                net.publish_name(pod.dns_names[0], harness_pods[pod.name].ip, *pod.dns_names[1:])
        procs = {pod.name: net.run(harness_pods[pod.name], [tfboot, "--print", "--wait", "20s", *pod.args], env=pod.env)
                 for pod in pods}
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            results[name] = (proc.returncode, out, err)
        return results


def example_pods(example: str, readme_json: str) -> list[Pod]:
    if example in KUBERNETES_FILES:
        return kubernetes_pods(load_manifest(example))
    if example in COMPOSE_FILES:
        return compose_containers(compose_config(example), COMPOSE_PROJECT)
    assert example == TFJOB
    documented = json.loads(readme_json)
    configs = {}
    for task_type, addresses in documented["cluster"].items():
        for index, address in enumerate(addresses):
            configs[address.split(".")[0]] = {**documented, "task": {"type": task_type, "index": index}}
    return tfjob_pods(configs)


def own_task(pod: Pod, cluster: dict) -> dict:
    found = [{"type": t, "index": i} for t, addresses in cluster.items() for i, a in enumerate(addresses)
             if a.rsplit(":", 1)[0].split(".")[0] in pod.own_names]
    assert len(found) == 1, f"pod {pod.name} ({pod.own_names}) is {len(found)} tasks of {cluster}"
    return found[0]


@pytest.mark.parametrize("example", [*KUBERNETES_FILES, *COMPOSE_FILES, TFJOB])
def test_tf_config_in_every_pod_is_the_one_in_the_readme(example, tfboot, root):
    blocks = readme_blocks()
    assert example in blocks, f"examples/README.md has no TF_CONFIG block for {example}"
    documented_pod, documented_json = blocks[example]
    documented = json.loads(documented_json)
    pods = example_pods(example, documented_json)
    assert documented_pod in {n for p in pods for n in p.own_names}, \
        f"{example}: README's pod {documented_pod} is not one of {[p.name for p in pods]}"

    results = run_tfboot_in_pods(tfboot, pods)

    claimed = []
    for pod in pods:
        code, out, err = results[pod.name]
        assert code == 0, f"{example}: pod {pod.name} (env {pod.env}): exit {code}\n{err}"
        if documented_pod in pod.own_names:
            assert ordered(out) == ordered(documented_json), f"{example}: pod {pod.name}:\n got {out}\nREADME {documented_json}"
        got = json.loads(out)
        assert got["cluster"] == documented["cluster"], f"{example}: pod {pod.name}: {out}"
        task = own_task(pod, got["cluster"])
        assert got["task"] == task, f"{example}: pod {pod.name} thinks it is {got['task']}"
        claimed.append((task["type"], task["index"]))
        if pod.ports:
            port = int(got["cluster"][task["type"]][task["index"]].rsplit(":", 1)[1])
            assert port in pod.ports, f"{example}: pod {pod.name} listens on {port}, its container declares {pod.ports}"
    every_task = [(t, i) for t, addresses in documented["cluster"].items() for i in range(len(addresses))]
    assert sorted(claimed) == sorted(every_task), f"{example}: tasks without a pod or with two"


def test_image_cmd_is_the_dockerfile_cmd():
    with open(os.path.join(REPO_DIR, "docker", "Dockerfile")) as f:
        assert f'CMD {json.dumps(IMAGE_CMD)}' in f.read()
