"""The core's trajectories stay what they were before the remodel of issue 35.

The seeds' structures and a hanging 33 x 33 sheet, integrated with fixed steps and a tight
Newton tolerance by generalized-alpha, Newmark and implicit Euler, must follow the
positions recorded from the core as it was (tests/data/golden_trajectories.npz, written by
`python tests/test_core_golden.py --record` at commit 4229334) to 1e-9 of the structure's
size. Restructuring the code may change round-off, never the motion.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets
from mass_spring.structure import build_system

GOLDEN = Path(__file__).parent / "data" / "golden_trajectories.npz"
INTEGRATORS = ("generalized_alpha", "newmark", "implicit_euler")
SAMPLES = 6  # positions recorded after each of this many equal spans
RELATIVE = 1e-9


def hanging_sheet():
    """Hung by its two top corners and let go 40 degrees from vertical: it swings like a
    pendulum, taut. (A sheet let go flat, or flat and tilted, buckles: that amplifies
    round-off a billion-fold in half a second, which no code change can stay within 1e-9 of.)"""
    nx = 33
    sheet = presets.cloth(nx, plane="XZ", spacing=0.03, pins=(nx * (nx - 1), nx * nx - 1),
                          shear_stiffness=200.0, bending_stiffness=5.0)
    below = sheet.positions[:, 2].max() - sheet.positions[:, 2]
    sheet.positions[:, 1] = below * np.sin(np.radians(40))
    sheet.positions[:, 2] = sheet.positions[:, 2].max() - below * np.cos(np.radians(40))
    return sheet


# name -> (structure, seconds, steps): a few periods of each structure's fastest motion
# that matters, with steps short enough for Newton to converge tightly.
STRUCTURES = {
    "chain": (lambda: presets.chain(angle=60.0), 1.2, 240),
    "pendulum": (presets.pendulum, 1.2, 240),
    "double_pendulum": (presets.double_pendulum, 1.2, 240),
    "bridge": (presets.bridge, 0.6, 120),
    "spinning_top": (presets.spinning_ring, 0.6, 120),
    "crane": (presets.crane, 0.6, 120),
    "sheet33": (hanging_sheet, 0.3, 60),
}


def size(name: str) -> float:
    """The structure's largest side as built, pins included."""
    return float(np.max(np.ptp(STRUCTURES[name][0]().positions, axis=0)))


def trajectory(name: str, integrator: str) -> np.ndarray:
    make, seconds, steps = STRUCTURES[name]
    system = build_system(make(), gravity=(0.0, 0.0, -9.81))
    system.set_integrator(integrator, 0.8 if integrator == "generalized_alpha" else None)
    # Newton with the exact Jacobian converges quadratically to round-off: the trajectory is
    # then the integrator's own, not one of the paths a slowly converging (projected)
    # Newton may take within its tolerance (implicit Euler on the sheet: 1e-8 apart).
    system._newton_matrix = "exact"
    system.newton_tol = 1e-12
    system.max_newton_iterations = 50
    frames = []
    for _ in range(SAMPLES):
        system.simulate(seconds / SAMPLES, steps // SAMPLES)
        frames.append(np.array(system.positions))
    return np.stack(frames)


def keys():
    return [(name, integrator) for name in STRUCTURES for integrator in INTEGRATORS]


@pytest.mark.parametrize("name,integrator", keys())
def test_the_trajectory_is_the_recorded_one(name, integrator):
    recorded = np.load(GOLDEN)[f"{name}/{integrator}"]
    now = trajectory(name, integrator)
    error = np.max(np.abs(now - recorded)) / size(name)
    assert error <= RELATIVE, f"{name} by {integrator}: {error:.2e} of its size from the record"


def record() -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez_compressed(GOLDEN, **{f"{n}/{i}": trajectory(n, i) for n, i in keys()})
    print(f"recorded {len(keys())} trajectories in {GOLDEN} with mass_spring {ms.__file__}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_core_golden.py --record")
    record()
