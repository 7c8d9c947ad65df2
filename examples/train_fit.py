#!/usr/bin/env python3
"""Keras model.fit on several workers, resumable, started by tfboot.

model.fit under MultiWorkerMirroredStrategy, with BackupAndRestore saving the training state after
every epoch: a job stopped and started again (tfboot --max-restarts, new pods) resumes after the
last epoch saved. Every worker restores from the chief's backup, so --backup-dir must be one
directory all tasks see (a shared volume).

What tfboot gives each task:
  TF_CONFIG             the cluster and this task; the strategy reads it itself
  TFBOOT_LOG_DIR        this task's own directory: TensorBoard summaries, the chief's saved model
  TFBOOT_RESTART_COUNT  how many times tfboot has restarted the job in place
  SIGTERM               when the job stops (a task failed, or the pod is deleted)

Needs tf-keras of TensorFlow's major.minor (pip install --no-deps tf-keras~=2.16.0): Keras 3's
model.fit fails under MultiWorkerMirroredStrategy.

  tfboot local --cluster worker=2 -- python examples/train_fit.py
"""

import argparse
import importlib.util
import os
import signal
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: errors only
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras is tf-keras
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def synthetic_data(samples=4096, features=16):
    """y = x.w + 0.5*sin(x_0) + noise: the same arrays on every worker."""
    rng = np.random.RandomState(1234)
    x = rng.normal(size=(samples, features)).astype("float32")
    w = rng.normal(size=(features, 1)).astype("float32")
    y = x @ w + 0.5 * np.sin(x[:, :1]) + 0.05 * rng.normal(size=(samples, 1))
    return x, y.astype("float32")


def build_model(learning_rate):
    model = tf.keras.Sequential([tf.keras.Input(shape=(16,)), tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss="mse")
    return model


def epochs_backed_up(strategy, backup_dir):
    """The epochs in the chief's backup, which every worker restores from. A worker that finds
    another (the directory is not shared) would train out of step with the others: stop."""
    latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    done = 0 if latest is None else 1 + int(tf.train.load_variable(latest, "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"))

    @tf.function
    def gather():
        return strategy.gather(strategy.run(tf.constant, args=([done],)), axis=0)

    found = gather().numpy().tolist()
    if len(set(found)) > 1:
        seen = ", ".join(f"replica {i}: {f'epoch {e}' if e else 'none'}" for i, e in enumerate(found))
        print(f"the workers found different backups ({seen}): --backup-dir must be one directory shared "
              f"by every task", file=sys.stderr)
        sys.exit(2)
    return done


def main():
    parser = argparse.ArgumentParser(description="MultiWorkerMirroredStrategy, model.fit, resumable")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--backup-dir", help="shared by every task (default: `backup` beside the log dir)")
    args = parser.parse_args()
    log_dir = os.environ.get("TFBOOT_LOG_DIR", "logs/local")
    backup_dir = args.backup_dir or os.path.join(os.path.dirname(os.path.abspath(log_dir)), "backup")

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    # The strategy's coordination service catches SIGTERM (to note a "preemption"); give SIGTERM
    # back its default action, so that tfboot or Kubernetes stopping the job ends this process.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    done = epochs_backed_up(strategy, backup_dir)
    if done:
        print(f"resuming at epoch {done + 1}/{args.epochs} from the backup in {backup_dir} "
              f"(restart {os.environ.get('TFBOOT_RESTART_COUNT', '0')})", flush=True)

    tf.keras.utils.set_random_seed(1234)
    dataset = tf.data.Dataset.from_tensor_slices(synthetic_data()).shuffle(4096, seed=1234).repeat()
    options = tf.data.Options()  # each worker takes its own batches of the one data set
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.batch(args.batch_size * strategy.num_replicas_in_sync, drop_remainder=True)
    with strategy.scope():
        model = build_model(args.learning_rate)  # the chief's initial weights go to every worker

    callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir),  # deletes its backup when fit() is done
                 tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: print(
                     f"epoch {epoch + 1}/{args.epochs} loss={logs['loss']:.6f}, backed up", flush=True))]
    if importlib.util.find_spec("tensorboard"):  # newer TensorFlow no longer installs it
        callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(log_dir, "tensorboard")))
    else:
        print("TensorBoard is not installed: no summaries (pip install tensorboard for them)")
    model.fit(dataset.with_options(options), epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
              callbacks=callbacks, verbose=0)

    # As TensorFlow's multi-worker guide says: every worker saves (saving may need the others),
    # and only the chief keeps what it saved.
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = os.path.join(log_dir, "model") if strategy.extended.should_checkpoint else scratch
        os.makedirs(model_dir, exist_ok=True)
        model.save(os.path.join(model_dir, "model.keras"))
    return model


if __name__ == "__main__":
    main()
