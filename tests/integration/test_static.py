"""The release binary is static and stripped, and runs in an otherwise empty root filesystem."""

import json
import os
import shutil
import subprocess

import pytest


def test_binary_is_static_and_stripped(tfboot):
    description = subprocess.run(["file", "-L", tfboot], capture_output=True, text=True, check=True).stdout
    assert "statically linked" in description
    assert "stripped" in description and "not stripped" not in description


@pytest.mark.root
def test_runs_in_empty_root(tfboot, tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "resolv.conf").write_text("nameserver 127.0.0.1\noptions ndots:5\n")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    shutil.copy(tfboot, root / "tfboot")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["etc", "etc/hosts", "etc/resolv.conf", "tfboot"]

    version = subprocess.run(["/usr/sbin/chroot", str(root), "/tfboot", "--version"], capture_output=True, text=True, env={})
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("tfboot ")

    printed = subprocess.run(["/usr/sbin/chroot", str(root), "/tfboot", "--print", "--wait", "0", "--hostname", "m-worker-1",
                              "--cluster", "worker=2"], capture_output=True, text=True, env={})
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["task"] == {"type": "worker", "index": 1}

    # The DNS wait works there too: c-ares reads /etc/hosts, no NSS modules needed.
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.0.1 m-worker-0\n127.0.0.1 m-worker-1\n")
    # (--print looks nothing up: the run itself, whose TF_CONFIG startup.json keeps; the command is
    # tfboot again, the one program there.)
    assert sorted(os.listdir(root)) == ["etc", "tfboot"], "--print writes nothing into the root"
    waited = subprocess.run(["/usr/sbin/chroot", str(root), "/tfboot", "--wait", "5s", "--hostname", "m-worker-1",
                             "--cluster", "worker=2", "--address", "ip", "--control-port", "0", "--log-root", "/logs",
                             "--", "/tfboot", "--version"], capture_output=True, text=True, env={}, timeout=30)
    assert waited.returncode == 0, waited.stderr
    startup = json.loads((root / "logs" / "worker_1" / "startup.json").read_text())
    assert startup["tf_config"]["cluster"]["worker"] == ["127.0.0.1:2222", "127.0.0.1:2222"]
