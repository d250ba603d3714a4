// Building, validation, forces, the exact Jacobian and diagnostics of System<D>.
#include "system.hpp"

#include "krylov.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <sstream>

namespace ms {

namespace {

std::atomic<std::uint64_t> next_system_id{1};

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

template <class V>
bool all_finite(const V& v) {
  return v.allFinite();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw InputError(message);
}

}  // namespace

IntegratorKind integrator_from_name(const std::string& name) {
  if (name == "generalized_alpha" || name == "alpha") return IntegratorKind::GeneralizedAlpha;
  if (name == "newmark") return IntegratorKind::Newmark;
  if (name == "implicit_euler") return IntegratorKind::ImplicitEuler;
  if (name == "symplectic_euler") return IntegratorKind::SymplecticEuler;
  if (name == "explicit_euler") return IntegratorKind::ExplicitEuler;
  if (name == "rk2") return IntegratorKind::RK2;
  throw InputError("unknown integrator '" + name +
                   "'; choose generalized_alpha, newmark, implicit_euler, symplectic_euler, "
                   "explicit_euler or rk2");
}

std::string integrator_name(IntegratorKind k) {
  switch (k) {
    case IntegratorKind::GeneralizedAlpha: return "generalized_alpha";
    case IntegratorKind::Newmark: return "newmark";
    case IntegratorKind::ImplicitEuler: return "implicit_euler";
    case IntegratorKind::SymplecticEuler: return "symplectic_euler";
    case IntegratorKind::ExplicitEuler: return "explicit_euler";
    case IntegratorKind::RK2: return "rk2";
  }
  return "?";
}

// ---------------------------------------------------------------- building

template <int D>
System<D>::System() : id_(next_system_id++) {
  state_.q.resize(0);
  state_.v.resize(0);
  state_.acc.resize(0);
  state_.aux.resize(0);
  state_.lam.resize(0);
}

template <int D>
void System<D>::topology_changed() {
  pattern_ready_ = false;
  state_.consistent = false;
}

template <int D>
void System<D>::set_linear_solver(const std::string& name) {
  require(name == "auto" || name == "direct" || name == "multigrid",
          "linear_solver must be 'auto', 'direct' or 'multigrid', got '" + name + "'");
  linear_solver_ = name;
  pattern_ready_ = false;  // the solvers are set up with the pattern
}

template <int D>
Connector System<D>::add_mass(double mass, const VecD& pos, const VecD& vel) {
  add_masses({mass}, {pos}, {vel});
  return Connector{MASS, num_masses() - 1, id_};
}

template <int D>
void System<D>::add_masses(const std::vector<double>& mass, const std::vector<VecD>& pos,
                           const std::vector<VecD>& vel) {
  const int n0 = num_masses(), count = static_cast<int>(mass.size());
  for (int k = 0; k < count; ++k) {
    const std::string item = "Mass " + std::to_string(n0 + k);
    require(std::isfinite(mass[k]) && mass[k] > 0,
            item + ": mass must be positive, got " + fmt(mass[k]));
    require(all_finite(pos[k]), item + ": position contains NaN or Inf");
    require(all_finite(vel[k]), item + ": velocity contains NaN or Inf");
  }
  const int n = D * (n0 + count);
  state_.q.conservativeResize(n);
  state_.v.conservativeResize(n);
  state_.acc.conservativeResize(n);
  state_.aux.conservativeResize(n);
  for (int k = 0; k < count; ++k) {
    mass_.push_back(mass[k]);
    state_.q.template segment<D>(D * (n0 + k)) = pos[k];
    state_.v.template segment<D>(D * (n0 + k)) = vel[k];
    state_.acc.template segment<D>(D * (n0 + k)).setZero();
    state_.aux.template segment<D>(D * (n0 + k)).setZero();
  }
  topology_changed();
}

template <int D>
Connector System<D>::add_fix(const VecD& pos) {
  const std::string item = "Fix " + std::to_string(num_fixes());
  require(all_finite(pos), item + ": position contains NaN or Inf");
  fix_target_.push_back(pos);
  state_.fix_pos.push_back(pos);
  topology_changed();
  return Connector{FIX, num_fixes() - 1, id_};
}

template <int D>
void System<D>::check_connector(const Connector& c, const std::string& item) const {
  require(c.owner == 0 || c.owner == id_,
          item + ": connector belongs to another MassSpringSystem");
  require(c.type == MASS || c.type == FIX,
          item + ": connector type must be FIX (1) or MASS (2), got " + std::to_string(c.type));
  const int count = c.type == MASS ? num_masses() : num_fixes();
  require(c.nr >= 0 && c.nr < count,
          item + ": connector " + (c.type == MASS ? "MASS " : "FIX ") + std::to_string(c.nr) +
              " is out of range (the system has " + std::to_string(count) +
              (c.type == MASS ? " masses)" : " fixes)"));
}

template <int D>
int System<D>::add_spring(const Spring& s) {
  const std::string item =
      std::string(s.rope ? "Chain " : "Spring ") + std::to_string(springs_.size());
  require(std::isfinite(s.length) && s.length >= 0,
          item + ": length must be >= 0, got " + fmt(s.length));
  require(std::isfinite(s.stiffness) && s.stiffness >= 0,
          item + ": stiffness must be >= 0, got " + fmt(s.stiffness));
  require(std::isfinite(s.damping) && s.damping >= 0,
          item + ": damping must be >= 0, got " + fmt(s.damping));
  check_connector(s.c[0], item);
  check_connector(s.c[1], item);
  require(!(s.c[0].type == s.c[1].type && s.c[0].nr == s.c[1].nr),
          item + ": both ends are the same connector");
  springs_.push_back(s);
  topology_changed();
  return static_cast<int>(springs_.size()) - 1;
}

template <int D>
int System<D>::add_constraint(const DistanceConstraint& c) {
  add_constraints({c});
  return static_cast<int>(constraints_.size()) - 1;
}

template <int D>
void System<D>::add_constraints(const std::vector<DistanceConstraint>& cs) {
  const std::size_t n0 = constraints_.size();
  for (std::size_t k = 0; k < cs.size(); ++k) {
    const DistanceConstraint& c = cs[k];
    const std::string item = "DistanceConstraint " + std::to_string(n0 + k);
    require(std::isfinite(c.length) && c.length > 0,
            item + ": length must be positive, got " + fmt(c.length));
    check_connector(c.c[0], item);
    check_connector(c.c[1], item);
    require(!(c.c[0].type == FIX && c.c[1].type == FIX),
            item + ": both ends are fixes; a constraint needs at least one mass");
    require(!(c.c[0].type == c.c[1].type && c.c[0].nr == c.c[1].nr),
            item + ": both ends are the same connector");
  }
  constraints_.insert(constraints_.end(), cs.begin(), cs.end());
  const auto n = static_cast<Eigen::Index>(constraints_.size());
  state_.lam.conservativeResize(n);
  state_.lam.tail(n - static_cast<Eigen::Index>(n0)).setZero();
  topology_changed();
}

template <int D>
void System<D>::set_mass(int i, double m) {
  require(std::isfinite(m) && m > 0,
          "Mass " + std::to_string(i) + ": mass must be positive, got " + fmt(m));
  mass_[i] = m;
  state_.consistent = false;
  pattern_ready_ = false;  // the length scale and regularization depend on masses
}

template <int D>
void System<D>::set_fix_pos(int k, const VecD& p) {
  require(all_finite(p), "Fix " + std::to_string(k) + ": position contains NaN or Inf");
  fix_target_[k] = p;
  // Before the first step there is no motion to interpolate: the fix simply is there.
  if (!has_stepped_) {
    state_.fix_pos[k] = p;
    state_.consistent = false;
  }
}

template <int D>
void System<D>::set_pos(int i, const VecD& p) {
  require(all_finite(p), "Mass " + std::to_string(i) + ": position contains NaN or Inf");
  state_.q.template segment<D>(D * i) = p;
  state_.consistent = false;
}

template <int D>
void System<D>::set_vel(int i, const VecD& v) {
  require(all_finite(v), "Mass " + std::to_string(i) + ": velocity contains NaN or Inf");
  state_.v.template segment<D>(D * i) = v;
  state_.consistent = false;
}

template <int D>
void System<D>::set_state(const State<D>& s) {
  const int n = D * num_masses();
  require(s.q.size() == n && s.v.size() == n && s.acc.size() == n && s.aux.size() == n,
          "state: position/velocity/acceleration arrays must have " + std::to_string(n) +
              " entries for this system");
  require(s.lam.size() == static_cast<Eigen::Index>(constraints_.size()),
          "state: multiplier array must have " + std::to_string(constraints_.size()) +
              " entries");
  require(static_cast<int>(s.fix_pos.size()) == num_fixes(),
          "state: fix positions must have " + std::to_string(num_fixes()) + " rows");
  require(std::isfinite(s.time) && all_finite(s.q) && all_finite(s.v) && all_finite(s.acc) &&
              all_finite(s.aux) && all_finite(s.lam),
          "state: contains NaN or Inf");
  state_ = s;
  fix_target_ = s.fix_pos;
  lin_.invalidate_factor();
  consistency_lin_.invalidate_factor();
  has_stepped_ = true;  // fix writes after a restore mean motion from the restored place
}

// ---------------------------------------------------------------- forces and Jacobian

template <int D>
typename System<D>::Kinematics System<D>::kinematics(const VectorXd& q, const VectorXd& v,
                                                     const FixPath<D>& path, double t) const {
  Kinematics k{&q, &v, {}, {}};
  k.fix_pos.resize(num_fixes());
  k.fix_vel.resize(num_fixes());
  for (int j = 0; j < num_fixes(); ++j) {
    k.fix_pos[j] = path.pos(j, t);
    k.fix_vel[j] = path.vel(j);
  }
  return k;
}

template <int D>
FixPath<D> System<D>::resting_path() const {
  FixPath<D> p;
  p.start = &state_.fix_pos;
  p.target = &state_.fix_pos;
  p.moving = false;
  return p;
}

namespace {

// Tension of a spring as a function of its stretch s = L - L0. A spring is linear. A rope
// is slack for s <= -eps, linear for s >= eps, and quadratic in between: C^1, so that
// Newton's method does not cycle between slack and taut (it did, with rigid rods, down
// to steps of 1e-6 s). The band eps = 1e-3 L0 moves the rope's rest length by at most
// 0.25 eps.
struct Tension {
  double T = 0, dT = 0, ddT = 0;  // T(s), T'(s), T''(s)
};

inline double rope_band(double L0) { return 1e-3 * std::max(L0, 1e-9); }

inline Tension tension(const Spring& s, double stretch) {
  const double k = s.stiffness;
  if (!s.rope) return {k * stretch, k, 0.0};
  const double eps = rope_band(s.length);
  if (stretch <= -eps) return {};
  if (stretch >= eps) return {k * stretch, k, 0.0};
  const double u = stretch + eps;
  return {k * u * u / (4 * eps), k * u / (2 * eps), k / (2 * eps)};
}

inline double spring_energy(const Spring& s, double stretch) {
  const double k = s.stiffness;
  if (!s.rope) return 0.5 * k * stretch * stretch;
  const double eps = rope_band(s.length);
  if (stretch <= -eps) return 0.0;
  if (stretch >= eps) return 0.5 * k * stretch * stretch + k * eps * eps / 6;
  const double u = stretch + eps;
  return k * u * u * u / (12 * eps);
}

// Force on end a of a spring (end b gets the opposite) and its exact derivatives
// A = d f_a / d(p_b - p_a), B = d f_a / d(v_b - v_a). The dashpot acts where the spring
// pulls: fully for springs, with weight T'/k for ropes (zero when slack).
// With `definite`, A leaves out the geometric stiffness of a compressed spring (negative
// and destabilizing); the force is unchanged.
template <int D>
void spring_terms(const Spring& s, const Vec<D>& d, const Vec<D>& dv, Vec<D>& fa, Mat<D>& A,
                  Mat<D>& B, bool definite = false) {
  const Mat<D> I = Mat<D>::Identity();
  const double L = d.norm();
  const double k = s.stiffness, L0 = s.length;
  fa.setZero();
  A.setZero();
  B.setZero();
  // Direction undefined at L -> 0: the zero-length spring is exactly linear (f = k d);
  // otherwise use the isotropic limit of the stiffness and no force (no NaN).
  if (L <= 1e-12 * std::max(L0, 1.0)) {
    if (s.rope) return;
    if (L0 == 0.0) fa = k * d;
    A = k * I;
    return;
  }
  const Tension t = tension(s, L - L0);
  if (s.rope && t.dT == 0.0) return;  // slack rope
  const Vec<D> n = d / L;
  const Mat<D> nn = n * n.transpose();
  const Mat<D> P = I - nn;
  fa = t.T * n;
  A = t.dT * nn + ((definite ? std::max(t.T, 0.0) : t.T) / L) * P;
  if (s.damping > 0) {
    const bool weighted = s.rope && k > 0;
    const double w = weighted ? t.dT / k : (s.rope ? 0.0 : 1.0);
    const double dw = weighted ? t.ddT / k : 0.0;
    const double c = s.damping * w, rate = n.dot(dv);
    fa += c * rate * n;
    A += (c / L) * (n * dv.transpose() + rate * I) * P + (s.damping * dw * rate) * nn;
    B = c * nn;
  }
}

struct PatternSink {
  std::vector<Eigen::Triplet<double>> entries;
  void add(int r, int c, double) { entries.emplace_back(r, c, 0.0); }
};

struct ValueSink {
  double* values;
  const int* slots;
  std::size_t next = 0;
  void add(int, int, double v) { values[slots[next++]] += v; }
};

struct TripletSink {
  std::vector<Eigen::Triplet<double>>* out;
  void add(int r, int c, double v) { out->emplace_back(r, c, v); }
};

}  // namespace

// One pass over all elements computing F = f - G^T lam, g, and (into `matrix`, in element
// form) the matrix
//     cM * M - cK * dF/dq - cV * dF/dv     in the mass rows and columns,
//     G^T in the multiplier columns, G in the multiplier rows, 0 on their diagonal.
template <int D>
void System<D>::assemble(const Kinematics& kin, const VectorXd& lam, double cM, double cK,
                         double cV, VectorXd* F, VectorXd* g, ElementMatrix* matrix) const {
  const int nm = num_masses();
  if (F) F->setZero(D * nm);
  if (g) g->setZero(static_cast<Eigen::Index>(constraints_.size()));
  const int nc = static_cast<int>(constraints_.size());
  if (matrix) {
    int pairs = nc;  // springs between two fixes have no matrix entries
    for (const Spring& s : springs_) pairs += s.c[0].type == MASS || s.c[1].type == MASS;
    matrix->resize(D, nm, pairs, nc);
  }
  auto node = [](const Connector& c) { return c.type == MASS ? c.nr : -1; };
  int pair = 0;
  if (F) element_force_scale_ = 0.0;
  auto add_force = [&](const std::array<Connector, 2>& c, const VecD& fa) {
    if (!F) return;
    element_force_scale_ = std::max(element_force_scale_, fa.cwiseAbs().maxCoeff());
    if (c[0].type == MASS) F->template segment<D>(D * c[0].nr) += fa;
    if (c[1].type == MASS) F->template segment<D>(D * c[1].nr) -= fa;
  };

  for (int i = 0; i < nm; ++i) {
    if (F) {
      F->template segment<D>(D * i) += mass_[i] * gravity;
      element_force_scale_ = std::max(element_force_scale_, mass_[i] * gravity.cwiseAbs().maxCoeff());
    }
    if (matrix) matrix->set_mass(i, cM * mass_[i]);
  }

  for (const Spring& s : springs_) {
    if (s.c[0].type == FIX && s.c[1].type == FIX) continue;
    const VecD d = kin.pos(s.c[1]) - kin.pos(s.c[0]);
    const VecD dv = kin.vel(s.c[1]) - kin.vel(s.c[0]);
    VecD fa;
    MatD A, B;
    spring_terms<D>(s, d, dv, fa, A, B, definite_newton_);
    add_force(s.c, fa);
    if (matrix) matrix->set_pair(pair, node(s.c[0]), node(s.c[1]), cK * A + cV * B);
    ++pair;
  }

  for (int j = 0; j < nc; ++j) {
    const DistanceConstraint& dc = constraints_[j];
    const VecD d = kin.pos(dc.c[1]) - kin.pos(dc.c[0]);
    const double L0 = dc.length;
    const VecD grad = d / L0;  // dg/dp_b; dg/dp_a = -grad
    if (g) (*g)(j) = (d.squaredNorm() - L0 * L0) / (2 * L0);
    add_force(dc.c, lam(j) * grad);  // -G^T lam: pulls a toward b when lam > 0
    const double tension = definite_newton_ ? std::max(lam(j), 0.0) : lam(j);
    if (matrix) {
      matrix->set_pair(pair, node(dc.c[0]), node(dc.c[1]),
                       MatD((cK * tension / L0) * MatD::Identity()));
      matrix->set_rod(j, grad);
    }
    ++pair;
  }
}

template <int D>
void System<D>::forces(const Kinematics& kin, const VectorXd& lam, VectorXd& F,
                       VectorXd& g) const {
  assemble(kin, lam, 0.0, 0.0, 0.0, &F, &g, nullptr);
}

template <int D>
void System<D>::forces_and_matrix(const Kinematics& kin, const VectorXd& lam, double cM,
                                  double cK, double cV, VectorXd& F, VectorXd& g,
                                  NewtonLinearSolver& target) {
  ensure_pattern();
  assemble(kin, lam, cM, cK, cV, &F, &g, &target.elements);
  target.matrix_changed();
  target.coordinates = kin.q;
}

template <int D>
void System<D>::evaluate(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                         VectorXd& F, VectorXd& g) const {
  const FixPath<D> path = resting_path();
  forces(kinematics(q, v, path, state_.time), lam, F, g);
}

template <int D>
void System<D>::jacobian(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                         std::vector<Eigen::Triplet<double>>& d_qlam,
                         std::vector<Eigen::Triplet<double>>& d_v) const {
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(q, v, path, state_.time);
  const int row_lam = D * num_masses();
  // cK = -1 yields +dF/dq; the multiplier columns hold G^T = -dF/dlam.
  std::vector<Eigen::Triplet<double>> raw;
  TripletSink sink{&raw};
  ElementMatrix matrix;
  const bool definite = definite_newton_;
  definite_newton_ = false;  // the exact derivatives
  assemble(kin, lam, 0.0, -1.0, 0.0, nullptr, nullptr, &matrix);
  matrix.scatter(sink);
  d_qlam.clear();
  for (const auto& t : raw) {
    const bool flip = t.row() < row_lam && t.col() >= row_lam;
    d_qlam.emplace_back(t.row(), t.col(), flip ? -t.value() : t.value());
  }
  raw.clear();
  assemble(kin, lam, 0.0, 0.0, -1.0, nullptr, nullptr, &matrix);
  matrix.scatter(sink);
  d_v.clear();
  for (const auto& t : raw)
    if (t.row() < row_lam && t.col() < row_lam) d_v.push_back(t);
  definite_newton_ = definite;
}

// ---------------------------------------------------------------- pattern and solver

template <int D>
double System<D>::length_scale() {
  ensure_pattern();
  return length_scale_;
}

template <int D>
void System<D>::ensure_pattern() {
  if (pattern_ready_) return;
  // Length scale for the Newton tolerance: the mean element length, else the extent.
  double sum = 0;
  int count = 0;
  for (const Spring& s : springs_)
    if (s.length > 0) sum += s.length, ++count;
  for (const DistanceConstraint& c : constraints_) sum += c.length, ++count;
  if (count > 0) {
    length_scale_ = sum / count;
  } else {
    VecD lo = VecD::Constant(1e300), hi = VecD::Constant(-1e300);
    for (int i = 0; i < num_masses(); ++i) lo = lo.cwiseMin(pos(i)), hi = hi.cwiseMax(pos(i));
    for (const VecD& p : state_.fix_pos) lo = lo.cwiseMin(p), hi = hi.cwiseMax(p);
    length_scale_ = (num_masses() + num_fixes() > 1) ? (hi - lo).norm() : 0.0;
  }
  if (!(length_scale_ > 0)) length_scale_ = 1.0;
  max_stiffness_ = 0.0;
  for (const Spring& s : springs_) max_stiffness_ = std::max(max_stiffness_, s.stiffness);

  ElementMatrix pattern;
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(state_.q, state_.v, path, state_.time);
  VectorXd lam = VectorXd::Zero(static_cast<Eigen::Index>(constraints_.size()));
  assemble(kin, lam, 1.0, 1.0, 1.0, nullptr, nullptr, &pattern);
  double max_mass = 0;
  for (double m : mass_) max_mass = std::max(max_mass, m);
  // The constraint block of the scaled Newton matrix has the size of 1/mass.
  const double delta = 1e-8 / std::max(max_mass, 1e-300);
  if (!constraints_.empty()) consistency_lin_.set_pattern(pattern, delta);
  lin_.set_pattern(pattern, delta);
  lin_.use_multigrid(0);
  require(linear_solver_ != "multigrid" || constraints_.empty(),
          "linear_solver 'multigrid' cannot handle DistanceConstraints (rigid rods); use "
          "'auto' or 'direct'");
  if (constraints_.empty() &&
      (linear_solver_ == "multigrid" ||
       (linear_solver_ == "auto" && num_masses() >= kMultigridMinMasses)))
    lin_.use_multigrid(D);
  pattern_ready_ = true;
}

void NewtonLinearSolver::set_pattern(const ElementMatrix& pattern, double delta_) {
  PatternSink sink;
  pattern.scatter(sink);
  const int n = pattern.num_unknowns();
  J = SpMat(n, n);
  J.setFromTriplets(sink.entries.begin(), sink.entries.end());
  J.makeCompressed();
  const int* outer = J.outerIndexPtr();
  const int* inner = J.innerIndexPtr();
  slots_.resize(sink.entries.size());
  for (std::size_t e = 0; e < sink.entries.size(); ++e) {
    const int r = sink.entries[e].row(), c = sink.entries[e].col();
    slots_[e] = static_cast<int>(std::lower_bound(inner + outer[c], inner + outer[c + 1], r) - inner);
  }
  elements = pattern;
  matrix_stale_ = true;
  first_constraint_row = n - pattern.num_rods();
  delta = delta_;
  transpose_of.assign(J.nonZeros(), -1);
  for (int c = 0; c < n; ++c)
    for (int k = outer[c]; k < outer[c + 1]; ++k) {
      const int r = inner[k];
      const int* found = std::lower_bound(inner + outer[r], inner + outer[r + 1], c);
      transpose_of[k] = static_cast<int>(found - inner);  // pattern is structurally symmetric
    }
  constraint_diagonal_.clear();
  for (int r = first_constraint_row; r < n; ++r)
    for (int k = outer[r]; k < outer[r + 1]; ++k)
      if (inner[k] == r) constraint_diagonal_.push_back(k);
  P_ = J;
  ldlt_analyzed_ = lu_analyzed_ = have_factor_ = false;
}

void NewtonLinearSolver::sync_matrix() {
  if (!matrix_stale_) return;
  std::fill(J.valuePtr(), J.valuePtr() + J.nonZeros(), 0.0);
  ValueSink sink{J.valuePtr(), slots_.data()};
  elements.scatter(sink);
  matrix_stale_ = false;
}

bool NewtonLinearSolver::refactor() {
  sync_matrix();
  // P = (J + J^T) / 2 with -delta on the constraint diagonal: symmetric quasi-definite.
  const double* jv = J.valuePtr();
  double* pv = P_.valuePtr();
  for (Eigen::Index k = 0; k < P_.nonZeros(); ++k) pv[k] = 0.5 * (jv[k] + jv[transpose_of[k]]);
  for (int k : constraint_diagonal_) pv[k] -= delta;
  if (multigrid_dim_ > 0) {
    const auto start = std::chrono::steady_clock::now();
    const bool ok = coordinates && multigrid_.compute(P_, *coordinates, multigrid_dim_);
    factor_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++factorizations;
    solves_since_factor_ = 0;
    fresh_iterations_ = -1;
    if (ok) {
      smoother_stale_ = false;
      solves_per_factor_ = std::max(1.0, multigrid_.setup_flops() / multigrid_.cycle_flops());
      return have_factor_ = true;
    }
    ++multigrid_fallbacks;  // a singular block: LDL^T from now on
    multigrid_dim_ = 0;
  }
  if (!ldlt_analyzed_) {
    ldlt_.analyzePattern(P_);
    ldlt_analyzed_ = true;
  }
  const auto start = std::chrono::steady_clock::now();
  ldlt_.factorize(P_);
  factor_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (factorizations == 0 && ldlt_.info() == Eigen::Success) {
    // Column counts of L: factoring costs sum(c^2), one solve 4 nnz(L) flops.
    const SpMat& L = ldlt_.matrixL().nestedExpression();
    double factor_flops = 0, solve_flops = 0;
    for (Eigen::Index j = 0; j < L.outerSize(); ++j) {
      const double cj = L.outerIndexPtr()[j + 1] - L.outerIndexPtr()[j];
      factor_flops += cj * cj;
      solve_flops += 4 * cj;
    }
    solves_per_factor_ = std::max(1.0, factor_flops / std::max(solve_flops, 1.0));
  }
  solves_since_factor_ = 0;
  ++factorizations;
  have_factor_ = ldlt_.info() == Eigen::Success;
  return have_factor_;
}

bool NewtonLinearSolver::solve(const VectorXd& b, VectorXd& x, double tol,
                               const VectorXd* lam) {
  const auto start = std::chrono::steady_clock::now();
  const double factor_before = factor_seconds;
  const bool ok = solve_impl(b, x, tol, lam);
  solve_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
                   (factor_seconds - factor_before);
  return ok;
}

VectorXd NewtonLinearSolver::apply_preconditioner(const VectorXd& b) const {
  if (multigrid_dim_ == 0) return ldlt_.solve(b);
  VectorXd x;
  multigrid_.apply(b, x);
  return x;
}

bool NewtonLinearSolver::renew_smoother_if_stale() {
  if (multigrid_dim_ == 0 || !smoother_stale_) return true;
  smoother_stale_ = false;
  return multigrid_.refresh_smoother(elements) || refactor();
}

VectorXd NewtonLinearSolver::precondition(const VectorXd& b, bool rebuild) {
  if (rebuild) have_factor_ = false;
  smoother_stale_ = !rebuild;
  if (!have_factor_ && !refactor()) return VectorXd();
  if (!renew_smoother_if_stale()) return VectorXd();
  return apply_preconditioner(b);
}

bool NewtonLinearSolver::krylov_solve(const VectorXd& b, VectorXd& x, double tol) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!have_factor_ && !refactor()) return false;
    if (!renew_smoother_if_stale()) return false;
    // GMRES starts from one application of a factor, which is the answer up to O(delta)
    // when J is symmetric and the factor fresh: GMRES accepts it without iterating if it
    // meets `tol`. (Accepting 10 tol, as the BiCGSTAB version did, left Newton converging
    // linearly on a double pendulum, with step halvings down to 1e-8 s; solving further
    // than `tol` with a factor, 1e-4 or 1e-8, saved Newton iterations on the chain but
    // cost 20-120 % on 33x33 and 65x65 sheets.) A V-cycle is a weaker preconditioner and
    // costs about as much as a Newton iteration's assembly: GMRES starts from zero.
    x.setZero(b.size());
    if (multigrid_dim_ == 0) {
      x = apply_preconditioner(b);
      if (!x.allFinite()) x.setZero();
    }
    const KrylovResult krylov =
        gmres([this](const VectorXd& v) { return elements.multiply(v); },
              [this](const VectorXd& v) { return apply_preconditioner(v); }, b, x, tol,
              multigrid_dim_ > 0 ? 200 : 40);
    krylov_iterations += krylov.iterations;
    const bool ok = krylov.converged && x.allFinite();
    // A factor that needs several iterations has gone stale: refresh it once the
    // iterations spent cost as much as a refactorization. Iterations beyond the first
    // are the price of a stale factor. A multigrid hierarchy always needs iterations:
    // those beyond what its first solve needed count.
    if (fresh_iterations_ < 0) fresh_iterations_ = krylov.iterations;
    const long free_iterations = multigrid_dim_ > 0 ? fresh_iterations_ : 1;
    solves_since_factor_ += std::max<long>(krylov.iterations - free_iterations, 0);
    if (solves_since_factor_ >= solves_per_factor_ || !ok) have_factor_ = false;
    if (ok) return true;
  }
  return false;
}

