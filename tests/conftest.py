"""What every pytest tier shares: the tfboot binary under test, the `net` of namespace pods, and the
`root` and `sanitize` markers.

Tests marked `root` need root: network, PID or mount namespaces, chroot, other users. A test file
marks its own, with `pytestmark = pytest.mark.root`, `@pytest.mark.root` on a test, or `marks=` on
a parameter. Run as another user, pytest skips them; `-m "not root"` leaves them out (scripts/check
does). The marker is registered in pytest.ini.
"""

import os
import subprocess

import pytest

from paths import REPO_DIR


# The integration tests that drive tfboot's memory handling: its parsers (flags, env, platform files,
# PTR answers, the control channel's messages, the torch error file), its buffers (each task's output
# lines under `tfboot local`, the metrics server's requests under a flood), descriptors past 1024
# and leaks over many restarts, the network preflight's threads. scripts/test runs these a second time on the ASan+UBSan binary
# (`-m sanitize`; TFBOOT_SANITIZE_ALL=1 runs every test there), which leaves out the tests of
# waits, restarts and scale that spend their time in DNS schedules and stop windows. A file's
# name takes all its tests, "file::test" one test with all its parameters.
SANITIZE = {
    "test_cli.py", "test_hostile.py", "test_reliability.py", "test_platforms.py", "test_local.py",
    "test_compose.py", "test_observe.py", "test_frameworks.py", "test_job_machine.py",
    "test_resolver.py::test_dns_wait_with_inherited_descriptors_past_1024",
    "test_resolver.py::test_ptr_lookup_with_inherited_descriptors_past_1024",
    "test_resolver.py::test_bad_dns_server_list_is_a_usage_error",
    "test_supervision.py::test_a_failing_worker_stops_the_others_with_the_job_code_naming_it",
    "test_supervision.py::test_different_tensorflow_versions_are_warned_or_refused",
    "test_supervision.py::test_strangers_on_the_control_port_do_not_stall_the_job",
    "test_supervision.py::test_with_a_secret_a_task_with_the_wrong_one_cannot_join",
    "test_supervision.py::test_with_a_secret_strangers_holding_connections_cannot_keep_the_job_from_starting",
    "test_supervision.py::test_a_stranger_claiming_a_task_is_dropped_and_the_real_task_joins",
    "test_restarts.py::test_fifty_restarts_leave_no_descriptor_thread_or_memory_behind",
    "test_preflight.py::test_network_level_refuses_a_job_with_a_slow_node_and_names_it",
    "test_preflight.py::test_network_level_with_healthy_nodes_starts_and_records_the_figures",
    "test_preflight.py::test_a_gpu_the_driver_lists_but_that_does_not_answer_is_named",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.path.name in SANITIZE or f"{item.path.name}::{name}" in SANITIZE:
            item.add_marker(pytest.mark.sanitize)
    if os.geteuid() == 0:
        return
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root"))


@pytest.fixture(scope="session")
def tfboot():
    """Path of the tfboot binary under test (TFBOOT_BINARY, else build/launcher/tfboot)."""
    path = os.path.abspath(os.environ.get("TFBOOT_BINARY", os.path.join(REPO_DIR, "build", "launcher", "tfboot")))
    if not os.access(path, os.X_OK):
        pytest.fail(f"tfboot binary not found at {path}; build it first (scripts/build release) or set TFBOOT_BINARY")
    return path


@pytest.fixture
def run_tfboot(tfboot, tmp_path):
    """Runs tfboot with exactly the given environment (plus PATH) and returns CompletedProcess."""

    def run(args, env=None, timeout=30, **kwargs):
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        full_env.update(env or {})
        return subprocess.run([tfboot, *args], env=full_env, capture_output=True, text=True,
                              timeout=timeout, cwd=kwargs.pop("cwd", tmp_path), **kwargs)

    return run


@pytest.fixture
def net():
    """A simulated cluster network (harness.cluster.ClusterNetwork, needs root): service "mnist" in
    namespace "default" of cluster.local, pods added by the test, all removed at its end."""
    from harness.cluster import ClusterNetwork   # only where a test asks for a network

    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as network:
        yield network
