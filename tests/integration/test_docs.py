"""The docs a reader follows (README.md, docs/): scripts/check-docs passes on the real tree and
refuses a broken link, anchor or path, a long README, docs over their word budget, a missing
troubleshooting page and a long example; and the command-line
reference, the TFBOOT_* names and the exit codes the docs give are the ones `tfboot --help` gives."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO_DIR

CHECK = Path(REPO_DIR) / "scripts" / "check-docs"
DOCS = Path(REPO_DIR) / "docs"
DOCUMENTS = [Path(REPO_DIR) / "README.md", *sorted(DOCS.glob("*.md")), Path(REPO_DIR) / "examples" / "README.md"]

# --help: "  --name METAVAR   text", "  --init, --no-init   text", then "env TFBOOT_NAME[=1]; default: ...".
HELP_OPTION = re.compile(r"^  (--[a-z0-9-]+)(?:, (--[a-z0-9-]+))?( [A-Z]+)?  +\S.*\n +env (TFBOOT_[A-Z0-9_]+)\S*; default: (.*)$", re.M)
# docs/command-line.md: | `--name METAVAR` (or `--init` / `--no-init`) | `TFBOOT_NAME...` | meaning | default |
TABLE_ROW = re.compile(r"^\| `(--[a-z0-9-]+)( [A-Z]+)?`(?: / `(--[a-z0-9-]+)`)? \| `(TFBOOT_[A-Z0-9_]+)[^`]*` \| .* \| (.*) \|$", re.M)
# Variables tfboot sets for the command (and ignores when given): no option's twin, yet documented.
SET_FOR_THE_COMMAND = {"TFBOOT_LOG_DIR", "TFBOOT_RESTART_COUNT", "TFBOOT_POD_INDEX"}
MISSPELT_ON_PURPOSE = {"TFBOOT_CLUSTR", "TFBOOT_WAITT"}   # the docs' examples of "did you mean"


def check(repo):
    return subprocess.run([sys.executable, str(CHECK), str(repo)], capture_output=True, text=True, timeout=60)


def test_the_docs_pass():
    result = check(REPO_DIR)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"check-docs: \d+ links in \d+ documents lead somewhere; README.md has \d+ words, "
                        r"README.md and docs/ \d+\n",
                        result.stdout), result.stdout


@pytest.fixture
def small_repo(tmp_path):
    """A repository of three documents and one example, all of whose links lead somewhere."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples").mkdir()
    (tmp_path / "README.md").write_text("# t\n\nSee [the guide](docs/guide.md#the-start-a--b) and `examples/train.py`; "
                                        "[troubleshooting](docs/troubleshooting.md).\n")
    (tmp_path / "docs").joinpath("troubleshooting.md").write_text("# Troubleshooting\n")
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## The start: `a` & b\n\nBack [home](../README.md), [here](#guide).\n\n"
        "```sh\n[not a link](nowhere.md) `docs/missing.md`\n```\n")
    (tmp_path / "examples" / "README.md").write_text("# Examples\n\n[train](train.py)\n")
    (tmp_path / "examples" / "train.py").write_text("print('trained')\n")
    (tmp_path / "scripts" / "lib").mkdir(parents=True)
    shutil.copy(Path(REPO_DIR) / "LICENSE", tmp_path / "LICENSE")
    shutil.copy(Path(REPO_DIR) / "scripts" / "lib" / "release.py", tmp_path / "scripts" / "lib" / "release.py")
    assert check(tmp_path).returncode == 0, check(tmp_path).stderr
    return tmp_path


def test_the_licence_is_there_and_the_packages_name_it(small_repo):
    packing = small_repo / "scripts" / "lib" / "release.py"
    packing.write_text(packing.read_text().replace('LICENSE = "Apache-2.0"', 'LICENSE = "MIT"'))
    result = check(small_repo)
    assert (result.returncode, result.stderr) == (
        1, "scripts/lib/release.py: the wheel and the .deb do not name LICENSE's Apache-2.0\n")
    (small_repo / "LICENSE").unlink()
    assert check(small_repo).stderr.startswith(
        "LICENSE: No such file or directory; the project is under the Apache License 2.0, whose text belongs there\n")


@pytest.mark.parametrize(
    "file, text, error",
    [
        ("docs/guide.md", "[gone](gone.md)\n", "docs/guide.md:{line}: link gone.md: no such file"),
        ("docs/guide.md", "[anchor](../README.md#nothing)\n", "docs/guide.md:{line}: link ../README.md#nothing: no heading #nothing in README.md"),
        ("README.md", "[own](#the-start)\n", "README.md:{line}: link #the-start: no heading #the-start in README.md"),
        ("README.md", "[out](../../etc/passwd)\n", "README.md:{line}: link ../../etc/passwd leaves the repository"),
        ("examples/README.md", "see `examples/kubernetes/gone.yaml`\n",
         "examples/README.md:{line}: `examples/kubernetes/gone.yaml`: no such file or folder"),
    ],
)
def test_a_broken_reference_is_named(small_repo, file, text, error):
    path = small_repo / file
    line = len(path.read_text().splitlines()) + 1
    path.write_text(path.read_text() + text)
    result = check(small_repo)
    assert result.returncode == 1
    assert result.stderr == error.format(line=line) + "\n"
    assert result.stdout == ""


