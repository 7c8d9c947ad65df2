"""scripts/release for real: the folder it makes, and each way a user installs tfboot from it.

One release is made per run, in a folder of the test's own: a fresh CMake configuration in a
temporary build directory whose compiles go through ccache (scripts/lib/ccache.sh), so that with
the tier's TFBOOT_BINARY built by scripts/build just before, the objects come from the cache and
the release's run is mostly linking and packing (CCACHE_DISABLE=1 makes it compile everything).
The release and TFBOOT_BINARY must agree byte for byte, as must every artifact packed around them:
the link and the packing are reproducible and the release ships the binary the tiers tested. That
a compile in another directory gives the same object is what the cache cannot show; what would
make it differ is a path reaching the binary, and the test checks that neither the checkout's nor
the build directory's path is in it. Then the wheel goes into a plain venv and into a venv of
the TensorFlow stand-in image (images.py) that two pods run with the wheel's tfboot as PID 1, and
the .deb goes into the debootstrapped Debian image with dpkg.

The aarch64 binary (cross-compiled; scripts/build aarch64 makes the tier's copy, TFBOOT_AARCH64_BINARY
or the build directory's twin `<dir>-aarch64`) must agree with the release's the same way, and runs
here under qemu-aarch64-static, named on the command line: binfmt_misc need not be registered.
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
BINARY_AARCH64 = f"tfboot-{VERSION}-linux-aarch64"
WHEEL_AARCH64 = f"tfboot-{VERSION}-py3-none-manylinux_2_17_aarch64.whl"
DEB_ARM64 = f"tfboot_{VERSION}_arm64.deb"
SBOM = f"tfboot-{VERSION}.cdx.json"
ARTIFACTS = [BINARY, WHEEL, DEB, BINARY_AARCH64, WHEEL_AARCH64, DEB_ARM64, SBOM]
QEMU = "qemu-aarch64-static"
VENV_TFBOOT = "/opt/venv/bin/tfboot"


def _say(message):
    print(f"[test_release] {message}", file=sys.stderr, flush=True)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write_release(folder, files):
    """A folder as a release leaves it: the files, and SHA256SUMS listing each one with its sum."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n"
                                               for name, data in sorted(files.items())))


# An earlier release's folder, of another version: what `scripts/release DIR` replaces.
EARLIER = {"tfboot-0.0.9-linux-x86_64": b"\x7fELF an earlier binary", "tfboot_0.0.9_amd64.deb": b"!<arch>\n",
           "tfboot-0.0.9-py3-none-manylinux_2_17_x86_64.whl": b"PK", "tfboot-0.0.9.cdx.json": b"{}\n"}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The folder `scripts/release DIR` made, where an earlier release's folder was."""
    dist = tmp_path_factory.mktemp("release") / "dist"
    _write_release(dist, EARLIER)
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


def _snapshot(folder):
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
            for path in sorted(folder.rglob("*"))}


def _not_a_release(reason):
    return lambda dist: f"release: {dist} is not an earlier release ({reason}); remove it or name another\n"


def _with(extra):
    def make(dist):
        _write_release(dist, EARLIER)
        extra(dist)
    return make


def _another_products_download(dist):
    _write_release(dist, {"tool-1.2.tar.gz": b"another product"})


def _changed_sum(dist):
    _write_release(dist, EARLIER)
    (dist / "tfboot_0.0.9_amd64.deb").write_bytes(b"!<arch>\nchanged by hand")


@pytest.mark.parametrize("make, error", [
    (_with(lambda dist: (dist / "SHA256SUMS.asc").write_text("-----BEGIN PGP SIGNATURE-----\n")),
     _not_a_release("it holds 'SHA256SUMS.asc', which its SHA256SUMS does not list")),
    (_another_products_download, _not_a_release("its SHA256SUMS lists 'tool-1.2.tar.gz', which is no release's file")),
    (_with(lambda dist: (dist / "notes").mkdir()), _not_a_release("it holds 'notes', which its SHA256SUMS does not list")),
    (_changed_sum, _not_a_release("'tfboot_0.0.9_amd64.deb' differs from its sum in SHA256SUMS")),
    (_with(lambda dist: (dist / "tfboot-0.0.9.cdx.json").unlink()),
     _not_a_release("its SHA256SUMS lists 'tfboot-0.0.9.cdx.json', which is not there")),
    (_with(lambda dist: (dist / "SHA256SUMS").write_text("not a sum\n")),
     _not_a_release("line 1 of its SHA256SUMS is not '<sha256>  <name>'")),
    (lambda dist: (dist.mkdir(), (dist / "notes.txt").write_text("mine\n")),
     lambda dist: f"release: {dist} is there and is not a release folder; remove it or name another\n"),
], ids=["signature beside the sums", "another product's download", "a folder inside", "a changed file",
        "a listed file gone", "sums not sha256sum's", "no SHA256SUMS"])
