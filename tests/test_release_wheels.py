"""The release build: portable manylinux_2_28 wheels, and the tests run the core they ship.

`bash scripts/test.sh` (the CI command) builds the core with scripts/build_extension.py,
packs the extension zip and installs the zip's wheel into each venv (MS_RELEASE_CORE=1):
then every test of the suite runs against the shipped binary, and a missing or stale
release wheel fails here. `bash scripts/test.sh --native` skips the release checks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import build_extension as release  # scripts/ is on sys.path (conftest.py)

REPO = Path(__file__).resolve().parent.parent
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
RELEASE_CORE = os.environ.get("MS_RELEASE_CORE") == "1"


def this_pythons_wheel() -> Path:
    wheels = sorted((REPO / "addon" / "wheels").glob(f"mass_spring-*-{TAG}-{TAG}-*.whl"))
    if not wheels:
        if RELEASE_CORE:
            pytest.fail(f"no release wheel for {TAG} in addon/wheels/ (scripts/setup_env.sh "
                        "--portable builds it)")
        pytest.skip("the release wheels are not built (bash scripts/test.sh builds them)")
    assert len(wheels) == 1, wheels
    return wheels[0]


def compiled_module(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if re.fullmatch(r"mass_spring/_core\..*\.so|"
                                                                 r"mass_spring/_core\..*\.pyd", n)]
        return archive.read(name)


needs_linux_x86_64 = pytest.mark.skipif(not release.portable_build_applies(),
                                        reason="portable wheels are built on Linux x86-64")


def test_the_suite_runs_the_core_the_zip_ships():
    """The installed core is byte for byte the one in this Python's wheel, and that wheel
    is in the extension zip and in its manifest."""
    import mass_spring._core as core
    wheel = this_pythons_wheel()
    if not RELEASE_CORE:
        pytest.skip("bash scripts/test.sh --native: the venv has the native build")
    assert Path(core.__file__).read_bytes() == compiled_module(wheel)
    (package,) = sorted((REPO / "dist").glob("mass_spring_baker-*.zip"))
    with zipfile.ZipFile(package) as archive:
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode())
        assert archive.read(f"wheels/{wheel.name}") == wheel.read_bytes()
    assert f"./wheels/{wheel.name}" in manifest["wheels"]
    assert manifest["platforms"] == sorted({release.wheel_platform(Path(w))
                                            for w in manifest["wheels"]})


@needs_linux_x86_64
def test_release_wheel_is_manylinux_2_28():
    """Tagged manylinux_2_28_x86_64; auditwheel finds it consistent with that policy or an
    older one; objdump finds no GLIBC_2.29+ and no GLIBCXX_3.4.26+ symbol."""
    wheel = this_pythons_wheel()
    assert wheel.name.endswith(f"-{TAG}-{TAG}-{release.PORTABLE_PLATFORM}.whl")
    tools = release.ReleaseTools()
    if not (tools.bin / "auditwheel").exists():
        pytest.fail("the release tools are missing: scripts/build_extension.py installs them")
    policy = release.check_portable(wheel, tools)
    major, minor = map(int, re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", policy).groups())
    assert (major, minor) <= (2, 28)


@needs_linux_x86_64
def test_symbol_check_finds_what_is_too_new():
    """The objdump check flags this machine's own C and C++ runtimes (glibc ≥ 2.34 and
    GLIBCXX ≥ 3.4.29 here, the reason the native build does not run on older Linux)."""
    loaded = Path("/proc/self/maps").read_text().split()
    libc = next(p for p in loaded if re.search(r"/libc\.so\.6$", p))
    too_new = release.too_new_symbols(Path(libc))
    assert too_new and all(s.startswith("GLIBC_2.") for s in too_new)
    assert "GLIBC_2.29" in too_new and "GLIBC_2.28" not in too_new
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ here to find libstdc++ by")
    libstdcxx = subprocess.run([compiler, "-print-file-name=libstdc++.so.6"], check=True,
                               capture_output=True, text=True).stdout.strip()
    too_new = release.too_new_symbols(Path(libstdcxx).resolve())
    assert "GLIBCXX_3.4.26" in too_new and "GLIBCXX_3.4.25" not in too_new