def test_a_long_readme_and_a_long_example_are_refused(small_repo):
    (small_repo / "README.md").write_text("# t\n\n" + "word " * 1998 + "[t](docs/troubleshooting.md)\n")
    (small_repo / "examples" / "train.py").write_text("pass\n" * 120)
    result = check(small_repo)
    assert result.returncode == 1
    assert result.stderr == (
        "README.md: 2001 words; the front door stays under 2000 (move reference to docs/)\n"
        "examples/train.py: 120 lines; an example trainer stays under 120 (test-only parts belong in tests/)\n")


def test_the_docs_stay_under_their_word_budget_with_a_troubleshooting_page(small_repo):
    (small_repo / "docs" / "long.md").write_text("# Long\n\n" + "word " * 15000 + "\n")
    result = check(small_repo)
    assert result.returncode == 1
    assert re.fullmatch(r"README.md and docs/: 150\d\d words; they stay under 15000 \(cut repetition, not facts\)\n",
                        result.stderr), result.stderr
    (small_repo / "docs" / "long.md").unlink()
    (small_repo / "docs" / "troubleshooting.md").unlink()
    result = check(small_repo)
    assert result.returncode == 1
    assert result.stderr.endswith("docs/troubleshooting.md: missing; it takes a user from a failure's log line to what to do\n")


def test_placeholders_and_web_addresses_are_not_paths(small_repo):
    guide = small_repo / "docs" / "guide.md"
    guide.write_text(guide.read_text() + "`docs/<topic>.md`, `examples/{name}.py`, `examples/*.yaml`, [web](https://example.org/x.md)\n")
    assert check(small_repo).returncode == 0


@pytest.fixture(scope="module")
def help_text(tfboot):
    result = subprocess.run([tfboot, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def first_word(text: str) -> str:
    return re.split(r"[\s,]+", text.replace("`", "").strip())[0]


def test_the_command_line_page_is_the_help(help_text):
    """Every option of --help is a row of docs/command-line.md with its twin, whether it takes a
    value, and its default; and no row names an option --help does not have."""
    from_help = {m[1]: (m[2], bool(m[3]), m[4], first_word(m[5])) for m in HELP_OPTION.finditer(help_text)}
    assert len(from_help) > 30, help_text
    page = (DOCS / "command-line.md").read_text()
    from_page = {m[1]: (m[3], bool(m[2]), m[4], first_word(m[5])) for m in TABLE_ROW.finditer(page)}
    assert from_page == from_help


def test_every_tfboot_name_in_the_docs_exists(help_text):
    """A TFBOOT_* name the docs give is an option's twin, a variable tfboot sets for the command,
    or a variable the project's scripts, tests, build or examples use."""
    twins = set(re.findall(r"\benv (TFBOOT_[A-Z0-9_]+)", help_text))
    used = ""
    for folder in ("scripts", "tests", "bench", "examples", "launcher"):
        for path in Path(REPO_DIR, folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".cpp", ".h", ".sh", ".yaml", ".txt", ".in"):
                used += path.read_text(errors="replace")
    used += Path(REPO_DIR, "CMakeLists.txt").read_text()
    for document in DOCUMENTS:
        for name in set(re.findall(r"\bTFBOOT_[A-Z0-9_]*[A-Z0-9]", document.read_text())):
            if name in twins or name in MISSPELT_ON_PURPOSE:
                continue
            if name in SET_FOR_THE_COMMAND:
                assert name in Path(REPO_DIR, "launcher").joinpath("cli", "options.cpp").read_text() or \
                    re.search(rf'"{name}"', used), f"{document.name}: {name}: tfboot no longer knows it"
                continue
            assert re.search(rf"\b{name}\b", used.replace(f"TFBOOT_{{", "")), \
                f"{document.relative_to(REPO_DIR)}: {name} is no option's twin and nothing in the project uses it"


def test_every_exit_code_of_the_help_is_explained(help_text):
    codes_in_help = re.findall(r"(\d+(?:\+N)?) [a-z]", help_text.split("Exit codes:", 1)[1])
    assert {"0", "2", "3", "5", "200", "128+N"} <= set(codes_in_help), help_text
    page = (DOCS / "supervision.md").read_text().split("## Exit codes", 1)[1]
    explained = set()
    for row in re.findall(r"^\| ([^|]+) \|", page, re.M):
        explained |= {code.strip() for code in row.split(",")}
    assert set(codes_in_help) <= explained, sorted(set(codes_in_help) - explained)
