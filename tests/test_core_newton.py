"""Newton's iterations converge to the step's solution; a crumpling sheet does not gain
energy (with enough numerical damping, see the known problem below)."""
import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets

from bench_core import grid


@pytest.mark.parametrize("solver", ["direct", "multigrid"])
def test_newton_reaches_the_same_solution_at_a_tighter_tolerance(solver):
    runs = []
    for tol in (1e-10, 1e-13):
        mss = grid(17)  # hangs from its two top corners
        mss.linear_solver = solver
        mss.newton_tol = tol
        mss.simulate(0.25, 30)
        runs.append(mss.vertex_positions())
    assert np.abs(runs[0] - grid(17).vertex_positions()).max() > 5e-4  # it sagged (1 mm)
    np.testing.assert_allclose(runs[0], runs[1], rtol=0, atol=1e-9)


def test_fine_sheet_velocities_stay_within_the_acceleration_tolerance():
    """On a fine sheet most of the force residual sits in stiff springs, where Newton
    stops on the size of its last correction instead (bq k / m is about 170 here). The
    error that leaves is still an acceleration error within the tolerance, 1e-7 g at the
    default newton_tol, integrated over the run: velocities agree with a tighter run to
    1e-7 g t, positions to 1e-7 g t²."""
    t, runs = 0.1, []
    for tol in (1e-10, 1e-13):
        mss = grid(65)
        mss.linear_solver = "multigrid"
        mss.newton_tol = tol
        mss.simulate(t, 12)
        runs.append((mss.vertex_positions(), mss.vertex_velocities()))
    acc_tol = 1e-7 * 9.81
    assert np.abs(runs[0][1] - runs[1][1]).max() <= acc_tol * t
    assert np.abs(runs[0][0] - runs[1][0]).max() <= acc_tol * t * t


def crumpling_sheet():
    """A flat 33x33 sheet, pinned along one edge, that falls into folds and swings."""
    n = 33
    sheet = presets.cloth(n, n, spacing=1.0 / (n - 1), pins=range(n), total_mass=1.0,
                          stiffness=2000.0, shear_stiffness=2000.0, damping=0.01)
    mss = ms.build_system(sheet)
    mss.linear_solver = "direct"
    return mss


def max_energy_gain(mss, frames=48, substeps=5):
    e0, gain = mss.energy(), -np.inf
    for _ in range(frames):
        mss.simulate(1 / 24, substeps)
        gain = max(gain, mss.energy() - e0)
    assert mss.vertex_positions()[:, 2].min() < -0.15  # it fell
    return gain


@pytest.mark.slow
def test_crumpling_sheet_does_not_gain_energy_with_more_damping():
    """With rho_inf = 0.5 the sheet's energy never rises more than 0.01 J above its
    start in two seconds (m g L is 9.8 J)."""
    mss = crumpling_sheet()
    mss.rho_inf = 0.5
    assert max_energy_gain(mss) < 0.01


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="known problem: at the default rho_inf = 0.8 and 5 "
                   "substeps per frame the crumpling sheet may gain energy within two seconds, "
                   "with many step halvings; rho_inf <= 0.5 or 20 substeps per frame keep it "
                   "below its start. Whether it does depends on round-off: the folds are "
                   "chaotic, and with loops in up to 16 chunks instead of 2 (other sums, the "
                   "same physics) it gained nothing (184 halvings) where it gained 34 J (648)")
def test_crumpling_sheet_does_not_gain_energy_at_the_default_rho():
    assert max_energy_gain(crumpling_sheet()) < 0.01


def swinging_chain():
    """bench_core's chain-100: a horizontal chain released from a pin, swinging down."""
    return ms.build_system(presets.chain(n=100, spacing=1.0, angle=90.0, mass=1.0,
                                         stiffness=1000.0))


def test_the_predictor_follows_smooth_motion():
    """On smooth motion Newton starts from the last acceleration extrapolated: a swinging
    chain takes fewer than 2.75 corrections per step (from q + h v alone: 3.04), and
    reaches the solution a tighter Newton tolerance reaches."""
    runs = []
    for tol in (1e-10, 1e-13):
        mss = swinging_chain()
        mss.newton_tol = tol
        for _ in range(200):
            mss.simulate(1 / 120, 1)
        runs.append(mss)
    stats = runs[0].stats
    assert stats["newton_iterations"] < 2.75 * stats["steps"]
    assert runs[0].vertex_positions()[-1, 2] < -10  # it swung down
    np.testing.assert_allclose(runs[0].vertex_positions(), runs[1].vertex_positions(),
                               rtol=0, atol=1e-9 * 100)


def test_a_stale_factor_is_renewed_on_a_symmetric_matrix():
    """The undamped bridge's Newton matrix is symmetric: a fresh factor solves it without
    Krylov iterations, so iterations the factor needs once stale are its price (before,
    the first was free, and one factor served 200 steps at 0.41 iterations per solve)."""
    mss = ms.build_system(presets.bridge(width=20, height=10, spacing=1.0, cross=True,
                                         mass=0.2, stiffness=1000.0, damping=0.0,
                                         pins="corners"))
    for _ in range(200):
        mss.simulate(1 / 120, 1)
    stats = mss.stats
    assert stats["factorizations"] > 1
    assert stats["krylov_iterations"] < 0.2 * stats["newton_iterations"]
