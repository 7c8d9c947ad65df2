"""`tfboot local` runs a real gloo job: two nodes of two processes all-reduce together on 127.0.0.1."""

import subprocess

from ranks import ALLREDUCE, environments, result_lines


def test_two_nodes_of_two_processes_all_reduce_on_every_rank(tfboot, task_env, tmp_path):
    result = subprocess.run([tfboot, "local", "--framework", "pytorch", "--nproc-per-node", "2",
                             "--cluster", "worker=2", "--log-root", str(tmp_path / "logs"), "--", "python", ALLREDUCE],
                            env=task_env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # 1 + 2 + 3 + 4 on each of the 4 ranks, each line labelled with its task and rank.
    assert sorted(result_lines(result.stdout)) == \
        [f"[worker:{rank // 2} rank {rank}] RESULT rank={rank} world=4 sum=10" for rank in range(4)]
    masters = set()
    for node in range(2):
        log_dir = tmp_path / "logs" / f"worker_{node}"
        found = environments(log_dir)
        assert sorted(found) == [2 * node, 2 * node + 1], "each rank wrote its environment in its node's log dir"
        for rank, env in found.items():
            assert {key: env.get(key) for key in ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                  "TFBOOT_LOG_DIR", "TORCHELASTIC_ERROR_FILE", "GLOO_SOCKET_IFNAME",
                                                  "TF_CONFIG")} == {
                "RANK": str(rank), "LOCAL_RANK": str(rank % 2), "GROUP_RANK": str(node), "WORLD_SIZE": "4",
                "LOCAL_WORLD_SIZE": "2", "TFBOOT_LOG_DIR": str(log_dir),
                "TORCHELASTIC_ERROR_FILE": str(log_dir / f"error_rank{rank}.json"), "GLOO_SOCKET_IFNAME": "lo",
                "TF_CONFIG": None}
            masters.add((env["MASTER_ADDR"], env["MASTER_PORT"]))
        assert not list(log_dir.glob("error_rank*.json")), "no rank failed"
    assert len(masters) == 1 and masters.pop()[0] == "127.0.0.1"
