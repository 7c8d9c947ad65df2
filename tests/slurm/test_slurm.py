"""tfboot under a real Slurm: `srun` starts it on two slurmd nodes, and everything tfboot knows of
the job comes from the variables Slurm sets (docs/identity.md, "Platforms", Slurm)."""

import json
import os
import re

import pytest

from harness.exit_codes import STOPPED_BY_JOB
from paths import REPO_DIR

pytestmark = pytest.mark.root

# examples/train.py, run by the TensorFlow tier's wrapper that ends it with a TFBOOT_RESULT line.
TRAIN = [os.path.join(REPO_DIR, "tests", "tensorflow", "run_example.py"), os.path.join(REPO_DIR, "examples", "train.py")]


def by_task(text):
    """{rank: [lines]} from the output of `srun --label` ("2: text")."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"\s*(\d+): ?(.*)", line)
        if match:
            found.setdefault(int(match.group(1)), []).append(match.group(2))
    return found


def printed_configs(result, tasks):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = by_task(result.stdout)
    assert sorted(lines) == list(range(tasks)), result.stdout
    configs = {rank: json.loads(lines[rank][-1]) for rank in lines}
    for rank in range(tasks):
        assert f"identity worker:{rank} from Slurm (SLURM_PROCID)" in result.stderr
    return configs


def expect_workers(configs, workers):
    assert configs == {rank: {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}
                       for rank in range(len(workers))}


# ---- host lists: tfboot's expansion against libslurm's (scontrol show hostnames)

# Lists libslurm expands; tfboot must give the same hosts in the same order.
EXPANDED = [
    "row[0,1]_rack[2-3]_blade[4,5]",
    "x[1-2]y[3-4]z[5-6]w[7-8]",
    "r[1-2]n[1-2]",
    "n[08-09]m[007-008]",
    "n[1-2][3-4]",
    "a[1-2]b-c[3-4]",
    "n[1-2],m[1-2]p[1-2]",
    "gpu[07-08],cpu1",
    "nid00[2285-2286,2718]",
    "n[8-11]",
    "n[098-100]",
    "n[1-0002]",
    "n[1-2,010-011]",
    "n[1234567890-1234567892]",
    "n[4294967295-4294967296]",
    "n[18446744073709551613-18446744073709551614]",   # a range ending at 2^64-1 crashes scontrol 22.05
    "n[18446744073709551615]",
    "n[0001234567890]",
    "[1-2]",
    "a1 a2\tb1",
    "a1,,  a2,",
    "z1,a[3-4],b1",
    "node-1.cluster,node-2.cluster",
]

# Lists libslurm refuses ("Invalid hostlist"); tfboot must refuse them too (exit 2).
REFUSED = ["gpu-a[01-02]-ib", "a[1-2]b[3-4]c", "a[1-2]b", "n[5-3]", "n[]", "n[1,,2]", "n[-1-2]", "n[1-2]]"]

# Text Slurm never writes, of which libslurm still makes something ("n[ 1-2]" gives n01 n02,
# "n[1-2" gives "n]", "n[1-]" n1, a number above 2^64-1 becomes 2^64-1); tfboot refuses it (exit 2).
SLOPPY = ["n[ 1-2]", "n[+1-2]", "n[[1-2]", "n[1-2", "n[1-]", "n[99999999999999999999]"]


def tfboot_hosts(run_tfboot, hostlist, count):
    """The hosts of tfboot's TF_CONFIG for a step of `count` tasks, one on each node, else its error."""
    env = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": hostlist, "SLURM_STEP_NUM_TASKS": str(count),
           "SLURM_STEP_TASKS_PER_NODE": f"1(x{count})"}
    result = run_tfboot(["--print", "--wait", "0"], env=env)
    if result.returncode != 0:
        return f"exit {result.returncode}: {result.stderr.strip()[-500:]}"
    return [address.rsplit(":", 1)[0] for address in json.loads(result.stdout)["cluster"]["worker"]]


def test_host_lists_expand_in_libslurms_order(slurm, run_tfboot):
    differences = []
    for hostlist in EXPANDED:
        expected = slurm.scontrol(["show", "hostnames", hostlist]).stdout.split()
        assert expected and "Invalid" not in expected, (hostlist, expected)
        got = tfboot_hosts(run_tfboot, hostlist, len(expected))
        if got != expected:
            differences.append(f"{hostlist!r}: scontrol {expected}, tfboot {got}")
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("hostlist", REFUSED + SLOPPY)
def test_host_lists_libslurm_refuses_or_misreads_are_usage_errors(slurm, run_tfboot, hostlist):
    shown = slurm.scontrol(["show", "hostnames", hostlist])
    if hostlist in REFUSED:
        assert "Invalid hostlist" in shown.stdout + shown.stderr, shown
    env = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": hostlist, "SLURM_STEP_NUM_TASKS": "2",
           "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}
    result = run_tfboot(["--print", "--wait", "0"], env=env)
    assert result.returncode == 2, (result.stdout, result.stderr, shown.stdout)
    assert f"SLURM_STEP_NODELIST '{hostlist}'" in result.stderr


