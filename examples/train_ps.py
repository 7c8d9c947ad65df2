#!/usr/bin/env python3
"""ParameterServerStrategy example for tfboot.

Roles, from TF_CONFIG (required; e.g. `tfboot local --cluster chief=1,ps=1,worker=2`):
  chief      the coordinator: builds a small model whose variables live on the ps tasks,
             schedules --steps training steps on the workers with ClusterCoordinator, reports
             the loss and exits 0.
  ps/worker  start a tf.distribute.Server and server.join(), which never returns.
  evaluator  has nothing to evaluate here (no shared filesystem for checkpoints): ends at once.

The ps and worker tasks end because tfboot ends them: under tfboot's job supervision (tfboot as
PID 1 of each pod, or `tfboot local`) the chief's command exiting 0 ends the job, and every other
task's tfboot stops its command (5 s to end by itself, then SIGTERM) and exits 0. Run without
that supervision (plain `python train_ps.py`, or tfboot in exec mode), the servers run until
--timeout or until someone stops them, as TensorFlow's own servers always do.

Output on success, one line on stdout per task that ends by itself:
  TFBOOT_RESULT task=chief:0 loss=0.123456 init_loss=4.567890 steps=40 workers=2 ps=1
  TFBOOT_RESULT task=evaluator:0 status=idle
On failure a line `TFBOOT_FAILED task=... reason=...` goes to stderr; exit status 1 (error),
2 (bad TF_CONFIG/arguments), 124 (--timeout expired, any role; if TensorFlow holds the
interpreter at that moment, a helper process kills the task with SIGKILL 5 s later instead).
"""

import argparse
import json
import os
import select
import signal
import sys
import threading
import time
import traceback

# Must be set before TensorFlow is imported: hide INFO and WARNING from the C++ side, keep errors.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# As recommended by the TensorFlow parameter server guide: RPCs to unavailable tasks fail
# instead of waiting forever (the coordinator then retries the closures elsewhere).
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
WATCHDOG_GRACE = 5.0

SEED = 1234
NUM_SAMPLES = 2048
NUM_FEATURES = 16
HIDDEN = 32

TASK_NAME = (f"{os.environ.get('TFBOOT_TASK_TYPE') or '?'}:"
             f"{os.environ.get('TFBOOT_TASK_INDEX') or '?'}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40,
                        help="training steps scheduled by the chief (default 40)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="batch size of one step on one worker (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="any role gives up (exit 124) after this many seconds; 0 = never "
                             "(default 600)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1")
    return args


class ConfigError(Exception):
    pass


def read_tf_config():
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        raise ConfigError("TF_CONFIG is not set; this example needs a cluster, e.g. "
                          "`tfboot local --cluster chief=1,ps=1,worker=2 -- python3 "
                          "examples/train_ps.py`")
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"TF_CONFIG is not valid JSON: {e}")
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    task_type = task.get("type")
    task_index = task.get("index", 0)
    if not isinstance(cluster, dict) or not task_type or not isinstance(task_index, int):
        raise ConfigError("TF_CONFIG needs a 'cluster' object and a 'task' with 'type' and 'index'")
    if task_type not in ("chief", "worker", "ps", "evaluator"):
        raise ConfigError(f"task type '{task_type}' is not supported by this example")
    if task_type != "evaluator" and task_index >= len(cluster.get(task_type) or []):
        raise ConfigError(f"task {task_type}:{task_index} is not in the cluster")
    if task_type != "evaluator":
        for job in ("chief", "ps", "worker"):
            if not cluster.get(job):
                raise ConfigError(f"ParameterServerStrategy needs at least one '{job}' task "
                                  f"in the cluster")
        if len(cluster["chief"]) != 1:
            raise ConfigError("ParameterServerStrategy needs exactly one chief")
    return cluster, task_type, task_index


