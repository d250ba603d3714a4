"""Live preview: the simulation plays with the timeline, no bake needed.

While an object's Live Preview is on, a frame change simulates from the last computed
frame to the new one with the bake's own job (bake.BakeJob, so the numbers are a bake's)
and shows the result through a Mesh Cache modifier that reads a PC2 file in Blender's
temporary folder: the mesh itself stays as modelled. Computed frames stay (in the job's
buffer and in the file), so scrubbing back shows them at once and a jump ahead computes
the frames between.

A change of the settings, the mesh, its vertex groups, the scene's gravity or frame range,
or the colliders (live_signature), or an object or collider found elsewhere than the job
sampled it at a frame (its animation changed), drops every frame; the next frame change
computes them again. Bake takes a preview's job over while it is still valid (take_job):
what was computed is not computed again, and the bake is the one the preview showed; a
written bake switches the preview off (its modifier would cover the bake).

In Blender's window a frame change computes for at most UI_BUDGET_SECONDS and a timer
goes on from there, so a long frame never freezes the UI; in background mode (scripts,
tests) a frame change computes up to its frame at once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass

import bpy
import numpy as np

from . import bake, colliders, writers
from .bake import BakeJob
from .errors import BakeError
from .mesh_arrays import edge_vertices, vertex_positions

UI_BUDGET_SECONDS = 0.1

# Settings that change what is shown or stored, not the motion.
DISPLAY_SETTINGS = {"rna_type", "name", "live_preview", "show_forces", "output", "pc2_path"}


@dataclass
class Preview:
    """One object's live simulation: the job, what it was made from, and how many frames
    of the range the PC2 file holds."""

    job: BakeJob
    signature: str
    path: str
    written: int = 0

    @property
    def frames(self) -> np.ndarray:
        return self.job.frames

    def computed(self) -> int:
        return self.job.simulation.frames_done if self.job.simulation is not None else 0


_previews: dict[int, Preview] = {}           # by Object.session_uid
_failures: dict[int, tuple[str, str]] = {}   # why a preview stopped, and its signature then


def key(obj) -> int:
    return obj.session_uid


def status(obj) -> str:
    """What the panel says about the preview of `obj`."""
    if key(obj) in _failures:
        return _failures[key(obj)][0]
    preview = _previews.get(key(obj))
    if preview is None:
        return "no frames cached yet: change the frame to compute"
    return f"{preview.computed()} of {len(preview.frames)} frames cached"


# ---------------------------------------------------------------------------------------
# What a preview depends on


def _digest_array(digest, array) -> None:
    array = np.ascontiguousarray(array)
    digest.update(str((array.dtype.str, array.shape)).encode())
    digest.update(array.tobytes())


def _corners(mesh) -> np.ndarray:
    corners = np.empty(len(mesh.loops), dtype=np.int32)
    mesh.loops.foreach_get("vertex_index", corners)
    return corners


def _int_attribute(mesh, name: str, width: int, fallback) -> np.ndarray:
    """Blender's own integer attribute `name` (edge ends, face corners: read at once,
    where the edges' and loops' properties take a call per element), else fallback()."""
    attribute = mesh.attributes.get(name)
    if attribute is None or attribute.data_type not in ('INT', 'INT32_2D'):
        return fallback()
    values = np.empty(len(attribute.data) * width, dtype=np.int32)
    attribute.data.foreach_get("value", values)
    return values


def live_signature(scene, obj, depsgraph) -> str:
    """A digest of everything a preview's motion depends on but the animation: the
    object's settings, its mesh and vertex groups, the scene's gravity, frame rate and
    range, and the colliders (which ones, their shape, thickness and friction)."""
    digest = hashlib.sha1()
    settings = obj.mass_spring
    values = []
    for name in settings.bl_rna.properties.keys():
        if name not in DISPLAY_SETTINGS:
            value = getattr(settings, name)
            values.append((name, tuple(value) if hasattr(value, "__len__") and not isinstance(value, str) else value))
    render = scene.render
    values.append(("scene", tuple(scene.gravity), scene.use_gravity, render.fps, render.fps_base,
                   scene.frame_start, scene.frame_end, render.frame_map_old, render.frame_map_new))
    digest.update(repr(values).encode())
    mesh = obj.data
    _digest_array(digest, vertex_positions(mesh))
    _digest_array(digest, _int_attribute(mesh, ".edge_verts", 2, lambda: edge_vertices(mesh)))
    _digest_array(digest, _int_attribute(mesh, ".corner_vert", 1, lambda: _corners(mesh)))
    for attribute in mesh.attributes:
        if attribute.domain == 'EDGE' and attribute.data_type in ('BOOLEAN', 'FLOAT'):
            values = np.empty(len(mesh.edges), dtype=bool if attribute.data_type == 'BOOLEAN' else np.float32)
            attribute.data.foreach_get("value", values)
            digest.update(attribute.name.encode())
            _digest_array(digest, values)
    for group in obj.vertex_groups:
        digest.update(group.name.encode())
    digest.update(repr([(v.index, [(g.group, g.weight) for g in v.groups]) for v in mesh.vertices
                        if len(v.groups)]).encode())
    for collider in colliders.scene_colliders(scene, obj, depsgraph):
        digest.update(repr((collider.name, float(collider.collision.thickness_outer),
                            float(collider.mass_spring_collision.friction),
                            colliders.is_static(collider))).encode())
        if colliders.is_static(collider):
            verts, tris = colliders.world_triangles(collider, depsgraph)
            _digest_array(digest, verts)
            _digest_array(digest, tris)
    return digest.hexdigest()


def sampled_here(preview: Preview, scene, obj, depsgraph, frame: int) -> bool:
    """Whether the object and the moving colliders are at `frame` where the job sampled
    them (their animation did not change since)."""
    job = preview.job
    k = frame - int(preview.frames[0])
    if not 0 <= k < len(job._matrices):
        return True
    if not np.allclose(np.array(obj.matrix_world, dtype=np.float64), job._matrices[k], rtol=0, atol=1e-9):
        return False
    reader = job.colliders
    if reader is None or not reader.moving or k >= len(reader.frames.moving_vertices):
        return True
    now = [colliders.world_triangles(c, depsgraph)[0] for c in reader.moving_objects]
    now = np.concatenate(now) if now else np.zeros((0, 3))
    return now.shape == reader.frames.moving_vertices[k].shape and np.allclose(
        now, reader.frames.moving_vertices[k], rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------------
# The file and the modifier


def cache_path(obj) -> str:
    folder = bpy.app.tempdir or tempfile.gettempdir()
    return os.path.join(folder, f"mass_spring_live_{os.getpid()}_{key(obj)}.pc2")


def _show(obj, preview: Preview) -> None:
    """The Live Preview modifier reads the preview's file (added first in the stack)."""
    modifier = obj.modifiers.get(writers.LIVE_MODIFIER_NAME)
    if modifier is None or modifier.type != 'MESH_CACHE':
        writers.add_mesh_cache(obj, preview.path, int(preview.frames[0]), name=writers.LIVE_MODIFIER_NAME)
        modifier = obj.modifiers[writers.LIVE_MODIFIER_NAME]
    modifier.interpolation = 'NONE'  # one sample per frame: the frames as computed
    if modifier.filepath != preview.path:
        modifier.filepath = preview.path
    if modifier.frame_start != float(preview.frames[0]):
        modifier.frame_start = float(preview.frames[0])


