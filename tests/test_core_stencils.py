"""Force laws on three or more vertices (native/forces/stencil.hpp): each law's
derivatives against finite differences, and the first such law, WireBending, against
beam theory."""
import numpy as np
import pytest

import mass_spring as ms
from mass_spring._core import laws
from mass_spring.structure import wire_stiffnesses


def wire_terms(k, x, definite=False, rest_angle=0.0):
    x = np.asarray(x, float)
    return laws.wire_bending_terms(k, x, np.zeros_like(x), definite, rest_angle)


def random_wire(rng, dim):
    """Three vertices, edges of 0.3 - 2 m in random directions (bent by any angle)."""
    x0 = rng.normal(size=dim)
    a, b = (d / np.linalg.norm(d) * rng.uniform(0.3, 2) for d in rng.normal(size=(2, dim)))
    return np.array([x0, x0 + a, x0 + a + b])


@pytest.mark.parametrize("rest", [0.0, 0.4, 2.0])
@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_wire_bending_derivatives_match_finite_differences(dim, seed, rest):
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.5, 3)
    x = random_wire(rng, dim)
    energy, f, dfdx, dfdv = wire_terms(k, x, rest_angle=rest)
    eps = 1e-6
    grad = np.zeros(3 * dim)
    jac = np.zeros((3 * dim, 3 * dim))
    for j in range(3 * dim):
        e = np.zeros(3 * dim)
        e[j] = eps
        ep, fp, _, _ = wire_terms(k, (x.ravel() + e).reshape(3, dim), rest_angle=rest)
        em, fm, _, _ = wire_terms(k, (x.ravel() - e).reshape(3, dim), rest_angle=rest)
        grad[j] = (ep - em) / (2 * eps)
        jac[:, j] = (fp - fm) / (2 * eps)
    np.testing.assert_allclose(f, -grad, atol=1e-7 * k)
    np.testing.assert_allclose(dfdx, jac, atol=1e-6 * np.abs(jac).max())
    np.testing.assert_allclose(dfdx, dfdx.T, atol=1e-12 * np.abs(dfdx).max())  # a potential
    assert np.all(dfdv == 0)
    # energy k / 2 (kappa - kappa_rest)^2, kappa = 2 tan(theta / 2), theta the turning
    # angle (2 k tan^2(theta / 2) for a straight rest shape)
    a, b = x[1] - x[0], x[2] - x[1]
    theta = np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))
    kappa, kappa_rest = 2 * np.tan(theta / 2), 2 * np.tan(rest / 2)
    assert energy == pytest.approx(k / 2 * (kappa - kappa_rest) ** 2, rel=1e-9, abs=1e-15)
    # no net force, no net torque (2-D: the scalar cross product)
    np.testing.assert_allclose(f.reshape(3, dim).sum(0), 0, atol=1e-12 * k)
    cross = np.cross if dim == 3 else (lambda p, q: p[0] * q[1] - p[1] * q[0])
    torque = sum(cross(p, q) for p, q in zip(x, f.reshape(3, dim)))
    np.testing.assert_allclose(torque, 0, atol=1e-10 * k)


@pytest.mark.parametrize("seed", range(4))
def test_the_projected_matrix_is_positive_semidefinite(seed):
    rng = np.random.default_rng(seed)
    x = random_wire(rng, 3)
    _, f, exact, _ = wire_terms(2.0, x)
    _, f_def, projected, _ = wire_terms(2.0, x, definite=True)
    np.testing.assert_array_equal(f, f_def)  # forces unchanged
    assert np.linalg.eigvalsh(-projected).min() > -1e-12 * np.abs(exact).max()
    # where the exact stiffness is positive it is kept
    w, V = np.linalg.eigh(-exact)
    kept = V[:, w > 0] * w[w > 0] @ V[:, w > 0].T
    np.testing.assert_allclose(-projected, kept, atol=1e-10 * np.abs(exact).max())


