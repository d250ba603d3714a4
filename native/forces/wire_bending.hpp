// Bending of a wire at a vertex joining two of its edges: a stencil of three vertices
// x0 - x1 - x2 (forces/stencil.hpp) with the energy of discrete elastic rods (Bergou et
// al. 2008, without twist)
//     E = 2 k tan^2(theta / 2) = 2 k (1 - c) / (1 + c),     c = cos theta,
// theta the turning angle between a = x1 - x0 and b = x2 - x1. For small angles it is
// k theta^2 / 2: a restoring moment k theta from the straight wire, where a spring across
// the two edges has none (its length changes only to second order). The moment grows
// without bound as the wire folds back on itself (theta -> pi), where k (1 - cos theta)
// would weaken past 90 degrees and let stiff wires kink (Newton then failed on them:
// test_a_stiff_fine_wire_does_not_kink). With k = EI / l, l the length of wire the vertex
// stands for, a wire of flexural rigidity EI bends as beam theory says
// (test_a_wire_cantilever_sags_as_beam_theory_says).
//
// A rest angle theta_rest (a wire modelled bent: a coat hanger, a hook) makes it
//     E = k / 2 (kappa - kappa_rest)^2,   kappa = 2 tan(theta / 2) = 2 sqrt((1 - c) / (1 + c)),
// the discrete curvature's, which for theta_rest = 0 is the energy above. Only the angle
// is kept, not the plane it bends in (no twist frame): at rest the wire holds its shape
// (test_a_bent_wire_keeps_its_modelled_shape), and under load it may turn about its
// edges as a wire free to twist does.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "forces/stencil.hpp"

namespace ms {

struct WireBending {
  static constexpr int K = 3;
  static constexpr const char* kName = "WireBending";
  static constexpr int kMinDimension = 2;
  // Newton's matrix takes the exact derivatives, not their positive part: on a hanging
  // wire the positive part doubled Newton's iterations, and its eigen-decompositions
  // cost more than the solves (docs/performance.md, "Stencils: bending on three vertices").
  static constexpr bool kProjectInNewton = false;
  static constexpr bool kOuterProjected = false;
  static constexpr double kStraight = 1e-6;  // radians: a modelled angle below is straight
  double stiffness = 0.0;   // k, N m (a moment per radian)
  double rest_angle = 0.0;  // theta_rest, radians in [0, pi); NaN: the angle when added

  // InputError naming the element (item()) unless the parameters make sense.
  template <class Item>
  void validate(const Item& item) const {
    check_bending_stiffness(item, stiffness);
    constexpr double kPi = 3.14159265358979323846;
    if (!(std::isnan(rest_angle) || (rest_angle >= 0 && rest_angle < kPi)))
      throw InputError(item() + ": rest_angle must be a turning angle in radians within [0, pi), got " +
                       std::to_string(rest_angle));
  }

  // A rest angle not given (NaN) is the turning angle at x: the modelled shape. In 2-D
  // the rest shape is straight: a turning angle without its side (the law keeps none)
  // would let a 2-D wire rest bent either way. Returns why the law can't be added, or
  // nullptr.
  template <int D>
  const char* take_rest_shape(const std::array<Vec<D>, 3>& x) {
    if constexpr (D == 2) {
      if (std::isnan(rest_angle)) rest_angle = 0.0;
      return rest_angle > 0 ? "a rest angle needs 3-D positions (in 2-D the law cannot tell its two sides "
                              "apart); in 2-D a wire's rest shape is straight"
                            : nullptr;
    }
    if (!std::isnan(rest_angle)) return nullptr;
    const Vec<D> a = x[1] - x[0], b = x[2] - x[1];
    const double la = a.norm(), lb = b.norm();
    rest_angle = la > 0 && lb > 0 ? std::acos(std::clamp(a.dot(b) / (la * lb), -1.0, 1.0)) : 0.0;
    rest_angle = std::min(rest_angle, std::nextafter(3.14159265358979323846, 0.0));
    // A wire modelled straight has angles of round-off (1e-8 rad in float32 positions): it
    // rests straight (test_a_straight_wire_falls_freely).
    if (rest_angle < kStraight) rest_angle = 0.0;
    return nullptr;
  }