def test_release_replaces_only_a_folder_of_files_a_release_wrote(make, error, tmp_path):
    dist = tmp_path / "dist"
    make(dist)
    before = _snapshot(dist)
    done = subprocess.run([os.path.join(REPO_DIR, "scripts", "release"), str(dist)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error(dist))
    assert _snapshot(dist) == before
    assert os.listdir(tmp_path) == ["dist"]   # no staging folder beside it either


def test_an_empty_folder_or_an_earlier_release_may_be_replaced(tmp_path):
    may_replace = [sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"), "--may-replace"]
    (tmp_path / "empty").mkdir()
    _write_release(tmp_path / "earlier", EARLIER)
    for folder in ("empty", "earlier"):
        done = subprocess.run([*may_replace, str(tmp_path / folder)], capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stderr) == (0, ""), folder


def test_packing_refuses_a_dynamically_linked_binary(tmp_path):
    python = os.path.realpath("/usr/bin/python3")   # dynamically linked, as a sanitizer build is
    done = subprocess.run([sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"), "--binary", python,
                           "--build-dir", str(tmp_path), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=30)
    assert (done.returncode, done.stderr) == (
        1, f"release: --binary {python}: dynamically linked; a release ships the static build\n")
    assert os.listdir(tmp_path) == []


def test_packing_refuses_a_build_directory_that_compiles_for_another_architecture(tfboot, tfboot_aarch64, tmp_path):
    aarch64_build = os.path.dirname(os.path.dirname(tfboot_aarch64))
    done = subprocess.run([sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"), "--binary", tfboot,
                           "--build-dir", aarch64_build, "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stderr) == (
        1, f"release: --build-dir {aarch64_build}: its compiler does not build for x86_64, as {tfboot} is\n")
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def version_line(tfboot):
    return subprocess.run([tfboot, "--version"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def tfboot_aarch64(tfboot):
    """The tier's cross-built aarch64 tfboot: TFBOOT_AARCH64_BINARY, else <TFBOOT_BINARY's build dir>-aarch64."""
    build_dir = os.path.dirname(os.path.dirname(tfboot))
    path = os.path.abspath(os.environ.get("TFBOOT_AARCH64_BINARY", f"{build_dir}-aarch64/launcher/tfboot"))
    if not os.path.isfile(path):
        pytest.fail(f"no aarch64 tfboot at {path}: run TFBOOT_BUILD_DIR={build_dir}-aarch64 scripts/build aarch64 "
                    "or set TFBOOT_AARCH64_BINARY")
    return path


def test_release_folder_holds_the_binary_the_packages_the_sbom_and_their_sums(release):
    assert sorted(os.listdir(release)) == sorted([*ARTIFACTS, "SHA256SUMS"])
    listed = {}
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    assert sorted(listed) == sorted(ARTIFACTS)
    for name, digest in listed.items():
        assert hashlib.sha256(_read(release / name)).hexdigest() == digest, name
    # and as a user checks it
    check = subprocess.run(["sha256sum", "--check", "SHA256SUMS"], cwd=release, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.splitlines() == [f"{name}: OK" for name in sorted(listed)], check


LINKED_IN = ["glibc", "libstdc++", "libgcc", "c-ares", "libsodium", "fmt", "nlohmann-json"]


def test_sbom_lists_each_architecture_s_binary_packages_and_what_is_linked_in(release):
    bom = json.loads((release / SBOM).read_text())
    assert bom["metadata"]["component"]["version"] == VERSION
    components = {c["bom-ref"]: c for c in bom["components"]}
    arches = ("x86_64", "aarch64")
    assert sorted(components) == sorted([f"tfboot-linux-{arch}" for arch in arches] +
                                        [f"{arch}/{name}" for arch in arches for name in LINKED_IN])
    for arch, binary, packages in [("x86_64", BINARY, [WHEEL, DEB]),
                                   ("aarch64", BINARY_AARCH64, [WHEEL_AARCH64, DEB_ARM64])]:
        component = components[f"tfboot-linux-{arch}"]
        assert (component["name"], component["version"]) == ("tfboot", VERSION)
        digest = hashlib.sha256(_read(release / binary)).hexdigest()
        assert component["hashes"] == [{"alg": "SHA-256", "content": digest}]
        properties = [(p["name"], p["value"]) for p in component["properties"]]
        assert [value for name, value in properties if name == "tfboot:packaged-in"] == packages
        assert ("tfboot:architecture", arch) in properties and ("tfboot:file", binary) in properties
    assert bom["dependencies"][0] == {"ref": "tfboot", "dependsOn": ["tfboot-linux-x86_64", "tfboot-linux-aarch64"]}
    for ref, component in components.items():
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", component["version"]), component
        if "/" in ref:
            assert component["purl"].startswith("pkg:deb/debian/"), component
    # the arm64 libraries are the arm64 packages'; glibc is Debian's cross-toolchain one
    assert components["aarch64/c-ares"]["purl"].endswith("?arch=arm64")
    assert components["aarch64/glibc"]["purl"].startswith("pkg:deb/debian/libc6-dev-arm64-cross@")
    assert components["x86_64/c-ares"]["purl"].endswith("?arch=amd64")
    # c-ares's version as its own header on this machine says it
    with open("/usr/include/ares_version.h") as f:
        assert f'#define ARES_VERSION_STR "{components["x86_64/c-ares"]["version"]}"' in f.read()


def test_every_package_names_the_licence_and_ships_the_notices_of_what_is_linked_in(release, tmp_path):
    licence = _read(os.path.join(REPO_DIR, "LICENSE"))
    bom = json.loads((release / SBOM).read_text())
    assert bom["metadata"]["component"]["licenses"] == [{"expression": "Apache-2.0"}]
    assert {c["name"]: c["licenses"] for c in bom["components"]} == {
        "tfboot": [{"expression": "Apache-2.0"}],
        "glibc": [{"expression": "LGPL-2.1-or-later"}],
        "libstdc++": [{"expression": "GPL-3.0-or-later WITH GCC-exception-3.1"}],
        "libgcc": [{"expression": "GPL-3.0-or-later WITH GCC-exception-3.1"}],
        "c-ares": [{"expression": "MIT"}], "libsodium": [{"expression": "ISC"}], "fmt": [{"expression": "MIT"}],
        "nlohmann-json": [{"expression": "MIT"}]}
    with zipfile.ZipFile(release / WHEEL) as wheel:
        metadata = wheel.read(f"tfboot-{VERSION}.dist-info/METADATA").decode()
        assert "\nLicense: Apache-2.0\nClassifier: License :: OSI Approved :: Apache Software License\n" in metadata
        assert wheel.read(f"tfboot-{VERSION}.dist-info/LICENSE") == licence
        notices = wheel.read(f"tfboot-{VERSION}.dist-info/THIRD-PARTY-NOTICES").decode()
    for heading in ("glibc (LGPL-2.1-or-later), from libc6-dev ", "c-ares (MIT), from libc-ares-dev ",
                    "libsodium (ISC), from libsodium-dev ", "nlohmann-json (MIT), from nlohmann-json3-dev "):
        assert heading in notices, heading
    unpacked = tmp_path / "deb"
    subprocess.run(["dpkg-deb", "--raw-extract", str(release / DEB), str(unpacked)], check=True, timeout=60)
    control = (unpacked / "DEBIAN" / "control").read_text()
    assert "\nMaintainer: tfboot developers <tfboot@users.noreply.invalid>\n" in control
    copyright_ = (unpacked / "usr/share/doc/tfboot/copyright").read_text()
    assert copyright_.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    assert "\nFiles: *\nCopyright: tfboot developers\nLicense: Apache-2.0\n" in copyright_
    with gzip.open(unpacked / "usr/share/doc/tfboot/THIRD-PARTY-NOTICES.gz") as f:
        assert f.read().decode() == notices


def test_a_second_build_of_the_commit_gives_the_same_release_byte_for_byte(release, tfboot, tfboot_aarch64,
                                                                          tmp_path):
    """The release's builds (scripts/release, fresh configurations in temporary directories) and the
    tier's TFBOOT_BINARY and its aarch64 twin (scripts/build, elsewhere) are two builds of this commit."""
    for name, built in [(BINARY, tfboot), (BINARY_AARCH64, tfboot_aarch64)]:
        assert _read(release / name) == _read(built), (
            f"{name} differs from {built}: two builds of one commit must agree (or {built} is stale: rebuild it)")
        for path in (REPO_DIR, os.path.dirname(os.path.dirname(os.path.abspath(built)))):
            assert os.fsencode(path) not in _read(release / name), f"{path} is written into {name}"
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run([sys.executable, os.path.join(REPO_DIR, "scripts", "lib", "release.py"),
                    "--binary", tfboot, "--build-dir", os.path.dirname(os.path.dirname(tfboot)),
                    "--binary", tfboot_aarch64, "--build-dir", os.path.dirname(os.path.dirname(tfboot_aarch64)),
                    "--out", str(again)], check=True, timeout=120)
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


def _control(deb, tmp_path):
    unpacked = tmp_path / os.path.basename(deb)
    subprocess.run(["dpkg-deb", "--raw-extract", str(deb), str(unpacked)], check=True, timeout=60)
    return unpacked, (unpacked / "DEBIAN" / "control").read_text()


def test_aarch64_wheel_and_deb_say_aarch64_and_carry_the_aarch64_binary(release, tmp_path):
    with zipfile.ZipFile(release / WHEEL_AARCH64) as wheel:
        assert wheel.read(f"tfboot-{VERSION}.dist-info/WHEEL").decode().splitlines()[-1] == \
            "Tag: py3-none-manylinux_2_17_aarch64"
        assert wheel.read(f"tfboot-{VERSION}.data/scripts/tfboot") == _read(release / BINARY_AARCH64)
        notices = wheel.read(f"tfboot-{VERSION}.dist-info/THIRD-PARTY-NOTICES").decode()
    for heading in ("glibc (LGPL-2.1-or-later), from libc6-dev-arm64-cross ", "c-ares (MIT), from libc-ares-dev ",
                    "libsodium (ISC), from libsodium-dev "):
        assert heading in notices, heading
    unpacked, control = _control(release / DEB_ARM64, tmp_path)
    assert "\nArchitecture: arm64\n" in control, control
    assert _read(unpacked / "usr/bin/tfboot") == _read(release / BINARY_AARCH64)
    assert "\nArchitecture: amd64\n" in _control(release / DEB, tmp_path)[1]
    elf = subprocess.run(["readelf", "--file-header", "--program-headers", str(release / BINARY_AARCH64)],
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r"Machine:\s+AArch64", elf) and "INTERP" not in elf and "DYNAMIC" not in elf, elf


def _under_qemu(binary, args, **kwargs):
    return subprocess.run([QEMU, str(binary), *args], capture_output=True, text=True, timeout=60, **kwargs)


def test_aarch64_binary_under_qemu_says_the_version_the_x86_64_one_says(release, version_line):
    ran = _under_qemu(release / BINARY_AARCH64, ["--version"], env={})
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, version_line, "")


def test_aarch64_binary_under_qemu_prints_what_the_x86_64_one_prints(release, tmp_path):
    args = ["--print", "--cluster", "chief=1,worker=2", "--hostname", "mnist-worker-1", "--service", "mnist",
            "--namespace", "ml"]
    env = {"PATH": "/usr/bin:/bin", "TFBOOT_LOG_ROOT": str(tmp_path / "logs")}
    native = subprocess.run([str(release / BINARY), *args], capture_output=True, text=True, env=env, timeout=60)
    emulated = _under_qemu(release / BINARY_AARCH64, args, env=env)
    assert native.returncode == 0 and json.loads(native.stdout)["task"] == {"type": "worker", "index": 1}, native
    assert (emulated.returncode, emulated.stdout) == (0, native.stdout), emulated.stderr


@pytest.mark.root
def test_aarch64_binary_under_qemu_runs_a_two_task_local_job(release, tmp_path):
    """The tasks are the machine's own x86-64 `sh`: qemu-user runs only tfboot, and the kernel runs what
    it execs. tfboot is PID 1 of a PID namespace, as in a container: qemu-user 7.2 refuses the
    PR_SET_CHILD_SUBREAPER that tfboot local asks for when it is not PID 1."""
    ran = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", QEMU, str(release / BINARY_AARCH64), "local",
                          "--cluster", "worker=2", "--", "sh", "-c", 'echo "$TF_CONFIG"; uname -m'],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert sorted(line for line in lines if line.endswith(" x86_64")) == ["[worker:0] x86_64", "[worker:1] x86_64"]
    configs = sorted((json.loads(line.split(" ", 1)[1]) for line in lines if not line.endswith(" x86_64")),
                     key=lambda config: config["task"]["index"])
    assert [config["task"] for config in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert configs[0]["cluster"] == configs[1]["cluster"] and len(configs[0]["cluster"]["worker"]) == 2
    assert "job done; exiting 0" in ran.stderr, ran.stderr
