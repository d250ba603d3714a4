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
  HingeBending() = default;
  HingeBending(double stiffness, double rest_angle) : stiffness(stiffness) { set_rest_angle(rest_angle); }
  double stiffness = 0.0;   // k, N m per radian
  // theta_rest, radians in [-pi, pi] (NaN: not given). Read only: set_rest_angle keeps its
  // cosine and sine with it, which turn the angle to its difference from rest.
  double rest_angle = 0.0;
  double rest_cos = 1.0, rest_sin = 0.0;
  void set_rest_angle(double angle) {
    rest_angle = angle;
    rest_cos = std::cos(angle);
    rest_sin = std::sin(angle);
  }

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

// atan2(y, x), to round-off, and faster than std::atan2 where |y| <= x / 5 (an angle
// within 11 degrees, as a hinge's from its rest angle mostly is): there the series
// atan z = z (1 - w / 3 + w^2 / 5 - ...), z = y / x and w = z^2, leaves out less than
// 1e-17 of z after its w^10 term (test_the_angle_from_rest_matches_atan2). Its polynomial
// in w is summed in pairs of terms (Estrin's scheme): a chain of a few products, where
// Horner's is ten (as slow as std::atan2).
inline double atan2_near_zero(double y, double x) {
  if (!(x > 0 && std::abs(y) <= 0.2 * x)) return std::atan2(y, x);
  const double z = y / x, w = z * z, w2 = w * w, w4 = w2 * w2, w8 = w4 * w4;
  auto pair = [w](int k) {  // the series' terms of w^k and w^(k+1) over z, k even
    return 1.0 / (2 * k + 1) - w * (1.0 / (2 * k + 3));
  };
  const double low = pair(0) + w2 * pair(2), high = pair(4) + w2 * pair(6);
  const double top = pair(8) + w2 * (1.0 / 21);
  return z * ((low + w4 * high) + w8 * top);
}

// The dihedral angle of the hinge (x0, x1; x2, x3), as X = |n1||n2| cos theta and
// Y = |n1||n2| sin theta, and its first `derivatives` (0, 1 or 2) derivatives in the 12
// coordinates (x0, x1, x2, x3): gradient and Hessian (the gradient is zero without
// derivatives; the Hessian is set with 2 only). `ok` is false where it has no direction
// (a triangle of zero area or an edge of zero length): then all are zero.
struct DihedralAngle {
  bool ok = false;
  double X = 1.0, Y = 0.0;
  Eigen::Matrix<double, 12, 1> grad;
  Eigen::Matrix<double, 12, 12> hess;  // set with derivatives = 2 only (zero if not ok)
  double theta() const { return std::atan2(Y, X); }
  // theta - theta_rest within [-pi, pi], from theta_rest's cosine and sine: the angle
  // turned back by theta_rest, without a jump where the hinge folds through pi
  // (test_a_hinge_folding_through_pi_has_no_jump).
  double from_rest(double rest_cos, double rest_sin) const {
    return atan2_near_zero(Y * rest_cos - X * rest_sin, X * rest_cos + Y * rest_sin);
  }
};
// Sets angle.hess from the hinge's edge vectors a = x2 - x0, e = x1 - x0, b = x3 - x0
// (hinge_bending.cpp): it costs several times the rest of dihedral_angle.
void set_dihedral_hessian(const Vec<3>& a, const Vec<3>& e, const Vec<3>& b, DihedralAngle& angle);

// Inline: a hinge's forces cost little more than the call and the copies around it.
inline DihedralAngle dihedral_angle(const Vec<3>& x0, const Vec<3>& x1, const Vec<3>& x2, const Vec<3>& x3,
                                    int derivatives = 2) {
  DihedralAngle out;
  const Vec<3> a = x2 - x0, e = x1 - x0, b = x3 - x0;
  const double ee = e.squaredNorm(), le = std::sqrt(ee);
  const Vec<3> n1 = a.cross(e), n2 = e.cross(b);
  // A triangle of zero area (relative to its edges) or an edge of zero length has no
  // normal: no bending there (and no NaN).
  const double nn1 = n1.squaredNorm(), nn2 = n2.squaredNorm();
  if (!(le > 0) || !(nn1 > 1e-24 * a.squaredNorm() * ee) || !(nn2 > 1e-24 * b.squaredNorm() * ee)) {
    out.grad.setZero();
    out.hess.setZero();
    return out;
  }
  out.ok = true;
  out.X = n1.dot(n2);
  out.Y = -le * n1.dot(b);  // |e| (e x a) . b
  if (derivatives == 0) {
    out.grad.setZero();
    return out;
  }
  // The gradient in closed form (Bridson et al. 2003), at a fraction of the cost of the
  // polynomials' in set_dihedral_hessian (test_the_angle_and_the_law_match_finite_differences):
  // a wing vertex turns its triangle about the edge, by |e| / |n|^2 per unit along its
  // normal; the edge's ends take the opposite, split as the wing's foot divides the edge.
  const Vec<3> g2 = -(le / nn1) * n1, g3 = -(le / nn2) * n2;
  const double t2 = a.dot(e) / ee, t3 = e.dot(b) / ee;
  out.grad << -(1.0 - t2) * g2 - (1.0 - t3) * g3, -t2 * g2 - t3 * g3, g2, g3;
  if (derivatives == 2) set_dihedral_hessian(a, e, b, out);
  return out;
}

template <int D>
const char* HingeBending::take_rest_shape(const std::array<Vec<D>, 4>& x) {
  if constexpr (D == 3) {
    if (!std::isnan(rest_angle)) return nullptr;
    // Where a triangle has no area the angle has no direction: a rest angle of 0 taken
    // there would fold the hinge as soon as the corner leaves the edge's line
    // (test_a_hinge_without_an_angle_at_rest_is_refused).
    const DihedralAngle angle = dihedral_angle(x[0], x[1], x[2], x[3], 0);
    if (!angle.ok)
      return "its triangles have no area where it is added (a corner on the line of the edge, or an "
             "edge of zero length), so it has no rest angle: give rest_angle, or leave the hinge out";
    set_rest_angle(angle.theta());
  }
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
    const double d = angle.from_rest(rest_cos, rest_sin);
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
