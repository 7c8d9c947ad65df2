"""The release's artifacts, made from one built tfboot: the wheel, the Debian package, the software
bill of materials and SHA256SUMS (scripts/release calls it; README "Using tfboot in your job").

    release.py --binary BUILD/launcher/tfboot --build-dir BUILD --out DIR

Each file depends only on the binary, the checkout (README.md, the commit's time) and the build's
toolchain and libraries: SOURCE_DATE_EPOCH, else the time of the commit the binary names, stamps
every archive member, so that two releases of one commit are the same byte for byte.
Exit 1 when a step fails, 2 on bad arguments; either way one line on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMMARY = "The entrypoint of distributed TensorFlow, PyTorch and JAX containers"
MAINTAINER = "tfboot developers <tfboot@localhost>"
# A static glibc binary needs no C library at run time, only a kernel at least as new as its ELF
# ABI note says (3.2 for Debian 12's glibc). manylinux_2_17's platform, CentOS 7, runs Linux 3.10;
# the older manylinux tags' platforms (Linux 2.6) would stop it with "FATAL: kernel too old".
MANYLINUX = "manylinux_2_17"
MANYLINUX_KERNEL = (3, 10)
# ELF e_machine -> (wheel platform arch, Debian arch)
ARCHITECTURES = {62: ("x86_64", "amd64"), 183: ("aarch64", "arm64")}


class ReleaseError(RuntimeError):
    pass


@dataclass(frozen=True)
class Binary:
    path: str
    version: str       # 0.1.0, from project(tfboot VERSION ...) through --version
    commit: str        # 3f2a9c1, 3f2a9c1-dirty or unknown
    wheel_arch: str
    deb_arch: str


def _run(argv: list[str], **kwargs) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ReleaseError(f"{argv[0]}: {e}") from e
    if done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ReleaseError(f"{' '.join(argv[:3])} failed (exit {done.returncode}): {detail[-1] if detail else ''}")
    return done.stdout


def inspect_binary(path: str) -> Binary:
    """What the packages say of the binary, asked of the binary itself; refuses one that is not static."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError as e:
        raise ReleaseError(f"--binary {path}: {e.strerror}") from e
    if header[:4] != b"\x7fELF":
        raise ReleaseError(f"--binary {path}: not an ELF executable")
    machine = int.from_bytes(header[18:20], "little")
    if machine not in ARCHITECTURES:
        raise ReleaseError(f"--binary {path}: ELF machine {machine} is neither x86-64 nor aarch64")
    headers = _run(["readelf", "--program-headers", "--wide", path])
    if re.search(r"^\s*(INTERP|DYNAMIC)\s", headers, re.MULTILINE):
        raise ReleaseError(f"--binary {path}: dynamically linked; a release ships the static build")
    note = re.search(r"OS: Linux, ABI: (\d+)\.(\d+)", _run(["readelf", "--notes", path]))
    if not note or (int(note[1]), int(note[2])) > MANYLINUX_KERNEL:
        raise ReleaseError(f"--binary {path}: needs a newer Linux than {MANYLINUX}'s 3.10 "
                           f"({note[0] if note else 'no ABI note'})")
    answer = _run([path, "--version"], env={}).strip()
    match = re.fullmatch(r"tfboot (\d+\.\d+\.\d+) \(([0-9a-z-]+)\)", answer)
    if not match:
        raise ReleaseError(f"--binary {path}: --version said {answer!r}, not 'tfboot X.Y.Z (commit)'")
    wheel_arch, deb_arch = ARCHITECTURES[machine]
    return Binary(path, match[1], match[2], wheel_arch, deb_arch)


