#!/usr/bin/env bash
# Create the project's Python environments on a fresh machine and build the core.
#
#   bash scripts/setup_env.sh             # .venv: Python 3.13 + bpy 5.2.3 (else 3.11 + bpy 5.0.1)
#   bash scripts/setup_env.sh --with-311  # also .venv311: Python 3.11 + bpy 5.0.1
#   bash scripts/setup_env.sh --only-311  # only .venv311
#   bash scripts/setup_env.sh --with-lts  # also .venv42 and .venv45: Python 3.11 + bpy 4.2.23
#                                         # and 4.5.15, the older LTS releases the manifest
#                                         # promises (blender_version_min 4.2)
#   bash scripts/setup_env.sh --portable  # the core as released: manylinux_2_28 wheels built
#                                         # by scripts/build_extension.py (Zig's compiler),
#                                         # packed into dist/ and installed into the venvs
#
# Each venv gets bpy (Blender as a Python module), numpy, pytest (with pytest-xdist, which
# runs the tests on several cores), hypothesis, matplotlib and the compiled core
# `mass_spring`, installed non-editable from the repo root (`pip install .`).
# A second run is quick: what is installed stays, only the core is rebuilt (incrementally,
# in build/<wheel tag>/).
#
# Interpreters are looked up in pyenv, then on PATH. To use a specific one, set
# MS_PYTHON313=/path/to/python3.13 or MS_PYTHON311=/path/to/python3.11.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

WITH_311=0
WITH_LTS=0
ONLY_311=0
BUILD_CORE=1
PORTABLE=0
for arg in "$@"; do
    case "$arg" in
        --portable) PORTABLE=1 ;;
        --with-311) WITH_311=1 ;;
        --only-311) ONLY_311=1; WITH_311=1 ;;
        --with-lts) WITH_LTS=1 ;;
        --no-core) BUILD_CORE=0 ;;
        -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup_env.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done

say() { echo "[setup] $*" >&2; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

# ---------------------------------------------------------------- find interpreters
# Print the path of a working python of version $1 (e.g. 3.13) or nothing.
python_ok() {  # $1 = interpreter, $2 = version
    [ -n "$1" ] && [ -x "$1" ] || return 1
    "$1" -c "import sys, venv, ensurepip; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$2' else 1)" \
        >/dev/null 2>&1
}

find_python() {
    local ver="$1" override="$2" cand v
    if [ -n "$override" ]; then
        python_ok "$override" "$ver" && { echo "$override"; return 0; }
        die "$3=$override is not a working Python $ver with venv/ensurepip"
    fi
    if command -v pyenv >/dev/null 2>&1; then
        # Newest installed patch release first; the shim only answers for the active
        # version, so ask pyenv for the real interpreter path.
        for v in $(pyenv versions --bare 2>/dev/null | grep -E "^${ver//./\\.}(\.[0-9]+)?$" | sort -t. -k3,3nr); do
            cand="$(PYENV_VERSION="$v" pyenv which python 2>/dev/null || true)"
            python_ok "$cand" "$ver" && { echo "$cand"; return 0; }
        done
    fi
    for cand in "$(command -v "python$ver" 2>/dev/null || true)" \
                "/usr/local/bin/python$ver" "/usr/bin/python$ver"; do
        python_ok "$cand" "$ver" && { echo "$cand"; return 0; }
    done
    return 0
}

PY313="$(find_python 3.13 "${MS_PYTHON313:-}" MS_PYTHON313)"
# A working venv of the right version is as good as its base interpreter (e.g. a second
# run in a shell without pyenv must not replace a 3.13 .venv by a 3.11 one).
if [ -z "$PY313" ] && python_ok "$REPO/.venv/bin/python" 3.13; then PY313="$REPO/.venv/bin/python"; fi
PY311=""
if [ "$WITH_311" = 1 ] || [ "$WITH_LTS" = 1 ] || [ -z "$PY313" ]; then
    PY311="$(find_python 3.11 "${MS_PYTHON311:-}" MS_PYTHON311)"
    if [ -z "$PY311" ] && python_ok "$REPO/.venv311/bin/python" 3.11; then PY311="$REPO/.venv311/bin/python"; fi
fi

NEED_MSG="Blender's Python module needs Python 3.13 (bpy 5.2.3) or Python 3.11 (bpy 5.0.1).
Install one, e.g. 'pyenv install 3.13' (or 'pyenv install 3.11'), or point MS_PYTHON313 /
MS_PYTHON311 at an interpreter, then run this script again."

# ---------------------------------------------------------------- build tools
if [ "$BUILD_CORE" = 1 ]; then
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 \
        || die "no C++ compiler found (need g++ or clang++ with C++17 to build the core)"
fi
EXTRA_BUILD_PKGS=""
cmake_ok() {
    command -v cmake >/dev/null 2>&1 || return 1
    local v; v="$(cmake --version | head -n1 | grep -oE '[0-9]+\.[0-9]+' | head -n1)"
    [ "$(printf '%s\n3.20\n' "$v" | sort -V | head -n1)" = "3.20" ]
}
cmake_ok || EXTRA_BUILD_PKGS="cmake"   # the cmake wheel from PyPI, when the system has none

# ---------------------------------------------------------------- one venv
# setup_venv DIR PYTHON BPY_VERSION
setup_venv() {
    local dir="$1" py="$2" bpy_version="$3" want vpy
    want="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    vpy="$dir/bin/python"
    if [ -x "$vpy" ] && python_ok "$vpy" "$want" && "$vpy" -m pip --version >/dev/null 2>&1; then
        say "$dir: reusing (Python $want)"
    else
        say "$dir: creating with $py (Python $want)"
        rm -rf "$dir"
        "$py" -m venv "$dir"
    fi

    # Install only what is missing: bpy alone is a few hundred MB.
    local missing
    missing="$("$vpy" - "$bpy_version" $EXTRA_BUILD_PKGS <<'PY'
import sys
from importlib import metadata
bpy_version, extra = sys.argv[1], sys.argv[2:]
wanted = {"bpy": bpy_version, "numpy": None, "pytest": None, "pytest-xdist": None,
          "matplotlib": None, "hypothesis": None, "scikit-build-core": None, "pybind11": None, "cmeel-eigen": None}
wanted.update({name: None for name in extra})
missing = []
for name, version in wanted.items():
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have is None or (version is not None and have != version):
        missing.append(f"{name}=={version}" if version else name)
print(" ".join(missing))
PY
)"
    if [ -n "$missing" ]; then
        say "$dir: pip install $missing"
        # -qq: errors only (this machine's pip config makes every lookup warn).
        "$vpy" -m pip install --disable-pip-version-check --progress-bar off -qq $missing \
            || die "$dir: 'pip install $missing' failed (see above)"
    else
        say "$dir: bpy $bpy_version, numpy, pytest, pytest-xdist, hypothesis, matplotlib already installed"
    fi

    if [ "$BUILD_CORE" = 1 ] && [ "$PORTABLE" = 0 ]; then
        [ -f native/system.cpp ] || die "native/system.cpp not found: the core's sources are missing from $REPO"
        say "$dir: building the core (pip install .)"
        local t0=$SECONDS
        # Build requirements are already in the venv: no isolated build env (saves a
        # download per run), and scikit-build-core reuses build/<wheel tag>/ incrementally.
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
            "$vpy" -m pip install --disable-pip-version-check --progress-bar off -q \
                --no-build-isolation --no-deps --force-reinstall . \
            || die "$dir: building the core failed ('pip install .', output above)"
        say "$dir: core built in $((SECONDS - t0)) s"
        check_venv "$dir"
    fi
    [ "$BUILD_CORE" = 1 ] || check_venv "$dir"
    VENVS_MADE+=("$dir")
}

