"""Positions (F, N, 3) in object space → Blender data that plays without the add-on.

The writers take the bake's float32 buffer (``FrameSimulation.local_positions``) as it
is: float32 is what shape keys and PC2 store, so ``np.ascontiguousarray`` below returns
that buffer itself, never a converted copy of all frames
(test_writers_get_the_float32_object_space_buffer).

Two outputs:

* Shape keys (default). One relative shape key per baked frame, each with a value F-curve
  that is 1 at its own frame and 0 at the neighbouring frames (linear in between).
  Chosen over one absolute-key sequence driven by ``Key.eval_time`` because
  - at every baked frame exactly one key has value exactly 1, so the mesh is the simulated
    positions up to float32 rounding. Absolute keys are placed at positions accumulated
    in steps of 0.1 in float32 (``KeyBlock.pos``), which drift far enough over hundreds of
    frames to blend neighbouring frames by a visible fraction;
  - between frames two keys cross-fade linearly, which is exactly linear interpolation of
    the positions (motion blur, subframes);
  - Blender skips keys whose value is 0, so playback costs one key per frame;
  - shape keys and value F-curves play in every supported Blender; only how the F-curves
    are created differs between versions (``new_action_fcurves``: slotted actions).
* PC2 file + Mesh Cache modifier, first in the stack: compact for big meshes.

Everything the bake adds is listed in an ID property on the object (``BAKE_RECORD``), so
Free Bake removes exactly that and nothing the user made.

A new bake is written next to the previous one under names of its own (staged: shape keys
``STAGED_KEY_PREFIX``, an action no one plays yet, the forces' attributes under
``forces.staged_name``), and ``commit`` puts it in place of the previous one only once all
of it is written: a write that fails halfway leaves the previous bake as it was
(tests/test_addon_safety.py::test_a_failed_write_keeps_the_previous_bake).
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct

import bpy
import numpy as np

from . import forces

BAKE_RECORD = "_mass_spring_bake"  # leading underscore: hidden in the Custom Properties panel
STAGED_RECORD = "_mass_spring_bake_staged"  # a staged bake's record, until commit()
KEY_PREFIX = "MSB "
STAGED_KEY_PREFIX = "MSB staged "  # a new bake's keys until commit() names them KEY_PREFIX
BASIS_NAME = "Basis"
MODIFIER_NAME = "Mass–Spring Bake"
LIVE_MODIFIER_NAME = "Mass–Spring Live Preview"  # live.py's, never a bake's
ACTION_PREFIX = "MassSpringBake "
STAGED_SUFFIX = forces.STAGED_SUFFIX
PC2_HEADER = struct.Struct("<12siiffi")
PC2_MAGIC = b"POINTCACHE2\0"
LINEAR = 1  # enum value of 'LINEAR' in Keyframe.interpolation


# ---------------------------------------------------------------------------------------
# Animation data: one F-curve collection for an ID, across Blender versions


def new_action_fcurves(id_data, action_name: str):
    """Create an action for `id_data`, not yet assigned (assign_action), and return (action,
    its F-curve collection).

    Blender 4.2/4.3: ``action.fcurves``. 4.4/4.5: slotted actions, the channel bag has to be
    created through layers/strips (``action_get_channelbag_for_slot`` only finds it).
    5.0+: ``action_ensure_channelbag_for_slot`` (``Action.fcurves`` is gone).
    """
    action = bpy.data.actions.new(action_name)
    if bpy.app.version < (4, 4, 0):
        return action, action.fcurves

    from bpy_extras import anim_utils

    slot = action.slots.new(id_type=id_data.id_type, name=id_data.name)
    ensure = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    if ensure is not None:
        channelbag = ensure(action, slot)
    else:
        channelbag = anim_utils.action_get_channelbag_for_slot(action, slot)
        if channelbag is None:
            layer = action.layers[0] if len(action.layers) else action.layers.new("Layer")
            strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type='KEYFRAME')
            channelbag = strip.channelbags.new(slot)
    return action, channelbag.fcurves


def assign_action(id_data, action) -> None:
    """Play `action` (made by new_action_fcurves, one slot) on `id_data`."""
    anim = id_data.animation_data or id_data.animation_data_create()
    anim.action = action
    if bpy.app.version >= (4, 4, 0):
        anim.action_slot = action.slots[0]


def set_keyframes(fcurve, frames, values) -> None:
    """Bulk-write linear keyframes (never keyframe_insert per key)."""
    co = np.empty(2 * len(frames), dtype=np.float32)
    co[0::2] = frames
    co[1::2] = values
    points = fcurve.keyframe_points
    points.add(len(frames))
    points.foreach_set("co", co)
    points.foreach_set("interpolation", np.full(len(frames), LINEAR, dtype=np.int32))
    fcurve.update()


# ---------------------------------------------------------------------------------------
# Shape keys


def shape_key_name(frame: int) -> str:
    return f"{KEY_PREFIX}{frame:04d}"


def staged_key_name(frame: int) -> str:
    return f"{STAGED_KEY_PREFIX}{frame:04d}"


def write_shape_keys(obj, frames, local_positions: np.ndarray) -> dict:
    """Stage one shape key per frame of `local_positions` (F, N, 3) and the action of
    their value F-curves; commit() puts them in place. Returns the bake record.

    The mesh's only shape keys may be a previous bake's (the caller checks): they stay as
    they are, and the new keys are relative to the same basis. The action is not assigned
    yet and its F-curves already name the keys' final names. On any exception everything
    added so far is removed again.
    """
    frames = [int(f) for f in frames]
    mesh = obj.data
    record = {"output": "SHAPE_KEYS", "keys": [], "action": "", "basis": BASIS_NAME}
    try:
        if mesh.shape_keys is None:
            basis = obj.shape_key_add(name=BASIS_NAME, from_mix=False)
        else:
            basis = mesh.shape_keys.reference_key
        record["basis"] = basis.name
        key = mesh.shape_keys
        key.use_relative = True
        names = []
        for frame, positions in zip(frames, local_positions):
            block = obj.shape_key_add(name=staged_key_name(frame), from_mix=False)
            block.data.foreach_set("co", np.ascontiguousarray(positions, dtype=np.float32).ravel())
            names.append(block.name)
            record["keys"] = names
        # (staged mark first: a long object name cuts the end of an ID's name)
        action, fcurves = new_action_fcurves(key, STAGED_SUFFIX.strip() + " " + ACTION_PREFIX + obj.name)
        record["action"] = action.name
        last = len(frames) - 1
        for i, frame in enumerate(frames):
            # 1 at its own frame, 0 at the neighbours; constant extrapolation keeps the
            # first key on before the range and the last key on after it.
            neighbours = ([frames[i - 1]] if i > 0 else []) + [frame] + ([frames[i + 1]] if i < last else [])
            values = [0.0 if f != frame else 1.0 for f in neighbours]
            fcurve = fcurves.new(f'key_blocks["{shape_key_name(frame)}"].value', index=0)
            set_keyframes(fcurve, neighbours, values)
        mesh.update()
    except BaseException:
        remove_shape_keys(obj, record)
        raise
    return record


def commit_shape_keys(obj, record: dict) -> None:
    """Give staged keys their final names (the previous bake's are gone) and play their
    action. Renamed before the action is assigned: Blender rewrites the F-curve paths of
    assigned actions on a rename, and these already name the final keys."""
    key_blocks = obj.data.shape_keys.key_blocks
    final = []
    for name in record["keys"]:
        block = key_blocks[name]
        if name.startswith(STAGED_KEY_PREFIX):
            block.name = KEY_PREFIX + name[len(STAGED_KEY_PREFIX):]
        final.append(block.name)
    record["keys"] = final
    action = bpy.data.actions[record["action"]]
    action.name = ACTION_PREFIX + obj.name  # (Blender adds ".001" if an action of the user's has it)
    record["action"] = action.name
    assign_action(obj.data.shape_keys, action)
    obj.data.update()


def bake_action(obj, record: dict):
    """The action of `record`'s bake on `obj`, or None: the one the record names, unless
    another object's shape keys play it; then the one this object's shape keys play if it is
    a bake's. A duplicated object (Shift+D) keeps the original's record, which names the
    original's action, while its shape keys play a copy of it: removing the named one would
    freeze the original (test_addon_bake.py, test_rebaking_a_duplicate_keeps_the_originals_bake)."""
    named = bpy.data.actions.get(record.get("action", "")) if record.get("action") else None
    key = obj.data.shape_keys
    playing = key.animation_data.action if key is not None and key.animation_data else None
    if named is not None and (named == playing or named.users == 0):
        return named
    if playing is not None and playing.name.startswith(ACTION_PREFIX):
        return playing
    return None


def remove_shape_keys(obj, record: dict) -> None:
    mesh = obj.data
    key = mesh.shape_keys
    action = bake_action(obj, record)
    if key is not None:
        if key.animation_data and action is not None and key.animation_data.action == action:
            key.animation_data.action = None
        ours = set(record.get("keys", []))
        basis = record.get("basis", BASIS_NAME)
        others = [kb.name for kb in key.key_blocks if kb.name not in ours and kb.name != basis]
        if not others:
            obj.shape_key_clear()  # only our keys: drop the whole Key data-block
        else:
            for name in ours:
                block = key.key_blocks.get(name)
                if block is not None:
                    obj.shape_key_remove(block)
    # Only where nothing else plays it: a duplicate whose shape keys share the original's
    # action (where Duplicate Data leaves actions shared) leaves it to the original.
    if action is not None and action.users == 0:
        bpy.data.actions.remove(action)
    mesh.update()


# ---------------------------------------------------------------------------------------
# PC2 + Mesh Cache


def write_pc2(filepath: str, start_frame: float, local_positions: np.ndarray, sample_rate: float = 1.0) -> None:
    """Write a PC2 file atomically (a temporary file renamed into place)."""
    os.replace(stage_pc2(filepath, start_frame, local_positions, sample_rate), filepath)


def stage_pc2(filepath: str, start_frame: float, local_positions: np.ndarray,
              sample_rate: float = 1.0) -> str:
    """Write the PC2 file for `filepath` under a temporary name of its own beside it and
    return that name: os.replace(name, filepath) (or FileSwap) puts it in place, so that
    several objects' files can all be written before any replaces an existing one."""
    samples, points, _ = local_positions.shape
    directory = os.path.dirname(filepath)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = sibling_name(filepath, "part")
    try:
        with open(temporary, "xb") as handle:
            handle.write(PC2_HEADER.pack(PC2_MAGIC, 1, points, float(start_frame), float(sample_rate), samples))
            np.ascontiguousarray(local_positions, dtype="<f4").tofile(handle)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return temporary


_sibling_count = itertools.count()


def sibling_name(filepath: str, tag: str) -> str:
    """A hidden file name beside `filepath` that no other bake uses, in this process or
    another: two objects staging the same file name never share one."""
    folder, name = os.path.split(filepath)
    return os.path.join(folder, f".{name}.{os.getpid()}-{next(_sibling_count)}.{tag}")


def is_pc2_file(filepath: str) -> bool:
    """Whether `filepath` starts like a PC2 cache (its magic and version)."""
    try:
        with open(filepath, "rb") as handle:
            head = handle.read(PC2_HEADER.size)
    except OSError:
        return False
    return len(head) == PC2_HEADER.size and PC2_HEADER.unpack(head)[:2] == (PC2_MAGIC, 1)


class FileSwap:
    """Puts staged files in place so that every one can be put back: the file a staged one
    replaces is kept as a hidden sibling (a hard link, or a copy) until commit()."""

    def __init__(self):
        self._placed = []  # (target, backup or None), in order

    def put(self, staged: str, target: str) -> None:
        backup = None
        if os.path.exists(target):
            backup = sibling_name(target, "old")
            try:
                os.link(target, backup)
            except OSError:  # a file system without hard links
                shutil.copy2(target, backup)
        try:
            os.replace(staged, target)
        except BaseException:
            if backup is not None:
                os.remove(backup)
            raise
        self._placed.append((target, backup))

    def roll_back(self) -> None:
        """Every target as it was before put()."""
        for target, backup in reversed(self._placed):
            if backup is not None:
                os.replace(backup, target)
            elif os.path.exists(target):
                os.remove(target)
        self._placed = []

    def commit(self) -> None:
        for _, backup in self._placed:
            if backup is not None and os.path.exists(backup):
                os.remove(backup)
        self._placed = []


def read_pc2(filepath: str):
    """(start_frame, sample_rate, positions (samples, points, 3)) of a PC2 file."""
    with open(filepath, "rb") as handle:
        magic, version, points, start, rate, samples = PC2_HEADER.unpack(handle.read(PC2_HEADER.size))
        if magic != PC2_MAGIC or version != 1:
            raise ValueError(f"{filepath} is not a PC2 file")
        data = np.fromfile(handle, dtype="<f4", count=samples * points * 3)
    return start, rate, data.reshape(samples, points, 3)


def move_modifier_first(obj, modifier) -> None:
    move_modifier(obj, modifier, 0)


def move_modifier(obj, modifier, index: int) -> None:
    """`modifier` to place `index` in the stack."""
    now = list(obj.modifiers).index(modifier)
    if now == index:
        return
    if hasattr(obj.modifiers, "move"):
        obj.modifiers.move(now, index)
    else:
        with bpy.context.temp_override(object=obj, active_object=obj):
            bpy.ops.object.modifier_move_to_index(modifier=modifier.name, index=index)


def add_mesh_cache(obj, filepath_setting: str, start_frame: int, name: str = MODIFIER_NAME) -> dict:
    """Mesh Cache modifier reading the PC2 file; first in the stack so that the user's
    modifiers work on the simulated cage, like on the original mesh."""
    modifier = obj.modifiers.new(name, 'MESH_CACHE')
    try:
        modifier.cache_format = 'PC2'
        modifier.filepath = filepath_setting
        modifier.time_mode = 'FRAME'
        modifier.play_mode = 'SCENE'
        modifier.frame_start = float(start_frame)  # sample 0 plays at the first baked frame
        modifier.frame_scale = 1.0
        modifier.interpolation = 'LINEAR'
        modifier.deform_mode = 'OVERWRITE'
        modifier.forward_axis = 'POS_Y'
        modifier.up_axis = 'POS_Z'
        move_modifier_first(obj, modifier)
    except BaseException:
        obj.modifiers.remove(modifier)
        raise
    return {"output": "PC2", "modifier": modifier.name, "filepath": filepath_setting}


# ---------------------------------------------------------------------------------------
# Bake record


DAMAGED = "DAMAGED"  # bake_record's output for a record the bake did not write


def bake_record(obj) -> dict | None:
    """The object's bake record as a dict; None without one. A record that is not one the
    bake wrote (changed by hand or by a script) reads as {"output": DAMAGED}: Free Bake then
    removes the record alone, and a bake refuses until it is gone
    (test_addon_safety.py, test_a_damaged_bake_record_is_named_and_free_bake_removes_it)."""
    record = obj.get(BAKE_RECORD)
    if record is None:
        return None
    record = record.to_dict() if hasattr(record, "to_dict") else None
    return record if readable_record(record) else {"output": DAMAGED}


def readable_record(record) -> bool:
    """Whether `record` has what removing its bake reads, of the types it was written with."""
    if not isinstance(record, dict) or not isinstance(record.get("forces", {}), dict):
        return False
    def text(key, default=""):
        return isinstance(record.get(key, default), str)
    if record.get("output") == "SHAPE_KEYS":
        keys = record.get("keys")
        return isinstance(keys, list) and all(isinstance(k, str) for k in keys) and text("action") and text("basis")
    if record.get("output") == "PC2":
        return isinstance(record.get("modifier"), str) and text("filepath")
    return False


def store_record(obj, record: dict, name: str = BAKE_RECORD) -> None:
    obj[name] = record


def commit(obj, record: dict, previous: dict | None) -> None:
    """Put the staged bake `record` in place of `previous` (the object's stored record, or
    None): remove the previous bake, give the new one its final names, store its record.
    The caller stored the record under STAGED_RECORD before, so that one Blender cannot
    store failed before anything was removed."""
    if previous is not None:
        free_bake(obj, previous)
    forces.commit(obj, record.get("forces", {}))
    if record.get("output") == "SHAPE_KEYS":
        commit_shape_keys(obj, record)
    elif record.get("output") == "PC2":
        modifier = obj.modifiers[record["modifier"]]
        modifier.name = MODIFIER_NAME  # (Blender adds ".001" if a modifier of the user's has it)
        record["modifier"] = modifier.name
    store_record(obj, record)
    obj.pop(STAGED_RECORD, None)


def discard_staged(obj, record: dict) -> None:
    """Remove a staged bake that will not be committed; the previous bake stays."""
    forces.discard(obj, record.get("forces", {}))
    _remove_output(obj, record)
    obj.pop(STAGED_RECORD, None)


def free_bake(obj, record: dict | None = None) -> bool:
    """Remove exactly what the last bake added (shape keys and their action, or the Mesh
    Cache modifier; the forces' attributes and modifiers). The PC2 file itself stays on
    disk so that undo can bring the modifier back. Returns False when the object has no
    bake. `record`: the bake to remove, its stored record left for the caller to replace
    (commit)."""
    stored = record is None
    record = bake_record(obj) if stored else record
    if record is None:
        return False
    if record.get("output") != DAMAGED:  # a damaged record cannot tell ours from the user's
        forces.remove(obj, record.get("forces", {}))
        _remove_output(obj, record)
    if stored:
        del obj[BAKE_RECORD]
    return True


def _remove_output(obj, record: dict) -> None:
    """The shape keys and action, or the Mesh Cache modifier, `record` lists."""
    if record.get("output") == "SHAPE_KEYS":
        remove_shape_keys(obj, record)
    elif record.get("output") == "PC2":
        modifier = obj.modifiers.get(record.get("modifier", ""))
        if modifier is not None and modifier.type == 'MESH_CACHE':
            obj.modifiers.remove(modifier)
