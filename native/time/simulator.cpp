// Simulator<D>: what a change makes stale, the settings, and the diagnostics that need the
// solver (assembly is in forces/assembly.cpp, the steps in time/integrators.cpp).
#include "time/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "forces/laws.hpp"

namespace ms {

namespace {

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw InputError(message);
}

}  // namespace

template <int D>
void Simulator<D>::require_idle(const char* change) const {
  if (busy_.load())
    throw SimulationError(std::string("cannot ") + change + " while simulate() runs on this "
                          "system in another thread");
}

// Every cache of the simulator and what makes it stale. A new cache gets its line here
// (tests/test_core_state.py and test_core_reads.py check that changes take effect and
// reads change nothing), unless it checks its own key at every use: the contacts found
// (touches_found_at_: positions, velocities, instant, colliders' version) and each mass's
// candidate triangles (near_triangles_: the colliders' box tree and the mass count).
template <int D>
void Simulator<D>::changed(unsigned what) {
  auto any = [what](unsigned of) { return (what & of) != 0; };
  // The pattern of the Newton matrix, the length and error scales, the solvers' setup.
  if (any(kTopology | kMasses | kSolverChoice)) pattern_ready_ = false;
  // The energy error control may not climb above.
  if (any(kTopology | kMasses | kColliders | kSelfContact | kRestore))
    energy_ceiling_ = std::numeric_limits<double>::quiet_NaN();
  // Newton's starting guess, learnt from the last steps.
  if (any(kTopology | kMasses | kPositions | kVelocities | kRestart | kRestore)) predictor_.forget();
  // The positions the rods were checked at no longer describe the system.
  if (any(kTopology)) rods_checked_q_.resize(0);
  // Rods and positions are checked against each other by the next simulate().
  if (any(kRods | kPositions | kRestore)) rods_unchecked_ = true;
  // The self-contact pairs listed for the last step, and the stiffness they carry on.
  if (any(kTopology | kMasses | kPositions | kVelocities | kRestart | kRestore | kSelfContact)) {
    // Their energy leaves the energy the steps are tested with: a ceiling that held it
    // would take it in again when they are listed anew (Simulator::list_pairs).
    if (!self_pairs_.empty()) energy_ceiling_ = std::numeric_limits<double>::quiet_NaN();
    self_pairs_.clear();
    self_touching_ = false;
    self_margins_.clear();
    self_window_ = SelfWindow();
    self_listing_positions_.clear();
  }
  // The masses known to touch a collider at the last step (Newton's guess for the others).
  if (any(kTopology | kMasses | kPositions | kVelocities | kRestart | kRestore)) touched_.clear();
  // The linear solvers' reused factors and error control's carried step size.
  if (any(kRestart | kRestore)) {
    lin_.restart();
    consistency_lin_.restart();
    step_proposal_ = 0.0;
  }
}

template <int D>
void Simulator<D>::set_rho_inf(double r) {
  require(r >= 0 && r <= 1, "rho_inf must lie in [0, 1], got " + fmt(r));
  rho_inf = r;
}

template <int D>
void Simulator<D>::set_newton_tol(double t) {
  require(t > 0 && t < 1, "newton_tol must lie in (0, 1), got " + fmt(t));
  newton_tol = t;
}

template <int D>
void Simulator<D>::set_max_newton_iterations(int n) {
  require(n >= 1, "max_newton_iterations must be >= 1, got " + std::to_string(n));
  max_newton_iterations = n;
}

// Below 1e-9 of an edge the error estimate is round-off: steps would shrink without end
// (found by tests/fuzz_bake.py: a bake that never finished).
template <int D>
void Simulator<D>::set_tolerance(double t) {
  require(std::isfinite(t) && t >= 0 && t < 1, "tolerance must lie in [0, 1) (0: fixed steps), got " + fmt(t));
  require(t == 0 || t >= 1e-9, "tolerance must be 0 (fixed steps) or at least 1e-9, got " + fmt(t));
  if ((t > 0) != (tolerance > 0)) changed(kSolverChoice);
  tolerance = t;
}

// Each halving recurses once and halves h: beyond 60 the step is below a double's
// resolution of any time, and deep recursion would exhaust the stack.
template <int D>
void Simulator<D>::set_max_halvings(int n) {
  require(n >= 0 && n <= 60, "max_halvings must lie in [0, 60], got " + std::to_string(n));
  max_halvings = n;
}

template <int D>
void Simulator<D>::set_linear_solver(const std::string& name) {
  require(name == "auto" || name == "direct" || name == "multigrid",
          "linear_solver must be 'auto', 'direct' or 'multigrid', got '" + name + "'");
  linear_solver_ = name;
  changed(kSolverChoice);
}

