"""Hostile and unlucky environments (issue 11): bytes that are not UTF-8, a damaged startup.json
from an earlier start, symlinks planted at temporary names, signals before the command, errors
halfway through writing, `tfboot local` short of descriptors or fed a progress bar, --wait as
one deadline, /etc files that are FIFOs, log lines that bypass the logger, a parent that blocks
or ignores signals, duplicate environment entries, allocation failure. Needs root (mount, PID
and network namespaces; the PTR tests use tests/harness).
"""

import json
import os
import re
import resource
import signal
import subprocess
import time

import pytest

from harness.processes import after_the_wait
from init_support import PATH, PYTHON, Supervised, entrypoint_args, kill_quietly

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

NOT_UTF8 = b"caf\xe9"
REPLACED = "caf\ufffd"  # docs/supervision.md: bytes that are not UTF-8 are replaced by U+FFFD in JSON


def run(argv, *, cwd, env=None, timeout=30, preexec_fn=None, stdin=subprocess.DEVNULL):
    """Runs argv (bytes allowed) with exactly env (plus PATH); returns (code, stdout, stderr, peak RSS in
    bytes of the process and its children, from wait4)."""
    out_path, err_path = cwd / f".out-{time.monotonic_ns()}", cwd / f".err-{time.monotonic_ns()}"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env={"PATH": PATH, **(env or {})}, stdin=stdin, stdout=out, stderr=err,
                                preexec_fn=preexec_fn)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            raise AssertionError(f"{argv[:3]}... still ran after {timeout}s: {err_path.read_bytes()[-2000:]!r}")
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = out_path.read_bytes(), err_path.read_bytes()
    out_path.unlink()
    err_path.unlink()
    return proc.returncode, stdout, stderr, usage.ru_maxrss * 1024


def strict_json(path):
    """The file as JSON, read as strict UTF-8 (a raw byte that is not UTF-8 fails here)."""
    return json.loads(path.read_bytes().decode("utf-8"))


def level_lines(stderr, level):
    return [line for line in stderr.decode(errors="replace").splitlines() if f" {level} " in line]


_sanitized = {}


def sanitized(tfboot):
    """Whether tfboot is the ASan+UBSan build (whose shadow memory rules out RLIMIT_AS and tight RSS)."""
    if tfboot not in _sanitized:
        with open(tfboot, "rb") as binary:
            _sanitized[tfboot] = b"__asan_init" in binary.read()
    return _sanitized[tfboot]


# ---- 1. bytes that are not UTF-8: the command gets them untouched, JSON files stay valid

@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_command_argument_that_is_not_utf8_is_passed_on_untouched(tfboot, tmp_path, mode):
    command = [b"sh", b"-c", b'printf %s "$1" > argument', b"sh", NOT_UTF8]
    code, _, stderr, _ = run([tfboot, *entrypoint_args(tmp_path / "logs"), mode, "--", *command], cwd=tmp_path)
    assert code == 0, stderr
    assert (tmp_path / "argument").read_bytes() == NOT_UTF8
    startup = strict_json(tmp_path / "logs" / "worker_0" / "startup.json")
    assert startup["command"][:4] == ["sh", "-c", 'printf %s "$1" > argument', "sh"]
    assert startup["command"][4] == REPLACED
    assert strict_json(tmp_path / "logs" / "worker_0" / "tf_config.json")["task"] == {"type": "worker", "index": 0}


