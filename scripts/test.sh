#!/usr/bin/env bash
# Set everything up and run the tests, from a fresh clone:
#
#   bash scripts/test.sh              fast suite, on bpy 5.2.3 / Python 3.13 (.venv)
#                                     and on bpy 5.0.1 / Python 3.11 (.venv311), against
#                                     the core as released (manylinux_2_28 wheels, the
#                                     ones packed into dist/'s extension zip)
#   bash scripts/test.sh --native     the core built by this machine's compiler (quicker
#                                     to rebuild while working on it)
#   bash scripts/test.sh --slow       everything, including the long physics checks
#   bash scripts/test.sh --no-311     only .venv
#   bash scripts/test.sh -- -k bake   extra arguments for pytest
#
# Exits non-zero when setup fails, a test fails, or pytest collects no test at all.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

SLOW=0
WITH_311=1
PORTABLE=1
PYTEST_EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --slow) SLOW=1 ;;
        --no-311) WITH_311=0 ;;
        --native) PORTABLE=0 ;;
        --) shift; PYTEST_EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

T0=$SECONDS
SETUP_ARGS=()
[ "$WITH_311" = 1 ] && SETUP_ARGS+=(--with-311)
[ "$PORTABLE" = 1 ] && SETUP_ARGS+=(--portable)
# tests/test_release_wheels.py fails instead of skipping when the release wheels are missing.
export MS_RELEASE_CORE="$PORTABLE"
bash scripts/setup_env.sh "${SETUP_ARGS[@]}" || { echo "test.sh: environment setup failed" >&2; exit 1; }
echo "[test] setup took $((SECONDS - T0)) s" >&2

VENVS=(.venv)
[ "$WITH_311" = 1 ] && [ -x .venv311/bin/python ] && VENVS+=(.venv311)

MARK=(-m "not slow")
[ "$SLOW" = 1 ] && MARK=()

REPORTS="$REPO/build/test-reports"
mkdir -p "$REPORTS"
STATUS=0
SUMMARY=()
for venv in "${VENVS[@]}"; do
    label="$("$venv/bin/python" -c 'import sys, bpy; print(f"bpy {bpy.app.version_string.split()[0]}, Python {sys.version.split()[0]}")' 2>/dev/null || echo "$venv")"
    xml="$REPORTS/$(basename "$venv").xml"
    rm -f "$xml"
    echo "[test] ===== pytest in $venv ($label) =====" >&2
    t=$SECONDS
    "$venv/bin/python" -m pytest "${MARK[@]}" -ra -p no:cacheprovider --junitxml="$xml" "${PYTEST_EXTRA[@]}"
    rc=$?
    if [ $rc -eq 5 ]; then
        echo "[test] $venv: pytest collected no tests: that is a failure" >&2
        rc=1
    fi
    [ $rc -ne 0 ] && STATUS=1
    counts="$("$venv/bin/python" - "$xml" <<'PY' 2>/dev/null
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
print(n["tests"] - n["failures"] - n["errors"] - n["skipped"], n["failures"] + n["errors"], n["skipped"])
PY
)"
    [ -n "$counts" ] || counts="0 1 0"
    SUMMARY+=("$venv|$label|$counts|$rc|$((SECONDS - t))")
done

echo "[test] ===== summary ($((SECONDS - T0)) s in all) =====" >&2
P=0; F=0; S=0
for row in "${SUMMARY[@]}"; do
    IFS='|' read -r venv label counts rc secs <<<"$row"
    read -r p f s <<<"$counts"
    P=$((P + p)); F=$((F + f)); S=$((S + s))
    state=ok; [ "$rc" -ne 0 ] && state=FAILED
    echo "[test] $venv ($label): $p passed, $f failed, $s skipped in $secs s: $state" >&2
done
if [ "$STATUS" -ne 0 ] && [ "$F" -eq 0 ]; then F=1; fi
echo "total: $P passed, $F failed, $S skipped"
exit "$STATUS"
