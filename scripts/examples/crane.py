"""Crane: a tower crane whose truss is made of rigid rods (tower posts and rings, jib
chords and rungs) braced by stiff diagonal springs, with a load on a rope (tension-only
links) hanging from the jib tip, released 30° from the vertical so that it swings.

The blue line is the path of the load; the jib and tower flex as it swings.

    python scripts/examples/crane.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "crane"
TITLE = "Crane"
FRAMES = 60
RENDER_FRAME = 40
TUBE_RADIUS = 0.02

DEFAULTS = dict(levels=6, rope_angle=30.0, load_mass=1.0, damping=5.0,
                location=(0.0, 0.0, 0.0), substeps=10)


def build(**params):
    return [scenes.crane(**{**DEFAULTS, **params})]


def load_index(obj) -> int:
    """The load is the heaviest vertex (the crane builder weights it by load_mass)."""
    return int(np.argmax(_common.vertex_masses(obj)))


def decorate(scene, objects, results):
    crane = objects[0]
    positions = results[crane.name].world_positions()
    load = load_index(crane)
    _common.add_trail("Path of the load", positions[:, load], radius=0.01)
    x0, _, _ = crane.location
    scenes.add_box("Footing", (x0 - 0.4, -0.4, -0.02), (x0 + 0.4, 0.4, 0.03))
    rigid = _common.edge_mask(crane, "ms_rigid")
    rope = _common.edge_mask(crane, "ms_rope")
    e = _common.edges(crane)[rigid]
    lengths = np.linalg.norm(positions[:, e[:, 1]] - positions[:, e[:, 0]], axis=2)
    worst = np.abs(lengths - lengths[0]).max()
    ms = crane.mass_spring
    springs = int((~rigid & ~rope).sum())
    return dict(center=(x0 + 0.95, 0.0, 2.3), width=8.4, height=4.75,
                subtitle=f"{int(rigid.sum())} rigid rods (blue), {springs} springs of "
                         f"{ms.stiffness:g} N/m (orange), a rope of {int(rope.sum())} links, load "
                         f"{DEFAULTS['load_mass']:g} kg · rod length error ≤ {worst:.0e} m")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