@pytest.mark.parametrize("source", ["--hostname", "POD_NAME", "uts"])
def test_hostname_that_is_not_utf8_is_recorded_replaced(tfboot, tmp_path, source):
    args = [*entrypoint_args(tmp_path / "logs"), "--", "touch", "ran"]
    env = {}
    if source == "--hostname":
        argv = [tfboot, "--hostname", NOT_UTF8, *args]
    elif source == "POD_NAME":
        argv, env = [tfboot, *args], {"POD_NAME": NOT_UTF8}
    else:  # the kernel's hostname, in a UTS namespace of its own
        set_hostname = "import os, socket, sys; socket.sethostname(os.fsencode(sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])"
        argv = ["unshare", "--uts", PYTHON, "-c", set_hostname, NOT_UTF8, tfboot, *args]
    code, _, stderr, _ = run(argv, cwd=tmp_path, env=env)
    assert code == 0, stderr
    assert (tmp_path / "ran").exists()
    assert strict_json(tmp_path / "logs" / "worker_0" / "startup.json")["hostname"] == REPLACED


# ---- 2. a damaged startup.json from an earlier start is set aside with a warning, bounded in
# ---- size and depth, and never stops the task

DAMAGED_STARTUP = {
    "started_at_not_a_number": b'{"started_at": "yesterday"}',
    "identity_source_not_a_string": b'{"identity_source": 5, "restarts": 1}',
    "restarts_not_an_integer": b'{"restarts": "3"}',
    "restarts_at_int_max": b'{"restarts": 2147483647}',
    "restarts_negative": b'{"restarts": -5}',
    "restarts_huge_float": b'{"restarts": 1e300}',
    "history_not_a_list": b'{"restarts": 2, "history": {"a": 1}}',
    "history_entries_not_objects": b'{"restarts": 2, "history": [1, "x", null]}',
    "history_entry_of_wrong_types": b'{"restarts": 1, "history": [{"started_at": "x", "identity_source": []}]}',
    "history_nested_100000_deep": b'{"restarts": 1, "history": ' + b"[" * 100000 + b"]" * 100000 + b"}",
    "not_json": b"garbage",
    "empty": b"",
    "top_level_array": b"[]",
    "nul_byte": b'{"restarts": \x00}',
    "not_utf8": b'{"hostname": "\xff", "restarts": 1}',
    "200_MB": None,  # written sparse below
}


