"""Double pendulum: two rigid rods in series from a fix, released high: chaotic motion.

The blue line is the path of the outer mass over the bake, the grey one the path of the
inner mass (a circle: its rod keeps its length).

    python scripts/examples/double_pendulum.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "double_pendulum"
TITLE = "Double pendulum"
FRAMES = 145
RENDER_FRAME = 145
TUBE_RADIUS = 0.022

DEFAULTS = dict(lengths=(0.8, 0.8), angles=(120.0, 150.0), mass=1.0,
                location=(0.0, 0.0, 2.4), substeps=10)


def build(**params):
    return [scenes.double_pendulum(**{**DEFAULTS, **params})]


def decorate(scene, objects, results):
    pendulum = objects[0]
    positions = results[pendulum.name].world_positions()
    _common.add_trail("Path of the outer mass", positions[:, 2], radius=0.009)
    _common.add_trail("Path of the inner mass", positions[:, 1], color=(0.3, 0.3, 0.32),
                      radius=0.005)
    x0, _, z0 = pendulum.location
    scenes.add_box("Beam", (x0 - 0.4, -0.06, z0 + 0.04), (x0 + 0.4, 0.06, z0 + 0.14))
    ms = pendulum.mass_spring
    rods = np.linalg.norm(np.diff(positions, axis=1), axis=2)
    l1, l2 = DEFAULTS["lengths"]
    worst = np.abs(rods - np.array([l1, l2])).max()
    seconds = (len(positions) - 1) / (scene.render.fps / scene.render.fps_base)
    return dict(center=(x0, 0.0, 2.45), width=7.5, height=4.2,
                subtitle=f"rods {l1:g} m and {l2:g} m, released at {DEFAULTS['angles'][0]:g}° and "
                         f"{DEFAULTS['angles'][1]:g}° · generalized-α ρ∞ = {ms.rho_inf:.1f} · "
                         f"{seconds:.0f} s · rod length error ≤ {worst:.0e} m")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
