"""The bake: one code path for the modal operator, ``execute`` and headless scripts.

    job = BakeJob(scene, obj)      # checks everything that can be checked up front
    while not job.step(0.1): ...   # world matrices per frame, then one frame of physics per step
    result = job.finish()          # the only place that writes to the object

``bake_object`` runs a job to the end. Until ``finish`` the object is not touched (only
the scene's current frame moves while the object's animated transform is sampled, and
it is put back), so an error or a cancel leaves no trace.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property

import bpy
import numpy as np

from . import colliders, forces, writers
from .errors import BakeCancelled, BakeError
from .mesh_arrays import mesh_to_arrays
from .properties import MAX_FRAME
from .simulation import (FrameSimulation, Part, SimulationSettings, import_core, name_parts,
                         simulate_world_positions, transform_points)

__all__ = [
    "BakeCancelled", "BakeError", "BakeJob", "BakeResult", "BakeSettings",
    "bake_object", "bake_scene", "free_bake", "has_bake",
]

# The largest single-precision number: what a float property holds for an Inf typed in.
FLOAT32_MAX = float(np.finfo(np.float32).max)

# The smallest Accuracy but 0 that the core takes (its tolerance; test_addon_bake.py,
# test_the_least_accuracy_bakes_and_a_smaller_one_is_named).
LEAST_ACCURACY = 1e-9

# Modifiers that move vertices on top of the bake: the motion would be applied twice.
DEFORMING_MODIFIERS = {'ARMATURE', 'CLOTH', 'SOFT_BODY', 'MESH_CACHE', 'MESH_SEQUENCE_CACHE',
                       'HOOK', 'LATTICE', 'CURVE', 'WAVE', 'SURFACE_DEFORM', 'MESH_DEFORM',
                       'LAPLACIANDEFORM', 'SHRINKWRAP', 'DISPLACE', 'SIMPLE_DEFORM'}

# Weight of sampling one frame's transform relative to simulating one frame (for progress).
TRANSFORM_WEIGHT = 0.05


@dataclass
class BakeResult:
    object_name: str
    output: str  # 'SHAPE_KEYS' or 'PC2'
    frame_start: int
    frame_end: int
    simulate_seconds: float
    write_seconds: float
    # (F, N, 3) float32, object space of each frame: exactly what was written.
    local_positions: np.ndarray = field(repr=False)
    warnings: list = field(default_factory=list)
    pc2_file: str = ""  # absolute path of the written PC2 file, for PC2 output
    # One FrameReport per simulated frame: steps, iterations, energy, rod error, time.
    report: list = field(default_factory=list, repr=False)
    # What the simulation ran on, for `positions`: simulate_world_positions' arguments.
    simulation_inputs: tuple = field(default=(), repr=False, compare=False)
    # (F, 4, 4) the object's world matrix at each frame.
    matrices: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def frame_count(self) -> int:
        return self.frame_end - self.frame_start + 1

    def totals(self) -> dict:
        """The report summed over the bake (report_totals)."""
        return report_totals(self.report)

    def world_positions(self) -> np.ndarray:
        """(F, N, 3) world positions of the written frames, from the float32 frames and
        each frame's object matrix: cheap, for drawing and checks to about 1e-6 of the
        coordinates (`positions` re-runs the simulation for the core's float64 values)."""
        return np.stack([transform_points(m, frame.astype(np.float64))
                         for m, frame in zip(self.matrices, self.local_positions)])

    @cached_property
    def positions(self) -> np.ndarray:
        """(F, N, 3) float64 world positions, exactly as the core computed them.

        The bake holds only the float32 frames it writes, so this runs the (deterministic)
        simulation again on first use: it costs as much as the bake's simulation did.
        """
        return simulate_world_positions(*self.simulation_inputs)


def report_totals(report) -> dict:
    """A bake report summed: steps, Newton and linear iterations, seconds simulating, and
    the worst rod length error (the panel shows them for the last bake)."""
    totals = {name: int(sum(getattr(row, name) for row in report))
              for name in ("substeps", "newton_iterations", "linear_iterations")}
    totals["seconds"] = sum(row.ms for row in report) / 1e3
    totals["max_constraint_error"] = max((row.max_constraint_error for row in report), default=0.0)
    return totals


def has_bake(obj) -> bool:
    return writers.bake_record(obj) is not None


def free_bake(obj) -> bool:
    """Remove what the last bake of `obj` added; False if there was none. Refused where its
    shape keys belong to a mesh other objects share (a linked duplicate made after the
    bake): freeing them froze the others too, whose records stayed (found by an
    adversarial test; test_addon_safety.py, test_free_bake_refuses_shape_keys_a_linked_duplicate_shares)."""
    record = writers.bake_record(obj)
    if record is not None and record.get("output") == "SHAPE_KEYS" and obj.data.shape_keys is not None:
        others = [other.name for other in forces.mesh_users(obj) if other != obj]
        if others:
            raise BakeError(
                f"the baked shape keys of '{obj.name}' belong to mesh '{obj.data.name}', which "
                f"{', '.join(repr(o) for o in others[:3])}{' …' if len(others) > 3 else ''} "
                f"share{'s' if len(others) == 1 else ''} (a linked duplicate): freeing them "
                "here would remove their animation too. Give this object its own mesh first "
                "(Object ▸ Relations ▸ Make Single User ▸ Object & Data), or delete the duplicate")
    return writers.free_bake(obj)


class BakeSettings:
    """``obj.mass_spring`` as one bake sees it: `overrides` (setting name → value, e.g.
    {"substeps": 10} from the headless command) win over the stored settings, which stay
    untouched so that a saved .blend keeps the user's (guarded by tests/test_headless.py,
    test_overrides_change_the_bake_not_the_saved_settings)."""

    def __init__(self, obj, overrides: dict | None = None):
        self._stored = obj.mass_spring
        self._overrides = dict(overrides or {})
        unknown = sorted(set(self._overrides) - set(self._stored.bl_rna.properties.keys()))
        if unknown:
            raise ValueError(f"unknown Mass–Spring setting(s) to override: {', '.join(unknown)}")

    def __getattr__(self, name):
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._stored, name)

    def is_property_set(self, name: str) -> bool:
        return name in self._overrides or self._stored.is_property_set(name)

    def not_numbers(self) -> list[str]:
        """The names (as the panel shows them) of the number settings that are NaN or Inf.
        A script can set them; some were taken as 0 or as "automatic" (found by an
        adversarial test: test_addon_bake.py, test_refuses_settings_that_are_not_numbers).
        Blender stores an Inf typed into a field as the largest single-precision number, so
        that counts as Inf too (test_add_menu.py, test_the_add_menu_refuses_infinite_values)."""
        names = []
        for prop in self._stored.bl_rna.properties:
            if prop.type != 'FLOAT':
                continue
            value = np.asarray(getattr(self, prop.identifier), dtype=np.float64)
            if not (np.isfinite(value) & (np.abs(value) < FLOAT32_MAX)).all():
                names.append(prop.name)
        return names


def frame_range(scene, obj, overrides: dict | None = None) -> tuple[int, int]:
    settings = BakeSettings(obj, overrides)
    if settings.use_scene_frame_range:
        return scene.frame_start, scene.frame_end
    return settings.frame_start, settings.frame_end