# ---- --print in every task of a step: block and cyclic, and a distribution tfboot cannot map

def test_print_block_default(slurm, tfboot, tmp_path):
    result = slurm.srun(["-N2", "-n4", "--label", tfboot, "--print"], cwd=str(tmp_path))
    expect_workers(printed_configs(result, 4), ["node1:2222", "node1:2223", "node2:2222", "node2:2223"])


def test_print_block_asked_for(slurm, tfboot, tmp_path):
    result = slurm.srun(["-N2", "-n3", "--distribution=block", "--label", tfboot, "--print"], cwd=str(tmp_path))
    expect_workers(printed_configs(result, 3), ["node1:2222", "node1:2223", "node2:2222"])


@pytest.mark.parametrize("tasks, workers", [
    (4, ["node1:2222", "node2:2222", "node1:2223", "node2:2223"]),
    (3, ["node1:2222", "node2:2222", "node1:2223"]),
])
def test_print_cyclic(slurm, tfboot, tmp_path, tasks, workers):
    result = slurm.srun(["-N2", f"-n{tasks}", "--distribution=cyclic", "--label", "sh", "-c",
                         'echo "where $SLURMD_NODENAME $SLURM_LOCALID"; exec "$0" --print', tfboot], cwd=str(tmp_path))
    configs = printed_configs(result, tasks)
    expect_workers(configs, workers)
    # where Slurm really ran each task, as its own variables say: the address TF_CONFIG gives it
    for rank, lines in by_task(result.stdout).items():
        node, local = lines[0].split()[1:]
        assert workers[rank] == f"{node}:{2222 + int(local)}"


def test_plane_distribution_is_refused_on_every_task(slurm, tfboot, tmp_path):
    result = slurm.srun(["-N2", "-n4", "--distribution=plane=2", "--label", "sh", "-c",
                         '"$0" --print; echo "exit $?"', tfboot], cwd=str(tmp_path))
    lines = by_task(result.stdout)
    assert {rank: task_lines[-1] for rank, task_lines in lines.items()} == {rank: "exit 2" for rank in range(4)}, \
        result.stdout + result.stderr
    assert result.stderr.count("SLURM_DISTRIBUTION 'plane' places tasks in a way tfboot cannot map to hosts") == 4, \
        result.stderr


# ---- a supervised job: tfboot as the entrypoint of every task, with a shell command

def test_failing_task_stops_the_others_with_200(slurm, tfboot, tmp_path):
    command = 'if [ "$SLURM_PROCID" = 2 ]; then sleep 2; exit 3; fi; exec sleep 120'
    wrapper = '"$0" --init --log-root "$1" -- sh -c "$2"; echo "exit $?"'
    result = slurm.srun(["-N2", "-n4", "--label", "sh", "-c", wrapper, tfboot, str(tmp_path), command],
                        cwd=str(tmp_path), timeout=90)
    lines = by_task(result.stdout)
    exits = {rank: task_lines[-1] for rank, task_lines in lines.items()}
    assert exits == {0: f"exit {STOPPED_BY_JOB}", 1: f"exit {STOPPED_BY_JOB}", 2: "exit 3",
                     3: f"exit {STOPPED_BY_JOB}"}, result.stdout + result.stderr
    assert result.stderr.count("worker:2 failed with status 3") >= 3, result.stderr
    for rank in range(4):
        startup = json.loads((tmp_path / f"worker_{rank}" / "startup.json").read_text())
        assert startup["identity_source"] == "Slurm (SLURM_PROCID)"
        assert startup["job"]["supervised"] is True


# ---- real training: MultiWorkerMirroredStrategy across the two nodes

def test_multi_worker_mirrored_strategy_across_two_nodes(slurm, tfboot, tensorflow_venv, tmp_path):
    env = {"PATH": f"{tensorflow_venv}/bin:/usr/local/bin:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2",
           "HOME": "/root", "PYTHONUNBUFFERED": "1", "TFBOOT_LOG_ROOT": str(tmp_path)}
    result = slurm.srun(["-N2", "-n2", "--label", tfboot, "--", "python", *TRAIN], env=env, cwd=str(tmp_path),
                        timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    found = {}
    for rank, lines in by_task(result.stdout).items():
        for line in lines:
            match = re.search(r"TFBOOT_RESULT task=worker:(\d+) (.*)", line)
            if match:
                assert int(match.group(1)) == rank
                found[rank] = dict(item.split("=", 1) for item in match.group(2).split())
    assert sorted(found) == [0, 1], result.stdout[-4000:]
    assert found[0]["workers"] == "2"
    assert found[0]["weights_sha256"] == found[1]["weights_sha256"], "the workers trained together"
    assert found[0]["weights_sha256"] != found[0]["init_sha256"], "the model trained"
    config = json.loads((tmp_path / "worker_1" / "tf_config.json").read_text())
    assert config == {"cluster": {"worker": ["node1:2222", "node2:2222"]}, "task": {"type": "worker", "index": 1}}
