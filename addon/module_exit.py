"""Blender 4.2's Python module (``pip install bpy==4.2.*``) crashes with a segmentation
fault when the interpreter exits after a class with a property update callback was
registered, as the add-on's settings are; Blender 4.5 and 5.x do not. A script that baked
and saved everything would still end with exit status -11.

In that module only, the process ends right after Python's own exit work: the exit status
is remembered (the last ``sys.exit``, an uncaught exception, or 0) and handed to
``os._exit`` from an ``atexit`` callback, after the standard streams and logging are
flushed (tests/test_headless.py runs its command in subprocesses; CI runs it on bpy 4.2).
Two things it cannot see: a ``sys.exit`` whose SystemExit was caught stays remembered, and
``raise SystemExit(n)`` or a ``sys.exit`` looked up before the add-on was registered (as in
``sys.exit(main())`` when main() registers it) is not remembered. A script should end with
``sys.exit(status)`` called after registering, or call ``remember(status)``
(tests/conftest.py gives pytest's; tests/fuzz_bake.py ends that way)."""

from __future__ import annotations

import atexit
import os
import sys

import bpy

_status = {"code": 0, "installed": False}


def needed() -> bool:
    """The Python module (no Blender executable) of a Blender before 4.3."""
    return bpy.app.binary_path == "" and bpy.app.version < (4, 3, 0)


def install() -> None:
    if _status["installed"] or not needed():
        return
    _status["installed"] = True
    exit_, excepthook = sys.exit, sys.excepthook

    def remembering_exit(code=0):
        remember(code)
        exit_(code)

    def remembering_excepthook(kind, value, traceback):
        remember(1)
        excepthook(kind, value, traceback)

    sys.exit, sys.excepthook = remembering_exit, remembering_excepthook
    atexit.register(_exit_now)


def remember(code) -> None:
    """The status the process will exit with (in the module that needs it)."""
    _status["code"] = code


def _exit_now() -> None:
    import logging
    logging.shutdown()
    code = _status["code"]
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): Python prints it, status 1
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)
