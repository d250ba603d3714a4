#!/usr/bin/env python3
"""Build the installable Mass–Spring Baker extension: dist/mass_spring_baker-<version>.zip.

1. Builds the compiled core ``mass_spring`` as a wheel for every Python that Blender uses
   (3.13: Blender 5.1+, 3.11: Blender 4.2–5.0) with ``pip wheel`` from the repo root.
2. Copies the wheels into addon/wheels/ (git-ignored) and lists them, and the platforms
   they are for, in the manifest.
3. Packs addon/ into the zip the way Blender's ``extension build`` does (manifest at the
   zip root): with a ``blender`` binary if there is one, else with the same build tool
   taken from an installed ``bpy`` module, else by zipping the folder itself.

    python scripts/build_extension.py                 # both Pythons, found via pyenv
    python scripts/build_extension.py --python /usr/bin/python3.11 --python ~/py313/bin/python
    python scripts/build_extension.py --skip-wheels   # re-pack with the wheels already there

The result installs with Preferences ▸ Get Extensions ▸ ⌄ ▸ Install from Disk.
Other platforms: run this script there; the wheels get that platform's tag. Wheels from
several machines can be put together in addon/wheels/ and packed with --skip-wheels.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
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


def build_wheel(python: str, out_dir: Path) -> Path:
    """``pip wheel`` of the repo root (the core) with `python`; returns the wheel."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [python, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", tmp, str(REPO)]
        say(" ".join(command))
        subprocess.run(command, check=True, cwd=REPO)
        wheels = list(Path(tmp).glob("mass_spring-*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"build_extension: expected one mass_spring wheel, got {wheels}")
        target = out_dir / wheels[0].name
        shutil.copy2(wheels[0], target)
        return target


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
        for old in WHEELS.glob("mass_spring-*.whl"):
            old.unlink()
        for version, python in sorted(pythons.items()):
            wheel = build_wheel(python, WHEELS)
            say(f"built {wheel.name} with Python {version[0]}.{version[1]}")
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
