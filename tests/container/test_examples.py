"""The deployment examples in examples/: the Kubernetes manifests pass the API schemas (strict: no
unknown field), with and without their optional control secret, and deploy the way tfboot needs
(job supervision included: control port, exit codes in the Jobs' failure policies, idle StatefulSets,
a NetworkPolicy that admits only the job's pods and Prometheus' scrape), are ready for real pods
(CPU and memory requests, writable /logs and /tmp, /dev/shm for PyTorch, a grace period for a
checkpoint, a non-root variant), give tfboot only options and TFBOOT_* variables
its --help lists, the compose files pass `docker compose config`, and in every pod of every example
tfboot prints exactly the TF_CONFIG that docs/deploying.md shows, or, for the PyTorch examples,
starts the job and gives each process exactly the torchrun variables it shows.

Each pod runs in a pod of the namespace network (tests/harness/cluster.py) with the hostname, the
kubelet's /etc/hosts and resolv.conf (or Docker's), the environment and the args the example gives
it, and only the DNS records the example's Service publishes before the pods are Ready."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

try:
    import kubernetes_validate
    import yaml
except ImportError as e:
    pytest.fail(f"{e.name} is not installed: run scripts/setup-containers", pytrace=False)

from harness import exit_codes
from harness.cluster import ClusterNetwork
from kubeflow_trainer import trainjob_as_jobset
from paths import REPO_DIR
from workloads import IMAGE_CMD, Pod, compose_containers, kubernetes_pods, tfjob_pods

EXAMPLES_DIR = os.path.join(REPO_DIR, "examples")
DEPLOYING = os.path.join(REPO_DIR, "docs", "deploying.md")   # the examples' documented outputs
KUBERNETES_FILES = sorted(f"kubernetes/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "kubernetes")) if f.endswith(".yaml"))
# Files that go with every example rather than being one: they create no pods.
NETWORK_POLICY_FILE = "kubernetes/networkpolicy.yaml"
CONTROL_SECRET_FILE = "kubernetes/control-secret.yaml"
KUBERNETES_EXAMPLES = [f for f in KUBERNETES_FILES if f not in (NETWORK_POLICY_FILE, CONTROL_SECRET_FILE)]
COMPOSE_FILES = sorted(f"compose/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "compose")) if f.endswith(".yaml"))
COMPOSE_PROJECT = "mnist"       # `docker compose -p mnist ...`, as docs/deploying.md says
TFJOB = "tfjob"                 # docs/deploying.md's operator example (no file: the operator writes TF_CONFIG)
# An old Kubernetes still in use (everything the examples rely on is older) and the newest
# release the validator knows.
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

# tfboot's job supervision (docs/supervision.md): its control port, and the exit codes a Job's failure policy
# must tell apart.
CONTROL_PORT = 2220
CONTROL_PORT_NAME = "tfboot-control"
EXIT_NEVER_RETRIED = {exit_codes.USAGE, exit_codes.ENV_CHECK_FAILED}  # 5, a task missing, is retried
# The optional secret's lines in the manifests: comment lines right below this marker, at its indent.
SECRET_MARKER = "# control secret (optional)"
SECRET_PATH = "/var/run/secrets/tfboot/secret"
# The Kueue variant of a Job or JobSet: the lines under this marker, uncommented, put it in a queue.
KUEUE_MARKER = "# kueue (optional)"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Where every example mounts its checkpoint volume (a PersistentVolumeClaim in the same file).
CHECKPOINT_DIR = "/checkpoints"
GPU = "nvidia.com/gpu"
# The label by which each NetworkPolicy is applied on its own: kubectl apply -f networkpolicy.yaml -l <label>=<job>
POLICY_LABEL = "app.kubernetes.io/name"
APPLY_POLICY = re.compile(r"kubectl apply -f networkpolicy\.yaml -l (?P<key>[\w./-]+)=(?P<value>[\w.-]+)")

# The ```json block right after "<!-- tf_config: <example> pod=<pod> -->" in docs/deploying.md
README_BLOCK = re.compile(r"<!-- tf_config: (?P<example>\S+) pod=(?P<pod>\S+) -->\s*```json\n(?P<json>.*?)```", re.S)
# PyTorch examples: the ```sh block right after "<!-- torch_env: <example> pod=<pod> -->", one line
# `KEY=value ...` per process of the pod, with exactly these variables (torchrun's).
README_TORCH_BLOCK = re.compile(r"<!-- torch_env: (?P<example>\S+) pod=(?P<pod>\S+) -->\s*```sh\n(?P<text>.*?)```", re.S)
TORCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
# What each process runs in the test instead of the trainer: one line with those variables.
PRINT_TORCH_VARIABLES = ("import json, os; print('TORCH_VARIABLES', json.dumps({k: os.environ.get(k) for k in "
                         f"{TORCH_VARIABLES!r}}}), flush=True)")
# tfboot's --help: "  --name METAVAR   text" (a METAVAR: the option takes a value), "  --init, --no-init",
# and "env TFBOOT_NAME" for each option's twin.
HELP_OPTION = re.compile(r"^  (--[a-z0-9-]+)(?:, (--[a-z0-9-]+))?( [A-Z]+)?  ", re.M)
HELP_TWIN = re.compile(r"\benv (TFBOOT_[A-Z0-9_]+)")
TWINS_BESIDES_OPTIONS = {"TFBOOT_POD_INDEX", "TFBOOT_LOG_DIR"}   # docs/command-line.md: read, though no option's twin

JOBSET_SPEC_FIELDS = {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
                      "coordinator", "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies"}
JOBSET_REPLICATED_JOB_FIELDS = {"name", "groupName", "template", "replicas", "dependsOn"}
JOBSET_NETWORK_FIELDS = {"enableDNSHostnames": bool, "subdomain": str, "publishNotReadyAddresses": bool}
JOBSET_FAILURE_POLICY_FIELDS = {"maxRestarts", "restartStrategy", "rules"}
JOBSET_FAILURE_RULE_FIELDS = {"name", "action", "onJobFailureReasons", "onJobFailureMessagePatterns", "targetReplicatedJobs"}
JOBSET_FAILURE_ACTIONS = {"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob",
                          "RestartJobAndIgnoreMaxRestarts"}
JOBSET_FAILURE_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", "MaxFailedIndexesExceeded",
                       "FailedIndexes"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1, Trainer v2.2 and later), each
# object's fields; the patches' Kubernetes types are checked against the Pod schema.
TRAINJOB_FIELDS = {
    "spec": {"runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds", "managedBy"},
    "runtimeRef": {"name", "apiGroup", "kind"},
    "trainer": {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"},
    "runtimePatch": {"manager", "time", "trainingRuntimeSpec"},
    "trainingRuntimeSpec": {"template"},
    "jobSetTemplate": {"metadata", "spec"}, "jobSetSpec": {"replicatedJobs"}, "replicatedJob": {"name", "template"},
    "jobTemplate": {"metadata", "spec"}, "jobSpec": {"template"}, "podTemplate": {"metadata", "spec"},
    "podSpec": {"serviceAccountName", "volumes", "initContainers", "containers", "imagePullSecrets", "securityContext",
                "nodeSelector", "affinity", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"},
    "container": {"name", "env", "volumeMounts", "securityContext"},
}
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def ordered(text: str):
    """JSON with objects as lists of pairs, so that == also compares the order of keys."""
    return json.loads(text, object_pairs_hook=list)


def readme_blocks() -> dict[str, tuple[str, str]]:
    with open(DEPLOYING) as f:
        text = f.read()
    blocks = {}
    for m in README_BLOCK.finditer(text):
        assert m["example"] not in blocks, f"docs/deploying.md: two TF_CONFIG blocks for {m['example']}"
        blocks[m["example"]] = (m["pod"], m["json"])
    return blocks


def readme_torch_blocks() -> dict[str, tuple[str, list[dict[str, str]]]]:
    """example -> (pod, [{variable: value} for each process of the pod, in docs/deploying.md's order])."""
    with open(DEPLOYING) as f:
        text = f.read()
    blocks = {}
    for m in README_TORCH_BLOCK.finditer(text):
        assert m["example"] not in blocks, f"docs/deploying.md: two torch_env blocks for {m['example']}"
        processes = [dict(item.split("=", 1) for item in line.split()) for line in m["text"].splitlines() if line.strip()]
        for process in processes:
            assert sorted(process) == sorted(TORCH_VARIABLES), f"docs/deploying.md: {m['example']}: {sorted(process)}"
        blocks[m["example"]] = (m["pod"], processes)
    return blocks


def load_manifest(name: str) -> list[dict]:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def with_control_secret(text: str, marker: str = SECRET_MARKER) -> tuple[str, int]:
    """The manifest as a user who turns the control secret (or another option's marker, such as
    KUEUE_MARKER) on makes it: every comment line right below a marker line, at the marker's
    indent, uncommented. Returns the text and the number of lines uncommented."""
    lines = text.splitlines(keepends=True)
    out, uncommented, i = [], 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.lstrip().startswith(marker):
            indent = line[:len(line) - len(line.lstrip())]
            while i < len(lines) and lines[i].startswith(indent + "# "):
                out.append(indent + lines[i][len(indent) + 2:])
                uncommented += 1
                i += 1
    return "".join(out), uncommented


def load_manifest_with_control_secret(name: str) -> list[dict]:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        text, uncommented = with_control_secret(f.read())
    assert uncommented, f"{name}: no lines under {SECRET_MARKER!r}"
    return [doc for doc in yaml.safe_load_all(text) if doc]


def fold_tfboot_command(container: dict) -> None:
    """`command: [tfboot, <options>...]` with `args: [python, ...]` runs what an image with tfboot
    as ENTRYPOINT runs with `args: [<options>..., python, ...]`: the form the model of the pods
    (workloads.py) and the tests take. Other commands are left for the tests to refuse."""
    command = container.get("command")
    if command and command[0] == "tfboot":
        container["args"] = [*command[1:], *(container.get("args") or [])]
        del container["command"]


def as_deployed(docs: list[dict]) -> list[dict]:
    """The workloads as the cluster runs them: a TrainJob as the JobSet Kubeflow Trainer creates
    for it (kubeflow_trainer.py), and a container whose command is tfboot with its options folded
    into args (fold_tfboot_command)."""
    deployed = [trainjob_as_jobset(doc) if doc["kind"] == "TrainJob" else copy.deepcopy(doc) for doc in docs]
    for doc in deployed:
        for template in pod_templates(doc):
            for container in template["spec"]["containers"]:
                fold_tfboot_command(container)
    return deployed


def example_framework(name: str) -> str:
    """tensorflow, pytorch or jax: what the example's tfboot runs (--framework, its twin, or
    Kubeflow's PET_* variables, which say pytorch). A manifest the model cannot read counts as
    TensorFlow here, and fails its own tests."""
    try:
        pods = kubernetes_pods(as_deployed(load_manifest(name)))
    except Exception:  # noqa: BLE001 - reported by the tests of that manifest, not at collection
        return "tensorflow"
    frameworks = set()
    for pod in pods:
        framework = pod.env.get("TFBOOT_FRAMEWORK") or ("pytorch" if "PET_NNODES" in pod.env else "tensorflow")
        for i, arg in enumerate(pod.args):
            if arg == "--framework" and i + 1 < len(pod.args):
                framework = pod.args[i + 1]
            elif arg.startswith("--framework="):
                framework = arg.split("=", 1)[1]
        frameworks.add(framework)
    assert len(frameworks) == 1, f"{name}: pods of frameworks {frameworks}"
    return frameworks.pop()


def pod_templates(doc: dict) -> list[dict]:
    """The pod templates of a workload (StatefulSet, Job, each Job of a JobSet)."""
    if doc["kind"] in ("StatefulSet", "Job"):
        return [doc["spec"]["template"]]
    if doc["kind"] == "JobSet":
        return [job["template"]["spec"]["template"] for job in doc["spec"]["replicatedJobs"]]
    return []


def job_specs(doc: dict) -> list[dict]:
    """The Job specs of a workload (a Job, each Job of a JobSet)."""
    if doc["kind"] == "Job":
        return [doc["spec"]]
    if doc["kind"] == "JobSet":
        return [job["template"]["spec"] for job in doc["spec"]["replicatedJobs"]]
    return []


# The examples by the framework their tfboot runs: TF_CONFIG for TensorFlow, torchrun's variables for PyTorch.
TENSORFLOW_KUBERNETES_EXAMPLES = [n for n in KUBERNETES_EXAMPLES if example_framework(n) == "tensorflow"]
TORCH_KUBERNETES_EXAMPLES = [n for n in KUBERNETES_EXAMPLES if example_framework(n) == "pytorch"]
assert len(TENSORFLOW_KUBERNETES_EXAMPLES) + len(TORCH_KUBERNETES_EXAMPLES) == len(KUBERNETES_EXAMPLES), "a jax example?"


def env_value(container: dict, name: str):
    values = [item.get("value") for item in container.get("env", []) if item["name"] == name]
    assert len(values) <= 1, f"{name} set twice"
    return values[0] if values else None


@pytest.fixture(scope="module")
def tfboot_options(tfboot) -> dict:
    """tfboot's options as its --help lists them ("options": name -> takes a value) and the
    TFBOOT_* variables it reads ("twins")."""
    cp = subprocess.run([tfboot, "--help"], capture_output=True, text=True, timeout=10, check=True)
    options = {}
    for m in HELP_OPTION.finditer(cp.stdout):
        for option in (m[1], m[2]):
            if option:
                options[option] = bool(m[3])
    assert options.get("--framework") is True and options.get("--print") is False, cp.stdout
    return {"options": options, "twins": set(HELP_TWIN.findall(cp.stdout)) | TWINS_BESIDES_OPTIONS}


def split_tfboot_args(args: list[str], options: dict[str, bool]) -> tuple[list[str], list[str]]:
    """tfboot's own options and the command after them: options stop at the first non-option or
    at `--` (docs/command-line.md). An option tfboot does not have fails the test."""
    i = 0
    while i < len(args):
        if args[i] == "--":
            return args[:i], args[i + 1:]
        if not args[i].startswith("-"):
            break
        name = args[i].split("=", 1)[0]
        assert name in options, f"{args[i]}: tfboot has no such option (tfboot --help)"
        i += 2 if options[name] and "=" not in args[i] else 1
    return args[:i], args[i:]


def test_tfboot_options_end_at_the_command_and_must_exist(tfboot_options):
    options = tfboot_options["options"]
    assert split_tfboot_args(["--framework", "pytorch", "--print", "python", "t.py", "--epochs", "3"], options) == \
        (["--framework", "pytorch", "--print"], ["python", "t.py", "--epochs", "3"])
    assert split_tfboot_args(["--port=29501", "--", "--not-an-option"], options) == (["--port=29501"], ["--not-an-option"])
    with pytest.raises(AssertionError, match="--frameworks"):
        split_tfboot_args(["--frameworks", "pytorch", "python"], options)


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    pytest.fail("neither docker-compose nor `docker compose` is installed: run scripts/setup-containers")


def compose_config(name: str, path: str | None = None) -> dict:
    """`docker compose config` of the example `name` (or of the file at path, a variant of it)."""
    cp = subprocess.run([*compose_command(), "-p", COMPOSE_PROJECT, "-f", path or os.path.join(EXAMPLES_DIR, name), "config"],
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
        for rule in policy.get("rules", []):
            assert set(rule) <= JOBSET_FAILURE_RULE_FIELDS, f"{where}: failurePolicy rule {rule}"
            assert rule["action"] in JOBSET_FAILURE_ACTIONS, f"{where}: failurePolicy rule {rule}"
            assert set(rule.get("onJobFailureReasons", [])) <= JOB_FAILURE_REASONS, f"{where}: failurePolicy rule {rule}"
            assert set(rule.get("targetReplicatedJobs", [])) <= set(names), f"{where}: failurePolicy rule {rule}"
            if "name" in rule:
                assert JOBSET_FAILURE_RULE_NAME.match(rule["name"]), f"{where}: failurePolicy rule name {rule['name']}"
    for job in spec["replicatedJobs"]:
        job_where = f"{where}: replicatedJobs[{job['name']}]"
        assert set(job) <= JOBSET_REPLICATED_JOB_FIELDS, f"{job_where}: unknown fields {set(job) - JOBSET_REPLICATED_JOB_FIELDS}"
        assert DNS_LABEL.match(job["name"]), job_where
        assert isinstance(job.get("replicas", 1), int) and job.get("replicas", 1) >= 1, job_where
        assert set(job["template"]) <= {"metadata", "spec"}, job_where
        validate({"apiVersion": "batch/v1", "kind": "Job",
                  "metadata": {**job["template"].get("metadata", {}), "name": f"{name}-{job['name']}-0"},
                  "spec": job["template"]["spec"]}, job_where)


def check_fields(value: dict, kind: str, where: str) -> None:
    unknown = set(value) - TRAINJOB_FIELDS[kind]
    assert not unknown, f"{where}: unknown fields of {kind}: {sorted(unknown)}"


def check_trainjob(doc: dict, where: str) -> None:
    """TrainJob has no schema in the validator: its own fields by hand, and the Kubernetes types
    in it (env, resources, the patches' volumes and mounts) as the Pod the Trainer makes of them,
    against v1 Pod."""
    assert doc["apiVersion"] == "trainer.kubeflow.org/v1alpha1", where
    assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}, where
    name = doc["metadata"]["name"]
    assert DNS_1035_LABEL.match(name) and len(name) <= 63, f"{where}: metadata.name"
    spec = doc["spec"]
    check_fields(spec, "spec", where)
    check_fields(spec["runtimeRef"], "runtimeRef", where)
    assert spec["runtimeRef"]["name"], f"{where}: runtimeRef.name"
    trainer = spec.get("trainer", {})
    check_fields(trainer, "trainer", where)
    for key in ("command", "args"):
        assert all(isinstance(arg, str) for arg in trainer.get(key, [])), f"{where}: trainer.{key} must be strings"
    for key in ("numNodes", "numProcPerNode"):
        assert isinstance(trainer.get(key, 1), int) and trainer.get(key, 1) >= 1, f"{where}: trainer.{key}"
    for patch in spec.get("runtimePatches", []):
        check_fields(patch, "runtimePatch", where)
        assert patch["manager"], f"{where}: runtimePatches[].manager"
        runtime_spec = patch.get("trainingRuntimeSpec", {})
        check_fields(runtime_spec, "trainingRuntimeSpec", where)
        check_fields(runtime_spec.get("template", {}), "jobSetTemplate", where)
        check_fields(runtime_spec.get("template", {}).get("spec", {}), "jobSetSpec", where)
        for job in runtime_spec.get("template", {}).get("spec", {}).get("replicatedJobs", []):
            check_fields(job, "replicatedJob", where)
            check_fields(job.get("template", {}), "jobTemplate", where)
            check_fields(job.get("template", {}).get("spec", {}), "jobSpec", where)
            pod = job.get("template", {}).get("spec", {}).get("template", {})
            check_fields(pod, "podTemplate", where)
            check_fields(pod.get("spec", {}), "podSpec", where)
            for container in pod.get("spec", {}).get("containers", []):
                check_fields(container, "container", where)
    template = trainjob_as_jobset(doc)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-node-0-0"}, "spec": template["spec"]},
             f"{where}: as the Trainer's pod")


def check_manifest_schemas(docs: list[dict], where_prefix: str) -> None:
    assert docs, where_prefix
    for doc in docs:
        where = f"{where_prefix}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        if doc.get("kind") == "JobSet":
            check_jobset(doc, where)
        elif doc.get("kind") == "TrainJob":
            check_trainjob(doc, where)
        else:
            validate(doc, where)


@pytest.mark.parametrize("name", KUBERNETES_FILES)
def test_manifest_passes_the_kubernetes_schemas(name):
    check_manifest_schemas(load_manifest(name), name)


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_with_its_control_secret_passes_the_kubernetes_schemas(name):
    check_manifest_schemas(load_manifest_with_control_secret(name), f"{name} (control secret on)")


def test_trainjob_check_rejects_an_unknown_field():
    doc = copy.deepcopy(load_manifest("kubernetes/pytorch-trainjob.yaml")[0])
    doc["spec"]["trainer"]["numProcsPerNode"] = 2
    with pytest.raises(AssertionError, match="numProcsPerNode"):
        check_trainjob(doc, "misspelt")
    doc = copy.deepcopy(load_manifest("kubernetes/pytorch-trainjob.yaml")[0])
    doc["spec"]["trainer"]["env"] = [{"name": "X", "valeu": "1"}]
    with pytest.raises(pytest.fail.Exception):
        check_trainjob(doc, "misspelt env")


def test_uncommenting_the_control_secret_touches_only_its_lines():
    text = "a:\n  # control secret (optional): why\n  # b: 1\n  #   c: 2\n\n  # d: 3\n# e: 4\n"
    assert with_control_secret(text) == ("a:\n  # control secret (optional): why\n  b: 1\n    c: 2\n\n  # d: 3\n# e: 4\n", 2)


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_control_secret_reaches_every_trainer_as_a_mounted_file(name):
    secrets = {d["metadata"]["name"]: d for d in load_manifest(CONTROL_SECRET_FILE) if d["kind"] == "Secret"}
    directory, key = os.path.split(SECRET_PATH)
    templates = [t for doc in as_deployed(load_manifest_with_control_secret(name)) for t in pod_templates(doc)]
    assert templates, name
    for template in templates:
        container = template["spec"]["containers"][0]
        assert env_value(container, "TFBOOT_CONTROL_SECRET_FILE") == SECRET_PATH, name
        mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == directory]
        assert len(mounts) == 1 and mounts[0].get("readOnly") is True, f"{name}: {directory} mounted read-only once"
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        secret_name = volumes[mounts[0]["name"]]["secret"]["secretName"]
        assert secret_name in secrets, f"{name}: Secret {secret_name} is not in {CONTROL_SECRET_FILE}"
        assert key in secrets[secret_name]["stringData"], f"{name}: Secret {secret_name} has no key {key}"


