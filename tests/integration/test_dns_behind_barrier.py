"""DNS behind the start barrier: with the control channel a task resolves only the coordinator's
name; the coordinator resolves every name once, when all tasks are present, and checks each
against the addresses its task reported. Job-wide queries grow with N, not N².

Pods are network namespaces with tfboot as PID 1 behind a real dnsmasq that logs every query.
"""

import collections
import json
import time

import pytest

from harness.processes import communicate_all

pytestmark = pytest.mark.root

PEERS_UNRESOLVED = 3


def start(net, tfboot, pod, log_root, count, extra_env=None, command=("true",)):
    env = {"TFBOOT_CLUSTER": f"worker={count}", "TFBOOT_LOG_ROOT": str(log_root), "TFBOOT_WAIT": "30s",
           "TFBOOT_STOP_GRACE": "5s"}
    env.update(extra_env or {})
    return net.run(pod, [tfboot, "--", *command], env=env)


def finish_all(procs, timeout=90):
    return communicate_all(procs, timeout)


def a_queries_by_name_and_client(net):
    counts = collections.Counter()
    for qtype, name, client in net.dns_queries():
        if qtype == "A" and name.startswith("mnist-worker-"):
            counts[(name.split(".")[0], client)] += 1
    return counts


def run_job(net, tfboot, tmp_path, count, extra_env=None):
    pods = net.add_job_pods(count, publish=False)
    for pod in pods:
        net.publish(pod)
    net.reset_dns_query_count()
    results = finish_all([start(net, tfboot, pod, tmp_path, count, extra_env) for pod in pods])
    assert [code for code, _, _ in results] == [0] * count, [err for _, _, err in results]
    return pods, results


def test_each_task_asks_only_the_coordinators_name_and_the_coordinator_asks_each_once(net, tfboot, tmp_path):
    pods, _ = run_job(net, tfboot, tmp_path, 4)
    counts = a_queries_by_name_and_client(net)
    coordinator = pods[0]
    for i, pod in enumerate(pods[1:], start=1):
        # The coordinator's name (its DNS wait, then before connecting), never its own.
        assert counts[(pod.name, pod.ip)] == 0, counts
        assert 1 <= counts[("mnist-worker-0", pod.ip)] <= 3, counts
        # No task asks another task's name ...
        others = [p for j, p in enumerate(pods[1:], start=1) if j != i]
        assert all(counts[(pod.name, other.ip)] == 0 for other in others), counts
        # ... and the coordinator asks it exactly once, after the barrier.
        assert counts[(pod.name, coordinator.ip)] == 1, counts
    # The coordinator: its own name once, with all the others, after the barrier.
    assert counts[("mnist-worker-0", coordinator.ip)] == 1, counts
    total = sum(counts.values())
    assert total <= 3 * 3 + 4, counts   # O(N): 1-3 per task plus N at the coordinator

    # A task's start carries no table (--address name needs none): its peers are resolved by the
    # coordinator, without addresses; its own lookup of the coordinator keeps its answer.
    startup = json.loads((tmp_path / "worker_2" / "startup.json").read_text())
    assert startup["job"]["names_resolved_by_coordinator"] is True
    by_task = {peer["task"]: peer for peer in startup["peers"]}
    assert by_task["worker:3"]["resolved"] is True and by_task["worker:3"]["tries"] == 0
    assert by_task["worker:3"]["addresses"] == [] and by_task["worker:2"]["addresses"] == []
    assert by_task["worker:0"]["addresses"] == [pods[0].ip] and by_task["worker:0"]["tries"] >= 1
    # The coordinator's startup.json has every answer it checked.
    coordinator_startup = json.loads((tmp_path / "worker_0" / "startup.json").read_text())
    assert [peer["addresses"] for peer in coordinator_startup["peers"]] == [[pod.ip] for pod in pods]


def test_without_the_control_channel_every_task_asks_every_name(net, tfboot, tmp_path):
    pods, _ = run_job(net, tfboot, tmp_path, 4, {"TFBOOT_CONTROL_PORT": "0"})
    counts = a_queries_by_name_and_client(net)
    for asker in pods:
        for asked in pods:
            assert counts[(asked.name, asker.ip)] == 1, counts


def test_address_ip_builds_tf_config_from_the_coordinators_verified_table(net, tfboot, tmp_path):
    pods, _ = run_job(net, tfboot, tmp_path, 3, {"TFBOOT_ADDRESS": "ip"})
    for i in range(3):
        startup = json.loads((tmp_path / f"worker_{i}" / "startup.json").read_text())
        workers = startup["tf_config"]["cluster"]["worker"]
        assert workers == [f"{pod.ip}:2222" for pod in pods], workers
        assert [peer["addresses"] for peer in startup["peers"]] == [[pod.ip] for pod in pods]