def test_a_small_bend_meets_a_moment_proportional_to_its_angle():
    """Where a spring across the two edges gives no resistance to a small fold (its length
    changes only to second order), the wire's bending gives the moment k theta, growing
    faster than the angle as the wire folds back (dE/dtheta of 2 k tan^2(theta / 2))."""
    k, l = 2.0, 0.5
    for theta in (1e-3, 1e-2, 0.1, 1.5, 3.0):
        x = np.array([[-l, 0, 0], [0, 0, 0], [l * np.cos(theta), l * np.sin(theta), 0]])
        _, f, _, _ = wire_terms(k, x)
        moment = np.cross(x[2] - x[1], f[6:9])[2]  # the end's force about the middle vertex
        assert moment == pytest.approx(-2 * k * np.tan(theta / 2) / np.cos(theta / 2) ** 2, rel=1e-9)
        if theta <= 1e-2:
            assert moment == pytest.approx(-k * theta, rel=1e-4)
    _, f, _, _ = wire_terms(k, [[-l, 0, 0], [0, 0, 0], [l, 0, 0]])
    assert np.all(f == 0)  # straight: the rest shape


@pytest.mark.parametrize("x", [[[0, 0, 0], [0, 0, 0], [1, 0, 0]],    # an edge of zero length
                               [[1, 0, 0], [0, 0, 0], [1, 0, 0]]])   # folded back on itself
def test_degenerate_vertices_give_no_force_and_no_nan(x):
    energy, f, dfdx, _ = wire_terms(1.0, x)
    assert energy == 0 and np.all(f == 0) and np.all(dfdx == 0)


def test_wire_bendings_are_listed_live():
    mss = ms.MassSpringSystem3d()
    a, b, c = (mss.add(ms.Mass(1.0, [i, 0, 0])) for i in range(3))
    bendings = mss.wire_bendings
    assert len(bendings) == 0
    mss.add(ms.WireBending(2.5, (a, b, c)))
    assert len(bendings) == 1 and bendings[0].stiffness == 2.5
    assert [x.nr for x in bendings[-1].connectors] == [0, 1, 2]
    assert "1 wire bendings" in repr(mss)
    with pytest.raises(IndexError):
        bendings[1]


def test_bad_elements_are_refused_with_their_name():
    mss = ms.MassSpringSystem3d()
    a, b = (mss.add(ms.Mass(1.0, [i, 0, 0])) for i in range(2))
    with pytest.raises(ValueError, match="WireBending 0: the same connector twice"):
        mss.add(ms.WireBending(1.0, (a, b, a)))
    c = mss.add(ms.Mass(1.0, [2, 0, 0]))
    with pytest.raises(ValueError, match="WireBending 0: stiffness must be a number >= 0"):
        mss.add(ms.WireBending(-1.0, (a, b, c)))
    with pytest.raises(ValueError, match="three connectors"):
        ms.WireBending(1.0, (a, b))
    with pytest.raises(ValueError, match="WireBending 0: connector"):
        mss.add(ms.WireBending(1.0, (a, b, ms.Connector(ms.MASS, 7))))


def cantilever(n=40, length=1.0, EI=1.0, mass=0.008, g=9.81, bend=0.0, offset=0.0):
    """A wire clamped at x = 0 by two fixes (-l and 0), n masses out to x = length (on an
    arc of curvature `bend` in the x-z plane), rods along it and bending at every vertex
    between two edges. A vertex's bending stands for the wire within half an edge of it,
    so its stiffness is EI over that length: l at a free vertex, l / 2 at the clamp (the
    edge between the fixes is not wire: with EI / l there, the tip sags 5 % more at 40
    segments, an error of order 1 / n)."""
    l = length / n
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -g]
    o = np.full(3, offset)  # where the clamp is
    nodes = [mss.add(ms.Fix(o + [-l, 0, 0])), mss.add(ms.Fix(o))]
    for i in range(1, n + 1):
        if bend == 0:
            p = [l * i, 0, 0]
        else:  # on the circle of radius 1 / bend tangent to the x axis at 0, chords l
            R = 1 / bend
            phi = i * 2 * np.arcsin(l / (2 * R))
            p = [R * np.sin(phi), 0, R * (1 - np.cos(phi))]
        nodes.append(mss.add(ms.Mass(mass / n, o + p)))
    for a, b in zip(nodes[1:], nodes[2:]):
        mss.add(ms.DistanceConstraint(l, (a, b)))
    for i, (a, b, c) in enumerate(zip(nodes, nodes[1:], nodes[2:])):
        mss.add(ms.WireBending(EI / (l / 2 if i == 0 else l), (a, b, c)))
    return mss


