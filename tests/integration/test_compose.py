"""docker compose replicas: the hostname is a container id, identity comes from the PTR of the own IP.

dnsmasq plays Docker's embedded DNS: "<project>-<service>-<N>.<network>" and its short alias
resolve to the container, and the container's IP has that name as its PTR.
"""

import json

import pytest

from harness.cluster import ClusterNetwork
from harness.processes import after_the_wait

pytestmark = pytest.mark.root  # every test builds namespace pods or mounts

COMPOSE_RESOLV = "nameserver {dns}\noptions ndots:0\n"


@pytest.fixture
def net():
    with ClusterNetwork(service="", namespace="default", cluster_domain="cluster.local") as network:
        yield network


def container(net, name, container_id):
    pod = net.add_pod(name, hostname=container_id, service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=net.dns_ip))
    net.publish_name(f"{name}.proj_default", pod.ip, name)
    return pod


def run(net, tfboot, pod, args, cluster):
    proc = net.run(pod, [tfboot, "--identity-from", "ptr", *args], env={"TFBOOT_CLUSTER": cluster})
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_replicas_of_a_worker_service(net, tfboot):
    pods = [container(net, f"proj-worker-{n}", f"3f2a9c1b7d4{n}") for n in (1, 2, 3)]
    for index, pod in enumerate(pods):
        code, out, err = run(net, tfboot, pod, after_the_wait(), "worker=3")
        assert code == 0, err
        assert json.loads(out) == {"cluster": {"worker": ["proj-worker-1:2222", "proj-worker-2:2222", "proj-worker-3:2222"]},
                                   "task": {"type": "worker", "index": index}}
        assert f"from PTR of {pod.ip} 'proj-worker-{index + 1}.proj_default'" in err


def test_chief_and_worker_services(net, tfboot):
    chief = container(net, "proj-chief-1", "aa01")
    workers = [container(net, f"proj-worker-{n}", f"bb0{n}") for n in (1, 2)]
    code, out, err = run(net, tfboot, workers[1], after_the_wait("--address", "ip"), "chief=1,worker=2")
    assert code == 0, err
    assert json.loads(out) == {"cluster": {"chief": [f"{chief.ip}:2222"],
                                           "worker": [f"{workers[0].ip}:2222", f"{workers[1].ip}:2222"]},
                               "task": {"type": "worker", "index": 1}}
    code, out, err = run(net, tfboot, chief, after_the_wait(), "chief=1,worker=2")
    assert code == 0, err
    assert json.loads(out)["task"] == {"type": "chief", "index": 0}


def test_service_not_named_after_a_task_type(net, tfboot):
    pods = [container(net, f"my-proj-trainer-{n}", f"cc0{n}") for n in (1, 2)]
    code, out, err = run(net, tfboot, pods[1], after_the_wait(), "worker=2")
    assert code == 0, err
    assert json.loads(out) == {"cluster": {"worker": ["my-proj-trainer-1:2222", "my-proj-trainer-2:2222"]},
                               "task": {"type": "worker", "index": 1}}


def test_no_ptr_record_is_exit_3_naming_the_address(net, tfboot):
    pod = net.add_pod("lonely", hostname="dd01", service="")
    pod.set_resolv(COMPOSE_RESOLV.format(dns=net.dns_ip))
    code, out, err = run(net, tfboot, pod, after_the_wait("--wait", "2s"), "worker=2")
    assert code == 3
    assert out == ""
    assert f"PTR record of own address {pod.ip} did not resolve" in err
