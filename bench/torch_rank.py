"""One rank of the PyTorch start-up comparison (torchbench.py): the smallest trainer that joins a
job, run the same way under tfboot and under torchrun.

    python torch_rank.py OUT_DIR

Notes wall-clock times (``time.time()``: one clock for every pod of the harness) as it starts,
once torch is imported, once ``init_process_group("gloo")`` returns and once one ``all_reduce``
is done, and writes them with the variables its launcher gave it to ``OUT_DIR/rank-<RANK>.json``
(written whole, then renamed). Exit 0 when the all_reduce summed to WORLD_SIZE, 1 when not.
"""

import time

started = time.time()   # before any import: torch's import is part of what is measured

import datetime
import json
import os
import socket
import sys

import torch
import torch.distributed as dist

imported = time.time()

# Bounded, so a rank that cannot reach the store fails instead of waiting torch's default 30 min.
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
initialized = time.time()
total = torch.ones(1)
dist.all_reduce(total)
reduced = time.time()

rank, world = dist.get_rank(), dist.get_world_size()
record = {"rank": rank, "world_size": world, "host": socket.gethostname(), "pid": os.getpid(),
          "started": started, "imported": imported, "initialized": initialized, "reduced": reduced,
          "all_reduce_sum": total.item(),
          "env": {name: os.environ.get(name) for name in
                  ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                   "TORCHELASTIC_USE_AGENT_STORE", "GLOO_SOCKET_IFNAME")}}
path = os.path.join(sys.argv[1], f"rank-{rank}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.replace(path + ".tmp", path)
dist.destroy_process_group()
sys.exit(0 if record["all_reduce_sum"] == world else 1)
