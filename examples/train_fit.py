#!/usr/bin/env python3
"""Keras model.fit example for tfboot: MultiWorkerMirroredStrategy, resumable after a restart.

The shape of script people write: a tf.keras model built and compiled in strategy.scope(), a
tf.data pipeline, model.fit() with callbacks. BackupAndRestore saves the training state at the
end of every epoch, so a job that is stopped and started again resumes at the epoch after the
last one saved; TensorBoard writes epoch summaries when TensorBoard is installed (recent
TensorFlow releases no longer install it; without it the script says so once and goes on).

Needs tf-keras, and sets TF_USE_LEGACY_KERAS=1 before importing TensorFlow: with TensorFlow
2.16 and later, tf.keras is Keras 3 by default, and Keras 3's model.fit fails under
MultiWorkerMirroredStrategy (it reduces a per-replica input batch across workers while building
the model). tf-keras is the Keras 2 line that TensorFlow's multi-worker support was made for;
install the release that matches TensorFlow's minor version, e.g.
`pip install --no-deps tf-keras~=2.16.0` for TensorFlow 2.16 (scripts/setup does this; no-deps
because tf-keras asks for the `tensorflow` package, which would put a second TensorFlow beside
tensorflow-cpu).

Environment (set by tfboot):
  TF_CONFIG          cluster and own task; absent = single local worker
  TFBOOT_LOG_DIR     per-task output directory (default ./logs/local)
  TFBOOT_TASK_TYPE   only used for messages; TF_CONFIG is authoritative
  TFBOOT_TASK_INDEX

--backup-dir is where BackupAndRestore keeps the training state. Every worker restores from the
chief's backup there, so it must be one directory that all tasks see (a shared volume); the
default is `backup` beside the task's log dir, i.e. in tfboot's log root. Before training the
workers compare what they found there and stop with an error if they disagree.

On success every training task prints exactly one line on stdout:
  TFBOOT_RESULT task=worker:0 loss=0.012345 weights_sha256=<64 hex> init_sha256=<64 hex> workers=2 epochs=4 steps=80 start_epoch=1
(steps counts the optimizer's steps, restored ones included; start_epoch is the 1-based epoch
this run started at, above 1 after a resume). An evaluator task prints
  TFBOOT_RESULT task=evaluator:0 status=idle
and exits 0. On failure a line `TFBOOT_FAILED task=... reason=...` goes to stderr and the exit
status is non-zero: 1 = error (e.g. a peer died), 2 = bad TF_CONFIG/arguments or tf-keras
missing, 124 = --timeout expired (a helper process kills the task with SIGKILL 5 s later if
TensorFlow holds the interpreter then: status 137 / -9).
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

# Both must be set before TensorFlow is imported: hide INFO and WARNING from the C++ side (errors
# are kept), and make tf.keras the tf-keras package (see the docstring for why).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

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


def log(message):
    print(f"[train_fit.py] task={TASK_NAME} {message}", flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=4, help="training epochs (default 4)")
    parser.add_argument("--steps-per-epoch", type=int, default=20,
                        help="steps per epoch (default 20)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="batch size per worker; the global batch is this times the number "
                             "of workers (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01, help="Adam learning rate")
    parser.add_argument("--backup-dir", default=None,
                        help="BackupAndRestore's directory, shared by all tasks (default: "
                             "`backup` beside the task's log dir)")
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
    """Makes sure the process ends within about `seconds` (the same helper as in train.py).

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


def saved_epoch(tf, backup_dir):
    """The 0-based epoch of the backup every worker restores from (the chief's), or -1."""
    latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    if latest is None:
        return -1
    return int(tf.train.load_variable(latest, "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"))


def leave_tf_keras_to_itself(tf):
    """TensorFlow 2.16 runs AutoGraph over tf-keras' own code every time a function is traced,
    which makes the first step take 10-60 s instead of about one; 2.17 and later leave tf_keras
    alone as they leave keras. Add that rule on older releases (a private module, hence the
    guard: without it training is only slower)."""
    try:
        from tensorflow.python.autograph.core import config as autograph_config
        rules = tuple(autograph_config.CONVERSION_RULES)
        if not any(rule.matches("tf_keras.src") for rule in rules):
            autograph_config.CONVERSION_RULES = rules + (autograph_config.DoNotConvert("tf_keras"),)
    except (ImportError, AttributeError):
        pass


def check_backup_is_shared(tf, np, strategy, epoch):
    """Stops unless every worker found the same backup: a worker that sees none would start
    from scratch while the others resume, and the job would train out of step."""
    @tf.function
    def gather_all():
        seen = strategy.run(lambda: tf.constant([epoch], dtype=tf.int64))
        return strategy.gather(seen, axis=0)

    seen = np.asarray(gather_all()).tolist()
    if len(set(seen)) > 1:
        found = ", ".join(f"replica {i}: {'epoch ' + str(e + 1) if e >= 0 else 'none'}"
                          for i, e in enumerate(seen))
        raise ConfigError(f"the workers found different backups ({found}): --backup-dir must "
                          f"be one directory shared by every task")