def test_a_wire_cantilever_sags_as_beam_theory_says():
    """Tip deflection of a cantilever under point loads P_i at a_i from the clamp:
    sum P_i a_i^2 (3 L - a_i) / (6 EI); here 1 % of its length, where the linear theory
    holds. Issue 38 asks for 3 % at 40 segments; it is within 0.04 %."""
    n, L, EI, M, g = 40, 1.0, 1.0, 0.008, 9.81
    mss = cantilever(n, L, EI, M, g)
    mss.set_integrator("implicit_euler")  # damps every mode: a static solve in steps
    mss.simulate(6.0, 60)
    a = L * np.arange(1, n + 1) / n
    expected = np.sum(M / n * g * a**2 * (3 * L - a) / (6 * EI))
    tip = np.asarray(mss.positions).reshape(-1, 3)[-1]
    assert -tip[2] == pytest.approx(expected, rel=0.01)
    assert np.abs(np.asarray(mss.velocities)).max() < 1e-6


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_bending_far_from_the_origin_converges(offset):
    """Newton's tolerance stays above the round-off of the bending forces: k / l^2 times
    an ulp of the positions (here 1e4 m from the origin, 1 cm segments), as for springs."""
    mss = cantilever(n=100, offset=offset)
    mss.simulate(0.2, 20)
    tip = np.asarray(mss.positions).reshape(-1, 3)[-1] - offset
    assert tip[2] < -1e-3 and mss.stats["halved_steps"] <= 2


def test_bending_adds_its_energy_and_keeps_it_without_damping():
    """A wire let go bent, no gravity: generalized-alpha with rho_inf = 1 keeps the energy
    that bending stores (the potential energy counts the stencils)."""
    mss = cantilever(n=10, g=0.0, bend=0.5)
    e0 = mss.energy()
    assert mss.potential_energy() > 0
    mss.set_integrator("generalized_alpha", 1.0)
    mss.newton_tol = 1e-12
    mss.simulate(0.2, 1600)  # the energy error shrinks as h^2 (0.35 % at 400 steps)
    assert mss.potential_energy() < 0.6 * e0  # it swings: energy went into motion
    assert mss.energy() == pytest.approx(e0, rel=1e-3)


def long_wire(n=1200, EI=1e-6, stiffness=2000.0, damping=0.01, wavy=0.0):
    """A wire of n masses (1 kg in all) between two fixes 1 m apart, springs along it and
    bending at each inner vertex: big enough for the multigrid and for chunks on the
    workers. `wavy` lifts the masses off the line (the springs 10 % short: taut)."""
    l = 1.0 / n
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -9.81]
    nodes = [mss.add(ms.Fix([0, 0, 0]))]
    nodes += [mss.add(ms.Mass(1.0 / n, [l * i, 0, wavy * np.sin(i)])) for i in range(1, n)]
    nodes.append(mss.add(ms.Fix([1, 0, 0])))
    for a, b in zip(nodes, nodes[1:]):
        mss.add(ms.Spring(l * (0.9 if wavy else 1.0), stiffness, (a, b), damping=damping))
    for a, b, c in zip(nodes, nodes[1:], nodes[2:]):
        mss.add(ms.WireBending(EI / l, (a, b, c)))
    mss.newton_tol = 1e-12
    return mss


def tethered_stencils(kind):
    """Masses that no spring joins to each other, each tied by a spring to a fix of its
    own, and bending stencils between them: three-vertex wire bending along a wavy line,
    or hinges across the diagonals and inner edges of a bent strip of triangles. The
    Newton matrix's blocks between masses then come from the stencils alone."""
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -9.81]
    if kind == "wire":
        pos = [[0.1 * i, 0, 0.02 * np.sin(i)] for i in range(8)]
    else:  # a 2 x 4 strip, rolled
        pos = [[0.1 * i, 0.1 * j, 0.03 * (i - 1.5) ** 2] for j in range(2) for i in range(4)]
    masses = [mss.add(ms.Mass(0.1, p)) for p in pos]
    for m, p in zip(masses, pos):
        mss.add(ms.Spring(0.05, 10.0, (mss.add(ms.Fix(np.add(p, [0, 0, 0.05]))), m)))
    if kind == "wire":
        for a, b, c in zip(masses, masses[1:], masses[2:]):
            mss.add(ms.WireBending(5.0, (a, b, c)))
    else:  # quad (i, i + 1, i + 5, i + 4) cut along (i, i + 5): hinges across both kinds of edge
        for i in range(3):
            mss.add(ms.HingeBending(5.0, (masses[i], masses[i + 5], masses[i + 1], masses[i + 4])))
        for i in range(2):
            mss.add(ms.HingeBending(5.0, (masses[i + 1], masses[i + 5], masses[i], masses[i + 6])))
    return mss