def test_control_secret_file_ships_no_usable_secret():
    # An example value would be a secret known to everyone: left empty, tfboot refuses it (exit 2).
    for doc in load_manifest(CONTROL_SECRET_FILE):
        assert doc["kind"] == "Secret", CONTROL_SECRET_FILE
        assert not doc.get("data") and all(v == "" for v in doc["stringData"].values()), CONTROL_SECRET_FILE


def test_schema_check_rejects_an_unknown_field():
    doc = next(d for d in load_manifest("kubernetes/statefulset.yaml") if d["kind"] == "StatefulSet")
    doc["spec"]["template"]["spec"]["containers"][0]["enviroment"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[0], strict=True)


def exit_code_action(job_spec: dict, container: str, code: int) -> str:
    """What a Job does with a pod whose container exited with code: the first podFailurePolicy
    rule on exit codes that matches it (rules on pod conditions aside), else Count (the default)."""
    for rule in job_spec.get("podFailurePolicy", {}).get("rules", []):
        requirement = rule.get("onExitCodes")
        if not requirement or requirement.get("containerName", container) != container:
            continue
        if (code in requirement["values"]) == (requirement["operator"] == "In"):
            return rule["action"]
    return "Count"


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_supervises_the_job(name):
    """Every trainer declares the control port; a StatefulSet's finished tasks stay idle; a Job
    never retries exit 2 or 6, counts a task's own failure and a start barrier that timed out (5: a
    retry may get the pod that did not come), and does not count the 200 of the
    tasks it stopped (a JobSet's Jobs too: a preempted pod, replaced in its Job, costs no JobSet
    restart, and a task's own failure restarts the JobSet once)."""
    for doc in load_manifest(name):
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        if doc["kind"] == "TrainJob":
            # Its runtime owns the Job and the container's ports: a TrainJob can declare neither
            # the control port nor a podFailurePolicy (docs/deploying.md says what that means).
            assert "TFBOOT_IDLE_WHEN_DONE" not in {e["name"] for e in doc["spec"]["trainer"].get("env", [])}, where
            continue
        for template in pod_templates(doc):
            container = template["spec"]["containers"][0]
            ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
            assert ports.get(CONTROL_PORT_NAME) == CONTROL_PORT, f"{where}: containerPort {CONTROL_PORT} {CONTROL_PORT_NAME}"
            idle = env_value(container, "TFBOOT_IDLE_WHEN_DONE")
            if doc["kind"] == "StatefulSet":
                assert idle == "1", f"{where}: a finished job would train again (restartPolicy Always)"
            else:
                assert idle is None, f"{where}: a Job's pods must end for the Job to complete"
        for spec in job_specs(doc):
            container = spec["template"]["spec"]["containers"][0]["name"]
            assert spec["template"]["spec"]["restartPolicy"] == "Never", f"{where}: podFailurePolicy needs Never"
            for code in sorted(EXIT_NEVER_RETRIED):
                assert exit_code_action(spec, container, code) == "FailJob", f"{where}: exit {code}"
            assert exit_code_action(spec, container, 1) == "Count", f"{where}: a task's own failure must count"
            assert exit_code_action(spec, container, exit_codes.BARRIER_INCOMPLETE) == "Count", f"{where}: a task missing at the start is retried"
            assert exit_code_action(spec, container, exit_codes.PREFLIGHT_REFUSED) == "Count", f"{where}: a node refused by --preflight is retried elsewhere"
            stopped = exit_code_action(spec, container, exit_codes.STOPPED_BY_JOB)
            assert stopped == "Ignore", f"{where}: exit {exit_codes.STOPPED_BY_JOB}: {stopped}"
            # Preempted and saved (TensorFlow's handler exits 42; --stop-together ends with 143): a retry, not a failure.
            for code in (exit_codes.PREEMPTED, exit_codes.by_signal(15)):
                assert exit_code_action(spec, container, code) == "Ignore", f"{where}: exit {code} must be retried"
        if doc["kind"] == "JobSet":
            rules = doc["spec"]["failurePolicy"]["rules"]
            assert any(r["action"] == "FailJobSet" and r["onJobFailureReasons"] == ["PodFailurePolicy"]
                       and not r.get("targetReplicatedJobs") for r in rules), f"{where}: FailJob must fail the JobSet"


