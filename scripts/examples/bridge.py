"""Bridge: a W×H lattice of masses with horizontal, vertical and diagonal springs, fixed at
both ends, sagging under its own weight.

The still shows the deepest frame of the first sag; the thin grey line is the deck as
modelled.

    python scripts/examples/bridge.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "bridge"
TITLE = "Bridge"
FRAMES = 36
RENDER_FRAME = FRAMES  # decorate() picks the frame of the deepest sag
TUBE_RADIUS = 0.018

DEFAULTS = dict(width=17, height=3, spacing=0.25, mass=0.1, stiffness=3000.0, damping=0.4,
                location=(-2.0, 0.0, 2.4), substeps=10)


def build(**params):
    return [scenes.bridge(**{**DEFAULTS, **params})]


def deck(positions, width):
    """The bottom row of the lattice (its last `width` vertices), left to right."""
    return positions[..., -width:, :]


def decorate(scene, objects, results):
    bridge = objects[0]
    width = DEFAULTS["width"]
    positions = results[bridge.name].world_positions()
    bottom = deck(positions, width)
    middle = width // 2
    deepest = int(np.argmin(bottom[:, middle, 2]))
    frame = scene.frame_start + deepest
    _common.add_trail("Deck as modelled", bottom[0], color=(0.12, 0.12, 0.14), radius=0.007)
    x0, _, z0 = bridge.location
    span = (width - 1) * DEFAULTS["spacing"]
    rows = DEFAULTS["height"]
    low = z0 - (rows - 1) * DEFAULTS["spacing"]
    for x in (x0 - 0.35, x0 + span + 0.05):
        scenes.add_box("Pillar", (x, -0.3, 0.0), (x + 0.3, 0.3, low - 0.05))
    ms = bridge.mass_spring
    sag = bottom[0, middle, 2] - bottom[deepest, middle, 2]
    return dict(center=(x0 + span / 2, 0.0, 1.9), width=5.8, height=3.3, frame=frame,
                subtitle=f"{width}×{rows} masses of {ms.total_mass / (width * rows) * 1000:.0f} g, "
                         f"springs of {ms.stiffness:g} N/m, ends fixed · deepest sag "
                         f"{sag * 100:.1f} cm (frame {frame}) · grey: as modelled")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
