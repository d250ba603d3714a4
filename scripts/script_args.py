"""A script's own command-line arguments, the same with the ``bpy`` module and inside a
Blender binary (where they follow ``--``)."""

from __future__ import annotations

import sys

# Blender's own options that take a value (the value is not the .blend to open).
_BLENDER_OPTIONS_WITH_VALUE = (
    "--python", "-P", "--python-exit-code", "--python-expr", "--addons", "--engine", "-E",
    "--scene", "-S", "--frame-start", "-s", "--frame-end", "-e", "--render-output", "-o",
    "--threads", "-t", "--app-template")


def script_argv(argv: list[str] | None = None) -> list[str]:
    """This script's own arguments: after ``--`` inside Blender, else sys.argv[1:]."""
    argv = sys.argv if argv is None else argv
    if "--" in argv:
        return argv[argv.index("--") + 1:]
    if _inside_blender_binary(argv):
        return []
    return argv[1:]


def blend_given_to_blender(argv: list[str] | None = None) -> str | None:
    """The .blend named on Blender's own command line (before ``--``), if any."""
    argv = sys.argv if argv is None else argv
    if not _inside_blender_binary(argv):
        return None
    head = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    skip_next = False
    for arg in head:
        if skip_next:
            skip_next = False
            continue
        if arg in _BLENDER_OPTIONS_WITH_VALUE:
            skip_next = True
            continue
        if arg.lower().endswith(".blend"):
            return arg
    return None


def _inside_blender_binary(argv: list[str]) -> bool:
    # The bpy module leaves sys.argv alone; the Blender binary puts its own options there.
    return any(a in ("--python", "-P", "--background", "-b") for a in argv[1:])
