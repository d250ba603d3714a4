"""Live preview (issue 39, addon/live.py): the simulation plays with the timeline, the mesh
stays as modelled, computed frames stay, a change computes again, and a bake afterwards is
the preview's."""
from __future__ import annotations

import os

import numpy as np
import pytest

from test_addon_helpers import blender_env, local_coordinates, make_grid, pin, require_bpy, run_python, submodule

N = 33


@pytest.fixture
def sheet(scene):
    """A 33² sheet 1 m wide, pinned at two corners, frames 1..48, Live Preview on."""
    scene.frame_end = 48
    obj = make_grid("Sheet", N, N, spacing=1.0 / (N - 1), location=(0.0, 0.0, 1.0))
    pin(obj, [0, N - 1])
    s = obj.mass_spring
    s.enabled = True
    s.stiffness = 1000.0
    s.live_preview = True
    return obj


def shown(obj) -> np.ndarray:
    """The vertices as the viewport shows them now (object space)."""
    return local_coordinates(obj, evaluated=True)


def modelled(obj) -> np.ndarray:
    return local_coordinates(obj, evaluated=False)


def play(scene, frames):
    shown_frames = {}
    for frame in frames:
        scene.frame_set(frame)
        shown_frames[frame] = shown(scene.objects["Sheet"])
    return shown_frames


def test_playing_moves_the_sheet_and_leaves_the_mesh_as_modelled(scene, sheet):
    before = modelled(sheet)
    frames = play(scene, range(1, 49))
    np.testing.assert_array_equal(frames[1], before)  # the first frame is the modelled shape
    assert frames[48][:, 2].min() < before[:, 2].min() - 0.2  # it fell and swung
    assert all(np.abs(frames[f] - frames[f - 1]).max() > 0 for f in range(2, 49))  # every frame moves
    np.testing.assert_array_equal(modelled(sheet), before)  # the mesh itself is untouched
    assert sheet.data.shape_keys is None
    live = submodule("live")
    assert live.status(sheet) == "48 of 48 frames cached"


def test_scrubbing_back_and_forth_shows_the_same_frames(scene, sheet):
    frames = play(scene, range(1, 49))
    again = play(scene, [20, 48, 5])
    for frame, positions in again.items():
        np.testing.assert_array_equal(positions, frames[frame])


def test_a_jump_ahead_computes_the_frames_between(scene, sheet):
    jumped = play(scene, [30])[30]
    played = play(scene, range(1, 31))[30]
    np.testing.assert_array_equal(jumped, played)


def test_a_change_while_live_computes_again(scene, sheet):
    first = play(scene, [48])[48]
    bake, live = submodule("bake"), submodule("live")
    preview_job = live._previews[live.key(sheet)].job
    overridden = bake.new_job(scene, sheet, {"stiffness": 200.0})
    assert overridden.simulation is None and preview_job.simulation is None  # its own; the preview's is dropped
    sheet.mass_spring.stiffness = 200.0
    softer = play(scene, [48])[48]
    assert np.abs(softer - first).max() > 1e-3
    sheet.mass_spring.stiffness = 1000.0
    np.testing.assert_array_equal(play(scene, [48])[48], first)  # the same inputs, the same motion
    # a moved pin (the mesh) counts too
    sheet.data.vertices[0].co.x -= 0.1
    assert np.abs(play(scene, [48])[48] - first).max() > 1e-3


def test_a_bake_afterwards_is_the_live_frames(scene, sheet):
    live_frames = play(scene, range(1, 49))
    bake, live = submodule("bake"), submodule("live")
    preview_job = live._previews[live.key(sheet)].job
    job = bake.new_job(scene, sheet)
    assert job.simulation is preview_job.simulation and job.simulated  # nothing to compute again
    result = job.finish()
    assert not sheet.mass_spring.live_preview  # the bake replaces the preview
    assert sheet.modifiers.get("Mass–Spring Live Preview") is None
    # the same numbers (issue 39 asks for 1e-5 m): the preview's job is the bake's
    np.testing.assert_array_equal(result.local_positions[-1], live_frames[48])
    scene.frame_set(48)
    np.testing.assert_allclose(shown(sheet), live_frames[48], rtol=0, atol=1e-5)  # through shape keys


def test_a_bake_of_a_half_played_preview_computes_the_rest_the_same(scene, sheet):
    played = play(scene, range(1, 25))
    bake, live = submodule("bake"), submodule("live")
    preview_job = live._previews[live.key(sheet)].job
    job = bake.new_job(scene, sheet)
    assert job.simulation is preview_job.simulation and job.frames_simulated == 23
    bake.run_job(job)
    taken = job.finish()
    sheet.mass_spring.live_preview = False
    bake.free_bake(sheet)
    fresh = bake.bake_object(scene, sheet)
    np.testing.assert_array_equal(taken.local_positions, fresh.local_positions)
    np.testing.assert_array_equal(taken.local_positions[23], played[24])