template <int D>
typename Simulator<D>::Kinematics Simulator<D>::kinematics(const VectorXd& q, const VectorXd& v,
                                                     const FixPath<D>& path, double t) const {
  Kinematics k{&q, &v, {}, {}, t};
  k.fix_pos.resize(num_fixes());
  k.fix_vel.resize(num_fixes());
  for (int j = 0; j < num_fixes(); ++j) {
    k.fix_pos[j] = path.pos(j, t);
    k.fix_vel[j] = path.vel(j);
  }
  return k;
}

template <int D>
FixPath<D> Simulator<D>::resting_path() const {
  FixPath<D> p;
  p.start = &state_.fix_pos;
  p.target = &state_.fix_pos;
  p.moving = false;
  return p;
}

template <int D>
double Simulator<D>::kinetic_energy() const {
  return kinetic_energy(state_.v);
}

template <int D>
double Simulator<D>::kinetic_energy(const VectorXd& v) const {
  double e = 0;
  for (int i = 0; i < num_masses(); ++i) e += 0.5 * model_.mass[i] * v.template segment<D>(D * i).squaredNorm();
  return e;
}

// ---------------------------------------------------------------- colliders

template <int D>
double Simulator<D>::potential_energy() const {
  const FixPath<D> path = resting_path();
  return potential_energy(kinematics(state_.q, state_.v, path, state_.time));
}

template <int D>
double Simulator<D>::potential_energy(const Kinematics& kin) const {
  double e = 0;
  for (int i = 0; i < num_masses(); ++i) e -= model_.mass[i] * model_.gravity.dot(kin.q->template segment<D>(D * i));
  e += elements_energy(kin);
  e += self_contact_energy(kin);
  if (!model_.colliders.empty())
    for (const Touches& touching : touches(kin, false))
      for (const ContactForce& f : touching.force) e += f.energy;
  return e;
}

template <int D>
std::vector<Vec3> Simulator<D>::vertex_points(const Kinematics& kin) const {
  std::vector<Vec3> x(num_vertices(), Vec3::Zero());
  for (int i = 0; i < num_vertices(); ++i) x[i].template head<D>() = kin.pos(vertex(i));
  return x;
}

template <int D>
ContactForce Simulator<D>::contact_at(const Kinematics& kin, int i, const ContactPoint* first,
                                   const ContactPoint* last, bool definite, std::vector<ContactState>* states,
                                   bool derivatives) const {
  ContactForce sum;
  if constexpr (D == 3) {
    const Vec3 v = kin.v->template segment<3>(3 * i);
    const double g_ref = contact_gravity();
    for (const ContactPoint* point = first; point != last; ++point) {
      ContactPoint c = *point;
      // The Newton matrix leaves out the softening of a curved (edge, corner) contact, as
      // it leaves out that of compressed springs (and see contact_force).
      if (definite) c.curvature.setZero();
      if (states)
        states->push_back({i, c.normal, c.surface_velocity, c.thickness - c.distance, contact_ramp(c.thickness),
                           c.friction > 0});
      // Its speed toward or along the collider where the step started (the state: a
      // constant within the step, so the derivatives stay exact; Kinematics::penalty_v).
      const VectorXd& start_v = kin.penalty_v ? *kin.penalty_v : state_.v;
      const double speed = (start_v.template segment<3>(3 * i) - c.surface_velocity).norm();
      const double k = contact_stiffness(model_.mass[i], g_ref, c.thickness, model_.spring_stiffness_at[i], speed);
      const ContactForce f = contact_force(c, model_.mass[i], k, v, g_ref, definite, derivatives);
      sum.f += f.f;
      sum.A += f.A;
      sum.B += f.B;
      sum.energy += f.energy;
    }
  }
  return sum;
}

template <int D>
void Simulator<D>::limit_contact_corrections(const VectorXd& acc_before, double bq,
                                          const VectorXd& v_before, const VectorXd& v_pred,
                                          double bv, VectorXd& acc) const {
  if constexpr (D == 3) {
    const double eps = friction_speed(contact_gravity());
    for (const ContactState& c : contacts_) {
      auto a = acc.template segment<3>(3 * c.mass);
      // Out of a deep contact: to the middle of the smooth band instead.
      const double rise = bq * c.normal.dot(a - acc_before.template segment<3>(3 * c.mass));
      if (c.penetration > c.ramp && c.penetration - rise < 0)
        a -= c.normal * ((rise - (c.penetration - 0.5 * c.ramp)) / bq);
      if (!c.friction) continue;
      const Mat3 P = Mat3::Identity() - c.normal * c.normal.transpose();
      const Vec3 before = P * (v_before.template segment<3>(3 * c.mass) - c.surface_velocity);
      const Vec3 after = P * (v_pred.template segment<3>(3 * c.mass) + bv * a - c.surface_velocity);
      if (before.norm() > eps && before.dot(after) < 0) a -= after / bv;
    }
  }
}

