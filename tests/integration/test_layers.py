"""scripts/check-layers (docs/building-and-testing.md, "Where the code lives"): the real tree passes; an include that runs
up a layer, sideways, around the table or with the wrong spelling fails, naming file and line."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO_DIR

CHECK = Path(REPO_DIR) / "scripts" / "check-layers"
LAUNCHER = Path(REPO_DIR) / "launcher"


def check(launcher):
    return subprocess.run([sys.executable, str(CHECK), str(launcher)], capture_output=True, text=True, timeout=60)


def test_the_tree_passes():
    result = check(LAUNCHER)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "check-layers: every include runs down the layers\n"


@pytest.mark.parametrize(
    "file, include, error",
    [
        ("base/error.h", '#include "plan/plan.h"', 'base/error.h:{line}: #include "plan/plan.h": layer base may not include layer plan'),
        ("plan/platforms/platforms.h", '#include "plan/plan.h"',
         'plan/platforms/platforms.h:{line}: #include "plan/plan.h": layer plan/platforms may not include layer plan'),
        ("dns/names.h", '#include "cli/options.h"', 'dns/names.h:{line}: #include "cli/options.h": layer dns may not include layer cli'),
        ("base/error.h", "#include <plan/plan.h>",
         "base/error.h:{line}: #include <plan/plan.h>: our own headers are included with quotes"),
        ("base/error.h", '#include "base/../plan/plan.h"',
         'base/error.h:{line}: #include "base/../plan/plan.h" is not written from the launcher root'),
        ("dns/names.h", '#include "names.h"', 'dns/names.h:{line}: #include "names.h" is not written from the launcher root'),
    ],
)
def test_an_include_against_the_layers_fails(tmp_path, file, include, error):
    launcher = tmp_path / "launcher"
    shutil.copytree(LAUNCHER, launcher)
    target = launcher / file
    text = target.read_text()
    target.write_text(text + include + "\n")
    result = check(launcher)
    assert result.returncode == 1
    assert result.stderr == error.format(line=text.count("\n") + 1) + "\n"


def test_a_file_outside_every_layer_fails(tmp_path):
    launcher = tmp_path / "launcher"
    shutil.copytree(LAUNCHER, launcher)
    (launcher / "extra.hpp").write_text("// nothing\n")
    result = check(launcher)
    assert result.returncode == 1
    assert result.stderr == "extra.hpp: in no layer of scripts/check-layers\n"
