"""scripts/release for real: the folder it makes, and each way a user installs tfboot from it.

One release is made per run (a build from scratch in a temporary directory, 1-2 minutes), in a
folder of the test's own. It is the second build of this commit in the tier: the tier's
TFBOOT_BINARY is the first, made in another directory, and the two must agree byte for byte, as
must every artifact packed around them. Then the wheel goes into a plain venv and into a venv of
the TensorFlow stand-in image (images.py) that two pods run with the wheel's tfboot as PID 1, and
the .deb goes into the debootstrapped Debian image with dpkg.
"""

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

import images
from harness.cluster import ClusterNetwork
from image_pods import prepare_rootfs, probe_output, start_container, wait_for_log
from paths import REPO_DIR


def _project_version():
    with open(os.path.join(REPO_DIR, "CMakeLists.txt")) as f:
        return re.search(r"^project\(tfboot VERSION (\d+\.\d+\.\d+) ", f.read(), re.MULTILINE)[1]


VERSION = _project_version()
BINARY = f"tfboot-{VERSION}-linux-x86_64"
WHEEL = f"tfboot-{VERSION}-py3-none-manylinux_2_17_x86_64.whl"
DEB = f"tfboot_{VERSION}_amd64.deb"
SBOM = f"tfboot-{VERSION}.cdx.json"
VENV_TFBOOT = "/opt/venv/bin/tfboot"