def test_a_name_pointing_at_another_pod_is_named_and_every_task_exits_3(net, tfboot, tmp_path):
    pods = net.add_job_pods(3, publish=False)
    net.publish(pods[0])
    net.publish(pods[1])
    net.publish(pods[2], ip=pods[1].ip)   # a stale record: worker-2's name points at worker-1
    # The coordinator checks for at most --wait (5 s here) before it gives up.
    env = {"TFBOOT_WAIT": "5s"}
    results = finish_all([start(net, tfboot, pod, tmp_path, 3, env) for pod in pods])
    assert [code for code, _, _ in results] == [PEERS_UNRESOLVED] * 3, [err for _, _, err in results]
    fqdn = "mnist-worker-2.mnist.default.svc.cluster.local"
    expected = (f"worker:2 on host 'mnist-worker-2': {fqdn} resolves to {pods[1].ip}, "
                f"but the task has {pods[2].ip}")
    for _, _, err in results:
        errors = [line for line in err.splitlines() if " error " in line]
        assert len(errors) == 1 and expected in errors[0], err
    assert not (tmp_path / "worker_0").exists()


def test_a_stale_record_corrected_while_the_coordinator_asks_again_lets_the_job_start(net, tfboot, tmp_path):
    pods = net.add_job_pods(3, publish=False)
    net.publish(pods[0])
    net.publish(pods[1])
    net.publish(pods[2], ip=pods[1].ip)
    procs = [start(net, tfboot, pod, tmp_path, 3) for pod in pods]
    # Wait for the coordinator's complaint, then correct the record as a cluster DNS would.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(q[1].startswith("mnist-worker-2.") and q[2] == pods[0].ip for q in net.dns_queries()):
            break
        time.sleep(0.1)
    net.unpublish(pods[2])
    net.publish(pods[2])
    results = finish_all(procs)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert "resolves to " + pods[1].ip in results[0][2]
    assert "every task's name resolves to that task" in results[0][2]


START_BARRIER_INCOMPLETE = 5


@pytest.mark.parametrize("wait", ["1s", "4s"])
def test_a_coordinator_that_never_appears_ends_the_start_as_a_missing_task(net, tfboot, tmp_path, wait):
    # worker:0's pod never comes (its name is never published). The others wait for it as long as
    # the barrier would (--start-timeout, or --wait when longer), then end as the barrier does:
    # exit 5 naming the coordinator, not exit 3 "DNS" (which Job manifests retry with a fresh wait).
    pods = net.add_job_pods(2, publish=False)
    net.publish(pods[1])
    started = time.monotonic()
    env = {"TFBOOT_WAIT": wait, "TFBOOT_START_TIMEOUT": "3s"}
    [(code, _, err)] = finish_all([start(net, tfboot, pods[1], tmp_path, 2, env)])
    took = time.monotonic() - started
    assert code == START_BARRIER_INCOMPLETE, err
    longer = "4s" if wait == "4s" else "3s"
    assert int(longer[0]) - 0.5 < took < int(longer[0]) + 10, took
    [line] = [line for line in err.splitlines() if " error " in line]
    assert (f"start barrier incomplete after {longer}: no start from the coordinator worker:0 "
            f"({pods[0].name}.mnist.default.svc.cluster.local); its name was never published "
            "(not published yet: NXDOMAIN); check that the coordinator's pod runs") in line, line


def test_a_coordinator_behind_a_dns_that_never_answers_is_dns_trouble_not_a_missing_task(net, tfboot, tmp_path):
    # Only an answer that the name does not exist makes the coordinator a missing task (exit 5);
    # lookups that never got an answer are DNS in trouble (exit 3), which a retry may fix.
    pods = net.add_job_pods(2, publish=False)
    net.publish(pods[1])
    env = {"TFBOOT_WAIT": "2s", "TFBOOT_START_TIMEOUT": "2s", "TFBOOT_DNS_SERVER": "10.213.0.250"}
    [(code, _, err)] = finish_all([start(net, tfboot, pods[1], tmp_path, 2, env)])
    assert code == PEERS_UNRESOLVED, err
    [line] = [line for line in err.splitlines() if " error " in line]
    assert "the name did not resolve within 2s (--wait, or --start-timeout when longer)" in line, line
    assert "DNS in trouble" in line, line