def test_exit_code_action_follows_the_rules_in_order():
    spec = {"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "other", "operator": "In", "values": [3]}},
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3, 200]}},
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}}]}}
    assert [exit_code_action(spec, "trainer", code) for code in (1, 3, 200, 5)] == ["Count", "Ignore", "Ignore", "FailJob"]
    assert exit_code_action({}, "trainer", 5) == "Count"


def selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, f"only matchLabels is modelled: {selector}"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def uses_nccl(docs: list[dict]) -> bool:
    """Whether the job's tasks talk NCCL (or Gloo) to each other, on ports the kernel picks: PyTorch
    always; TensorFlow's MultiWorkerMirroredStrategy on GPUs (its collective ops use NCCL there).
    ParameterServerStrategy (a ps task) keeps to gRPC between tasks."""
    pods = kubernetes_pods(as_deployed(docs))
    if any("PET_NNODES" in p.env or "pytorch" in p.args or p.env.get("TFBOOT_FRAMEWORK") == "pytorch" for p in pods):
        return True
    gpus = any(GPU in (c.get("resources", {}).get("limits") or {})
               for doc in as_deployed(docs) for t in pod_templates(doc) for c in t["spec"]["containers"])
    has_ps = any("ps=" in p.env.get("TFBOOT_CLUSTER", "") for p in pods)
    return gpus and not has_ps


