"""Live preview: the simulation plays with the timeline, no bake needed.

While an object's Live Preview is on, a frame change simulates from the last computed
frame to the new one with a bake's own job (bake.BakeJob, so the numbers are a bake's)
and shows the result through the modifier 'Mass–Spring Live Preview', a Mesh Cache that
reads a PC2 file in Blender's temporary folder: the mesh itself stays as modelled. The
file holds the frames computed so far (a frame beyond them shows the last one), so
scrubbing back shows them at once and a jump ahead computes the frames between.

A change of what the motion depends on (live_signature: the settings, the mesh, its
vertex groups, the scene's gravity and frame range, the colliders, the animation of the
object, its parents and the moving colliders), or the object found elsewhere than the job
sampled it at a frame, drops every frame; the next frame change computes them again. A
bake takes the preview's simulation over when it was made from the bake's very inputs
(hand_over, BakeJob.adopt): nothing is computed twice and the bake is what the preview
showed. A written bake switches the preview off (its modifier would cover the bake).

Objects with Self Collision on whose previews are on are simulated together, as a bake of
them would be (bake.colliding_groups, bake.GroupJob): each shows its share, and a change
of any of them computes the group again.

In Blender's window a frame change computes for at most UI_BUDGET_SECONDS and a timer
goes on from there, so a long frame never freezes the UI; in background mode (scripts,
tests) and while rendering, a frame change computes up to its frame at once. Nothing
raises out of a frame change: a preview that fails stops, and the panel says why.
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
MODIFIER = writers.LIVE_MODIFIER_NAME

# Settings that change what is shown or stored, not the motion.
DISPLAY_SETTINGS = {"rna_type", "name", "live_preview", "show_forces", "output", "pc2_path"}


@dataclass
class Preview:
    """One object's live simulation: the job, what it was made from, the file showing it
    and how many frames of the range the file holds."""

    job: BakeJob
    signature: str
    path: str
    written: int = 0
    together: bake.GroupJob | None = None  # the simulation of several it is a share of

    @property
    def frames(self) -> np.ndarray:
        return self.job.frames

    def computed(self) -> int:
        return self.job.simulation.frames_done if self.job.simulation is not None else 0


@dataclass
class Failure:
    """Why a preview stopped; with the signature it failed with when it failed while
    simulating (it is tried again once that changes), else None (bad input, cheap to
    check again at the next frame change)."""

    message: str
    signature: str | None = None


_previews: dict[int, Preview] = {}   # by Object.session_uid
_failures: dict[int, Failure] = {}


def key(obj) -> int:
    return obj.session_uid


def status(obj) -> str:
    """What the panel says about the preview of `obj`."""
    if key(obj) in _failures:
        return _failures[key(obj)].message
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


def _fcurves(action) -> list:
    if bpy.app.version < (4, 4, 0):
        return list(action.fcurves)
    return [curve for layer in action.layers for strip in layer.strips
            for bag in strip.channelbags for curve in bag.fcurves]


def _digest_animation(digest, owner) -> None:
    """The keyframes and drivers of `owner` (an ID), if it is animated."""
    animation = getattr(owner, "animation_data", None)
    if animation is None:
        return
    if animation.action is not None:
        digest.update(animation.action.name.encode())
        for curve in _fcurves(animation.action):
            digest.update(f"{curve.data_path}[{curve.array_index}]".encode())
            points = np.empty(6 * len(curve.keyframe_points), dtype=np.float32)
            for name, part in (("co", 0), ("handle_left", 2), ("handle_right", 4)):
                values = np.empty(2 * len(curve.keyframe_points), dtype=np.float32)
                curve.keyframe_points.foreach_get(name, values)
                points[part::6], points[part + 1::6] = values[0::2], values[1::2]
            _digest_array(digest, points)
    for driver in animation.drivers:
        digest.update(f"{driver.data_path}[{driver.array_index}]{driver.driver.expression}".encode())


def _digest_motion(digest, obj) -> None:
    """What moves `obj` over time: its and its parents' animation and constraints."""
    while obj is not None:
        digest.update(repr((obj.name, [c.type for c in obj.constraints], tuple(map(tuple, obj.matrix_parent_inverse)))).encode())
        _digest_animation(digest, obj)
        obj = obj.parent


