"""Runs a TensorFlow example trainer as the tests need it: bounded in time, ending in a result line.

    python tests/tensorflow/run_example.py examples/train.py [the example's arguments]

The examples are what a user writes. This runs one unchanged (its main(), on its own arguments)
and adds around it what only the tests need:

* One line on stdout from every task whose main() returns, computed from what it trained (main()
  returns the model; build_model() is watched to see the initial one):
    TFBOOT_RESULT task=worker:0 init_sha256=<64 hex> init_loss=10.034508 workers=2 loss=0.068982 weights_sha256=<64 hex> steps=80 epochs=4 start_epoch=1
  loss, init_loss: mean squared error of the final and the initial weights over the example's
  whole synthetic_data(), computed locally, so equal on every worker when the weights are.
  weights_sha256, init_sha256: SHA-256 over dtype, shape and bytes of every variable in the
  model's order, after training and as build_model() returned it (the chief's, broadcast), so a
  test sees that the workers trained together and that the model trained; the values depend on
  the TensorFlow and Keras versions. workers: replicas in sync under MultiWorkerMirroredStrategy.
  steps: the optimizer's step count (restored with a backup), or what train_ps.py's ps counted.
  epochs, start_epoch: after model.fit, the epochs asked for and the 1-based first one this run
  trained (above 1 after a resume). An evaluator, whose main() returns None (train.py's and
  train_ps.py's do at once), prints `status=idle`; ps and worker servers never end by themselves
  and print nothing.
* A time limit, RUN_EXAMPLE_TIMEOUT seconds (default 600, 0 = none): a timer thread writes
  `TFBOOT_FAILED task=... reason=timeout ...` to stderr and exits 124. That thread needs the GIL,
  which TensorFlow can hold while it blocks (MultiWorkerMirroredStrategy waiting for a missing
  peer does), so a forked helper process kills the task with SIGKILL 5 s later if it is still
  alive (status 137). The helper ends as soon as the task does (its pipe closes): it is a second
  process with the same command line that never outlives its task.
* Any exception: the traceback, `TFBOOT_FAILED task=... reason=...` on stderr, and status 1. An
  example's own exit status (train_fit.py's 2 for a backup dir that is not shared) passes.
* SIGINT's default action, so that Ctrl-C ends a task blocked inside TensorFlow.
* On TensorFlow 2.16, AutoGraph leaves tf-keras' own code alone, as 2.17 and later do: without
  that, 2.16 converts tf-keras' layers at every trace and train_fit.py's first step takes 10-60 s
  instead of about one (a private module; where it is missing only the speed changes).
"""

import hashlib
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import traceback

EXIT_ERROR = 1
EXIT_TIMEOUT = 124
KILL_GRACE = 5.0


def task_name():
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    return f"{task.get('type', 'worker')}:{task.get('index', 0)}"


def start_watchdog(seconds, task):
    """Ends this process within about `seconds` (see the docstring). Before TensorFlow is
    imported: fork while there is one thread."""
    if seconds <= 0:
        return

    def expire():
        print(f"TFBOOT_FAILED task={task} reason=timeout after {seconds:g}s", file=sys.stderr, flush=True)
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
            ready, _, _ = select.select([read_end], [], [], seconds + KILL_GRACE)
            if not ready:
                os.write(2, (f"TFBOOT_FAILED task={task} reason=timeout after {seconds:g}s and still "
                             f"running {KILL_GRACE:g}s later: SIGKILL\n").encode())
                os.kill(parent, signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(read_end)


def load_example(path):
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leave_tf_keras_to_itself():
    try:
        from tensorflow.python.autograph.core import config as autograph_config
        rules = tuple(autograph_config.CONVERSION_RULES)
        if not any(rule.matches("tf_keras.src") for rule in rules):
            autograph_config.CONVERSION_RULES = rules + (autograph_config.DoNotConvert("tf_keras"),)
    except (ImportError, AttributeError):
        pass


def weights_sha256(model):
    import numpy as np
    digest = hashlib.sha256()
    for variable in getattr(model, "weights", None) or model.variables:
        value = np.ascontiguousarray(np.asarray(variable.numpy()))
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def data_loss(example, model):
    import numpy as np
    import tensorflow as tf
    x, y = example.synthetic_data()
    return f"{float(np.mean(np.square(np.asarray(model(tf.constant(x))) - y))):.6f}"


def run(path):
    example = load_example(path)
    import tensorflow as tf
    leave_tf_keras_to_itself()
    fields = {}
    build_model = example.build_model

    def watched_build_model(*args, **kwargs):
        model = build_model(*args, **kwargs)
        fields.update(init_sha256=weights_sha256(model), init_loss=data_loss(example, model))
        strategy = tf.distribute.get_strategy()
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            fields["workers"] = str(strategy.num_replicas_in_sync)
        return model

    example.build_model = watched_build_model
    model = example.main()
    if model is None:
        return "status=idle"
    fields.update(loss=data_loss(example, model), weights_sha256=weights_sha256(model))
    optimizer = getattr(model, "optimizer", None)
    steps = optimizer.iterations if optimizer is not None else getattr(model, "steps", None)
    if steps is not None:
        fields["steps"] = str(int(steps.numpy()))
    history = getattr(model, "history", None)  # what model.fit() did
    if history is not None and history.epoch:
        fields.update(epochs=str(history.params["epochs"]), start_epoch=str(history.epoch[0] + 1))
    return " ".join(f"{key}={value}" for key, value in fields.items())


def main():
    path, task = sys.argv[1], task_name()
    sys.argv = sys.argv[1:]  # the example parses its own arguments
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    start_watchdog(float(os.environ.get("RUN_EXAMPLE_TIMEOUT", "600")), task)
    try:
        result = run(path)  # apart from the print: a traceback shows this line, and no result
        print(f"TFBOOT_RESULT task={task} {result}", flush=True)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_ERROR)
    except BaseException as e:  # noqa: BLE001 - every failure as one line and a status
        traceback.print_exc()
        reason = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"TFBOOT_FAILED task={task} reason={reason}", file=sys.stderr, flush=True)
        status = EXIT_ERROR
    # Leave without waiting for TensorFlow's threads (train_ps.py's coordinator holds connections
    # to servers that never close them).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
