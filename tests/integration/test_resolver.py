"""The resolver against a real dnsmasq on a private network of namespaces (needs root).

What the DNS wait and the PTR lookup report, and what they survive: many inherited descriptors
(so that tfboot's own sockets are numbered past select()'s limit of 1024), a PTR lookup that meets
a server in trouble, and a --dns-server list that is not valid.
"""

import json
import sys
import time

import pytest

from harness.cluster import ClusterNetwork
from harness.processes import after_the_wait

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

SERVICE_SUFFIX = "mnist.default.svc.cluster.local"
COMPOSE_RESOLV = "nameserver {dns}\noptions ndots:0\n"

# Run inside the pod in place of tfboot: raises the descriptor limit, keeps descriptors 0..1100
# and 1500 open (inheritable), then execs tfboot (still PID 1). tfboot's own sockets and files
# therefore get numbers above 1100.
MANY_FDS = r"""
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
limit = 4096 if hard == resource.RLIM_INFINITY else max(hard, 4096)
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
null = os.open("/dev/null", os.O_RDONLY)
os.set_inheritable(null, True)
for fd in list(range(3, 1101)) + [1500]:
    if fd != null:
        os.dup2(null, fd)
os.execv(sys.argv[1], sys.argv[1:])
"""


@pytest.fixture
def compose_net():
    with ClusterNetwork(service="", namespace="default", cluster_domain="cluster.local") as network:
        yield network


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def error_line(err):
    lines = [line for line in err.splitlines() if " error " in line]
    assert len(lines) == 1, err
    return lines[0]


def test_dns_wait_with_inherited_descriptors_past_1024(net, tfboot):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    proc = net.run(pods[1], [sys.executable, "-I", "-S", "-c", MANY_FDS, tfboot, *after_the_wait()],
                   env={"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 0, err
    assert json.loads(out) == {
        "cluster": {"worker": [f"mnist-worker-{i}.{SERVICE_SUFFIX}:2222" for i in range(2)]},
        "task": {"type": "worker", "index": 1}}


def test_ptr_lookup_with_inherited_descriptors_past_1024(compose_net, tfboot):
    pod = compose_net.add_pod("proj-worker-2", hostname="3f2a9c1b7d42", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=compose_net.dns_ip))
    compose_net.publish_name("proj-worker-2.proj_default", pod.ip, "proj-worker-2")
    proc = compose_net.run(pod, [sys.executable, "-I", "-S", "-c", MANY_FDS, tfboot, "--identity-from", "ptr",
                                 "--print", "--wait", "0"], env={"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 0, err
    assert json.loads(out) == {"cluster": {"worker": ["proj-worker-1:2222", "proj-worker-2:2222"]},
                               "task": {"type": "worker", "index": 1}}


# (fault the DNS server shows, how the PTR lookup's failure must be named)
PTR_FAULTS = [
    ("servfail", "SERVFAIL"),
    ("refused", "REFUSED"),
    ("dropped", "timeout"),
    ("stopped", "connection refused"),
]


@pytest.mark.parametrize("fault, shown", PTR_FAULTS, ids=[fault for fault, _ in PTR_FAULTS])
def test_ptr_lookup_names_the_dns_trouble(compose_net, tfboot, fault, shown):
    pod = compose_net.add_pod("proj-worker-1", hostname="aa01", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=compose_net.dns_ip))
    compose_net.publish_name("proj-worker-1.proj_default", pod.ip, "proj-worker-1")
    if fault == "dropped":
        compose_net.drop_dns_packets(100)
    elif fault == "stopped":
        compose_net.stop_dns()
    else:
        compose_net.set_dns_failure(fault)
    proc = compose_net.run(pod, [tfboot, *after_the_wait("--identity-from", "ptr", "--wait", "2s")],
                           env={"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 3, err
    assert out == ""
    line = error_line(err)
    assert f"the PTR record of own address {pod.ip} did not resolve within" in line
    assert line.endswith(f"({shown})"), line


def test_ptr_lookup_of_an_address_without_a_record_is_nxdomain(compose_net, tfboot):
    pod = compose_net.add_pod("lonely", hostname="dd01", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=compose_net.dns_ip))
    proc = compose_net.run(pod, [tfboot, *after_the_wait("--identity-from", "ptr", "--wait", "2s")],
                           env={"TFBOOT_CLUSTER": "worker=2"})
    code, out, err = finish(proc)
    assert code == 3, err
    assert error_line(err).endswith("(NXDOMAIN)")


# (how the list is given, the list, the error's text) -- checked before any lookup: exit 2 at once.
BAD_DNS_SERVERS = [
    ("flag", "127.0.0.1:65589", "--dns-server '127.0.0.1:65589': port '65589' is not a number in 1..65535"),
    ("env", "127.0.0.1:65589", "TFBOOT_DNS_SERVER '127.0.0.1:65589': port '65589' is not a number in 1..65535"),
    ("flag", "10.213.0.2,[::1]:0", "--dns-server '10.213.0.2,[::1]:0': port '0' is not a number in 1..65535"),
    ("env", "::1]:53", "TFBOOT_DNS_SERVER '::1]:53': '::1]:53' is not an IPv6 address"),
]


@pytest.mark.parametrize("given, servers, message", BAD_DNS_SERVERS)
def test_bad_dns_server_list_is_a_usage_error(net, tfboot, given, servers, message):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    env = {"TFBOOT_CLUSTER": "worker=2"}
    args = ["--wait", "3s"]
    if given == "flag":
        args += ["--dns-server", servers]
    else:
        env["TFBOOT_DNS_SERVER"] = servers
    started = time.monotonic()
    code, out, err = finish(net.run(pods[0], [tfboot, *after_the_wait(*args)], env=env))
    assert code == 2, err
    assert out == ""
    assert message in error_line(err)
    assert time.monotonic() - started < 2


def test_dns_server_with_a_port_is_queried_there(net, tfboot):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    pods[0].set_resolv("search default.svc.cluster.local\nnameserver 10.213.9.9\noptions ndots:5\n")
    code, out, err = finish(net.run(pods[0], [tfboot, *after_the_wait("--dns-server", f"{net.dns_ip}:53")],
                                    env={"TFBOOT_CLUSTER": "worker=2"}))
    assert code == 0, err
    assert f"through {net.dns_ip}:53" in err
    assert json.loads(out)["task"] == {"type": "worker", "index": 0}
