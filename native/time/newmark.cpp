// The Newmark family's pure pieces of a step (time/newmark.hpp).
#include "time/newmark.hpp"

#include <cmath>

namespace ms {

namespace {

AlphaParameters alpha_parameters(IntegratorKind kind, double rho_inf) {
  return kind == IntegratorKind::Newmark ? AlphaParameters::newmark() : AlphaParameters::generalized(rho_inf);
}

}  // namespace

NewmarkStep newmark_coefficients(IntegratorKind kind, double rho_inf, double h) {
  NewmarkStep step;
  if (kind == IntegratorKind::ImplicitEuler) {
    step.bq = h * h;
    step.bv = h;
    step.c = 1.0;
    return step;
  }
  const AlphaParameters p = alpha_parameters(kind, rho_inf);
  step.c = (1 - p.af) / (1 - p.am);
  step.bq = h * h * p.beta * step.c;
  step.bv = h * p.gamma * step.c;
  return step;
}

void newmark_predict_rows(IntegratorKind kind, double rho_inf, double h, const Eigen::VectorXd& q,
                          const Eigen::VectorXd& v, const Eigen::VectorXd& acc, const Eigen::VectorXd& aux,
                          Eigen::Index at, Eigen::Index size, NewmarkStep& step) {
  auto q_pred = step.q_pred.segment(at, size), v_pred = step.v_pred.segment(at, size);
  auto w = step.w.segment(at, size);
  if (kind == IntegratorKind::ImplicitEuler) {
    q_pred = q.segment(at, size) + h * v.segment(at, size);
    v_pred = v.segment(at, size);
    w.setZero();
    return;
  }
  const AlphaParameters p = alpha_parameters(kind, rho_inf);
  const auto a = acc.segment(at, size), x = aux.segment(at, size);
  w = (p.af * a - p.am * x) / (1 - p.am);
  q_pred = q.segment(at, size) + h * v.segment(at, size) + (h * h * (0.5 - p.beta)) * x + (h * h * p.beta) * w;
  v_pred = v.segment(at, size) + (h * (1 - p.gamma)) * x + (h * p.gamma) * w;
}

double local_error_coefficient(IntegratorKind kind, double rho_inf) {
  if (kind == IntegratorKind::ImplicitEuler) return 0.5;
  return std::abs(alpha_parameters(kind, rho_inf).beta - 1.0 / 6.0);
}

bool energy_kept(double energy_before, double energy, double energy_scale, double tolerance, double ceiling) {
  if (energy <= energy_before + 1e-12 * energy_scale) return true;
  return energy <= energy_before + tolerance * energy_scale && energy <= ceiling + 0.01 * energy_scale;
}

}  // namespace ms