def _write_new_frames(obj, preview: Preview) -> None:
    """The frames computed since the last write into the file; the object shows them."""
    done = preview.computed()
    if done <= preview.written:
        return
    local = preview.job.simulation.local_positions
    row = local.shape[1] * 3 * 4
    with open(preview.path, "r+b") as handle:
        handle.seek(writers.PC2_HEADER.size + preview.written * row)
        np.ascontiguousarray(local[preview.written:done], dtype="<f4").tofile(handle)
    preview.written = done
    obj.update_tag(refresh={'DATA'})


def _start(scene, obj, signature: str) -> Preview:
    """A new preview of `obj`: its job, and a file holding the modelled shape at every
    frame until computed."""
    stop(obj, remove_modifier=False)
    job = BakeJob(scene, obj)
    while job.simulation is None:  # samples the transforms, makes the simulation
        job.step(0.05, frames=1)
    preview = Preview(job=job, signature=signature, path=cache_path(obj))
    rest = np.broadcast_to(job.arrays.local_positions.astype(np.float32),
                           (len(job.frames), job.arrays.vertex_count, 3))
    writers.write_pc2(preview.path, int(job.frames[0]), rest)
    _previews[key(obj)] = preview
    _show(obj, preview)
    return preview


def stop(obj, remove_modifier: bool = True) -> None:
    """Drop the preview of `obj` (and, with remove_modifier, the modifier showing it)."""
    preview = _previews.pop(key(obj), None)
    _failures.pop(key(obj), None)
    if preview is not None:
        preview.job.cancel()
        if os.path.exists(preview.path):
            os.remove(preview.path)
    if remove_modifier:
        modifier = obj.modifiers.get(writers.LIVE_MODIFIER_NAME)
        if modifier is not None:
            obj.modifiers.remove(modifier)


# ---------------------------------------------------------------------------------------
# Frame changes


def is_live(obj) -> bool:
    settings = getattr(obj, "mass_spring", None)
    return obj.type == 'MESH' and settings is not None and settings.enabled and settings.live_preview


