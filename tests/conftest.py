"""Shared fixtures: the add-on registered once per session, an empty scene per test.

Tests import the installed core (pip install .) and, for add-on tests, the repo's files.
In-process Blender tests register the repo's add-on through scripts/addon_loader.py (the
loader the scripts use) under its extension id, ``mass_spring_baker``.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.join(ROOT, "scripts") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))

from test_addon_helpers import require_bpy  # noqa: E402  (tests/ is on sys.path)

FRAME_START, FRAME_END, FPS = 1, 24, 24


def register_repo_addon():
    """The repo's add-on, registered (again, if a test unregistered it); its package."""
    require_bpy()
    import addon_loader
    return addon_loader.register_addon("repo")


@pytest.fixture(scope="session")
def addon():
    """The add-on's package module, registered from the repo's addon/ folder."""
    return register_repo_addon()


@pytest.fixture
def scene(addon):
    """An empty factory scene, frames 1..24 at 24 fps; the add-on stays registered."""
    import bpy
    register_repo_addon()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_current = FRAME_START, FRAME_END, FRAME_START
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    return scene


def pytest_sessionfinish(session, exitstatus):
    """Under Blender 4.2's Python module the add-on ends the process itself, with the last
    status it saw (addon/module_exit.py): tests that catch a usage error's SystemExit
    leave theirs behind, so give it pytest's own."""
    for name, module in list(sys.modules.items()):
        if name.endswith(".module_exit") and hasattr(module, "remember"):
            module.remember(int(exitstatus))