  // With Need::kProjected, -dfdx keeps only its positive part (positive_part).
  template <int D>
  StencilTerms<3, D> terms(const std::array<Vec<D>, 3>& x, const std::array<Vec<D>, 3>& /*v*/,
                           Need need = Need::kJacobian) const {
    using MatD = Mat<D>;
    StencilTerms<3, D> out(need, kOuterProjected);
    const Vec<D> a = x[1] - x[0], b = x[2] - x[1];
    const double la = a.norm(), lb = b.norm();
    // An edge of zero length has no direction: no bending there (and no NaN).
    if (!(la > 1e-12 * std::max(lb, 1e-300)) || !(lb > 1e-12 * std::max(la, 1e-300))) return out;
    const Vec<D> u = a / la, w = b / lb;
    const double c = u.dot(w);
    // Folded back on itself (c = -1): no direction to unfold in, infinite energy.
    if (!(1.0 + c > 1e-12)) return out;
    // E = 2 k r - k kappa_rest kappa + k kappa_rest^2 / 2 as a function of c, with
    // r = (1 - c) / (1 + c) (r' = -2 / (1 + c)^2, r'' = 4 / (1 + c)^3) and kappa = 2 sqrt(r).
    // (c rounds above 1 on a straight wire: r >= 0 keeps kappa a number)
    const double p = 1.0 + c, r = std::max(0.0, (1.0 - c) / p);
    out.energy = 2.0 * stiffness * (1.0 - c) / p;
    double dE = -4.0 * stiffness / (p * p), ddE = 8.0 * stiffness / (p * p * p);
    if (rest_angle > 0) {
      const double rest_kappa = 2.0 * std::tan(0.5 * rest_angle), kappa = 2.0 * std::sqrt(r);
      out.energy += stiffness * rest_kappa * (0.5 * rest_kappa - kappa);
      // Straight (r = 0), the curvature has no direction: its term there has none either.
      if (r > 1e-16) {
        const double sr = std::sqrt(r);
        const double dkappa = -2.0 / (p * p * sr);
        const double ddkappa = 4.0 / (p * p * p * sr) - 2.0 / (p * p * p * p * r * sr);
        dE -= stiffness * rest_kappa * dkappa;
        ddE -= stiffness * rest_kappa * ddkappa;
      }
    }
    if (need == Need::kEnergy) return out;
    const MatD I = MatD::Identity();
    const MatD Pu = I - u * u.transpose(), Pw = I - w * w.transpose();
    const Vec<D> Puw = Pu * w, Pwu = Pw * u;
    // c's gradient and Hessian in (a, b): dc/da = Pu w / la, dc/db = Pw u / lb
    // (docs/architecture.md).
    Eigen::Matrix<double, 2 * D, 1> gc;
    gc << Puw / la, Pwu / lb;
    const Eigen::Matrix<double, 2 * D, 1> g = dE * gc;
    // (a, b) = S (x0, x1, x2): a = x1 - x0, b = x2 - x1.
    Eigen::Matrix<double, 2 * D, 3 * D> S = Eigen::Matrix<double, 2 * D, 3 * D>::Zero();
    S.template block<D, D>(0, 0) = -I;
    S.template block<D, D>(0, D) = I;
    S.template block<D, D>(D, D) = -I;
    S.template block<D, D>(D, 2 * D) = I;
    out.f = -S.transpose() * g;
    if (need == Need::kForces) return out;
    Eigen::Matrix<double, 2 * D, 2 * D> Hc;
    Hc.template topLeftCorner<D, D>() = -(u * Puw.transpose() + c * Pu + Puw * u.transpose()) / (la * la);
    Hc.template bottomRightCorner<D, D>() = -(w * Pwu.transpose() + c * Pw + Pwu * w.transpose()) / (lb * lb);
    Hc.template topRightCorner<D, D>() = Pu * Pw / (la * lb);
    Hc.template bottomLeftCorner<D, D>() = Hc.template topRightCorner<D, D>().transpose();
    const Eigen::Matrix<double, 2 * D, 2 * D> H = ddE * gc * gc.transpose() + dE * Hc;
    Eigen::Matrix<double, 3 * D, 3 * D> stiff = S.transpose() * H * S;
    if (need == Need::kProjected) stiff = positive_part<3 * D>(stiff);
    out.dfdx = -stiff;
    return out;
  }
};

}  // namespace ms
