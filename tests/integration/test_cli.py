"""tfboot as a user meets it: flags, errors and exit codes, files, the command's argv and env."""

import json
import os
import re
import stat
import time

import pytest

# One task of a job, alone: the job's control channel is off (test_supervision.py covers it).
CLUSTER = {"TFBOOT_CLUSTER": "worker=3", "TFBOOT_CONTROL_PORT": "0"}


def one_error_line(result):
    errors = [l for l in result.stderr.splitlines() if " error " in l]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_version_and_help(run_tfboot):
    version = run_tfboot(["--version"])
    assert version.returncode == 0
    # "tfboot 0.1.0 (3f2a9c1)": the commit it was built from, "-dirty" with uncommitted changes,
    # "unknown" when not built from a git checkout.
    assert re.fullmatch(r"tfboot \d+\.\d+\.\d+ \(([0-9a-f]{7}(-dirty)?|unknown)\)\n", version.stdout), version.stdout
    help_run = run_tfboot(["--help"])
    assert help_run.returncode == 0
    for flag in ["--task-type", "--task-index", "--hostname", "--chief-at-ordinal-0", "--identity-from",
                 "--cluster", "--peer-template", "--service", "--namespace", "--cluster-domain", "--port",
                 "--address", "--evaluator-in-cluster", "--wait", "--dns-server", "--log-root", "--print",
                 "--init, --no-init", "--log-level", "--log-format"]:
        assert flag in help_run.stdout, flag
    assert "TFBOOT_CHIEF_AT_ORDINAL_0=1" in help_run.stdout
    assert "default: 15m" in help_run.stdout


def test_print_zero_config_statefulset_name(run_tfboot, tmp_path):
    result = run_tfboot(["--print", "--wait", "0"],
                        env={"TFBOOT_CLUSTER": "worker=3", "POD_NAME": "mnist-worker-1", "TFBOOT_LOG_ROOT": str(tmp_path / "l")})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "cluster": {"worker": ["mnist-worker-0:2222", "mnist-worker-1:2222", "mnist-worker-2:2222"]},
        "task": {"type": "worker", "index": 1}}
    assert result.stdout == ('{"cluster":{"worker":["mnist-worker-0:2222","mnist-worker-1:2222","mnist-worker-2:2222"]},'
                             '"task":{"type":"worker","index":1}}\n')
    assert not (tmp_path / "l").exists(), "--print writes no file"
    assert "from hostname 'mnist-worker-1' (from POD_NAME)" in result.stderr


def dry_run_blocks(stdout):
    """--print's output for PyTorch and JAX: {header: {KEY: value}}, one block per process."""
    blocks = {}
    for block in stdout.strip("\n").split("\n\n"):
        header, *entries = block.split("\n")
        blocks[header] = dict(entry.split("=", 1) for entry in entries)
    return blocks


# Names nothing resolves, a DNS server nobody answers and the default 15-minute wait: a dry run
# that looked anything up would not end within the test's timeout.
UNREACHABLE = {"TFBOOT_DNS_SERVER": "192.0.2.1", "TFBOOT_SERVICE": "nowhere", "TFBOOT_NAMESPACE": "ml",
               "TFBOOT_CLUSTER_DOMAIN": "example", "TFBOOT_LOG_ROOT": "/tmp/dry-run-logs"}


def test_print_is_a_dry_run_at_once_with_no_lookup(run_tfboot):
    started = time.monotonic()
    result = run_tfboot(["--print", "--cluster", "worker=2", "--hostname", "job-worker-1"], env=UNREACHABLE, timeout=10)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "cluster": {"worker": ["job-worker-0.nowhere.ml.svc.example:2222", "job-worker-1.nowhere.ml.svc.example:2222"]},
        "task": {"type": "worker", "index": 1}}
    assert time.monotonic() - started < 5
    assert "DNS" not in result.stderr


