"""The multigrid preconditioner (big systems without rods) gives the direct solver's answers."""
import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets



def sheet(n, dim=3, k=2000.0, damping=0.01):
    """n x n cloth of 1 kg with structural and shear springs. In 3D it lies flat, pinned at
    two corners, and falls into folds; in 2D, pinned at one corner, it swings."""
    top = [n * (n - 1), n * n - 1] if dim == 3 else [n * (n - 1)]
    cloth = presets.cloth(n, n, spacing=1.0 / (n - 1), pins=top, total_mass=1.0,
                          stiffness=k, shear_stiffness=k, damping=damping)
    if dim == 3:
        return ms.build_system(cloth)
    springs = np.vstack([cloth.edges, cloth.shear_pairs])
    return ms.from_arrays(cloth.positions[:, :2], cloth.vertex_masses(), fixed=cloth.pinned,
                          springs=springs, stiffness=k, damping=damping, gravity=[0, -9.81])


@pytest.mark.parametrize("dim", [2, 3])
def test_multigrid_follows_the_direct_solver(dim):
    runs = {}
    for solver in ("direct", "multigrid"):
        s = sheet(20, dim)
        s.linear_solver = solver
        s.simulate(0.25, 30)
        runs[solver] = s
    mg = runs["multigrid"].stats
    assert mg["multigrid"] and mg["multigrid_fallbacks"] == 0
    assert len(mg["multigrid_levels"]) >= 2  # a real hierarchy, not one direct solve
    # most setups kept the nodes' grouping (SmoothedAggregation::refresh), some regrouped
    assert 1 <= mg["multigrid_regroupings"] < mg["factorizations"]
    assert not runs["direct"].stats["multigrid"]
    a, b = runs["direct"].positions, runs["multigrid"].positions
    # both converge every step to the Newton tolerance; the cloth moved by decimetres
    assert np.abs(b - sheet(20, dim).positions).max() > 0.05
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n, level, nodes, duration, steps", [(32, 0, 1000, 0.25, 30), (50, 1, 256, 0.1, 12)])
def test_split_smoother_follows_the_direct_solver(n, level, nodes, duration, steps):
    """A level's Gauss-Seidel sweeps run in two halves at once, each half seeing the
    other's values from before the sweep (multigrid.cpp, smooth): the finest from 1000
    nodes on, and in a system solved in chunks (1000 masses or more) any level of 256 nodes
    or more (multigrid.hpp, smoother_blocks; a 50^2 sheet's second level has about 300).
    The V-cycle changes, Newton's answers must not."""
    runs = {}
    for solver in ("direct", "multigrid"):
        s = sheet(n)
        s.linear_solver = solver
        s.simulate(duration, steps)
        runs[solver] = s
    mg = runs["multigrid"].stats
    assert mg["multigrid_levels"][level][0] >= 3 * nodes and mg["multigrid_fallbacks"] == 0
    a, b = runs["direct"].positions, runs["multigrid"].positions
    assert np.abs(b - sheet(n).positions).max() > 0.02
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)
    # a smoother that lost its coupling across the halves would need many more
    assert mg["krylov_iterations"] <= 6 * mg["newton_iterations"]


@pytest.mark.parametrize("masses", [90, 200])
def test_the_coarsest_level_is_solved_exactly(masses):
    """The coarsest level is factored dense up to 500 unknowns and sparse beyond (a
    hierarchy whose coarsening stopped early, multigrid.cpp, factor_coarsest). Springs far
    too soft to couple their masses strongly give no aggregates: the hierarchy is one
    level, and its V-cycle is that factor's solve, the direct solver's answer."""
    rng = np.random.default_rng(3)
    positions = rng.uniform(0, 1, (masses, 3))
    springs = np.array([[i, (i + 1) % masses] for i in range(masses)])
    answers = {}
    for solver in ("direct", "multigrid"):
        s = ms.from_arrays(positions, 0.01, springs=springs, stiffness=1e-3, gravity=[0, 0, -9.81])
        s.linear_solver = solver
        s.simulate(0.01, 1)
        b = rng.standard_normal(s.num_unknowns) if solver == "direct" else b
        answers[solver] = s.precondition(b)
    assert len(s.stats["multigrid_levels"]) == 1 and s.stats["multigrid"]
    np.testing.assert_allclose(answers["multigrid"], answers["direct"], rtol=1e-10,
                               atol=1e-12 * np.abs(answers["direct"]).max())


