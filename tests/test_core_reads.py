"""Reading a system changes nothing: a run with every read between two simulate calls is
bit-identical to one without, and does as many factorizations.

get_state() is a read like the others; checkpoint(), which also restarts the linear
solvers' factor reuse so that a restore continues identically (test_core_state.py), is a
command and not read here.
"""
import math

import numpy as np
import pytest

import mass_spring as ms


def chain_3d():
    """Springs with dampers, a rope link, a rigid rod and a fix that moves."""
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -9.81]
    mss.linear_solver = "direct"
    fix = mss.add(ms.Fix([0, 0, 0]))
    masses = [mss.add(ms.Mass(0.3 + 0.1 * i, [0.5 * (i + 1), 0.1 * i, 0])) for i in range(5)]
    mss.add(ms.Spring(0.5, 200.0, (fix, masses[0]), damping=0.4))
    mss.add(ms.Spring(0.5, 150.0, (masses[0], masses[1])))
    mss.add(ms.Chain(0.45, 300.0, (masses[1], masses[2]), damping=0.2))
    mss.add(ms.DistanceConstraint(math.hypot(0.5, 0.1), (masses[2], masses[3])))
    mss.add(ms.Spring(0.55, 120.0, (masses[3], masses[4]), damping=0.1))
    mss.masses[4].vel = [0, 0.5, 0]
    return mss


def chain_2d():
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0, -9.81]
    fix = mss.add(ms.Fix([0, 0]))
    a = mss.add(ms.Mass(0.5, [1, 0]))
    b = mss.add(ms.Mass(0.5, [2, 0.2]))
    mss.add(ms.Spring(1.0, 100.0, (fix, a), damping=0.3))
    mss.add(ms.Chain(1.0, 80.0, (a, b)))
    mss.add(ms.DistanceConstraint(math.hypot(2, 0.2), (fix, b)))
    return mss


def read_everything(mss):
    """Every read the Python API offers."""
    seen = [repr(mss), mss.dim, mss.gravity, mss.integrator, mss.rho_inf, mss.newton_tol,
            mss.max_newton_iterations, mss.max_halvings, mss.time, mss.linear_solver,
            mss.num_unknowns, mss.last_newton_iterations]
    for m in mss.masses:
        seen += [m.mass, m.pos, m.vel, m.nr, repr(m)]
    for f in mss.fixes:
        seen += [f.pos, f.nr, repr(f)]
    for s in mss.springs:
        seen += [s.length, s.stiffness, s.damping, s.is_chain, s.connectors, s.c1, s.c2]
    for c in mss.constraints:
        seen += [c.length, c.c1, c.c2, c.connectors, c.force]
    seen += [len(mss.masses), len(mss.fixes), len(mss.springs), len(mss.constraints),
             mss.springs[-1].length, mss.constraints[0].force]
    seen += [mss.positions, mss.velocities, mss.fix_positions, mss.vertex_positions(),
             mss.vertex_velocities(), mss.fixed_vertices, mss.mass_vertices,
             mss.constraint_forces, mss.kinetic_energy(), mss.potential_energy(), mss.energy(),
             mss.max_constraint_violation(), mss.stats, mss.get_state()]
    q, v = mss.positions, mss.velocities
    lam = np.zeros(len(mss.constraints))
    seen += [mss.evaluate(q, v, lam), mss.jacobian(q, v, lam)]
    return seen


def run(make, read, move):
    mss = make()
    mss.simulate(0.05, 5)
    if read:
        read_everything(mss)
    mss.fixes[0].pos = move  # the fix moves during the next call
    if read:
        read_everything(mss)
    mss.simulate(0.05, 5)
    return mss


@pytest.mark.parametrize("make, move", [(chain_3d, [0.02, 0.01, 0.0]), (chain_2d, [0.03, 0.0])])
def test_reads_leave_the_run_bit_identical(make, move):
    quiet, read = run(make, False, move), run(make, True, move)
    np.testing.assert_array_equal(read.positions, quiet.positions)
    np.testing.assert_array_equal(read.velocities, quiet.velocities)
    np.testing.assert_array_equal(read.constraint_forces, quiet.constraint_forces)
    assert read.time == quiet.time
    for key in ("steps", "factorizations", "krylov_iterations", "halved_steps"):
        assert read.stats[key] == quiet.stats[key], key
