// The force laws of the elements, as pure functions of one element's parameters and the
// relative motion of its ends, d = p_b - p_a and dv = v_b - v_a. Each returns the force on
// end a (end b gets the opposite) and its exact D x D derivative blocks; assembly
// (assembly.cpp) adds them up. Tested alone against closed forms and finite differences in
// tests/test_core_laws.py.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>

#include "forces/stencil.hpp"
#include "model/model.hpp"

namespace ms {

// Force on end a of an element and its derivatives A = d f / d d, B = d f / d dv.
template <int D>
struct ElementForce {
  Vec<D> f = Vec<D>::Zero();
  Mat<D> A = Mat<D>::Zero();
  Mat<D> B = Mat<D>::Zero();
};

// Tension of a spring as a function of its stretch s = L - L0, with T'(s) and T''(s).
struct Tension {
  double T = 0, dT = 0, ddT = 0;
};

// Width of a rope's C^1 band: slack for s <= -eps, linear for s >= eps, quadratic in
// between, so that Newton's method does not cycle between slack and taut. The band moves
// the rope's rest length by at most 0.25 eps.
inline double rope_band(double L0) { return 1e-3 * std::max(L0, 1e-9); }

// Spring: T = k s. Rope: the same above its band, zero below it, C^1 in between.
inline Tension tension(const Spring& s, double stretch) {
  const double k = s.stiffness;
  if (!s.rope) return {k * stretch, k, 0.0};
  const double eps = rope_band(s.length);
  if (stretch <= -eps) return {};
  if (stretch >= eps) return {k * stretch, k, 0.0};
  const double u = stretch + eps;
  return {k * u * u / (4 * eps), k * u / (2 * eps), k / (2 * eps)};
}

// Potential energy of a spring or rope at stretch s: the integral of its tension.
inline double spring_energy(const Spring& s, double stretch) {
  const double k = s.stiffness;
  if (!s.rope) return 0.5 * k * stretch * stretch;
  const double eps = rope_band(s.length);
  if (stretch <= -eps) return 0.0;
  if (stretch >= eps) return 0.5 * k * stretch * stretch + k * eps * eps / 6;
  const double u = stretch + eps;
  return k * u * u * u / (12 * eps);
}

// Spring or rope with its dashpot: f = (T(L - L0) + c w n.dv) n with n = d / L. The
// dashpot acts where the spring pulls: fully for springs, with weight w = T'/k for ropes
// (zero when slack). With `definite`, A leaves out the geometric stiffness of a compressed
// spring (negative and destabilizing: the Newton matrix of implicit_step); f is unchanged.
// Without kDerivatives, only f (A and B stay zero): a residual needs no matrix.
template <int D, bool kDerivatives = true>
ElementForce<D> spring_force(const Spring& s, const Vec<D>& d, const Vec<D>& dv,
                             bool definite = false) {
  const Mat<D> I = Mat<D>::Identity();
  const double L = d.norm();
  const double k = s.stiffness, L0 = s.length;
  ElementForce<D> out;
  // Direction undefined at L -> 0: the zero-length spring is exactly linear (f = k d);
  // otherwise use the isotropic limit of the stiffness and no force (no NaN).
  if (L <= 1e-12 * std::max(L0, 1.0)) {
    if (s.rope) return out;
    if (L0 == 0.0) out.f = k * d;
    if constexpr (kDerivatives) out.A = k * I;
    return out;
  }
  const Tension t = tension(s, L - L0);
  if (s.rope && t.dT == 0.0) return out;  // slack rope
  const Vec<D> n = d / L;
  out.f = t.T * n;
  const bool weighted = s.rope && k > 0;
  const double w = weighted ? t.dT / k : (s.rope ? 0.0 : 1.0);
  const double c = s.damping * w, rate = n.dot(dv);
  if (s.damping > 0) out.f += c * rate * n;
  if constexpr (!kDerivatives) return out;
  // A = along n n^T + across (I - n n^T) + n u^T, built as across I + n ((along - across) n
  // + u)^T: no D x D products (assembly runs this for every spring at every Newton
  // iteration).
  double along = t.dT, across = (definite ? std::max(t.T, 0.0) : t.T) / L;
  Vec<D> u = Vec<D>::Zero();
  if (s.damping > 0) {
    // d/dd of c rate n is (c / L) (n dv^T + rate I)(I - n n^T) = (c / L) (n (dv - rate n)^T
    // + rate (I - n n^T)), plus the weight's own derivative along n.
    const double dw = weighted ? t.ddT / k : 0.0;
    across += c * rate / L;
    u = (c / L) * (dv - rate * n);
    along += s.damping * dw * rate;
    out.B = c * (n * n.transpose());
  }
  out.A = n * ((along - across) * n + u).transpose();
  out.A.diagonal().array() += across;
  return out;
}

// A law in the pair form (Spring::kPairForm): its energy, the force on its first vertex
// (the second gets the opposite) and that force's derivatives by the ends' difference d and
// dv, one D x D block each. The generic assembly (Simulator::add_elements) writes one
// block per element where a stencil law writes (2D)^2 numbers.
template <int D>
struct PairTerms {
  double energy = 0.0;
  ElementForce<D> force;
};

// A spring, rope or damper as a law on its two vertices (forces/stencil.hpp's interface):
// the forces (and, for Newton, their derivatives; projected: without compression's
// negative stiffness) or the energy, as `need` asks.
template <int D>
inline PairTerms<D> law_terms(const Spring& s, const std::array<Vec<D>, 2>& x, const std::array<Vec<D>, 2>& v,
                              Need need) {
  const Vec<D> d = x[1] - x[0];
  if (need == Need::kEnergy) return {spring_energy(s, d.norm() - s.length), {}};
  const Vec<D> dv = v[1] - v[0];
  if (need == Need::kForces) return {0.0, spring_force<D, false>(s, d, dv)};
  return {0.0, spring_force<D>(s, d, dv, need == Need::kProjected)};
}

inline const Spring& law_at(const std::vector<Spring>& springs, std::size_t e) { return springs[e]; }
inline const std::array<Connector, 2>& ends_at(const std::vector<Spring>& springs, std::size_t e) {
  return springs[e].c;
}

// Rigid rod of length L0 in the smooth squared form g = (|d|^2 - L0^2) / (2 L0), whose
// gradient dg/dp_b = d / L0 has length 1 on the constraint, so the multiplier lam is the
// rod's tension (positive pulls the ends together).
template <int D>
struct RodTerms {
  double g = 0;                    // constraint value
  Vec<D> grad = Vec<D>::Zero();    // dg/dp_b (dg/dp_a = -grad)
  ElementForce<D> force;           // -G^T lam on end a: f = lam grad, A = (lam / L0) I, B = 0
};

// With `definite`, A leaves out the geometric stiffness of a pushing rod (lam < 0).
template <int D>
RodTerms<D> rod_terms(double L0, const Vec<D>& d, double lam, bool definite = false) {
  RodTerms<D> out;
  out.g = (d.squaredNorm() - L0 * L0) / (2 * L0);
  out.grad = d / L0;
  out.force.f = lam * out.grad;
  out.force.A = ((definite ? std::max(lam, 0.0) : lam) / L0) * Mat<D>::Identity();
  return out;
}

}  // namespace ms
