"""The deployment examples in examples/: the Kubernetes manifests pass the API schemas (strict: no
unknown field), with and without their optional control secret, and deploy the way tfboot needs
(job supervision included: control port, exit codes in the Jobs' failure policies, idle StatefulSets,
a NetworkPolicy that admits only the job's pods), give tfboot only options and TFBOOT_* variables
its --help lists, the compose files pass `docker compose config`, and in every pod of every example
tfboot prints exactly the TF_CONFIG that examples/README.md shows, or, for the PyTorch examples,
starts the job and gives each process exactly the torchrun variables README.md shows.

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

from harness.cluster import ClusterNetwork
from kubeflow_trainer import trainjob_as_jobset
from paths import REPO_DIR
from workloads import IMAGE_CMD, Pod, compose_containers, kubernetes_pods, tfjob_pods

EXAMPLES_DIR = os.path.join(REPO_DIR, "examples")
README = os.path.join(EXAMPLES_DIR, "README.md")
KUBERNETES_FILES = sorted(f"kubernetes/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "kubernetes")) if f.endswith(".yaml"))
# Files that go with every example rather than being one: they create no pods.
NETWORK_POLICY_FILE = "kubernetes/networkpolicy.yaml"
CONTROL_SECRET_FILE = "kubernetes/control-secret.yaml"
KUBERNETES_EXAMPLES = [f for f in KUBERNETES_FILES if f not in (NETWORK_POLICY_FILE, CONTROL_SECRET_FILE)]
COMPOSE_FILES = sorted(f"compose/{f}" for f in os.listdir(os.path.join(EXAMPLES_DIR, "compose")) if f.endswith(".yaml"))
COMPOSE_PROJECT = "mnist"       # `docker compose -p mnist ...`, as examples/README.md says
TFJOB = "tfjob"                 # the README's operator example (no file: the operator writes TF_CONFIG)
# An old Kubernetes still in use (everything the examples rely on is older) and the newest
# release the validator knows.
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

# tfboot's job supervision (README): its control port, and the exit codes a Job's failure policy
# must tell apart.
CONTROL_PORT = 2220
CONTROL_PORT_NAME = "tfboot-control"
EXIT_JOB_STOPPED = 200          # another task failed or the coordinator was lost: not this task's fault
EXIT_NEVER_RETRIED = {2, 5, 6}  # configuration error, start barrier incomplete, environment check failed
# The optional secret's lines in the manifests: comment lines right below this marker, at its indent.
SECRET_MARKER = "# control secret (optional)"
SECRET_PATH = "/var/run/secrets/tfboot/secret"

# The ```json block right after "<!-- tf_config: <example> pod=<pod> -->" in examples/README.md
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
TWINS_BESIDES_OPTIONS = {"TFBOOT_POD_INDEX", "TFBOOT_LOG_DIR"}   # README: read, though no option's twin

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
    with open(README) as f:
        text = f.read()
    blocks = {}
    for m in README_BLOCK.finditer(text):
        assert m["example"] not in blocks, f"examples/README.md: two TF_CONFIG blocks for {m['example']}"
        blocks[m["example"]] = (m["pod"], m["json"])
    return blocks


def readme_torch_blocks() -> dict[str, tuple[str, list[dict[str, str]]]]:
    """example -> (pod, [{variable: value} for each process of the pod, in the README's order])."""
    with open(README) as f:
        text = f.read()
    blocks = {}
    for m in README_TORCH_BLOCK.finditer(text):
        assert m["example"] not in blocks, f"examples/README.md: two torch_env blocks for {m['example']}"
        processes = [dict(item.split("=", 1) for item in line.split()) for line in m["text"].splitlines() if line.strip()]
        for process in processes:
            assert sorted(process) == sorted(TORCH_VARIABLES), f"examples/README.md: {m['example']}: {sorted(process)}"
        blocks[m["example"]] = (m["pod"], processes)
    return blocks


def load_manifest(name: str) -> list[dict]:
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def with_control_secret(text: str) -> tuple[str, int]:
    """The manifest as a user who turns the control secret on makes it: every comment line right
    below a SECRET_MARKER line, at the marker's indent, uncommented. Returns the text and the
    number of lines uncommented."""
    lines = text.splitlines(keepends=True)
    out, uncommented, i = [], 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.lstrip().startswith(SECRET_MARKER):
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
    at `--` (README: Command line). An option tfboot does not have fails the test."""
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
    doc = copy.deepcopy(load_manifest("kubernetes/statefulset.yaml")[1])
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
    never retries exit 2, 5 or 6, counts a task's own failure and does not count the 200 of the
    tasks it stopped (a JobSet's Jobs too: a preempted pod, replaced in its Job, costs no JobSet
    restart, and a task's own failure restarts the JobSet once)."""
    for doc in load_manifest(name):
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        if doc["kind"] == "TrainJob":
            # Its runtime owns the Job and the container's ports: a TrainJob can declare neither
            # the control port nor a podFailurePolicy (examples/README.md says what that means).
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
            stopped = exit_code_action(spec, container, EXIT_JOB_STOPPED)
            assert stopped == "Ignore", f"{where}: exit {EXIT_JOB_STOPPED}: {stopped}"
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


@pytest.mark.parametrize("name", KUBERNETES_EXAMPLES)
def test_network_policy_admits_only_the_jobs_own_pods(name):
    """One NetworkPolicy selects every pod of the example and no other example's pod, and admits
    to its pods' ports (TensorFlow's and the control port) exactly those pods. PyTorch's pods
    admit each other on every TCP port: Gloo and NCCL connect the ranks on ports the kernel picks."""
    pods = kubernetes_pods(as_deployed(load_manifest(name)))
    others = [p for other in KUBERNETES_EXAMPLES if other != name for p in kubernetes_pods(as_deployed(load_manifest(other)))]
    policies = [d for d in load_manifest(NETWORK_POLICY_FILE) if any(selects(d["spec"]["podSelector"], p.labels) for p in pods)]
    assert len(policies) == 1, f"{name}: {len(policies)} NetworkPolicies select its pods"
    policy = policies[0]
    where = f"{NETWORK_POLICY_FILE}: {policy['metadata']['name']}"
    assert all(selects(policy["spec"]["podSelector"], p.labels) for p in pods), f"{where}: misses pods of {name}"
    assert not any(selects(policy["spec"]["podSelector"], p.labels) for p in others), f"{where}: selects other pods"
    assert policy["spec"]["policyTypes"] == ["Ingress"], where
    admitted_ports, every_port = set(), False
    for rule in policy["spec"]["ingress"]:
        assert rule.get("from"), f"{where}: a rule without `from` admits everyone"
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
    if name in TORCH_KUBERNETES_EXAMPLES:
        assert every_port and not admitted_ports, f"{where}: the ranks' ports are not known in advance: admit every TCP port"
        return
    assert not every_port, f"{where}: admits every port"
    assert admitted_ports == {port for p in pods for port in p.ports}, f"{where}: ports {admitted_ports}"
    assert CONTROL_PORT in admitted_ports, where


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
            assert spec.get("podManagementPolicy") == "Parallel", f"{where}: OrderedReady starts the pods one by one (README)"
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
    assert example in blocks, f"examples/README.md has no TF_CONFIG block for {example}"
    documented_pod, documented_json = blocks[example]
    documented = json.loads(documented_json)
    pods = example_pods(example, documented_json)
    assert documented_pod in {n for p in pods for n in p.own_names}, \
        f"{example}: README's pod {documented_pod} is not one of {[p.name for p in pods]}"

    results = run_tfboot_in_pods(pods, lambda pod: [tfboot, "--print", "--wait", "20s", *pod.args])

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


@pytest.mark.parametrize("example", TORCH_KUBERNETES_EXAMPLES)
@pytest.mark.root
def test_torch_variables_in_every_process_are_the_ones_in_the_readme(example, tfboot, tfboot_options, tmp_path):
    """Every pod's tfboot, with the example's options and environment, waits for the names,
    meets the others on the control port and starts its processes, each of which prints its
    torchrun variables instead of training: the documented pod's are exactly the README's, and
    together the pods hold every rank once, with one master."""
    blocks = readme_torch_blocks()
    assert example in blocks, f"examples/README.md has no torch_env block for {example}"
    documented_pod, documented = blocks[example]
    pods = kubernetes_pods(as_deployed(load_manifest(example)))
    assert documented_pod in {n for p in pods for n in p.own_names}, \
        f"{example}: README's pod {documented_pod} is not one of {[p.name for p in pods]}"

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
            assert processes == documented, f"{example}: pod {pod.name}:\n got {processes}\nREADME {documented}"
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