def source_date_epoch(commit: str) -> int:
    """SOURCE_DATE_EPOCH when set, else the committer time of the commit the binary names."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        value = os.environ["SOURCE_DATE_EPOCH"]
        if not value.isdigit():
            raise ReleaseError(f"SOURCE_DATE_EPOCH={value!r}: not a number of seconds")
        return int(value)
    hash_ = commit.removesuffix("-dirty")
    if not re.fullmatch(r"[0-9a-f]{7}", hash_):
        raise ReleaseError(f"the binary names no commit ({commit}): set SOURCE_DATE_EPOCH")
    return int(_run(["git", "-C", REPO_DIR, "log", "-1", "--format=%ct", hash_]).strip())


def _stage_file(path: str, data: bytes | None = None, *, source: str | None = None, mode: int = 0o644) -> None:
    """A file with fixed contents and mode: the archives record the mode, so no umask decides it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if source:
        shutil.copyfile(source, path)
    else:
        with open(path, "wb") as f:
            f.write(data or b"")
    os.chmod(path, mode)


def _readme() -> bytes:
    with open(os.path.join(REPO_DIR, "README.md"), "rb") as f:
        return f.read()


def _documentation() -> dict[str, bytes]:
    """README.md and the docs/ pages it links to, by their paths in the checkout."""
    pages = {"README.md": _readme()}
    for name in sorted(os.listdir(os.path.join(REPO_DIR, "docs"))):
        if name.endswith(".md"):
            with open(os.path.join(REPO_DIR, "docs", name), "rb") as f:
                pages[f"docs/{name}"] = f.read()
    return pages


