"""The release's artifacts, made from the built tfboot binaries: each one's wheel and Debian
package, the software bill of materials and SHA256SUMS (scripts/release calls it; README "Using
tfboot in your job").

    release.py --binary BUILD/launcher/tfboot --build-dir BUILD [--binary B2 --build-dir D2] --out DIR
    release.py --may-replace DIR     exit 0 when DIR may be replaced by a release, else 2

Each --binary (x86-64 or aarch64, of one commit) gets its wheel and .deb; one SBOM lists them all.
A binary for another processor than this machine's runs through qemu-user (qemu-aarch64-static).

Each file depends only on the binary, the checkout (README.md, the commit's time) and the build's
toolchain and libraries: SOURCE_DATE_EPOCH, else the time of the commit the binary names, stamps
every archive member, so that two releases of one commit are the same byte for byte.
Exit 1 when a step fails, 2 on bad arguments; either way one line on stderr.

A folder that is there is replaced only when it is empty or an earlier release: nothing in it but
SHA256SUMS and the files it lists, each one a name a release gives its artifacts and each with the
sum listed. Anything else there (a user's SHA256SUMS.asc, another product's download beside its own
SHA256SUMS, a changed file) was not written by a release, and the folder is left as it is.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMMARY = "The entrypoint of distributed TensorFlow, PyTorch and JAX containers"
# A placeholder address in the reserved .invalid domain: the project has no mail of its own.
MAINTAINER = "tfboot developers <tfboot@users.noreply.invalid>"
# tfboot's own licence, the text of LICENSE in the checkout (SPDX identifier).
LICENSE = "Apache-2.0"
# A static glibc binary needs no C library at run time, only a kernel at least as new as its ELF
# ABI note says (3.2 for Debian 12's glibc). manylinux_2_17's platform, CentOS 7, runs Linux 3.10;
# the older manylinux tags' platforms (Linux 2.6) would stop it with "FATAL: kernel too old".
MANYLINUX = "manylinux_2_17"
MANYLINUX_KERNEL = (3, 10)
# ELF e_machine -> (wheel platform arch, Debian arch)
ARCHITECTURES = {62: ("x86_64", "amd64"), 183: ("aarch64", "arm64")}
# The macro a compiler for that wheel arch defines: a build directory's compiler must make the binary's.
ARCH_MACROS = {"x86_64": "__x86_64__", "aarch64": "__aarch64__"}


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
    wheel_arch, deb_arch = ARCHITECTURES[machine]
    # No binfmt registration needed: the emulator is named, not looked up by the kernel.
    emulator = [] if wheel_arch == platform.machine() else [f"qemu-{wheel_arch}-static"]
    answer = _run([*emulator, path, "--version"], env={}).strip()
    match = re.fullmatch(r"tfboot (\d+\.\d+\.\d+) \(([0-9a-z-]+)\)", answer)
    if not match:
        raise ReleaseError(f"--binary {path}: --version said {answer!r}, not 'tfboot X.Y.Z (commit)'")
    return Binary(path, match[1], match[2], wheel_arch, deb_arch)


def _binary_name(binary: Binary) -> str:
    return f"tfboot-{binary.version}-linux-{binary.wheel_arch}"


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


def _license_text() -> bytes:
    with open(os.path.join(REPO_DIR, "LICENSE"), "rb") as f:
        text = f.read()
    if not text.lstrip().startswith(b"Apache License\n") or b"Version 2.0, January 2004" not in text:
        raise ReleaseError(f"LICENSE is not the {LICENSE} text that the packages name")
    return text


def _deb_copyright() -> bytes:
    """/usr/share/doc/tfboot/copyright in Debian's machine-readable format (copyright-format 1.0)."""
    return ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
            "Upstream-Name: tfboot\n"
            f"Upstream-Contact: {MAINTAINER}\n"
            "Comment: /usr/bin/tfboot is statically linked. It carries glibc (LGPL-2.1-or-later),\n"
            " libstdc++ and libgcc (GPL-3.0-or-later WITH GCC-exception-3.1), c-ares (MIT),\n"
            " libsodium (ISC), fmt (MIT) and nlohmann/json (MIT), in the versions the release's\n"
            " SBOM names. Their notices and licences are in\n"
            " /usr/share/doc/tfboot/THIRD-PARTY-NOTICES.gz; what a user must do to comply (glibc's\n"
            " relinking) is in /usr/share/doc/tfboot/docs/releasing.md.gz.\n"
            "\n"
            "Files: *\n"
            "Copyright: tfboot developers\n"
            f"License: {LICENSE}\n"
            "\n"
            f"License: {LICENSE}\n"
            " Licensed under the Apache License, Version 2.0 (the \"License\"); you may not use\n"
            " this file except in compliance with the License. You may obtain a copy of the\n"
            " License at http://www.apache.org/licenses/LICENSE-2.0\n"
            " .\n"
            " Unless required by applicable law or agreed to in writing, software distributed\n"
            " under the License is distributed on an \"AS IS\" BASIS, WITHOUT WARRANTIES OR\n"
            " CONDITIONS OF ANY KIND, either express or implied. See the License for the\n"
            " specific language governing permissions and limitations under the License.\n"
            " .\n"
            " On Debian systems, the complete text of the Apache License 2.0 can be found in\n"
            " /usr/share/common-licenses/Apache-2.0.\n").encode()