def test_print_shows_each_ranks_variables_for_pytorch(run_tfboot):
    result = run_tfboot(["--print", "--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=3",
                         "--hostname", "job-worker-1", "--max-restarts", "2"], env=UNREACHABLE, timeout=10)
    assert result.returncode == 0, result.stderr
    blocks = dry_run_blocks(result.stdout)
    assert list(blocks) == ["# rank 2 of 6: worker:1, local rank 0", "# rank 3 of 6: worker:1, local rank 1"]
    for local_rank, variables in enumerate(blocks.values()):
        assert {key: variables[key] for key in ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_MAX_RESTARTS")} == {
            "RANK": str(2 + local_rank), "LOCAL_RANK": str(local_rank), "GROUP_RANK": "1", "WORLD_SIZE": "6",
            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "job-worker-0.nowhere.ml.svc.example", "MASTER_PORT": "29500",
            "TORCHELASTIC_MAX_RESTARTS": "2"}
        assert variables["TFBOOT_LOG_DIR"] == "/tmp/dry-run-logs/worker_1"
        assert variables["TORCHELASTIC_ERROR_FILE"] == f"/tmp/dry-run-logs/worker_1/error_rank{2 + local_rank}.json"
        assert "TF_CONFIG" not in variables and "PATH" not in variables  # only what tfboot sets
    assert not os.path.exists("/tmp/dry-run-logs"), "--print writes no file"


def test_print_shows_each_processs_variables_for_jax(run_tfboot):
    result = run_tfboot(["--print", "--framework", "jax", "--cluster", "worker=2", "--hostname", "job-worker-0",
                         "--address", "ip"], env=UNREACHABLE, timeout=10)
    assert result.returncode == 0, result.stderr
    (header, variables), = dry_run_blocks(result.stdout).items()
    assert header == "# rank 0 of 2: worker:0, local rank 0"
    assert {key: variables[key] for key in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS")} == {
        "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0", "JAX_COORDINATOR_ADDRESS": "job-worker-0.nowhere.ml.svc.example:29500"}
    assert "--print looks nothing up: the names stand where --address ip puts addresses" in result.stderr