@pytest.mark.parametrize("kind", ["wire", "hinge"])
def test_the_multigrid_finest_level_holds_the_stencils_diagonal_blocks(kind):
    """The multigrid's finest level takes each stencil's diagonal blocks and leaves out its
    blocks between vertices (their fill made a hinged sheet's V-cycles 2-4 times as
    costly, for more Krylov iterations, not fewer). On a system small enough for one level
    (solved directly) the multigrid preconditioner is then the inverse of the
    block-diagonal part of the direct solver's matrix, here where only stencils join the
    masses; the direct solver keeps every block (non-zero between masses)."""
    n = 3 * 8
    matrices = {}
    for solver in ("multigrid", "direct"):
        mss = tethered_stencils(kind)
        mss.linear_solver = solver
        mss.simulate(0.01, 1)
        assert len(mss.stats["multigrid_levels"]) <= 1
        inverse = np.column_stack([mss.precondition(e) for e in np.eye(n)])
        matrices[solver] = np.linalg.inv(inverse)
    direct, multigrid = matrices["direct"], matrices["multigrid"]
    block_diagonal = np.zeros_like(direct)
    for i in range(0, n, 3):
        block_diagonal[i:i + 3, i:i + 3] = direct[i:i + 3, i:i + 3]
    assert np.abs(direct - block_diagonal).max() > 0.05 * np.abs(block_diagonal).max()  # coupled
    # (the tolerances of the tests this one replaced: wires 1e-6, hinges 1e-8)
    tolerance = 1e-6 if kind == "wire" else 1e-8
    np.testing.assert_allclose(multigrid, block_diagonal, atol=tolerance * np.abs(direct).max())


def test_a_stiff_fine_wire_does_not_kink():
    """Bending ten times stiffer than the springs along a wire of 0.8 mm segments (EI of
    a thin steel wire): with k (1 - cos theta), whose moment weakens past 90 degrees,
    Newton failed at the smallest step; 2 k tan^2(theta / 2) holds."""
    for solver in ("direct", "multigrid"):
        mss = long_wire(EI=1e-5)
        mss.linear_solver = solver
        mss.simulate(0.05, 10)
        assert mss.stats["halved_steps"] <= 10
        z = np.asarray(mss.positions)[2::3]
        assert -0.5 < z.min() < -1e-4  # it sags, and not through a kink


def test_stencils_in_the_multigrid_solve_and_on_any_number_of_workers():
    """The multigrid's products and its finest level take the stencils: the motion is
    that of the direct solve. Stencils add up in one fixed order: the same bits on one
    worker as on two."""
    runs = {}
    for solver, threads in (("direct", 2), ("multigrid", 1), ("multigrid", 2)):
        before = ms.get_num_threads()
        ms.set_num_threads(threads)
        try:
            mss = long_wire()
            mss.linear_solver = solver
            mss.simulate(0.05, 10)
            runs[solver, threads] = np.asarray(mss.positions)
        finally:
            ms.set_num_threads(before)
    np.testing.assert_array_equal(runs["multigrid", 1], runs["multigrid", 2])
    sag = np.abs(runs["direct", 2][2::3]).max()
    assert sag > 1e-3  # it moved
    np.testing.assert_allclose(runs["multigrid", 2], runs["direct", 2], atol=1e-8)


def bent_wire(n=40, radius=0.2):
    """A half circle of n edges (a hook, a coat hanger's curve) in the x-z plane, clamped
    by its first two vertices, as a Structure: steel wire of 1 mm (EI = 0.01 N m^2)."""
    phi = np.linspace(0, np.pi, n + 1)
    pos = np.column_stack([radius * np.sin(phi), np.zeros(n + 1), radius * (1 - np.cos(phi))])
    edges = np.column_stack([np.arange(n), np.arange(1, n + 1)])
    pinned = np.zeros(n + 1, bool)
    pinned[:2] = True
    return ms.Structure(positions=pos, edges=edges, pinned=pinned, masses=np.full(n + 1, 0.01 / n),
                        stiffness=1e4, wire_joints=ms.wire_joints(edges), wire_rigidity=1e-2)


