"""Viewport overlay: rod (rigid) edges drawn thick blue, rope edges thick brown, in the
colours the renders use (palette.py).

Marks are plain edge attributes, which Blender itself doesn't display; seams or Freestyle
marks would have been visible but belong to the user. So the add-on draws them, in Object
and Edit Mode, for the selected objects (at their current, possibly baked, positions).
"""

from __future__ import annotations

import bpy
import numpy as np

from . import palette
from .mesh_arrays import RIGID_ATTRIBUTE, ROPE_ATTRIBUTE

COLORS = {
    RIGID_ATTRIBUTE: palette.display(palette.ROD),
    ROPE_ATTRIBUTE: palette.display(palette.ROPE),
}
LINE_WIDTH = 4.0

_handle = None


def _marked_edges_edit_mode(mesh) -> dict | None:
    """{name: (2·M, 3) local end points} from the edit-mode BMesh; None when this Blender's
    BMesh API has no boolean layers (4.2 has none, 4.5 has them)."""
    import bmesh
    bm = bmesh.from_edit_mesh(mesh)
    layers = getattr(bm.edges.layers, "bool", None)
    if layers is None:
        return None
    result = {}
    for name in COLORS:
        layer = layers.get(name)
        if layer is None:
            continue
        coords = [v.co[:] for e in bm.edges if e[layer] and not e.hide for v in e.verts]
        if coords:
            result[name] = np.array(coords, dtype=np.float64)
    return result


def _edge_masks(mesh) -> dict:
    masks = {}
    for name in COLORS:
        attribute = mesh.attributes.get(name)
        if attribute is not None and attribute.domain == 'EDGE' and attribute.data_type == 'BOOLEAN':
            mask = np.zeros(len(mesh.edges), dtype=bool)
            attribute.data.foreach_get("value", mask)
            masks[name] = mask
    return masks


# Blender 4.2 can't read boolean BMesh layers from Python, nor mesh attributes in Edit
# Mode: there, Edit Mode shows the marks as they were when last seen in Object Mode (the
# mark operator passes through Object Mode on those versions, so its own marks show).
_object_mode_marks: dict = {}


def _can_read_edit_mode() -> bool:
    import bmesh
    return hasattr(bmesh.types.BMLayerAccessEdge, "bool")


def _local_segments_object_mode(obj, depsgraph=None) -> dict:
    mesh = obj.data
    masks = {name: mask for name, mask in _edge_masks(mesh).items() if mask.any()}
    local = {}
    if masks:
        source = mesh
        if depsgraph is not None:
            evaluated = obj.evaluated_get(depsgraph).data
            if len(evaluated.vertices) == len(mesh.vertices):
                source = evaluated
        co = np.empty(len(source.vertices) * 3, dtype=np.float32)
        source.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3)
        pairs = np.empty(len(mesh.edges) * 2, dtype=np.int32)
        mesh.edges.foreach_get("vertices", pairs)
        pairs = pairs.reshape(-1, 2)
        for name, mask in masks.items():
            local[name] = co[pairs[mask].ravel()].astype(np.float64)
    _object_mode_marks[mesh.name] = local
    return local


def remember_marks(obj) -> None:
    """Record the marks of an object in Object Mode (for Edit Mode on Blender 4.2)."""
    _local_segments_object_mode(obj)


def _local_segments(obj, depsgraph=None) -> dict:
    mesh = obj.data
    if not mesh.is_editmode:
        return _local_segments_object_mode(obj, depsgraph)
    if _can_read_edit_mode():
        return _marked_edges_edit_mode(mesh)
    return _object_mode_marks.get(mesh.name, {})


def marked_edge_counts(obj) -> dict:
    """{attribute name: number of marked edges}, in Object or Edit Mode."""
    mesh = obj.data
    if mesh.is_editmode:
        return {name: len(points) // 2 for name, points in _local_segments(obj).items()}
    return {name: int(mask.sum()) for name, mask in _edge_masks(mesh).items()}


def marked_edge_segments(obj, depsgraph=None) -> dict:
    """{attribute name: (2·M, 3) world-space line end points} of the marked edges.

    Object Mode uses the evaluated mesh when its vertices still match the base mesh (so the
    marks move with a baked animation), else the base mesh.
    """
    matrix = np.array(obj.matrix_world, dtype=np.float64)
    local = _local_segments(obj, depsgraph)
    return {name: points @ matrix[:3, :3].T + matrix[:3, 3] for name, points in local.items()}


def _preferences():
    addon = bpy.context.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None


def draw_marks() -> None:
    import gpu
    from gpu_extras.batch import batch_for_shader

    preferences = _preferences()
    if preferences is not None and not preferences.show_edge_marks:
        return
    context = bpy.context
    objects = [o for o in (context.selected_objects or []) if o.type == 'MESH']
    if context.object is not None and context.object.type == 'MESH' and context.object not in objects:
        objects.append(context.object)
    if not objects:
        return
    depsgraph = context.evaluated_depsgraph_get()
    shader = gpu.shader.from_builtin('POLYLINE_UNIFORM_COLOR')
    region = context.region
    gpu.state.blend_set('ALPHA')
    gpu.state.depth_test_set('LESS_EQUAL')
    shader.uniform_float("viewportSize", (region.width, region.height))
    shader.uniform_float("lineWidth", LINE_WIDTH)
    for obj in objects:
        for name, points in marked_edge_segments(obj, depsgraph).items():
            batch = batch_for_shader(shader, 'LINES', {"pos": points.astype(np.float32)})
            shader.uniform_float("color", COLORS[name])
            batch.draw(shader)
    gpu.state.depth_test_set('NONE')
    gpu.state.blend_set('NONE')


def _draw_safely():
    try:
        draw_marks()
    except Exception as ex:  # never break the viewport for an overlay
        print(f"Mass–Spring Baker overlay: {ex}")


def register():
    global _handle
    if not bpy.app.background and _handle is None:
        _handle = bpy.types.SpaceView3D.draw_handler_add(_draw_safely, (), 'WINDOW', 'POST_VIEW')


def unregister():
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, 'WINDOW')
        _handle = None