def scraped_ports(docs: list[dict]) -> set[int]:
    """The ports the pods ask Prometheus to scrape (prometheus.io/port), each tfboot's metrics port."""
    ports = set()
    for doc in as_deployed(docs):
        for template in pod_templates(doc):
            annotations = template.get("metadata", {}).get("annotations", {})
            if annotations.get("prometheus.io/scrape") == "true":
                port = annotations["prometheus.io/port"]
                assert env_value(template["spec"]["containers"][0], "TFBOOT_METRICS_PORT") == port, \
                    f"{doc['metadata']['name']}: prometheus.io/port {port} is not TFBOOT_METRICS_PORT"
                ports.add(int(port))
    return ports


def check_scrape_rule(rule: dict, where: str) -> set[int]:
    """A rule that admits Prometheus: from pods of one labelled namespace, each peer naming both the
    namespace and the pods, to fixed ports only. Returns those ports."""
    for peer in rule["from"]:
        assert set(peer) == {"namespaceSelector", "podSelector"}, f"{where}: a peer of another namespace names its pods too: {peer}"
        assert peer["namespaceSelector"].get("matchLabels") and peer["podSelector"].get("matchLabels"), f"{where}: {peer}"
    ports = rule.get("ports") or []
    assert ports and all(isinstance(p.get("port"), int) and "endPort" not in p for p in ports), \
        f"{where}: Prometheus is admitted to fixed ports only: {ports}"
    return {p["port"] for p in ports}


def check_network_policy(name: str, docs: list[dict], policy_docs: list[dict], header: str) -> None:
    """One NetworkPolicy selects every pod of the example and no other example's pod, and admits to
    its pods exactly those pods: on every TCP port when the job uses NCCL (NVIDIA/nccl#680: no fixed
    ports), else on exactly its containers' ports (TensorFlow's and the control port); and, when the
    pods advertise a Prometheus scrape, Prometheus' pods to exactly that port. The policy carries
    the label the example's header applies it by, and only it has that label."""
    pods = kubernetes_pods(as_deployed(docs))
    others = [p for other in KUBERNETES_EXAMPLES if other != name for p in kubernetes_pods(as_deployed(load_manifest(other)))]
    policies = [d for d in policy_docs if any(selects(d["spec"]["podSelector"], p.labels) for p in pods)]
    assert len(policies) == 1, f"{name}: {len(policies)} NetworkPolicies select its pods"
    policy = policies[0]
    where = f"{NETWORK_POLICY_FILE}: {policy['metadata']['name']}"
    assert all(selects(policy["spec"]["podSelector"], p.labels) for p in pods), f"{where}: misses pods of {name}"
    assert not any(selects(policy["spec"]["podSelector"], p.labels) for p in others), f"{where}: selects other pods"
    assert policy["spec"]["policyTypes"] == ["Ingress"], where
    applies = APPLY_POLICY.findall(header)
    assert len(applies) == 1, f"{name}: its header must say `kubectl apply -f networkpolicy.yaml -l {POLICY_LABEL}=<job>` once"
    labelled = [d for d in policy_docs if (d["metadata"].get("labels") or {}).get(applies[0][0]) == applies[0][1]]
    assert labelled == [policy], f"{name}: `-l {applies[0][0]}={applies[0][1]}` applies {[d['metadata']['name'] for d in labelled]}"
    admitted_ports, every_port, scrape_ports = set(), False, set()
    for rule in policy["spec"]["ingress"]:
        assert rule.get("from"), f"{where}: a rule without `from` admits everyone"
        if any("namespaceSelector" in peer for peer in rule["from"]):
            scrape_ports |= check_scrape_rule(rule, where)
            continue
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}, f"{where}: only pods of the job's namespace: {peer}"
            assert all(selects(peer["podSelector"], p.labels) for p in pods), f"{where}: refuses pods of {name}"
            assert not any(selects(peer["podSelector"], p.labels) for p in others), f"{where}: admits other pods"
        assert rule.get("ports"), f"{where}: a rule without `ports` admits every port"
        for port in rule["ports"]:
            assert port.get("protocol", "TCP") == "TCP" and "endPort" not in port, where
            if "port" in port:
                assert isinstance(port["port"], int), where
                admitted_ports.add(port["port"])
            else:
                every_port = True
    assert scrape_ports == scraped_ports(docs), \
        f"{where}: admits Prometheus to {sorted(scrape_ports)}, the pods advertise {sorted(scraped_ports(docs))}"
    if uses_nccl(docs):
        assert every_port and not admitted_ports, f"{where}: NCCL's ports are not known in advance: admit every TCP port"
        return
    assert not every_port, f"{where}: admits every port"
    assert admitted_ports == {port for p in pods for port in p.ports}, f"{where}: ports {admitted_ports}"
    assert CONTROL_PORT in admitted_ports, where


def manifest_header(name: str) -> str:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        return "".join(line for line in f if line.startswith("#"))


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_network_policy_admits_only_the_jobs_own_pods(name):
    check_network_policy(name, load_manifest(name), load_manifest(NETWORK_POLICY_FILE), manifest_header(name))


def test_network_policies_are_labelled_by_their_job():
    """`kubectl apply -f networkpolicy.yaml -l app.kubernetes.io/name=<job>` applies one policy."""
    policies = load_manifest(NETWORK_POLICY_FILE)
    values = [(d["metadata"].get("labels") or {}).get(POLICY_LABEL) for d in policies]
    assert values == [d["metadata"]["name"] for d in policies], values
    header = manifest_header(NETWORK_POLICY_FILE)
    assert all(m[1] in values for m in APPLY_POLICY.findall(header)) and APPLY_POLICY.search(header), header
    assert not re.search(r"^#\s+kubectl apply -f networkpolicy\.yaml\s*$", header, re.M), "a command that applies all"


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_deploys_the_way_tfboot_needs(name, tfboot_options):
    docs = as_deployed(load_manifest(name))
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
            assert spec.get("podManagementPolicy") == "Parallel", f"{where}: OrderedReady starts the pods one by one (docs/deploying.md)"
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
        _, command = split_tfboot_args(pod.args, tfboot_options["options"])
        assert command[:1] in (["python"], ["python3"]), f"{name}: pod {pod.name}: args {pod.args}"


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_gives_tfboot_only_its_own_options(name, tfboot_options):
    """Every option before the trainer and every TFBOOT_* variable is one that tfboot's --help
    lists (an unknown variable would only be warned about, and its setting lost)."""
    for pod in kubernetes_pods(as_deployed(load_manifest(name))):
        _, command = split_tfboot_args(pod.args, tfboot_options["options"])
        assert command, f"{name}: pod {pod.name}: no command after tfboot's options {pod.args}"
        unknown = {key for key in pod.env if key.startswith("TFBOOT_")} - tfboot_options["twins"]
        assert not unknown, f"{name}: pod {pod.name}: no such tfboot variables: {sorted(unknown)}"


def test_kubernetes_model_publishes_records_only_with_publish_not_ready_addresses():
    docs = load_manifest("kubernetes/statefulset.yaml")
    assert all(pod.dns_names for pod in kubernetes_pods(docs))
    docs[0]["spec"]["publishNotReadyAddresses"] = False
    assert not any(pod.dns_names for pod in kubernetes_pods(docs))


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_containers_run_tfboot(name):
    """Either the image's ENTRYPOINT (tfboot; no `command:`, which would replace it) or a command
    that is tfboot (an image, such as PyTorch's, without it as ENTRYPOINT)."""
    for doc in load_manifest(name):
        if doc["kind"] == "TrainJob":
            assert doc["spec"]["trainer"]["command"][:1] == ["tfboot"], f"{name}: the trainer's command must be tfboot"
        for template in pod_templates(doc):
            for container in template["spec"]["containers"]:
                assert container.get("command", ["tfboot"])[:1] == ["tfboot"], \
                    f"{name}: `command:` would replace tfboot, the image's ENTRYPOINT"


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_passes_compose_config(name):
    config = compose_config(name)
    assert config["services"], name
    for service_name, service in config["services"].items():
        assert "entrypoint" not in service, f"{name}: {service_name}: entrypoint would replace tfboot"
        assert "TFBOOT_CLUSTER" in service.get("environment", {}), f"{name}: {service_name}"


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_with_its_control_secret_passes_compose_config(name, tmp_path):
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        text, uncommented = with_control_secret(f.read())
    assert uncommented, f"{name}: no lines under {SECRET_MARKER!r}"
    variant = tmp_path / os.path.basename(name)
    variant.write_text(text)
    config = compose_config(name, str(variant))
    assert set(config["secrets"]) == {"tfboot-control"}, name
    for service_name, service in config["services"].items():
        assert [s["source"] for s in service["secrets"]] == ["tfboot-control"], f"{name}: {service_name}"
        # compose mounts a secret at /run/secrets/<name>
        assert service["environment"]["TFBOOT_CONTROL_SECRET_FILE"] == "/run/secrets/tfboot-control", f"{name}: {service_name}"


