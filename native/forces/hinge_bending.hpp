// Bending of a sheet across an edge two triangles share (a hinge): a stencil of four
// vertices (forces/stencil.hpp), x0 - x1 the shared edge, x2 and x3 the triangles' other
// corners, with the energy of discrete shells (Grinspun et al. 2003)
//     E = k / 2 (theta - theta_rest)^2,
// theta the dihedral angle: 0 where the two triangles lie flat, positive where x3 lies on
// the side of the first triangle's normal (x1 - x0) x (x2 - x0). A flat sheet meets a
// small fold with the moment k theta, where a spring across the hinge has none (its
// length changes only to second order). For a plate of flexural rigidity D (N m),
// k = D |e|^2 / (A1 + A2) with the rest edge length |e| and triangle areas A1, A2
// (python/mass_spring/structure.py, hinge_stiffnesses, with how well that holds by mesh;
// test_a_clamped_strip_bends_as_plate_theory_says).
//
// theta = atan2(Y, X) with polynomials of a = x2 - x0, e = x1 - x0, b = x3 - x0:
//     X = (a x e) . (e x b) = (a.e)(e.b) - (a.b)|e|^2        (|n1||n2| cos theta)
//     Y = |e| T,   T = (e x a) . b                           (|n1||n2| sin theta)
// so its derivatives are exact and cheap: no normals are normalized.
#pragma once

#include <cmath>
#include <string>

#include "forces/stencil.hpp"

namespace ms {

struct HingeBending {
  static constexpr int K = 4;
  static constexpr const char* kName = "HingeBending";
  static constexpr int kMinDimension = 3;  // a hinge bends a sheet: 3-D only
  // Newton's projected matrix (the default) takes the Gauss-Newton part k grad(theta)
  // grad(theta)^T: positive semi-definite, and without theta's Hessian, which costs most
  // of a hinge's evaluation (docs/performance.md, "Angular bending").
  static constexpr bool kProjectInNewton = true;
  static constexpr bool kOuterProjected = true;  // k grad(theta) grad(theta)^T
  double stiffness = 0.0;   // k, N m per radian
  double rest_angle = 0.0;  // theta_rest, radians in [-pi, pi]

  template <class Item>
  void validate(const Item& item) const {
    check_bending_stiffness(item, stiffness);
    constexpr double kPi = 3.14159265358979323846;
    // NaN: not given, the angle where the vertices are when added (take_rest_shape)
    if (!(std::isnan(rest_angle) || std::abs(rest_angle) <= kPi))
      throw InputError(item() + ": rest_angle must be an angle in radians within [-pi, pi], got " +
                       std::to_string(rest_angle));
  }

  // A rest angle not given (NaN) is the angle at x: the modelled shape. Returns why the
  // law can't be added, or nullptr.
  template <int D>
  const char* take_rest_shape(const std::array<Vec<D>, 4>& x);

  // With Need::kProjected, -dfdx is the Gauss-Newton part k grad(theta) grad(theta)^T
  // (positive semi-definite; the forces are exact either way). In 2-D a hinge has no
  // meaning (System refuses it); its terms are zero.
  template <int D>
  StencilTerms<4, D> terms(const std::array<Vec<D>, 4>& x, const std::array<Vec<D>, 4>& v,
                           Need need = Need::kJacobian) const;
};

// The dihedral angle of the hinge (x0, x1; x2, x3) and its first `derivatives` (0, 1 or
// 2) derivatives in the 12 coordinates (x0, x1, x2, x3): gradient and Hessian (the
// gradient is zero without derivatives; the Hessian is set with 2 only). `ok` is false
// where it has no direction (a triangle of zero area or an edge of zero length): then
// all are zero.
struct DihedralAngle {
  bool ok = false;
  double theta = 0.0;
  Eigen::Matrix<double, 12, 1> grad = Eigen::Matrix<double, 12, 1>::Zero();
  Eigen::Matrix<double, 12, 12> hess;  // set with derivatives = 2 only (zero if not ok)
};
DihedralAngle dihedral_angle(const Vec<3>& x0, const Vec<3>& x1, const Vec<3>& x2, const Vec<3>& x3,
                             int derivatives = 2);

template <int D>
const char* HingeBending::take_rest_shape(const std::array<Vec<D>, 4>& x) {
  if constexpr (D == 3)
    if (std::isnan(rest_angle)) rest_angle = dihedral_angle(x[0], x[1], x[2], x[3], 0).theta;
  return nullptr;
}

template <int D>
StencilTerms<4, D> HingeBending::terms(const std::array<Vec<D>, 4>& x, const std::array<Vec<D>, 4>& /*v*/,
                                       Need need) const {
  StencilTerms<4, D> out(need, kOuterProjected);
  out.outer = need == Need::kProjected;  // of scale 0 where the angle has no direction
  if constexpr (D == 3) {
    const int derivatives = need == Need::kEnergy ? 0 : need == Need::kJacobian ? 2 : 1;
    const DihedralAngle angle = dihedral_angle(x[0], x[1], x[2], x[3], derivatives);
    if (!angle.ok) return out;
    // The angle's difference from its rest angle, within (-pi, pi]: atan2 jumps by 2 pi
    // where the hinge folds flat onto itself (test_a_hinge_folding_through_pi_has_no_jump).
    constexpr double kPi = 3.14159265358979323846;
    double d = angle.theta - rest_angle;  // within [-2 pi, 2 pi]: both are angles
    if (d > kPi) d -= 2.0 * kPi;
    if (d < -kPi) d += 2.0 * kPi;
    out.energy = 0.5 * stiffness * d * d;
    if (need == Need::kEnergy) return out;
    out.f = -stiffness * d * angle.grad;
    if (need == Need::kForces) return out;
    if (need == Need::kProjected) {
      out.outer_scale = stiffness;
      out.u = angle.grad;
      return out;
    }
    out.dfdx = -stiffness * (angle.grad * angle.grad.transpose() + d * angle.hess);
  }
  return out;
}

}  // namespace ms
