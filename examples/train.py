#!/usr/bin/env python3
"""Multi-worker Keras training with a custom loop, started by tfboot.

Every chief and worker task of the job runs this same program. MultiWorkerMirroredStrategy gives
each worker its own batches and all-reduces the gradients, so every worker ends with the same
weights. The data is synthetic, from a fixed seed: nothing is downloaded.

What tfboot gives each task:
  TF_CONFIG          the cluster and this task; the strategy reads it itself
  TFBOOT_LOG_DIR     this task's own directory: TensorBoard summaries, the chief's saved model
  SIGTERM            when the job stops (a task failed, or the pod is deleted)

  tfboot local --cluster worker=2 -- python examples/train.py
"""

import argparse
import importlib.util
import os
import signal
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: errors only
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def synthetic_data(samples=4096, features=16):
    """y = x.w + 0.5*sin(x_0) + noise: the same arrays on every worker."""
    rng = np.random.RandomState(1234)
    x = rng.normal(size=(samples, features)).astype("float32")
    w = rng.normal(size=(features, 1)).astype("float32")
    y = x @ w + 0.5 * np.sin(x[:, :1]) + 0.05 * rng.normal(size=(samples, 1))
    return x, y.astype("float32")


def build_model():
    return keras.Sequential([keras.Input(shape=(16,)), keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)])


def main():
    parser = argparse.ArgumentParser(description="MultiWorkerMirroredStrategy, custom training loop")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    args = parser.parse_args()
    log_dir = os.environ.get("TFBOOT_LOG_DIR", "logs/local")

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type == "evaluator":
        return None  # the strategy has no use for an evaluator: it may be there, and ends
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    # The strategy's coordination service catches SIGTERM (to note a "preemption"); give SIGTERM
    # back its default action, so that tfboot or Kubernetes stopping the job ends this process.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    keras.utils.set_random_seed(1234)
    x, y = synthetic_data()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=1234).repeat()
    options = tf.data.Options()  # each worker takes its own batches of the one data set
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.batch(global_batch, drop_remainder=True).with_options(options)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    with strategy.scope():
        model = build_model()  # the chief's initial weights go to every worker
        optimizer = keras.optimizers.Adam(args.learning_rate)
        optimizer.build(model.trainable_variables)

    # A loop of our own: Keras 3's model.fit fails under this strategy (train_fit.py uses tf-keras).
    @tf.function
    def train_step(iterator):
        def step(features, labels):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(features, training=True) - labels), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))  # all-reduced
            return loss
        return strategy.reduce("SUM", strategy.run(step, args=next(iterator)), axis=None)

    writer = None  # newer TensorFlow no longer installs TensorBoard, which tf.summary needs
    if importlib.util.find_spec("tensorboard"):
        writer = tf.summary.create_file_writer(os.path.join(log_dir, "tensorboard"))
    else:
        print("TensorBoard is not installed: no summaries (pip install tensorboard for them)")
    for epoch in range(args.epochs):
        loss = sum(float(train_step(iterator)) for _ in range(args.steps_per_epoch)) / args.steps_per_epoch
        print(f"epoch {epoch + 1}/{args.epochs} loss={loss:.6f}", flush=True)
        if writer:
            with writer.as_default():
                tf.summary.scalar("loss", loss, step=epoch)
            writer.flush()

    # As TensorFlow's multi-worker guide says: every worker saves (saving may need the others),
    # and only the chief keeps what it saved.
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = os.path.join(log_dir, "model") if strategy.extended.should_checkpoint else scratch
        os.makedirs(model_dir, exist_ok=True)
        model.save(os.path.join(model_dir, "model.keras"))
    loss = float(np.mean(np.square(np.asarray(model(x)) - y)))
    print(f"final loss over the whole data set: {loss:.6f} (the same on every worker)", flush=True)
    return model


if __name__ == "__main__":
    main()