def _documentation() -> dict[str, bytes]:
    """README.md and the docs/ pages it links to, by their paths in the checkout."""
    pages = {"README.md": _readme()}
    for name in sorted(os.listdir(os.path.join(REPO_DIR, "docs"))):
        if name.endswith(".md"):
            with open(os.path.join(REPO_DIR, "docs", name), "rb") as f:
                pages[f"docs/{name}"] = f.read()
    return pages


def make_wheel(binary: Binary, out_dir: str, epoch: int, notices: bytes) -> str:
    """tfboot-<version>-py3-none-manylinux_2_17_<arch>.whl: the binary itself as the wheel's
    script, so that pip puts it on PATH as it is and it stays PID 1 (no Python wrapper runs);
    LICENSE and THIRD-PARTY-NOTICES in its .dist-info."""
    name = f"tfboot-{binary.version}"
    tag = f"py3-none-{MANYLINUX}_{binary.wheel_arch}"
    with tempfile.TemporaryDirectory(prefix="tfboot-wheel.") as stage:
        _stage_file(f"{stage}/{name}.data/scripts/tfboot", source=binary.path, mode=0o755)
        metadata = (f"Metadata-Version: 2.1\nName: tfboot\nVersion: {binary.version}\nSummary: {SUMMARY}\n"
                    f"License: {LICENSE}\nClassifier: License :: OSI Approved :: Apache Software License\n"
                    "Description-Content-Type: text/markdown\n\n").encode() + _readme()
        _stage_file(f"{stage}/{name}.dist-info/METADATA", metadata)
        _stage_file(f"{stage}/{name}.dist-info/LICENSE", _license_text())
        _stage_file(f"{stage}/{name}.dist-info/THIRD-PARTY-NOTICES", notices)
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


def make_deb(binary: Binary, out_dir: str, epoch: int, notices: bytes) -> str:
    """tfboot_<version>_<arch>.deb by dpkg-deb: /usr/bin/tfboot, README and docs/ as its
    documentation, its copyright file and the notices of what the binary carries."""
    path = os.path.join(out_dir, f"tfboot_{binary.version}_{binary.deb_arch}.deb")
    with tempfile.TemporaryDirectory(prefix="tfboot-deb.") as stage:
        _stage_file(f"{stage}/usr/bin/tfboot", source=binary.path, mode=0o755)
        # Debian compresses documentation; -n's equivalent (mtime 0, no name) keeps it reproducible.
        for page, text in _documentation().items():
            _stage_file(f"{stage}/usr/share/doc/tfboot/{page}.gz", gzip.compress(text, 9, mtime=0))
        _stage_file(f"{stage}/usr/share/doc/tfboot/THIRD-PARTY-NOTICES.gz", gzip.compress(notices, 9, mtime=0))
        _stage_file(f"{stage}/usr/share/doc/tfboot/copyright", _deb_copyright())   # never compressed (Debian policy)
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