def simulation_settings(scene, obj, overrides: dict | None = None) -> SimulationSettings:
    settings = BakeSettings(obj, overrides)
    use_gravity = settings.use_gravity and scene.use_gravity
    return SimulationSettings(
        stiffness=settings.stiffness,
        shear_stiffness=settings.shear_stiffness,
        bending_stiffness=settings.bending_stiffness,
        bending_rigidity=settings.bending_rigidity,
        damping=settings.damping,
        gravity=np.array(scene.gravity if use_gravity else (0.0, 0.0, 0.0), dtype=np.float64),
        integrator=settings.integrator,
        rho_inf=settings.rho_inf,
        substeps=settings.substeps,
        # The panel's 1e-9 arrives as 9.99999997e-10 (single precision): the core's least.
        accuracy=max(settings.accuracy, LEAST_ACCURACY) if settings.accuracy > 0 else 0.0,
        fps=scene.render.fps / scene.render.fps_base,
        initial_velocity=np.array(settings.initial_velocity, dtype=np.float64),
        initial_angular_velocity=np.array(settings.initial_angular_velocity, dtype=np.float64),
        self_collision=settings.self_collision,
        self_collision_distance=settings.self_collision_distance,
        self_friction=settings.self_friction,
    )


def default_pc2_name(name: str) -> str:
    """The PC2 file an object bakes to when no path is set: its name made file-safe, and
    where that changed it, a short hash of the name, so that 'Cube.001' and 'Cube_001'
    do not share (and overwrite) one file (tests/test_addon_bake.py)."""
    clean = bpy.path.clean_name(name)
    if clean != name:
        clean += "_" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:6]
    return clean + ".pc2"


def pc2_paths(obj) -> tuple[str, str]:
    """(path as stored in the modifier, absolute path). BakeError if it can't be resolved.
    A relative path is the .blend's ("cache/x.pc2" is "//cache/x.pc2"), and "~" is the home
    folder: Blender would resolve both against the working folder of whichever process
    opens the file, so a render farm would not find the cache (found by an adversarial
    tester; test_addon_bake.py, test_a_relative_pc2_path_is_the_blend_s)."""
    stored = obj.mass_spring.pc2_path or "//" + default_pc2_name(obj.name)
    if not stored.startswith("//"):
        stored = os.path.expanduser(stored)
        if not os.path.isabs(stored):
            stored = "//" + stored
    if stored.startswith("//") and not bpy.data.filepath:
        raise BakeError(
            f"the PC2 file '{stored}' is relative to the .blend, which has not been saved yet: "
            "save the .blend first or choose an absolute path")
    absolute = os.path.normpath(bpy.path.abspath(stored))
    if stored.endswith(("/", "\\")) or os.path.isdir(absolute):
        raise BakeError(f"the PC2 file '{stored}' is a folder: add a file name")
    return stored, absolute


def check_pc2_target(obj, stored: str, absolute: str) -> None:
    """Refuse a PC2 file whose replacement would lose data: the open .blend, an existing
    file that is not a PC2 cache (a texture, another .blend), or the cache another object
    plays (tests/test_addon_safety.py)."""
    where = f"'{obj.name}': the PC2 file '{stored}'"
    if os.path.exists(absolute):
        if bpy.data.filepath and same_file(absolute, bpy.path.abspath(bpy.data.filepath)):
            raise BakeError(f"{where} is the open .blend itself: choose another PC2 File")
        if not writers.is_pc2_file(absolute):
            raise BakeError(
                f"{where} ({absolute}) exists and is not a PC2 cache, so the bake would destroy "
                "it: choose another PC2 File, or delete that file first if it is not needed")
    for other in pc2_users(absolute):
        if other != obj:
            raise BakeError(
                f"{where} is also the cache of '{other.name}', which would then play this "
                f"object's motion: choose another PC2 File for one of them (or Free Bake "
                f"'{other.name}' and remove its Mesh Cache modifier)")


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def pc2_users(absolute: str) -> list:
    """The objects whose bake record or Mesh Cache modifier names the file `absolute`."""
    users = []
    for other in bpy.data.objects:
        record = writers.bake_record(other) or {}
        paths = [record.get("filepath")] if record.get("output") == "PC2" else []
        paths += [m.filepath for m in other.modifiers if m.type == 'MESH_CACHE']
        if any(p and same_file(bpy.path.abspath(p, library=other.library), absolute) for p in paths):
            users.append(other)
    return users


def check_distinct_pc2_files(jobs) -> None:
    """Objects baked together must write different PC2 files (tests/test_addon_safety.py)."""
    owners = {}
    for job in jobs:
        if job.output != 'PC2':
            continue
        stored, absolute = pc2_paths(job.obj)
        key = os.path.normcase(absolute)
        if key in owners:
            raise BakeError(
                f"'{owners[key]}' and '{job.object_name}' would both bake into the PC2 file "
                f"'{stored}': give each object its own PC2 File")
        owners[key] = job.object_name