template <int D>
void Simulator<D>::guess_arrivals(const VectorXd& q_start, const NewmarkStep& step, double t1, VectorXd& acc) const {
  if constexpr (D == 3) {
    if (model_.colliders.empty()) return;
    const bool known = static_cast<int>(touched_.size()) == num_masses();
    in_contact_chunks([&](int, int first, int last) {
      for (int i = first; i < last; ++i) {
        if (known && touched_[i]) continue;
        auto a = acc.template segment<3>(3 * i);
        const Vec3 q1 = step.q_pred.template segment<3>(3 * i) + step.bq * a;
        const Vec3 v1 = step.v_pred.template segment<3>(3 * i) + step.bv * a;
        const ContactPoint c = model_.colliders.nearest(q1, t1, v1);
        if (!c.touching) continue;
        const double depth = c.thickness - c.distance, ramp = contact_ramp(c.thickness);
        // Out toward where the mass comes from only (not through a thin collider it will
        // be found crossing).
        if (depth > ramp && c.normal.dot(q_start.template segment<3>(3 * i) - q1) > 0)
          a += c.normal * ((depth - ramp) / step.bq);
      }
    });
  }
}

template <int D>
VectorXd Simulator<D>::contact_forces() const {
  VectorXd f = VectorXd::Zero(D * num_masses());
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(state_.q, state_.v, path, state_.time);
  if (!model_.colliders.empty())
    for (const Touches& touching : touches(kin, false))
      for (std::size_t k = 0; k < touching.mass.size(); ++k)
        f.template segment<D>(D * touching.mass[k]) = touching.force[k].f.template head<D>();
  return f;
}

// A rod that starts longer or shorter than the distance of its ends would be snapped to
// its length in the first step, throwing its masses at hundreds of m/s: refuse it. The
// allowance (0.1 % of the length) passes what a solved step leaves, so a checkpoint
// restores (test_a_rod_that_contradicts_the_positions_is_refused).
template <int D>
void Simulator<D>::require_rods_fit_positions() {
  if (!rods_unchecked_) return;
  const Kinematics kin = kinematics(state_.q, state_.v, resting_path(), state_.time);
  for (std::size_t j = 0; j < model_.constraints.size(); ++j) {
    const DistanceConstraint& c = model_.constraints[j];
    const double apart = (kin.pos(c.c[1]) - kin.pos(c.c[0])).norm();
    if (std::abs(apart - c.length) > 1e-3 * c.length)
      throw InputError("DistanceConstraint " + std::to_string(j) + " (" + model_.connector_name(c.c[0]) +
                       " - " + model_.connector_name(c.c[1]) + ") has length " + fmt(c.length) +
                       " but its ends are " + fmt(apart) + " apart at t=" + fmt(state_.time) +
                       ": a rod cannot start stretched or compressed (the first step would "
                       "snap its ends together). Give it the distance of its ends as its "
                       "length, or move them to its length");
  }
  rods_checked_q_ = state_.q;
  rods_checked_fix_pos_ = state_.fix_pos;
  rods_unchecked_ = false;
}

template <int D>
double Simulator<D>::constraint_force(int j) {
  require(j >= 0 && j < static_cast<int>(model_.constraints.size()), "no rod with index " + std::to_string(j));
  return constraint_forces()(j);
}

template <int D>
VectorXd Simulator<D>::constraint_forces() {
  // The multipliers are the state's once a step has made it consistent. Before that (a new
  // system, or set_state without consistent multipliers) they are solved for at this
  // instant, fixes at rest, without changing the state: a rod holding a weight reads the
  // weight before the first step, not 0 (test_rod_forces_are_known_before_the_first_step).
  VectorXd lam = state_.lam;
  if (!state_.consistent && !model_.constraints.empty() && num_masses() > 0) {
    require_idle("reading rod forces");
    ensure_pattern();
    VectorXd acc;
    consistent_acceleration(state_.q, state_.v, state_.time, resting_path(), acc, lam);
  }
  auto at = [&](const Connector& k) { return k.type == MASS ? pos(k.nr) : state_.fix_pos[k.nr]; };
  VectorXd f(static_cast<Eigen::Index>(model_.constraints.size()));
  for (Eigen::Index j = 0; j < f.size(); ++j) {
    const DistanceConstraint& c = model_.constraints[static_cast<size_t>(j)];
    f(j) = lam(j) * (at(c.c[1]) - at(c.c[0])).norm() / c.length;  // lam scaled by |d|/L0
  }
  return f;
}

template <int D>
VectorXd Simulator<D>::precondition(const VectorXd& b, bool rebuild, bool keep_aggregates) {
  require(pattern_ready_ && total_steps > 0, "precondition needs the Newton matrix of a step: "
          "simulate at least one step first");
  VectorXd x = lin_.precondition(b, rebuild, keep_aggregates);
  require(x.size() == b.size(), "the preconditioner could not be built");
  return x;
}

template class Simulator<2>;
template class Simulator<3>;

}  // namespace ms