def start_watchdog(seconds):
    """Makes sure the process ends within about `seconds`.

    A timer thread prints TFBOOT_FAILED and exits 124. That thread needs the GIL, and some
    TensorFlow calls block while holding it (MultiWorkerMirroredStrategy waiting for a missing
    peer does), so a small forked helper process kills this one with SIGKILL if it is still
    alive WATCHDOG_GRACE seconds later. The helper notices this process ending (its pipe
    closes) and then ends at once, so it never outlives the task. Call it before importing
    TensorFlow (fork with no threads yet).
    """
    if seconds <= 0:
        return

    def expire():
        print(f"TFBOOT_FAILED task={TASK_NAME} reason=timeout after {seconds:g}s",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(EXIT_TIMEOUT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()

    parent = os.getpid()
    read_end, write_end = os.pipe()  # the write end stays open in this process until it ends
    if os.fork() == 0:
        try:
            os.close(write_end)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # do not hold the task's stdout open
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the task's death ends us
            ready, _, _ = select.select([read_end], [], [], seconds + WATCHDOG_GRACE)
            if not ready:
                os.write(2, (f"TFBOOT_FAILED task={TASK_NAME} reason=timeout after {seconds:g}s "
                             f"and still running {WATCHDOG_GRACE:g}s later: SIGKILL\n").encode())
                os.kill(parent, signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(read_end)
    start_watchdog.write_end = write_end


def quiet_tensorflow():
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    try:
        import absl.logging
        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:
        pass
    return tf


def finish(status):
    """Leaves without waiting for TensorFlow's threads and destructors (the coordinator's
    threads still hold connections to the servers, which are not going to close them)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def run_server(cluster, task_type, task_index):
    tf = quiet_tensorflow()
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=task_type,
                                  task_index=task_index, protocol="grpc", start=True)
    print(f"[train_ps.py] task={TASK_NAME} serving {server.target} until tfboot ends the job",
          flush=True)
    server.join()  # never returns; SIGTERM (default action) ends the process
    return 0


def synthetic_data(np):
    """Same arrays on every task: y = x.w + 0.5*sin(x_0) + noise, with Var(x.w) about 1."""
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(NUM_SAMPLES, NUM_FEATURES)).astype("float32")
    w = (rng.normal(size=(NUM_FEATURES, 1)) / NUM_FEATURES ** 0.5).astype("float32")
    noise = 0.05 * rng.normal(size=(NUM_SAMPLES, 1)).astype("float32")
    y = x @ w + 0.5 * np.sin(x[:, :1]) + noise
    return x, y.astype("float32")


def run_chief(args, cluster):
    import numpy as np
    tf = quiet_tensorflow()

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    num_workers, num_ps = len(cluster["worker"]), len(cluster["ps"])
    print(f"[train_ps.py] task={TASK_NAME} coordinating workers={num_workers} ps={num_ps} "
          f"steps={args.steps}", flush=True)

    x, y = synthetic_data(np)

    class MLP(tf.Module):
        """Two dense layers; the variables are placed on the ps tasks by the strategy."""

        def __init__(self):
            super().__init__()
            def init(shape, seed):
                scale = (2.0 / shape[0]) ** 0.5
                return tf.random.stateless_normal(shape, seed=[SEED, seed]) * scale
            self.w1 = tf.Variable(init([NUM_FEATURES, HIDDEN], 1), name="w1")
            self.b1 = tf.Variable(tf.zeros([HIDDEN]), name="b1")
            self.w2 = tf.Variable(init([HIDDEN, 1], 2), name="w2")
            self.b2 = tf.Variable(tf.zeros([1]), name="b2")

        def __call__(self, features):
            hidden = tf.nn.relu(tf.matmul(features, self.w1) + self.b1)
            return tf.matmul(hidden, self.w2) + self.b2

    with strategy.scope():
        model = MLP()
    variables = [model.w1, model.b1, model.w2, model.b2]

    def dataset_fn(input_context):
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
        batch = input_context.get_per_replica_batch_size(args.batch_size)
        return dataset.shuffle(NUM_SAMPLES, seed=SEED).repeat().batch(batch).prefetch(2)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def train_step(iterator):
        def replica_fn(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(features) - labels))
            for variable, gradient in zip(variables, tape.gradient(loss, variables)):
                variable.assign_sub(args.learning_rate * gradient)
            return loss

        losses = strategy.run(replica_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    def full_loss():
        # Runs on the chief, reading the current values from the ps tasks.
        return float(tf.reduce_mean(tf.square(model(tf.constant(x)) - y)))

    init_loss = full_loss()
    started = time.monotonic()
    results = [coordinator.schedule(train_step, args=(per_worker_iterator,))
               for _ in range(args.steps)]
    coordinator.join()
    step_losses = [float(r.fetch()) for r in results]
    elapsed = time.monotonic() - started
    loss = full_loss()
    print(f"[train_ps.py] task={TASK_NAME} {args.steps} steps in {elapsed:.2f}s, "
          f"step loss first={step_losses[0]:.4f} last={step_losses[-1]:.4f}", flush=True)

    log_dir = os.environ.get("TFBOOT_LOG_DIR") or os.path.join(".", "logs", "local")
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "summary.json"), "w") as f:
        json.dump({"task": TASK_NAME, "workers": num_workers, "ps": num_ps, "steps": args.steps,
                   "loss": loss, "init_loss": init_loss, "step_losses": step_losses,
                   "seconds": elapsed}, f, indent=2)
        f.write("\n")

    print(f"TFBOOT_RESULT task={TASK_NAME} loss={loss:.6f} init_loss={init_loss:.6f} "
          f"steps={args.steps} workers={num_workers} ps={num_ps}", flush=True)
    return 0


def main(argv):
    global TASK_NAME
    args = parse_args(argv)
    try:
        cluster, task_type, task_index = read_tf_config()
    except ConfigError as e:
        print(f"TFBOOT_FAILED task={TASK_NAME} reason=bad TF_CONFIG: {e}",
              file=sys.stderr, flush=True)
        return EXIT_USAGE
    TASK_NAME = f"{task_type}:{task_index}"
    # Ctrl-C and SIGTERM end the process at once (status 128+signal), even while the main
    # thread is blocked inside TensorFlow where a Python handler would never get to run.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    start_watchdog(args.timeout)

    if task_type == "evaluator":
        # Sidecar evaluation would need the chief's checkpoints on a shared filesystem.
        print(f"TFBOOT_RESULT task={TASK_NAME} status=idle", flush=True)
        return 0
    if task_type in ("ps", "worker"):
        return run_server(cluster, task_type, task_index)
    return run_chief(args, cluster)


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_ERROR)
    except BaseException as e:  # noqa: BLE001 - report every failure as one line and a status
        traceback.print_exc()
        reason = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"TFBOOT_FAILED task={TASK_NAME} reason={reason}", file=sys.stderr, flush=True)
        status = EXIT_USAGE if isinstance(e, ConfigError) else EXIT_ERROR
    finish(status)
