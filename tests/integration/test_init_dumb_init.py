"""tfboot as an init, held to what dumb-init's own test suite expects of dumb-init in its
default (setsid) mode (tests/*.py, tests/test-zombies), in our harness: signals reach the
command and the init survives them, job control suspends both, leftovers of the command get
SIGTERM, the init lets go of its working directory, the terminal goes to the command.
What test_init.py and test_init_tini.py already cover is not repeated here.

Modes: "init" is `tfboot --init` run by the test (not PID 1); "pid1" is tfboot as PID 1 of a new
PID namespace.
"""

import os
import re
import signal
import time

import pytest

from init_support import (JOB_CONTROL, MODE_PARAMS, MODES, PASSED_ON, PRINT_SIGNALS, PYTHON, Supervised, is_running,
                          kill_quietly, mode_param, process_state, run_on_a_terminal, wait_until)


def start_print_signals(tfboot, tmp_path, mode):
    run = Supervised(tfboot, tmp_path, [PYTHON, "-c", PRINT_SIGNALS], mode)
    ready = run.out.readline(timeout=10)
    if not (ready or "").startswith("ready "):
        run.close()
        raise AssertionError(f"the command did not start: {ready!r}; stderr: {run.stderr()}")
    return run


# ---- every signal dumb-init passes on reaches the command, and tfboot survives it
# ---- (dumb-init's proxies_signals_test, one signal per case so each can be told apart)

def _passed_on_cases():
    return [mode_param(mode, sig, id=f"{mode}-{sig.name}") for mode in MODES for sig in PASSED_ON]


@pytest.mark.parametrize("mode, sig", _passed_on_cases())
def test_signal_reaches_the_command_and_tfboot_survives(tfboot, tmp_path, mode, sig):
    with start_print_signals(tfboot, tmp_path, mode) as run:
        command = run.command_pid()
        run.signal(sig)
        assert run.out.readline(timeout=3) == str(int(sig)), f"tfboot state {process_state(run.tfboot_pid)}"
        assert is_running(run.tfboot_pid) and is_running(command)
        run.tell("exit 7")
        assert run.wait(timeout=5) == 7, run.stderr()


# ---- job control (dumb-init's shell_background_test, setsid mode): SIGTSTP, SIGTTIN and SIGTTOU
# ---- reach the command as SIGSTOP and then stop tfboot too; SIGCONT resumes both and is passed on

@pytest.mark.parametrize("sig", JOB_CONTROL, ids=lambda s: s.name)
def test_suspend_signal_stops_even_a_command_that_catches_it_and_sigcont_resumes_both(tfboot, tmp_path, sig):
    # The command catches every signal (prints it): only SIGSTOP, which it cannot catch, stops it.
    with start_print_signals(tfboot, tmp_path, "init") as run:
        command = run.command_pid()
        run.signal(sig)
        both_stopped = wait_until(lambda: process_state(run.tfboot_pid) == process_state(command) == "T", 3)
        assert both_stopped, f"tfboot {process_state(run.tfboot_pid)}, command {process_state(command)}"
        run.signal(signal.SIGCONT)
        assert run.out.readline(timeout=3) == str(int(signal.SIGCONT)), "the suspend signal itself never reached it"
        assert wait_until(lambda: process_state(run.tfboot_pid) in ("R", "S") and process_state(command) in ("R", "S"),
                          3), f"tfboot {process_state(run.tfboot_pid)}, command {process_state(command)}"
        run.tell("exit 7")
        assert run.wait(timeout=5) == 7, run.stderr()


@pytest.mark.parametrize("sig", JOB_CONTROL, ids=lambda s: s.name)
def test_suspend_signal_stops_tfboot_and_a_command_with_default_dispositions_together(tfboot, tmp_path, sig):
    with Supervised(tfboot, tmp_path, ["sleep", "60"], "init") as run:
        command = run.command_pid()
        run.signal(sig)
        both_stopped = wait_until(lambda: process_state(run.tfboot_pid) == process_state(command) == "T", 3)
        assert both_stopped, f"tfboot {process_state(run.tfboot_pid)}, command {process_state(command)}"
        run.signal(signal.SIGCONT)
        assert wait_until(lambda: process_state(run.tfboot_pid) in ("R", "S") and process_state(command) in ("R", "S"),
                          3), f"tfboot {process_state(run.tfboot_pid)}, command {process_state(command)}"
        run.signal(signal.SIGTERM)
        assert run.wait(timeout=5) == 128 + signal.SIGTERM, run.stderr()