def _debian_package(path: str) -> tuple[str, str, str] | None:
    """(package, version, architecture) of the Debian package that installed path (None: no package
    did). The architecture is the package's own: `all` for headers and for the cross toolchain's
    libc6-dev-arm64-cross, whatever the binary's."""
    found = subprocess.run(["dpkg-query", "--search", path], capture_output=True, text=True)
    if found.returncode != 0:
        return None
    package = found.stdout.splitlines()[0].partition(": ")[0]   # libc6-dev:amd64: /usr/lib/.../libc.a
    name, version, arch = _run(["dpkg-query", "--show", "--showformat=${Package} ${Version} ${Architecture}",
                                package]).split()
    return name, version, arch


@dataclass(frozen=True)
class LinkedIn:
    """What the build linked in and how: its compiler, the version macros its headers define, and
    per component (name, licence, the files it came from)."""
    compiler: str
    macros: dict
    components: list


def _detected_compiler(build_dir: str) -> str:
    """The C++ compiler CMake found, as it records it: a toolchain file's compiler (the aarch64
    build's) is no cache entry."""
    files = glob.glob(os.path.join(build_dir, "CMakeFiles", "*", "CMakeCXXCompiler.cmake"))
    for path in files:
        with open(path) as f:
            match = re.search(r'^set\(CMAKE_CXX_COMPILER "([^"]+)"\)', f.read(), re.MULTILINE)
        if match:
            return match[1]
    raise ReleaseError(f"--build-dir {build_dir}: CMake recorded no C++ compiler")


def linked_in(build_dir: str) -> LinkedIn:
    cache = _cmake_cache(build_dir)
    if cache.get("TFBOOT_STATIC") != "ON":
        raise ReleaseError(f"--build-dir {build_dir}: not a static build (TFBOOT_STATIC={cache.get('TFBOOT_STATIC')})")
    compiler = cache.get("CMAKE_CXX_COMPILER") or _detected_compiler(build_dir)
    includes = sorted({cache[k] for k in ("CARES_INCLUDE_DIR", "SODIUM_INCLUDE_DIR", "FMT_INCLUDE_DIR") if k in cache})
    flags = ["-std=c++23", *(f"-I{d}" for d in includes), "-x", "c++", "-"]
    macros = {}
    for line in _run([compiler, "-E", "-dM", *flags], input=PROBE).splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == "#define":
            macros[parts[1]] = parts[2]
    headers = _run([compiler, "-M", *flags], input=PROBE).replace("\\\n", " ").split()

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
        components.append((name, license_, files))
    return LinkedIn(compiler, macros, components)


def third_party_notices(linked: LinkedIn) -> bytes:
    """The copyright notices and licences of what the static binary carries: the Debian copyright
    file of the package that installed each component's first file, each text once."""
    seen = set()
    parts = [b"tfboot's binary is statically linked. It carries the components below, each under its own\n"
             b"licence; each section is the copyright file of the Debian package the build took it from.\n"
             b"docs/releasing.md (Licences) says what a user must do to comply.\n"]
    for name, license_, files in linked.components:
        package = _debian_package(files[0])
        if not package:
            raise ReleaseError(f"{name}: no Debian package installed {files[0]}, so no copyright file to ship")
        copyright_file = f"/usr/share/doc/{package[0]}/copyright"
        try:
            with open(copyright_file, "rb") as f:
                text = f.read()
        except OSError as e:
            raise ReleaseError(f"{name}: {copyright_file}: {e.strerror}") from e
        key = hashlib.sha256(text).hexdigest()
        heading = f"\n{'=' * 78}\n{name} ({license_}), from {package[0]} {package[1]}\n{'=' * 78}\n".encode()
        parts.append(heading + (b"(the same copyright file as the one above)\n" if key in seen else text))
        seen.add(key)
    return b"".join(parts)