def check_object(scene, obj, overrides: dict | None = None, writes: bool = True) -> list[str]:
    """Refuse what the bake can't handle without damaging the mesh; return warnings.
    Without `writes` (the live preview, which writes no bake), what only writing shape
    keys or a PC2 bake needs is not checked."""
    if obj is None or obj.type != 'MESH':
        kind = "nothing" if obj is None else f"'{obj.name}', a {obj.type.lower()} object"
        raise BakeError(f"the bake needs a mesh object, got {kind}")
    if obj.mode == 'EDIT' or obj.data.is_editmode:
        raise BakeError(f"'{obj.name}' is in Edit Mode: switch to Object Mode (Tab) before baking")
    linked = obj.library or obj.data.library
    if linked is not None and writes:
        # A linked object or mesh is read only: found before simulating, not when writing
        # (tests/test_addon_bake.py, test_a_linked_object_is_refused_before_simulating).
        what = "object" if obj.library is not None else f"mesh '{obj.data.name}'"
        raise BakeError(f"'{obj.name}': its {what} is linked from {linked.filepath}, so the bake "
                        "cannot write to it: make it local (Object ▸ Relations ▸ Make Local) "
                        "or bake a Library Override of it")
    if not transform_is_static(obj) and not evaluated_by_blender(obj):
        raise BakeError(
            f"'{obj.name}' moves (animation, parent or constraints), but Blender does not "
            "evaluate it: it is Disabled in Viewports or in a disabled or excluded "
            "collection, so its pins would not follow the motion. Enable it (or its "
            "collection) in the viewport to bake it")
    settings = BakeSettings(obj, overrides)
    if not settings.enabled:
        raise BakeError(f"Mass–Spring is not enabled on '{obj.name}': tick it in Properties ▸ Physics")
    not_numbers = settings.not_numbers()
    if not_numbers:
        raise BakeError(f"'{obj.name}': {', '.join(not_numbers)} "
                        f"{'is not a number' if len(not_numbers) == 1 else 'are not numbers'} "
                        "(NaN or Inf): give a value in Properties ▸ Physics ▸ Mass–Spring")
    if 0 < settings.accuracy < np.float32(LEAST_ACCURACY):
        raise BakeError(f"'{obj.name}': Accuracy must be 0 (fixed steps) or at least "
                        f"{LEAST_ACCURACY:g}, got {settings.accuracy:g}")
    record = writers.bake_record(obj) or {}
    if record.get("output") == writers.DAMAGED and writes:
        raise BakeError(
            f"the bake record of '{obj.name}' (its custom property {writers.BAKE_RECORD}) is "
            "damaged, so a new bake cannot tell the last bake's shape keys or Mesh Cache from "
            "yours: Free Bake removes the record (only the record); then remove the last "
            "bake's shape keys or Mesh Cache modifier yourself, or undo to before the change")
    key = obj.data.shape_keys
    if key is not None and writes:
        ours = set(record.get("keys", [])) | ({record.get("basis")} if record.get("keys") else set())
        foreign = [kb.name for kb in key.key_blocks if kb.name not in ours]
        if foreign:
            listed = ", ".join(f"'{n}'" for n in foreign[:4]) + (" …" if len(foreign) > 4 else "")
            raise BakeError(
                f"'{obj.name}' already has shape keys ({listed}). The bake simulates the base mesh "
                "and stores its own shape keys, so it would hide or fight with these: apply or "
                "delete them first (Shape Keys ▸ ⌄ ▸ Delete All Shape Keys / Apply All Shape Keys)")
    if not writes:
        pass
    elif settings.output == 'SHAPE_KEYS':
        users = obj.data.users - int(obj.data.use_fake_user)
        if users > 1:
            raise BakeError(
                f"mesh '{obj.data.name}' is shared by {users} objects and shape keys belong to "
                "the mesh: make it single user (Object ▸ Relations ▸ Make Single User ▸ Object "
                "& Data) or choose PC2 output")
    else:
        check_pc2_target(obj, *pc2_paths(obj))
    if scene.frame_end < scene.frame_start and settings.use_scene_frame_range:
        raise BakeError("the scene's frame range is empty")
    render = scene.render
    if render.frame_map_old != render.frame_map_new:
        raise BakeError(
            f"the scene's Time Stretching ({render.frame_map_old} → {render.frame_map_new}, "
            "Output Properties ▸ Frame Range) would play the baked frames at other times than "
            "they were simulated for: set Old and New to the same value to bake")
    start, end = frame_range(scene, obj, overrides)
    check_frame_range(start, end, len(obj.data.vertices))

    warnings = []
    ours = {record.get("modifier") if record.get("output") == "PC2" else None, writers.LIVE_MODIFIER_NAME}
    for modifier in obj.modifiers:
        if modifier.type in DEFORMING_MODIFIERS and modifier.name not in ours and modifier.show_viewport:
            warnings.append(
                f"modifier '{modifier.name}' ({modifier.type.replace('_', ' ').title()}) moves the "
                "vertices on top of the bake: disable it if the bake should be the only motion")
    return warnings


# Damping this many times a spring's critical damping, and friction coefficients above
# this, are far beyond real materials and slow the bake down many times (an 8 x 8 sheet:
# damping 400 x critical 4 x slower, 40 000 x 120 x; self friction 3 30 x slower than 0.3):
# warned about, not refused (test_settings_far_beyond_real_materials_are_named).
OVERDAMPED = 100.0
HIGHEST_FRICTION = 2.0


def slow_settings_warnings(name: str, arrays, settings) -> list[str]:
    """Warnings naming settings that make the bake slow for no visible gain: damping far
    above critical, self friction above any real material's."""
    warnings = []
    free = arrays.masses[~arrays.pinned]
    mass = import_core().median(free) if len(free) else 0.0
    critical = 2.0 * np.sqrt(settings.stiffness * mass)
    if critical > 0 and settings.damping > OVERDAMPED * critical:
        warnings.append(
            f"'{name}': Damping {settings.damping:g} N·s/m is {settings.damping / critical:.0f} times the "
            f"critical damping of its springs ({critical:.3g} N·s/m, for {settings.stiffness:g} N/m and "
            f"{mass:.3g} kg a vertex): the springs creep as if in tar, and the bake slows down many "
            "times. Real cloth and ropes are damped far below critical")
    if settings.self_collision and settings.self_friction > HIGHEST_FRICTION:
        warnings.append(friction_warning(f"'{name}': Self Friction", settings.self_friction))
    return warnings


def loose_vertex_warnings(name: str, arrays, settings) -> list[str]:
    """Warnings for a pin group that pins nothing, and for free vertices that no spring
    with stiffness and no rod holds (a Stiffness Group weighted only where the mesh is
    pinned: the rest falls apart like dust; found by an adversarial test,
    test_addon_bake.py, test_vertices_no_spring_holds_are_named)."""
    warnings = []
    if arrays.pin_group and not arrays.pinned.any():
        warnings.append(f"'{name}': Pin Group '{arrays.pin_group}' pins no vertex (none has a "
                        "weight above 0.5): nothing is pinned")
    pairs = [arrays.edges, arrays.shear_pairs]
    weights = arrays.stiffness_weights
    mean = import_core().Structure.element_weights
    strength = [settings.stiffness * arrays.stiffness_scale * mean(weights, arrays.edges) + arrays.rigid,
                settings.shear_stiffness * mean(weights, arrays.shear_pairs)]
    held = np.zeros(arrays.vertex_count, dtype=bool)
    for rows, k in zip(pairs, strength):
        held[rows[k > 0].ravel()] = True
    loose = np.flatnonzero(~held & ~arrays.pinned)
    # A mesh of loose vertices (no edges) is a cloud of masses by design; edges that all
    # lost their stiffness are not (found by an adversarial tester: a Stiffness of 0).
    if len(loose) and (held.any() or len(arrays.edges)):
        why = (f"their weights in Stiffness Group '{settings.stiffness_group}' are 0"
               if weights is not None else "the stiffness of their edges is 0")
        warnings.append(f"'{name}': {len(loose)} free vertex(es) (first: vertex {loose[0]}) have no "
                        f"spring with stiffness, because {why}: they fall on their own")
    return warnings


def friction_warning(setting: str, value: float) -> str:
    return (f"{setting} {value:g} is above any real material's (rubber on rubber is about 1): above "
            f"{HIGHEST_FRICTION:g} nothing slides any more, and the bake slows down many times")


def check_frame_range(start: int, end: int, vertex_count: int) -> None:
    """Refuse a frame range outside Blender's frames, or whose positions (float32, held
    until they are written) would not fit in the memory this machine has free
    (tests/test_addon_safety.py)."""
    if not (-MAX_FRAME <= start <= MAX_FRAME and -MAX_FRAME <= end <= MAX_FRAME):
        raise BakeError(f"the frame range {start}–{end} is outside Blender's frames "
                        f"(±{MAX_FRAME}): set Start and End within them")
    if end <= start:
        raise BakeError(f"the frame range {start}–{end} needs at least two frames (end after start)")
    needed = (end - start + 1) * max(vertex_count, 1) * 3 * 4
    free = available_memory()
    if free is not None and needed > 0.8 * free:
        raise BakeError(
            f"{end - start + 1} frames of {vertex_count} vertices need {needed / 2**30:.1f} GiB "
            f"of memory while this machine has {free / 2**30:.1f} GiB free: bake fewer frames "
            "(Start and End), or in several parts")