def live_signature(scene, obj, depsgraph) -> str:
    """A digest of everything a preview's motion depends on: the object's settings, its
    mesh and vertex groups, the scene's gravity, frame rate and range, the colliders
    (which ones, their shape, thickness and friction) and the animation that moves the
    object and the moving colliders."""
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
    _digest_motion(digest, obj)
    for collider in colliders.scene_colliders(scene, obj, depsgraph):
        static = colliders.is_static(collider)
        digest.update(repr((collider.name, float(collider.collision.thickness_outer),
                            float(collider.mass_spring_collision.friction), static)).encode())
        if static:
            verts, tris = colliders.world_triangles(collider, depsgraph)
            _digest_array(digest, verts)
            _digest_array(digest, tris)
        else:  # what moves or deforms it: its animation, its shape, its modifiers' objects
            _digest_motion(digest, collider)
            _digest_animation(digest, collider.data.shape_keys)
            digest.update(repr((len(collider.data.vertices), len(collider.data.polygons))).encode())
            _digest_array(digest, vertex_positions(collider.data))
            for modifier in collider.modifiers:
                target = getattr(modifier, "object", None)
                digest.update(repr((modifier.type, modifier.name, modifier.show_viewport,
                                    target.name if target is not None else None)).encode())
                if target is not None:
                    _digest_motion(digest, target)
    return digest.hexdigest()