def _say(message):
    print(f"[test_release] {message}", file=sys.stderr, flush=True)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The folder `scripts/release DIR` made."""
    dist = tmp_path_factory.mktemp("release") / "dist"
    started = time.monotonic()
    done = subprocess.run([os.path.join(REPO_DIR, "scripts", "release"), str(dist)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    _say(f"scripts/release took {time.monotonic() - started:.0f}s")
    return dist


USAGE = "release: usage: scripts/release [DIR] (default dist)\n"


@pytest.mark.parametrize("args, error", [
    (["one", "two"], USAGE),
    (["--help"], USAGE),
    ([os.path.join(REPO_DIR, "README.md")],
     f"release: {os.path.join(REPO_DIR, 'README.md')} is there and is not a release folder; remove it or name another\n"),
])
def test_release_refuses_bad_arguments_before_it_builds(args, error):
    done = subprocess.run([os.path.join(REPO_DIR, "scripts", "release"), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error)


def test_packing_refuses_a_dynamically_linked_binary(tmp_path):
    python = os.path.realpath("/usr/bin/python3")   # dynamically linked, as a sanitizer build is
    done = subprocess.run([sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"), "--binary", python,
                           "--build-dir", str(tmp_path), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=30)
    assert (done.returncode, done.stderr) == (
        1, f"release: --binary {python}: dynamically linked; a release ships the static build\n")
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def version_line(tfboot):
    return subprocess.run([tfboot, "--version"], capture_output=True, text=True, check=True).stdout


def test_release_folder_holds_the_binary_the_packages_the_sbom_and_their_sums(release):
    assert sorted(os.listdir(release)) == sorted([BINARY, WHEEL, DEB, SBOM, "SHA256SUMS"])
    listed = {}
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    assert sorted(listed) == sorted([BINARY, WHEEL, DEB, SBOM])
    for name, digest in listed.items():
        assert hashlib.sha256(_read(release / name)).hexdigest() == digest, name
    # and as a user checks it
    check = subprocess.run(["sha256sum", "--check", "SHA256SUMS"], cwd=release, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.splitlines() == [f"{name}: OK" for name in sorted(listed)], check


def test_sbom_lists_what_is_linked_in_with_the_build_s_versions(release):
    bom = json.loads((release / SBOM).read_text())
    assert bom["metadata"]["component"]["version"] == VERSION
    assert bom["metadata"]["component"]["hashes"] == [
        {"alg": "SHA-256", "content": hashlib.sha256(_read(release / BINARY)).hexdigest()}]
    components = {c["name"]: c for c in bom["components"]}
    assert sorted(components) == sorted(["glibc", "libstdc++", "libgcc", "c-ares", "libsodium", "fmt", "nlohmann-json"])
    for name, component in components.items():
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", component["version"]), component
        assert component["purl"].startswith("pkg:deb/debian/"), component
    # c-ares's version as its own header on this machine says it
    with open("/usr/include/ares_version.h") as f:
        assert f'#define ARES_VERSION_STR "{components["c-ares"]["version"]}"' in f.read()


def test_a_second_build_of_the_commit_gives_the_same_release_byte_for_byte(release, tfboot, tmp_path):
    """The release's build (scripts/release, from scratch, in a temporary directory) and the tier's
    TFBOOT_BINARY (scripts/build, elsewhere) are two builds of this commit."""
    assert _read(release / BINARY) == _read(tfboot), (
        f"{BINARY} differs from {tfboot}: two builds of one commit must agree (or {tfboot} is stale: rebuild it)")
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run([sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"), "--binary", tfboot,
                    "--build-dir", os.path.dirname(os.path.dirname(tfboot)), "--out", str(again)], check=True,
                   timeout=120)
    for name in sorted(os.listdir(release)):
        assert _read(again / name) == _read(release / name), f"{name} differs between the two builds"


def test_wheel_installs_the_binary_itself_into_a_plain_venv(release, version_line, tmp_path):
    with zipfile.ZipFile(release / WHEEL) as wheel:
        assert wheel.read(f"tfboot-{VERSION}.dist-info/WHEEL").decode().splitlines()[-1] == \
            "Tag: py3-none-manylinux_2_17_x86_64"
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-index", str(release / WHEEL)], check=True, timeout=120)
    installed = venv / "bin" / "tfboot"
    assert not installed.is_symlink() and os.access(installed, os.X_OK)
    assert _read(installed) == _read(release / BINARY), "pip installed something other than the binary"
    ran = subprocess.run([str(installed), "--version"], capture_output=True, text=True, env={}, timeout=30)
    assert (ran.returncode, ran.stdout) == (0, version_line)
    subprocess.run([*pip, "uninstall", "--yes", "tfboot"], check=True, timeout=120)
    assert not installed.exists()


@pytest.fixture(scope="module")
def debian_image(tmp_path_factory):
    missing = [tool for tool in ("buildah", "debootstrap") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run scripts/setup-containers")
    buildah = images.Buildah()
    buildah.remove_stale()
    log = str(tmp_path_factory.mktemp("images") / "build.log")
    rootfs = images.debootstrap_rootfs(log=log)
    images.ensure_debian_image(buildah, rootfs)
    return buildah, log


@pytest.mark.root
def test_deb_installs_with_dpkg_in_a_debootstrapped_root(release, debian_image, version_line):
    buildah, _ = debian_image
    with buildah.container(images.DEBIAN_IMAGE, f"{images.NAME_PREFIX}deb-{os.getpid()}") as (_, rootfs):
        shutil.copy(release / DEB, os.path.join(rootfs, "tmp", DEB))

        def chroot(*argv):
            return subprocess.run(["/usr/sbin/chroot", rootfs, *argv], capture_output=True, text=True,
                                  env={"PATH": images.PATH}, timeout=120)

        installed = chroot("dpkg", "--install", f"/tmp/{DEB}")
        assert installed.returncode == 0, installed.stderr
        assert chroot("dpkg-query", "--show", "--showformat=${Version} ${Status}", "tfboot").stdout == \
            f"{VERSION} install ok installed"
        ran = chroot("tfboot", "--version")
        assert (ran.returncode, ran.stdout) == (0, version_line)
        files = chroot("dpkg", "--listfiles", "tfboot").stdout.split()
        pages = ["README.md", *(f"docs/{name}" for name in os.listdir(os.path.join(REPO_DIR, "docs")))]
        assert "/usr/bin/tfboot" in files and len(pages) > 5, files
        for page in pages:   # README and the docs/ pages its links lead to, as Debian compresses them
            assert f"/usr/share/doc/tfboot/{page}.gz" in files, (page, files)
            with gzip.open(os.path.join(rootfs, f"usr/share/doc/tfboot/{page}.gz")) as f:
                assert f.read() == _read(os.path.join(REPO_DIR, page)), page
        assert chroot("dpkg", "--remove", "tfboot").returncode == 0
        assert not os.path.exists(os.path.join(rootfs, "usr/bin/tfboot"))


# The TensorFlow image's stand-in with a venv that holds the wheel, and tfboot from that venv as
# the ENTRYPOINT, as a user's Dockerfile that runs `pip install tfboot` would have it.
WHEEL_CONTAINERFILE = f"""\
FROM {images.PYTHON_IMAGE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY {WHEEL} /tmp/
RUN python -m venv /opt/venv \\
 && /opt/venv/bin/pip install --no-index --disable-pip-version-check /tmp/{WHEEL} \\
 && rm /tmp/{WHEEL}
WORKDIR /app
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["{VENV_TFBOOT}"]
CMD ["python", "train.py"]
"""


@pytest.mark.root
def test_wheel_in_a_tensorflow_image_runs_tfboot_as_pid_1_of_two_pods(release, debian_image, tmp_path):
    buildah, log = debian_image
    images.ensure_python_image(buildah, log=log)
    image = f"localhost/{images.NAME_PREFIX}wheel-{os.getpid()}:latest"
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(release / WHEEL, context / WHEEL)
    (context / "Containerfile").write_text(WHEEL_CONTAINERFILE)
    try:
        buildah.bud(containerfile=str(context / "Containerfile"), context=str(context), tag=image, log=log,
                    timeout=600)
        config = buildah.inspect_image(image)["OCIv1"]["config"]
        names = ["mnist-worker-0", "mnist-worker-1"]
        expected = ('{"cluster":{"worker":["mnist-worker-0.mnist.default.svc.cluster.local:2222",'
                    '"mnist-worker-1.mnist.default.svc.cluster.local:2222"]},"task":{"type":"worker","index":%d}}')
        # The network is the innermost context: closing it kills whatever still runs in the rootfs
        # before the containers are unmounted and removed.
        with buildah.container(image, f"{images.NAME_PREFIX}wheel0-{os.getpid()}") as (_, rootfs0), \
                buildah.container(image, f"{images.NAME_PREFIX}wheel1-{os.getpid()}") as (_, rootfs1), \
                ClusterNetwork(service="mnist") as net:
            assert _read(os.path.join(rootfs0, VENV_TFBOOT.lstrip("/"))) == _read(release / BINARY)
            procs, logs = [], []
            for index, (name, rootfs) in enumerate(zip(names, [rootfs0, rootfs1])):
                pod = net.add_pod(name)
                prepare_rootfs(rootfs, config["WorkingDir"])
                net.publish(pod)
                logs.append(tmp_path / f"{name}.stderr")
                with open(logs[-1], "w") as stderr:
                    procs.append(start_container(
                        net, pod, rootfs, config, stderr=stderr, mount_proc=True,
                        env={"TFBOOT_CLUSTER": "worker=2", "POD_NAME": name, "POD_NAMESPACE": "default",
                             "TFBOOT_WAIT": "60s"}))
                if index == 0:   # pod 0, the coordinator, waits at the start barrier before pod 1 exists
                    wait_for_log(logs[0], "start barrier: waiting for 1 task on control port", procs[0])
            for index, (proc, log_path) in enumerate(zip(procs, logs)):
                out, _ = proc.communicate(timeout=90)
                err = log_path.read_text()
                assert proc.returncode == 0, err
                # PID 1 is the wheel's binary itself, no wrapper
                assert probe_output(out, expected % index, f"/logs/worker_{index}", "/app") == [
                    f"pid1={VENV_TFBOOT}"], out
                assert "(supervised as init)" in err, err
    finally:
        buildah.remove_images(image)
