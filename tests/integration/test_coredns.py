"""CoreDNS as the cluster DNS (tests/harness/coredns.py): the answers tfboot meets on a Kubernetes
cluster with kubeadm's Corefile, NXDOMAIN cached for 30 s included, and tfboot's DNS wait on them.

Needs root and the CoreDNS binary that scripts/setup-coredns builds (scripts/test does); without
the binary these tests are skipped, saying so.
"""

import json
import time

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from harness.cluster import ClusterNetwork
from harness.processes import after_the_wait, communicate_all
from harness.coredns import TTL, missing_reason
from harness.namespaces import in_netns

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")]

SERVICE = "mnist.default.svc.cluster.local"
NEVER_PUBLISHED = f"mnist-worker-9.{SERVICE}"


@pytest.fixture
def net():
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local",
                        dns_server="coredns") as network:
        yield network


def ask(net, name, qtype="A"):
    """The full answer (authority section included), asked from the bridge."""
    query = dns.message.make_query(name, qtype)
    return in_netns(net.net_ns, lambda: dns.query.udp(query, net.dns_ip, timeout=2))


def negative_ttl(response):
    [soa] = [rrset for rrset in response.authority if rrset.rdtype == dns.rdatatype.SOA]
    return soa.ttl


def soa_of(response):
    [soa] = [rrset for rrset in response.authority if rrset.rdtype == dns.rdatatype.SOA]
    return soa[0]


def addresses(response):
    return sorted(item.address for rrset in response.answer for item in rrset
                  if rrset.rdtype == dns.rdatatype.A)


def test_a_missing_name_is_nxdomain_with_the_zone_soa_for_negative_caching(net):
    response = ask(net, NEVER_PUBLISHED)
    assert dns.rcode.to_text(response.rcode()) == "NXDOMAIN"
    assert response.answer == []
    soa = soa_of(response)
    assert (str(soa.mname), str(soa.rname), soa.minimum) == ("ns.dns.cluster.local.",
                                                             "hostmaster.cluster.local.", TTL)
    assert negative_ttl(response) == TTL


def test_aaaa_of_an_ipv4_only_name_is_nodata(net):
    pod = net.add_pod("mnist-worker-0")
    net.publish(pod)
    response = ask(net, pod.fqdn, "AAAA")
    assert dns.rcode.to_text(response.rcode()) == "NOERROR"
    assert response.answer == []
    assert negative_ttl(response) == TTL


def test_pods_the_service_srv_and_ptr_as_the_kubernetes_plugin_answers(net):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(3)]
    for pod in pods:
        net.publish(pod, wait=False)
    net.dns.records.wait()
    results = net.dns_query_many([(pods[1].fqdn, "A"), (SERVICE, "A"), (f"_grpc._tcp.{SERVICE}", "SRV"),
                                  ("11.1.213.10.in-addr.arpa", "PTR")])
    pod_a, service_a, srv, ptr = results
    assert [(a["value"], a["ttl"]) for a in pod_a.answers] == [(pods[1].ip, TTL)]
    assert sorted(service_a.addresses) == sorted(pod.ip for pod in pods)
    assert sorted(srv.values) == sorted(f"0 33 2222 {pod.fqdn}." for pod in pods)
    assert ptr.values == [pods[1].fqdn]


def test_a_record_added_at_runtime_is_served_within_two_seconds_when_never_asked_before(net):
    pod = net.add_pod("mnist-worker-0")
    net.publish(pod, wait=False)
    loaded_after = net.dns.records.wait()
    assert loaded_after <= 2.0
    result = net.dns_query(pod.fqdn)
    assert (result.rcode, result.addresses) == ("NOERROR", [pod.ip])


def test_a_name_asked_before_it_is_published_gets_the_cached_nxdomain_until_its_ttl_runs_out(net):
    # The behaviour that delays a late peer on a real cluster by up to 30 s (kubeadm's cache 30).
    pod = net.add_pod("mnist-worker-0")
    first = ask(net, pod.fqdn)
    asked_at = time.monotonic()
    assert dns.rcode.to_text(first.rcode()) == "NXDOMAIN" and negative_ttl(first) == TTL
    net.publish(pod)   # returns once CoreDNS serves the record to whoever has not asked yet
    assert net.dns_query(pod.fqdn, "A", pod=pod).rcode == "NXDOMAIN"   # the cache answers every client
    cached = ask(net, pod.fqdn)
    time.sleep(2.2)
    later = ask(net, pod.fqdn)
    assert dns.rcode.to_text(cached.rcode()) == dns.rcode.to_text(later.rcode()) == "NXDOMAIN"
    # Its negative TTL counts down: it comes from the cache, not from the zone (always 30).
    assert negative_ttl(later) in (negative_ttl(cached) - 2, negative_ttl(cached) - 3)
    served_after = None
    while time.monotonic() - asked_at < TTL + 5:
        if dns.rcode.to_text(ask(net, pod.fqdn).rcode()) == "NOERROR":
            served_after = time.monotonic() - asked_at
            break
        time.sleep(0.25)
    assert served_after is not None and TTL - 2 <= served_after <= TTL + 1.5, served_after
    assert addresses(ask(net, pod.fqdn)) == [pod.ip]