def available_memory() -> int | None:
    """Bytes of memory free for new allocations (Linux: MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def transform_is_static(obj) -> bool:
    """No animation, parent or constraint can move the object: one matrix serves all frames."""
    return obj.animation_data is None and obj.parent is None and len(obj.constraints) == 0


def evaluated_by_blender(obj) -> bool:
    """Whether the view layer's dependency graph evaluates `obj` (its animation, parent
    and constraints). Objects Disabled in Viewports, or in a collection disabled in
    viewports or excluded, are not evaluated: their matrix_world stays where it was
    (tests/test_addon_bake.py). Hidden objects (H, the eye) are evaluated."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    return any(getattr(item, "original", None) == obj for item in depsgraph.ids)


# True while a bake sets the scene's frame to read the animation: frame-change handlers
# (the live preview's) leave those frames alone.
setting_frames = False


def set_frame(scene, frame: int, subframe: float = 0.0) -> None:
    global setting_frames
    setting_frames = True
    try:
        scene.frame_set(frame, subframe=subframe)
    finally:
        setting_frames = False


class BakeJob:
    """One bake of one object, advanced in small steps (see module doc)."""

    def __init__(self, scene, obj, overrides: dict | None = None, writes: bool = True):
        self.scene = scene
        self.obj = obj
        self.object_name = obj.name if obj is not None else ""
        self.warnings = check_object(scene, obj, overrides, writes)
        stored = BakeSettings(obj, overrides)
        try:
            self.arrays = mesh_to_arrays(obj, stored)
        except BakeError as ex:
            raise BakeError(f"'{obj.name}': {ex}") from ex
        self.warnings += slow_settings_warnings(obj.name, self.arrays, stored)
        self.warnings += loose_vertex_warnings(obj.name, self.arrays, stored)
        self.settings = simulation_settings(scene, obj, overrides)
        start, end = frame_range(scene, obj, overrides)
        self.frames = np.arange(start, end + 1)
        self.stored_settings = stored
        self.output = stored.output
        self._frame_before = (scene.frame_current, scene.frame_subframe)
        self._matrices = []
        self.colliders = None  # colliders.ColliderReader, if the structure collides
        if stored.use_collisions:
            depsgraph = bpy.context.evaluated_depsgraph_get()
            found = colliders.scene_colliders(scene, obj, depsgraph)
            if found:
                self.colliders = colliders.ColliderReader(found, depsgraph)
                self.warnings += [friction_warning(f"collider '{c.name}': Mass–Spring Friction",
                                                   c.mass_spring_collision.friction)
                                  for c in found if c.mass_spring_collision.friction > HIGHEST_FRICTION]
        self._frame_moved = False
        self.simulation: FrameSimulation | None = None
        self.started = time.perf_counter()
        self.simulate_seconds = 0.0
        self._static_matrix = None
        if transform_is_static(obj):
            # matrix_basis, not matrix_world: a script that just set the location or
            # rotation has not updated matrix_world yet (no depsgraph evaluation), and
            # without parent or constraints the two are the same
            # (test_transform_set_by_a_script_without_update_is_used).
            self._static_matrix = np.array(obj.matrix_basis, dtype=np.float64)
        self._plan_sampling()
        self.finished = False
        self._staged: dict | None = None  # what stage() wrote, until finish()
        self._record: dict | None = None  # the bake staged in the .blend (_write), until _commit
        # Set by GroupJob: the Parts simulated with this object and this object's place
        # among them (BakeResult.simulation_inputs).
        self.group: tuple | None = None
        # Set by live.hand_over: the live previews' GroupJob this object was a share of,
        # for this bake's GroupJob to take over (GroupJob.adopt).
        self.previewed_with: GroupJob | None = None

    def _plan_sampling(self) -> None:
        """Whether the frames must be visited (the transform or the colliders move)."""
        moving_colliders = self.colliders is not None and self.colliders.moving
        if self._static_matrix is not None and not moving_colliders:
            self._matrices = [self._static_matrix] * len(self.frames)
            self._sampled_transforms = 0
        else:
            self._matrices = []
            self._sampled_transforms = len(self.frames)

    @property
    def collider_frames(self):
        return self.colliders.frames if self.colliders is not None else None

    def leave_out_colliders(self, objects) -> list[str]:
        """Stop meeting the colliders among `objects`, and return their names. A simulation
        taken over from a live preview that met them is dropped (it is not this bake's)."""
        if self.colliders is None:
            return []
        met = self.colliders.objects
        left_out = [o.name for o in met if any(o == b for b in objects)]
        if left_out:
            kept = [o for o in met if all(o != b for b in objects)]
            depsgraph = bpy.context.evaluated_depsgraph_get()
            self.colliders = colliders.ColliderReader(kept, depsgraph) if kept else None
            self.simulation, self.simulate_seconds = None, 0.0
            self._plan_sampling()
        return left_out

    # -- progress ------------------------------------------------------------------------

    @property
    def total_work(self) -> float:
        return TRANSFORM_WEIGHT * self._sampled_transforms + (len(self.frames) - 1)

    @property
    def work_done(self) -> float:
        sampled = min(len(self._matrices), self._sampled_transforms)
        return TRANSFORM_WEIGHT * sampled + self.frames_simulated

    @property
    def fraction(self) -> float:
        return min(1.0, self.work_done / self.total_work) if self.total_work else 1.0

    @property
    def frames_simulated(self) -> int:
        return self.simulation.frames_done - 1 if self.simulation else 0

    @property
    def current_frame(self) -> int:
        if self.simulation is None:
            return int(self.frames[min(len(self._matrices), len(self.frames) - 1)])
        return int(self.frames[self.simulation.frames_done - 1])

    def seconds_left(self) -> float | None:
        done = self.fraction
        if done <= 0.02:
            return None
        return (time.perf_counter() - self.started) * (1.0 - done) / done

    def status(self) -> str:
        left = self.seconds_left()
        left_text = "" if left is None else f", {left:.0f} s left"
        phase = "reading animation" if self.simulation is None else "simulating"
        return (f"Mass–Spring bake of '{self.object_name}': {100 * self.fraction:.0f}% "
                f"({phase}, frame {self.current_frame} of {self.frames[0]}–{self.frames[-1]}"
                f"{left_text}) — Esc to cancel")

    # -- work ----------------------------------------------------------------------------

    @property
    def simulated(self) -> bool:
        return self.simulation is not None and self.simulation.done

    def step(self, budget_seconds: float = 0.1, frames: int | None = None, stop=None) -> bool:
        """Work for about `budget_seconds`; True when the simulation is complete. With
        `frames`, stop once the first `frames` frames of the range are simulated (the live
        preview: live.py). stop(): FrameSimulation.step's."""
        deadline = time.perf_counter() + budget_seconds
        return self.prepare(deadline) and self.simulate(deadline, frames, stop)

    def prepare(self, deadline: float) -> bool:
        """The part of the work that reads Blender's data (the frames' transforms and
        moving colliders), until `deadline` (time.perf_counter()); True when it is done
        and simulate() may run."""
        try:
            return self._sample_transforms(deadline)
        except BakeError as ex:
            self._restore_frame()
            raise BakeError(f"'{self.object_name}': {ex}") from ex
        except BaseException:
            self._restore_frame()
            raise

    def simulate(self, deadline: float, frames: int | None = None, stop=None) -> bool:
        """After prepare(): the simulation, frame after frame until `deadline` (see step).
        It reads no Blender data, so a thread may run it while Blender stays responsive
        (SimulationThread). True when the simulation is complete."""
        try:
            if self.simulation is None:
                begin = time.perf_counter()
                self.simulation = FrameSimulation(self.arrays, self.settings, self._matrices,
                                                  self.frames, self.collider_frames)
                self.simulate_seconds += time.perf_counter() - begin
                stop_if_asked(stop)
            while not self.simulation.done and (frames is None or self.simulation.frames_done < frames):
                begin = time.perf_counter()
                self.simulation.step(stop)
                self.simulate_seconds += time.perf_counter() - begin
                if time.perf_counter() > deadline:
                    break
        except BakeError as ex:
            raise BakeError(f"'{self.object_name}': {ex}") from ex
        return self.simulation.done

    def _sample_transforms(self, deadline: float) -> bool:
        """Sample the frames' transforms (and moving colliders) until `deadline`; True
        when all are."""
        while len(self._matrices) < len(self.frames):
            self._sample_transform(int(self.frames[len(self._matrices)]))
            if time.perf_counter() > deadline and len(self._matrices) < len(self.frames):
                self._restore_frame()  # the user's frame between steps
                return False
        self._restore_frame()
        return True

    def adopt(self, other: BakeJob) -> bool:
        """Take over the simulation of `other` (a live preview's job) if it was made from
        the very inputs of this job (same_inputs). True if taken; this job then goes on
        from where that one got to, and bakes what it would have computed itself. A share
        of a preview of objects together is taken by their GroupJob (GroupJob.adopt)."""
        if other.simulation is None or other.group is not None or not self.same_inputs(other):
            return False
        self.simulation, self.simulate_seconds = other.simulation, other.simulate_seconds
        return True

    def same_inputs(self, other: BakeJob) -> bool:
        """Whether `other` simulates from the very inputs of this job: the mesh's arrays,
        the settings, the transforms and colliders at every frame."""
        self._sample_transforms(float("inf"))
        return (same_values(self.arrays, other.arrays) and same_values(self.settings, other.settings)
                and np.array_equal(self.frames, other.frames)
                and len(other._matrices) == len(self._matrices)
                and np.array_equal(np.asarray(self._matrices), np.asarray(other._matrices))
                and same_values(self.collider_frames, other.collider_frames))

    def _sample_transform(self, frame: int) -> None:
        """The object's matrix and the moving colliders at `frame`."""
        if not self._frame_moved:  # the frame to go back to: the user's now (it may have moved between steps)
            self._frame_before = (self.scene.frame_current, self.scene.frame_subframe)
        set_frame(self.scene, frame)
        self._frame_moved = True
        matrix = self._static_matrix
        if matrix is None:
            matrix = np.array(self.obj.matrix_world, dtype=np.float64)
        self._matrices.append(matrix)
        if self.colliders is not None:
            self.colliders.sample(bpy.context.evaluated_depsgraph_get(), frame)

    def _restore_frame(self) -> None:
        if self._frame_moved:
            frame, subframe = self._frame_before
            set_frame(self.scene, frame, subframe)
            self._frame_moved = False

    def cancel(self) -> None:
        """Stop; nothing has been written, only the scene frame is put back."""
        self._restore_frame()
        self.simulation = None

    def stage(self) -> None:
        """Check that the bake can be written and write what lives outside the .blend (a
        PC2 file) under a temporary name; finish() puts it in place. BakeError if not:
        nothing is changed then."""
        if not self.simulated:
            raise RuntimeError("stage() before the simulation is complete")
        if self._staged is not None:
            return
        obj = self.obj
        try:
            changed = obj.data.is_editmode or len(obj.data.vertices) != self.arrays.vertex_count
        except ReferenceError:
            raise BakeError(f"'{self.object_name}' was deleted during the bake") from None
        if changed:
            raise BakeError(f"'{self.object_name}' was edited during the bake: bake again")
        staged = {}
        if self.output == 'PC2':
            stored, pc2_file = pc2_paths(obj)
            check_pc2_target(obj, stored, pc2_file)  # again: files may change while it runs
            try:
                part = writers.stage_pc2(pc2_file, int(self.frames[0]), self.simulation.local_positions)
            except OSError as ex:
                raise BakeError(f"'{obj.name}': could not write the PC2 file {pc2_file}: {ex}") from ex
            staged = {"stored": stored, "file": pc2_file, "part": part}
        self._staged = staged

    def discard(self) -> None:
        """Remove what stage() and _write() staged (the bake is not finished); any
        previous bake stays as it was."""
        if self._record is not None:
            writers.discard_staged(self.obj, self._record)
            self._record = None
        part = (self._staged or {}).get("part")
        if part and os.path.exists(part):
            os.remove(part)
        self._staged = None

    def finish(self) -> BakeResult:
        """Replace any previous bake by this one. Nothing half-written on failure."""
        return finish_all([self])[0]

    def _write(self) -> None:
        """Write the bake into the .blend next to any previous bake (its PC2 file is
        already in place): staged, for _commit to put in place of the previous one."""
        obj = self.obj
        try:
            if self.output == 'PC2':
                record = writers.add_mesh_cache(obj, self._staged["stored"], int(self.frames[0]),
                                                name=writers.MODIFIER_NAME + writers.STAGED_SUFFIX)
            else:
                record = writers.write_shape_keys(obj, self.frames, self.simulation.local_positions)
        except Exception as ex:
            raise BakeError(f"'{obj.name}': writing the bake failed: {ex}") from ex
        self._record = record
        try:
            record["forces"] = self._write_forces()
        except Exception as ex:
            raise BakeError(f"'{obj.name}': writing the bake's forces failed: {ex}") from ex
        record["colliders"] = self.colliders.names if self.colliders is not None else []
        record["frame_start"] = int(self.frames[0])
        record["frame_end"] = int(self.frames[-1])
        record["totals"] = report_totals(self.simulation.report)
        try:
            writers.store_record(obj, record, writers.STAGED_RECORD)
        except Exception as ex:
            raise BakeError(f"'{obj.name}': storing the bake's record failed: {ex}") from ex

    def _commit(self, begin: float) -> BakeResult:
        """Put the staged bake in place of the previous one (writers.commit)."""
        obj = self.obj
        try:
            writers.commit(obj, self._record, writers.bake_record(obj))
        except Exception as ex:
            raise BakeError(f"'{obj.name}': putting the new bake in place failed: {ex}") from ex
        self._record = None
        if obj.mass_spring.show_forces and forces.has_data(obj):
            forces.show(obj)
        from . import live
        live.after_bake(obj)
        self.finished = True
        return BakeResult(
            object_name=obj.name,
            output=self.output,
            frame_start=int(self.frames[0]),
            frame_end=int(self.frames[-1]),
            simulate_seconds=self.simulate_seconds,
            write_seconds=time.perf_counter() - begin,
            local_positions=self.simulation.local_positions,
            warnings=(list(self.warnings) + faceless_warnings(self.object_name, self.colliders)
                      + narrow_collider_warnings(self.object_name, self.colliders, self.arrays.edges,
                                                 self.simulation.world_start)
                      + pressed_warning(self.object_name, self.simulation)),
            pc2_file=self._staged.get("file", ""),
            report=list(self.simulation.report),
            simulation_inputs=self.group or (self.arrays, self.settings, self.simulation.matrices, self.frames,
                                             self.collider_frames),
            matrices=self.simulation.matrices,
        )

    def _write_forces(self) -> dict:
        """The forces of the bake on the mesh (forces.py), shown if the panel says so.
        None on a mesh other objects share: its attributes would be theirs too, so one
        object's bake would replace the other's forces (tests/test_addon_safety.py)."""
        others = len(forces.mesh_users(self.obj)) - 1
        if others:
            self.warnings.append(
                f"'{self.object_name}': the forces were not stored because mesh "
                f"'{self.obj.data.name}' is shared with {others} other object(s): make it single "
                "user (Object ▸ Relations ▸ Make Single User ▸ Object & Data) to see them")
            return {"attributes": [], "modifier": ""}
        sim = self.simulation
        data = forces.force_data(self.arrays, self.settings.stiffness, sim.structure.spring_edges(),
                                 sim.structure.rod_edges(), sim.world_start,
                                 sim.local_positions, sim.rod_forces)
        part = forces.write(self.obj, data, self.frames)
        part["range"] = data.force_range
        return part