# ---- what the command leaves in its process group gets SIGTERM when the command exits
# ---- (dumb-init's child_processes_test, setsid mode)

LEFTOVER = r"""
import os, signal, sys, time
def ended(number, frame):
    open("leftover.signal", "w").write(str(number))
    sys.exit(0)
signal.signal(signal.SIGTERM, ended)
open("leftover.pid.tmp", "w").write(str(os.getpid()))
os.rename("leftover.pid.tmp", "leftover.pid")
time.sleep(30)
"""


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_leftovers_in_the_commands_process_group_get_sigterm_when_it_exits(tfboot, tmp_path, mode):
    script = f"{PYTHON} -c '{LEFTOVER}' & while [ ! -e leftover.pid ]; do sleep 0.02; done; exit 0"
    leftover = None
    with Supervised(tfboot, tmp_path, ["sh", "-c", script], mode) as run:
        try:
            code = run.wait(timeout=10)
            assert code == 0, f"tfboot exit {code}; stderr: {run.stderr()}"
            leftover = int((tmp_path / "leftover.pid").read_text())
            assert wait_until(lambda: (tmp_path / "leftover.signal").exists(), 3), "no SIGTERM reached the leftover"
            assert (tmp_path / "leftover.signal").read_text() == str(int(signal.SIGTERM))
        finally:
            if leftover and mode == "init":
                kill_quietly(leftover)


# ---- the command starts in the directory tfboot was started in (dumb-init's cwd_test), and
# tfboot stays there: a restart in place, a relative --log-root or --termination-log resolve there
# too (dumb-init moves itself to /, which made every restart run in /)

@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_command_starts_in_the_start_directory_and_tfboot_stays_there(tfboot, tmp_path, mode):
    start = tmp_path / "start"
    start.mkdir()
    with Supervised(tfboot, tmp_path, ["sleep", "30"], mode, cwd=start) as run:
        command = run.command_pid()
        assert os.readlink(f"/proc/{command}/cwd") == str(start)
        time.sleep(0.2)
        assert os.readlink(f"/proc/{run.tfboot_pid}/cwd") == str(start)


# ---- exit status of a command that kills itself, as PID 1 (dumb-init's exit_status_test)

@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL], ids=lambda s: s.name)
def test_pid1_exits_128_plus_n_when_the_command_kills_itself(tfboot, tmp_path, sig):
    command = [PYTHON, "-c", f"import os; os.kill(os.getpid(), {int(sig)})"]
    with Supervised(tfboot, tmp_path, command, "pid1") as run:
        assert run.wait(timeout=10) == 128 + sig, run.stderr()


# ---- the terminal (dumb-init's tty_test): output through it works, the command gets job control

def test_command_reads_and_writes_the_terminal(tfboot, tmp_path):
    end_of_file = b"\x04"
    code, shown = run_on_a_terminal(tfboot, tmp_path, ["tac"], b"1\n2\n3\n" + end_of_file * 2, raw=True)
    assert (code, shown) == (0, b"3\n2\n1\n")


def test_command_gets_the_terminal_and_job_control(tfboot, tmp_path):
    code, shown = run_on_a_terminal(tfboot, tmp_path, ["bash", "--norc", "-m"],
                                    b'echo "flags are: [[$-]]"\nexit 0\n', raw=True)
    assert code == 0, shown
    flags = re.search(rb"flags are: \[\[([a-zA-Z]+)\]\]", shown)
    assert flags, shown
    assert b"m" in flags.group(1), "bash has job control only when its group owns the terminal"
    assert b"no job control" not in shown
