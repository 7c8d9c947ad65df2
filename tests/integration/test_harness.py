"""Self-tests of tests/harness/ (the simulated cluster network). Need root.

Run:  .venv/bin/python -m pytest tests/integration/test_harness.py -q
"""

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from harness.cluster import ClusterNetwork, HarnessError, cleanup_stale, reverse_name
from harness.namespaces import list_netns
from harness.processes import communicate_all

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

PY = sys.executable
FQDN = "{}.mnist.default.svc.cluster.local"


def _root_links() -> str:
    # names/indexes/flags of the root namespace's interfaces (no counters, no addresses moving)
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return "\n".join(line.split(" link/")[0] for line in out.splitlines())


def _readline(proc, timeout=5.0) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no output from the pod program in time"
    return proc.stdout.readline()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture(scope="module")
def root_links_before():
    return _root_links()


@pytest.fixture(scope="module")
def net(root_links_before):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as n:
        for i in range(3):
            n.add_pod(f"mnist-worker-{i}")
        n.publish("mnist-worker-0")
        n.publish("mnist-worker-1")
        yield n


@pytest.fixture(autouse=True)
def healthy_dns(request):
    yield
    if "net" in request.fixturenames:
        n = request.getfixturevalue("net")
        n.drop_dns_packets(0)
        n.set_dns_failure(None)
        n.start_dns()


# ---------------------------------------------------------------------------- topology


