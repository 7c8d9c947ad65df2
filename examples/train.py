#!/usr/bin/env python3
"""MultiWorkerMirroredStrategy example for tfboot.

Trains a small Keras regression model on synthetic data (generated from a fixed seed, so every
worker builds the same data) with synchronous all-reduce across all chief/worker tasks of
TF_CONFIG. Without TF_CONFIG it runs as a single worker.

Environment (set by tfboot):
  TF_CONFIG          cluster and own task; absent = single local worker
  TFBOOT_LOG_DIR     per-task output directory (default ./logs/local)
  TFBOOT_TASK_TYPE   only used for messages; TF_CONFIG is authoritative
  TFBOOT_TASK_INDEX

On success every training task prints exactly one line on stdout:
  TFBOOT_RESULT task=worker:0 loss=0.012345 weights_sha256=<64 hex> init_sha256=<64 hex> workers=2 epochs=3 steps=60
An evaluator task (not part of MultiWorkerMirroredStrategy) prints
  TFBOOT_RESULT task=evaluator:0 status=idle
and exits 0. On failure a line `TFBOOT_FAILED task=... reason=...` goes to stderr and the exit
status is non-zero: 1 = error (e.g. a peer died), 2 = bad TF_CONFIG/arguments, 124 = --timeout
expired. If TensorFlow holds the interpreter at that moment (MultiWorkerMirroredStrategy blocks
this way while waiting for a missing peer), a helper process kills the task with SIGKILL
5 s later instead (status 137 / -9).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

# Must be set before TensorFlow is imported: hide INFO and WARNING from the C++ side, keep errors.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
WATCHDOG_GRACE = 5.0

SEED = 1234
NUM_SAMPLES = 4096
NUM_FEATURES = 16

# "type:index" for messages; refined from TF_CONFIG once it has been read.
TASK_NAME = (f"{os.environ.get('TFBOOT_TASK_TYPE') or 'worker'}:"
             f"{os.environ.get('TFBOOT_TASK_INDEX') or 0}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default 3)")
    parser.add_argument("--steps-per-epoch", type=int, default=20,
                        help="steps per epoch (default 20)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="batch size per worker; the global batch is this times the number "
                             "of workers (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01, help="Adam learning rate")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="give up (exit 124) after this many seconds; 0 = never (default 600)")
    args = parser.parse_args(argv)
    for name in ("epochs", "steps_per_epoch", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


class ConfigError(Exception):
    pass


def read_tf_config():
    """Returns (cluster dict, task type, task index) from TF_CONFIG; a single worker if unset."""
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        return {}, "worker", 0
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
    if cluster.get("ps"):
        raise ConfigError("TF_CONFIG has 'ps' tasks: MultiWorkerMirroredStrategy has no parameter "
                          "servers, use examples/train_ps.py")
    if task_type not in ("chief", "worker", "evaluator"):
        raise ConfigError(f"task type '{task_type}' is not supported by this example")
    if task_type != "evaluator" and task_index >= len(cluster.get(task_type) or []):
        raise ConfigError(f"task {task_type}:{task_index} is not in the cluster")
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


def synthetic_data(np):
    """Same arrays on every worker: y = x.w + 0.5*sin(x_0) + noise."""
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(NUM_SAMPLES, NUM_FEATURES)).astype("float32")
    w = rng.normal(size=(NUM_FEATURES, 1)).astype("float32")
    noise = 0.05 * rng.normal(size=(NUM_SAMPLES, 1)).astype("float32")
    y = x @ w + 0.5 * np.sin(x[:, :1]) + noise
    return x, y.astype("float32")


def weights_sha256(model, np):
    """SHA-256 over dtype, shape and bytes of every model variable, in the model's fixed order."""
    digest = hashlib.sha256()
    for variable in model.weights:
        value = np.ascontiguousarray(np.asarray(variable.numpy()))
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def main(argv):
    global TASK_NAME
    args = parse_args(argv)
    try:
        cluster, task_type, task_index = read_tf_config()
    except ConfigError as e:
        print(f"TFBOOT_FAILED task={TASK_NAME} reason=bad TF_CONFIG: {e}",
              file=sys.stderr, flush=True)
        return EXIT_USAGE
    task_name = TASK_NAME = f"{task_type}:{task_index}"
    # Ctrl-C and SIGTERM end the process at once (status 128+signal), even while the main
    # thread is blocked inside TensorFlow where a Python handler would never get to run.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    start_watchdog(args.timeout)

    if task_type == "evaluator":
        # MultiWorkerMirroredStrategy has no use for an evaluator; it is allowed to exist and end.
        print(f"TFBOOT_RESULT task={task_name} status=idle", flush=True)
        return 0

    log_dir = os.environ.get("TFBOOT_LOG_DIR") or os.path.join(".", "logs", "local")
    os.makedirs(log_dir, exist_ok=True)
    num_workers = max(1, len(cluster.get("chief") or []) + len(cluster.get("worker") or []))
    if "chief" in cluster:
        is_chief = task_type == "chief"
    else:
        is_chief = task_type == "worker" and task_index == 0

    import numpy as np
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    try:
        import absl.logging
        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:
        pass
    import keras

    # The strategy must exist before any other TensorFlow op runs. It reads TF_CONFIG itself.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # Its coordination service installs a SIGTERM handler that only records a "preemption"
    # (meant for PreemptionCheckpointHandler), so SIGTERM would no longer stop this process.
    # Restore the default: SIGTERM from tfboot or Kubernetes ends the task. (While the strategy
    # is still waiting for its peers, SIGTERM is swallowed; --timeout bounds that wait.)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    replicas = strategy.num_replicas_in_sync
    print(f"[train.py] task={task_name} chief={int(is_chief)} workers={num_workers} "
          f"replicas={replicas} log_dir={log_dir}", flush=True)

    keras.utils.set_random_seed(SEED)
    x, y = synthetic_data(np)
    global_batch = args.batch_size * num_workers
    dataset = (tf.data.Dataset.from_tensor_slices((x, y))
               .shuffle(NUM_SAMPLES, seed=SEED, reshuffle_each_iteration=True)
               .repeat()
               .batch(global_batch, drop_remainder=True))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    with strategy.scope():
        # Same seed everywhere, and the strategy also broadcasts initial values from the chief.
        model = keras.Sequential([
            keras.Input(shape=(NUM_FEATURES,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(1),
        ])
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        optimizer.build(model.trainable_variables)
    init_sha = weights_sha256(model, np)

    # A custom training loop rather than model.fit: fit() under MultiWorkerMirroredStrategy
    # breaks with some Keras 3 releases (they reduce a PerReplica input batch while building),
    # and the loop shows plainly what happens: per-replica loss scaled by the global batch,
    # gradients all-reduced (summed) across workers by the Keras optimizer, identical updates.
    dist_dataset = strategy.experimental_distribute_dataset(dataset)

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                per_example = tf.reduce_mean(tf.square(predictions - labels), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        per_replica_loss = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)

    # Recent TensorFlow releases no longer install TensorBoard, and tf.summary needs it.
    writer = None
    if importlib.util.find_spec("tensorboard") is not None:
        writer = tf.summary.create_file_writer(os.path.join(log_dir, "tensorboard"))
    else:
        print(f"[train.py] task={task_name} TensorBoard is not installed: no summaries "
              f"(pip install tensorboard for them)", flush=True)
    iterator = iter(dist_dataset)
    history = []
    for epoch in range(args.epochs):
        started = time.monotonic()
        total = 0.0
        for _ in range(args.steps_per_epoch):
            total += float(train_step(iterator))
        epoch_loss = total / args.steps_per_epoch
        history.append(epoch_loss)
        if writer is not None:
            with writer.as_default():
                tf.summary.scalar("loss", epoch_loss, step=epoch)
            writer.flush()
        print(f"[train.py] task={task_name} epoch {epoch + 1}/{args.epochs} "
              f"loss={epoch_loss:.6f} ({time.monotonic() - started:.2f}s)", flush=True)
    if writer is not None:
        writer.close()

    final_sha = weights_sha256(model, np)
    # Loss of the final weights over the whole synthetic set, computed locally on each worker:
    # the same number everywhere when the weights are the same.
    prediction = model(x, training=False)
    loss = float(np.mean(np.square(np.asarray(prediction) - y)))

    # Saving, as the TensorFlow multi-worker guide recommends: every worker saves (saving may
    # involve the other workers), the chief into its log dir, the others into a temporary
    # directory that is removed afterwards.
    if is_chief:
        model_dir = os.path.join(log_dir, "model")
        os.makedirs(model_dir, exist_ok=True)
    else:
        model_dir = tempfile.mkdtemp(prefix=f"tfboot-{task_type}{task_index}-")
    try:
        model.save(os.path.join(model_dir, "model.keras"))
    finally:
        if not is_chief:
            shutil.rmtree(model_dir, ignore_errors=True)

    summary = {
        "task": task_name, "chief": is_chief, "workers": num_workers, "replicas": replicas,
        "epochs": args.epochs, "steps_per_epoch": args.steps_per_epoch,
        "batch_size_per_worker": args.batch_size, "global_batch_size": global_batch,
        "loss": loss, "train_loss_per_epoch": history,
        "weights_sha256": final_sha, "init_sha256": init_sha,
        "model": os.path.join(model_dir, "model.keras") if is_chief else None,
    }
    with open(os.path.join(log_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    print(f"TFBOOT_RESULT task={task_name} loss={loss:.6f} weights_sha256={final_sha} "
          f"init_sha256={init_sha} workers={num_workers} epochs={args.epochs} "
          f"steps={args.epochs * args.steps_per_epoch}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report every failure as one line and a status
        traceback.print_exc()
        reason = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"TFBOOT_FAILED task={TASK_NAME} reason={reason}", file=sys.stderr, flush=True)
        status = EXIT_ERROR
    sys.stdout.flush()
    sys.exit(status)