# --------------------------------------------------------------------------------------------
# What the API server checks beyond the schema, and names that must agree


POD_FAILURE_ACTIONS = {"FailJob", "FailIndex", "Ignore", "Count"}
POD_CONDITION_STATUSES = {"True", "False", "Unknown"}


def check_job_api_rules(spec: dict, where: str) -> None:
    """The cross-field rules the API server applies to a Job spec (batch/v1 validation), which no
    schema says: podFailurePolicy only with restartPolicy Never; each rule on exit codes or on pod
    conditions, not both; exit code values unique and ordered, no 0 with In, containerName naming
    one of the pod's containers; FailIndex only with backoffLimitPerIndex; per-index limits only
    for Indexed Jobs; an Indexed Job's completions given."""
    pod = spec["template"]["spec"]
    assert pod.get("restartPolicy") in ("Never", "OnFailure"), f"{where}: a Job's restartPolicy is Never or OnFailure"
    indexed = spec.get("completionMode", "NonIndexed") == "Indexed"
    if indexed:
        assert isinstance(spec.get("completions"), int), f"{where}: an Indexed Job needs completions"
    if "backoffLimitPerIndex" in spec:
        assert indexed, f"{where}: backoffLimitPerIndex needs completionMode Indexed"
    if "maxFailedIndexes" in spec:
        assert "backoffLimitPerIndex" in spec, f"{where}: maxFailedIndexes needs backoffLimitPerIndex"
    for key in ("ttlSecondsAfterFinished", "backoffLimit", "activeDeadlineSeconds"):
        if key in spec:
            assert isinstance(spec[key], int) and spec[key] >= 0, f"{where}: {key}"
    policy = spec.get("podFailurePolicy")
    if not policy:
        return
    assert pod["restartPolicy"] == "Never", f"{where}: podFailurePolicy needs restartPolicy Never"
    containers = {c["name"] for c in pod["containers"]} | {c["name"] for c in pod.get("initContainers", [])}
    rules = policy["rules"]
    assert len(rules) <= 20, f"{where}: at most 20 podFailurePolicy rules"
    for i, rule in enumerate(rules):
        rule_where = f"{where}: podFailurePolicy.rules[{i}]"
        assert rule["action"] in POD_FAILURE_ACTIONS, f"{rule_where}: action {rule['action']}"
        if rule["action"] == "FailIndex":
            assert "backoffLimitPerIndex" in spec, f"{rule_where}: action FailIndex needs backoffLimitPerIndex"
        exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        assert (exit_codes is None) != (not conditions), f"{rule_where}: one of onExitCodes and onPodConditions, not both"
        if exit_codes is not None:
            values = exit_codes["values"]
            assert exit_codes["operator"] in ("In", "NotIn"), f"{rule_where}: operator {exit_codes['operator']}"
            assert 1 <= len(values) <= 255, f"{rule_where}: 1 to 255 exit code values"
            assert values == sorted(set(values)), f"{rule_where}: exit code values must be ordered and unique: {values}"
            assert not (exit_codes["operator"] == "In" and 0 in values), f"{rule_where}: 0 with operator In"
            if "containerName" in exit_codes:
                assert exit_codes["containerName"] in containers, \
                    f"{rule_where}: containerName {exit_codes['containerName']} is no container of the pod ({sorted(containers)})"
        for condition in conditions:
            assert condition.get("type") and condition.get("status", "True") in POD_CONDITION_STATUSES, f"{rule_where}: {condition}"


def check_job_rules_of_manifest(name: str, docs: list[dict]) -> None:
    # The manifests' own Jobs (a TrainJob's is its runtime's).
    for doc in docs:
        for spec in job_specs(doc):
            check_job_api_rules(spec, f"{name}: {doc['kind']} {doc['metadata']['name']}")


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_jobs_keep_the_api_servers_cross_field_rules(name):
    check_job_rules_of_manifest(name, load_manifest(name))
    check_job_rules_of_manifest(f"{name} (Kueue on)", load_manifest_with(name, KUEUE_MARKER, required=False))


# The pod names the rules of docs/identity.md make of a StatefulSet's pod and an Indexed Job's
# hostname: <prefix>-<type>-<ordinal> and <prefix>-<index>, ordinals without leading zeros.
STATEFULSET_POD = re.compile(r"^(?P<prefix>[a-z0-9][-a-z0-9]*)-(?P<type>chief|worker|ps|evaluator)-(?P<ordinal>0|[1-9][0-9]*)$")
INDEXED_POD = re.compile(r"^(?P<prefix>[a-z0-9][-a-z0-9]*)-(?P<index>0|[1-9][0-9]*)$")


def parse_cluster(spec: str) -> dict[str, int]:
    counts = {}
    for item in spec.split(","):
        task_type, count = item.split("=")
        counts[task_type.strip()] = int(count)
    return counts


def check_names(name: str, docs: list[dict]) -> None:
    """Names that must agree: a StatefulSet's serviceName and a Job pod's subdomain name a headless
    Service of the file that selects those pods; every pod's TFBOOT_CLUSTER is the same; and the
    peers' names tfboot makes (from TFBOOT_PEER_TEMPLATE, else from the pod name or hostname by
    docs/identity.md's pattern) are exactly the pods' hostnames, one per task, each pod its own task."""
    deployed = as_deployed(docs)
    services = {d["metadata"]["name"]: d for d in deployed if d["kind"] == "Service"}
    for doc in deployed:
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        labels_of = [t.get("metadata", {}).get("labels", {}) for t in pod_templates(doc)]
        subdomain = None
        if doc["kind"] == "StatefulSet":
            subdomain = doc["spec"]["serviceName"]
            assert subdomain in services, f"{where}: serviceName {subdomain} names no Service in the file"
        elif doc["kind"] == "Job":
            subdomain = doc["spec"]["template"]["spec"].get("subdomain")
            assert subdomain in services, f"{where}: subdomain {subdomain} names no Service in the file"
        elif doc["kind"] == "JobSet":
            subdomain = doc["spec"].get("network", {}).get("subdomain", doc["metadata"]["name"])
            assert subdomain not in services, f"{where}: the controller makes the Service {subdomain}; the file must not"
            for template in pod_templates(doc):
                assert template["spec"].get("subdomain") in (None, subdomain), f"{where}: a pod subdomain besides network.subdomain"
            continue
        if subdomain is not None:
            service = services[subdomain]
            assert service["spec"].get("clusterIP") == "None", f"{where}: Service {subdomain} is not headless"
            for labels in labels_of:
                assert service["spec"]["selector"].items() <= labels.items(), f"{where}: Service {subdomain} does not select its pods"
    pods = kubernetes_pods(deployed)
    clusters = {p.env.get("TFBOOT_CLUSTER") for p in pods}
    if clusters == {None}:
        assert all("PET_NNODES" in p.env for p in pods), f"{name}: pods without TFBOOT_CLUSTER and no platform's variables"
        return
    assert len(clusters) == 1, f"{name}: the pods' TFBOOT_CLUSTER differ: {sorted(map(str, clusters))}"
    cluster = parse_cluster(clusters.pop())
    hostnames = [p.hostname for p in pods]
    assert len(set(hostnames)) == len(hostnames), f"{name}: two pods with one hostname"
    peers = set()
    for pod in pods:
        template = pod.env.get("TFBOOT_PEER_TEMPLATE")
        assert "TFBOOT_CHIEF_AT_ORDINAL_0" not in pod.env, f"{name}: TFBOOT_CHIEF_AT_ORDINAL_0 is not modelled here"
        if template:
            assert not set(re.findall(r"\{(\w+)\}", template)) - {"type", "index"}, f"{name}: {template}: only {{type}} {{index}} modelled"
            task_type = pod.env.get("TFBOOT_TASK_TYPE") or (next(iter(cluster)) if len(cluster) == 1 else None)
            assert task_type in cluster, f"{name}: pod {pod.name}: task type {task_type} is not in {cluster}"
            index = int(pod.env["JOB_COMPLETION_INDEX"])
            own = template.format(type=task_type, index=index)
            assert own == pod.hostname, f"{name}: pod {pod.hostname} is {task_type}:{index}, whose name by {template} is {own}"
            peers |= {template.format(type=t, index=i) for t, n in cluster.items() for i in range(n)}
        elif (m := STATEFULSET_POD.match(pod.hostname)):
            assert m["type"] in cluster and int(m["ordinal"]) < cluster[m["type"]], \
                f"{name}: pod {pod.hostname} is no task of {cluster} (<prefix>-<type>-<ordinal>)"
            peers |= {f"{m['prefix']}-{t}-{i}" for t, n in cluster.items() for i in range(n)}
        elif (m := INDEXED_POD.match(pod.hostname)):
            assert len(cluster) == 1, f"{name}: hostname {pod.hostname} names no task type of {cluster}: give TFBOOT_TASK_TYPE"
            peers |= {f"{m['prefix']}-{i}" for i in range(next(iter(cluster.values())))}
        else:
            pytest.fail(f"{name}: hostname {pod.hostname} has no task in it (<prefix>-<type>-<ordinal>, no leading zeros)")
    assert peers == set(hostnames), \
        f"{name}: peers {sorted(peers - set(hostnames))} have no pod, pods {sorted(set(hostnames) - peers)} are no peer"


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_names_agree(name):
    check_names(name, load_manifest(name))


