"""Install the built zip as a user would, bake, save; reopen without the add-on.

Each step runs in a fresh Python process (``import bpy``) whose Blender user folders are
a temporary directory, so the real user's configuration is never touched.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from test_addon_helpers import REPO, blender_env, require_bpy, run_python

require_bpy()

ZIP_GLOB = "mass_spring_baker-*.zip"
MODULE = "bl_ext.user_default.mass_spring_baker"
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"


def _addon_sources_mtime() -> float:
    """When the add-on's files last changed: a zip packed before that is stale."""
    files = [p for p in (REPO / "addon").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return max(p.stat().st_mtime for p in files)


def _core_sources_mtime() -> float:
    """When the core's sources last changed: a wheel built before that is stale."""
    files = [p for folder in ("native", "python/mass_spring") for p in (REPO / folder).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    files += [REPO / "CMakeLists.txt", REPO / "pyproject.toml"]
    return max(p.stat().st_mtime for p in files)


def _zip_is_usable(path: Path) -> bool:
    if not path.exists() or path.stat().st_mtime < max(_addon_sources_mtime(),
                                                       _core_sources_mtime()):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(f"-{TAG}-" in name for name in archive.namelist())


@pytest.fixture(scope="module")
def extension_zip() -> Path:
    """dist/mass_spring_baker-<version>.zip, (re)packed when the add-on changed."""
    zips = sorted((REPO / "dist").glob(ZIP_GLOB))
    if zips and _zip_is_usable(zips[-1]):
        return zips[-1]
    have_wheel = any(w.stat().st_mtime > _core_sources_mtime()
                     for w in (REPO / "addon" / "wheels").glob(f"mass_spring-*-{TAG}-*.whl"))
    command = [sys.executable, str(REPO / "scripts" / "build_extension.py")]
    command += ["--skip-wheels"] if have_wheel else ["--python", sys.executable]
    subprocess.run(command, check=True, cwd=REPO, timeout=1800)
    zips = sorted((REPO / "dist").glob(ZIP_GLOB))
    assert zips and _zip_is_usable(zips[-1])
    return zips[-1]


def test_zip_layout(extension_zip):
    import tomllib
    with zipfile.ZipFile(extension_zip) as archive:
        names = set(archive.namelist())
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode())
    assert {"blender_manifest.toml", "__init__.py", "bake.py", "cli.py", "writers.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert manifest["id"] == "mass_spring_baker"
    assert manifest["name"] == "Mass–Spring Baker"
    assert manifest["blender_version_min"] == "4.2.0"
    assert len(manifest["tagline"]) <= 64 and not manifest["tagline"].endswith(".")
    for wheel in manifest["wheels"]:
        assert wheel.removeprefix("./") in names


BAKE_SCRIPT = r"""
import bpy, addon_utils, numpy as np
import mass_spring
RESULT = {"core": mass_spring.__file__}
enabled = [a.module for a in bpy.context.preferences.addons]
if "{module}" not in enabled:
    addon_utils.enable("{module}", default_set=True)
RESULT["registered"] = hasattr(bpy.types.Object, "mass_spring")
import importlib
bake = importlib.import_module("{module}.bake")
# blender -c mass_spring_bake: the enabled extension registered its command
RESULT["cli_command"] = importlib.import_module("{module}.cli")._handle is not None

for o in list(bpy.data.objects):  # (factory settings would disable the add-on again)
    bpy.data.objects.remove(o)
bpy.ops.wm.save_as_mainfile(filepath="{blend}")
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 30

def grid(name, x0, output):
    from mass_spring import presets
    cloth = presets.cloth(5, 4, spacing=0.25)
    me = bpy.data.meshes.new(name)
    me.from_pydata(cloth.positions.tolist(), [], cloth.faces.tolist()); me.update()
    ob = bpy.data.objects.new(name, me); scene.collection.objects.link(ob)
    ob.location = (x0, 0, 1)
    ob.keyframe_insert("location", frame=1)
    ob.location = (x0 + 1, 0, 1.5)
    ob.keyframe_insert("location", frame=30)
    vg = ob.vertex_groups.new(name="Pins"); vg.add([0, 4], 1.0, 'REPLACE')
    rigid = me.attributes.new("ms_rigid", 'BOOLEAN', 'EDGE')
    rigid.data[0].value = True
    s = ob.mass_spring
    s.enabled, s.pin_group, s.stiffness, s.output = True, "Pins", 200.0, output
    s.pc2_path = "//" + name + ".pc2"
    return ob

positions = {}
for name, x0, output in (("Keys", 0.0, 'SHAPE_KEYS'), ("Cache", 3.0, 'PC2')):
    ob = grid(name, x0, output)
    result = bake.bake_object(scene, ob)
    positions[name] = result.positions[[0, 9, 29]].tolist()
bpy.ops.wm.save_mainfile()
RESULT["positions"] = positions
"""

REOPEN_SCRIPT = r"""
import bpy, numpy as np
RESULT = {"registered": hasattr(bpy.types.Object, "mass_spring")}
bpy.ops.wm.open_mainfile(filepath="{blend}")
scene = bpy.context.scene
out = {}
for name in ("Keys", "Cache"):
    ob = bpy.data.objects[name]
    frames = []
    for frame in (1, 10, 30):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = ob.evaluated_get(dg)
        co = np.empty(len(ev.data.vertices) * 3, np.float32)
        ev.data.vertices.foreach_get("co", co)
        m = np.array(ev.matrix_world)
        frames.append((co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]).tolist())
    out[name] = frames
RESULT["positions"] = out
"""


def test_install_bake_save_and_reopen_without_addon(extension_zip, tmp_path):
    home = tmp_path / "blender_home"
    env = blender_env(home)
    blend = tmp_path / "baked.blend"

    installed = run_python(f"""
        import bpy
        result = bpy.ops.extensions.package_install_files(
            filepath={str(extension_zip)!r}, repo="user_default", enable_on_install=True)
        RESULT = {{"result": sorted(result),
                   "enabled": "{MODULE}" in [a.module for a in bpy.context.preferences.addons],
                   "registered": hasattr(bpy.types.Object, "mass_spring")}}
    """, env)
    assert installed == {"result": ["FINISHED"], "enabled": True, "registered": True}
    site = home / "extensions" / ".local" / "lib"
    assert list(site.glob("python3.*/site-packages/mass_spring/_core*")), "the wheel was not installed"

    # A fresh process: the core now comes from the extension's own wheel.
    baked = run_python(BAKE_SCRIPT.replace("{module}", MODULE).replace("{blend}", blend.as_posix()), env)
    assert baked["registered"] and baked["cli_command"]
    assert baked["core"].startswith(str(home)), baked["core"]
    assert blend.exists() and (tmp_path / "Cache.pc2").exists()

    # Another fresh process with empty user folders: no add-on at all.
    bare = run_python(REOPEN_SCRIPT.replace("{blend}", blend.as_posix()), blender_env(tmp_path / "bare_home"))
    assert bare["registered"] is False
    for name in ("Keys", "Cache"):
        np.testing.assert_allclose(np.array(bare["positions"][name]), np.array(baked["positions"][name]),
                                   atol=1e-5, err_msg=name)
        # Pinned vertex 0 follows the animated object.
        assert bare["positions"][name][2][0][0] == pytest.approx(baked["positions"][name][0][0][0] + 1, abs=1e-5)