def faceless_warnings(object_name: str, reader) -> list[str]:
    """The colliders met that have no faces, named: Collision acts on faces only. `reader`:
    the colliders.ColliderReader the bake met (a group's, for its members), or None."""
    return [f"collider '{name}' has no faces, so '{object_name}' passes through it: a Collision object "
            "collides with its faces (give it faces, or remove its Collision)"
            for name in (reader.faceless if reader is not None else [])]


def narrow_collider_warnings(object_name: str, reader, edges, world_start) -> list[str]:
    """The colliders met that are narrower than the structure's longest edge, named: a
    collider stops vertices, not edges, so such an edge can pass over it (a rope of long
    links onto a thin bar; found by an adversarial tester: test_addon_contact.py,
    test_a_collider_narrower_than_the_edges_is_named)."""
    if reader is None or not len(edges) or world_start is None:
        return []
    longest = float(np.linalg.norm(world_start[edges[:, 1]] - world_start[edges[:, 0]], axis=1).max())
    return [f"collider '{name}' is {width:.3g} m across where it is narrowest (with its thickness), "
            f"less than the longest edge of '{object_name}' ({longest:.3g} m): collisions stop "
            f"vertices, not edges, so an edge can pass over it. Subdivide '{object_name}' or widen the collider"
            for name, width in sorted(reader.narrowest.items()) if width < longest]


