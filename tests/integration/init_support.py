"""Helpers for the init-mode and hostile-environment tests (test_init.py, test_init_tini.py,
test_init_dumb_init.py, test_hostile.py).

    argv = entrypoint_args(log_root, "--init", "--", *command)   # one task, no DNS wait
    with Supervised(tfboot, tmp_path, command, mode="init") as run:  # or mode="pid1"
        run.out.readline(timeout=3)      # the command's stdout, line by line, with a deadline
        run.command_pid()                # host pid of the command (tfboot's child)
        run.signal(signal.SIGALRM)       # to tfboot
        run.tell("exit 7")               # a line on the command's stdin
        code = run.wait(timeout=5)       # tfboot's exit code (None if still running)
    process_state(pid) -> "R"/"S"/"T"/"Z"/None; wait_until(predicate, timeout) -> bool
    PRINT_SIGNALS: a Python command that prints every signal it gets and exits on "exit N".
    code, shown = run_on_a_terminal(tfboot, tmp_path, command, typed)  # tfboot --init on a new terminal
    @pytest.mark.parametrize("mode", MODE_PARAMS)  # both modes; "pid1" is marked root

Mode "init" runs `tfboot --init` as a child of the test (not PID 1); mode "pid1" runs tfboot
as PID 1 of a new PID namespace (`unshare --pid --fork --mount-proc --kill-child`). Leaving the
`with` block kills whatever is left: the command's process group, tfboot, unshare.
"""

import os
import pty
import resource
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from harness.processes import children

PATH = os.environ.get("PATH", "/usr/bin:/bin")
PYTHON = sys.executable

# What tini and dumb-init never pass on: SIGKILL and SIGSTOP cannot be caught, SIGCHLD is the
# init's own business, and (as tini) the synchronous signals a fault raises in the init itself.
NEVER_PASSED_ON = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD}
SYNCHRONOUS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP, signal.SIGSYS,
               signal.SIGABRT}
# Job control as dumb-init: the command gets SIGSTOP, then tfboot stops too (SIGCONT resumes both).
JOB_CONTROL = [signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU]
# Every standard signal an init passes on to the command.
PASSED_ON = [signal.Signals(n) for n in range(1, 32)
             if n not in NEVER_PASSED_ON | SYNCHRONOUS and n not in JOB_CONTROL]
# Passed-on signals whose default action ends a process (all but SIGCONT, SIGURG, SIGWINCH).
DEFAULT_ENDS_PROCESS = [s for s in PASSED_ON if s not in (signal.SIGCONT, signal.SIGURG, signal.SIGWINCH)]

MODES = ["init", "pid1"]


def mode_param(mode, *values, id=None):
    """A test parameter for a run in `mode`: "pid1" (`unshare --pid`) needs root."""
    return pytest.param(mode, *values, id=id, marks=[pytest.mark.root] if mode == "pid1" else [])


MODE_PARAMS = [mode_param(mode) for mode in MODES]

# The command for signal tests: a handler for every catchable signal that prints its number,
# "ready <pid>" once they are in place, and `exit N` on stdin ends it with status N.
# Python runs a handler between bytecodes: a signal caught just before a blocking read of stdin
# would be printed only once the next line came. The wakeup fd makes select return instead.
PRINT_SIGNALS = r"""
import os, select, signal, sys
def report(number, frame):
    os.write(1, b"%d\n" % number)
for number in range(1, signal.NSIG):
    if number in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
        continue
    try:
        signal.signal(number, report)
    except (OSError, ValueError):
        pass  # the C library keeps a few real-time signals for itself
wakeup_read, wakeup_write = os.pipe()
os.set_blocking(wakeup_write, False)
signal.set_wakeup_fd(wakeup_write)
os.write(1, b"ready %d\n" % os.getpid())
typed = b""
while True:
    readable, _, _ = select.select([0, wakeup_read], [], [])
    if wakeup_read in readable:
        os.read(wakeup_read, 4096)
    if 0 in readable:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        typed += chunk
        while b"\n" in typed:
            line, typed = typed.split(b"\n", 1)
            if line.startswith(b"exit "):
                sys.exit(int(line.split()[1]))
"""


def entrypoint_args(log_root, *rest):
    """tfboot's arguments for one task that needs neither hostname nor DNS."""
    return ["--task-index", "0", "--cluster", "worker=1", "--peer-template", "w-{index}", "--wait", "0",
            "--log-root", str(log_root), *rest]


def no_core_dumps():
    """preexec_fn: a command ended by SIGQUIT/SIGXCPU/... leaves no core file behind."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def process_state(pid):
    """The state letter of /proc/<pid>/status ("R", "S", "T", "Z", ...), None once gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("State:"):
                    return line.split()[1]
    except OSError:
        return None
    return None


