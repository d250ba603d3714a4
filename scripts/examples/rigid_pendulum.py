"""Rigid pendulum: one mass on a rigid rod (a distance constraint) to a fix, released from
rest at 90°. The blue arc is the path of the mass; the subtitle compares the period
measured from the baked frames with the exact large-amplitude period
T = 2π √(L/g) / AGM(1, cos(θ0/2)).

    python scripts/examples/rigid_pendulum.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import math
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "rigid_pendulum"
TITLE = "Rigid pendulum"
FRAMES = 96
RENDER_FRAME = 9
TUBE_RADIUS = 0.022

DEFAULTS = dict(length=1.5, angle=90.0, mass=1.0, location=(0.0, 0.0, 3.0), substeps=10)


def build(**params):
    return [scenes.rigid_pendulum(**{**DEFAULTS, **params})]


def crossings(t, x):
    """Times at which x(t) crosses 0, by cubic interpolation through the 4 nearest samples."""
    out = []
    for i in np.flatnonzero(np.sign(x[:-1]) * np.sign(x[1:]) < 0):
        lo = max(0, min(i - 1, len(x) - 4))
        coeffs = np.polyfit(t[lo:lo + 4] - t[i], x[lo:lo + 4], 3)
        roots = [r.real + t[i] for r in np.roots(coeffs)
                 if abs(r.imag) < 1e-9 and -1e-9 <= r.real <= t[i + 1] - t[i] + 1e-9]
        if roots:
            out.append(min(roots, key=lambda r: abs(r - t[i])))
    return np.array(out)


def measured_period(t, x):
    """Twice the mean spacing of the zero crossings of the horizontal displacement."""
    c = crossings(t, x)
    if len(c) < 2:
        return float("nan")
    return float(2.0 * (c[-1] - c[0]) / (len(c) - 1))


def decorate(scene, objects, results):
    pendulum = objects[0]
    positions = results[pendulum.name].world_positions()
    _common.add_trail("Path of the mass", positions[:, 1], radius=0.012)
    x0, _, z0 = pendulum.location
    scenes.add_box("Beam", (x0 - 0.5, -0.06, z0), (x0 + 0.5, 0.06, z0 + 0.1))
    fps = scene.render.fps / scene.render.fps_base
    t = np.arange(len(positions)) / fps
    period = measured_period(t, positions[:, 1, 0] - positions[:, 0, 0])
    g = -scene.gravity[2]
    exact = _common.exact_pendulum_period(DEFAULTS["length"], DEFAULTS["angle"], g)
    small = 2 * math.pi * math.sqrt(DEFAULTS["length"] / g)
    return dict(center=(x0, 0.0, 2.35), width=5.4, height=3.0,
                subtitle=f"rod {DEFAULTS['length']:g} m, released at {DEFAULTS['angle']:g}° · "
                         f"period from the bake {period:.3f} s, exact {exact:.3f} s "
                         f"(small-angle formula: {small:.3f} s)")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
