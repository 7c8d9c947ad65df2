"""Turns a process into a pod's program: hostname, the pod's /etc files, then exec.

Run by the harness (``pods.pod_command``) as ``python -I -S pod_shim.py tfbt-shim HOSTNAME
MOUNTS_JSON ENV_JSON pid1|plain -- PROGRAM ARGS...`` inside ``ip netns exec <pod ns> unshare
--uts --mount --propagation private [--pid]``, i.e. in the pod's network namespace with a UTS
and a private mount namespace of its own; standard library only.

* Sets the hostname, bind-mounts each [source, target] of MOUNTS_JSON (the pod's hosts,
  resolv.conf, nsswitch.conf over /etc: the host's files stay untouched), then execve()s the
  program with exactly ENV_JSON as its environment.
* pid1: forks first; the child, PID 1 of the new PID namespace (``unshare --pid`` without
  ``--fork``), mounts a fresh /proc, gets PDEATHSIG=SIGKILL and execs the program, so no shell
  and no shim is PID 1. The parent stays outside, relays HUP/INT/QUIT/TERM/USR1/USR2 to it and
  ends the way it ended (same exit code, or killed by the same signal). Not ``unshare --fork``:
  util-linux 2.38 exits 1 ("sigprocmask unblock failed") instead of dying by SIGKILL when its
  child was SIGKILLed.
* Exit 127 when the program is not found, 126 when it cannot be executed, 125 when a mount
  fails; the reason on stderr. The "tfbt-shim" marker in its argv tells the harness that the
  program is not exec'd yet.
"""

import ctypes
import json
import os
import signal
import socket
import sys

MARKER = "tfbt-shim"
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 262144
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
PR_SET_PDEATHSIG = 1
RELAYED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1,
           signal.SIGUSR2)

libc = ctypes.CDLL(None, use_errno=True)


def die(code, message):
    os.write(2, f"{MARKER}: {message}\n".encode())
    os._exit(code)


def mount(source, target, fstype, flags):
    if libc.mount(source.encode(), target.encode(), fstype, flags, None) != 0:
        die(125, f"mount {source} on {target}: {os.strerror(ctypes.get_errno())}")


def exec_program(argv, env):
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError as e:
        die(127, f"exec {argv[0]}: {e.strerror}")
    except OSError as e:
        die(126, f"exec {argv[0]}: {e.strerror}")


def run_as_pid1(argv, env):
    child = 0

    def relay(sig, _frame):
        if child > 0:
            try:
                os.kill(child, sig)
            except OSError:
                pass

    for sig in RELAYED:
        signal.signal(sig, relay)
    child = os.fork()
    if child == 0:
        for sig in RELAYED:
            signal.signal(sig, signal.SIG_DFL)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mount("none", "/proc", None, MS_PRIVATE | MS_REC)
        mount("proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        exec_program(argv, env)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main(args):
    hostname, mounts, env, mode, separator, argv = (args[1], json.loads(args[2]),
                                                    json.loads(args[3]), args[4], args[5], args[6:])
    if args[0] != MARKER or separator != "--" or not argv:
        die(125, "usage: pod_shim.py tfbt-shim HOSTNAME MOUNTS ENV pid1|plain -- PROGRAM ...")
    if hostname:
        socket.sethostname(hostname)
    for source, target in mounts:
        mount(source, target, None, MS_BIND | MS_REC)
    if mode == "pid1":
        run_as_pid1(argv, env)
    exec_program(argv, env)


if __name__ == "__main__":
    main(sys.argv[1:])