bool NewtonLinearSolver::solve_impl(const VectorXd& b, VectorXd& x, double tol,
                                    const VectorXd* lam) {
  if (b.norm() == 0.0) {
    x.setZero(b.size());
    return true;
  }
  if (krylov_solve(b, x, tol)) return true;
  if (multigrid_dim_ > 0) {  // multigrid failed: LDL^T from now on
    ++multigrid_fallbacks;
    multigrid_dim_ = 0;
    have_factor_ = false;
    if (krylov_solve(b, x, tol)) return true;
  }
  if (!have_factor_ && !refactor()) return solve_lu(b, x);  // LDL^T broke down
  // J is singular (redundant rods) or too unsymmetric for the preconditioner: the
  // regularized system is the sound Newton step. Regularizing the new multipliers
  // (-delta * lam_new, not -delta * correction) keeps their part that no force sees at
  // zero; otherwise round-off in the constraint rows makes it drift without bound.
  ++regularized_solves;
  if (lam && lam->size() > 0) {
    VectorXd shifted = b;
    shifted.tail(lam->size()) -= delta * (*lam);
    x = ldlt_.solve(shifted);
  } else {
    x = ldlt_.solve(b);
  }
  return x.allFinite();
}

bool NewtonLinearSolver::solve_lu(const VectorXd& b, VectorXd& x) {
  ++lu_fallbacks;
  sync_matrix();
  if (!lu_analyzed_) {
    lu_.analyzePattern(J);
    lu_analyzed_ = true;
  }
  lu_.factorize(J);
  if (lu_.info() != Eigen::Success) return false;
  x = lu_.solve(b);
  for (int k = 0; k < 2 && x.allFinite(); ++k) x += lu_.solve(VectorXd(b - J * x));
  return x.allFinite() && (b - J * x).norm() <= 1e-8 * b.norm();
}

