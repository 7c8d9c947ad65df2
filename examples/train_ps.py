#!/usr/bin/env python3
"""ParameterServerStrategy training, started by tfboot.

One program for every role of the job (e.g. `tfboot local --cluster chief=1,ps=1,worker=2`):
  chief       the coordinator: builds the model, whose variables live on the ps tasks, schedules
              --steps training steps on the workers, and exits 0 once they are done
  ps, worker  serve (server.join() never returns) until tfboot ends them: under tfboot's job
              supervision the chief's exit 0 ends the job, and every other task's tfboot stops
              its command and exits 0 (run alone, they serve until someone stops them)
  evaluator   nothing to evaluate without checkpoints on a shared volume: ends at once

What tfboot gives each task:
  TF_CONFIG   the cluster and this task, read by TensorFlow's TFConfigClusterResolver
  SIGTERM     when the job is done or stops; its default action ends a server

  tfboot local --cluster chief=1,ps=1,worker=2 -- python examples/train_ps.py
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: errors only
# As TensorFlow's parameter server guide recommends: a call to a task that is gone fails at once
# (the coordinator then runs the step elsewhere) instead of waiting for it.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def synthetic_data(samples=2048, features=16):
    """y = x.w + 0.5*sin(x_0) + noise, with Var(x.w) about 1: the same arrays on every task."""
    rng = np.random.RandomState(1234)
    x = rng.normal(size=(samples, features)).astype("float32")
    w = (rng.normal(size=(features, 1)) / features ** 0.5).astype("float32")
    y = x @ w + 0.5 * np.sin(x[:, :1]) + 0.05 * rng.normal(size=(samples, 1))
    return x, y.astype("float32")


class MLP(tf.Module):
    def __init__(self, features=16, hidden=32):
        super().__init__()
        scaled = lambda shape, seed: tf.random.stateless_normal(shape, [1234, seed]) * (2 / shape[0]) ** 0.5  # noqa: E731
        self.w1, self.b1 = tf.Variable(scaled([features, hidden], 1)), tf.Variable(tf.zeros([hidden]))
        self.w2, self.b2 = tf.Variable(scaled([hidden, 1], 2)), tf.Variable(tf.zeros([1]))
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False)  # steps applied, counted on a ps

    def __call__(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


def build_model():
    return MLP()


def main():
    parser = argparse.ArgumentParser(description="ParameterServerStrategy: chief, ps and workers")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32, help="of one step on one worker")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    args = parser.parse_args()

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type == "evaluator":
        return None
    if resolver.task_type in ("ps", "worker"):
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                      task_index=resolver.task_id, protocol="grpc", start=True)
        print(f"serving {server.target} until tfboot ends the job", flush=True)
        server.join()  # never returns

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    x, y = synthetic_data()
    with strategy.scope():
        model = build_model()

    def dataset_fn(context):  # each worker its own shard
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(context.num_input_pipelines,
                                                                   context.input_pipeline_id)
        batch = context.get_per_replica_batch_size(args.batch_size)
        return dataset.shuffle(len(x), seed=1234).repeat().batch(batch).prefetch(2)

    @tf.function
    def per_worker_dataset():
        return strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def train_step(iterator):
        def step(features, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(features) - labels))
            for variable, gradient in zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables)):
                variable.assign_sub(args.learning_rate * gradient)
            model.steps.assign_add(1)
            return loss
        return strategy.reduce("MEAN", strategy.run(step, args=next(iterator)), axis=None)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))
    losses = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(args.steps)]
    coordinator.join()
    print(f"{int(model.steps.numpy())} steps on {len(resolver.cluster_spec().as_dict()['worker'])} workers, "
          f"loss of the first {losses[0].fetch():.4f}, of the last {losses[-1].fetch():.4f}", flush=True)
    return model


if __name__ == "__main__":
    main()
    # Leave without waiting for TensorFlow's threads: the coordinator's still hold connections to
    # the servers, which never close them.
    sys.stdout.flush()
    os._exit(0)