@pytest.mark.parametrize("dim", [2, 3])
def test_renewed_smoother_equals_a_rebuilt_hierarchy(dim):
    """Each step renews only the finest smoother of the multigrid hierarchy, from the
    element blocks (not the compressed matrix the hierarchy is built from). Renewed from the
    values a hierarchy was just built from, its V-cycle must be that hierarchy's V-cycle;
    renewed from later values, it must differ."""
    s = sheet(24, dim, damping=0.5)  # damping: unsymmetric blocks, symmetrized
    s.linear_solver = "multigrid"
    s.simulate(0.2, 24)  # the cloth swings and turns: the blocks change from step to step
    b = np.random.default_rng(1).standard_normal(s.num_unknowns)
    built = s.precondition(b, rebuild=True)
    setups = s.stats["factorizations"]
    s.simulate(1 / 240, 1)  # short enough that the solver keeps the hierarchy for it
    assert s.stats["factorizations"] == setups  # the step kept the hierarchy
    renewed_later = s.precondition(b, rebuild=False)
    rebuilt = s.precondition(b, rebuild=True)
    renewed = s.precondition(b, rebuild=False)
    assert len(s.stats["multigrid_levels"]) >= 2
    scale = np.abs(rebuilt).max()
    # float smoother blocks: the two differ by float round-off in a different summation order
    np.testing.assert_allclose(renewed, rebuilt, rtol=0, atol=1e-5 * scale)
    assert np.abs(renewed_later - built).max() > 1e-3 * scale


@pytest.mark.parametrize("dim", [2, 3])
def test_a_hierarchy_on_kept_prolongators_renews_the_coarse_matrices(dim):
    """Most setups keep the grouping of nodes into aggregates and the prolongators (scalar
    matrices: a turning spring leaves them as they were) and multiply the coarse matrices
    and make the smoothers anew. From the values the hierarchy was built from, that must
    be the build, bit for bit; after the blocks turned, it must take away most of what
    separates the stale hierarchy from a full rebuild."""
    b = np.random.default_rng(2).standard_normal(2 * 24 * 24 * dim)
    twins = []
    for _ in range(2):
        s = sheet(24, dim, damping=0.5)
        s.linear_solver = "multigrid"
        s.simulate(0.2, 24)
        b = b[: s.num_unknowns]
        built = s.precondition(b, rebuild=True)
        np.testing.assert_array_equal(s.precondition(b, rebuild=True, keep_aggregates=True), built)
        s.simulate(1 / 60, 2)  # the blocks turn, the strong couplings stay
        twins.append(s)
    regrouped = [s.stats["multigrid_regroupings"] for s in twins]
    stale = twins[0].precondition(b, rebuild=False)
    kept = twins[0].precondition(b, rebuild=True, keep_aggregates=True)
    rebuilt = twins[1].precondition(b, rebuild=True)
    assert [s.stats["multigrid_regroupings"] - r for s, r in zip(twins, regrouped)] == [0, 1]
    staleness = np.abs(stale - rebuilt).max()
    assert staleness > 1e-3 * np.abs(rebuilt).max()
    # measured: 0.26 (2D) and 0.055 (3D); only the finest smoother renewed would give ~1
    assert np.abs(kept - rebuilt).max() < 0.5 * staleness


def test_precondition_needs_a_step():
    s = sheet(5)
    with pytest.raises(ValueError, match="step"):
        s.precondition(np.zeros(s.num_unknowns))
    s.simulate(0.01, 1)
    with pytest.raises(ValueError, match="expected"):
        s.precondition(np.zeros(3))
    assert s.precondition(np.ones(s.num_unknowns)).shape == (s.num_unknowns,)


def test_multigrid_hanging_chains_settle_to_the_exact_extensions():
    """40 independent vertical chains of 30 masses: spring j carries the weight below it."""
    chains, n, m, k, g = 40, 30, 0.1, 500.0, 9.81
    pos, fixed, springs = [], [], []
    for c in range(chains):
        base = len(pos)
        for j in range(n + 1):
            pos.append([0.1 * c, 0.0, -1.0 * j])
            fixed.append(j == 0)
        springs += [[base + j, base + j + 1] for j in range(n)]
    s = ms.from_arrays(np.array(pos), m, fixed=np.array(fixed), springs=np.array(springs),
                       stiffness=k, damping=20.0, gravity=[0, 0, -g])
    s.linear_solver = "multigrid"
    s.set_integrator("implicit_euler")
    s.simulate(200.0, 400)
    assert s.stats["multigrid"] and s.stats["multigrid_fallbacks"] == 0
    z = s.vertex_positions()[:, 2].reshape(chains, n + 1)
    stretch = -np.diff(z, axis=1) - 1.0
    exact = m * g * np.arange(n, 0, -1) / k
    np.testing.assert_allclose(stretch, np.tile(exact, (chains, 1)), rtol=0, atol=1e-9)