def callbacks(tf, log_dir, backup_dir, epochs):
    """BackupAndRestore, TensorBoard when it is installed, and one progress line per epoch."""

    class ProgressLine(tf.keras.callbacks.Callback):
        # Last in the list, so "backed up" is printed after BackupAndRestore has saved.
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            log(f"epoch {epoch + 1}/{epochs} loss={(logs or {}).get('loss', float('nan')):.6f} "
                f"({time.monotonic() - self.started:.2f}s), backed up")

    chosen = [tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir)]
    if importlib.util.find_spec("tensorboard") is not None:
        chosen.append(tf.keras.callbacks.TensorBoard(log_dir=os.path.join(log_dir, "tensorboard"),
                                                     update_freq="epoch"))
    else:
        log("TensorBoard is not installed: no summaries (pip install tensorboard for them)")
    chosen.append(ProgressLine())
    return chosen


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
    if importlib.util.find_spec("tf_keras") is None:
        print(f"TFBOOT_FAILED task={task_name} reason=tf-keras is not installed: pip install "
              f"--no-deps tf-keras~=<TensorFlow's major.minor>.0", file=sys.stderr, flush=True)
        return EXIT_USAGE

    log_dir = os.environ.get("TFBOOT_LOG_DIR") or os.path.join(".", "logs", "local")
    os.makedirs(log_dir, exist_ok=True)
    backup_dir = args.backup_dir or os.path.join(os.path.dirname(os.path.abspath(log_dir)),
                                                 "backup")
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
    leave_tf_keras_to_itself(tf)

    # The strategy must exist before any other TensorFlow op runs. It reads TF_CONFIG itself.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # Its coordination service installs a SIGTERM handler that only records a "preemption"
    # (meant for PreemptionCheckpointHandler), so SIGTERM would no longer stop this process.
    # Restore the default: SIGTERM from tfboot or Kubernetes ends the task.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    log(f"chief={int(is_chief)} workers={num_workers} replicas={strategy.num_replicas_in_sync} "
        f"tensorflow={tf.__version__} keras={tf.keras.__name__.split('.')[0]} "
        f"log_dir={log_dir} backup_dir={backup_dir}")

    epoch = saved_epoch(tf, backup_dir)
    check_backup_is_shared(tf, np, strategy, epoch)
    start_epoch = epoch + 2  # 1-based: the epoch after the last one saved
    if epoch >= 0:
        log(f"resuming at epoch {start_epoch}/{args.epochs} from the backup in {backup_dir} "
            f"(restart {os.environ.get('TFBOOT_RESTART_COUNT', '0')})")

    tf.keras.utils.set_random_seed(SEED)
    x, y = synthetic_data(np)
    global_batch = args.batch_size * num_workers
    dataset = (tf.data.Dataset.from_tensor_slices((x, y))
               .shuffle(NUM_SAMPLES, seed=SEED, reshuffle_each_iteration=True)
               .repeat()
               .batch(global_batch, drop_remainder=True)
               .prefetch(tf.data.AUTOTUNE))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    with strategy.scope():
        # Same seed everywhere, and the strategy also broadcasts initial values from the chief.
        model = tf.keras.Sequential([
            tf.keras.Input(shape=(NUM_FEATURES,)),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(1),
        ])
        model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=args.learning_rate),
                      loss="mse")
    init_sha = weights_sha256(model, np)

    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                        callbacks=callbacks(tf, log_dir, backup_dir, args.epochs), verbose=0)

    final_sha = weights_sha256(model, np)
    steps = int(model.optimizer.iterations.numpy())
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
        "task": task_name, "chief": is_chief, "workers": num_workers,
        "epochs": args.epochs, "start_epoch": start_epoch, "steps_per_epoch": args.steps_per_epoch,
        "steps": steps, "batch_size_per_worker": args.batch_size, "global_batch_size": global_batch,
        "loss": loss, "train_loss_per_epoch": history.history.get("loss", []),
        "weights_sha256": final_sha, "init_sha256": init_sha, "backup_dir": backup_dir,
        "model": os.path.join(model_dir, "model.keras") if is_chief else None,
    }
    with open(os.path.join(log_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    print(f"TFBOOT_RESULT task={task_name} loss={loss:.6f} weights_sha256={final_sha} "
          f"init_sha256={init_sha} workers={num_workers} epochs={args.epochs} steps={steps} "
          f"start_epoch={start_epoch}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report every failure as one line and a status
        if not isinstance(e, ConfigError):
            traceback.print_exc()
        reason = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"TFBOOT_FAILED task={TASK_NAME} reason={reason}", file=sys.stderr, flush=True)
        status = EXIT_USAGE if isinstance(e, ConfigError) else EXIT_ERROR
    sys.stdout.flush()
    sys.exit(status)
