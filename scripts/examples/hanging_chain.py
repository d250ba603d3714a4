"""Hanging chain: masses in a row under a fix, joined by springs (the seeds' first example).

Released straight out at 60° from the vertical, the chain swings down and whips; the thin
blue line is the path of its last mass over the baked frames.

    python scripts/examples/hanging_chain.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "hanging_chain"
TITLE = "Hanging chain"
FRAMES = 40
RENDER_FRAME = 28
TUBE_RADIUS = 0.02

# The gallery's chain; tests pass their own values (heavy damping, hanging straight down).
DEFAULTS = dict(n=12, spacing=0.2, angle=60.0, mass=0.05, stiffness=600.0, damping=0.05,
                location=(0.0, 0.0, 3.2), substeps=10)


def build(**params):
    return [scenes.hanging_chain(**{**DEFAULTS, **params})]


def decorate(scene, objects, results):
    chain = objects[0]
    positions = results[chain.name].world_positions()
    _common.add_trail("Tip path", positions[:, -1], radius=0.012)
    x0, _, z0 = chain.location
    scenes.add_box("Beam", (x0 - 0.6, -0.06, z0), (x0 + 0.6, 0.06, z0 + 0.1))
    ms = chain.mass_spring
    n = len(chain.data.vertices) - 1
    return dict(center=(x0, 0.0, 2.1), width=6.4, height=3.6,
                subtitle=f"{n} masses of {ms.total_mass / (n + 1) * 1000:.0f} g, springs of "
                         f"{ms.stiffness:g} N/m, released at {DEFAULTS['angle']:g}° · "
                         "blue: path of the last mass")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