def test_auto_picks_multigrid_for_big_systems_without_rods():
    big = sheet(64)
    assert big.num_unknowns >= 3 * ms.MULTIGRID_MIN_MASSES
    assert big.linear_solver == "auto"
    big.simulate(1 / 120, 1)
    assert big.stats["multigrid"]

    small = sheet(10)
    small.simulate(1 / 120, 1)
    assert not small.stats["multigrid"]

    n = ms.MULTIGRID_MIN_MASSES + 2
    rods = ms.from_arrays(np.array([[x, 0.0, 0.0] for x in range(n)]), 1.0, fixed=[0],
                          springs=np.array([[i, i + 1] for i in range(n - 2)]),
                          stiffness=100.0, constraints=np.array([[n - 2, n - 1]]),
                          gravity=[0, 0, -9.81])
    rods.simulate(0.01, 1)
    assert not rods.stats["multigrid"]


def test_multigrid_restart_is_bit_identical():
    s = sheet(16)
    s.linear_solver = "multigrid"
    s.simulate(0.05, 6)
    saved = s.checkpoint()
    s.simulate(0.05, 6)
    first = s.positions.copy()
    s.set_state(saved)
    s.simulate(0.05, 6)
    assert np.array_equal(s.positions, first)


def test_linear_solver_choice_is_validated():
    s = sheet(5)
    with pytest.raises(ValueError, match="linear_solver"):
        s.linear_solver = "cholesky"
    pos = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.0]])
    rods = ms.from_arrays(pos, 1.0, fixed=[0], springs=[[0, 1]], stiffness=10.0,
                          constraints=[[1, 2]], gravity=[0, 0, -9.81])
    rods.linear_solver = "multigrid"
    with pytest.raises(ValueError, match="DistanceConstraint"):
        rods.simulate(0.1, 1)
    rods.linear_solver = "direct"
    rods.simulate(0.1, 1)  # still usable after the refusal


def test_under_error_control_auto_picks_multigrid_from_fewer_masses():
    """With mss.tolerance > 0 "auto" takes multigrid from MULTIGRID_MIN_MASSES_CONTROLLED
    masses on; switching error control off goes back to the direct factor."""
    assert ms.MULTIGRID_MIN_MASSES_CONTROLLED < ms.MULTIGRID_MIN_MASSES
    mid = sheet(34)  # 1156 vertices, 2 pinned
    assert ms.MULTIGRID_MIN_MASSES_CONTROLLED <= len(mid.masses) < ms.MULTIGRID_MIN_MASSES
    mid.tolerance = 1e-2
    mid.simulate(1 / 120, 1)
    assert mid.stats["multigrid"]
    mid.tolerance = 0.0
    mid.simulate(1 / 120, 1)
    assert not mid.stats["multigrid"]
    small = sheet(10)
    assert len(small.masses) < ms.MULTIGRID_MIN_MASSES_CONTROLLED
    small.tolerance = 1e-2
    small.simulate(1 / 120, 1)
    assert not small.stats["multigrid"]


def test_auto_keeps_the_factor_for_a_chain_of_any_length():
    """A chain's matrix is banded: its factor costs about a product, and "auto" keeps it
    however long the chain (a 1-D structure, fewer than 3 neighbours a mass)."""
    n = ms.MULTIGRID_MIN_MASSES + 100
    positions = np.stack([np.linspace(0, 5, n), np.zeros(n), np.ones(n)], 1)
    springs = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    for tolerance in (1e-2, 0.0):
        chain = ms.from_arrays(positions, 1.0 / n, fixed=[0], springs=springs, stiffness=1000.0,
                               gravity=[0, 0, -9.81])
        chain.tolerance = tolerance
        chain.simulate(1 / 120, 1)
        assert not chain.stats["multigrid"]
    net = sheet(13)  # a surface of 169 masses: multigrid under error control
    net.tolerance = 1e-2
    net.simulate(1 / 120, 1)
    assert net.stats["multigrid"]


def bending_sheet(n, bending):
    cloth = presets.cloth(n, n, spacing=1.0 / (n - 1), pins=[n * (n - 1), n * n - 1],
                          total_mass=1.0, stiffness=1000.0, bending_stiffness=bending,
                          damping=0.01)
    return ms.build_system(cloth)