def pressed_warning(object_name: str, simulation) -> list[str]:
    """The vertices modelled within a collider's thickness, named: those moved out of it
    with their structure at the start (the bake does not start from the modelled shape),
    or those that could not be, which the penalty throws out
    (simulation.pressed_into_colliders). `simulation`: a FrameSimulation or a PartFrames."""
    cure = ("model the object at least that thickness away from the collider's surface, or lower "
            "the thickness")

    def vertices(count: int) -> str:
        return f"{count} vertex" if count == 1 else f"{count} vertices"

    warnings = []
    if simulation.moved_out:
        warnings.append(
            f"'{object_name}': {vertices(simulation.moved_out)} modelled within a collider's thickness "
            f"(Collision ▸ Thickness Outer), so the bake starts with the object moved "
            f"{simulation.moved_by * 100:.3g} cm out of it; to start from the modelled shape, {cure}")
    if simulation.pressed:
        warnings.append(
            f"'{object_name}': {vertices(simulation.pressed)} inside a collider's thickness (Collision ▸ "
            f"Thickness Outer) at the start could not be moved out of it (only a structure that leaves it in one "
            f"piece and one direction, as off a floor or a table top, with no pin holding it and nothing "
            f"in its way, is moved), so the collider pushes them out hard and they may jump: {cure}")
    return warnings


