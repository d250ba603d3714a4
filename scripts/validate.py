"""Validation plots: the core's integrators against exact solutions.

Like the seeds' interactive 1-D spring page (a mass on a spring of rest length 0 to a fix,
x(t) = x0 cos ωt), but measured from the compiled core's own output:

    docs/validate_positions.png    position over time, every integrator vs the exact solution
    docs/validate_convergence.png  max error vs step size (log-log), fitted orders
    docs/validate_energy.png       energy over time of generalized-α for ρ∞ = 1, 0.8, 0.5, 0,
                                   and the rod-length error of a rigid pendulum

    python scripts/validate.py [--out DIR] [--json]

No Blender needed: only numpy, matplotlib and the core (``pip install .``).
``measure()`` returns the numbers behind the plots (used by tests/test_validate.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

# The seeds' page: initial length 2, stiffness 5, mass 0.5 (ω = √10 rad/s, T ≈ 1.99 s).
X0, STIFFNESS, MASS = 2.0, 5.0, 0.5
OMEGA = math.sqrt(STIFFNESS / MASS)
PERIOD = 2.0 * math.pi / OMEGA


def _core():
    try:
        import mass_spring
    except ImportError as ex:
        sys.exit(f"validate.py: the core 'mass_spring' is not installed ({ex}): run "
                 "`pip install .` in the repository first")
    return mass_spring


# The core's integrators (mass_spring.INTEGRATOR_INFO), explicit ones first, each group by
# order of accuracy; the expected orders are the table's.
_INFO = sorted(_core().INTEGRATOR_INFO, key=lambda info: (not info.explicit, info.order))
INTEGRATORS = tuple(info.name for info in _INFO)
LABELS = {info.name: info.label for info in _INFO}
LABELS["generalized_alpha"] += " (ρ∞ = 0.8)"
COLORS = dict(zip(INTEGRATORS, ("#ff7f0e", "#d62728", "#8c564b", "#1f77b4", "#2ca02c",
                                "#9467bd")))
EXPECTED_ORDERS = {info.name: info.order for info in _INFO}

# (a) positions: the step size of the seeds' page (its constructor), over five periods.
POSITION_STEP = 0.05
POSITION_TIME = 5 * PERIOD
# (b) convergence: steps from T/10 to T/1280 over two periods; the order is fitted on the
# four smallest steps (the asymptotic range).
CONVERGENCE_STEPS = tuple(PERIOD / n for n in (10, 20, 40, 80, 160, 320, 640, 1280))
CONVERGENCE_TIME = 2 * PERIOD
FIT_POINTS = 4
# (c) energy: h = T/20 over ten periods, as in DESIGN.md §3.
ENERGY_RHOS = (1.0, 0.8, 0.5, 0.0)
ENERGY_STEPS_PER_PERIOD = 20
ENERGY_PERIODS = 10
RHO_COLORS = {1.0: "#2ca02c", 0.8: "#9467bd", 0.5: "#1f77b4", 0.0: "#d62728"}
# Pendulum for the constraint drift: rod 1 m, released horizontally, 24 fps × 10 substeps.
PENDULUM_LENGTH, PENDULUM_ANGLE, PENDULUM_STEP, PENDULUM_TIME = 1.0, 90.0, 1.0 / 240.0, 10.0
GRAVITY = 9.81


def exact_position(t):
    """x(t) = x0 cos ωt (released from rest at x0)."""
    return X0 * np.cos(OMEGA * np.asarray(t))


def exact_energy() -> float:
    return 0.5 * STIFFNESS * X0 ** 2


# ----------------------------------------------------------------------------- core runs

def oscillator(integrator: str, h: float, t_end: float, rho_inf: float = 0.8):
    """The 1-D oscillator in the core, one step per `simulate` call (the state carries over
    between calls, so this is the same trajectory as one call with many steps).

    Returns t, x, E as arrays over every step, t[0] = 0.
    """
    ms = _core()
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0.0, 0.0]
    fix = mss.add(ms.Fix((0.0, 0.0)))
    mass = mss.add(ms.Mass(MASS, (X0, 0.0)))
    mss.add(ms.Spring(0.0, STIFFNESS, (fix, mass)))
    mss.set_integrator(integrator, rho_inf=rho_inf)
    steps = int(round(t_end / h))
    x = np.empty(steps + 1)
    energy = np.empty(steps + 1)
    x[0], energy[0] = mss.positions[0, 0], mss.energy()
    for i in range(1, steps + 1):
        mss.simulate(h, 1)
        x[i] = mss.positions[0, 0]
        energy[i] = mss.energy()
    return np.arange(steps + 1) * h, x, energy


def pendulum(rho_inf: float, h: float = PENDULUM_STEP, t_end: float = PENDULUM_TIME):
    """A rigid pendulum (one distance constraint to a fix, mass 1 kg) with generalized-α.

    Returns t, rod-length error |L − L0| (m), energy error E − E0 (J) over every step, and
    the time at which the solver gave up (None if it did not): the run stops there.
    """
    ms = _core()
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0.0, -GRAVITY]
    theta = math.radians(PENDULUM_ANGLE)
    L = PENDULUM_LENGTH
    fix = mss.add(ms.Fix((0.0, 0.0)))
    mass = mss.add(ms.Mass(1.0, (L * math.sin(theta), -L * math.cos(theta))))
    mss.add(ms.DistanceConstraint(L, (fix, mass)))
    mss.set_integrator("generalized_alpha", rho_inf=rho_inf)
    steps = int(round(t_end / h))
    drift = [mss.max_constraint_violation()]
    energy = [0.0]
    e0 = mss.energy()
    failed = None
    for i in range(1, steps + 1):
        try:
            mss.simulate(h, 1)
        except ms.SimulationError:
            failed = i * h
            break
        drift.append(mss.max_constraint_violation())
        energy.append(mss.energy() - e0)
    return np.arange(len(drift)) * h, np.array(drift), np.array(energy), failed


def fit_order(steps, errors, points: int = FIT_POINTS) -> float:
    """Slope of log(error) over log(h), least squares over the `points` smallest steps."""
    h = np.asarray(steps)[-points:]
    e = np.asarray(errors)[-points:]
    slope, _ = np.polyfit(np.log(h), np.log(e), 1)
    return float(slope)


def energy_ratio_per_period(t, energy) -> float:
    """Geometric mean of E(t + T) / E(t) over the run, from the whole periods it covers."""
    periods = int(round(t[-1] / PERIOD))
    index = int(round(periods * PERIOD / (t[1] - t[0])))
    return float((energy[index] / energy[0]) ** (1.0 / periods))


@dataclass
class Measurements:
    positions: dict = field(default_factory=dict)     # name → (t, x, E)
    convergence: dict = field(default_factory=dict)   # name → max errors per step size
    orders: dict = field(default_factory=dict)        # name → fitted order
    energy: dict = field(default_factory=dict)        # ρ∞ → (t, E)
    energy_ratio: dict = field(default_factory=dict)  # ρ∞ → E(t+T)/E(t)
    pendulum: dict = field(default_factory=dict)      # ρ∞ → (t, drift, ΔE, failed at)
    seconds: float = 0.0

    def summary(self) -> dict:
        """The numbers, JSON-friendly."""
        return {
            "oscillator": {"x0": X0, "stiffness": STIFFNESS, "mass": MASS, "period": PERIOD},
            "final_energy_ratio_h0.05": {
                n: float(E[-1] / E[0]) for n, (_, _, E) in self.positions.items()},
            "max_position_error_h0.05": {
                n: float(np.abs(x - exact_position(t)).max())
                for n, (t, x, _) in self.positions.items()},
            "orders": self.orders,
            "energy_ratio_per_period_h=T/20": {str(r): v for r, v in self.energy_ratio.items()},
            "pendulum_max_rod_error_m": {
                str(r): float(p[1].max()) for r, p in self.pendulum.items()},
            "pendulum_max_energy_error_J": {
                str(r): float(np.abs(p[2]).max()) for r, p in self.pendulum.items()},
            "pendulum_energy_error_J_first_3s": {
                str(r): float(np.abs(p[2][p[0] <= 3.0]).max()) for r, p in self.pendulum.items()},
            "pendulum_solver_failed_at_s": {str(r): p[3] for r, p in self.pendulum.items()},
            "seconds": self.seconds,
        }


def measure() -> Measurements:
    begin = time.perf_counter()
    m = Measurements()
    for name in INTEGRATORS:
        m.positions[name] = oscillator(name, POSITION_STEP, POSITION_TIME)
    for name in INTEGRATORS:
        errors = []
        for h in CONVERGENCE_STEPS:
            t, x, _ = oscillator(name, h, CONVERGENCE_TIME)
            errors.append(float(np.abs(x - exact_position(t)).max()))
        m.convergence[name] = errors
        m.orders[name] = fit_order(CONVERGENCE_STEPS, errors)
    h = PERIOD / ENERGY_STEPS_PER_PERIOD
    for rho in ENERGY_RHOS:
        t, _, energy = oscillator("generalized_alpha", h, ENERGY_PERIODS * PERIOD, rho_inf=rho)
        m.energy[rho] = (t, energy)
        m.energy_ratio[rho] = energy_ratio_per_period(t, energy)
        m.pendulum[rho] = pendulum(rho)
    m.seconds = time.perf_counter() - begin
    return m


# ----------------------------------------------------------------------------- plots

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.grid": True,
                         "grid.alpha": 0.3, "savefig.dpi": 110})
    return plt


def plot_positions(m: Measurements, path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.4), sharex=True, sharey=True)
    t_fine = np.linspace(0.0, POSITION_TIME, 2000)
    for ax, name in zip(axes.ravel(), INTEGRATORS):
        t, x, energy = m.positions[name]
        ax.plot(t_fine, exact_position(t_fine), color="black", lw=1.2, ls="--",
                label="exact  $x_0\\cos\\omega t$")
        ax.plot(t, x, color=COLORS[name], lw=1.6, label="core")
        ax.set_title(f"{LABELS[name]}:  E(end) / E(0) = {energy[-1] / energy[0]:.4g}")
        ax.set_ylim(-3.9, 3.9)
        ax.legend(loc="upper center", ncol=2, fontsize=8, framealpha=0.95)
        if np.abs(x).max() > 3.9:
            ax.text(0.98, 0.04, f"off the scale: |x| reaches {np.abs(x).max():.0f} m",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    for ax in axes[-1]:
        ax.set_xlabel("time t (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("position x (m)")
    fig.suptitle(f"1-D oscillator (the seeds' spring page): m = {MASS} kg, k = {STIFFNESS} N/m, "
                 f"rest length 0, x(0) = {X0} m, v(0) = 0;  step h = {POSITION_STEP} s "
                 f"(T/{PERIOD / POSITION_STEP:.0f})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_convergence(m: Measurements, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 6.0))
    h = np.array(CONVERGENCE_STEPS)
    markers = dict(zip(INTEGRATORS, "os^vDx"))
    for name in INTEGRATORS:
        ax.loglog(h, m.convergence[name], marker=markers[name], ms=5, color=COLORS[name],
                  label=f"{LABELS[name]}: order {m.orders[name]:.2f}")
    # Reference slopes through the middle of the data.
    all_errors = np.array([m.convergence[n] for n in INTEGRATORS])
    h_ref = h[[2, -1]]
    for slope, anchor, style in ((1, all_errors[:, 2].max() * 2.0, "-"),
                                 (2, all_errors[:, 2].min() * 0.3, "--")):
        ax.loglog(h_ref, anchor * (h_ref / h_ref[0]) ** slope, color="gray", ls=style, lw=1.5,
                  label=f"reference slope {slope}")
    ax.set_xlabel("step size h (s)")
    ax.set_ylabel("max |x − x_exact| over two periods (m)")
    ax.set_title(f"Convergence on the 1-D oscillator (T = {PERIOD:.3f} s, h = T/10 … T/1280);\n"
                 f"orders fitted on the {FIT_POINTS} smallest steps", fontsize=10)
    ax.legend(fontsize=8.5, loc="lower right", framealpha=0.95)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_energy(m: Measurements, path: Path) -> None:
    plt = _pyplot()
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 5.0))
    e0 = exact_energy()
    # ρ∞ = 1 and 0.8 overlap on this scale: draw ρ∞ = 1 dashed on top.
    style = {1.0: dict(ls="--", zorder=3)}
    for rho in ENERGY_RHOS:
        t, energy = m.energy[rho]
        ax.plot(t / PERIOD, energy / e0, color=RHO_COLORS[rho], lw=1.6, **style.get(rho, {}),
                label=f"ρ∞ = {rho:g}:  E(t+T)/E(t) = {m.energy_ratio[rho]:.5f}")
    ax.set_xlabel("time t / T (periods)")
    ax.set_ylabel("energy E / E(0)")
    ax.set_ylim(0.0, 1.08)
    ax.set_title(f"1-D oscillator, generalized-α, h = T/{ENERGY_STEPS_PER_PERIOD}:\n"
                 "numerical damping set by ρ∞", fontsize=10)
    ax.legend(fontsize=8.5, loc="lower left", framealpha=0.95)

    scale = 1.0 * GRAVITY * PENDULUM_LENGTH  # m g L, J
    for rho in ENERGY_RHOS:
        t, drift, energy, failed = m.pendulum[rho]
        note = f", solver gave up at {failed:.1f} s" if failed else ""
        ax2.semilogy(t, np.maximum(np.abs(energy) / scale, 1e-12), color=RHO_COLORS[rho],
                     lw=1.1, label=f"ρ∞ = {rho:g}: max {np.abs(energy).max() / scale:.1e}{note}")
        ax3.semilogy(t, np.maximum(drift, 1e-17), color=RHO_COLORS[rho], lw=1.1,
                     label=f"ρ∞ = {rho:g}: max {drift.max():.1e} m")
    pend = (f"rigid pendulum, L = {PENDULUM_LENGTH:g} m, released at {PENDULUM_ANGLE:g}°, "
            f"h = 1/{1 / PENDULUM_STEP:.0f} s")
    for rho in ENERGY_RHOS:
        t, _, energy, _ = m.pendulum[rho]
        blown = np.flatnonzero(np.abs(energy) > 0.1 * scale)
        if blown.size:
            ax2.annotate(f"ρ∞ = {rho:g}: energy error above 10 % of m g L\nfrom t = {t[blown[0]]:.1f} s "
                         "(no numerical damping:\nthe index-3 rod multiplier is not damped)",
                         xy=(t[blown[0]], 0.1), xytext=(0.03, 0.97), textcoords="axes fraction",
                         ha="left", va="top", fontsize=8.5, color=RHO_COLORS[rho],
                         arrowprops=dict(arrowstyle="->", color=RHO_COLORS[rho]),
                         bbox=dict(facecolor="white", edgecolor="none", alpha=0.9))
    ax2.set_xlabel("time t (s)")
    ax2.set_ylabel("energy error |E − E(0)| / (m g L)")
    ax2.set_title(f"{pend}:\nenergy error (generalized-α)", fontsize=10)
    ax2.legend(fontsize=8.5, loc="lower right", framealpha=0.95)
    ax3.set_xlabel("time t (s)")
    ax3.set_ylabel("rod length error |L − L0| (m)")
    ax3.set_ylim(1e-17, 1e-3)
    ax3.set_title(f"{pend}:\nconstraint drift (positions hold the rod to Newton tolerance)",
                  fontsize=10)
    ax3.legend(fontsize=8.5, loc="upper right", framealpha=0.95)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


FIGURES = {
    "validate_positions.png": plot_positions,
    "validate_convergence.png": plot_convergence,
    "validate_energy.png": plot_energy,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Plot the core's integrators against exact solutions (PNGs for docs/).")
    parser.add_argument("--out", default=str(REPO / "docs"), metavar="DIR",
                        help="folder for the PNGs (default: docs/ of the repository)")
    parser.add_argument("--json", action="store_true",
                        help="print the measured numbers as JSON on stdout")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    m = measure()
    for filename, plot in FIGURES.items():
        plot(m, out / filename)
        print(f"[validate] wrote {out / filename}", file=sys.stderr)
    summary = m.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print("[validate] fitted orders: " + ", ".join(
            f"{LABELS[n]} {o:.2f}" for n, o in m.orders.items()), file=sys.stderr)
        print("[validate] generalized-α energy kept per period at h = T/20: " + ", ".join(
            f"ρ∞={r:g}: {v:.5f}" for r, v in m.energy_ratio.items()), file=sys.stderr)
        print(f"[validate] core runs took {m.seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
