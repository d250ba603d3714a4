"""Shared helpers of the add-on tests (real bpy and the real core, no mocks).

In-process tests register the add-on straight from the repo folder under the name it has
as an extension (``mass_spring_baker``), the same way scripts/bake.py does. Tests that
need a clean Blender (install from the zip, reopen a saved file) run the venv's Python
with ``import bpy`` in a subprocess, with every Blender user folder pointed at a temporary
directory so the real user's configuration is never touched.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
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
PACKAGE = "mass_spring_baker"


def require_bpy():
    bpy = pytest.importorskip("bpy", reason="needs the bpy module (Blender as a Python module)")
    pytest.importorskip("mass_spring", reason="needs the compiled core (pip install .)")
    return bpy


def load_addon():
    """Register the repo's add-on (once per process) and return its package module."""
    require_bpy()
    for name in list(sys.modules):
        if name == PACKAGE or name.endswith("." + PACKAGE):
            import bpy
            package = sys.modules[name]
            if not hasattr(bpy.types.Object, "mass_spring"):
                package.register()
            return package
    spec = importlib.util.spec_from_file_location(
        PACKAGE, ADDON_DIR / "__init__.py", submodule_search_locations=[str(ADDON_DIR)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    package.register()
    # bpy 4.2 crashes and 4.5 hangs on exit while Python-defined operators or panels are
    # still registered (any add-on's, not just ours): unregister before Blender shuts down.
    atexit.register(_unregister_at_exit, package)
    return package


def _unregister_at_exit(package):
    import bpy
    if hasattr(bpy.types.Object, "mass_spring"):
        package.unregister()


def submodule(name: str):
    package = load_addon()
    return importlib.import_module(f"{package.__name__}.{name}")


def reset_scene():
    """An empty scene (factory settings); the add-on stays registered."""
    import bpy
    load_addon()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_current = 1, 24, 1
    scene.render.fps, scene.render.fps_base = 24, 1.0
    return scene


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