def test_switching_it_off_removes_what_it_added(scene, sheet):
    play(scene, [10])
    assert sheet.modifiers.get("Mass–Spring Live Preview") is not None
    sheet.mass_spring.live_preview = False
    assert [m.name for m in sheet.modifiers] == []
    np.testing.assert_array_equal(shown(sheet), modelled(sheet))


def test_a_failing_preview_says_why_and_leaves_the_mesh(scene, sheet):
    pin(sheet, range(N * N))  # everything pinned: nothing can move
    play(scene, [5])
    assert "every vertex is pinned" in submodule("live").status(sheet)
    np.testing.assert_array_equal(shown(sheet), modelled(sheet))


def test_saving_and_reopening_while_live_loses_nothing(scene, sheet, tmp_path):
    bpy = require_bpy()
    play(scene, [24])
    before = modelled(sheet).tolist()
    path = tmp_path / "live.blend"
    shown_before = shown(sheet)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    # The preview goes on showing here, but its modifier, which reads a temporary file, is
    # not in the file (found by an adversarial tester: opened without the add-on, Blender
    # warned of a missing cache and kept a dead modifier).
    assert [m.name for m in sheet.modifiers] == [submodule("live").MODIFIER]
    np.testing.assert_array_equal(shown(sheet), shown_before)
    without_addon = run_python(f"""
        import bpy
        bpy.ops.wm.open_mainfile(filepath={str(path)!r})
        RESULT = dict(modifiers=[m.name for m in bpy.data.objects["Sheet"].modifiers])
    """, blender_env(tmp_path / "home"))
    assert without_addon["modifiers"] == []
    result = run_python(f"""
        import bpy, numpy as np, sys
        sys.path.insert(0, {str(submodule('live').__file__.rsplit('/addon/', 1)[0] + '/scripts')!r})
        import addon_loader
        addon_loader.register_addon("repo")
        bpy.ops.wm.open_mainfile(filepath={str(path)!r})
        obj = bpy.data.objects["Sheet"]
        def co(evaluated):
            mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data if evaluated else obj.data
            return [list(v.co) for v in mesh.vertices]
        modelled = co(False)
        bpy.context.scene.frame_set(24)
        RESULT = dict(modelled=modelled, live=obj.mass_spring.live_preview, stiffness=obj.mass_spring.stiffness,
                      shown=co(True), pins=obj.mass_spring.pin_group)
    """, blender_env(tmp_path / "home"))
    np.testing.assert_allclose(result["modelled"], before, rtol=0, atol=1e-7)
    assert result["live"] and result["stiffness"] == 1000.0 and result["pins"] == "Pins"
    np.testing.assert_allclose(result["shown"], play(scene, [24])[24], rtol=0, atol=1e-5)


def test_pins_that_follow_an_animated_object_play_as_they_bake(scene, sheet):
    """The object moves (keyframes): the preview reads its transform at every frame, as the
    bake does, and an edit of the animation computes again."""
    sheet.location = (0.0, 0.0, 1.0)
    sheet.keyframe_insert("location", frame=1)
    sheet.location = (0.5, 0.0, 1.5)
    sheet.keyframe_insert("location", frame=24)
    live_frames = play(scene, range(1, 49))
    result = submodule("bake").bake_object(scene, sheet)
    for frame in (11, 30, 48):
        np.testing.assert_array_equal(result.local_positions[frame - 1], live_frames[frame])


def test_an_edited_animation_computes_again(scene, sheet):
    sheet.keyframe_insert("location", frame=1)
    sheet.location = (0.5, 0.0, 1.5)
    sheet.keyframe_insert("location", frame=24)
    first = play(scene, range(1, 49))[48]
    sheet.location = (-0.5, 0.0, 1.5)
    sheet.keyframe_insert("location", frame=24)  # the pins now go elsewhere
    again = play(scene, [48])[48]
    assert np.abs(again - first).max() > 1e-2


def test_a_frame_change_in_the_window_computes_for_a_budget_then_goes_on(scene, sheet):
    """With a budget (Blender's window), a frame change computes what fits and reports the
    frame not reached; the next calls (a timer's) go on from there."""
    live = submodule("live")
    sheet.mass_spring.live_preview = False
    sheet.mass_spring.live_preview = True
    scene.frame_current = 48  # without frame_set: no handler
    assert not live.update(scene, sheet, budget_seconds=0.0)
    assert live.status(sheet).startswith("1 of 48")  # the first frame, from switching it on
    np.testing.assert_array_equal(shown(sheet), modelled(sheet))  # until then: the last computed
    while not live.update(scene, sheet, budget_seconds=0.01):
        pass
    assert live.status(sheet) == "48 of 48 frames cached"
    np.testing.assert_array_equal(shown(sheet), play(scene, [48])[48])


def test_a_deleted_object_s_preview_goes_with_it(scene, sheet):
    bpy = require_bpy()
    play(scene, [10])
    live = submodule("live")
    path = live._previews[live.key(sheet)].path
    bpy.data.objects.remove(sheet)
    scene.frame_set(11)
    assert not live._previews and not os.path.exists(path)


