"""The seeds' code examples run unchanged (copied from ../shared/seeds)."""
import numpy as np

import mass_spring as ms


def test_minimal_example():
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, -9.81, 0]

    # build a simple chain
    f = mss.add(ms.Fix([0,0,0]))
    m1 = mss.add(ms.Mass(1.0, [1,0,0]))
    m2 = mss.add(ms.Mass(1.0, [2,0,0]))

    mss.add(ms.Spring(1.0, 20.0, [f, m1]))
    mss.add(ms.Spring(1.0, 20.0, [m1, m2]))

    # optional constraint between m1 and m2
    mss.add(ms.DistanceConstraint(1.0, [m1, m2]))

    # run the simulation
    mss.simulate(tend=5, steps=500)

    sphere_positions = [None] * len(mss.masses)
    for i, m in enumerate(mss.masses):
        sphere_positions[i] = m.pos
    assert np.linalg.norm(np.subtract(sphere_positions[1], sphere_positions[0])) == \
        np.float64(1.0) or abs(mss.max_constraint_violation()) < 1e-9


def test_chain_bridge_constraint_kreisel_double_pendulum_snippets():
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, -9.81, 0]

    fix = mss.add(ms.Fix([0,0,0]))

    m_prev = fix
    for i in range(10):
        m = mss.add(ms.Mass(1.0, [0, -i-1, 0]))
        mss.add(ms.Spring(1.0, 20, [m_prev, m]))
        m_prev = m

    mss.simulate(5.0, 800)
    assert len(mss.masses) == 10 and mss.masses[9].pos[1] < -10

    mss = ms.MassSpringSystem3d()
    W, H = 6, 2
    nodes = []

    for j in range(H):
        row = []
        for i in range(W):
            m = mss.add(ms.Mass(0.2, [i, -j, 0]))
            row.append(m)
        nodes.append(row)

    # fix the left and right ends
    mss.add(ms.Fix([0,0,0]))
    mss.add(ms.Fix([W-1,0,0]))
    assert len(mss.fixes) == 2

    mss = ms.MassSpringSystem3d()
    fix = mss.add(ms.Fix([0,0,0]))
    m   = mss.add(ms.Mass(1.0, [1,0,0]))

    # keep them exactly 1 unit apart
    mss.add(ms.DistanceConstraint(1.0, [fix, m]))

    mss.simulate(5.0, 600)
    assert mss.max_constraint_violation() < 1e-9

    mss = ms.MassSpringSystem3d()
    N = 12
    R = 1.0
    masses = []

    # place masses in a circle
    for i in range(N):
        angle = 2*np.pi*i/N
        p = [R*np.cos(angle), R*np.sin(angle), 0]
        m = mss.add(ms.Mass(0.1, p))
        masses.append(m)

    # connect neighbors
    for i in range(N):
        mss.add(ms.Spring(1.0, 100.0, [masses[i], masses[(i+1)%N]]))
    for i, m in enumerate(masses):
        angle = 2*np.pi*i/N
        mss.masses[m.nr].vel = [-3*np.sin(angle), 3*np.cos(angle), 0]
    mss.simulate(2.0, 400)

    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, -9.81, 0]
    f = mss.add(ms.Fix([0,0,0]))
    m1 = mss.add(ms.Mass(1.0, [1,0,0]))
    m2 = mss.add(ms.Mass(1.0, [2,0,0]))

    mss.add(ms.DistanceConstraint(1.0, [f, m1]))
    mss.add(ms.DistanceConstraint(1.0, [m1, m2]))

    mss.simulate(10.0, 2000)
    assert mss.max_constraint_violation() < 1e-9


def test_exercise_spelling_and_connector_types():
    from mass_spring import Fix, Mass, Spring, DistanceConstraint, MassSpringSystem3d
    mss = MassSpringSystem3d()
    mss.gravity = [0, 0, -9.81]
    f1 = mss.add(Fix([0, 0, 0]))
    mA = mss.add(Mass(1, [1, 0, 0]))
    mB = mss.add(Mass(1, [2, 0, 0]))
    mss.add (Spring(1, 1000, (f1, mA)))
    mss.add (Spring(1, 500, (mA, mB)))

    dc1 = DistanceConstraint(mA, mB, 1.0)
    mss.addDistanceConstraint(dc1)

    dc2 = DistanceConstraint(f1, mA, 1.0)
    mss.addDistanceConstraint(dc2)

    springpos = []
    for c in mss.constraints:
            if c.c1.type == 1:                      # FIX
                pA = mss.fixes[c.c1.nr].pos
            else:                                   # MASS
                pA = mss.masses[c.c1.nr].pos

            # get position of second constraint point
            if c.c2.type == 1:
                pB = mss.fixes[c.c2.nr].pos
            else:
                pB = mss.masses[c.c2.nr].pos
            springpos.append ([ pA, pB ])
    assert springpos[1][0] == (0.0, 0.0, 0.0) and springpos[0][1] == (2.0, 0.0, 0.0)
    for i in range(20):
        mss.simulate(0.02, 2)
    assert mss.max_constraint_violation() < 1e-9
    assert f1.type == ms.FIX == 1 and mA.type == ms.MASS == 2 and mB.nr == 1


def test_2d_system():
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0, -9.81]
    f = mss.add(ms.Fix([0, 0]))
    m = mss.add(ms.Mass(1.0, [1, 0]))
    mss.add(ms.Spring(1.0, 100.0, (f, m)))
    mss.simulate(1.0, 100)
    assert len(mss.masses[0].pos) == 2 and mss.masses[0].pos[1] < 0