def check_resources(name: str, docs: list[dict], tfboot_options: dict) -> None:
    """Every task that computes requests GPUs (the examples' images are GPU images): every pod but a
    ParameterServerStrategy's chief and ps; a PyTorch pod as many as --nproc-per-node starts
    processes (the TrainJob's numProcPerNode). A checkpoint volume outlives the pods: a claim of the
    file, ReadWriteMany, mounted at /checkpoints in every pod of a Job (and the chief of a
    StatefulSet job), and a PyTorch trainer's --checkpoint-dir. A Job and a JobSet are deleted some
    time after they end (ttlSecondsAfterFinished)."""
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    for claim in claims.values():
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"], f"{name}: claim {claim['metadata']['name']}: every node mounts it"
    mounted_anywhere = False
    for doc in docs:
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        if doc["kind"] in ("Job", "JobSet"):
            assert isinstance(doc["spec"].get("ttlSecondsAfterFinished"), int), f"{where}: ttlSecondsAfterFinished"
        if doc["kind"] == "TrainJob":
            trainer = doc["spec"]["trainer"]
            assert trainer["resourcesPerNode"]["limits"].get(GPU) == trainer["numProcPerNode"], f"{where}: GPUs = numProcPerNode"
            continue
        for template in pod_templates(doc):
            container = template["spec"]["containers"][0]
            env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
            cluster = env.get("TFBOOT_CLUSTER", "")
            task_type = env.get("TFBOOT_TASK_TYPE") or (doc["metadata"]["name"].rsplit("-", 1)[-1] if doc["kind"] == "StatefulSet" else "worker")
            gpus = (container.get("resources", {}).get("limits") or {}).get(GPU)
            if "ps=" not in cluster or task_type == "worker":
                assert isinstance(gpus, int) and gpus >= 1, f"{where}: a {task_type} task requests no {GPU}"
            options, command = split_tfboot_args([*container.get("command", [])[1:], *(container.get("args") or [])],
                                                 tfboot_options["options"])
            if "--nproc-per-node" in options:
                nproc = options[options.index("--nproc-per-node") + 1]
                assert nproc == str(gpus), f"{where}: --nproc-per-node {nproc} for {gpus} GPUs"
            volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
            mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == CHECKPOINT_DIR]
            if mounts:
                mounted_anywhere = True
                claim = volumes[mounts[0]["name"]].get("persistentVolumeClaim", {}).get("claimName")
                assert claim in claims, f"{where}: {CHECKPOINT_DIR} is no claim of the file ({claim})"
                if "--checkpoint-dir" in command:
                    assert command[command.index("--checkpoint-dir") + 1] == CHECKPOINT_DIR, f"{where}: --checkpoint-dir"
            if doc["kind"] in ("Job", "JobSet") or task_type == "chief":
                assert mounts, f"{where}: no checkpoint volume at {CHECKPOINT_DIR}: a replaced pod could not resume"
            if "train_torch.py" in command:
                assert "--checkpoint-dir" in command, f"{where}: train_torch.py keeps its checkpoint in the pod without --checkpoint-dir"
    if any(d["kind"] != "TrainJob" for d in docs):
        assert mounted_anywhere, f"{name}: no checkpoint volume"


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_requests_gpus_keeps_checkpoints_and_cleans_up(name, tfboot_options):
    check_resources(name, load_manifest(name), tfboot_options)


NON_ROOT_MARKER = "# non-root (optional)"
LOG_ROOT = "/logs"              # tfboot's default --log-root: unwritable, it exits 4 (which a Job retries)
SHM = "/dev/shm"                # the runtime's default is 64 MiB: too small for NCCL and DataLoader workers


def seconds(duration: str) -> float:
    """A tfboot duration as the examples write it: 90, 90s, 2m."""
    number, unit = re.fullmatch(r"(\d+)(s|m)?", duration).groups()
    return int(number) * (60 if unit == "m" else 1)


def trainer_pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    """(where, pod spec) of every workload, a TrainJob as the Trainer's pods."""
    return [(f"{doc['kind']} {doc['metadata']['name']}", template["spec"])
            for doc in as_deployed(docs) for template in pod_templates(doc)]


def writable_volume(pod: dict, path: str, where: str) -> dict:
    container = pod["containers"][0]
    mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == path]
    assert len(mounts) == 1 and not mounts[0].get("readOnly"), f"{where}: no writable volume at {path}"
    volume = {v["name"]: v for v in pod.get("volumes", [])}[mounts[0]["name"]]
    assert "emptyDir" in volume, f"{where}: {path} is not an emptyDir"
    return volume["emptyDir"] or {}


def check_real_pods(name: str, docs: list[dict], framework: str) -> None:
    """What a pod on a shared GPU cluster needs beside the GPUs: CPU and memory requests (a pod
    without them is BestEffort, evicted first) and a memory limit; a writable /logs (tfboot's log
    root) and /tmp; for PyTorch a memory-backed /dev/shm; and a grace period after a stop signal
    longer than TFBOOT_STOP_GRACE, so that the kubelet does not kill a trainer tfboot still lets save."""
    for where, pod in trainer_pod_specs(docs):
        where = f"{name}: {where}"
        container = pod["containers"][0]
        resources = container.get("resources", {})
        requests = resources.get("requests", {})
        assert {"cpu", "memory"} <= set(requests), f"{where}: no CPU and memory requests: BestEffort, evicted first"
        assert "memory" in resources.get("limits", {}), f"{where}: no memory limit"
        writable_volume(pod, LOG_ROOT, where)
        writable_volume(pod, "/tmp", where)
        if framework == "pytorch":
            assert writable_volume(pod, SHM, where).get("medium") == "Memory", f"{where}: {SHM} is not in memory"
        grace = pod.get("terminationGracePeriodSeconds", 30)
        stop_grace = seconds(env_value(container, "TFBOOT_STOP_GRACE") or "30s")
        assert grace >= stop_grace + 10, \
            f"{where}: terminationGracePeriodSeconds {grace} leaves no margin over TFBOOT_STOP_GRACE ({stop_grace} s)"


def check_non_root(name: str, docs: list[dict]) -> None:
    """The non-root variant: a user other than root, a read-only root file system, and every
    path tfboot and a trainer write (/logs, /tmp) an emptyDir."""
    for where, pod in trainer_pod_specs(docs):
        where = f"{name} (non-root): {where}"
        security = pod.get("securityContext", {})
        assert security.get("runAsNonRoot") is True and security.get("runAsUser", 0) > 0, f"{where}: pod securityContext"
        container = pod["containers"][0].get("securityContext", {})
        assert container.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem"
        assert container.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation"
        writable_volume(pod, LOG_ROOT, where)
        writable_volume(pod, "/tmp", where)


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_is_ready_for_real_pods(name):
    check_real_pods(name, load_manifest(name), example_framework(name))


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_manifest_has_a_non_root_variant_that_passes_the_schemas(name):
    variant = load_manifest_with(name, NON_ROOT_MARKER)
    check_manifest_schemas(variant, f"{name} (non-root)")
    check_non_root(name, variant)
    check_real_pods(f"{name} (non-root)", variant, example_framework(name))


def load_manifest_with(name: str, marker: str, required: bool = True) -> list[dict]:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        text, uncommented = with_control_secret(f.read(), marker)
    assert uncommented or not required, f"{name}: no lines under {marker!r}"
    return [doc for doc in yaml.safe_load_all(text) if doc]