def test_soft_springs_are_left_out_of_the_hierarchy():
    """Springs under a quarter of the stiffest spring at each of their masses (bending
    springs at 100 N/m beside the cloth's 1000) are left out of the multigrid hierarchy: its
    finest matrix has the pattern of the sheet without them, while one as stiff as the
    cloth's own springs stays in. The Krylov method still solves with the whole matrix, so
    the motion is the direct solver's."""
    def finest(bending):
        s = bending_sheet(16, bending)
        s.linear_solver = "multigrid"
        s.simulate(0.1, 12)
        return s, s.stats["multigrid_levels"][0][1]

    soft, soft_nonzeros = finest(100.0)
    assert soft_nonzeros == finest(0.0)[1]
    assert finest(1000.0)[1] > soft_nonzeros
    direct = bending_sheet(16, 100.0)
    direct.linear_solver = "direct"
    direct.simulate(0.1, 12)
    # the sheet fell by decimetres; both converge every step to the Newton tolerance
    assert np.abs(soft.positions - bending_sheet(16, 100.0).positions).max() > 0.03
    np.testing.assert_allclose(soft.positions, direct.positions, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n", [34, 105])
def test_split_work_gives_the_same_numbers(n):
    """Big systems run assembly's and the linear solver's loops in chunks on the workers
    (native/parallel/parallel_for.hpp); from 105^2 on also GMRES's vector loops
    (krylov.hpp). The chunks are the same whether a worker runs them or the caller does
    (one core, or the workers busy with another system), so a run's numbers do not depend
    on the machine: bit for bit, also with two systems at once from two Python threads."""
    import threading

    def run(allow):
        workers = ms.get_num_threads()
        ms.set_num_threads(2 if allow else 1)
        try:
            s = bending_sheet(n, 100.0)
            assert len(s.masses) >= ms._core.SPLIT_MIN_MASSES
            assert (3 * len(s.masses) >= ms._core.SPLIT_MIN_VECTOR_LENGTH) == (n > 34)
            s.tolerance = 1e-2
            s.simulate(0.03, 1)  # 3 steps, 6 Newton and 191 Krylov iterations at 105^2
            return s.positions.copy(), s.stats["krylov_iterations"]
        finally:
            ms.set_num_threads(workers)

    alone, krylov = run(False)
    helped, helped_krylov = run(True)
    assert np.array_equal(alone, helped) and krylov == helped_krylov
    results = [None, None]

    def worker(k):
        results[k] = run(True)[0]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(alone, r) for r in results)


def test_the_smoother_takes_friction_whole():
    """A 20 x 20 sheet without shear springs (the add-on's defaults) dropped tilted into a
    bowl (the inside of a UV sphere, friction 0.3) slides to its bottom. A touching mass's
    block has an antisymmetric part, friction's force along the surface growing with the
    depth; the hierarchy keeps the symmetric part, and the finest smoother now inverts
    each mass's block whole (SmoothedAggregation::finest_skew_). Over 24 frames GMRES took
    8.0 iterations per Newton iteration before (6 297 in all), 4.2 now."""
    import math
    from test_core_contact import G, sphere
    n = 20
    xs = np.linspace(-0.5, 0.5, n)
    X, Y = np.meshgrid(xs, xs)
    c, s = math.cos(0.3), math.sin(0.3)
    pos = np.stack([X.ravel(), Y.ravel(), np.zeros(n * n)], 1) @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]]).T
    idx = np.arange(n * n).reshape(n, n)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)])
    mss = ms.from_arrays(pos + [0.2, 0, -0.1], 0.3 / (n * n), springs=edges, stiffness=1000.0, damping=0.01,
                         gravity=(0, 0, -G))
    mss.set_integrator("generalized_alpha", rho_inf=0.5)
    mss.tolerance = 0.01
    thickness = 0.02
    mss.set_colliders(*sphere(1.0, 48, 24), thickness, 0.3)
    assert mss.linear_solver == "auto" and mss.stats["multigrid_fallbacks"] == 0
    for _ in range(24):
        mss.simulate(1 / 24, 5)
    stats = mss.stats
    assert stats["multigrid_fallbacks"] == 0 and len(stats["multigrid_levels"]) >= 2
    assert stats["krylov_iterations"] < 6 * stats["newton_iterations"]
    assert np.linalg.norm(mss.vertex_positions(), axis=1).max() < 1 - 0.5 * thickness  # inside
