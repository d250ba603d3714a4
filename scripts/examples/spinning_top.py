"""Spinning top ("Kreisel"): a ring of masses joined by springs (neighbours and second
neighbours) and held by spoke springs on a pinned hub, given an initial spin.

Spinning stretches the ring outwards; gravity pulls it down a little. The grey circle is
the ring as modelled; the blue streaks show where each rim mass was over the last frames.

    python scripts/examples/spinning_top.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "spinning_top"
TITLE = "Spinning top (Kreisel)"
FRAMES = 72
RENDER_FRAME = 72
TUBE_RADIUS = 0.016
STREAK_FRAMES = 2

DEFAULTS = dict(n=16, radius=0.8, spin=8.0, hub=True, mass=0.05, stiffness=300.0,
                damping=0.02, location=(0.0, 0.0, 1.9), substeps=10)


def build(**params):
    return [scenes.spinning_ring(**{**DEFAULTS, **params})]


def decorate(scene, objects, results):
    ring = objects[0]
    positions = results[ring.name].world_positions()
    n = DEFAULTS["n"]
    rest = np.vstack([positions[0, :n], positions[0, :1]])
    _common.add_trail("Ring as modelled", rest, color=(0.3, 0.3, 0.32), radius=0.005)
    # Streaks: where every rim mass was over the last few frames before the still.
    streak = positions[-STREAK_FRAMES:] - np.array([0.0, 0.05, 0.0])  # just in front

    for i in range(n):
        _common.add_trail(f"Streak {i}", streak[:, i], radius=0.012, color=(0.35, 0.6, 0.95))
    x0, _, z0 = ring.location
    scenes.add_box("Stand", (x0 - 0.05, 0.08, 0.0), (x0 + 0.05, 0.18, z0))
    centre = positions[:, -1] if DEFAULTS["hub"] else positions[:, :n].mean(axis=1)
    radii = np.linalg.norm(positions[:, :n] - centre[:, None], axis=2).mean(axis=1)
    ms = ring.mass_spring
    spin = ms.initial_angular_velocity[1]
    return dict(center=(x0, 0.0, 1.95), width=4.6, height=2.6,
                subtitle=f"{n} masses, springs {ms.stiffness:g} N/m, spin {spin:g} rad/s on a fixed "
                         f"hub · radius {radii[0]:.3f} m → up to {radii.max():.3f} m · "
                         "blue: motion over the last frame")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