def test_a_bent_wire_keeps_its_modelled_shape():
    """Without gravity and nudged in its plane, a wire modelled bent keeps its shape (< 1 mm
    over 2 s, issue 38): its rest angles are the modelled ones. With straight rest angles
    the same wire springs open. (Out of its plane it could also turn about the clamped edge:
    the law keeps angles, not a twist frame.)"""
    structure = bent_wire()
    moved = {}
    for rest in ("modelled", "straight"):
        if rest == "modelled":
            mss = ms.build_system(structure, gravity=(0, 0, 0))
        else:  # the same wire without its bending, which is then added with rest angles 0
            mss = ms.build_system(ms.Structure(**{**structure.__dict__, "wire_rigidity": 0.0}), gravity=(0, 0, 0))
            joints = structure.wire_joints
            mss.add_wire_bendings(joints, wire_stiffnesses(structure.positions, joints, 1e-2, structure.pinned),
                                  rest_angle=np.zeros(len(joints)))
        angles = np.array([w.rest_angle for w in mss.wire_bendings])
        assert np.allclose(angles, np.pi / 40 if rest == "modelled" else 0, atol=1e-9)
        nudge = np.zeros((len(mss.masses), 3))
        nudge[:, [0, 2]] = 0.002
        mss.velocities = nudge.ravel()
        mss.tolerance = 1e-4
        mss.simulate(2.0 if rest == "modelled" else 0.2, 20)
        moved[rest] = np.abs(mss.vertex_positions() - structure.positions).max()
    assert moved["modelled"] < 1e-3
    assert moved["straight"] > 0.05  # within 0.2 s


def test_wire_rest_angles_are_checked_and_read():
    mss = ms.MassSpringSystem3d()
    a, b, c = (mss.add(ms.Mass(1.0, p)) for p in ([0, 0, 0], [1, 0, 0], [1, 1, 0]))
    assert ms.WireBending(1.0, (a, b, c)).rest_angle == 0.0  # straight unless told
    assert ms.WireBending(1.0, (a, b, c), rest_angle=None).rest_angle is None
    mss.add(ms.WireBending(1.0, (a, b, c), rest_angle=None))  # the modelled shape
    assert mss.wire_bendings[0].rest_angle == pytest.approx(np.pi / 2)
    with pytest.raises(ValueError, match=r"rest_angle must be a turning angle in radians within \[0, pi\)"):
        mss.add(ms.WireBending(1.0, (a, b, c), rest_angle=4.0))
    with pytest.raises(ValueError, match="rest_angle: expected 1 values, got 2"):
        mss.add_wire_bendings([[0, 1, 2]], [1.0], rest_angle=[0.1, 0.2])


def test_a_2d_wire_rests_straight():
    """In 2-D the law keeps no side of its angle: a rest angle is refused, and a wire
    added with its modelled shape rests straight there."""
    mss = ms.MassSpringSystem2d()
    a, b, c = (mss.add(ms.Mass(1.0, p)) for p in ([0, 0], [1, 0], [1, 1]))
    with pytest.raises(ValueError, match="WireBending 0: a rest angle needs 3-D positions"):
        mss.add(ms.WireBending(1.0, (a, b, c), rest_angle=0.5))
    mss.add(ms.WireBending(1.0, (a, b, c), rest_angle=None))
    assert mss.wire_bendings[0].rest_angle == 0.0


def test_a_straight_wire_falls_freely():
    """A wire modelled straight but tilted has turning angles of round-off (1e-8 rad): it
    rests straight, and falls without its energy turning NaN (the cosine of its angles
    rounds above 1)."""
    n = 50
    x = np.array([0, 0, 1.01]) + np.outer(np.linspace(0, 1, n + 1), np.array([0.05, 0, -1]) / np.hypot(0.05, 1))
    edges = np.column_stack([np.arange(n), np.arange(1, n + 1)])
    st = ms.Structure(positions=x, edges=edges, total_mass=0.1, stiffness=3000.0,
                      wire_joints=ms.wire_joints(edges), wire_rigidity=1e-5)
    mss = ms.build_system(st)
    assert all(w.rest_angle == 0.0 for w in mss.wire_bendings)
    mss.tolerance = 1e-3
    mss.simulate(0.2, 5)
    y = mss.vertex_positions()
    np.testing.assert_allclose(y - x, np.tile([0, 0, -0.5 * 9.81 * 0.2 ** 2], (n + 1, 1)), atol=1e-6)
