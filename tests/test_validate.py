"""scripts/validate.py: the numbers behind the validation plots, and the plots themselves."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mass_spring", reason="needs the compiled core (pip install .)")

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "scripts") not in sys.path:
    sys.path.insert(0, str(REPO / "scripts"))

import validate  # noqa: E402


@pytest.fixture(scope="module")
def measured():
    return validate.measure()


def test_orders_match_the_seeds(measured):
    """Observed orders 1, 1, 2, 1, 2, 2 (DESIGN.md §3), fitted on the finest steps."""
    for name, expected in validate.EXPECTED_ORDERS.items():
        assert measured.orders[name] == pytest.approx(expected, abs=0.1), name
    # The errors do shrink monotonically towards the finest step.
    for name, errors in measured.convergence.items():
        assert all(b < a for a, b in zip(errors[-5:], errors[-4:])), name


def test_generalized_alpha_energy_per_period(measured):
    """Energy kept per period at h = T/20 (DESIGN.md §3): 1, 0.99974, 0.99326, 0.869."""
    reference = {1.0: 1.0, 0.8: 0.99974, 0.5: 0.99326, 0.0: 0.869}
    for rho, value in reference.items():
        assert measured.energy_ratio[rho] == pytest.approx(value, abs=2e-3), rho
    # Ordered: less ρ∞, more numerical damping.
    ratios = [measured.energy_ratio[r] for r in validate.ENERGY_RHOS]
    assert ratios == sorted(ratios, reverse=True)


def test_position_plot_data_against_exact(measured):
    """At the seeds' step (h = 0.05 s): explicit Euler gains energy, implicit Euler loses
    it, Newmark keeps it to round-off."""
    final = {n: e[-1] / e[0] for n, (_, _, e) in measured.positions.items()}
    assert final["explicit_euler"] > 10
    assert final["implicit_euler"] < 0.1
    assert final["newmark"] == pytest.approx(1.0, abs=1e-9)
    t, x, _ = measured.positions["generalized_alpha"]
    assert np.abs(x - validate.exact_position(t)).max() < 0.1 * validate.X0


def test_pendulum_keeps_its_rod(measured):
    for rho, (t, drift, energy, failed) in measured.pendulum.items():
        assert drift.max() < 1e-9 * validate.PENDULUM_LENGTH, rho
    # With numerical damping the energy error stays small over the whole run.
    for rho in (0.8, 0.5):
        _, _, energy, failed = measured.pendulum[rho]
        assert failed is None and np.abs(energy).max() < 1e-3 * 9.81, rho


def test_main_writes_the_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    assert validate.main(["--out", str(tmp_path)]) == 0
    for name in validate.FIGURES:
        png = tmp_path / name
        assert png.is_file() and png.stat().st_size > 20_000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