def own_peak_rss():
    """This process's peak RSS in bytes (VmHWM)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def write_damaged(path, name):
    path.parent.mkdir(parents=True)
    if name == "200_MB":
        with open(path, "wb") as damaged:
            damaged.write(b'{"restarts": 1, "pad": "')
            damaged.seek(200 * 1024 * 1024)
            damaged.write(b'"}')
    else:
        path.write_bytes(DAMAGED_STARTUP[name])


@pytest.mark.parametrize("name", list(DAMAGED_STARTUP))
def test_damaged_startup_json_is_set_aside_with_a_warning(tfboot, tmp_path, name):
    # docs/supervision.md: read only as a regular file of at most 1 MiB, nested at most 16 levels, with the
    # types tfboot writes; anything else is renamed to startup.json.damaged.<unix time> with a
    # warning (log and new file), and the count starts afresh.
    log_dir = tmp_path / "logs" / "worker_0"
    startup_path = log_dir / "startup.json"
    write_damaged(startup_path, name)
    damaged_size = startup_path.stat().st_size
    code, _, stderr, peak_rss = run([tfboot, *entrypoint_args(tmp_path / "logs"), "--", "touch", "ran"], cwd=tmp_path)
    assert code == 0, stderr[-2000:]
    assert (tmp_path / "ran").exists()
    startup = strict_json(startup_path)
    assert (startup["restarts"], startup["history"]) == (0, []), "the count starts afresh"
    # Linux starts a child's peak RSS at its parent's (fork and vfork alike, kept across exec), so
    # pytest's own peak, which grows over a whole run, is the floor of what wait4 reports.
    limit = max((128 if sanitized(tfboot) else 64) * 1024 * 1024, own_peak_rss())
    assert peak_rss <= limit, f"peak RSS {peak_rss >> 20} MB: the earlier report was read whole"
    set_aside = [path for path in log_dir.iterdir() if re.fullmatch(r"startup\.json\.damaged\.[0-9]+", path.name)]
    assert len(set_aside) == 1, sorted(path.name for path in log_dir.iterdir())
    assert set_aside[0].stat().st_size == damaged_size
    if name != "200_MB":
        assert set_aside[0].read_bytes() == DAMAGED_STARTUP[name]
    warnings = level_lines(stderr, "warning")
    assert len(warnings) == 1 and "startup.json" in warnings[0], stderr[-2000:]
    assert len(startup["warnings"]) == 1 and "startup.json" in startup["warnings"][0]


def test_intact_startup_json_is_counted_without_a_warning(tfboot, tmp_path):
    # The counterpart of the damaged cases: a sound earlier report is built on, silently.
    for restarts in (0, 1):
        code, _, stderr, _ = run([tfboot, *entrypoint_args(tmp_path / "logs"), "--", "true"], cwd=tmp_path)
        assert code == 0, stderr
        startup = strict_json(tmp_path / "logs" / "worker_0" / "startup.json")
        assert startup["restarts"] == restarts
        assert len(startup["history"]) == restarts
        assert level_lines(stderr, "warning") == []


# ---- 3. a symlink planted at a temporary name is not followed (tfboot runs as root)

def plant_links(log_dirs, pid, victim):
    for log_dir in log_dirs:
        for name in ("tf_config.json", "startup.json"):
            os.symlink(victim, log_dir / f".{name}.tmp.{pid}")


@pytest.mark.parametrize("how", ["pid1", "not_pid1", "local"])
def test_symlink_planted_at_a_temporary_name_is_not_followed(tfboot, tmp_path, how):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    logs = tmp_path / "logs"
    log_dirs = [logs / "worker_0", logs / "worker_1"] if how == "local" else [logs / "worker_0"]
    for log_dir in log_dirs:
        log_dir.mkdir(parents=True)
    preexec_fn = None
    if how == "pid1":
        plant_links(log_dirs, 1, victim)
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", tfboot, *entrypoint_args(logs), "--",
                "true"]
    else:
        # The child's pid is tfboot's pid once it has exec'd: plant the links just before.
        preexec_fn = lambda: plant_links(log_dirs, os.getpid(), victim)  # noqa: E731
        argv = ([tfboot, "local", "--cluster", "worker=2", "--log-root", str(logs), "--", "true"] if how == "local"
                else [tfboot, *entrypoint_args(logs), "--no-init", "--", "true"])
    code, _, stderr, _ = run(argv, cwd=tmp_path, preexec_fn=preexec_fn)
    assert victim.read_text() == "precious\n"
    assert code == 0, stderr
    for log_dir in log_dirs:
        for name in ("tf_config.json", "startup.json"):
            assert not (log_dir / name).is_symlink(), f"{name} became the planted link"
        assert strict_json(log_dir / "tf_config.json")["task"]["type"] == "worker"


# ---- 4 and 8. the PTR wait: SIGTERM ends it at once as PID 1; --wait is one deadline for PTR and peers

COMPOSE_RESOLV = "nameserver {dns}\noptions ndots:0\n"


@pytest.fixture
def compose_net():
    from harness.cluster import ClusterNetwork
    with ClusterNetwork(service="", namespace="default", cluster_domain="cluster.local") as network:
        yield network


@pytest.mark.parametrize("dns", ["no_record", "no_answer"])
def test_sigterm_while_waiting_for_the_own_ptr_record_ends_pid1_at_once(compose_net, tfboot, tmp_path, dns):
    net = compose_net
    pod = net.add_pod("lonely", hostname="dd01", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=net.dns_ip))
    if dns == "no_answer":
        net.drop_dns_packets(100)
    marker = tmp_path / "ran"
    proc = net.run(pod, [tfboot, "--identity-from", "ptr", "--wait", "8s", "--log-root", str(tmp_path / "logs"), "--",
                         "touch", str(marker)], env={"TFBOOT_CLUSTER": "worker=2", "TFBOOT_CONTROL_PORT": "0"})
    time.sleep(1.5)
    assert proc.poll() is None, proc.communicate()
    sent = time.monotonic()
    net.signal(proc, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert time.monotonic() - sent < 1.5, err
    assert not marker.exists() and not (tmp_path / "logs").exists()


def test_wait_is_one_deadline_for_the_ptr_lookup_and_the_peers(compose_net, tfboot, tmp_path):
    net = compose_net
    pod = net.add_pod("proj-worker-1", hostname="ee01", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=net.dns_ip))
    started = time.monotonic()
    proc = net.run(pod, [tfboot, *after_the_wait("--identity-from", "ptr", "--wait", "6s")], env={"TFBOOT_CLUSTER": "worker=2"})
    time.sleep(2.5)
    net.publish_name("proj-worker-1.proj_default", pod.ip, "proj-worker-1")  # the PTR, late; worker 2 never
    _, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, err
    assert 5.5 < elapsed < 7.0, f"took {elapsed:.1f}s for --wait 6s"


# ---- 6. errors leave nothing behind

@pytest.mark.parametrize("shape", ["long_component", "longer_than_path_max"])
def test_log_root_that_cannot_be_created_leaves_nothing_behind(tfboot, tmp_path, shape):
    base = tmp_path / "base"
    base.mkdir()
    if shape == "long_component":
        log_root = base / "new1" / "new2" / ("x" * 300) / "logs"
    else:
        log_root = base.joinpath(*["d" * 200] * 25)
    code, _, stderr, _ = run([tfboot, *entrypoint_args(log_root), "--", "touch", str(tmp_path / "ran")], cwd=tmp_path)
    assert code == 4, stderr
    assert len(level_lines(stderr, "error")) == 1, stderr
    assert not (tmp_path / "ran").exists()
    assert os.listdir(base) == []


FULL_DISK = r"""
import json, os, subprocess, sys
disk, tfboot, args = sys.argv[1], sys.argv[2], sys.argv[3:]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tfboot-test-disk", disk], check=True)
logs = os.path.join(disk, "logs")
log_dir = os.path.join(logs, "worker_0")
def start():
    return subprocess.run([tfboot, *args, "--log-root", logs, "--", "touch", os.path.join(disk, "ran")],
                          capture_output=True)