def test_a_bake_after_a_change_of_output_writes_that_output(scene, sheet, tmp_path):
    """Output is not part of the motion: the bake takes the preview's frames over and still
    writes what the panel says now (a PC2 file, not shape keys)."""
    bpy = require_bpy()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "out.blend"))
    live_frames = play(scene, range(1, 49))
    sheet.mass_spring.output = 'PC2'
    result = submodule("bake").bake_object(scene, sheet)
    assert result.output == 'PC2' and os.path.exists(result.pc2_file) and sheet.data.shape_keys is None
    np.testing.assert_array_equal(result.local_positions[-1], live_frames[48])


def test_an_edited_keyframe_before_the_frame_computes_again_and_bakes_fresh(scene, sheet):
    """A keyframe moved in the middle of the range changes the motion after it, also at
    frames where the object ends up where it was: the preview computes again, and a bake
    is the fresh one."""
    for frame, x in ((1, 0.0), (20, 0.6), (30, 0.0)):
        sheet.location = (x, 0.0, 1.0)
        sheet.keyframe_insert("location", frame=frame)
    first = play(scene, range(1, 49))[48]
    sheet.location = (-0.6, 0.0, 1.0)
    sheet.keyframe_insert("location", frame=20)  # frame 48 is where it was: x = 0
    again = play(scene, [48])[48]
    assert np.abs(again - first).max() > 1e-2
    baked = submodule("bake").bake_object(scene, sheet)
    fresh = submodule("bake").bake_object(scene, sheet)
    np.testing.assert_array_equal(baked.local_positions, fresh.local_positions)
    np.testing.assert_array_equal(baked.local_positions[-1], again)


def test_the_preview_needs_nothing_only_a_bake_needs(scene, sheet):
    """Shape keys of the user's own and a mesh shared with another object stop a bake into
    shape keys, not a preview (it writes neither)."""
    bpy = require_bpy()
    sheet.shape_key_add(name="Basis")
    twin = sheet.copy()  # shares the mesh
    scene.collection.objects.link(twin)
    play(scene, [12])
    live = submodule("live")
    assert live.status(sheet) == "12 of 48 frames cached"
    assert live.status(twin) == "12 of 48 frames cached"
    bpy.data.objects.remove(twin)


def test_a_pc2_bake_does_not_hide_the_preview(scene, sheet, tmp_path):
    bpy = require_bpy()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "pc2.blend"))
    sheet.mass_spring.live_preview = False
    sheet.mass_spring.output = 'PC2'
    baked = submodule("bake").bake_object(scene, sheet)
    sheet.mass_spring.stiffness = 200.0
    sheet.mass_spring.live_preview = True
    shown_20 = play(scene, [20])[20]
    live = submodule("live")
    preview = live._previews[live.key(sheet)]
    np.testing.assert_array_equal(shown_20, preview.job.simulation.local_positions[19])
    assert np.abs(shown_20 - baked.local_positions[19]).max() > 1e-3


def test_what_the_preview_added_comes_back_or_goes_as_it_should(scene, sheet):
    """A modifier removed by hand comes back at the next frame change; a file removed (a
    temp cleaner) is written again, without an error; disabling the object removes both."""
    live = submodule("live")
    play(scene, range(1, 11))
    sheet.modifiers.remove(sheet.modifiers["Mass–Spring Live Preview"])
    os.remove(live._previews[live.key(sheet)].path)
    again = play(scene, [8, 12])
    assert sheet.modifiers.get("Mass–Spring Live Preview") is not None
    assert live.status(sheet) == "12 of 48 frames cached"
    assert np.abs(again[8] - modelled(sheet)).max() > 1e-3
    path = live._previews[live.key(sheet)].path
    sheet.mass_spring.enabled = False
    play(scene, [13])
    assert sheet.modifiers.get("Mass–Spring Live Preview") is None and not os.path.exists(path)


def test_starting_a_preview_of_an_animated_object_keeps_to_the_budget(scene, sheet):
    """The transforms of a moving object are read frame by frame like the physics: a frame
    change in the window never reads the whole range at once."""
    live = submodule("live")
    scene.frame_end = 4000
    sheet.keyframe_insert("location", frame=1)
    sheet.location = (1.0, 0.0, 1.0)
    sheet.keyframe_insert("location", frame=4000)
    sheet.mass_spring.live_preview = False
    sheet.mass_spring.live_preview = True  # background: the first frame at once
    sheet.mass_spring.stiffness = 900.0  # the next frame change starts again
    scene.frame_current = 2
    assert not live.update(scene, sheet, budget_seconds=0.01)
    job = live._previews[live.key(sheet)].job
    while not job._matrices:  # (a busy machine may spend the first budget on setting up)
        assert not live.update(scene, sheet, budget_seconds=0.01)
    assert len(job._matrices) < 4000 and scene.frame_current == 2
    scene.frame_current = 7  # the user goes on meanwhile: the next step comes back to 7, not 2
    assert not live.update(scene, sheet, budget_seconds=0.01)
    assert scene.frame_current == 7 and len(job._matrices) < 4000