@dataclass(frozen=True)
class Built:
    """One architecture's part of the release: its binary, what the build linked in, its packages."""
    binary: Binary
    linked: LinkedIn
    packages: list


def make_sbom(built: list[Built], out_dir: str, epoch: int) -> str:
    """tfboot-<version>.cdx.json, CycloneDX 1.5: tfboot and its licence; each architecture's binary
    with its SHA-256, its compiler and the packages that carry it; and what is linked into each
    binary, each part's licence, version from the build's headers, the file it came from and the
    Debian package that holds it."""
    release = built[0].binary
    components, dependencies = [], []
    for part in built:
        binary, macros = part.binary, part.linked.macros
        versions = _versions(macros)
        with open(binary.path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        binary_ref = f"tfboot-linux-{binary.wheel_arch}"
        compiler_version = macros["__VERSION__"].strip('"')
        components.append({
            "type": "application", "bom-ref": binary_ref, "name": "tfboot", "version": binary.version,
            "licenses": [{"expression": LICENSE}], "hashes": [{"alg": "SHA-256", "content": digest}],
            "properties": [{"name": "tfboot:file", "value": _binary_name(binary)},
                           {"name": "tfboot:architecture", "value": binary.wheel_arch},
                           {"name": "tfboot:compiler", "value": f"{part.linked.compiler} {compiler_version}"},
                           *({"name": "tfboot:packaged-in", "value": name} for name in part.packages)]})
        refs = []
        for name, license_, files in part.linked.components:
            ref = f"{binary.wheel_arch}/{name}"
            properties = [{"name": "tfboot:linked-from", "value": path} for path in files]
            component = {"type": "library", "bom-ref": ref, "name": name, "version": versions[name],
                         "licenses": [{"expression": license_}]}
            package = _debian_package(files[0])
            if package:
                package_name, package_version, package_arch = package
                properties.append({"name": "tfboot:debian-package", "value": f"{package_name} {package_version}"})
                component["purl"] = (f"pkg:deb/debian/{package_name}@{package_version.replace('+', '%2B')}"
                                     f"?arch={package_arch}")
            component["properties"] = properties
            components.append(component)
            refs.append(ref)
        dependencies.append({"ref": binary_ref, "dependsOn": refs})
    bom = {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "metadata": {
            "timestamp": datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "component": {"type": "application", "bom-ref": "tfboot", "name": "tfboot", "version": release.version,
                          "licenses": [{"expression": LICENSE}],
                          "properties": [{"name": "tfboot:commit", "value": release.commit}]},
        },
        "components": components,
        "dependencies": [{"ref": "tfboot", "dependsOn": [d["ref"] for d in dependencies]}, *dependencies],
    }
    path = os.path.join(out_dir, f"tfboot-{release.version}.cdx.json")
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


# The names write_sums lists, of any version and architecture: the binary, the wheel, the .deb, the SBOM.
_ARTIFACT = re.compile(r"tfboot-[0-9][0-9A-Za-z.+~]*-linux-[a-z0-9_]+"
                       r"|tfboot-[0-9][0-9A-Za-z.+~]*-py3-none-manylinux_[0-9]+_[0-9]+_[a-z0-9_]+\.whl"
                       r"|tfboot_[0-9][0-9A-Za-z.+~]*_[a-z0-9]+\.deb"
                       r"|tfboot-[0-9][0-9A-Za-z.+~]*\.cdx\.json")
_SUM_LINE = re.compile(r"([0-9a-f]{64})  (.+)")


def check_replaceable(folder: str) -> None:
    """Raises ReleaseError unless `folder` is empty or an earlier release, every file of it one the
    release wrote: SHA256SUMS and the artifacts it lists, with those sums."""
    if not os.path.isdir(folder):
        raise ReleaseError(f"{folder} is there and is not a release folder; remove it or name another")
    names = sorted(os.listdir(folder))
    if not names:
        return
    if "SHA256SUMS" not in names:
        raise ReleaseError(f"{folder} is there and is not a release folder; remove it or name another")

    def refuse(reason: str) -> ReleaseError:
        return ReleaseError(f"{folder} is not an earlier release ({reason}); remove it or name another")

    listed = {}
    with open(os.path.join(folder, "SHA256SUMS"), "rb") as f:
        for number, raw in enumerate(f.read().split(b"\n")[:-1], 1):
            match = _SUM_LINE.fullmatch(raw.decode("utf-8", "replace"))
            if not match:
                raise refuse(f"line {number} of its SHA256SUMS is not '<sha256>  <name>'")
            if not _ARTIFACT.fullmatch(match[2]):
                raise refuse(f"its SHA256SUMS lists {match[2]!r}, which is no release's file")
            listed[match[2]] = match[1]
    for name in names:
        if name == "SHA256SUMS":
            continue
        if name not in listed:
            raise refuse(f"it holds {name!r}, which its SHA256SUMS does not list")
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path):
            raise refuse(f"{name!r} is not a regular file")
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != listed[name]:
                raise refuse(f"{name!r} differs from its sum in SHA256SUMS")
    missing = sorted(set(listed) - set(names))
    if missing:
        raise refuse(f"its SHA256SUMS lists {missing[0]!r}, which is not there")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--may-replace"]:
        if len(argv) != 2:
            print("release: usage: release.py --may-replace DIR", file=sys.stderr)
            return 2
        try:
            check_replaceable(argv[1])
        except ReleaseError as e:
            print(f"release: {e}", file=sys.stderr)
            return 2
        return 0
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, action="append", help="a static tfboot to release")
    parser.add_argument("--build-dir", required=True, action="append",
                        help="the CMake build directory that made it (one per --binary, in the same order)")
    parser.add_argument("--out", required=True, help="an empty directory for the artifacts")
    args = parser.parse_args(argv)
    if len(args.binary) != len(args.build_dir):
        parser.error("give one --build-dir for each --binary")
    try:
        if not os.path.isdir(args.out) or os.listdir(args.out):
            raise ReleaseError(f"--out {args.out}: not an empty directory")
        parts = [(inspect_binary(path), linked_in(build_dir)) for path, build_dir in zip(args.binary, args.build_dir)]
        for (binary, linked), build_dir in zip(parts, args.build_dir):
            if ARCH_MACROS[binary.wheel_arch] not in linked.macros:
                raise ReleaseError(f"--build-dir {build_dir}: its compiler does not build for {binary.wheel_arch}, "
                                   f"as {binary.path} is")
        if len({(binary.version, binary.commit) for binary, _ in parts}) > 1:
            raise ReleaseError("the binaries name different versions or commits: "
                               + ", ".join(f"{b.path} {b.version} ({b.commit})" for b, _ in parts))
        if len({binary.wheel_arch for binary, _ in parts}) < len(parts):
            raise ReleaseError("two binaries for one architecture")
        epoch = source_date_epoch(parts[0][0].commit)
        built = []
        for binary, linked in parts:
            _stage_file(os.path.join(args.out, _binary_name(binary)), source=binary.path, mode=0o755)
            notices = third_party_notices(linked)
            packages = [os.path.basename(make_wheel(binary, args.out, epoch, notices)),
                        os.path.basename(make_deb(binary, args.out, epoch, notices))]
            built.append(Built(binary, linked, packages))
        make_sbom(built, args.out, epoch)
        write_sums(args.out)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