# An earlier start left a sound startup.json; its tf_config.json is gone.
assert start().returncode == 0
os.unlink(os.path.join(log_dir, "tf_config.json"))
os.unlink(os.path.join(disk, "ran"))
earlier = open(os.path.join(log_dir, "startup.json"), "rb").read()
filler = os.path.join(disk, "filler")
with open(filler, "wb", buffering=0) as f:
    try:
        while True:
            f.write(b"\0" * 4096)
    except OSError:
        pass
os.truncate(filler, os.path.getsize(filler) - 4096)   # room for one small file, not for two
result = start()
print(json.dumps({"code": result.returncode, "stderr": result.stderr.decode(errors="replace"),
                  "files": sorted(os.listdir(log_dir)), "ran": os.path.exists(os.path.join(disk, "ran")),
                  "startup_unchanged": open(os.path.join(log_dir, "startup.json"), "rb").read() == earlier}))
"""


def test_full_disk_leaves_the_log_dir_as_it_was(tfboot, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    code, stdout, stderr, _ = run(["unshare", "--mount", "--propagation", "private", PYTHON, "-c", FULL_DISK, str(disk),
                                   tfboot, *entrypoint_args("unused")[:-2]], cwd=tmp_path)
    assert code == 0, stderr
    outcome = json.loads(stdout)
    assert outcome["code"] == 4, outcome["stderr"]
    assert not outcome["ran"]
    assert outcome["files"] == ["startup.json"], "no new file beside the earlier startup.json"
    assert outcome["startup_unchanged"]


# ---- 7. `tfboot local`: a task that cannot start leaves none running; a progress bar is not hoarded

def processes_with_argument(argument):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if argument.encode() in cmdline.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_local_that_cannot_start_every_task_leaves_none_running(tfboot, tmp_path):
    duration = f"{4000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000:03d}"  # names this test's tasks
    few_descriptors = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))  # noqa: E731
    try:
        code, _, stderr, _ = run([tfboot, "local", "--cluster", "worker=8", "--log-root", str(tmp_path / "logs"), "--",
                                  "sh", "-c", f"exec sleep {duration}"], cwd=tmp_path, preexec_fn=few_descriptors)
        time.sleep(0.3)
        left = processes_with_argument(duration)
        assert left == [], "tasks still running after tfboot local ended"
        assert code == 7, stderr
        assert len(level_lines(stderr, "error")) == 1, stderr
    finally:
        for pid in processes_with_argument(duration):
            kill_quietly(pid)


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def progress_bar_peak(tfboot, tmp_path, size, env, limit):
    """tfboot local's peak RSS while one task writes `size` bytes of \\r-ended lines (stopping once
    over `limit`), the finished process, and where its stdout went."""
    tmp_path.mkdir(exist_ok=True)
    producer = f"yes 123456789 | tr '\\n' '\\r' | head -c {size}"
    out_path = tmp_path / "out"
    with open(out_path, "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([tfboot, "local", "--cluster", "worker=1", "--log-root", str(tmp_path / "logs"), "--",
                                 "sh", "-c", producer], cwd=tmp_path, env=env, stdout=out, stderr=err)
    peak = 0
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and peak <= limit and time.monotonic() < deadline:
            peak = max(peak, vm_hwm(proc.pid) or 0)
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return peak, proc, out_path


def test_local_task_writing_a_progress_bar_without_newlines_keeps_memory_small(tfboot, tmp_path):
    size = 50 * 1024 * 1024
    # AddressSanitizer keeps freed memory in quarantine (256 MB by default): keep it small so
    # that what is measured is what tfboot holds. Its own start costs about 100 MB whatever the
    # stream, so there the bound is what a 1 MB stream costs plus 32 MB: no growth with the stream.
    env = {"PATH": PATH, "ASAN_OPTIONS": "quarantine_size_mb=4"} if sanitized(tfboot) else {"PATH": PATH}
    limit = 32 * 1024 * 1024
    if sanitized(tfboot):
        limit += progress_bar_peak(tfboot, tmp_path / "small", 1024 * 1024, env, 1 << 40)[0]
    peak, proc, out_path = progress_bar_peak(tfboot, tmp_path, size, env, limit)
    assert peak <= limit, f"tfboot local reached {peak >> 20} MB for a {size >> 20} MB stream"
    assert proc.returncode == 0, (tmp_path / "err").read_text()[-2000:]
    # docs/deploying.md (tfboot local): a line ends at \\n or, as progress bars write, at \\r.
    shown = out_path.read_bytes()
    assert len(shown) == size // 10 * 21 and shown.count(b"[worker:0] 123456789\r") == size // 10


# ---- 8. /etc files that are FIFOs do not hang tfboot

@pytest.mark.parametrize("fifo_at, expected", [("/etc/resolv.conf", 0), ("/etc/hosts", 3)])
def test_etc_file_that_is_a_fifo_does_not_hang(tfboot, tmp_path, fifo_at, expected):
    # No network (a fresh namespace with only lo), peers' names only in the hosts file: with
    # resolv.conf unreadable the name still resolves from hosts (0); with hosts unreadable it
    # cannot resolve and the deadline ends the wait (3).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = {"/etc/hosts": "127.0.0.1 localhost\n127.0.0.1 m-worker-0\n", "/etc/resolv.conf": "nameserver 127.0.0.1\n"}
    mounts = []
    for path, text in regular.items():
        source = fifo if path == fifo_at else tmp_path / os.path.basename(path)
        if path != fifo_at:
            source.write_text(text)
        mounts.append(f"mount --bind {source} {path}")
    script = " && ".join([*mounts, "ip link set lo up", 'exec "$0" "$@"'])
    argv = ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", script, tfboot, "--hostname",
            "m-worker-0", "--cluster", "worker=1", "--wait", "2s", "--log-root", str(tmp_path / "logs"), "--", "true"]
    started = time.monotonic()
    code, _, stderr, _ = run(argv, cwd=tmp_path, timeout=8)
    assert code == expected, stderr
    assert time.monotonic() - started < 5


# ---- 9. under --log-format json every line on stderr is one JSON object; in text, one escaped line

BAD_NAME = "no\nsuch\x1b[31mcommand"


def json_lines(stderr):
    records = []
    for line in stderr.decode("utf-8").splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        records.append(record)
    return records


@pytest.mark.parametrize("mode, log_format", [("--init", "json"), ("--init", "text"), ("--no-init", "json"),
                                              ("--no-init", "text")])
def test_cannot_run_command_is_one_log_line(tfboot, tmp_path, mode, log_format):
    code, _, stderr, _ = run([tfboot, *entrypoint_args(tmp_path / "logs"), "--log-format", log_format, mode, "--",
                              BAD_NAME], cwd=tmp_path)
    assert code == 127, stderr
    assert b"\x1b" not in stderr, "an escape sequence from the command name reached the terminal"
    if log_format == "json":
        errors = [r for r in json_lines(stderr) if r["level"] == "error"]
        assert len(errors) == 1 and "cannot run command" in errors[0]["message"], stderr
    else:
        errors = level_lines(stderr, "error")
        assert len(errors) == 1 and "cannot run command" in errors[0] and "no\\nsuch\\x1b[31mcommand" in errors[0], stderr
        if mode == "--init":  # the closing line names it too, as escaped
            closing = [line for line in stderr.decode().splitlines() if "exiting 127: the command failed: cannot run" in line]
            assert len(closing) == 1 and "no\\nsuch\\x1b[31mcommand" in closing[0], stderr


def test_stop_signal_before_the_command_is_a_json_line(tfboot, tmp_path):
    # A fresh network namespace (lo down): the peer's name never resolves, so tfboot waits.
    argv = ["unshare", "--net", tfboot, "--hostname", "m-worker-0", "--cluster", "worker=2", "--dns-server", "127.0.0.1",
            "--wait", "30s", "--log-format", "json", "--log-root", str(tmp_path / "logs"), "--", "touch", "ran"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={"PATH": PATH, "TFBOOT_CONTROL_PORT": "0"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seen = b""
        deadline = time.monotonic() + 10
        while b"waiting up to" not in seen and time.monotonic() < deadline:
            seen += proc.stderr.readline()
        assert b"waiting up to" in seen, seen
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=5)[1]
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    records = json_lines(seen + rest)
    assert any("signal" in r["message"] for r in records[-1:]), records[-1:]
    assert not (tmp_path / "ran").exists()


# ---- 10. the command starts with an empty signal mask and default dispositions, whatever the parent did

def nohup_like_parent():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGALRM})


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_command_gets_a_clean_signal_state_under_a_nohup_like_parent(tfboot, tmp_path, mode):
    code, stdout, stderr, _ = run([tfboot, *entrypoint_args(tmp_path / "logs"), mode, "--", "grep", "-E",
                                   "^Sig(Blk|Ign):", "/proc/self/status"], cwd=tmp_path, preexec_fn=nohup_like_parent)
    assert code == 0, stderr
    assert stdout.split() == [b"SigBlk:", b"0000000000000000", b"SigIgn:", b"0000000000000000"]


def test_forwarded_sighup_reaches_a_command_whose_parent_ignored_it(tfboot, tmp_path):
    script = 'trap "echo got HUP; exit 3" HUP; echo ready; while :; do sleep 0.05; done'
    with Supervised(tfboot, tmp_path, ["sh", "-c", script], "init", preexec_fn=nohup_like_parent) as supervised:
        assert supervised.out.readline() == "ready"
        supervised.signal(signal.SIGHUP)
        assert supervised.wait(timeout=3) == 3, supervised.stderr()
        assert supervised.out.readline(timeout=1) == "got HUP"


# ---- 11. duplicate environment entries: the command sees exactly one of each, tfboot's

EXECVE_WITH_ENVP = r"""
import ctypes, json, os, sys
argv, envp = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def strings(items):
    return (ctypes.c_char_p * (len(items) + 1))(*[item.encode() for item in items], None)
