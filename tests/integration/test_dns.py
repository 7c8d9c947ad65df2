"""The DNS wait against a real dnsmasq on a private network of namespaces (needs root).

Each pod is a network namespace with its own hostname, PID namespace (tfboot is PID 1), a
kubelet-like /etc/hosts and a Kubernetes-like resolv.conf (search list, ndots:5).
"""

import json
import os
import signal
import time

import pytest

from harness.processes import after_the_wait

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

SERVICE_SUFFIX = "mnist.default.svc.cluster.local"
# One task of a job run alone: the job's control channel is off (test_supervision.py covers it).
ALONE = {"TFBOOT_CONTROL_PORT": "0"}


def fqdn(host):
    return f"{host}.{SERVICE_SUFFIX}"


def start(net, tfboot, pod, args, env, log_root=None):
    full_env = dict(env)
    if log_root is not None:
        full_env["TFBOOT_LOG_ROOT"] = str(log_root)
    return net.run(pod, [tfboot, *args], env=full_env)


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def workers(net, count, publish=True):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(count)]
    if publish:
        for pod in pods:
            net.publish(pod)
    return pods


def test_all_peers_present_zero_config(net, tfboot):
    pods = workers(net, 3)
    procs = [start(net, tfboot, pod, after_the_wait(), {"TFBOOT_CLUSTER": "worker=3"}) for pod in pods]
    for index, proc in enumerate(procs):
        code, out, err = finish(proc)
        assert code == 0, err
        assert json.loads(out) == {
            "cluster": {"worker": [f"{fqdn('mnist-worker-' + str(i))}:2222" for i in range(3)]},
            "task": {"type": "worker", "index": index}}
        assert "peers are in Service mnist.default.svc.cluster.local" in err


def test_at_most_two_queries_per_name_and_startup_json(net, tfboot, tmp_path):
    pods = workers(net, 4)
    net.reset_dns_query_count()
    proc = start(net, tfboot, pods[2], ["--", "true"], ALONE | {"TFBOOT_CLUSTER": "worker=4"}, log_root=tmp_path)
    code, _, err = finish(proc)
    assert code == 0, err
    queries = net.dns_queries()
    names = sorted({name for _, name, _ in queries})
    assert names == sorted(fqdn(f"mnist-worker-{i}") for i in range(4)), "no search-list expansion"
    assert len(queries) <= 2 * 4
    startup = json.loads((tmp_path / "worker_2" / "startup.json").read_text())
    assert startup["dns_servers"] == [f"{net.dns_ip}:53"]
    for i, peer in enumerate(startup["peers"]):
        assert peer["resolved"] is True
        assert peer["addresses"] == [pods[i].ip]
        assert peer["tries"] == 1
        assert 0 <= peer["seconds_to_resolve"] < 5
    assert startup["warnings"] == []


def test_peer_published_late_is_seen_within_a_second(net, tfboot):
    pods = workers(net, 2, publish=False)
    net.publish(pods[0])
    proc = start(net, tfboot, pods[0], after_the_wait(), {"TFBOOT_CLUSTER": "worker=2"})
    time.sleep(4)
    assert proc.poll() is None, "tfboot must still be waiting"
    published_at = time.monotonic()
    net.publish(pods[1], wait=False)
    code, out, err = finish(proc)
    delay = time.monotonic() - published_at
    assert code == 0, err
    assert delay < 1.5, f"took {delay:.2f}s after the record appeared"
    assert json.loads(out)["task"] == {"type": "worker", "index": 0}


def test_peer_that_never_appears_exits_3_on_time_with_progress(net, tfboot, tmp_path):
    pods = workers(net, 3, publish=False)
    net.publish(pods[0])
    net.publish(pods[1])
    started = time.monotonic()
    marker = tmp_path / "ran"
    proc = start(net, tfboot, pods[0], ["--wait", "11s", "--", "touch", str(marker)], ALONE | {"TFBOOT_CLUSTER": "worker=3"},
                 log_root=tmp_path)
    code, _, err = finish(proc)
    elapsed = time.monotonic() - started
    assert code == 3, err
    assert 11 <= elapsed < 13
    error = [line for line in err.splitlines() if " error " in line]
    assert len(error) == 1
    assert "1 of 3 names did not resolve within --wait 11s" in error[0]
    assert fqdn("mnist-worker-2") + " (not published yet: NXDOMAIN)" in error[0]
    progress = [line for line in err.splitlines() if "waiting for DNS: 2/3 names resolve" in line]
    assert len(progress) == 1 and fqdn("mnist-worker-2") in progress[0]
    assert not marker.exists() and not (tmp_path / "worker_0").exists()


def test_thirty_percent_of_dns_packets_dropped(net, tfboot, tmp_path):
    pods = workers(net, 20)
    net.drop_dns_packets(30)
    proc = start(net, tfboot, pods[5], ["--wait", "60s", "--", "true"], ALONE | {"TFBOOT_CLUSTER": "worker=20"},
                 log_root=tmp_path)
    code, _, err = finish(proc, timeout=90)
    assert code == 0, err
    startup = json.loads((tmp_path / "worker_5" / "startup.json").read_text())
    assert all(peer["resolved"] for peer in startup["peers"])
    assert sum(peer["tries"] for peer in startup["peers"]) > 20, "lost queries were retried"


