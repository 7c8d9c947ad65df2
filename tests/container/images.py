"""Local container images for test_dockerfile.py, made with debootstrap and buildah, no registry.

Everything lives in a cache directory (TFBOOT_TEST_CACHE, default /var/cache/tfboot-test) that is
kept between runs:

    debian-bookworm-minbase/   `debootstrap --variant=minbase bookworm` (made once, ~2 min)
    storage/                   buildah's own image store (--root), not the machine's default one:
                               localhost/debian:bookworm (the rootfs above, what `FROM debian:bookworm`
                               resolves to), localhost/tfboot-test-python:bookworm (+ python3, the
                               test's BASE_IMAGE instead of the TensorFlow image) and buildah's layer
                               cache (`bud --layers`), so a warm run rebuilds only what changed.

Images and containers a test makes are named tfboot-test-<pid>-...; the test removes them, and
remove_stale() removes those of dead runs. The store is wiped down to the two base images once it
holds more than MAX_CACHED_IMAGES images (old build layers pile up as the sources change).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager

CACHE_DIR = os.environ.get("TFBOOT_TEST_CACHE", "/var/cache/tfboot-test")
RUN_DIR = "/run/tfboot-test"
DEBIAN_IMAGE = "localhost/debian:bookworm"
PYTHON_IMAGE = "localhost/tfboot-test-python:bookworm"
BASE_LABEL = "tfboot-test.base-image"
MAX_CACHED_IMAGES = 100
NAME_PREFIX = "tfboot-test-"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The test's stand-in for tensorflow/tensorflow: Debian with `python` (python3-minimal).
PYTHON_CONTAINERFILE = f"""\
FROM {DEBIAN_IMAGE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-minimal \\
 && ln -s python3 /usr/bin/python \\
 && rm -rf /var/lib/apt/lists/*
"""


class BuildError(RuntimeError):
    pass


def _run(argv: list[str], *, timeout: float, log: str | None = None) -> str:
    try:
        if log:
            with open(log, "a") as out:
                out.write(f"$ {' '.join(argv)}\n")
                out.flush()
                cp = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=timeout, text=True)
            output = ""
        else:
            cp = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout, text=True)
            output = cp.stdout
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if cp.returncode != 0:
        detail = _tail(log) if log else cp.stderr.strip()
        raise BuildError(f"failed (exit {cp.returncode}): {' '.join(argv)}\n{detail}")
    return output.strip()


def _tail(path: str, chars: int = 4000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-chars:]


class Buildah:
    """buildah on the test's own store (never the machine's default /var/lib/containers)."""

    def __init__(self, cache_dir: str = CACHE_DIR):
        self.root = os.path.join(cache_dir, "storage")
        self.runroot = os.path.join(RUN_DIR, "storage")
        self.argv = ["buildah", "--root", self.root, "--runroot", self.runroot, "--storage-driver", "overlay"]

    def __call__(self, *args: str, timeout: float = 120, log: str | None = None) -> str:
        return _run([*self.argv, *args], timeout=timeout, log=log)

    def image_id(self, name: str) -> str | None:
        cp = subprocess.run([*self.argv, "images", "--noheading", "--no-trunc", "--format", "{{.ID}}", name],
                            capture_output=True, text=True, timeout=60)
        return cp.stdout.split()[0] if cp.returncode == 0 and cp.stdout.split() else None

    def inspect_image(self, name: str) -> dict:
        return json.loads(self("inspect", "--type", "image", name))

    def bud(self, *, containerfile: str, context: str, tag: str, log: str, target: str | None = None,
            build_args: dict[str, str] | None = None, labels: dict[str, str] | None = None,
            timeout: float = 1800) -> None:
        # --isolation chroot: RUN steps need no OCI runtime or user namespaces; --pull=never: every
        # FROM must resolve to a local image (FROM debian:bookworm finds localhost/debian:bookworm);
        # --layers: reuse earlier steps from the store's cache.
        args = ["bud", "--isolation", "chroot", "--pull=never", "--layers", "-f", containerfile, "-t", tag]
        if target:
            args += ["--target", target]
        for key, value in (build_args or {}).items():
            args += ["--build-arg", f"{key}={value}"]
        for key, value in (labels or {}).items():
            args += ["--label", f"{key}={value}"]
        self(*args, context, timeout=timeout, log=log)

    @contextmanager
    def container(self, image: str, name: str):
        """A working container of image, mounted: yields (container id, root filesystem path)."""
        cid = self("from", "--pull=never", "--name", name, image)
        try:
            yield cid, self("mount", cid)
        finally:
            subprocess.run([*self.argv, "umount", cid], capture_output=True, timeout=60)
            subprocess.run([*self.argv, "rm", cid], capture_output=True, timeout=60)

    def remove_images(self, *names: str) -> None:
        for name in names:
            subprocess.run([*self.argv, "rmi", "-f", name], capture_output=True, timeout=120)

    def remove_stale(self) -> None:
        """Containers and images of test runs whose process is gone (a crashed or killed run)."""
        def dead(name: str) -> bool:   # tfboot-test-<what>-<pid>[:tag]
            pid = name.split(":")[0].rsplit("-", 1)[-1]
            return pid.isdigit() and not os.path.exists(f"/proc/{pid}")
        out = self("containers", "--noheading", "--format", "{{.ContainerID}} {{.ContainerName}}")
        for line in out.splitlines():
            cid, _, name = line.partition(" ")
            if name.startswith(NAME_PREFIX) and dead(name):
                subprocess.run([*self.argv, "rm", cid], capture_output=True, timeout=60)
        out = self("images", "--noheading", "--format", "{{.Name}}:{{.Tag}}")
        for name in out.splitlines():
            if "/" + NAME_PREFIX in name and dead(name.rsplit("/", 1)[-1]):
                self.remove_images(name)

    def limit_cache(self) -> None:
        ids = self("images", "--all", "--noheading", "--no-trunc", "--format", "{{.ID}}").split()
        if len(set(ids)) <= MAX_CACHED_IMAGES:
            return
        keep = {self.image_id(DEBIAN_IMAGE), self.image_id(PYTHON_IMAGE)}
        for image_id in set(ids) - keep:
            self.remove_images(image_id)


def debootstrap_rootfs(cache_dir: str = CACHE_DIR, *, log: str) -> str:
    """A minimal Debian 12 root filesystem, made once (debootstrap's default mirror)."""
    rootfs = os.path.join(cache_dir, "debian-bookworm-minbase")
    if os.path.isfile(os.path.join(rootfs, "etc", "debian_version")):
        return rootfs
    os.makedirs(cache_dir, exist_ok=True)
    partial = tempfile.mkdtemp(prefix="debian-bookworm-minbase.", dir=cache_dir)
    try:
        _run(["debootstrap", "--variant=minbase", "bookworm", partial], timeout=1200, log=log)
        # Like a container image: no host name or resolver of the machine it was made on.
        for name in ("hostname", "resolv.conf"):
            with open(os.path.join(partial, "etc", name), "w"):
                pass
        try:
            os.rename(partial, rootfs)
        except OSError:   # a concurrent run got there first
            if not os.path.isfile(os.path.join(rootfs, "etc", "debian_version")):
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return rootfs


def ensure_debian_image(buildah: Buildah, rootfs: str) -> str:
    """localhost/debian:bookworm from the debootstrapped rootfs (what FROM debian:bookworm finds)."""
    if buildah.image_id(DEBIAN_IMAGE):
        return DEBIAN_IMAGE
    with buildah.container("scratch", f"{NAME_PREFIX}debian-{os.getpid()}") as (cid, mountpoint):
        _run(["cp", "-a", f"{rootfs}/.", mountpoint], timeout=600)
        buildah("config", "--env", f"PATH={PATH}", "--cmd", "bash", cid)
        buildah("commit", "--quiet", cid, DEBIAN_IMAGE, timeout=600)
    return DEBIAN_IMAGE


def ensure_python_image(buildah: Buildah, *, log: str) -> str:
    """localhost/tfboot-test-python:bookworm, rebuilt when the Debian image was remade."""
    base_id = buildah.image_id(DEBIAN_IMAGE)
    if buildah.image_id(PYTHON_IMAGE):
        labels = buildah.inspect_image(PYTHON_IMAGE)["OCIv1"]["config"].get("Labels") or {}
        if labels.get(BASE_LABEL) == base_id:
            return PYTHON_IMAGE
    with tempfile.TemporaryDirectory(prefix="tfboot-test-python.") as context:
        path = os.path.join(context, "Containerfile")
        with open(path, "w") as f:
            f.write(PYTHON_CONTAINERFILE)
        buildah.bud(containerfile=path, context=context, tag=PYTHON_IMAGE, log=log, labels={BASE_LABEL: base_id},
                    timeout=900)
    return PYTHON_IMAGE


def image_files(rootfs: str) -> list[str]:
    """Every path in a root filesystem, relative, sorted (directories included)."""
    found = []
    for directory, dirs, files in os.walk(rootfs):
        for name in dirs + files:
            found.append(os.path.relpath(os.path.join(directory, name), rootfs))
    return sorted(found)