def test_topology_pods_talk_over_the_bridge(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    assert (p0.ip, p1.ip) == ("10.213.1.10", "10.213.1.11")
    assert all(ns in list_netns() for ns in (net.net_ns, net.dns_ns, p0.netns, p1.netns))
    assert all(ns.startswith(f"tfbt{os.getpid()}-") for ns in (net.net_ns, net.dns_ns, p0.netns))
    addrs = subprocess.run(["ip", "-n", p0.netns, "-o", "-4", "addr"], capture_output=True,
                           text=True, check=True).stdout
    assert "eth0" in addrs and "10.213.1.10/16" in addrs and "127.0.0.1/8" in addrs
    server = net.run(p1, [PY, "-c",
                          "import socket; s = socket.create_server(('0.0.0.0', 2222)); print('up', flush=True);"
                          "c, a = s.accept(); c.sendall(a[0].encode()); c.close()"], pid1=False)
    assert _readline(server).strip() == "up"
    client = net.exec_in_pod(p0, [PY, "-c",
                                  f"import socket; c = socket.create_connection(('{p1.ip}', 2222), 3);"
                                  "print(c.recv(100).decode())"])
    assert client.returncode == 0, client.stderr
    assert client.stdout.strip() == p0.ip          # the server saw pod 0's address
    server.communicate(timeout=5)


# ---------------------------------------------------------------------------- DNS records


def test_pod_resolves_published_peer(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    cp = net.exec_in_pod(p0, ["getent", "hosts", p1.fqdn])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == [p1.ip, p1.fqdn]
    # the Kubernetes search list works too (ndots:5 -> "<host>.<svc>" expands to the FQDN)
    cp = net.exec_in_pod(p0, ["getent", "ahostsv4", "mnist-worker-1.mnist"])
    assert cp.returncode == 0 and cp.stdout.split()[0] == p1.ip, cp
    cp = net.exec_in_pod(p0, [PY, "-c", "import socket, sys; print(sorted({a[4][0] for a in "
                                        "socket.getaddrinfo(sys.argv[1] + '.', 2222, socket.AF_INET)}))",
                              p1.fqdn])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == repr([p1.ip])
    # the headless Service name answers every published pod
    r = net.dns_query(net.service_fqdn, pod=p0)
    assert r.rcode == "NOERROR" and sorted(r.addresses) == sorted([p0.ip, p1.ip])


def test_unpublished_name_is_nxdomain(net):
    p0 = net.pods["mnist-worker-0"]
    for name in (FQDN.format("mnist-worker-2"), FQDN.format("mnist-worker-9"), "elsewhere.example.com",
                 "bare-name"):
        r = net.dns_query(name, pod=p0)
        assert r.rcode == "NXDOMAIN", r
        assert r.elapsed < 0.5
    cp = net.exec_in_pod(p0, ["getent", "hosts", FQDN.format("mnist-worker-2")])
    assert cp.returncode == 2 and cp.stdout == ""     # getent: 2 = key not found


def test_aaaa_of_a_only_name_is_nodata_not_timeout(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    for tcp in (False, True):
        r = net.dns_query(p1.fqdn, "AAAA", pod=p0, tcp=tcp)
        assert r.rcode == "NOERROR" and r.nodata, r
        assert r.elapsed < 0.2, r


def test_publish_while_running_is_visible_within_a_second(net):
    p0, p2 = net.pods["mnist-worker-0"], net.pods["mnist-worker-2"]
    assert net.dns_query(p2.fqdn, pod=p0).rcode == "NXDOMAIN"
    try:
        t0 = time.monotonic()
        net.publish(p2, wait=False)
        while (r := net.dns_query(p2.fqdn, pod=p0)).rcode != "NOERROR" and time.monotonic() - t0 < 2:
            time.sleep(0.01)
        assert r.addresses == [p2.ip] and time.monotonic() - t0 < 1.0, r
        # and a pod's resolver sees it
        cp = net.exec_in_pod(p0, ["getent", "hosts", p2.fqdn])
        assert cp.returncode == 0 and cp.stdout.split()[0] == p2.ip
    finally:
        t0 = time.monotonic()
        assert net.unpublish(p2, wait=False) == 1
    while (r := net.dns_query(p2.fqdn, pod=p0)).rcode != "NXDOMAIN" and time.monotonic() - t0 < 2:
        time.sleep(0.01)
    assert r.rcode == "NXDOMAIN" and time.monotonic() - t0 < 1.0


def test_ptr_and_aaaa_records(net):
    p0, p2 = net.pods["mnist-worker-0"], net.pods["mnist-worker-2"]
    # Kubernetes: the pod FQDN is the PTR of its IP
    r = net.dns_query(reverse_name(p0.ip), "PTR", pod=p2)
    assert (r.rcode, r.values) == ("NOERROR", [p0.fqdn])
    # compose style: PTR -> <project>-<service>-<N>.<network>, A for the aliases
    net.publish_name("proj-worker-1.proj_default", p2.ip, "proj-worker-1", "worker")
    net.publish_name("v6.example", "fd00::5")
    try:
        r = net.dns_query(reverse_name(p2.ip), "PTR", pod=p0)
        assert (r.rcode, r.values) == ("NOERROR", ["proj-worker-1.proj_default"])
        assert net.dns_query("worker", pod=p0).addresses == [p2.ip]
        cp = net.exec_in_pod(p0, ["getent", "hosts", p2.ip])     # reverse lookup via the pod's libc
        assert cp.returncode == 0 and "proj-worker-1.proj_default" in cp.stdout.split(), cp
        r = net.dns_query("v6.example", "AAAA", pod=p0)
        assert (r.rcode, r.addresses) == ("NOERROR", ["fd00::5"])
        assert net.dns_query("v6.example", "A", pod=p0).nodata
    finally:
        net.unpublish("proj-worker-1.proj_default")
        net.unpublish("v6.example")
    assert net.dns_query(reverse_name(p2.ip), "PTR", pod=p0).rcode == "NXDOMAIN"
    assert net.dns_query("worker", pod=p0).rcode == "NXDOMAIN"


# ---------------------------------------------------------------------------- running programs


PROBE = r"""
import json, os, socket
env = dict(kv.split("=", 1) for kv in open("/proc/self/environ").read().split("\0") if kv)
print(json.dumps({"pid": os.getpid(), "hostname": socket.gethostname(), "env": env,
                  "hosts": open("/etc/hosts").read(), "resolv": open("/etc/resolv.conf").read(),
                  "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}))
"""


def test_run_as_pid1_with_hostname_hosts_resolv_and_exact_env(net):
    p0 = net.pods["mnist-worker-0"]
    proc = net.run(p0, [PY, "-I", "-c", PROBE], env={"POD_NAME": "mnist-worker-0", "EMPTY": ""})
    assert proc.nspid()[-1] == 1 and proc.program_pid != proc.pid
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    info = json.loads(out)
    assert info["pid"] == 1
    assert info["procs"] == [1]                          # /proc shows the new PID namespace only
    assert info["hostname"] == "mnist-worker-0"
    assert f"{p0.ip}\tmnist-worker-0.mnist.default.svc.cluster.local\tmnist-worker-0\n" in info["hosts"]
    assert "127.0.0.1\tlocalhost\n" in info["hosts"]
    assert info["resolv"] == ("search default.svc.cluster.local svc.cluster.local cluster.local\n"
                              "nameserver 10.213.0.2\noptions ndots:5\n")
    assert set(info["env"]) == {"POD_NAME", "EMPTY", "PATH"} and info["env"]["EMPTY"] == ""
    # not PID 1: same pod view, ordinary pid; hostname override; the host keeps its own files
    cp = net.exec_in_pod(p0, [PY, "-I", "-c", PROBE])
    info2 = json.loads(cp.stdout)
    assert info2["pid"] != 1 and info2["hostname"] == "mnist-worker-0" and info2["hosts"] == info["hosts"]
    assert net.exec_in_pod(p0, ["hostname"], pid1=True).stdout.strip() == "mnist-worker-0"
    assert net.run(p0, ["hostname"], hostname="other").communicate(timeout=5)[0].strip() == "other"
    with open("/etc/hosts") as f:
        assert "mnist-worker-0" not in f.read()
    assert subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip() != "mnist-worker-0"


def test_pod_without_subdomain_and_custom_files(net):
    pod = net.add_pod("trainer-3", service="", resolv="nameserver 10.213.0.2\n")
    assert pod.fqdn is None
    cp = net.exec_in_pod(pod, ["cat", "/etc/hosts", "/etc/resolv.conf"])
    assert f"{pod.ip}\ttrainer-3\n" in cp.stdout and "svc.cluster.local" not in cp.stdout
    pod.set_hosts("127.0.0.1\tlocalhost\n")
    assert net.exec_in_pod(pod, ["cat", "/etc/hosts"]).stdout == "127.0.0.1\tlocalhost\n"
    with pytest.raises(HarnessError):
        net.publish(pod)


SIGNAL_PROBE = r"""
import os, signal, sys, time
def on(sig, frame):
    os.write(1, ("got %s\n" % signal.Signals(sig).name).encode())   # print() is not reentrant
    if sig == signal.SIGTERM:
        sys.exit(42)
signal.signal(signal.SIGTERM, on)
signal.signal(signal.SIGUSR1, on)
print("ready", os.getpid(), flush=True)
for _ in range(300):
    time.sleep(0.1)
sys.exit(3)
"""


def test_signals_reach_pid1(net):
    p0 = net.pods["mnist-worker-0"]
    proc = net.run(p0, [PY, "-c", SIGNAL_PROBE])
    assert _readline(proc).split() == ["ready", "1"]
    net.signal(proc, signal.SIGUSR1)
    assert _readline(proc).strip() == "got SIGUSR1"
    proc.terminate()                                     # Popen API: to the PID 1 inside
    out, _ = proc.communicate(timeout=5)
    assert out.strip() == "got SIGTERM" and proc.returncode == 42
    # a signal sent to the outer process (the shim) is relayed to PID 1 as well
    proc = net.run(p0, [PY, "-c", SIGNAL_PROBE])
    assert _readline(proc).split() == ["ready", "1"]
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=5)
    assert proc.returncode == 42
    # SIGKILL: Popen sees -9 like for a plain child
    proc = net.run(p0, ["sleep", "30"])
    proc.kill()
    proc.communicate(timeout=5)
    assert proc.returncode == -signal.SIGKILL


def test_exec_failures(net):
    proc = net.run("mnist-worker-0", ["/nonexistent/tfboot"])
    _, err = proc.communicate(timeout=5)
    assert proc.returncode == 127 and "No such file" in err
    cp = net.exec_in_pod("mnist-worker-0", ["/etc/hosts"])
    assert cp.returncode == 126


# ---------------------------------------------------------------------------- failure modes


def test_drop_dns_packets(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    net.reset_dns_query_count()
    net.drop_dns_packets(50)
    results = net.dns_query_many([(p1.fqdn, "A")] * 40, pod=p0, timeout=0.5)
    timeouts = sum(r.timed_out for r in results)
    answered = [r for r in results if r.rcode == "NOERROR"]
    assert 0 < timeouts < 40 and len(answered) + timeouts == 40, [r.rcode for r in results]
    assert all(r.addresses == [p1.ip] for r in answered)
    assert net.dns_query_count() == len(answered)       # dropped ones never reached the server
    net.drop_dns_packets(100)
    assert all(r.timed_out for r in net.dns_query_many([(p1.fqdn, "A")] * 5, pod=p0, timeout=0.3))
    assert net.dns_query(p1.fqdn, pod=p0, tcp=True, timeout=0.3).timed_out
    net.drop_dns_packets(0)
    assert all(r.addresses == [p1.ip] for r in net.dns_query_many([(p1.fqdn, "A")] * 5, pod=p0))


@pytest.mark.parametrize("mode,rcode", [("servfail", "SERVFAIL"), ("refused", "REFUSED"),
                                        ("nxdomain", "NXDOMAIN")])
def test_dns_failure_modes(net, mode, rcode):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    net.reset_dns_query_count()
    net.set_dns_failure(mode)
    for tcp in (False, True):
        for name, qtype in ((p1.fqdn, "A"), (p1.fqdn, "AAAA"), (FQDN.format("nope"), "A")):
            r = net.dns_query(name, qtype, pod=p0, tcp=tcp)
            assert r.rcode == rcode and not r.answers, r
    assert net.dns_query_count() == 6
    assert net.dns_queries()[-1] == ("A", FQDN.format("nope"), p0.ip)
    cp = net.exec_in_pod(p0, ["getent", "hosts", p1.fqdn])
    assert cp.returncode == 2
    net.set_dns_failure(None)                            # records survive
    assert net.dns_query(p1.fqdn, pod=p0).addresses == [p1.ip]


def test_stop_and_start_dns(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    net.stop_dns()
    assert not net.dns_running
    assert net.dns_query(p1.fqdn, pod=p0).rcode == "ECONNREFUSED"          # ICMP port unreachable
    assert net.dns_query(p1.fqdn, pod=p0, tcp=True).rcode == "ECONNREFUSED"
    net.publish_name("late.example", p1.ip)             # records may change while it is down
    net.start_dns()
    assert net.dns_running
    assert net.dns_query(p1.fqdn, pod=p0).addresses == [p1.ip]
    assert net.dns_query("late.example", pod=p0).addresses == [p1.ip]
    net.unpublish("late.example")


def test_query_count_and_log(net):
    p0, p1 = net.pods["mnist-worker-0"], net.pods["mnist-worker-1"]
    net.reset_dns_query_count()
    assert net.dns_query_count() == 0
    net.dns_query_many([(p1.fqdn, "A"), (p1.fqdn, "AAAA"), ("x.example", "A")], pod=p0)
    assert net.dns_query_count() == 3
    # query_many sends the three at once: the server logs them in the order they arrive.
    assert sorted(net.dns_queries()[-3:]) == sorted([("A", p1.fqdn, p0.ip), ("AAAA", p1.fqdn, p0.ip),
                                                     ("A", "x.example", p0.ip)])
    net.dns_query("from-bridge.example")
    assert net.dns_queries()[-1] == ("A", "from-bridge.example", net.bridge_ip)


# ---------------------------------------------------------------------------- lifecycle


def test_teardown_leaves_nothing(net, root_links_before):
    with pytest.raises(RuntimeError, match="boom"):
        with ClusterNetwork(service="svc", log_queries=False) as n2:
            pod = n2.add_pod("svc-0")
            n2.publish(pod)
            assert n2.dns_query(pod.fqdn).addresses == [pod.ip]
            with pytest.raises(HarnessError):
                n2.dns_query_count()                     # logging off
            pid1 = n2.run(pod, ["sleep", "60"])
            # a grandchild in its own session escapes process-group kills: found via `ip netns pids`
            plain = n2.run(pod, ["sh", "-c", "setsid sleep 60 & echo $!; wait"], pid1=False)
            escaped = int(_readline(plain))
            pids = [pid1.pid, pid1.program_pid, plain.pid, escaped, n2.dns.pid]
            tmpdir, prefix = n2.tmpdir, n2.prefix
            assert len([ns for ns in list_netns() if ns.startswith(prefix)]) == 3
            raise RuntimeError("boom")
    assert not [ns for ns in list_netns() if ns.startswith(prefix)]
    deadline = time.monotonic() + 3
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_gone(p) for p in pids)
    assert not os.path.exists(tmpdir)
    assert _root_links() == root_links_before           # nothing created in the root namespace
    # the module's network is still fine
    assert net.dns_query(net.pods["mnist-worker-0"].fqdn).rcode == "NOERROR"


def test_cleanup_stale():
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"tfbt{dead.pid}-0-stale"
    tmp = f"/tmp/tfbt{dead.pid}-0-stale"
    subprocess.run(["ip", "netns", "add", name], check=True)
    os.makedirs(tmp, exist_ok=True)
    try:
        removed = cleanup_stale()
        assert name in removed
        assert name not in list_netns() and not os.path.exists(tmp)
        # our own (live) namespaces are not touched
        assert not [ns for ns in removed if ns.startswith(f"tfbt{os.getpid()}-")]
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_communicate_all_reads_every_pipe_at_once(tmp_path):
    # The first process ends only after the second has; the second writes more than a pipe holds
    # before it ends. Read one after the other, the two would wait for each other for ever.
    marker = tmp_path / "second-ended"
    first = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.05)\nprint('first')"
    second = f"import sys\nsys.stdout.write('x' * (1 << 20))\nsys.stdout.flush()\nopen({str(marker)!r}, 'w').close()"
    procs = [subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for code in (first, second)]
    results = communicate_all(procs, 30)
    assert [(code, len(out), err) for code, out, err in results] == [(0, len("first\n"), ""), (0, 1 << 20, "")]


def test_communicate_all_kills_a_late_process_and_says_so():
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
             for argv in (["sleep", "60"], ["sh", "-c", "echo gone >&2"])]
    with pytest.raises(HarnessError, match=r"^1 of 2 processes did not end within 1s \(processes \[0\]\):\n\n---\ngone\n$"):
        communicate_all(procs, 1)
    assert procs[0].wait(timeout=5) == -signal.SIGKILL
