"""An image's root filesystem run as the container of a pod of the namespace network
(tests/harness/cluster.py), the way a container runtime runs it: chrooted into the rootfs, in the
image's WORKDIR, with its ENTRYPOINT + CMD and Env, the pod's /etc/hosts and resolv.conf
bind-mounted over the image's, as PID 1 of a new PID namespace. The image's train.py is swapped
for a probe that prints what tfboot handed it (the stand-in base image has no TensorFlow).

    prepare_rootfs(rootfs, workdir)                 the probe as train.py, the mount targets
    start_container(net, pod, rootfs, config, env=..., stderr=...)  -> the pod's process
    wait_for_log(path, text, process)               until tfboot logged text, bounded
    probe_output(out, tf_config, log_dir, workdir)  the probe's lines checked; returns the rest
"""

import os
import time

import pytest

# Prints the variables tfboot set, its own place in the process tree, and who PID 1 is when the
# container has its own /proc (start_container's mount_proc).
PROBE = """\
import os
print("TF_CONFIG=" + os.environ["TF_CONFIG"])
print("TFBOOT_LOG_DIR=" + os.environ["TFBOOT_LOG_DIR"])
print("pid=%d ppid=%d cwd=%s" % (os.getpid(), os.getppid(), os.getcwd()))
if os.path.exists("/proc/1/cmdline"):
    print("pid1=" + open("/proc/1/cmdline").read().split("\\0")[0])
"""


def prepare_rootfs(rootfs, workdir):
    """What a runtime does before starting the container, plus the probe in place of train.py."""
    os.makedirs(os.path.join(rootfs, workdir.lstrip("/")), exist_ok=True)
    with open(os.path.join(rootfs, workdir.lstrip("/"), "train.py"), "w") as f:
        f.write(PROBE)
    for name in ("hosts", "resolv.conf"):   # bind-mount targets for the pod's files
        path = os.path.join(rootfs, "etc", name)
        if not os.path.exists(path):
            open(path, "w").close()


def start_container(net, pod, rootfs, config, *, env, stderr, mount_proc=False):
    """The image (its OCI config) started in pod: ENTRYPOINT + CMD as PID 1, chrooted into rootfs.
    mount_proc gives the container a /proc of its own PID namespace, as a runtime does."""
    image_env = dict(item.split("=", 1) for item in config.get("Env") or [])
    # unshare --root/--wd: chroot + chdir + exec, so the program is still PID 1
    argv = ["/usr/bin/unshare", *(["--mount-proc"] if mount_proc else []), f"--root={rootfs}",
            f"--wd={config['WorkingDir']}", "--", *config["Entrypoint"], *config["Cmd"]]
    return net.run(pod, argv, env={**image_env, **env}, pid1=True, stderr=stderr,
                   extra_mounts=[(pod.hosts_path, f"{rootfs}/etc/hosts"),
                                 (pod.resolv_path, f"{rootfs}/etc/resolv.conf")])


def wait_for_log(path, text, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"ended with {proc.returncode} before logging {text!r}: {path.read_text()}")
        time.sleep(0.1)
    pytest.fail(f"no {text!r} in {path} within {timeout}s: {path.read_text()}")


def probe_output(out, tf_config, log_dir, workdir):
    """Checks what the probe printed: this TF_CONFIG and log dir, run as a child of PID 1 (tfboot)
    in workdir. Returns the lines after those (the pid1 line when the container has its /proc)."""
    lines = out.splitlines()
    assert lines[:2] == ["TF_CONFIG=" + tf_config, "TFBOOT_LOG_DIR=" + log_dir], out
    pid, ppid, cwd = (field.split("=", 1)[1] for field in lines[2].split())
    assert ppid == "1" and pid != "1", f"the command's parent must be tfboot as PID 1: {lines[2]}"
    assert cwd == workdir, lines[2]
    return lines[3:]
