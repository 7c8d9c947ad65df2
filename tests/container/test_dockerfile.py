"""docker/Dockerfile, built for real with buildah and run as the container of two pods.

The build uses no registry: `FROM debian:bookworm` resolves to a debootstrapped local image, and
BASE_IMAGE (tensorflow/tensorflow in production) is that image plus python3 (see images.py). The
built image's root filesystem then runs in pods of the namespace network (tests/harness/cluster.py)
the way a container runtime would run it: chrooted into the rootfs, in the image's WORKDIR, with
its ENTRYPOINT + CMD and Env, the pod's /etc/hosts and resolv.conf bind-mounted over the image's,
and PID 1 of a new PID namespace. The image's train.py is swapped for a probe that prints what
tfboot handed it (TensorFlow is not in the stand-in base image).

Run as root; the first run debootstraps Debian and downloads the build packages (several
minutes), later runs reuse the cache in /var/cache/tfboot-test (images.py).
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import images
from image_pods import prepare_rootfs, probe_output, start_container, wait_for_log
from harness.cluster import ClusterNetwork
from paths import REPO_DIR

ENTRYPOINT = ["/usr/local/bin/tfboot"]
CMD = ["python", "train.py"]
WORKDIR = "/app"

class Built:
    def __init__(self, buildah, trainer, tfboot_stage, context):
        self.buildah, self.trainer, self.tfboot_stage, self.context = buildah, trainer, tfboot_stage, context


def _not_context(directory, names):
    """What the snapshot of the checkout leaves out: VCS data, virtualenvs, build trees, caches."""
    top = os.path.samefile(directory, REPO_DIR)
    return [n for n in names if n in ("__pycache__", ".pytest_cache")
            or (top and (n in (".git", "logs", "bench-results") or n.startswith((".venv", "build"))))]


def _say(message):
    print(f"[test_dockerfile] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """docker/Dockerfile built twice: the whole file (trainer) and --target tfboot."""
    missing = [tool for tool in ("buildah", "debootstrap") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run scripts/setup-containers")
    log = str(tmp_path_factory.mktemp("build") / "build.log")
    buildah = images.Buildah()
    buildah.remove_stale()
    buildah.limit_cache()
    pid = os.getpid()
    trainer = f"localhost/{images.NAME_PREFIX}trainer-{pid}:latest"
    tfboot_stage = f"localhost/{images.NAME_PREFIX}tfboot-{pid}:latest"
    started = time.monotonic()
    steps = []

    def step(name, fn, *args, **kwargs):
        t = time.monotonic()
        result = fn(*args, **kwargs)
        steps.append(f"{name} {time.monotonic() - t:.0f}s")
        return result

    # Both builds read one snapshot of the checkout: sources edited meanwhile cannot make the two
    # images differ (and an unchanged snapshot hits buildah's layer cache, whatever its path).
    context = str(tmp_path_factory.mktemp("context") / "repo")
    shutil.copytree(REPO_DIR, context, symlinks=True, ignore=_not_context)
    try:
        rootfs = step("debootstrap", images.debootstrap_rootfs, log=log)
        step("debian image", images.ensure_debian_image, buildah, rootfs)
        python_image = step("python image", images.ensure_python_image, buildah, log=log)
        dockerfile = os.path.join(context, "docker", "Dockerfile")
        step("bud", buildah.bud, containerfile=dockerfile, context=context, tag=trainer, log=log,
             build_args={"BASE_IMAGE": python_image})
        step("bud --target tfboot", buildah.bud, containerfile=dockerfile, context=context, tag=tfboot_stage,
             log=log, target="tfboot", build_args={"BASE_IMAGE": python_image})
        _say(f"images ready in {time.monotonic() - started:.0f}s ({', '.join(steps)}); log {log}")
        yield Built(buildah, trainer, tfboot_stage, context)
    finally:
        buildah.remove_images(trainer, tfboot_stage)


def image_config(built, image):
    return built.buildah.inspect_image(image)["OCIv1"]["config"]


def file_description(path):
    return subprocess.run(["file", "-b", path], capture_output=True, text=True, check=True).stdout


@pytest.mark.root
def test_trainer_image_has_tfboot_as_entrypoint(built):
    config = image_config(built, built.trainer)
    assert config["Entrypoint"] == ENTRYPOINT
    assert config["Cmd"] == CMD
    assert config["WorkingDir"] == WORKDIR


@pytest.mark.root
def test_trainer_image_holds_the_static_binary_and_the_examples(built):
    with built.buildah.container(built.trainer, f"{images.NAME_PREFIX}files-{os.getpid()}") as (_, rootfs):
        binary = os.path.join(rootfs, "usr/local/bin/tfboot")
        assert os.access(binary, os.X_OK)
        description = file_description(binary)
        assert "statically linked" in description and "not stripped" not in description, description
        for name in ("train.py", "train_ps.py", "train_fit.py"):
            with open(os.path.join(rootfs, WORKDIR.lstrip("/"), name), "rb") as inside, \
                    open(os.path.join(built.context, "examples", name), "rb") as source:
                assert inside.read() == source.read(), f"{WORKDIR}/{name} differs from examples/{name}"
        version = subprocess.run(["/usr/sbin/chroot", rootfs, ENTRYPOINT[0], "--version"], capture_output=True,
                                 text=True, env={}, timeout=30)
        assert version.returncode == 0 and version.stdout.startswith("tfboot "), version.stderr


@pytest.mark.root
def test_tfboot_stage_holds_only_the_binary(built):
    with built.buildah.container(built.tfboot_stage, f"{images.NAME_PREFIX}stage-{os.getpid()}") as (_, rootfs):
        assert images.image_files(rootfs) == ["tfboot"]
        description = file_description(os.path.join(rootfs, "tfboot"))
        assert "statically linked" in description and "not stripped" not in description, description
    assert image_config(built, built.tfboot_stage)["Entrypoint"] == ["/tfboot"]


SECRET_PATH = "/var/run/secrets/tfboot/secret"   # where the examples mount the control secret


def _host_path(rootfs, path):
    """Where the container's path lies on the host, following the image's symlinks inside rootfs:
    an absolute link such as Debian's /var/run -> /run points into the image, not at the host's
    /run, which os.makedirs(rootfs + path) would write to."""
    resolved = "/"
    for part in path.strip("/").split("/"):
        candidate = os.path.join(resolved, part)
        for _ in range(8):   # links to links, bounded
            host = os.path.join(rootfs, candidate.lstrip("/"))
            if not os.path.islink(host):
                break
            target = os.readlink(host)
            candidate = os.path.normpath(target if target.startswith("/") else os.path.join(resolved, target))
        else:
            pytest.fail(f"{path}: too many symbolic links in the image")
        resolved = candidate
    host = os.path.join(rootfs, resolved.lstrip("/"))
    assert os.path.realpath(host).startswith(os.path.realpath(rootfs) + "/"), f"{path} leaves the image: {host}"
    return host


@pytest.mark.root
def test_image_runs_tfboot_as_pid_1_of_a_pod_and_then_its_cmd(built, tmp_path):
    """Two pods of one job, as examples/kubernetes/statefulset.yaml makes them (with its optional
    control secret): both tfboot meet on the control port before the CMD runs, and the job ends
    with both."""
    config = image_config(built, built.trainer)
    names = ["mnist-worker-0", "mnist-worker-1"]
    expected = ('{"cluster":{"worker":["mnist-worker-0.mnist.default.svc.cluster.local:2222",'
                '"mnist-worker-1.mnist.default.svc.cluster.local:2222"]},"task":{"type":"worker","index":%d}}')
    # The network is the innermost context: closing it kills whatever still runs in the rootfs
    # before the containers are unmounted and removed.
    with built.buildah.container(built.trainer, f"{images.NAME_PREFIX}w0-{os.getpid()}") as (_, rootfs0), \
            built.buildah.container(built.trainer, f"{images.NAME_PREFIX}w1-{os.getpid()}") as (_, rootfs1), \
            ClusterNetwork(service="mnist") as net:
        rootfs = [rootfs0, rootfs1]
        pods = [net.add_pod(name) for name in names]
        procs, logs = [], []
        for index, pod in enumerate(pods):
            prepare_rootfs(rootfs[index], WORKDIR)
            secret = _host_path(rootfs[index], SECRET_PATH)   # what the kubelet mounts
            os.makedirs(os.path.dirname(secret), exist_ok=True)
            with open(secret, "w") as f:
                f.write("a shared secret of this job\n")
            net.publish(pod)
            env = {"TFBOOT_CLUSTER": "worker=2", "POD_NAME": pod.name, "POD_NAMESPACE": "default",
                   "TFBOOT_WAIT": "60s", "TFBOOT_CONTROL_SECRET_FILE": SECRET_PATH}
            logs.append(tmp_path / f"{pod.name}.stderr")
            with open(logs[-1], "w") as stderr:
                procs.append(start_container(net, pod, rootfs[index], config, env=env, stderr=stderr))
            if index == 0:   # pod 0, the coordinator, waits at the start barrier before pod 1 exists
                wait_for_log(logs[0], "start barrier: waiting for 1 task on control port", procs[0])

        for index, (proc, log) in enumerate(zip(procs, logs)):
            out, _ = proc.communicate(timeout=90)
            err = log.read_text()
            assert proc.returncode == 0, err
            assert probe_output(out, expected % index, f"/logs/worker_{index}", WORKDIR) == [], out
            assert "(supervised as init)" in err, err
            # The coordinator resolves both names after the barrier; pod 1 only the coordinator's.
            assert ("all 2 names resolve" if index == 0 else "the name resolves") in err, err
            # tfboot wrote its files into the container's root filesystem
            with open(os.path.join(rootfs[index], f"logs/worker_{index}/tf_config.json")) as f:
                assert json.load(f) == json.loads(expected % index)
            with open(os.path.join(rootfs[index], f"logs/worker_{index}/startup.json")) as f:
                job = json.load(f)["job"]
            assert (job["coordinator"], job["control_port"], job["tasks_present"]) == ("worker:0", 2220, 2), job
            assert job["names_resolved_by_coordinator"] is True, job


def test_dockerfile_stages_and_default_base_image():
    # The build above overrides BASE_IMAGE (no registry here); the default is checked as written.
    with open(os.path.join(REPO_DIR, "docker", "Dockerfile")) as f:
        lines = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms == ["FROM debian:bookworm AS build", "FROM scratch AS tfboot", "FROM ${BASE_IMAGE} AS trainer"]
    assert lines.index("ARG BASE_IMAGE=tensorflow/tensorflow:2.16.1-gpu") < lines.index(froms[0])
    build_stage = lines[lines.index(froms[0]):lines.index(froms[1])]
    assert any("-DTFBOOT_TESTS=OFF" in line and "-DCMAKE_BUILD_TYPE=Release" in line for line in build_stage)
