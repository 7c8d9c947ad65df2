"""tfboot as an init, held to what tini's own test suite expects of tini (test/run_inner_tests.py,
test/run_outer_tests.py, ci/run_build.sh), in our harness. What test_init.py already covers
(every exit code, the first six forwarded signals, orphans of a double fork, the process group)
is not repeated here.

Modes: "init" is `tfboot --init` run by the test (tfboot is not PID 1 and makes itself a child
subreaper); "pid1" is tfboot as PID 1 of a new PID namespace.
"""

import signal
import subprocess

import pytest

from init_support import (DEFAULT_ENDS_PROCESS, MODE_PARAMS, MODES, PATH, PYTHON, Supervised, entrypoint_args,
                          mode_param, run_on_a_terminal)

REAL_TIME = [signal.SIGRTMIN, signal.SIGRTMAX]


def signal_id(sig):
    return signal.Signals(sig).name


# ---- signals: tini forwards every signal but the synchronous ones; a command that dies of one
# ---- makes tfboot exit 128+N (tini's signals test, generalised from TERM/USR1/USR2)

def _ends_command_cases():
    return [mode_param(mode, sig, id=f"{mode}-{signal_id(sig)}")
            for mode in MODES for sig in [*DEFAULT_ENDS_PROCESS, *REAL_TIME]]


@pytest.mark.parametrize("mode, sig", _ends_command_cases())
def test_forwarded_signal_that_ends_the_command_gives_128_plus_n(tfboot, tmp_path, mode, sig):
    with Supervised(tfboot, tmp_path, ["sleep", "60"], mode) as run:
        run.command_pid()
        run.signal(sig)
        code = run.wait(timeout=3)
        assert code == 128 + sig, f"tfboot exit {code} (None: still running); stderr: {run.stderr()}"


# ---- reaping (tini's reaping test): many orphans with staggered lifetimes, all reaped

ORPHANS_THEN_CHECK = r"""
import os, subprocess, sys, time
# A process that starts 100 sleepers of 0.2 to 1.0 s and exits at once, so they are orphaned.
subprocess.run([sys.executable, "-c",
                "import subprocess\nfor i in range(100): subprocess.Popen(['sleep', str(0.2 + (i % 5) * 0.2)])"],
               check=True)
init = os.getppid()
def others():
    with open(f"/proc/{init}/task/{init}/children") as listing:
        return [int(pid) for pid in listing.read().split() if int(pid) != os.getpid()]
deadline = time.monotonic() + 10
while others() and time.monotonic() < deadline:
    time.sleep(0.1)
left = others()
states = []
for pid in left:
    try:
        states.append(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0])
    except OSError:
        pass
print(f"left={len(left)} zombies={states.count('Z')}", flush=True)
sys.exit(0 if not left else 1)
"""


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_hundred_orphans_with_staggered_lifetimes_are_all_reaped(tfboot, tmp_path, mode):
    with Supervised(tfboot, tmp_path, [PYTHON, "-c", ORPHANS_THEN_CHECK], mode) as run:
        code = run.wait(timeout=20)
        assert run.out.readline(timeout=1) == "left=0 zombies=0"
        assert code == 0, run.stderr()


# ---- process group (tini's pgroup test): the command ignores the signal, its child does not;
# ---- the signal sent to tfboot ends the child, then the command, then tfboot

IGNORES_BUT_CHILD_DOES_NOT = r"""
import signal, subprocess, sys
number = int(sys.argv[1])
signal.signal(number, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: signal.signal(number, signal.SIG_DFL))
print("ready", flush=True)
print(f"child ended with {child.wait()}", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGALRM], ids=signal_id)
def test_signal_reaches_the_commands_child_while_the_command_ignores_it(tfboot, tmp_path, sig):
    with Supervised(tfboot, tmp_path, [PYTHON, "-c", IGNORES_BUT_CHILD_DOES_NOT, str(int(sig))], "init") as run:
        assert run.out.readline() == "ready"
        run.signal(sig)
        code = run.wait(timeout=3)
        assert run.out.readline(timeout=1) == f"child ended with {-sig}"
        assert code == 0, f"tfboot exit {code}; stderr: {run.stderr()}"


# ---- signal configuration (tini's sigconf test): whatever the parent ignored or blocked, the
# ---- command starts clean. tini keeps the parent's configuration; docs/supervision.md promises an empty
# ---- mask and default dispositions, so that is what is checked here.

def parent_ignores_and_blocks_like_sigconf():
    for sig in (signal.SIGTTOU, signal.SIGSEGV, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTIN, signal.SIGILL, signal.SIGTERM})


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_signals_the_parent_ignored_or_blocked_are_clean_for_the_command(tfboot, tmp_path, mode):
    result = subprocess.run([tfboot, *entrypoint_args(tmp_path), mode, "--", "grep", "-E", "^Sig(Blk|Ign):",
                             "/proc/self/status"], env={"PATH": PATH}, capture_output=True, text=True, timeout=10,
                            preexec_fn=parent_ignores_and_blocks_like_sigconf)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"]


# ---- ci/run_build.sh: exit codes of exec failures, stdin, commands named like options

@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_directory_as_command_is_126(tfboot, tmp_path, mode):
    result = subprocess.run([tfboot, *entrypoint_args(tmp_path / "logs"), mode, "--", "/etc"], env={"PATH": PATH},
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 126, result.stderr
    errors = [line for line in result.stderr.splitlines() if " error " in line]
    assert len(errors) == 1 and "cannot run command '/etc'" in errors[0], result.stderr


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_stdin_is_handed_to_the_command(tfboot, tmp_path, mode):
    result = subprocess.run([tfboot, *entrypoint_args(tmp_path), mode, "--", "sh"], env={"PATH": PATH},
                            input="echo from-stdin; exit 3\n", capture_output=True, text=True, timeout=10)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "from-stdin\n"


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_commands_named_like_options_run(tfboot, tmp_path, mode):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ["-h", "--version", "--init"]:
        program = bin_dir / name
        program.write_text(f'#!/bin/sh\necho "ran {name} $*"\n')
        program.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{PATH}"}
    for name in ["-h", "--version", "--init"]:
        result = subprocess.run([tfboot, *entrypoint_args(tmp_path / "logs"), mode, "--", name, "--foo"], env=env,
                                capture_output=True, text=True, timeout=10)
        assert (result.returncode, result.stdout) == (0, f"ran {name} --foo\n"), result.stderr


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_a_second_double_dash_is_the_command(tfboot, tmp_path, mode):
    result = subprocess.run([tfboot, *entrypoint_args(tmp_path / "logs"), mode, "--", "--", "true"],
                            env={"PATH": PATH}, capture_output=True, text=True, timeout=10)
    assert result.returncode == 127, result.stderr
    assert "cannot run command '--': not found" in result.stderr


# ---- the terminal (tini's outer TTY tests): Ctrl-C reaches the command, an interactive shell works

def test_ctrl_c_on_the_terminal_ends_the_command_with_130(tfboot, tmp_path):
    code, shown = run_on_a_terminal(tfboot, tmp_path, ["sh", "-c", "echo ready; while :; do sleep 0.1; done"],
                                    typed=b"\x03", wait_for=b"ready")
    assert code == 130, shown


def test_interactive_shell_on_the_terminal_exits_0(tfboot, tmp_path):
    code, shown = run_on_a_terminal(tfboot, tmp_path, ["sh", "-i"], typed=b"echo typed-$((6*7))\nexit 0\n",
                                    wait_for=b"# ", env={"PS1": "# "})
    assert code == 0, shown
    assert b"typed-42" in shown
