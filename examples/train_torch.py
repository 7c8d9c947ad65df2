#!/usr/bin/env python3
"""PyTorch DistributedDataParallel example for tfboot.

Trains a small regression model on synthetic data (the same on every rank, from a fixed seed):
each rank trains on its own shard (DistributedSampler) and DDP all-reduces the gradients. Rank 0
saves a checkpoint after every epoch; when the job starts again, every rank resumes from it.

What tfboot --framework pytorch gives each process (as torchrun would):
  RANK, WORLD_SIZE, LOCAL_RANK   this process among all ranks, and on its node
  MASTER_ADDR, MASTER_PORT       rank 0's host and port, where init_process_group meets
  TORCHELASTIC_ERROR_FILE        where @record writes this rank's exception; tfboot logs it
  TORCHELASTIC_RESTART_COUNT     the job's restarts in place so far (tfboot --max-restarts)
  TFBOOT_LOG_DIR                 this task's log dir; the default checkpoint dir is under it

  tfboot local --framework pytorch --nproc-per-node 2 --cluster worker=2 -- python train_torch.py
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SEED = 1234


def synthetic_data(samples=2048, features=16):
    """y = x.w + 0.5*sin(x_0) + noise, the same on every rank."""
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(samples, features, generator=generator)
    w = torch.randn(features, 1, generator=generator)
    y = x @ w + 0.5 * torch.sin(x[:, :1]) + 0.05 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def load_checkpoint(path):
    """Rank 0 reads the checkpoint and sends it to every rank: only rank 0 needs to see it."""
    state = [torch.load(path, map_location="cpu") if dist.get_rank() == 0 and os.path.exists(path) else None]
    dist.broadcast_object_list(state, src=0)
    return state[0]


def save_checkpoint(path, state):
    """Written beside and renamed over the last one: a job stopped mid-write keeps the old one."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".partial"
    with open(partial, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


@record  # an exception goes to TORCHELASTIC_ERROR_FILE, and tfboot names it when the job fails
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--checkpoint-dir", help="rank 0's; default $TFBOOT_LOG_DIR/checkpoint. On Kubernetes: a "
                        "volume that outlives rank 0's pod")
    args = parser.parse_args()
    checkpoint = os.path.join(args.checkpoint_dir or os.path.join(os.environ.get("TFBOOT_LOG_DIR", "logs"), "checkpoint"),
                              "checkpoint.pt")

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    # env:// reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    start_epoch = 0
    state = load_checkpoint(checkpoint)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"]
        if rank == 0:
            print(f"[train_torch.py] resumed from {checkpoint} after epoch {start_epoch} "
                  f"(restart {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')})", flush=True)
    ddp_model = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)

    dataset = synthetic_data()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp_model(x.to(device)), y.to(device))
            loss.backward()  # DDP averages the gradients over all ranks here
            optimizer.step()
        if rank == 0:
            save_checkpoint(checkpoint, {"epoch": epoch + 1, "model": model.state_dict(), "optimizer": optimizer.state_dict()})
            print(f"[train_torch.py] epoch {epoch + 1}/{args.epochs} loss={loss.item():.6f}, saved {checkpoint}", flush=True)

    dist.destroy_process_group()
    return model


if __name__ == "__main__":
    main()
