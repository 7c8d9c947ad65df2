"""A rank of a gloo job, for the PyTorch tier: the environment it got, one all-reduce, a result line.

Reads only what torchrun (or tfboot) gives a worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
* Writes its whole os.environ, as started, to env_rank<RANK>.json in TFBOOT_LOG_DIR (else in the
  working directory, as under torchrun), before it touches torch.distributed.
* All-reduces rank+1 and prints `RESULT rank=R world=W sum=S` (S = W(W+1)/2 when all took part).
* ALLREDUCE_FAIL=kill:R or raise:R: after init and a barrier, rank R SIGKILLs itself or raises
  RuntimeError("rank R lost its shard") under torch's @record (which writes TORCHELASTIC_ERROR_FILE);
  the other ranks sleep until they are stopped (120 s at most, then exit 3).
* ALLREDUCE_AFTER=R:S: after the result line, rank R works S seconds more on its own (as it would
  writing its checkpoint shard), then prints `DONE rank=R`.
"""

import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def dump_environment(rank):
    directory = os.environ.get("TFBOOT_LOG_DIR") or os.getcwd()
    with open(os.path.join(directory, f"env_rank{rank}.json"), "w") as f:
        json.dump(dict(os.environ), f, indent=1, sort_keys=True)


def fail_as_asked(rank, how, which):
    dist.barrier()
    if rank == which:
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {rank} lost its shard")
    time.sleep(120)
    sys.exit(3)


@record
def main():
    rank = int(os.environ["RANK"])
    dump_environment(rank)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    if os.environ.get("ALLREDUCE_FAIL"):
        how, _, which = os.environ["ALLREDUCE_FAIL"].partition(":")
        fail_as_asked(rank, how, int(which))
    value = torch.tensor([rank + 1.0])
    dist.all_reduce(value)
    print(f"RESULT rank={dist.get_rank()} world={dist.get_world_size()} sum={int(value.item())}", flush=True)
    dist.destroy_process_group()
    if os.environ.get("ALLREDUCE_AFTER"):
        which, _, seconds = os.environ["ALLREDUCE_AFTER"].partition(":")
        if rank == int(which):
            time.sleep(float(seconds))
            print(f"DONE rank={rank}", flush=True)


if __name__ == "__main__":
    main()