// ---------------------------------------------------------------- diagnostics

template <int D>
double System<D>::kinetic_energy() const {
  double e = 0;
  for (int i = 0; i < num_masses(); ++i) e += 0.5 * mass_[i] * vel(i).squaredNorm();
  return e;
}

template <int D>
double System<D>::potential_energy() const {
  double e = 0;
  for (int i = 0; i < num_masses(); ++i) e -= mass_[i] * gravity.dot(pos(i));
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(state_.q, state_.v, path, state_.time);
  for (const Spring& s : springs_) {
    const double L = (kin.pos(s.c[1]) - kin.pos(s.c[0])).norm();
    e += spring_energy(s, L - s.length);
  }
  return e;
}

template <int D>
double System<D>::max_constraint_violation() const {
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(state_.q, state_.v, path, state_.time);
  double worst = 0;
  for (const DistanceConstraint& c : constraints_)
    worst = std::max(worst, std::abs((kin.pos(c.c[1]) - kin.pos(c.c[0])).norm() - c.length));
  return worst;
}

template <int D>
double System<D>::constraint_force(int j) const {
  const DistanceConstraint& c = constraints_[j];
  auto at = [&](const Connector& k) { return k.type == MASS ? pos(k.nr) : state_.fix_pos[k.nr]; };
  return state_.lam(j) * (at(c.c[1]) - at(c.c[0])).norm() / c.length;
}

template <int D>
VectorXd System<D>::constraint_forces() const {
  VectorXd f(static_cast<Eigen::Index>(constraints_.size()));
  for (Eigen::Index j = 0; j < f.size(); ++j) f(j) = constraint_force(static_cast<int>(j));
  return f;
}

template <int D>
VectorXd System<D>::precondition(const VectorXd& b, bool rebuild) {
  require(pattern_ready_ && total_steps > 0, "precondition needs the Newton matrix of a step: "
          "simulate at least one step first");
  lin_.coordinates = &state_.q;  // the positions of the last assembly: the accepted iterate
  VectorXd x = lin_.precondition(b, rebuild);
  require(x.size() == b.size(), "the preconditioner could not be built");
  return x;
}

template class System<2>;
template class System<3>;

}  // namespace ms
