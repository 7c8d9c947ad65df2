"""Where the checkout is, for tests that read its files (examples, docker/, the venvs)."""

import os

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