class GroupJob:
    """Objects with Self Collision on baked in one go: one simulation of them all (one
    core system), so that they collide with each other as each with itself; each still
    writes its own bake. Its members are BakeJobs whose simulation is their share of the
    group's (simulation.PartFrames); finish_all writes them as any."""

    def __init__(self, jobs: list[BakeJob], baked_with: list = ()):
        """`baked_with`: the other objects baked in the same go, which they do not meet as
        colliders (simulation_runs, BakeJob.leave_out_colliders)."""
        self.jobs = jobs
        first = jobs[0]
        self.scene, self.frames = first.scene, first.frames
        self.object_name = "', '".join(job.object_name for job in jobs)
        # The colliders they meet are the scene's but themselves: read once, by the first.
        if first.stored_settings.use_collisions:
            depsgraph = bpy.context.evaluated_depsgraph_get()
            found = colliders.scene_colliders(self.scene, [job.obj for job in jobs], depsgraph)
            first.colliders = colliders.ColliderReader(found, depsgraph) if found else None
            first.warnings += baked_collider_warnings(self.object_name, first.leave_out_colliders(baked_with))
        for job in jobs[1:]:
            differ = solver_differences(first.settings, job.settings)
            if differ:
                job.warnings.append(f"'{job.object_name}' was baked together with '{first.object_name}', with "
                                    f"the {' and '.join(differ)} of '{first.object_name}' (one simulation "
                                    "has one solver)")
        for job in jobs:
            job.simulation = None  # a live preview's is of its object alone (live.hand_over)
            if job is not first:
                job.colliders = None  # read by the first
            job._plan_sampling()
        self.simulation: FrameSimulation | None = None
        self.started = time.perf_counter()
        self.simulate_seconds = 0.0

    @property
    def total_work(self) -> float:
        return sum(TRANSFORM_WEIGHT * job._sampled_transforms for job in self.jobs) + (len(self.frames) - 1)

    @property
    def work_done(self) -> float:
        sampled = sum(min(len(job._matrices), job._sampled_transforms) for job in self.jobs)
        return TRANSFORM_WEIGHT * sampled + self.frames_simulated

    fraction = BakeJob.fraction
    seconds_left = BakeJob.seconds_left

    @property
    def frames_simulated(self) -> int:
        return self.simulation.frames_done - 1 if self.simulation else 0

    @property
    def current_frame(self) -> int:
        if self.simulation is None:
            return self.jobs[0].current_frame
        return int(self.frames[self.simulation.frames_done - 1])

    def status(self) -> str:
        left = self.seconds_left()
        left_text = "" if left is None else f", {left:.0f} s left"
        phase = "reading animation" if self.simulation is None else "simulating"
        return (f"Mass–Spring bake of '{self.object_name}' together: {100 * self.fraction:.0f}% "
                f"({phase}, frame {self.current_frame} of {self.frames[0]}–{self.frames[-1]}"
                f"{left_text}) — Esc to cancel")

    @property
    def simulated(self) -> bool:
        return self.simulation is not None and self.simulation.done

    def step(self, budget_seconds: float = 0.1, frames: int | None = None, stop=None) -> bool:
        """Work for about `budget_seconds`; True when the simulation is complete. With
        `frames`, stop once the first `frames` frames are simulated (the live preview).
        stop(): FrameSimulation.step's."""
        deadline = time.perf_counter() + budget_seconds
        return self.prepare(deadline) and self.simulate(deadline, frames, stop)

    def prepare(self, deadline: float) -> bool:
        """As BakeJob.prepare, for every member."""
        try:
            return all(job._sample_transforms(deadline) for job in self.jobs)
        except BakeError as ex:
            self._restore_frames()
            raise self._named(ex) from ex
        except BaseException:
            self._restore_frames()
            raise

    def simulate(self, deadline: float, frames: int | None = None, stop=None) -> bool:
        """As BakeJob.simulate: no Blender data is read."""
        try:
            if self.simulation is None:
                self._start()
                stop_if_asked(stop)
            while not self.simulation.done and (frames is None or self.simulation.frames_done < frames):
                begin = time.perf_counter()
                self.simulation.step(stop)
                self.simulate_seconds += time.perf_counter() - begin
                if time.perf_counter() > deadline:
                    break
        except BakeError as ex:
            raise self._named(ex) from ex
        if self.simulation.done:
            for job in self.jobs:
                job.simulate_seconds = self.simulate_seconds
        return self.simulation.done

    def _named(self, ex: BakeError) -> BakeError:
        message = name_parts(str(ex), [(job.object_name, job.arrays.vertex_count) for job in self.jobs])
        return BakeError(f"'{self.object_name}' (baked together): {message}")

    def _restore_frames(self) -> None:
        for job in self.jobs:
            job._restore_frame()

    def _start(self) -> None:
        begin = time.perf_counter()
        first, rest = self.jobs[0], self.jobs[1:]
        together = [Part(job.arrays, job.settings, np.asarray(job._matrices)) for job in rest]
        self.simulation = FrameSimulation(first.arrays, first.settings, first._matrices, self.frames,
                                          first.collider_frames, together)
        inputs = (first.arrays, first.settings, self.simulation.matrices, self.frames, first.collider_frames,
                  together)
        for index, (job, part) in enumerate(zip(self.jobs, self.simulation.parts)):
            job.simulation = part
            job.group = (*inputs, index)
            job.colliders = first.colliders  # their records name the colliders met
        self.simulate_seconds += time.perf_counter() - begin

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancel()
        self.simulation = None

    def adopt(self, other: GroupJob) -> bool:
        """Take over the simulation of `other` (the live previews of the same objects
        together) if each of its jobs was made from the very inputs of this one's, in the
        same order (BakeJob.same_inputs). True if taken: the frames it computed are not
        computed again."""
        if other.simulation is None or len(other.jobs) != len(self.jobs) or not all(
                mine.same_inputs(theirs) for mine, theirs in zip(self.jobs, other.jobs)):
            return False
        self.simulation, self.simulate_seconds = other.simulation, other.simulate_seconds
        for mine, theirs in zip(self.jobs, other.jobs):
            mine.simulation, mine.group = theirs.simulation, theirs.group
        return True


def solver_differences(first: SimulationSettings, other: SimulationSettings) -> list:
    """The solver settings of `other` that a simulation together with `first` does not
    follow (simulation.solver_settings takes the first's), named as the panel names them."""
    differ = []
    if other.integrator != first.integrator:
        differ.append("integrator")
    if other.integrator == first.integrator == "GENERALIZED_ALPHA" and other.rho_inf != first.rho_inf:
        differ.append("ρ∞")
    if not np.array_equal(other.gravity, first.gravity):
        differ.append("gravity")
    return differ


def colliding_groups(colliding: list, agree) -> dict:
    """Objects (or their jobs) with Self Collision on, grouped by agree(item): their frame
    range and Collisions setting. Each group of two or more is simulated together, in a
    bake (simulation_runs) as in the live preview (live.py)."""
    groups: dict = {}
    for item in colliding:
        groups.setdefault(agree(item), []).append(item)
    return groups


def baked_collider_warnings(name: str, left_out: list[str]) -> list[str]:
    do = "do" if "', '" in name else "does"  # a group's names: "A', 'B"
    return [f"'{name}' {do} not collide with '{other}', which is baked in the same go: its new motion "
            f"is not known while '{name}' {'are' if do == 'do' else 'is'} simulated. Turn Self Collision "
            f"on for them to bake them together, colliding, or bake '{other}' first and then '{name}' "
            "alone" for other in left_out]


def simulation_runs(jobs: list[BakeJob]) -> list:
    """What to simulate for `jobs`, in their order: each job alone, but those with Self
    Collision on as one GroupJob (they collide with each other), if they bake the same
    frames and agree on meeting the scene's colliders; one that does not is simulated
    alone, with a warning saying why. An object baked in the same go is no collider of the
    others: it would stand still in its modelled pose, or move as its previous bake did,
    while its new bake moves otherwise (test_objects_baked_in_one_go_are_no_colliders_of_each_other)."""
    groups = colliding_groups([job for job in jobs if job.settings.self_collision],
                              lambda job: (tuple(job.frames), bool(job.stored_settings.use_collisions)))
    largest = max(groups.values(), key=len, default=[])
    for key, members in groups.items():
        if members is largest:
            continue
        for job in members:
            job.warnings.append(
                f"'{job.object_name}' was not baked together with '{largest[0].object_name}' (it does not "
                "collide with it): their frame ranges or Collisions settings differ")
    runs, added = [], set()
    for job in jobs:
        members = next((m for m in groups.values() if job in m), [job])
        others = [other.obj for other in jobs if other not in members]
        if len(members) == 1:
            job.warnings += baked_collider_warnings(job.object_name, job.leave_out_colliders(others))
            runs.append(job)
        elif id(members) not in added:
            added.add(id(members))
            run = GroupJob(members, others)
            previewed = members[0].previewed_with  # live.hand_over
            if previewed is not None:
                run.adopt(previewed)
            runs.append(run)
    return runs


class Batch:
    """Objects baked in one go (the Bake button with several selected, a scene's bake):
    simulated run after run (simulation_runs), then written all or nothing (finish_all).
    step, fraction, status and cancel as a BakeJob's."""

    def __init__(self, scene, objects, overrides: dict | None = None):
        self.jobs = [new_job(scene, obj, overrides) for obj in objects]
        check_distinct_pc2_files(self.jobs)
        self.runs = simulation_runs(self.jobs)

    def _current(self):
        return next((run for run in self.runs if not run.simulated), self.runs[-1])

    def step(self, budget_seconds: float = 0.1) -> bool:
        self._current().step(budget_seconds)
        return self.simulated

    @property
    def simulated(self) -> bool:
        return all(run.simulated for run in self.runs)

    def prepare(self, deadline: float) -> bool:
        """The current run's prepare (BakeJob.prepare): True when simulate() may run."""
        return self._current().prepare(deadline)

    def simulate(self, stop=None) -> None:
        """The current run's simulation to its end (BakeJob.simulate), after prepare()."""
        self._current().simulate(math.inf, stop=stop)

    @property
    def fraction(self) -> float:
        total = sum(run.total_work for run in self.runs)
        return sum(run.work_done for run in self.runs) / total if total else 1.0

    def status(self) -> str:
        run = self._current()
        return run.status() if len(self.runs) == 1 else f"{run.status()} [{self.runs.index(run) + 1} of {len(self.runs)}]"

    def cancel(self) -> None:
        for run in self.runs:
            run.cancel()

    def finish(self) -> list[BakeResult]:
        return finish_all(self.jobs)