def sampled_here(preview: Preview, obj, frame: int) -> bool:
    """Whether the object is at `frame` where the job sampled it (what moves it did not
    change in a way the signature misses, e.g. a constraint's target)."""
    job = preview.job
    k = frame - int(preview.frames[0])
    if not 0 <= k < len(job._matrices):
        return True
    return np.allclose(np.array(obj.matrix_world, dtype=np.float64), job._matrices[k], rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------------
# The file and the modifier


def cache_path(obj) -> str:
    folder = bpy.app.tempdir or tempfile.gettempdir()
    return os.path.join(folder, f"mass_spring_live_{os.getpid()}_{key(obj)}.pc2")


def _show(obj, preview: Preview) -> None:
    """The Live Preview modifier reads the preview's file: added (again, if removed) after
    a PC2 bake's Mesh Cache, else first in the stack."""
    modifier = obj.modifiers.get(MODIFIER)
    if modifier is None or modifier.type != 'MESH_CACHE':
        if modifier is not None:
            obj.modifiers.remove(modifier)
        writers.add_mesh_cache(obj, preview.path, int(preview.frames[0]), name=MODIFIER)
        modifier = obj.modifiers[MODIFIER]
        record = writers.bake_record(obj) or {}
        baked = obj.modifiers.get(record.get("modifier", "")) if record.get("output") == "PC2" else None
        if baked is not None and baked.type == 'MESH_CACHE':  # the preview, not the bake, shows
            writers.move_modifier(obj, modifier, list(obj.modifiers).index(baked))
    modifier.interpolation = 'NONE'  # one sample per frame: the frames as computed
    if modifier.filepath != preview.path:
        modifier.filepath = preview.path
    if modifier.frame_start != float(preview.frames[0]):
        modifier.frame_start = float(preview.frames[0])


def _write_new_frames(obj, preview: Preview) -> None:
    """The frames computed since the last write into the file (its header counts them);
    the object shows them. The file is written anew if it went missing."""
    done = preview.computed()
    if done <= preview.written and os.path.exists(preview.path):
        return
    if done == 0:
        _write_modelled(preview)
        return
    local = preview.job.simulation.local_positions
    if not os.path.exists(preview.path):
        preview.written = 0
    mode = "r+b" if preview.written else "wb"
    with open(preview.path, mode) as handle:
        handle.write(writers.PC2_HEADER.pack(writers.PC2_MAGIC, 1, local.shape[1], float(preview.frames[0]), 1.0, done))
        handle.seek(writers.PC2_HEADER.size + preview.written * local.shape[1] * 12)
        np.ascontiguousarray(local[preview.written:done], dtype="<f4").tofile(handle)
    preview.written = done
    obj.update_tag(refresh={'DATA'})


def _write_modelled(preview: Preview) -> None:
    """A new preview's file: the modelled shape, until the first frame is computed (the
    modifier never reads a missing file)."""
    modelled = preview.job.arrays.local_positions.astype(np.float32)[None]
    with open(preview.path, "wb") as handle:
        handle.write(writers.PC2_HEADER.pack(writers.PC2_MAGIC, 1, modelled.shape[1], float(preview.frames[0]), 1.0, 1))
        np.ascontiguousarray(modelled, dtype="<f4").tofile(handle)
    preview.written = 0  # the simulation's first frame replaces it


def _remove_file(preview: Preview) -> None:
    if os.path.exists(preview.path):
        os.remove(preview.path)


def stop(obj, remove_modifier: bool = True) -> None:
    """Drop the preview of `obj` and its file (and, with remove_modifier, the modifier)."""
    preview = _previews.pop(key(obj), None)
    _failures.pop(key(obj), None)
    if preview is not None:
        preview.job.cancel()
        _remove_file(preview)
    if remove_modifier:
        modifier = obj.modifiers.get(MODIFIER)
        if modifier is not None:
            obj.modifiers.remove(modifier)


# ---------------------------------------------------------------------------------------
# Frame changes


def is_live(obj) -> bool:
    settings = getattr(obj, "mass_spring", None)
    return obj.type == 'MESH' and settings is not None and settings.enabled and settings.live_preview


def simulated_with(scene, obj) -> list:
    """The live objects whose previews are simulated together with that of `obj` (itself
    first if alone): those with Self Collision on that agree with it on the frame range
    and Collisions setting, in the scene's order."""
    if not (is_live(obj) and obj.mass_spring.self_collision):
        return [obj]
    colliding = [other for other in scene.objects
                 if other.type == 'MESH' and other.library is None and is_live(other) and other.mass_spring.self_collision]
    groups = bake.colliding_groups(colliding, lambda other: (bake.frame_range(scene, other),
                                                             bool(bake.BakeSettings(other).use_collisions)))
    return next((members for members in groups.values() if obj in members), [obj])


def update(scene, obj, budget_seconds: float | None = None) -> bool:
    """Bring the preview of `obj`, and of those simulated with it (simulated_with), to the
    scene's frame: start or restart them if what they depend on changed, then compute up
    to the frame (for at most `budget_seconds`; None: all). True when there is nothing
    more to compute; a failure stops the previews with its message (status), never
    raising."""
    members = simulated_with(scene, obj)
    if any(member.mode == 'EDIT' for member in members):
        return True
    if not is_live(obj):
        if key(obj) in _previews or key(obj) in _failures or obj.modifiers.get(MODIFIER) is not None:
            try:
                stop(obj)
            except Exception:  # noqa: BLE001 (a frame change must not raise)
                pass
        return True
    deadline = None if budget_seconds is None else time.perf_counter() + budget_seconds
    signature = None
    try:
        depsgraph = bpy.context.evaluated_depsgraph_get()
        if len(members) == 1:
            signature = live_signature(scene, obj, depsgraph)
        else:  # what any of them depends on
            digest = hashlib.sha256()
            for member in members:
                digest.update(member.name.encode() + live_signature(scene, member, depsgraph).encode())
            signature = digest.hexdigest()
        if any(getattr(_failures.get(key(member)), "signature", None) == signature for member in members):
            return True  # it failed simulating these very inputs: change something to try again
        previews = [_previews.get(key(member)) for member in members]
        if any(preview is None or preview.signature != signature or not sampled_here(preview, member, scene.frame_current)
               for preview, member in zip(previews, members)):
            previews = _start(scene, members, signature)
        for preview, member in zip(previews, members):
            _show(member, preview)
        first = previews[0]
        wanted = int(np.clip(scene.frame_current - int(first.frames[0]) + 1, 1, len(first.frames)))
        while first.computed() < wanted:
            left = 1e9 if deadline is None else deadline - time.perf_counter()
            if left <= 0:
                return False
            try:
                (first.together or first.job).step(min(left, 0.05), frames=wanted)
            except BakeError as ex:
                raise _SimulationFailed(str(ex)) from ex
            for preview, member in zip(previews, members):
                _write_new_frames(member, preview)
        for preview, member in zip(previews, members):
            _write_new_frames(member, preview)  # also a file that went missing
        return True
    except _SimulationFailed as ex:
        failure = Failure(f"stopped: {ex}", signature)
    except BakeError as ex:  # bad input, found before simulating
        failure = Failure(f"stopped: {ex}")
    except Exception as ex:  # noqa: BLE001 (a frame change must not raise)
        failure = Failure(f"stopped: {type(ex).__name__}: {ex}", signature)
    for member in members:
        _fail(member, failure)
    return True


def _start(scene, members: list, signature: str) -> list[Preview]:
    """New previews of `members` from what they are now: one bake's job, or for several
    one simulation of them all (bake.GroupJob) whose shares they show."""
    for member in members:
        stop(member, remove_modifier=False)
    jobs = [BakeJob(scene, member, writes=False) for member in members]
    together = bake.GroupJob(jobs) if len(jobs) > 1 else None
    previews = [Preview(job=job, signature=signature, path=cache_path(member), together=together)
                for job, member in zip(jobs, members)]
    for preview, member in zip(previews, members):
        _previews[key(member)] = preview
        _write_modelled(preview)
    return previews


class _SimulationFailed(Exception):
    pass


def _fail(obj, failure: Failure) -> None:
    """Stop the preview of `obj` (the mesh shows as modelled) and keep why."""
    try:
        stop(obj)
    except Exception:  # noqa: BLE001 (a frame change must not raise)
        pass
    _failures[key(obj)] = failure


def _update_all(scene, budget_seconds: float | None) -> bool:
    """Every live object of `scene` to its frame, and what is left of switched-off or
    disabled ones removed; True when all are done."""
    done, updated = True, set()
    for obj in scene.objects:
        if key(obj) in updated:
            continue  # with the group it is simulated with
        if obj.type == 'MESH' and obj.library is None and (  # a linked object is its library's
                is_live(obj) or key(obj) in _previews or key(obj) in _failures
                or obj.modifiers.get(MODIFIER) is not None):
            updated.update(key(member) for member in simulated_with(scene, obj))
            done = update(scene, obj, budget_seconds) and done
    return done


def _drop_deleted() -> None:
    """Previews whose object is gone (deleted, or its preview switched off by undo)."""
    live = {obj.session_uid for obj in bpy.data.objects if obj.library is None and is_live(obj)}
    for gone in set(_previews) - live:
        _remove_file(_previews.pop(gone))
    for gone in set(_failures) - live:
        del _failures[gone]


def _continue() -> float | None:
    """Timer: go on computing the frame the timeline is at (Blender's window only)."""
    if bake.setting_frames:
        return 0.05  # a bake is reading the animation: later
    scene = bpy.context.scene
    if scene is None or _update_all(scene, UI_BUDGET_SECONDS):
        return None
    return 0.01


def _budget() -> float | None:
    """How long a frame change may compute: all it takes in background mode (scripts,
    tests) and while Blender renders (a render shows the frame as computed), else
    UI_BUDGET_SECONDS."""
    rendering = getattr(bpy.app, "is_job_running", lambda _kind: False)("RENDER")
    return None if bpy.app.background or rendering else UI_BUDGET_SECONDS


def _go_on_later(done: bool) -> None:
    if not done and not bpy.app.timers.is_registered(_continue):
        bpy.app.timers.register(_continue, first_interval=0.01)


@bpy.app.handlers.persistent
def on_frame_change(scene, _depsgraph=None) -> None:
    if bake.setting_frames:
        return
    _drop_deleted()
    _go_on_later(_update_all(scene, _budget()))


@bpy.app.handlers.persistent
def on_load(_path=None) -> None:
    """A new file: the previews were the last file's."""
    for preview in _previews.values():
        _remove_file(preview)
    _previews.clear()
    _failures.clear()


# Objects whose preview modifier is left out of the file being saved (on_save_pre).
_hidden_for_saving: list = []


@bpy.app.handlers.persistent
def on_save_pre(_path=None) -> None:
    """The preview modifiers stay out of a saved file: they read a temporary file that is
    gone once this Blender quits, so the file opened elsewhere (a render farm, Blender
    without the add-on) would warn of a missing cache and keep a dead modifier. Opened with
    the add-on, a live object computes its preview again at the first frame change
    (tests/test_live.py, test_saving_and_reopening_while_live_loses_nothing)."""
    _hidden_for_saving.clear()
    for obj in bpy.data.objects:
        modifier = obj.modifiers.get(MODIFIER) if obj.type == 'MESH' and obj.library is None else None
        if modifier is not None and modifier.type == 'MESH_CACHE':
            obj.modifiers.remove(modifier)
            _hidden_for_saving.append(obj.name)


@bpy.app.handlers.persistent
def on_save_post(_path=None) -> None:
    """The modifiers on_save_pre left out show their previews again."""
    for name in _hidden_for_saving:
        obj = bpy.data.objects.get(name)
        preview = _previews.get(key(obj)) if obj is not None else None
        if preview is not None:
            _show(obj, preview)
            obj.update_tag(refresh={'DATA'})
    _hidden_for_saving.clear()


def hand_over(obj, job: BakeJob) -> None:
    """A bake of `obj` starts with `job`: it takes over the preview's simulation if that
    was made from the same inputs (BakeJob.adopt; a share of previews together goes to
    the bake's GroupJob to take over: GroupJob.adopt). The preview lets go of it either
    way; a written bake switches the preview off (after_bake), a cancelled one leaves it
    on, to compute again at the next frame change."""
    preview = _previews.pop(key(obj), None)
    if preview is None:
        return
    _remove_file(preview)
    if preview.together is not None:
        job.previewed_with = preview.together
    elif not job.adopt(preview.job):
        preview.job.cancel()


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
    else:
        _go_on_later(update(context.scene, obj, _budget()))


HANDLERS = (("frame_change_post", on_frame_change), ("load_post", on_load),
            ("save_pre", on_save_pre), ("save_post", on_save_post))


def register():
    for handlers, function in HANDLERS:
        getattr(bpy.app.handlers, handlers).append(function)


def unregister():
    for handlers, function in ((getattr(bpy.app.handlers, name), function) for name, function in HANDLERS):
        if function in handlers:
            handlers.remove(function)
    if bpy.app.timers.is_registered(_continue):
        bpy.app.timers.unregister(_continue)
    # without the add-on nothing would update the modifiers: they go, and their files
    for obj in bpy.data.objects:
        modifier = obj.modifiers.get(MODIFIER) if obj.type == 'MESH' else None
        if modifier is not None and obj.library is None:
            obj.modifiers.remove(modifier)
    on_load()
