"""Processes the harness starts, and what /proc says about processes.

Offers:

* ``HarnessError``: every failure of the harness itself (a setup step, a bounded wait).
* ``run_command(argv, timeout=10, check=True, input=None, env=None)``: a short helper
  command (``ip``, ``iptables``), output captured as text; raises HarnessError on a non-zero
  exit (with check) or after timeout.
* ``communicate_bounded(process, argv, input, timeout, check, where)``: communicate() with a
  spawned process, SIGKILLing its group after timeout (HarnessError naming argv and where);
  returns a CompletedProcess.
* ``communicate_all(processes, timeout)``: (returncode, stdout, stderr) of each process once all
  have ended, every one's output read at the same time; HarnessError after killing the late ones.
* ``ProcessSet``: the long-running processes of one network. ``spawn(argv, cls=Popen, **popen)``
  starts argv under ``setpriv --pdeathsig KILL`` in a session of its own, so a dead test run
  takes its servers along and one ``killpg`` reaches a process and its forks;
  ``kill_all()`` SIGKILLs every one still running (and its group), reaps them and closes
  their pipes, returning the problems it met instead of stopping at the first.
* ``after_the_wait(*args)``: tfboot's arguments that print TF_CONFIG as the DNS wait leaves it:
  the command itself prints it (``--print`` is a dry run that looks nothing up), in a run alone
  (no control channel), its log dir in a fresh temporary directory.
* /proc readers: ``pid_alive``, ``gone`` (exited or zombie), ``kill_and_reap_pids``,
  ``children``, ``cmdline``, ``listening(pid, ip, port)`` (udp socket and listening tcp socket
  on ip:port in pid's network namespace).

Usage::

    processes = ProcessSet()
    server = processes.spawn(["ip", "netns", "exec", ns, "dnsmasq", ...], stdout=log, stderr=log)
    ...
    problems = processes.kill_all()
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from typing import Iterable, Sequence

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class HarnessError(RuntimeError):
    pass


def run_command(argv: Sequence[str], *, timeout: float = 10, check: bool = True,
                input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                   input=input, env=env,
                                   stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if check and completed.returncode != 0:
        raise HarnessError(f"failed (rc={completed.returncode}): {' '.join(argv)}\n"
                           f"{completed.stderr.strip()}")
    return completed


def communicate_bounded(process: subprocess.Popen, argv: Sequence[str], input: str | None,
                        timeout: float, check: bool, where: str) -> subprocess.CompletedProcess:
    try:
        out, err = process.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.communicate(timeout=5)
        raise HarnessError(f"{argv!r} {where} timed out after {timeout}s")
    completed = subprocess.CompletedProcess(list(argv), process.returncode, out, err)
    if check:
        completed.check_returncode()
    return completed


def communicate_all(processes: Sequence[subprocess.Popen], timeout: float) -> list[tuple]:
    """Every process's (returncode, stdout, stderr), in order, read all at once: a process whose
    pipe nobody reads blocks writing to it, so reading one after the other can stall the ones not
    yet read (a job's tasks log while they wait for each other, a restarting job logs more than a
    pipe holds). A process not ended within timeout is SIGKILLed (its group too), and then
    HarnessError names how many were late, with the end of each one's stderr."""
    results: list = [None] * len(processes)

    def read(i: int) -> None:
        out, err = processes[i].communicate()
        results[i] = (processes[i].returncode, out, err)

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(processes))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    for reader in readers:
        reader.join(timeout=max(0, deadline - time.monotonic()))
    late = [i for i, reader in enumerate(readers) if reader.is_alive()]
    for i in late:
        for kill, target in ((os.killpg, processes[i].pid), (os.kill, processes[i].pid)):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for i in late:
        readers[i].join(timeout=10)
    if late:
        tails = [(result[2] or "")[-2000:] if result else "(still running)" for result in results]
        raise HarnessError(f"{len(late)} of {len(processes)} processes did not end within {timeout}s "
                           f"(processes {late}):\n" + "\n---\n".join(tails))
    return results


class ProcessSet:
    def __init__(self) -> None:
        self.running: list[subprocess.Popen] = []

    def spawn(self, argv: Sequence[str], cls=subprocess.Popen, **popen) -> subprocess.Popen:
        # PR_SET_PDEATHSIG set by setpriv survives the execs that follow (ip -> unshare -> ...)
        self.running = [p for p in self.running if p.returncode is None]   # forget reaped ones
        process = cls(["setpriv", "--pdeathsig", "KILL", "--", *argv], start_new_session=True,
                      **popen)
        self.running.append(process)
        return process

    def forget(self, process: subprocess.Popen) -> None:
        if process in self.running:
            self.running.remove(process)

    def kill_all(self) -> list[Exception]:
        problems: list[Exception] = []
        for process in self.running:
            if process.poll() is not None:
                continue
            program_pid = getattr(process, "program_pid", None)   # a pod's PID 1 (see pods.py)
            for kill, target in ((os.kill, program_pid), (os.killpg, process.pid)):
                if target:
                    try:
                        kill(target, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        for process in self.running:
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                problems.append(HarnessError(f"pid {process.pid} did not exit"))
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self.running = []
        return problems


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stat_fields(pid: int) -> list[bytes] | None:
    # the fields after "(comm)", which may itself contain spaces and parentheses
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()


def gone(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[0] in (b"Z", b"X")


def kill_and_reap_pids(pids: Iterable[int], timeout: float = 3.0) -> None:
    """SIGKILL pids (never this process) and wait, bounded, until each has exited."""
    pids = [p for p in pids if p != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(gone(p) for p in pids):
        time.sleep(0.01)


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    found = []   # kernels without the children file: scan every process's parent pid
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(entry))
    return found


def cmdline(pid: int) -> bytes | None:
    """The NUL-separated argv of pid; b"" for a zombie, None once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


def listening(pid: int, ip: str, port: int) -> bool:
    """Is there a UDP socket and a listening TCP socket on ip:port in pid's network namespace?"""
    if ":" in ip:
        files, raw = ("udp6", "tcp6"), socket.inet_pton(socket.AF_INET6, ip)
        address = "".join("%08X" % struct.unpack("<I", raw[i:i + 4])[0] for i in range(0, 16, 4))
    else:
        files, address = ("udp", "tcp"), "%08X" % struct.unpack("<I", socket.inet_aton(ip))[0]
    local = f"{address}:{port:04X}"
    found = []
    for table, state in zip(files, ("07", "0A")):   # 07: unconnected udp, 0A: TCP_LISTEN
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                found.append(any(line.split()[1] == local and line.split()[3] == state
                                 for line in f))
        except (OSError, StopIteration):
            found.append(False)
    return all(found)


def after_the_wait(*args):
    log_root = tempfile.mkdtemp(prefix="tfboot-after-the-wait-")
    return [*args, "--control-port", "0", "--log-root", log_root, "--", "printenv", "TF_CONFIG"]