def test_tfboot_dns_wait_resolves_every_peer_through_coredns(net, tfboot):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(3)]
    for pod in pods:
        net.publish(pod, wait=False)
    net.dns.records.wait()
    proc = net.run(pods[2], [tfboot, *after_the_wait("--address", "ip")], env={"TFBOOT_CLUSTER": "worker=3"})
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"cluster": {"worker": [f"{pod.ip}:2222" for pod in pods]},
                               "task": {"type": "worker", "index": 2}}


def test_a_job_with_the_control_channel_starts_through_coredns_with_o_n_queries(net, tfboot, tmp_path):
    count = 4
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(count)]
    for pod in pods:
        net.publish(pod, wait=False)
    net.dns.records.wait()
    net.reset_dns_query_count()
    env = {"TFBOOT_CLUSTER": f"worker={count}", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "30s"}
    procs = [net.run(pod, [tfboot, "--", "true"], env=env) for pod in pods]
    results = [((out, err), code) for code, out, err in communicate_all(procs, 60)]
    assert [code for _, code in results] == [0] * count, [err for (_, err), _ in results]
    # Every pod's own name and the coordinator's, then the coordinator asks each name once.
    assert count * 2 <= net.dns_query_count() <= 3 * count + count, net.dns_queries()


def start_job_with_one_late_pod(net, tfboot, tmp_path, count, late_index, delay=5):
    """Every pod but one starts now; the late one is published and started `delay` s later. The
    command records when it ran. Returns (procs by pod name, the late pod's start time, markers)."""
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(count)]
    for i, pod in enumerate(pods):
        if i != late_index:
            net.publish(pod, wait=False)
    net.dns.records.wait()
    env = {"TFBOOT_CLUSTER": f"worker={count}", "TFBOOT_LOG_ROOT": str(tmp_path), "TFBOOT_WAIT": "90s",
           "TFBOOT_START_TIMEOUT": "90s"}
    markers = [tmp_path / f"ran-{i}" for i in range(count)]
    procs = {}
    for i, pod in enumerate(pods):
        if i != late_index:
            procs[pod.name] = net.run(pod, [tfboot, "--", "sh", "-c", f"date +%s.%N > {markers[i]}"], env=env)
    time.sleep(delay)
    late = pods[late_index]
    net.publish(late)   # its record exists from its start, as a pod's does
    late_started = time.time()
    procs[late.name] = net.run(late, [tfboot, "--", "sh", "-c", f"date +%s.%N > {markers[late_index]}"], env=env)
    return procs, late_started, markers


def finish(procs, timeout=120):
    results = communicate_all(list(procs.values()), timeout)
    return {name: (code, err) for name, (code, _, err) in zip(procs, results)}


def test_a_late_worker_behind_cache_30_starts_the_job_without_waiting_for_the_cache(net, tfboot, tmp_path):
    # No one asks the late worker's name before it exists, so no NXDOMAIN is cached for it: the
    # job starts as soon as it says hello, not up to 30 s later.
    procs, late_started, markers = start_job_with_one_late_pod(net, tfboot, tmp_path, 4, late_index=3)
    ended = finish(procs)
    assert all(code == 0 for code, _ in ended.values()), ended
    last_command = max(float(marker.read_text()) for marker in markers)
    assert last_command - late_started < 10, last_command - late_started   # the cache would make it ~30


def test_a_late_coordinator_behind_cache_30_is_said_to_be_served_from_the_cache(net, tfboot, tmp_path):
    # The others ask the coordinator's name while it is missing: CoreDNS then serves that NXDOMAIN
    # until its negative TTL runs out, and tfboot says so once.
    procs, late_started, markers = start_job_with_one_late_pod(net, tfboot, tmp_path, 3, late_index=0)
    ended = finish(procs)
    assert all(code == 0 for code, _ in ended.values()), ended
    for name in ("mnist-worker-1", "mnist-worker-2"):
        err = ended[name][1]
        said = [line for line in err.splitlines() if "comes from a DNS cache" in line]
        assert len(said) == 1, err
        assert f"the coordinator's name mnist-worker-0.{SERVICE} is missing" in said[0], said[0]
    # Bounded by the cached answer's TTL (30 s from the first question), plus tfboot's 1 s retry.
    last_command = max(float(marker.read_text()) for marker in markers)
    assert last_command - late_started < TTL + 5, last_command - late_started