def test_flag_beats_env_twin(run_tfboot):
    result = run_tfboot(["--print", "--wait=0", "--cluster", "worker=2", "--port", "3000"],
                        env={"TFBOOT_CLUSTER": "worker=5", "TFBOOT_PORT": "4000", "POD_NAME": "a-worker-0"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cluster"] == {"worker": ["a-worker-0:3000", "a-worker-1:3000"]}


def test_ps_cluster_with_service_and_ports(run_tfboot):
    result = run_tfboot(["--print", "--wait", "0", "--hostname", "job-ps-1", "--service", "job", "--namespace", "ml",
                         "--cluster", "chief=1,ps=2,worker=2,evaluator=1", "--port", "2222,ps=2223"])
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    assert list(config["cluster"]) == ["chief", "worker", "ps"], "evaluator left out, keys in order"
    assert config["cluster"]["ps"] == ["job-ps-0.job.ml.svc.cluster.local:2223",
                                       "job-ps-1.job.ml.svc.cluster.local:2223"]
    assert config["cluster"]["chief"] == ["job-chief-0.job.ml.svc.cluster.local:2222"]
    assert config["task"] == {"type": "ps", "index": 1}


def test_evaluator_in_cluster_flag(run_tfboot):
    result = run_tfboot(["--print", "--wait", "0", "--hostname", "j-evaluator-0", "--cluster", "chief=1,evaluator=1",
                         "--evaluator-in-cluster"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"cluster": {"chief": ["j-chief-0:2222"], "evaluator": ["j-evaluator-0:2222"]},
                                         "task": {"type": "evaluator", "index": 0}}


def test_operator_tf_config_is_adopted(run_tfboot):
    operator = {"cluster": {"chief": ["t-chief-0.ns.svc:2222"], "worker": ["t-worker-0.ns.svc:2222"]},
                "task": {"type": "worker", "index": 0}, "environment": "cloud"}
    result = run_tfboot(["--print", "--wait", "0"], env={"TF_CONFIG": json.dumps(operator), "POD_NAME": "whatever"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == operator
    assert "from TF_CONFIG" in result.stderr


@pytest.mark.parametrize("args, env, code, needle", [
    (["--bogus"], {}, 2, "--bogus"),
    (["--cluster"], {}, 2, "--cluster needs a value"),
    (["--wait", "1x"], CLUSTER, 2, "--wait '1x'"),
    ([], {**CLUSTER, "TFBOOT_WAIT": "soon"}, 2, "TFBOOT_WAIT 'soon'"),
    ([], {**CLUSTER, "TFBOOT_PRINT": "maybe"}, 2, "TFBOOT_PRINT='maybe'"),
    (["--wait", "0"], {"POD_NAME": "a-worker-0"}, 2, "--cluster (or TFBOOT_CLUSTER) is required"),
    (["--wait", "0"], {**CLUSTER, "POD_NAME": "laptop"}, 2, "hostname 'laptop' (from POD_NAME)"),
    (["--wait", "0"], {**CLUSTER, "POD_NAME": "a-worker-7"}, 2, "is outside TFBOOT_CLUSTER 'worker=3'"),
    (["--wait", "0", "--task-type", "boss", "--task-index", "0"], CLUSTER, 2, "--task-type 'boss'"),
    (["--wait", "0"], {**CLUSTER, "JOB_COMPLETION_INDEX": "-1", "POD_NAME": "j-0"}, 2, "JOB_COMPLETION_INDEX '-1'"),
    (["--wait", "0", "--cluster", "worker=2,chief=2"], {"POD_NAME": "a-worker-0"}, 2, "at most one chief"),
    (["--wait", "0", "--port", "70000"], {**CLUSTER, "POD_NAME": "a-worker-0"}, 2, "--port '70000'"),
    (["--wait", "0", "--peer-template", "x-{rank}"], {**CLUSTER, "POD_NAME": "a-worker-0"}, 2, "{rank}"),
    (["--wait", "0"], {"TF_CONFIG": "{not json"}, 2, "TF_CONFIG from the environment is not valid JSON"),
    (["--wait", "0"], {"TF_CONFIG": '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":3}}'}, 2,
     "outside the cluster"),
    (["--wait", "0", "--address", "ip"], {**CLUSTER, "POD_NAME": "a-worker-0"}, 2, "--address ip needs the DNS wait"),
    (["--log-level", "loud"], {}, 2, "--log-level 'loud'"),
    # Said before any lookup (the DNS server is a closed port on loopback: a wait would end in 3).
    (["--wait", "2s", "--dns-server", "127.0.0.1:9", "--start-timeout", "0"],
     {**CLUSTER, "TFBOOT_CONTROL_PORT": "2220", "POD_NAME": "a-worker-1"}, 2,
     "--start-timeout must be positive"),
    (["--wait", "2s", "--dns-server", "127.0.0.1:9", "--port", "2220"],
     {**CLUSTER, "TFBOOT_CONTROL_PORT": "2220", "POD_NAME": "a-worker-1"}, 2,
     "task worker:0 would listen on port 2220 (from --port '2220') on the coordinator's host a-worker-0"),
    (["--wait", "2s", "--dns-server", "127.0.0.1:9", "--port", "2219"],
     {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node1", "SLURM_STEP_TASKS_PER_NODE": "2",
      "SLURM_LOCALID": "1", "SLURMD_NODENAME": "node1", "POD_NAME": "node1"}, 2,
     "task worker:1 would listen on port 2220 (from --port '2219') on the coordinator's host node1"),
])
def test_bad_input_is_one_line_and_exit_code(run_tfboot, tmp_path, args, env, code, needle):
    log_root = tmp_path / "logs"
    result = run_tfboot([*args, "--log-root", str(log_root), "--", "touch", str(tmp_path / "ran")] if args[:1] != ["--cluster"]
                        else args, env=env)
    assert result.returncode == code, result.stderr
    assert needle in one_error_line(result)
    assert not (tmp_path / "ran").exists(), "nothing is run after an error"
    assert not log_root.exists(), "nothing is written after an error"


def test_exec_passes_argv_and_env_untouched(run_tfboot, tmp_path):
    tricky = ["a b", '"quoted"', "$HOME", "it's", "*", "--cluster", ""]
    env = {"POD_NAME": "m-worker-2", **CLUSTER, "TFBOOT_WAIT": "0", "USER_VALUE": "x y $z",
           "TFBOOT_LOG_ROOT": str(tmp_path / "logs")}
    printed = run_tfboot(["--", "/usr/bin/printf", "%s\\0", *tricky], env=env)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.split("\0")[:-1] == tricky
    result = run_tfboot(["--", "/usr/bin/env", "-0"], env=env)
    assert result.returncode == 0, result.stderr
    seen_env = dict(entry.split("=", 1) for entry in result.stdout.split("\0") if entry)
    log_dir = str(tmp_path / "logs" / "worker_2")
    expected_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env, "TFBOOT_LOG_DIR": log_dir,
                    "TFBOOT_TASK_TYPE": "worker", "TFBOOT_TASK_INDEX": "2", "TFBOOT_RESTART_COUNT": "0",
                    "TF_CONFIG": (tmp_path / "logs" / "worker_2" / "tf_config.json").read_text().strip()}
    assert seen_env == expected_env


def test_log_dir_files(run_tfboot, tmp_path):
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=2", "TFBOOT_CONTROL_PORT": "0", "TFBOOT_WAIT": "0",
           "TFBOOT_LOG_ROOT": str(tmp_path / "r")}
    assert run_tfboot(["true"], env=env).returncode == 0
    log_dir = tmp_path / "r" / "worker_0"
    assert sorted(os.listdir(log_dir)) == ["startup.json", "tf_config.json"], "no temporary file left"
    startup = json.loads((log_dir / "startup.json").read_text())
    assert startup["task"] == {"type": "worker", "index": 0}
    assert startup["identity_source"] == "hostname 'm-worker-0' (from POD_NAME)"
    assert [p["name"] for p in startup["peers"]] == ["m-worker-0", "m-worker-1"]
    assert startup["tf_config"] == json.loads((log_dir / "tf_config.json").read_text())
    assert startup["restarts"] == 0
    # A restart in the same pod keeps the history and never deletes user files.
    (log_dir / "user.txt").write_text("mine")
    assert run_tfboot(["true"], env=env).returncode == 0
    again = json.loads((log_dir / "startup.json").read_text())
    assert again["restarts"] == 1
    assert again["history"][0]["started_at"] == startup["started_at"]
    assert (log_dir / "user.txt").read_text() == "mine"


def test_unwritable_log_root_is_exit_4(run_tfboot, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(blocker / "sub")}
    result = run_tfboot(["--", "touch", str(tmp_path / "ran")], env=env)
    assert result.returncode == 4
    assert one_error_line(result).endswith(f"cannot create directory '{blocker}/sub': Not a directory; the log dir is under "
                                           f"TFBOOT_LOG_ROOT '{blocker}/sub'")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("command, code", [(["/nonexistent/cmd"], 127), (["no-such-command-xyz"], 127)])
def test_command_not_found_is_127(run_tfboot, tmp_path, command, code):
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(tmp_path)}
    for mode in ["--no-init", "--init"]:
        result = run_tfboot([mode, "--", *command], env=env)
        assert result.returncode == code, (mode, result.stderr)
        assert "not found" in result.stderr


def test_command_not_executable_is_126(run_tfboot, tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(tmp_path)}
    for mode in ["--no-init", "--init"]:
        result = run_tfboot([mode, "--", str(script)], env=env)
        assert result.returncode == 126, (mode, result.stderr)


def test_command_exit_status_passes_through(run_tfboot, tmp_path):
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(tmp_path)}
    assert run_tfboot(["--", "sh", "-c", "exit 42"], env=env).returncode == 42


def test_json_log_format_is_one_object_per_line(run_tfboot, tmp_path):
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=9", "TFBOOT_CONTROL_PORT": "0", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(tmp_path),
           "TFBOOT_LOG_FORMAT": "json"}
    result = run_tfboot(["--cluster", "worker=0,ps=1", "true"], env=env)
    assert result.returncode == 2
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines[-1]["level"] == "error"
    assert "outside --cluster" in lines[-1]["message"]
    ok = run_tfboot(["true"], env=env)
    assert ok.returncode == 0
    records = [json.loads(line) for line in ok.stderr.splitlines()]
    assert any(r.get("task") == "worker:0" and r["message"].startswith("identity worker:0") for r in records)