def check_kueue(name: str, docs: list[dict], variant: list[dict]) -> None:
    """A Job or JobSet example has a Kueue variant: the lines under KUEUE_MARKER put the queue label
    on the Job (JobSet) and create it suspended; without them it is neither."""
    for doc, queued in zip(docs, variant):
        if doc["kind"] not in ("Job", "JobSet"):
            continue
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        assert not doc["spec"].get("suspend") and KUEUE_QUEUE_LABEL not in doc["metadata"].get("labels", {}), where
        assert queued["spec"].get("suspend") is True, f"{where}: the Kueue variant must be created suspended"
        assert queued["metadata"].get("labels", {}).get(KUEUE_QUEUE_LABEL), f"{where}: the Kueue variant has no {KUEUE_QUEUE_LABEL}"
        rest = {**queued, "spec": {k: v for k, v in queued["spec"].items() if k != "suspend"},
                "metadata": {**queued["metadata"], "labels": {k: v for k, v in queued["metadata"].get("labels", {}).items()
                                                              if k != KUEUE_QUEUE_LABEL}}}
        if not rest["metadata"]["labels"]:
            del rest["metadata"]["labels"]
        assert rest == doc, f"{where}: the Kueue lines change more than suspend and the queue label"


JOB_EXAMPLES = [n for n in KUBERNETES_EXAMPLES if any(d["kind"] in ("Job", "JobSet") for d in load_manifest(n))]


@pytest.mark.parametrize("name", JOB_EXAMPLES)
def test_job_has_a_kueue_variant_that_passes_the_schemas(name):
    variant = load_manifest_with(name, KUEUE_MARKER)
    check_manifest_schemas(variant, f"{name} (Kueue on)")
    check_kueue(name, load_manifest(name), variant)


def job_spec_of(docs: list[dict], index: int = 0) -> dict:
    return [s for d in docs for s in job_specs(d)][index]


def first_rule_on_exit_codes(docs: list[dict]) -> dict:
    return next(r for r in job_spec_of(docs)["podFailurePolicy"]["rules"] if r.get("onExitCodes"))


def set_env(docs: list[dict], variable: str, value: str) -> None:
    for doc in docs:
        for template in pod_templates(doc):
            for item in template["spec"]["containers"][0]["env"]:
                if item["name"] == variable:
                    item["value"] = value


def mutate(docs, kind, path, value):
    doc = next(d for d in docs if d["kind"] == kind)
    *parents, last = path
    for key in parents:
        doc = doc[key]
    doc[last] = value


# Each check above, on a deliberately broken copy of a manifest: (manifest, what is broken, how,
# the check, what its message must say). A check that passes these cannot pass vacuously.
BROKEN = [
    ("indexed-job.yaml", "restartPolicy OnFailure",
     lambda d: mutate(d, "Job", ["spec", "template", "spec", "restartPolicy"], "OnFailure"), "job", "restartPolicy Never"),
    ("jobset.yaml", "a JobSet Job's restartPolicy OnFailure",
     lambda d: job_spec_of(d, 1)["template"]["spec"].update(restartPolicy="OnFailure"), "job", "restartPolicy Never"),
    ("indexed-job.yaml", "exit codes out of order",
     lambda d: job_spec_of(d)["podFailurePolicy"]["rules"][1]["onExitCodes"].update(values=[6, 5, 2]), "job", "ordered"),
    ("pytorch-jobset.yaml", "an exit code twice",
     lambda d: job_spec_of(d)["podFailurePolicy"]["rules"][1]["onExitCodes"].update(values=[2, 5, 5, 6]), "job", "unique"),
    ("indexed-job.yaml", "exit code 0 with In",
     lambda d: first_rule_on_exit_codes(d)["onExitCodes"].update(values=[0, 200]), "job", "0 with operator In"),
    ("jobset.yaml", "containerName of no container",
     lambda d: first_rule_on_exit_codes(d)["onExitCodes"].update(containerName="trainr"), "job", "containerName trainr"),
    ("pytorch-indexed-job.yaml", "FailIndex without backoffLimitPerIndex",
     lambda d: job_spec_of(d)["podFailurePolicy"]["rules"][1].update(action="FailIndex"), "job", "FailIndex needs backoffLimitPerIndex"),
    ("indexed-job.yaml", "onExitCodes and onPodConditions in one rule",
     lambda d: first_rule_on_exit_codes(d).update(onPodConditions=[{"type": "DisruptionTarget", "status": "True"}]), "job",
     "not both"),
    ("statefulset.yaml", "serviceName of no Service",
     lambda d: mutate(d, "StatefulSet", ["spec", "serviceName"], "mnist-svc"), "names", "serviceName mnist-svc"),
    ("indexed-job.yaml", "subdomain of no Service",
     lambda d: mutate(d, "Job", ["spec", "template", "spec", "subdomain"], "resnet-svc"), "names", "subdomain resnet-svc"),
    ("parameter-server.yaml", "a Service renamed",
     lambda d: mutate(d, "Service", ["metadata", "name"], "recsys-svc"), "names", "serviceName recsys"),
    ("pytorch-indexed-job.yaml", "a Service that selects other pods",
     lambda d: mutate(d, "Service", ["spec", "selector"], {"app.kubernetes.io/name": "other"}), "names", "does not select"),
    ("jobset.yaml", "a peer template of another job index",
     lambda d: set_env(d, "TFBOOT_PEER_TEMPLATE", "bert-{type}-1-{index}"), "names", "name by"),
    ("pytorch-jobset.yaml", "a peer template of another JobSet",
     lambda d: set_env(d, "TFBOOT_PEER_TEMPLATE", "vits-node-0-{index}"), "names", "name by"),
    ("statefulset.yaml", "replicas beyond TFBOOT_CLUSTER",
     lambda d: mutate(d, "StatefulSet", ["spec", "replicas"], 4), "names", "no task of"),
    ("statefulset.yaml", "TFBOOT_CLUSTER beyond the replicas",
     lambda d: set_env(d, "TFBOOT_CLUSTER", "worker=4"), "names", "have no pod"),
    ("indexed-job.yaml", "completions below TFBOOT_CLUSTER",
     lambda d: job_spec_of(d).update(completions=2, parallelism=2), "names", "have no pod"),
    ("parameter-server.yaml", "a StatefulSet named after no task type",
     lambda d: mutate(d, "StatefulSet", ["metadata", "name"], "recsys-master"), "names", "names no task type"),
    ("indexed-job.yaml", "no GPU", lambda d: job_spec_of(d)["template"]["spec"]["containers"][0].pop("resources"),
     "resources", "requests no nvidia.com/gpu"),
    ("pytorch-jobset.yaml", "--nproc-per-node beside the GPUs",
     lambda d: job_spec_of(d)["template"]["spec"]["containers"][0]["resources"]["limits"].update({GPU: 4}),
     "resources", "--nproc-per-node 2 for 4 GPUs"),
    ("jobset.yaml", "no checkpoint volume",
     lambda d: job_spec_of(d)["template"]["spec"]["containers"][0].pop("volumeMounts"), "resources", "no checkpoint volume"),
    ("statefulset.yaml", "a checkpoint claim the file lacks",
     lambda d: mutate(d, "PersistentVolumeClaim", ["metadata", "name"], "other"), "resources", "no claim of the file"),
    ("pytorch-indexed-job.yaml", "no ttlSecondsAfterFinished",
     lambda d: job_spec_of(d).pop("ttlSecondsAfterFinished"), "resources", "ttlSecondsAfterFinished"),
    ("statefulset.yaml", "a TensorFlow GPU job whose policy admits fixed ports only",
     lambda d: None, "policy-fixed-ports", "admit every TCP port"),
    ("parameter-server.yaml", "a ParameterServerStrategy job whose policy admits every port",
     lambda d: None, "policy-every-port", "admits every port"),
    ("indexed-job.yaml", "a header that applies another job's policy",
     lambda d: None, "policy-header", "applies"),
    ("indexed-job.yaml", "a scrape the policy does not admit",
     lambda d: None, "policy-no-scrape", "admits Prometheus to []"),
    ("indexed-job.yaml", "Prometheus admitted to every port",
     lambda d: None, "policy-scrape-every-port", "fixed ports only"),
    ("indexed-job.yaml", "no CPU request beside the GPU",
     lambda d: job_spec_of(d)["template"]["spec"]["containers"][0]["resources"]["requests"].pop("cpu"),
     "real-pods", "no CPU and memory requests"),
    ("statefulset.yaml", "no /logs volume",
     lambda d: d[2]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].pop(0), "real-pods", "no writable volume at /logs"),
    ("pytorch-indexed-job.yaml", "a /dev/shm on disk",
     lambda d: job_spec_of(d)["template"]["spec"]["volumes"][2]["emptyDir"].pop("medium"), "real-pods", "/dev/shm is not in memory"),
    ("jobset.yaml", "a grace period shorter than tfboot's stop grace",
     lambda d: job_spec_of(d)["template"]["spec"].update(terminationGracePeriodSeconds=60), "real-pods", "leaves no margin"),
    ("jobset.yaml", "a Kueue variant that is not suspended",
     lambda d: None, "kueue", "created suspended"),
]