def make_wheel(binary: Binary, out_dir: str, epoch: int) -> str:
    """tfboot-<version>-py3-none-manylinux_2_17_<arch>.whl: the binary itself as the wheel's
    script, so that pip puts it on PATH as it is and it stays PID 1 (no Python wrapper runs)."""
    name = f"tfboot-{binary.version}"
    tag = f"py3-none-{MANYLINUX}_{binary.wheel_arch}"
    with tempfile.TemporaryDirectory(prefix="tfboot-wheel.") as stage:
        _stage_file(f"{stage}/{name}.data/scripts/tfboot", source=binary.path, mode=0o755)
        metadata = (f"Metadata-Version: 2.1\nName: tfboot\nVersion: {binary.version}\nSummary: {SUMMARY}\n"
                    "Description-Content-Type: text/markdown\n\n").encode() + _readme()
        _stage_file(f"{stage}/{name}.dist-info/METADATA", metadata)
        wheel = (f"Wheel-Version: 1.0\nGenerator: tfboot scripts/release\nRoot-Is-Purelib: false\n"
                 f"Tag: {tag}\n").encode()
        _stage_file(f"{stage}/{name}.dist-info/WHEEL", wheel)
        # `wheel pack` writes RECORD, sorts the members and dates them SOURCE_DATE_EPOCH.
        _run([sys.executable, "-m", "wheel", "pack", stage, "--dest-dir", out_dir],
             env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    path = os.path.join(out_dir, f"{name}-{tag}.whl")
    if not os.path.isfile(path):
        raise ReleaseError(f"wheel pack wrote no {os.path.basename(path)}")
    return path


def make_deb(binary: Binary, out_dir: str, epoch: int) -> str:
    """tfboot_<version>_<arch>.deb by dpkg-deb: /usr/bin/tfboot, and README and docs/ as its
    documentation."""
    path = os.path.join(out_dir, f"tfboot_{binary.version}_{binary.deb_arch}.deb")
    with tempfile.TemporaryDirectory(prefix="tfboot-deb.") as stage:
        _stage_file(f"{stage}/usr/bin/tfboot", source=binary.path, mode=0o755)
        # Debian compresses documentation; -n's equivalent (mtime 0, no name) keeps it reproducible.
        for page, text in _documentation().items():
            _stage_file(f"{stage}/usr/share/doc/tfboot/{page}.gz", gzip.compress(text, 9, mtime=0))
        installed_kib = sum(-(-os.path.getsize(os.path.join(d, f)) // 1024)
                            for d, _, files in os.walk(stage) for f in files)
        control = (f"Package: tfboot\nVersion: {binary.version}\nArchitecture: {binary.deb_arch}\n"
                   f"Maintainer: {MAINTAINER}\nInstalled-Size: {installed_kib}\nSection: admin\n"
                   f"Priority: optional\nDescription: {SUMMARY}\n"
                   " tfboot becomes a training image's ENTRYPOINT: it works out which task its container\n"
                   " is and where its peers are, waits until their names resolve, writes TF_CONFIG (or\n"
                   " torchrun's and JAX's variables) and runs the training command as PID 1.\n"
                   " A static binary: it depends on no other package.\n").encode()
        _stage_file(f"{stage}/DEBIAN/control", control)
        os.chmod(stage, 0o755)   # the package's "./", made 0700 by mkdtemp
        for directory, dirs, files in os.walk(stage):
            for entry in dirs:
                os.chmod(os.path.join(directory, entry), 0o755)
            for entry in [*dirs, *files, "."]:
                os.utime(os.path.join(directory, entry), (epoch, epoch))
        _run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", stage, path],
             env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    return path


# What the static binary is made of: (name, licence, files the build took it from).
# The files are named as the build found them: the libraries of CMakeCache.txt, the compiler's own
# archives, the headers the header-only libraries are.
COMPONENTS = [
    ("glibc", "LGPL-2.1-or-later", ["libc.a"]),
    ("libstdc++", "GPL-3.0-or-later WITH GCC-exception-3.1", ["libstdc++.a"]),
    ("libgcc", "GPL-3.0-or-later WITH GCC-exception-3.1", ["libgcc.a", "libgcc_eh.a"]),
    ("c-ares", "MIT", ["CARES_STATIC_LIBRARY"]),
    ("libsodium", "ISC", ["SODIUM_STATIC_LIBRARY"]),
    ("fmt", "MIT", ["fmt/core.h"]),
    ("nlohmann-json", "MIT", ["nlohmann/json.hpp"]),
]
# The headers whose version macros _versions reads (<cstddef> for libstdc++'s).
PROBE = "".join(f"#include <{header}>\n" for header in (
    "features.h", "cstddef", "ares_version.h", "sodium/version.h", "fmt/core.h", "nlohmann/json.hpp"))


def _cmake_cache(build_dir: str) -> dict[str, str]:
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ReleaseError(f"--build-dir {build_dir}: no CMakeCache.txt ({e.strerror})") from e
    cache = {}
    for line in lines:
        match = re.match(r"([A-Za-z_0-9]+):[A-Z]+=(.*)", line)
        if match:
            cache[match[1]] = match[2]
    return cache


def _versions(macros: dict[str, str]) -> dict[str, str]:
    """Each component's version, from the headers the build compiled against."""
    def number(name: str) -> int:
        return int(macros[name])
    gcc = f"{number('__GNUC__')}.{number('__GNUC_MINOR__')}.{number('__GNUC_PATCHLEVEL__')}"
    # libstdc++ and libgcc are GCC's: their version is its version when GCC compiled (clang says
    # only the libstdc++ release).
    runtime = gcc if number("_GLIBCXX_RELEASE") == number("__GNUC__") else macros["_GLIBCXX_RELEASE"]
    fmt = number("FMT_VERSION")
    return {
        "glibc": f"{number('__GLIBC__')}.{number('__GLIBC_MINOR__')}",
        "libstdc++": runtime,
        "libgcc": runtime,
        "c-ares": macros["ARES_VERSION_STR"].strip('"'),
        "libsodium": macros["SODIUM_VERSION_STRING"].strip('"'),
        "fmt": f"{fmt // 10000}.{fmt // 100 % 100}.{fmt % 100}",
        "nlohmann-json": ".".join(str(number(f"NLOHMANN_JSON_VERSION_{p}")) for p in ("MAJOR", "MINOR", "PATCH")),
    }


def _debian_package(path: str) -> str | None:
    """"<package> <version>" of the Debian package that installed path (None: no package did)."""
    found = subprocess.run(["dpkg-query", "--search", path], capture_output=True, text=True)
    if found.returncode != 0:
        return None
    package = found.stdout.splitlines()[0].partition(": ")[0]   # libc6-dev:amd64: /usr/lib/.../libc.a
    return _run(["dpkg-query", "--show", "--showformat=${Package} ${Version}", package]).strip()


def make_sbom(binary: Binary, build_dir: str, out_dir: str, epoch: int) -> str:
    """tfboot-<version>.cdx.json, CycloneDX 1.5: what is linked into the binary, each part's
    version from the build's headers, the file it came from and the Debian package that holds it."""
    cache = _cmake_cache(build_dir)
    if cache.get("TFBOOT_STATIC") != "ON":
        raise ReleaseError(f"--build-dir {build_dir}: not a static build (TFBOOT_STATIC={cache.get('TFBOOT_STATIC')})")
    compiler = cache["CMAKE_CXX_COMPILER"]
    includes = sorted({cache[k] for k in ("CARES_INCLUDE_DIR", "SODIUM_INCLUDE_DIR", "FMT_INCLUDE_DIR") if k in cache})
    flags = ["-std=c++23", *(f"-I{d}" for d in includes), "-x", "c++", "-"]
    macros = {}
    for line in _run([compiler, "-E", "-dM", *flags], input=PROBE).splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == "#define":
            macros[parts[1]] = parts[2]
    headers = _run([compiler, "-M", *flags], input=PROBE).replace("\\\n", " ").split()
    versions = _versions(macros)

    def locate(item: str) -> str:
        if item in cache:
            return cache[item]
        if item.endswith(".a"):
            return os.path.normpath(_run([compiler, "-print-file-name=" + item]).strip())
        found = [header for header in headers if header.endswith("/" + item)]
        if not found:
            raise ReleaseError(f"{compiler} found no {item}")
        return found[0]

    components = []
    for name, license_, items in COMPONENTS:
        files = [locate(item) for item in items]
        for path in files:
            if not os.path.isfile(path):
                raise ReleaseError(f"{name}: {path} is not there")
        properties = [{"name": "tfboot:linked-from", "value": path} for path in files]
        component = {"type": "library", "bom-ref": name, "name": name, "version": versions[name],
                     "licenses": [{"expression": license_}]}
        package = _debian_package(files[0])
        if package:
            properties.append({"name": "tfboot:debian-package", "value": package})
            package_name, package_version = package.split(" ", 1)
            component["purl"] = (f"pkg:deb/debian/{package_name}@{package_version.replace('+', '%2B')}"
                                 f"?arch={binary.deb_arch}")
        component["properties"] = properties
        components.append(component)
    with open(binary.path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    compiler_version = macros["__VERSION__"].strip('"')
    bom = {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "metadata": {
            "timestamp": datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "component": {"type": "application", "bom-ref": "tfboot", "name": "tfboot", "version": binary.version,
                          "hashes": [{"alg": "SHA-256", "content": digest}],
                          "properties": [{"name": "tfboot:commit", "value": binary.commit},
                                         {"name": "tfboot:compiler", "value": f"{compiler} {compiler_version}"}]},
        },
        "components": components,
        "dependencies": [{"ref": "tfboot", "dependsOn": [c["bom-ref"] for c in components]}],
    }
    path = os.path.join(out_dir, f"tfboot-{binary.version}.cdx.json")
    with open(path, "w") as f:
        json.dump(bom, f, indent=2)
        f.write("\n")
    return path


def write_sums(out_dir: str) -> str:
    """SHA256SUMS as sha256sum writes it, for `sha256sum -c SHA256SUMS` in the folder."""
    lines = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}\n")
    path = os.path.join(out_dir, "SHA256SUMS")
    with open(path, "w") as f:
        f.writelines(lines)
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the static tfboot to release")
    parser.add_argument("--build-dir", required=True, help="the CMake build directory that made it")
    parser.add_argument("--out", required=True, help="an empty directory for the artifacts")
    args = parser.parse_args(argv)
    try:
        if not os.path.isdir(args.out) or os.listdir(args.out):
            raise ReleaseError(f"--out {args.out}: not an empty directory")
        binary = inspect_binary(args.binary)
        epoch = source_date_epoch(binary.commit)
        _stage_file(os.path.join(args.out, f"tfboot-{binary.version}-linux-{binary.wheel_arch}"),
                    source=binary.path, mode=0o755)
        make_wheel(binary, args.out, epoch)
        make_deb(binary, args.out, epoch)
        make_sbom(binary, args.build_dir, args.out, epoch)
        write_sums(args.out)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
