"""A damped hanging chain settles to the exact static spring extensions."""
import numpy as np
import pytest

import mass_spring as ms

G = 9.81


@pytest.mark.parametrize("integrator", ["generalized_alpha", "implicit_euler"])
def test_hanging_chain_static_extensions(integrator):
    n, m, k, L0 = 10, 0.3, 200.0, 0.5
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -G]
    prev = mss.add(ms.Fix([0, 0, 0]))
    for i in range(n):
        cur = mss.add(ms.Mass(m, [0, 0, -(i + 1) * L0]))
        mss.add(ms.Spring(L0, k, (prev, cur), damping=10.0))
        prev = cur
    mss.set_integrator(integrator)
    mss.simulate(100.0, 2000)
    z = np.array([0.0] + [p.pos[2] for p in mss.masses])
    extensions = -np.diff(z) - L0
    exact = np.array([(n - i + 1) * m * G / k for i in range(1, n + 1)])
    np.testing.assert_allclose(extensions, exact, rtol=1e-7)
    assert mss.kinetic_energy() < 1e-12


def test_rope_links_are_slack_when_compressed():
    mss = ms.MassSpringSystem3d()
    f = mss.add(ms.Fix([0, 0, 0]))
    m = mss.add(ms.Mass(1.0, [0, 0, -0.5], vel=[0, 0, 0]))
    mss.add(ms.Chain(1.0, 1000.0, (f, m), damping=20.0))  # longer than the gap: slack
    mss.gravity = [0, 0, -G]
    mss.simulate(0.2, 20)
    # free fall until the rope is taut at z = -1
    assert mss.masses[0].pos[2] == pytest.approx(-0.5 - 0.5 * G * 0.2 ** 2, abs=1e-9)
    mss.simulate(30.0, 3000)  # bounces on the rope, the dashpot (active when taut) settles it
    assert mss.masses[0].pos[2] == pytest.approx(-1.0 - G / 1000.0, abs=1e-9)
