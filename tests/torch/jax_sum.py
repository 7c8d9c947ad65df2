"""A JAX process of a multi-process job, for the JAX tier: initialize from tfboot's variables, sum across processes.

Calls jax.distributed.initialize with JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID
(Kubeflow's JAX convention, which tfboot follows), gathers process_index()+1 from every process and
prints `RESULT rank=<process index> world=<process count> sum=<sum of the gathered values>`.
"""

import os

import jax
import numpy as np
from jax.experimental import multihost_utils


def main():
    jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_NUM_PROCESSES"]),
                               int(os.environ["JAX_PROCESS_ID"]), initialization_timeout=60)
    gathered = multihost_utils.process_allgather(np.array([jax.process_index() + 1]))
    print(f"RESULT rank={jax.process_index()} world={jax.process_count()} sum={int(gathered.sum())}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
