"""Continuation: many short calls equal one long call; checkpoint and restart are exact."""
import pickle

import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets


def bridge(integrator="generalized_alpha"):
    """The seeds' braced bridge (8 × 3, one diagonal per cell, fixed at its two top ends)
    with dampers on the springs, one rod in the bottom row and a mass kicked out of its
    plane."""
    s = presets.bridge(width=8, height=3, spacing=1.0, cross=False, mass=0.2,
                       stiffness=1000.0, damping=0.5, pins="corners")
    s.rigid[np.flatnonzero((s.edges == [19, 20]).all(axis=1))] = True
    s.velocities = np.zeros_like(s.positions)
    s.velocities[6] = [0.0, 1.0, 0.0]
    mss = ms.build_system(s)
    mss.set_integrator(integrator)
    return mss


@pytest.mark.parametrize("integrator", ["generalized_alpha", "newmark", "implicit_euler"])
def test_one_call_per_step_equals_one_long_call(integrator):
    a, b = bridge(integrator), bridge(integrator)
    a.simulate(1.0, 100)
    for _ in range(100):
        b.simulate(0.01, 1)
    np.testing.assert_allclose(b.positions, a.positions, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.velocities, a.velocities, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.constraint_forces, a.constraint_forces, rtol=1e-9)


def test_checkpoint_restart_is_bit_identical():
    mss = bridge()
    mss.simulate(0.3, 30)
    saved = pickle.loads(pickle.dumps(mss.checkpoint()))  # survives a round trip to disk
    mss.simulate(0.5, 50)
    first = (mss.positions.copy(), mss.velocities.copy(), mss.constraint_forces.copy())
    mss.set_state(saved)
    assert mss.time == pytest.approx(0.3)
    mss.simulate(0.5, 50)
    np.testing.assert_array_equal(mss.positions, first[0])
    np.testing.assert_array_equal(mss.velocities, first[1])
    np.testing.assert_array_equal(mss.constraint_forces, first[2])


def test_state_restores_into_a_fresh_identical_system():
    a = bridge()
    a.simulate(0.2, 20)
    state = a.checkpoint()
    b = bridge()
    b.set_state(state)
    a.simulate(0.2, 20)
    b.simulate(0.2, 20)
    np.testing.assert_array_equal(a.positions, b.positions)


def test_state_of_another_system_is_refused():
    state = bridge().get_state()
    small = ms.MassSpringSystem3d()
    small.add(ms.Mass(1.0, [0, 0, 0]))
    with pytest.raises(ValueError, match="state"):
        small.set_state(state)


def test_moving_fix_is_interpolated_over_the_call():
    """A fix written between calls moves linearly during the next call (a moving anchor)."""
    mss = ms.MassSpringSystem3d()
    f = mss.add(ms.Fix([0, 0, 0]))
    m = mss.add(ms.Mass(1.0, [1, 0, 0]))
    mss.add(ms.DistanceConstraint(1.0, (f, m)))
    for n in range(1, 101):
        mss.fixes[0].pos = [0.01 * n, 0.0, 0.0]  # push the anchor along the rod at 1 m/s
        mss.simulate(0.01, 4)
        assert mss.max_constraint_violation() < 1e-9
        # the rod pushes the mass ahead of the anchor at every step
        assert mss.masses[0].pos[0] == pytest.approx(1.0 + 0.01 * n, abs=1e-9)
    assert mss.fixes[0].pos[0] == pytest.approx(1.0)
    assert mss.masses[0].vel[0] == pytest.approx(1.0, abs=1e-6)


def test_a_restore_from_a_plain_read_agrees_to_the_solver_tolerance():
    """get_state() is a pure read: the run goes on with its factor, the restore starts a
    new one, and the two agree to Newton's tolerance (not bit for bit: see checkpoint())."""
    mss = bridge()
    mss.simulate(0.3, 30)
    saved = mss.get_state()
    mss.simulate(0.5, 50)
    first = mss.positions.copy()
    mss.set_state(saved)
    mss.simulate(0.5, 50)
    np.testing.assert_allclose(mss.positions, first, rtol=0, atol=1e-8)