@pytest.mark.parametrize("args, env", [(["--bogus"], {"TFBOOT_LOG_FORMAT": "json"}),
                                       (["--log-format", "json", "--wait", "1x"], {}),
                                       (["--log-format=json", "--cluster"], {})])
def test_option_errors_are_written_in_the_log_format_asked_for(run_tfboot, args, env):
    result = run_tfboot(args, env=env)
    assert result.returncode == 2
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert len(lines) == 1 and lines[0]["level"] == "error", result.stderr


def test_log_level_warn_silences_info(run_tfboot, tmp_path):
    env = {"POD_NAME": "m-worker-0", "TFBOOT_CLUSTER": "worker=1", "TFBOOT_WAIT": "0", "TFBOOT_LOG_ROOT": str(tmp_path)}
    assert run_tfboot(["--log-level", "warn", "true"], env=env).stderr == ""
    assert "identity worker:0" in run_tfboot(["true"], env=env).stderr


def test_a_mistyped_twin_is_a_usage_error_naming_the_nearest_one(run_tfboot, tmp_path):
    # TFBOOT_WAITT=0 would otherwise cost the full 15-minute DNS wait; nothing is looked up or written.
    result = run_tfboot(["--log-root", str(tmp_path / "logs"), "--", "true"],
                        env={"TFBOOT_WAITT": "0", "TFBOOT_CLUSTER": "worker=2", "POD_NAME": "m-worker-0"})
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).endswith("TFBOOT_WAITT (did you mean TFBOOT_WAIT?) is not an option's environment twin; "
                                      "TFBOOT_UNKNOWN_VARIABLES=warn ignores them with a warning (for an image that sets "
                                               "variables for several tfboot versions)"), result.stderr
    assert not (tmp_path / "logs").exists()


