#!/usr/bin/env python3
"""JAX multi-process data-parallel example for tfboot.

Fits a linear model with a few steps of gradient descent on one global batch: each process holds
its own rows, jit computes the gradient over all of them (XLA all-reduces across the processes),
and every process ends with the same weights.

What tfboot --framework jax gives each process (Kubeflow Trainer's JAX convention):
  JAX_COORDINATOR_ADDRESS   host:port of process 0, where jax.distributed meets
  JAX_NUM_PROCESSES         how many processes the job has
  JAX_PROCESS_ID            this process, 0..JAX_NUM_PROCESSES-1
  JAX_LOCAL_DEVICE_IDS      with one process per GPU: the GPU of this process
jax.distributed.initialize() does not read these by itself: they are passed explicitly below.

  tfboot local --framework jax --cluster worker=2 -- python train_jax.py
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

SEED = 1234
FEATURES = 8
ROWS_PER_PROCESS = 256


def main():
    local_devices = os.environ.get("JAX_LOCAL_DEVICE_IDS")
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
        local_device_ids=[int(d) for d in local_devices.split(",")] if local_devices else None)
    process, processes = jax.process_index(), jax.process_count()

    # One mesh axis over every device of every process; the batch is split along it.
    mesh = jax.make_mesh((jax.device_count(),), ("batch",))
    rows = NamedSharding(mesh, PartitionSpec("batch"))
    replicated = NamedSharding(mesh, PartitionSpec())

    # This process's rows of the global batch: y = x.w_true + noise.
    rng = np.random.default_rng(SEED + process)
    w_true = np.random.default_rng(SEED).normal(size=FEATURES).astype(np.float32)
    x_local = rng.normal(size=(ROWS_PER_PROCESS, FEATURES)).astype(np.float32)
    y_local = x_local @ w_true + 0.01 * rng.normal(size=ROWS_PER_PROCESS).astype(np.float32)
    x = jax.make_array_from_process_local_data(rows, x_local)
    y = jax.make_array_from_process_local_data(rows, y_local)
    w = jax.device_put(jnp.zeros(FEATURES), replicated)

    def loss_fn(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    @jax.jit
    def step(w, x, y):
        loss, grad = jax.value_and_grad(loss_fn)(w, x, y)  # the mean over every process's rows
        return w - 0.1 * grad, loss

    for _ in range(50):
        w, loss = step(w, x, y)

    # Every process ends with the same weights: the gradient was taken over every process's rows.
    weights = np.asarray(w.addressable_data(0))
    print(f"process {process}/{processes} ({jax.device_count()} devices in all): loss={float(loss):.6f} "
          f"weights={np.array2string(weights, precision=4)}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