def run_broken_check(check: str, name: str, docs: list[dict], tfboot_options: dict, broken: bool = False) -> None:
    """check on docs; for the checks of what is not in docs (the NetworkPolicy, the header, the
    Kueue variant), broken=True breaks that instead."""
    policies = load_manifest(NETWORK_POLICY_FILE)
    header = manifest_header(name)
    if check == "job":
        check_job_rules_of_manifest(name, docs)
    elif check == "names":
        check_names(name, docs)
    elif check == "resources":
        check_resources(name, docs, tfboot_options)
    elif check == "real-pods":
        check_real_pods(name, docs, example_framework(name))
    elif check.startswith("policy"):
        policy_name = APPLY_POLICY.search(header)["value"]
        policy = next(p for p in policies if p["metadata"]["name"] == policy_name)
        if not broken:
            pass
        elif check == "policy-fixed-ports":
            policy["spec"]["ingress"][0]["ports"] = [{"protocol": "TCP", "port": 2220}, {"protocol": "TCP", "port": 2222}]
        elif check == "policy-every-port":
            policy["spec"]["ingress"][0]["ports"] = [{"protocol": "TCP"}]
        elif check == "policy-no-scrape":
            policy["spec"]["ingress"] = policy["spec"]["ingress"][:1]
        elif check == "policy-scrape-every-port":
            policy["spec"]["ingress"][1]["ports"] = [{"protocol": "TCP"}]
        elif check == "policy-header":
            header = header.replace(f"={policy_name}", "=mnist" if policy_name != "mnist" else "=resnet")
        check_network_policy(name, docs, policies, header)
    elif check == "kueue":
        variant = load_manifest_with(name, KUEUE_MARKER)
        if broken:
            next(d for d in variant if d["kind"] in ("Job", "JobSet"))["spec"].pop("suspend")
        check_kueue(name, docs, variant)


@pytest.mark.parametrize("file, broken, change, check, message", BROKEN, ids=[b[1] for b in BROKEN])
def test_each_check_fails_on_a_broken_manifest(file, broken, change, check, message, tfboot_options):
    name = f"kubernetes/{file}"
    run_broken_check(check, name, load_manifest(name), tfboot_options)     # the manifest as it is passes
    docs = load_manifest(name)
    change(docs)
    with pytest.raises((AssertionError, pytest.fail.Exception), match=re.escape(message)):
        run_broken_check(check, name, docs, tfboot_options, broken=True)


def test_job_rules_allow_fail_index_with_backoff_limit_per_index():
    spec = copy.deepcopy(job_spec_of(load_manifest("kubernetes/indexed-job.yaml")))
    spec["podFailurePolicy"]["rules"][1]["action"] = "FailIndex"
    spec["backoffLimitPerIndex"] = 1
    check_job_api_rules(spec, "FailIndex with backoffLimitPerIndex")


# --------------------------------------------------------------------------------------------
# TF_CONFIG, or torchrun's variables, in every pod


def test_every_example_has_its_block_in_the_readme():
    assert set(readme_blocks()) == {*TENSORFLOW_KUBERNETES_EXAMPLES, *COMPOSE_FILES, TFJOB}
    assert set(readme_torch_blocks()) == set(TORCH_KUBERNETES_EXAMPLES)


def run_tfboot_in_pods(pods: list[Pod], argv_of) -> dict[str, tuple[int, str, str]]:
    """argv_of(pod) (tfboot, with its DNS wait) in a pod of the namespace network for each example
    pod, all at once."""
    with ClusterNetwork(service="", namespace=pods[0].namespace or "default", cluster_domain="cluster.local") as net:
        harness_pods = {}
        for pod in pods:
            resolv = f"nameserver {net.dns_ip}\noptions ndots:0\n" if pod.compose else None
            harness_pods[pod.name] = net.add_pod(pod.name, hostname=pod.hostname, service=pod.subdomain, resolv=resolv)
        for pod in pods:
            if pod.dns_names:
                net.publish_name(pod.dns_names[0], harness_pods[pod.name].ip, *pod.dns_names[1:])
        procs = {pod.name: net.run(harness_pods[pod.name], argv_of(pod), env=pod.env) for pod in pods}
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            results[name] = (proc.returncode, out, err)
        return results


def example_pods(example: str, readme_json: str) -> list[Pod]:
    if example in KUBERNETES_EXAMPLES:
        return kubernetes_pods(as_deployed(load_manifest(example)))
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


@pytest.mark.parametrize("example", [*TENSORFLOW_KUBERNETES_EXAMPLES, *COMPOSE_FILES, TFJOB])
@pytest.mark.root
def test_tf_config_in_every_pod_is_the_one_in_the_readme(example, tfboot):
    blocks = readme_blocks()
    assert example in blocks, f"docs/deploying.md has no TF_CONFIG block for {example}"
    documented_pod, documented_json = blocks[example]
    documented = json.loads(documented_json)
    pods = example_pods(example, documented_json)
    assert documented_pod in {n for p in pods for n in p.own_names}, \
        f"{example}: docs/deploying.md's pod {documented_pod} is not one of {[p.name for p in pods]}"

    results = run_tfboot_in_pods(pods, lambda pod: [tfboot, "--print", "--wait", "20s", *pod.args])

    claimed = []
    for pod in pods:
        code, out, err = results[pod.name]
        assert code == 0, f"{example}: pod {pod.name} (env {pod.env}): exit {code}\n{err}"
        if documented_pod in pod.own_names:
            assert ordered(out) == ordered(documented_json), f"{example}: pod {pod.name}:\n got {out}\ndocs/deploying.md {documented_json}"
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


@pytest.mark.parametrize("example", TORCH_KUBERNETES_EXAMPLES)
@pytest.mark.root
def test_torch_variables_in_every_process_are_the_ones_in_the_readme(example, tfboot, tfboot_options, tmp_path):
    """Every pod's tfboot, with the example's options and environment, waits for the names,
    meets the others on the control port and starts its processes, each of which prints its
    torchrun variables instead of training: the documented pod's are exactly docs/deploying.md's, and
    together the pods hold every rank once, with one master."""
    blocks = readme_torch_blocks()
    assert example in blocks, f"docs/deploying.md has no torch_env block for {example}"
    documented_pod, documented = blocks[example]
    pods = kubernetes_pods(as_deployed(load_manifest(example)))
    assert documented_pod in {n for p in pods for n in p.own_names}, \
        f"{example}: docs/deploying.md's pod {documented_pod} is not one of {[p.name for p in pods]}"

    def argv(pod: Pod) -> list[str]:
        options, _ = split_tfboot_args(pod.args, tfboot_options["options"])
        return [tfboot, "--wait", "20s", "--log-root", str(tmp_path / pod.name), *options,
                sys.executable, "-c", PRINT_TORCH_VARIABLES]

    results = run_tfboot_in_pods(pods, argv)

    master = {key: documented[0][key] for key in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")}
    ranks, master_pods = [], []
    for pod in pods:
        code, out, err = results[pod.name]
        assert code == 0, f"{example}: pod {pod.name} (env {pod.env}): exit {code}\n{out}\n{err}"
        assert "did you mean" not in err, f"{example}: pod {pod.name}: {err}"
        processes = sorted((json.loads(m) for m in re.findall(r"TORCH_VARIABLES (\{.*\})", out)),
                           key=lambda p: int(p["LOCAL_RANK"]))
        assert processes, f"{example}: pod {pod.name}: no process ran\n{out}\n{err}"
        if documented_pod in pod.own_names:
            assert processes == documented, f"{example}: pod {pod.name}:\n got {processes}\ndocs/deploying.md {documented}"
        assert [p["LOCAL_RANK"] for p in processes] == [str(i) for i in range(len(processes))], f"{example}: {pod.name}"
        for p in processes:
            assert {key: p[key] for key in master} == master, f"{example}: pod {pod.name}: {p}"
            assert p["LOCAL_WORLD_SIZE"] == str(len(processes)) and p["GROUP_RANK"] == processes[0]["GROUP_RANK"], p
            assert int(p["RANK"]) == int(p["GROUP_RANK"]) * len(processes) + int(p["LOCAL_RANK"]), p
        if master["MASTER_ADDR"].split(".")[0] in pod.own_names:
            assert processes[0]["GROUP_RANK"] == "0", f"{example}: the master {pod.name} is not node 0"
            master_pods.append(pod.name)
        ranks += [int(p["RANK"]) for p in processes]
    assert sorted(ranks) == list(range(int(master["WORLD_SIZE"]))), f"{example}: ranks {sorted(ranks)}"
    assert len(master_pods) == 1, f"{example}: MASTER_ADDR {master['MASTER_ADDR']} names pods {master_pods}"


def test_image_cmd_is_the_dockerfile_cmd():
    with open(os.path.join(REPO_DIR, "docker", "Dockerfile")) as f:
        assert f'CMD {json.dumps(IMAGE_CMD)}' in f.read()