def stop_if_asked(stop) -> None:
    """KeyboardInterrupt if stop() says so, as FrameSimulation.step's stop ends a frame: a
    simulation's construction (the system, masses moved out of colliders) takes seconds
    on big meshes and is no core step that could ask."""
    if stop is not None and stop():
        raise KeyboardInterrupt


class SimulationThread:
    """The current run of a prepared Batch (Batch.prepare) simulated in a thread, to its
    end: the core lets go of Python while it simulates, so Blender's window stays
    responsive during a frame that takes minutes, and stop() ends it within a step of the
    core (FrameSimulation.step's stop, asked every 50 ms) instead of after the frame, or
    once the simulation is built if it was asked while it was (the modal Bake:
    operators.py; tests/test_addon_bake.py, test_esc_stops_the_modal_bake_within_a_long_frame).
    Blender calls the operator's cancel(), which stops it, when it quits or closes the
    file (WM_event_remove_handlers); a daemon all the same: Python would otherwise wait
    at exit for a bake to end."""

    def __init__(self, batch: Batch):
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(batch,), name="Mass–Spring bake", daemon=True)
        self._thread.start()

    def _run(self, batch: Batch) -> None:
        try:
            batch.simulate(stop=self._stop.is_set)
        except BaseException as ex:  # handed to the caller's thread by result()
            self._error = ex

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> None:
        """Waits for the end; raises what the simulation raised (a BakeError names its
        cause), in the caller's thread."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Ends the simulation at the core's next step and waits for it; what it had done
        is dropped with the batch (Batch.cancel)."""
        self._stop.set()
        self._thread.join()


def same_values(a, b) -> bool:
    """Two dataclasses (or None) with equal fields, numpy arrays and lists of them included."""
    if a is None or b is None:
        return a is b
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, list) or isinstance(y, list):
            if len(x) != len(y) or not all(np.array_equal(p, q) for p, q in zip(x, y)):
                return False
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def run_job(job: BakeJob, *, progress=None, should_cancel=None, budget_seconds: float = 0.25) -> None:
    """Simulate `job` to the end, reporting progress and polling should_cancel as
    bake_object describes; BakeCancelled if cancelled (nothing written)."""
    total = len(job.frames) - 1
    cancelled = BakeCancelled(f"bake of '{job.object_name}' cancelled; nothing was written")
    while True:
        try:  # should_cancel also stops a frame that takes long (FrameSimulation.step)
            if job.step(budget_seconds, stop=should_cancel):
                break
        except KeyboardInterrupt:
            if should_cancel is None or not should_cancel():
                raise
            job.cancel()
            raise cancelled from None
        if progress is not None:
            progress(job.current_frame, job.frames_simulated, total)
        if should_cancel is not None and should_cancel():
            job.cancel()
            raise cancelled
    if progress is not None:
        progress(job.current_frame, job.frames_simulated, total)


def bake_object(scene, obj, *, progress=None, should_cancel=None, budget_seconds: float = 0.25,
                overrides: dict | None = None) -> BakeResult:
    """Simulate `obj` over its frame range and replace its bake. Headless entry point.

    progress(frame, done, total) is called between chunks of work (about every
    `budget_seconds`): the frame reached, frames simulated so far, frames to simulate;
    should_cancel() -> bool is polled at the same points. Raises BakeError (message names
    the object, the frame and a likely cure) or BakeCancelled; in both cases the object
    is exactly as before (any previous bake included). `overrides` (setting name → value)
    change this bake only, not the object's settings.
    """
    job = new_job(scene, obj, overrides)
    run_job(job, progress=progress, should_cancel=should_cancel, budget_seconds=budget_seconds)
    return job.finish()


def new_job(scene, obj, overrides: dict | None = None) -> BakeJob:
    """The bake's job; it takes over the live preview's simulation when that was made from
    the same inputs (live.hand_over: its frames are not computed again)."""
    from . import live
    job = BakeJob(scene, obj, overrides)
    live.hand_over(obj, job)
    return job


def enabled_objects(scene) -> list:
    """The mesh objects of `scene` with Mass–Spring enabled: what a scene's bake bakes."""
    return [o for o in scene.objects
            if o.type == 'MESH' and getattr(o, "mass_spring", None) is not None
            and o.mass_spring.enabled]


def bake_scene(scene, *, progress=None, should_cancel=None, budget_seconds: float = 0.25,
               overrides: dict | None = None) -> list[BakeResult]:
    """Bake every mesh object of `scene` whose Mass–Spring is enabled.

    All simulations run first; only when every one succeeded are the bakes written, by
    finish_all (every PC2 file written before any replaces a previous one). `overrides`
    apply to every object, as in bake_object.
    """
    batch = Batch(scene, enabled_objects(scene), overrides)
    for run in batch.runs:
        run_job(run, progress=progress, should_cancel=should_cancel, budget_seconds=budget_seconds)
    return batch.finish()


def finish_all(jobs: list[BakeJob], swap: writers.FileSwap | None = None) -> list[BakeResult]:
    """Write the bakes of simulated `jobs`, all or nothing as far as files go: every job is
    checked and its PC2 file written under a temporary name before any replaces a file,
    and every bake is written into the .blend next to the previous one (staged) before any
    previous bake is removed. If writing any bake fails, every PC2 file is put back byte
    for byte, the staged bakes are removed again and every previous bake stays as it was
    (tests/test_addon_safety.py).
    `swap`: a writers.FileSwap to put the PC2 files in place with, which the caller
    commits, or rolls back if what it writes next fails (the headless command's report
    and .blend); without it they are committed here."""
    for job in jobs:
        if not job.simulated:
            raise RuntimeError("finish() before the simulation is complete")
        if job.finished:
            raise RuntimeError("finish() called twice")
    begin = time.perf_counter()
    try:
        check_distinct_pc2_files(jobs)
        for job in jobs:
            job.stage()
    except BaseException:
        for job in jobs:
            job.discard()
        raise
    own_swap = swap is None
    swap = writers.FileSwap() if own_swap else swap
    try:
        for job in jobs:
            if job.output == 'PC2':
                try:
                    swap.put(job._staged["part"], job._staged["file"])
                except OSError as ex:
                    raise BakeError(f"'{job.object_name}': could not write the PC2 file "
                                    f"{job._staged['file']}: {ex}") from ex
        for job in jobs:
            job._write()
    except BaseException:
        swap.roll_back()
        for job in jobs:
            job.discard()
        raise
    # Every bake is written: only now is any previous one removed.
    results = []
    try:
        for job in jobs:
            results.append(job._commit(begin))
    finally:
        for job in jobs[len(results):]:  # a commit failed (removing or renaming): not rolled back
            job.discard()
        if own_swap:
            swap.commit()  # the committed bakes play the new files
    return results