# check_venv DIR: bpy, numpy and (when built) the core import.
check_venv() {
    "$1/bin/python" - "$BUILD_CORE" <<'PY' >&2 || die "$1: the environment does not import (see above)"
import sys
import bpy, numpy
line = f"[setup] ok: Python {sys.version.split()[0]}, bpy {bpy.app.version_string}, numpy {numpy.__version__}"
if sys.argv[1] == "1":
    import mass_spring
    line += f", mass_spring from {mass_spring.__file__}"
print(line)
PY
}

# The release build: one portable wheel per venv's Python, packed into the extension zip,
# and each venv gets the very wheel the zip carries, so the tests run the shipped core.
build_portable() {
    local t0=$SECONDS args=() dir tag wheel
    for dir in "${VENVS_MADE[@]}"; do args+=(--python "$dir/bin/python"); done
    say "building the release core (scripts/build_extension.py ${args[*]})"
    "${VENVS_MADE[0]}/bin/python" scripts/build_extension.py "${args[@]}" \
        || die "the portable build failed (scripts/build_extension.py, output above)"
    for dir in "${VENVS_MADE[@]}"; do
        tag="$("$dir/bin/python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
        wheel="$(ls addon/wheels/mass_spring-*-"$tag"-"$tag"-*.whl 2>/dev/null | head -n1)"
        [ -n "$wheel" ] || die "no wheel for $tag in addon/wheels/"
        "$dir/bin/python" -m pip install --disable-pip-version-check -q --no-deps \
            --force-reinstall "$wheel" || die "$dir: installing $wheel failed"
        check_venv "$dir"
    done
    say "release core built and installed in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- main
VENVS_MADE=()
if [ "$ONLY_311" = 0 ]; then
    if [ -n "$PY313" ]; then
        setup_venv "$REPO/.venv" "$PY313" 5.2.3
    elif [ -n "$PY311" ]; then
        say "Python 3.13 not found: .venv uses Python 3.11 with bpy 5.0.1"
        setup_venv "$REPO/.venv" "$PY311" 5.0.1
    else
        die "neither Python 3.13 nor Python 3.11 was found. $NEED_MSG"
    fi
fi
if [ "$WITH_311" = 1 ]; then
    [ -n "$PY311" ] || die "--with-311: Python 3.11 was not found (needed for bpy 5.0.1). $NEED_MSG"
    if [ "$ONLY_311" = 0 ] && [ -z "$PY313" ]; then
        say ".venv already is the Python 3.11 environment; no separate .venv311"
    else
        setup_venv "$REPO/.venv311" "$PY311" 5.0.1
    fi
fi
if [ "$WITH_LTS" = 1 ]; then
    [ -n "$PY311" ] || die "--with-lts: Python 3.11 was not found (bpy 4.2 and 4.5 need it). $NEED_MSG"
    setup_venv "$REPO/.venv42" "$PY311" 4.2.23
    setup_venv "$REPO/.venv45" "$PY311" 4.5.15
fi
if [ "$BUILD_CORE" = 1 ] && [ "$PORTABLE" = 1 ]; then
    build_portable
fi
say "done"