libc = ctypes.CDLL(None, use_errno=True)
libc.execve(argv[0].encode(), strings(argv), strings(envp))
sys.exit("execve: " + os.strerror(ctypes.get_errno()))
"""


@pytest.mark.parametrize("mode", ["--init", "--no-init"])
def test_duplicate_environment_entries_reach_the_command_once(tfboot, tmp_path, mode):
    logs = tmp_path / "logs"
    stale_a = json.dumps({"cluster": {"worker": ["stale-a:1"]}, "task": {"type": "worker", "index": 0}})
    stale_b = json.dumps({"cluster": {"worker": ["stale-b:1"]}, "task": {"type": "worker", "index": 0}})
    envp = [f"PATH={PATH}", f"TF_CONFIG={stale_a}", "TFBOOT_LOG_DIR=/stale-a", "TFBOOT_TASK_TYPE=worker",
            "TFBOOT_TASK_INDEX=0", f"TF_CONFIG={stale_b}", "TFBOOT_LOG_DIR=/stale-b", "TFBOOT_TASK_TYPE=chief",
            "TFBOOT_TASK_INDEX=5"]
    argv = [tfboot, *entrypoint_args(logs), mode, "--", "cat", "/proc/self/environ"]
    code, stdout, stderr, _ = run([PYTHON, "-c", EXECVE_WITH_ENVP, json.dumps(argv), json.dumps(envp)], cwd=tmp_path)
    assert code == 0, stderr
    entries = stdout.decode().split("\0")
    tf_config = (logs / "worker_0" / "tf_config.json").read_text().strip()
    expected = {"TF_CONFIG": tf_config, "TFBOOT_LOG_DIR": f"{logs}/worker_0", "TFBOOT_TASK_TYPE": "worker",
                "TFBOOT_TASK_INDEX": "0"}
    for key, value in expected.items():
        assert [entry for entry in entries if entry.startswith(key + "=")] == [f"{key}={value}"]


# ---- 12 (allocation). allocation failure is one clear error line with one defined exit code

def test_allocation_failure_is_one_clear_error_with_a_defined_exit_code(tfboot, tmp_path):
    if sanitized(tfboot):
        pytest.skip("AddressSanitizer's shadow memory does not fit under RLIMIT_AS")
    failures = []
    for megabytes in (8, 16, 24, 26, 28, 30, 34):
        def limit_memory(size=megabytes << 20):
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        code, stdout, stderr, _ = run([tfboot, "--print", "--task-index", "0", "--cluster", "worker=100000",
                                       "--peer-template", "w-{index}", "--wait", "0"], cwd=tmp_path,
                                      preexec_fn=limit_memory)
        if code == 0:
            assert len(json.loads(stdout)["cluster"]["worker"]) == 100000
            continue
        failures.append((megabytes, code, stderr.decode(errors="replace")))
    assert failures, "8 MB cannot hold 100000 peers: at least that run must fail"
    for megabytes, code, stderr in failures:
        errors = [line for line in stderr.splitlines() if " error " in line]
        assert len(errors) == 1 and "memory" in errors[0], (megabytes, code, stderr[-1000:])
        assert not re.search(r"terminate called|internal error", stderr), (megabytes, stderr[-1000:])
    codes = {code for _, code, _ in failures}
    assert codes == {7}, [(megabytes, code) for megabytes, code, _ in failures]