def test_dns_server_down_for_the_first_seconds(net, tfboot):
    pods = workers(net, 2)
    net.stop_dns()
    proc = start(net, tfboot, pods[1], after_the_wait("--log-level", "trace"), {"TFBOOT_CLUSTER": "worker=2"})
    time.sleep(3)
    assert proc.poll() is None
    net.start_dns()
    code, out, err = finish(proc)
    assert code == 0, err
    # A closed port shows as a timeout or a refused connection: either way "DNS in trouble".
    trouble = [line for line in err.splitlines() if "DNS in trouble: timeout" in line or "DNS in trouble: connection" in line]
    assert trouble, err
    assert "not published yet" not in err
    assert json.loads(out)["task"]["index"] == 1


@pytest.mark.parametrize("failure, shown", [("servfail", "SERVFAIL"), ("refused", "REFUSED")])
def test_server_answering_failure_is_dns_trouble(net, tfboot, failure, shown):
    pods = workers(net, 2)
    net.set_dns_failure(failure)
    proc = start(net, tfboot, pods[0], after_the_wait("--wait", "3s"), {"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 3
    assert out == ""
    error = [line for line in err.splitlines() if " error " in line][0]
    assert f"(DNS in trouble: {shown})" in error
    assert "not published" not in error


def test_recovers_when_server_stops_failing(net, tfboot):
    pods = workers(net, 2)
    net.set_dns_failure("servfail")
    proc = start(net, tfboot, pods[0], after_the_wait(), {"TFBOOT_CLUSTER": "worker=2"})
    time.sleep(2)
    net.set_dns_failure(None)
    code, _, err = finish(proc)
    assert code == 0, err


def test_sigterm_during_the_wait_ends_at_once(net, tfboot, tmp_path):
    pods = workers(net, 2, publish=False)
    marker = tmp_path / "ran"
    proc = start(net, tfboot, pods[0], ["--", "touch", str(marker)], ALONE | {"TFBOOT_CLUSTER": "worker=2"}, log_root=tmp_path)
    # Wait for a sign that the wait began (as PID 1, a signal before the handler exists is lost).
    seen = ""
    deadline = time.monotonic() + 10
    while "waiting up to" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    assert "waiting up to 900s" in seen
    sent = time.monotonic()
    net.signal(proc, signal.SIGTERM)
    proc.wait(timeout=10)
    assert time.monotonic() - sent < 1
    assert proc.returncode == 128 + signal.SIGTERM
    assert not marker.exists()
    assert not (tmp_path / "worker_0").exists()


def test_own_record_pointing_elsewhere_is_a_warning(net, tfboot, tmp_path):
    pods = workers(net, 2, publish=False)
    net.publish(pods[0], ip=pods[1].ip)  # stale record: worker-0's name has worker-1's address
    net.publish(pods[1])
    proc = start(net, tfboot, pods[0], ["--", "true"], ALONE | {"TFBOOT_CLUSTER": "worker=2"}, log_root=tmp_path)
    code, _, err = finish(proc)
    assert code == 0, err
    warning = [line for line in err.splitlines() if " warning " in line]
    assert len(warning) == 1
    assert f"own name {fqdn('mnist-worker-0')} resolves to {pods[1].ip}" in warning[0]
    startup = json.loads((tmp_path / "worker_0" / "startup.json").read_text())
    assert len(startup["warnings"]) == 1 and pods[1].ip in startup["warnings"][0]


def test_address_ip_writes_resolved_addresses(net, tfboot):
    pods = workers(net, 3)
    proc = start(net, tfboot, pods[1], after_the_wait("--address", "ip"), {"TFBOOT_CLUSTER": "worker=3"})
    code, out, err = finish(proc)
    assert code == 0, err
    assert json.loads(out)["cluster"]["worker"] == [f"{pod.ip}:2222" for pod in pods]


def test_address_ip_writes_ipv6_in_brackets(net, tfboot):
    pods = workers(net, 2, publish=False)
    net.publish(pods[0])
    net.publish_name(fqdn("mnist-worker-1"), "fd00::21")
    proc = start(net, tfboot, pods[0], after_the_wait("--address", "ip"), {"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 0, err
    assert json.loads(out)["cluster"]["worker"] == [f"{pods[0].ip}:2222", "[fd00::21]:2222"]


def test_dns_server_flag_overrides_resolv_conf(net, tfboot):
    pods = workers(net, 2)
    pods[0].set_resolv("search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.213.9.9\n"
                       "options ndots:5\n")
    proc = start(net, tfboot, pods[0], after_the_wait("--dns-server", net.dns_ip), {"TFBOOT_CLUSTER": "worker=2"})
    code, _, err = finish(proc)
    assert code == 0, err
    bad = start(net, tfboot, pods[0], after_the_wait("--dns-server", "not-an-ip"), {"TFBOOT_CLUSTER": "worker=2"})
    code, _, err = finish(bad)
    assert code == 2
    assert "--dns-server 'not-an-ip'" in err