def is_running(pid):
    return process_state(pid) not in (None, "Z", "X")


def executable(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def wait_until(predicate, timeout, interval=0.01):
    """Polls predicate until it is true (returns True) or timeout seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def kill_quietly(pid, sig=signal.SIGKILL, group=False):
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LineReader:
    """Reads lines from a binary pipe with a deadline (no buffering surprises with select)."""

    def __init__(self, stream):
        self.fd = stream.fileno()
        self.buffer = b""
        self.closed = False

    def readline(self, timeout=3.0):
        """The next line without its newline, or None when none came within timeout / at EOF."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if self.closed or left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.closed = True
                continue
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode(errors="replace")


class Supervised:
    """tfboot supervising `command`, with --init (mode "init") or as PID 1 (mode "pid1")."""

    def __init__(self, tfboot, tmp_path, command, mode="init", *, args=(), cwd=None, env=None, preexec_fn=None,
                 log_level="warn"):
        self.tfboot = os.path.realpath(tfboot)
        self.mode = mode
        self.stderr_path = tmp_path / f"tfboot-stderr-{time.monotonic_ns()}"
        full_env = {"PATH": PATH, **(env or {})}
        tfboot_argv = [tfboot, *entrypoint_args(tmp_path / "logs", "--log-level", log_level, *args)]
        tfboot_argv += ["--init", "--", *command] if mode == "init" else ["--", *command]
        if mode == "pid1":
            tfboot_argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *tfboot_argv]

        def prepare():
            no_core_dumps()
            if preexec_fn:
                preexec_fn()

        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(tfboot_argv, env=full_env, cwd=cwd or tmp_path, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=stderr, preexec_fn=prepare)
        self.out = LineReader(self.proc.stdout)
        self._command_pid = None
        self.tfboot_pid = self.proc.pid if mode == "init" else self._find_tfboot_under_unshare()

    def _find_tfboot_under_unshare(self):
        found = []

        def started():
            found[:] = [pid for pid in children(self.proc.pid) if executable(pid) == self.tfboot]
            return bool(found) or self.proc.poll() is not None

        wait_until(started, 5)
        if not found:
            self.close()
            raise AssertionError(f"tfboot did not start as PID 1: {self.stderr()}")
        return found[0]

    def command_pid(self, timeout=5):
        """Host pid of the command, once tfboot's child has exec'd it."""
        if self._command_pid is None:
            found = []

            def started():
                found[:] = [pid for pid in children(self.tfboot_pid) if executable(pid) not in (None, self.tfboot)]
                return bool(found)

            if not wait_until(started, timeout):
                raise AssertionError(f"the command did not start; tfboot stderr: {self.stderr()}")
            self._command_pid = found[0]
        return self._command_pid

    def signal(self, sig):
        os.kill(self.tfboot_pid, sig)

    def tell(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def wait(self, timeout):
        """tfboot's exit code (negative: killed by that signal), or None if it still runs."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self):
        if self._command_pid is not None:
            kill_quietly(self._command_pid, group=True)
            kill_quietly(self._command_pid)
        kill_quietly(self.tfboot_pid)
        kill_quietly(self.proc.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_on_a_terminal(tfboot, tmp_path, command, typed, *, wait_for=None, raw=False, env=None, timeout=10):
    """Runs `tfboot --init -- command` as session leader of a new pseudo-terminal, types `typed`
    (once the terminal showed `wait_for`, if given), reads until nothing has the terminal open any
    more and returns (exit code, everything the terminal showed, as bytes). `raw`: without echo or
    output processing, so that what shows is exactly what the command wrote. `env` is added to
    PATH and TERM=dumb."""
    argv = [tfboot, *entrypoint_args(tmp_path / "logs", "--log-level", "error", "--init", "--", *command)]
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(tmp_path)
            os.execve(tfboot, argv, {"PATH": PATH, "TERM": "dumb", **(env or {})})
        finally:
            os._exit(125)
    shown = b""
    status = None
    deadline = time.monotonic() + timeout
    try:
        if raw:
            attributes = termios.tcgetattr(fd)
            attributes[1] &= ~termios.OPOST
            attributes[3] &= ~termios.ECHO
            termios.tcsetattr(fd, termios.TCSANOW, attributes)
        while wait_for is not None and wait_for not in shown and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                shown += os.read(fd, 4096)
        os.write(fd, typed)
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: nothing has the terminal open any more
                    chunk = b""
                if not chunk:
                    break
                shown += chunk
        ended, wait_status = os.waitpid(pid, 0 if time.monotonic() < deadline else os.WNOHANG)
        if ended == pid:
            status = os.waitstatus_to_exitcode(wait_status)
        return status, shown
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
