"""Running the example trainers as jobs, and reading what they print.

* ``TRAIN``, ``TRAIN_FIT``, ``TRAIN_PS``: the argv (after the interpreter) that runs an example
  through run_example.py, which bounds it in time and ends it with a TFBOOT_RESULT line.
* ``results(text)``: {(type, index): {key: value}} from those TFBOOT_RESULT lines.
(``PodJob``, tfboot as PID 1 of namespace pods, is tests/harness/pod_job.py.)
"""

import os
import re

from paths import REPO_DIR

RUN_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_example.py")
TRAIN = [RUN_EXAMPLE, os.path.join(REPO_DIR, "examples", "train.py")]
TRAIN_FIT = [RUN_EXAMPLE, os.path.join(REPO_DIR, "examples", "train_fit.py")]
TRAIN_PS = [RUN_EXAMPLE, os.path.join(REPO_DIR, "examples", "train_ps.py")]
RESULT = re.compile(r"TFBOOT_RESULT task=(\w+):(\d+) (.*)")


def results(text):
    found = {}
    for line in text.splitlines():
        match = RESULT.search(line)
        if match:
            fields = dict(item.split("=", 1) for item in match.group(3).split())
            found[(match.group(1), int(match.group(2)))] = fields
    return found
