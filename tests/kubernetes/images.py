"""The tier's images, built as a user builds one: a Containerfile with tfboot as ENTRYPOINT.

No registry: buildah builds them in a store of the run's own (a temporary directory) and writes
each to a docker-archive tarball that the cluster imports into containerd (``ctr images
import``); pods name them with ``imagePullPolicy: Never``.

* ``BUSYBOX_IMAGE``: the small base with a shell, Debian's busybox-static (1.35) and a link per
  applet. No Python: the tier's "trainer" is ``sh train.sh`` (a Python base from the containers
  tier's debootstrap would cost a 2-minute debootstrap on a fresh machine and about 10 s of import
  per run, and nothing here needs Python).
* ``TRAINER_IMAGE``: README's image, on that base: the release binary at /usr/local/bin/tfboot as
  ``ENTRYPOINT`` (exec form), ``WORKDIR /app``, ``CMD ["sh", "train.sh"]`` relative to it.
* ``PAUSE_IMAGE``: the pods' sandbox, a static program that sleeps until a stop signal.
* ``build_images(tfboot, workdir)`` -> [tarball, ...] of all three, in about 10 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess

BUSYBOX = "/bin/busybox"                       # Debian's busybox-static
BUSYBOX_IMAGE = "localhost/tfboot-test-busybox:1.35"
TRAINER_IMAGE = "localhost/tfboot-test-trainer:1"
PAUSE_IMAGE = "localhost/tfboot-test-pause:1"
WORKDIR = "/app"

# What train.py is in README's image: here a shell script that says what tfboot gave it, and
# fails once where TRAIN_FAIL_ONCE names its task (worker:1), with TRAIN_FAIL_STATUS (default 3),
# remembering that in /checkpoints as a trainer remembers its step, a second after its start (so
# that the job's stop does not come before the others' first line); the others train for
# TRAIN_SECONDS (default 0), so that a failure comes while they still run.
TRAIN_SH = """\
echo "train: task=$TFBOOT_TASK_TYPE:$TFBOOT_TASK_INDEX restart=$TFBOOT_RESTART_COUNT pwd=$(pwd) started=$(date +%s)"
echo "train: TF_CONFIG=$TF_CONFIG"
echo "train: JOB_COMPLETION_INDEX=${JOB_COMPLETION_INDEX-unset}"
if [ "$TRAIN_FAIL_ONCE" = "$TFBOOT_TASK_TYPE:$TFBOOT_TASK_INDEX" ] && [ ! -e /checkpoints/failed-once ]; then
  touch /checkpoints/failed-once
  sleep 1
  echo "train: failing with status ${TRAIN_FAIL_STATUS:-3}"
  exit "${TRAIN_FAIL_STATUS:-3}"
fi
sleep "${TRAIN_SECONDS:-0}"
echo "train: done"
"""

TRAINER_CONTAINERFILE = f"""\
FROM {BUSYBOX_IMAGE}
COPY tfboot /usr/local/bin/tfboot
COPY train.sh {WORKDIR}/
WORKDIR {WORKDIR}
ENTRYPOINT ["/usr/local/bin/tfboot"]
CMD ["sh", "train.sh"]
"""

BUSYBOX_CONTAINERFILE = """\
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/bin
CMD ["sh"]
"""

PAUSE_CONTAINERFILE = """\
FROM scratch
COPY pause /pause
ENTRYPOINT ["/pause"]
"""

# The sandbox's one process, as Kubernetes' own pause: sleep, reap, end on SIGTERM or SIGINT.
PAUSE_C = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


class ImageBuildError(RuntimeError):
    pass


def _run(argv: list[str], *, timeout: float = 300, cwd: str | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise ImageBuildError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if done.returncode != 0:
        raise ImageBuildError(f"failed (exit {done.returncode}): {' '.join(argv)}\n{done.stderr.strip()[-3000:]}")
    return done.stdout


def build_images(tfboot: str, workdir: str) -> list[str]:
    buildah = ["buildah", "--root", os.path.join(workdir, "storage"), "--runroot",
               os.path.join(workdir, "run"), "--storage-driver", "vfs"]

    def build(name: str, image: str, containerfile: str, files: dict[str, str]) -> str:
        context = os.path.join(workdir, name)
        os.makedirs(context, exist_ok=True)
        with open(os.path.join(context, "Containerfile"), "w") as f:
            f.write(containerfile)
        for target, text in files.items():
            with open(os.path.join(context, target), "w") as f:
                f.write(text)
        # --isolation chroot: no RUN step needs a runtime; --pull=never: FROM finds local images only.
        _run([*buildah, "bud", "--isolation", "chroot", "--pull=never", "-f",
              os.path.join(context, "Containerfile"), "-t", image, context])
        tarball = os.path.join(workdir, f"{name}.tar")
        _run([*buildah, "push", image, f"docker-archive:{tarball}:{image}"])
        return tarball

    rootfs = os.path.join(workdir, "busybox", "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"))
    for directory in ("etc", "tmp", "usr/local/bin"):
        os.makedirs(os.path.join(rootfs, directory))
    os.chmod(os.path.join(rootfs, "tmp"), 0o1777)
    shutil.copy(BUSYBOX, os.path.join(rootfs, "bin", "busybox"))
    for applet in _run([BUSYBOX, "--list"]).split():
        if applet != "busybox":
            os.symlink("busybox", os.path.join(rootfs, "bin", applet))
    with open(os.path.join(rootfs, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(rootfs, "etc", "group"), "w") as f:
        f.write("root:x:0:\n")
    build("busybox", BUSYBOX_IMAGE, BUSYBOX_CONTAINERFILE, {})

    trainer = os.path.join(workdir, "trainer")
    os.makedirs(trainer)
    shutil.copy(tfboot, os.path.join(trainer, "tfboot"))
    trainer_tar = build("trainer", TRAINER_IMAGE, TRAINER_CONTAINERFILE, {"train.sh": TRAIN_SH})

    pause = os.path.join(workdir, "pause")
    os.makedirs(pause)
    with open(os.path.join(pause, "pause.c"), "w") as f:
        f.write(PAUSE_C)
    _run(["cc", "-static", "-Os", "-s", "-o", os.path.join(pause, "pause"), os.path.join(pause, "pause.c")])
    pause_tar = build("pause", PAUSE_IMAGE, PAUSE_CONTAINERFILE, {})
    return [trainer_tar, pause_tar]
