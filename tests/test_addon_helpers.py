"""Shared helpers of the add-on tests (real bpy and the real core, no mocks).

In-process tests get the add-on and an empty scene from the fixtures of conftest.py
(``addon``, ``scene``), which register it through scripts/addon_loader.py. Tests that
need a clean Blender (install from the zip, reopen a saved file) run the venv's Python
with ``import bpy`` in a subprocess, with every Blender user folder pointed at a temporary
directory so the real user's configuration is never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
ADDON_DIR = REPO / "addon"


def require_bpy():
    bpy = pytest.importorskip("bpy", reason="needs the bpy module (Blender as a Python module)")
    pytest.importorskip("mass_spring", reason="needs the compiled core (pip install .)")
    return bpy


def submodule(name: str):
    """The add-on's module `name` (e.g. "bake"), the repo's add-on registered."""
    require_bpy()
    import addon_loader
    return addon_loader.addon_module(name, "repo")


def make_mesh_object(name, vertices, edges=(), faces=(), location=(0.0, 0.0, 0.0)):
    import bpy
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(map(float, v)) for v in vertices], [tuple(e) for e in edges],
                     [tuple(f) for f in faces])
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.context.view_layer.update()
    return obj


def make_grid(name="Grid", nx=5, ny=4, spacing=0.25, location=(0.0, 0.0, 1.0)):
    """``presets.cloth``: nx×ny vertices in the XY plane with quad faces (edges in
    Blender's order); vertex index = j*nx + i."""
    from mass_spring import presets
    cloth = presets.cloth(nx, ny, spacing=spacing)
    return make_mesh_object(name, cloth.positions, faces=cloth.faces, location=location)


def pin(obj, indices, group="Pins"):
    vg = obj.vertex_groups.get(group) or obj.vertex_groups.new(name=group)
    vg.add(list(map(int, indices)), 1.0, 'REPLACE')
    obj.mass_spring.pin_group = group
    return vg


def set_edge_marks(obj, name, edge_indices):
    mesh = obj.data
    attribute = mesh.attributes.get(name) or mesh.attributes.new(name, 'BOOLEAN', 'EDGE')
    values = np.zeros(len(mesh.edges), dtype=bool)
    values[list(edge_indices)] = True
    attribute.data.foreach_set("value", values)
    mesh.update()


def local_coordinates(obj, evaluated=True) -> np.ndarray:
    import bpy
    if evaluated:
        depsgraph = bpy.context.evaluated_depsgraph_get()
        mesh = obj.evaluated_get(depsgraph).data
    else:
        mesh = obj.data
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64)


def world_coordinates(obj) -> np.ndarray:
    """Vertex positions as displayed at the current frame, in world space."""
    import bpy
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph)
    matrix = np.array(evaluated.matrix_world)
    return local_coordinates(obj) @ matrix[:3, :3].T + matrix[:3, 3]


def mesh_fingerprint(obj) -> dict:
    """Everything a bake could leave behind on an object, for before/after comparisons."""
    import bpy
    mesh = obj.data
    key = mesh.shape_keys
    return {
        "co": local_coordinates(obj, evaluated=False).round(7).tolist(),
        "shape_keys": None if key is None else [kb.name for kb in key.key_blocks],
        "modifiers": [(m.name, m.type) for m in obj.modifiers],
        "actions": sorted(a.name for a in bpy.data.actions),
        "keys": sorted(k.name for k in bpy.data.shape_keys),
        # (the settings group itself is stored as an ID property once it is touched)
        "props": sorted(k for k in obj.keys() if k != "mass_spring"),
        "attributes": sorted(a.name for a in mesh.attributes),
        "frame": bpy.context.scene.frame_current,
        "matrix": [list(r) for r in obj.matrix_world],
    }


# ------------------------------------------------------------------ subprocess Blender


def blender_env(home: Path) -> dict:
    """Environment pointing every Blender user folder into `home` (a temp dir)."""
    env = dict(os.environ)
    env.update({
        "BLENDER_USER_RESOURCES": str(home),
        "BLENDER_USER_CONFIG": str(home / "config"),
        "BLENDER_USER_SCRIPTS": str(home / "scripts"),
        "BLENDER_USER_EXTENSIONS": str(home / "extensions"),
        "BLENDER_USER_DATAFILES": str(home / "datafiles"),
    })
    return env


def run_python(code: str, env: dict, timeout: float = 300) -> dict:
    """Run `code` in a fresh Python (this venv's, so `import bpy` works).

    The code reports back by assigning a JSON-able value to `RESULT`.
    """
    wrapper = (
        "import json, sys\nRESULT = None\n"
        + textwrap.dedent(code)
        + "\nsys.stdout.write('\\n@@RESULT@@' + json.dumps(RESULT) + '\\n')\n"
    )
    process = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True,
                             text=True, timeout=timeout)
    if process.returncode != 0 or "@@RESULT@@" not in process.stdout:
        raise AssertionError(
            f"subprocess failed ({process.returncode}):\n{process.stdout[-4000:]}\n{process.stderr[-4000:]}")
    return json.loads(process.stdout.rsplit("@@RESULT@@", 1)[1])
