"""Integrators side by side: the same 1-D spring (a fix, one mass, no gravity) integrated
by explicit Euler, symplectic Euler, RK2, implicit Euler, Newmark and generalized-α, one
copy each, with the same step size.

Each row shows the spring at the still's frame and, to its right, the mass's displacement
over the whole bake (time to the right) between grey lines at the exact amplitude: explicit
Euler gains energy, implicit Euler loses it, the others keep it.

    python scripts/examples/integrators.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "integrators"
TITLE = "Integrators side by side"
FRAMES = 121
RENDER_FRAME = 103  # t = 4.25 s: a peak, where the amplitudes differ most
TUBE_RADIUS = 0.02

# 1 Hz spring, 8 steps per frame at 24 fps (h = T/192): large enough for the first-order
# methods to drift visibly in 5 s, small enough for explicit Euler not to blow up.
# damping=0: the add-on's default dashpot (0.1 N·s/m) would hide the integrators' own
# energy behaviour.
DEFAULTS = dict(length=1.0, amplitude=0.4, mass=1.0, frequency=1.0, gap=0.65, substeps=8,
                rho_inf=0.8, damping=0.0, location=(0.0, 0.0, 3.7))
TRACE_X = (2.0, 6.0)       # where the displacement-over-time plot of each row sits
TRACE_SCALE = 0.5          # plotted height per metre of displacement


def build(**params):
    return scenes.integrator_comparison(**{**DEFAULTS, **params})


def amplitude_ratio(x, rest, fps, frequency, amplitude):
    """Largest |x - rest| over the last period of the bake, relative to the exact amplitude
    (sampled once per frame: at 24 frames per period the peak is hit exactly)."""
    last = max(2, int(round(fps / frequency)))
    return float(np.abs(x[-last:] - rest).max() / amplitude)


def decorate(scene, objects, results):
    fps = scene.render.fps / scene.render.fps_base
    length, amplitude = DEFAULTS["length"], DEFAULTS["amplitude"]
    ratios = {}
    for obj in objects:
        positions = results[obj.name].world_positions()
        x = positions[:, 1, 0] - positions[:, 0, 0]
        z = obj.location[2]
        t = np.linspace(TRACE_X[0], TRACE_X[1], len(x))
        trace = np.stack([t, np.full_like(t, 0.0), z + TRACE_SCALE * (x - length)], axis=1)
        _common.add_trail(f"{obj.name} trace", trace, radius=0.01)
        for sign in (-1, 1):
            edge = np.array([[TRACE_X[0], 0.02, z + sign * TRACE_SCALE * amplitude],
                             [TRACE_X[1], 0.02, z + sign * TRACE_SCALE * amplitude]])
            _common.add_trail(f"{obj.name} exact amplitude {sign:+d}", edge,
                              color=(0.55, 0.55, 0.58), radius=0.004)
        ratio = amplitude_ratio(x, length, fps, DEFAULTS["frequency"], amplitude)
        ratios[obj.name] = ratio
        scenes.add_label(f"× {ratio:.2f}", (TRACE_X[1] + 0.15, 0.0, z - 0.07), size=0.18)
    top = objects[0].location[2]
    seconds = (scene.frame_end - scene.frame_start) / fps
    scenes.add_label(f"displacement over {seconds:g} s →", (TRACE_X[0], 0.0, top + 0.3),
                     size=0.16)
    scenes.add_label("final amplitude", (TRACE_X[1] + 0.15, 0.0, top + 0.3), size=0.16)
    ms = objects[0].mass_spring
    h = 1.0 / (fps * ms.substeps)
    return dict(center=(2.75, 0.0, 2.4), width=9.8, height=5.5,
                subtitle=f"1 Hz spring, amplitude {amplitude:g} m, the same step h = 1/{1 / h:.0f} s "
                         f"(T/{DEFAULTS['frequency'] ** -1 / h:.0f}) for all · generalized-α ρ∞ = "
                         f"{ms.rho_inf:.1f} · grey: exact amplitude")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
