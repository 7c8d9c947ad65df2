"""Network namespaces: names, the bridge that joins them, removal, and code run inside one.

Every namespace of a run is called ``tfbt<pid>-<n>-<what>`` (pid of the test process, n counts
networks in that process), so parallel runs never collide and whatever a dead run left can be
recognised and removed. Nothing is created in the root network namespace.

Offers:

* ``new_prefix()``: ``tfbt<pid>-<n>-``, a fresh prefix for one network's namespaces and temp dir.
* ``Bridge(ns, ip)``: ``create()`` makes namespace ns with bridge br0 (``ip``/16) and lo up;
  ``attach(other_ns, veth_name, ip)`` links namespace other_ns to br0 by a veth pair whose end
  in other_ns is eth0 with ``ip``/16 (lo up as well).
* ``add_netns(name)``, ``delete_netns(name)`` (SIGKILLs what still runs inside first, bounded),
  ``list_netns()``, ``netns_pids(name)``.
* ``cleanup_stale()``: removes namespaces and temp dirs ``tfbt<pid>-...`` whose pid is dead
  (left by a crashed or SIGKILLed run); returns the names of the namespaces removed.
* ``in_netns(ns, fn, timeout=30)``: fn() called in a short-lived thread that has setns()ed into
  ns (network namespaces are per thread), so sockets it opens live there; returns fn's value
  or raises its exception. Cheaper than a process: the DNS client uses it.

Usage::

    prefix = new_prefix()
    bridge = Bridge(prefix + "net", "10.213.0.1")
    bridge.create()
    add_netns(prefix + "dns")
    bridge.attach(prefix + "dns", "vdns", "10.213.0.2")
    in_netns(prefix + "dns", lambda: socket.create_connection(...))
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import shutil
import tempfile
import threading
import time

from harness.processes import HarnessError, kill_and_reap_pids, pid_alive, run_command

PREFIX = "tfbt"
_STALE = re.compile(rf"^{PREFIX}(\d+)-")
_networks = itertools.count()


def new_prefix() -> str:
    return f"{PREFIX}{os.getpid()}-{next(_networks)}-"


def list_netns() -> list[str]:
    listed = run_command(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def netns_pids(name: str) -> list[int]:
    listed = run_command(["ip", "netns", "pids", name], check=False)
    return [int(x) for x in listed.stdout.split() if x.isdigit()]


def add_netns(name: str) -> None:
    run_command(["ip", "netns", "add", name])


def delete_netns(name: str) -> None:
    for _ in range(3):   # a process still exiting may keep the namespace busy for a moment
        pids = netns_pids(name)
        if pids:
            kill_and_reap_pids(pids)
        deleted = run_command(["ip", "netns", "delete", name], check=False)
        if deleted.returncode == 0 or name not in list_netns():
            return
        time.sleep(0.05)


def cleanup_stale() -> list[str]:
    removed = []
    for name in list_netns():
        match = _STALE.match(name)
        if match and not pid_alive(int(match.group(1))):
            delete_netns(name)
            removed.append(name)
    tmp = tempfile.gettempdir()
    try:
        entries = os.listdir(tmp)
    except OSError:
        entries = []
    for entry in entries:
        match = _STALE.match(entry)
        if match and not pid_alive(int(match.group(1))):
            shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)
    return removed


class Bridge:
    def __init__(self, ns: str, ip: str):
        self.ns = ns
        self.ip = ip

    def create(self) -> None:
        add_netns(self.ns)
        for args in (["link", "set", "lo", "up"], ["link", "add", "br0", "type", "bridge"],
                     ["addr", "add", f"{self.ip}/16", "dev", "br0"], ["link", "set", "br0", "up"]):
            run_command(["ip", "-n", self.ns, *args])

    def attach(self, ns: str, veth_name: str, ip: str) -> None:
        run_command(["ip", "-n", self.ns, "link", "add", veth_name, "type", "veth",
                     "peer", "name", "eth0", "netns", ns])
        run_command(["ip", "-n", self.ns, "link", "set", veth_name, "master", "br0", "up"])
        for args in (["addr", "add", f"{ip}/16", "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "lo", "up"]):
            run_command(["ip", "-n", ns, *args])


_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def in_netns(ns: str, fn, timeout: float = 30.0):
    result: dict = {}

    def body():
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            result["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            result["error"] = e

    thread = threading.Thread(target=body, name=f"netns-{ns}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise HarnessError(f"in-netns call in {ns} did not finish within {timeout}s")
    if "error" in result:
        raise result["error"]
    return result.get("value")
