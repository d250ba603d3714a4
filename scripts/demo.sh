#!/usr/bin/env bash
# The main job in one command, from a fresh clone: set up .venv (Python 3.13 + bpy 5.2.3,
# or 3.11 + bpy 5.0.1), build the core, then build, bake and render the built-in demo:
#   out/demo.blend  the baked scene (plays and renders in Blender without the add-on)
#   out/demo.png    a still rendered with Workbench
# Extra arguments go to scripts/bake.py, e.g. `bash scripts/demo.sh --engine cycles`
# or `bash scripts/demo.sh --video out/demo.mp4`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup_env.sh
exec .venv/bin/python scripts/bake.py "$@"
