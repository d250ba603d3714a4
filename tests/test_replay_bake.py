"""scripts/replay_bake.py: a bake recorded through the add-on, replayed on the core alone,
takes the same steps and iterations and ends at the same positions, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import make_grid, make_mesh_object, pin, require_bpy, submodule

bpy = require_bpy()
import replay_bake  # noqa: E402  (scripts/ is on sys.path: conftest.py)

PLANE = [(-2, -2, 0), (2, -2, 0), (2, 2, 0), (-2, 2, 0)]


def floor(name="Floor", moving=False):
    obj = make_mesh_object(name, PLANE, faces=[(0, 1, 2, 3)], location=(0, 0, 0.5))
    obj.modifiers.new("Collision", 'COLLISION')
    obj.collision.thickness_outer = 0.02
    if moving:  # rises into the sheet
        obj.keyframe_insert("location", frame=1)
        obj.location.z = 0.9
        obj.keyframe_insert("location", frame=12)
    return obj


@pytest.mark.parametrize("moving", [False, True], ids=["static floor", "rising floor, moving pin"])
def test_a_replay_takes_the_bake_s_steps_and_ends_where_it_ended(scene, moving):
    scene.frame_end = 12
    floor(moving=moving)
    sheet = make_grid("Sheet", nx=8, ny=8, spacing=0.1, location=(0, 0, 0.7))
    sheet.mass_spring.enabled = True
    if moving:  # a pinned corner that moves: its positions go with each frame
        pin(sheet, [0])
        sheet.keyframe_insert("location", frame=1)
        sheet.location.x += 0.2
        sheet.keyframe_insert("location", frame=12)
    bake = submodule("bake")
    rec = replay_bake.record_bake(submodule("simulation"), lambda: bake.bake_object(scene, sheet))
    assert len(rec["frames"]) == 11
    assert (rec["frames"][0]["colliders"] is not None) == moving
    assert rec["stats"]["newton_iterations"] > 0
    seconds, stats, positions = replay_bake.replay_once(rec)
    assert stats == rec["stats"]
    np.testing.assert_array_equal(positions, rec["positions"])
    # Recording unwrapped what it wrapped: a second bake is not recorded.
    simulation = submodule("simulation")
    assert not hasattr(simulation.FrameSimulation, "_replay_colliders")
    assert simulation.import_core().build_system.__name__ == "build_system"
    assert simulation.FrameSimulation.__init__.__name__ == "__init__"
    assert simulation.FrameSimulation.step.__name__ == "step"


def test_a_spread_replays_at_tolerances_around_the_bake_s(scene):
    scene.frame_end = 6
    floor()
    sheet = make_grid("Sheet", nx=6, ny=6, spacing=0.1, location=(0, 0, 0.6))
    sheet.mass_spring.enabled = True
    bake = submodule("bake")
    rec = replay_bake.record_bake(submodule("simulation"), lambda: bake.bake_object(scene, sheet))
    rows = replay_bake.spread_rows(rec, replay_bake.SPREAD[:3])
    assert len(rows) == 3 and rows[0][1:] == [rec["stats"][k] for k in replay_bake.COUNTS]
    assert "newton" in replay_bake.summary(rows)
