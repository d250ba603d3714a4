// Bending of a wire at a vertex joining two of its edges: a stencil of three vertices
// x0 - x1 - x2 (forces/stencil.hpp) with the energy
//     E = k (1 - cos theta),     theta the turning angle between a = x1 - x0 and b = x2 - x1,
// which is k theta^2 / 2 for small angles: a restoring moment k theta from the straight
// wire, where a spring across the two edges has none (its length changes only to second
// order). With k = EI / l, l the mean length of the two edges, a wire of flexural
// rigidity EI bends as beam theory says (tests/test_core_stencils.py,
// test_a_wire_cantilever_sags_as_beam_theory_says). The rest shape is straight.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "forces/stencil.hpp"

namespace ms {

struct WireBending {
  static constexpr int K = 3;
  static constexpr const char* kName = "WireBending";
  // Newton's matrix takes the exact derivatives, not their positive part: on a hanging
  // wire the positive part doubled Newton's iterations, and its eigen-decompositions
  // cost more than the solves (docs/performance.md, "Stencils").
  static constexpr bool kProjectInNewton = false;
  double stiffness = 0.0;  // k, N m (a moment per radian)

  // InputError naming the element (item()) unless the parameters make sense.
  template <class Item>
  void validate(const Item& item) const {
    if (!(std::isfinite(stiffness) && stiffness >= 0))
      throw InputError(item() + ": stiffness must be a number >= 0 (N m per radian), got " +
                       std::to_string(stiffness));
  }

  // With `definite`, -dfdx keeps only its positive part (positive_part).
  template <int D>
  StencilTerms<3, D> terms(const std::array<Vec<D>, 3>& x, const std::array<Vec<D>, 3>& /*v*/,
                           bool definite = false) const {
    using MatD = Mat<D>;
    StencilTerms<3, D> out;
    const Vec<D> a = x[1] - x[0], b = x[2] - x[1];
    const double la = a.norm(), lb = b.norm();
    // An edge of zero length has no direction: no bending there (and no NaN).
    if (!(la > 1e-12 * std::max(lb, 1e-300)) || !(lb > 1e-12 * std::max(la, 1e-300))) return out;
    const Vec<D> u = a / la, w = b / lb;
    const double c = u.dot(w);
    const MatD I = MatD::Identity();
    const MatD Pu = I - u * u.transpose(), Pw = I - w * w.transpose();
    const Vec<D> Puw = Pu * w, Pwu = Pw * u;
    out.energy = stiffness * (1.0 - c);
    // dE/da = -k Pu w / la, dE/db = -k Pw u / lb; the Hessian in (a, b) (docs/architecture.md).
    const Vec<D> ga = -stiffness * Puw / la, gb = -stiffness * Pwu / lb;
    Eigen::Matrix<double, 2 * D, 2 * D> H;
    H.template topLeftCorner<D, D>() = stiffness * (u * Puw.transpose() + c * Pu + Puw * u.transpose()) / (la * la);
    H.template bottomRightCorner<D, D>() = stiffness * (w * Pwu.transpose() + c * Pw + Pwu * w.transpose()) / (lb * lb);
    H.template topRightCorner<D, D>() = -stiffness * Pu * Pw / (la * lb);
    H.template bottomLeftCorner<D, D>() = H.template topRightCorner<D, D>().transpose();
    // (a, b) = S (x0, x1, x2): a = x1 - x0, b = x2 - x1.
    Eigen::Matrix<double, 2 * D, 3 * D> S = Eigen::Matrix<double, 2 * D, 3 * D>::Zero();
    S.template block<D, D>(0, 0) = -I;
    S.template block<D, D>(0, D) = I;
    S.template block<D, D>(D, D) = -I;
    S.template block<D, D>(D, 2 * D) = I;
    Eigen::Matrix<double, 2 * D, 1> g;
    g << ga, gb;
    out.f = -S.transpose() * g;
    Eigen::Matrix<double, 3 * D, 3 * D> stiff = S.transpose() * H * S;
    if (definite) stiff = positive_part<3 * D>(stiff);
    out.dfdx = -stiff;
    return out;
  }
};

}  // namespace ms