def test_a_mistyped_twin_is_warned_about_with_the_nearest_one_when_asked(run_tfboot, tmp_path):
    # An image that sets variables for several tfboot versions: TFBOOT_UNKNOWN_VARIABLES=warn.
    result = run_tfboot(["local", "--log-root", str(tmp_path / "logs"), "--", "true"],
                        env={"TFBOOT_CLUSTR": "worker=3", "TFBOOT_UNKNOWN_VARIABLES": "warn"})
    assert result.returncode == 0, result.stderr
    warnings = [line.split(" warning ", 1)[1] for line in result.stderr.splitlines() if " warning " in line]
    assert warnings == ["TFBOOT_CLUSTR is not an option's environment twin and is ignored; did you mean TFBOOT_CLUSTER?"]


def test_a_coordinator_whose_name_never_resolves_is_named_with_what_to_check(run_tfboot, tmp_path):
    # --wait 0: no DNS wait, but the barrier still needs the coordinator's address (the DNS server
    # is a closed port on loopback, so its name never resolves).
    result = run_tfboot(["--wait", "0", "--start-timeout", "2s", "--dns-server", "127.0.0.1:9", "--log-root",
                         str(tmp_path / "logs"), "--", "true"],
                        env={"TFBOOT_CLUSTER": "worker=2", "POD_NAME": "a-worker-1"})
    assert result.returncode == 5, result.stderr
    error = one_error_line(result)
    assert "start barrier incomplete after 2s: no start from the coordinator worker:0 (a-worker-0); last: the coordinator " \
           "worker:0 (a-worker-0) has no address yet: " in error
    assert error.endswith("; check that the coordinator's pod runs and that its name is published (a headless Service "
                          "with publishNotReadyAddresses: true, the pod's hostname and subdomain)")
