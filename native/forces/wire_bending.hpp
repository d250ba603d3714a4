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
// (test_a_wire_cantilever_sags_as_beam_theory_says). The rest shape is straight.
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
  double stiffness = 0.0;  // k, N m (a moment per radian)

  // InputError naming the element (item()) unless the parameters make sense.
  template <class Item>
  void validate(const Item& item) const {
    if (!(std::isfinite(stiffness) && stiffness >= 0))
      throw InputError(item() + ": stiffness must be a number >= 0 (N m per radian), got " +
                       std::to_string(stiffness));
  }

  // The rest shape is straight, wherever the vertices are.
  template <int D>
  void take_rest_shape(const std::array<Vec<D>, 3>& /*x*/) {}

  // With Need::kProjected, -dfdx keeps only its positive part (positive_part).
  template <int D>
  StencilTerms<3, D> terms(const std::array<Vec<D>, 3>& x, const std::array<Vec<D>, 3>& /*v*/,
                           Need need = Need::kJacobian) const {
    using MatD = Mat<D>;
    StencilTerms<3, D> out;
    const Vec<D> a = x[1] - x[0], b = x[2] - x[1];
    const double la = a.norm(), lb = b.norm();
    // An edge of zero length has no direction: no bending there (and no NaN).
    if (!(la > 1e-12 * std::max(lb, 1e-300)) || !(lb > 1e-12 * std::max(la, 1e-300))) return out;
    const Vec<D> u = a / la, w = b / lb;
    const double c = u.dot(w);
    // Folded back on itself (c = -1): no direction to unfold in, infinite energy.
    if (!(1.0 + c > 1e-12)) return out;
    // E = 2 k f(c), f = (1 - c) / (1 + c): f' = -2 / (1 + c)^2, f'' = 4 / (1 + c)^3.
    const double p = 1.0 + c;
    out.energy = 2.0 * stiffness * (1.0 - c) / p;
    if (need == Need::kEnergy) return out;
    const MatD I = MatD::Identity();
    const MatD Pu = I - u * u.transpose(), Pw = I - w * w.transpose();
    const Vec<D> Puw = Pu * w, Pwu = Pw * u;
    // c's gradient and Hessian in (a, b): dc/da = Pu w / la, dc/db = Pw u / lb
    // (docs/architecture.md).
    Eigen::Matrix<double, 2 * D, 1> gc;
    gc << Puw / la, Pwu / lb;
    const double dE = -4.0 * stiffness / (p * p), ddE = 8.0 * stiffness / (p * p * p);
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