def update(scene, obj, budget_seconds: float | None = None) -> bool:
    """Bring the preview of `obj` to the scene's frame: start or restart it if what it
    depends on changed, then compute up to the frame (for at most `budget_seconds`; None:
    all). True when the frame is shown; a failure stops the preview with its message
    (status)."""
    if obj.mode == 'EDIT':
        return True
    if not is_live(obj):
        if key(obj) in _previews or key(obj) in _failures:
            stop(obj)
        return True
    depsgraph = bpy.context.evaluated_depsgraph_get()
    frame = scene.frame_current
    signature = live_signature(scene, obj, depsgraph)
    if _failures.get(key(obj), ("", ""))[1] == signature:
        return True  # it failed with these very inputs: change something to try again
    try:
        preview = _previews.get(key(obj))
        if preview is None or preview.signature != signature or not sampled_here(preview, scene, obj, depsgraph, frame):
            preview = _start(scene, obj, signature)
        wanted = int(np.clip(frame - int(preview.frames[0]) + 1, 1, len(preview.frames)))
        deadline = None if budget_seconds is None else time.perf_counter() + budget_seconds
        while preview.computed() < wanted:
            left = 1e9 if deadline is None else deadline - time.perf_counter()
            if left <= 0:
                break
            preview.job.step(min(left, 0.05), frames=wanted)
            _write_new_frames(obj, preview)
        return preview.computed() >= wanted
    except BakeError as ex:
        stop(obj, remove_modifier=False)
        _failures[key(obj)] = (f"stopped: {ex}", signature)
        return True


def _update_all(scene, budget_seconds: float | None) -> bool:
    done = True
    for obj in scene.objects:
        if is_live(obj):
            done = update(scene, obj, budget_seconds) and done
    return done


def _continue() -> float | None:
    """Timer: go on computing the frame the timeline is at (Blender's window only)."""
    scene = bpy.context.scene
    if bake.setting_frames:
        return 0.05  # a bake is reading the animation: later
    if scene is None or _update_all(scene, UI_BUDGET_SECONDS):
        return None
    return 0.01


def _budget() -> float | None:
    """How long a frame change may compute: all it takes in background mode (scripts,
    tests) and while Blender renders (a render shows the frame as computed), else
    UI_BUDGET_SECONDS."""
    rendering = getattr(bpy.app, "is_job_running", lambda _kind: False)("RENDER")
    return None if bpy.app.background or rendering else UI_BUDGET_SECONDS


def _drop_deleted() -> None:
    """Previews whose object is gone (deleted, or its preview switched off by undo)."""
    live = {obj.session_uid for obj in bpy.data.objects if is_live(obj)}
    for gone in set(_previews) - live:
        preview = _previews.pop(gone)
        preview.job.simulation = None
        if os.path.exists(preview.path):
            os.remove(preview.path)
    for gone in set(_failures) - live:
        del _failures[gone]


@bpy.app.handlers.persistent
def on_frame_change(scene, _depsgraph=None) -> None:
    if bake.setting_frames:
        return
    _drop_deleted()
    budget = _budget()
    if not _update_all(scene, budget) and not bpy.app.timers.is_registered(_continue):
        bpy.app.timers.register(_continue, first_interval=0.01)


@bpy.app.handlers.persistent
def on_load(_path=None) -> None:
    """A new file: the previews were the last file's."""
    _previews.clear()
    _failures.clear()


def take_job(scene, obj, overrides: dict | None = None) -> BakeJob | None:
    """The job of the live preview of `obj` for a bake, if it is still what the bake would
    compute (no overrides, nothing changed), else None. Either way the preview lets go of
    it; the bake, once written, switches the preview off (after_bake), and a cancelled one
    leaves it on, to compute again at the next frame change."""
    preview = _previews.pop(key(obj), None)
    if preview is None:
        return None
    if os.path.exists(preview.path):
        os.remove(preview.path)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    if (overrides or not is_live(obj) or preview.signature != live_signature(scene, obj, depsgraph)
            or not sampled_here(preview, scene, obj, depsgraph, scene.frame_current)):
        preview.job.cancel()
        return None
    return preview.job


def after_bake(obj) -> None:
    """A bake was written: its shape keys or cache show the motion, the preview would
    cover them."""
    if obj.mass_spring.live_preview:
        obj.mass_spring.live_preview = False  # its update removes the modifier
    stop(obj)


def live_preview_changed(settings, context) -> None:
    """The panel's toggle: off removes the preview; on shows the current frame."""
    obj = settings.id_data
    if not settings.live_preview:
        stop(obj)
    elif not update(context.scene, obj, _budget()) and not bpy.app.timers.is_registered(_continue):
        bpy.app.timers.register(_continue, first_interval=0.01)


def register():
    bpy.app.handlers.frame_change_post.append(on_frame_change)
    bpy.app.handlers.load_post.append(on_load)


def unregister():
    for handlers, function in ((bpy.app.handlers.frame_change_post, on_frame_change),
                               (bpy.app.handlers.load_post, on_load)):
        if function in handlers:
            handlers.remove(function)
    if bpy.app.timers.is_registered(_continue):
        bpy.app.timers.unregister(_continue)
    _previews.clear()
    _failures.clear()
