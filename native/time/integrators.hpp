// The integrators: one table, the only list of them. Python reads it as
// mass_spring.INTEGRATORS / INTEGRATOR_INFO, and the add-on builds its enum from it (its
// identifiers are the names in capitals, stored in .blend files).
#pragma once

#include <Eigen/Dense>

#include <array>
#include <string>

namespace ms {

enum class IntegratorKind {
  GeneralizedAlpha,
  Newmark,
  ImplicitEuler,
  SymplecticEuler,
  ExplicitEuler,
  RK2,
};

struct IntegratorInfo {
  IntegratorKind kind;
  const char* name;         // for set_integrator
  const char* label;        // for a user interface
  const char* description;  // one line
  bool is_explicit;         // explicit methods cannot enforce DistanceConstraints
  int order;                // order of accuracy
};

inline constexpr std::array<IntegratorInfo, 6> kIntegrators{{
    {IntegratorKind::GeneralizedAlpha, "generalized_alpha", "Generalized-α",
     "Implicit, second order, numerical damping of high frequencies set by ρ∞ (recommended)",
     false, 2},
    {IntegratorKind::Newmark, "newmark", "Newmark",
     "Implicit trapezoidal rule (generalized-α with ρ∞ = 1): no numerical damping", false, 2},
    {IntegratorKind::ImplicitEuler, "implicit_euler", "Implicit Euler",
     "Implicit, first order, strongly damped: robust for very stiff structures", false, 1},
    {IntegratorKind::SymplecticEuler, "symplectic_euler", "Symplectic Euler",
     "Explicit, first order, cheap; needs small steps; cannot handle rigid edges", true, 1},
    {IntegratorKind::ExplicitEuler, "explicit_euler", "Explicit Euler",
     "Explicit, first order, gains energy: for comparison only; cannot handle rigid edges",
     true, 1},
    {IntegratorKind::RK2, "rk2", "Runge–Kutta 2",
     "Explicit, second order; needs small steps; cannot handle rigid edges", true, 2},
}};

const IntegratorInfo& integrator_info(IntegratorKind k);
inline bool is_explicit(IntegratorKind k) { return integrator_info(k).is_explicit; }
inline std::string integrator_name(IntegratorKind k) { return integrator_info(k).name; }
// By table name, or "alpha" for generalized-alpha; InputError for an unknown name.
IntegratorKind integrator_from_name(const std::string& name);

// Step-size control of error-controlled runs (Simulator::advance_controlled); err is a
// step's local error in units of the tolerance. The local error is O(h^3).
// The step to take of a proposed h with `left` to the end: the last step lands on the
// end, and a step that would leave a sliver is split evenly.
double step_within(double h, double left);
// After an accepted step of h (proposal: the step proposed before step_within): the step
// that would just meet the tolerance, with a safety factor, at most 2x and at least 0.2x,
// never above h_max.
double step_after_accepted(double err, double h, double proposal, double h_max);
// After a rejected step of h: shrunk by its error (0.2x to 0.9x) when it was measured,
// else (Newton failed, or the energy grew) to a quarter.
double step_after_rejected(double h, bool measured, double err);

// One step of the Newmark family written as
//     q1 = q_pred + bq * acc1,   v1 = v_pred + bv * acc1,   aux1 = c * acc1 + w
// where acc1 is the new true acceleration (the Newton unknown).
struct NewmarkStep {
  Eigen::VectorXd q_pred, v_pred, w;
  double bq = 0, bv = 0, c = 1;
};

}  // namespace ms
