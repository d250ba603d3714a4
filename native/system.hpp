// A mass-spring system: the model (Model<D>: what the user built), its state (State<D>)
// and the simulator that advances the state (Simulator<D>: settings, caches, the time
// integrators and the linear solver). System owns the three, checks every change of the
// model or the state (add_*, set_*) and tells the simulator what it made stale
// (changed()). Where its parts live:
//   model/          topology and parameters (value types, Model<D>), the state, building
//                   from arrays
//   forces/         the force laws (pure functions) and assembly: forces, constraint
//                   values and the Newton matrix from the laws
//   contact/        colliders and the contact law, self-contact
//   time/           the simulator: the table of integrators and the time stepping
//   linear_solver/  Newton's linear solver (LDL^T, multigrid, GMRES)
//   parallel/       loops in fixed chunks on the workers, the same bits on any number
//   bindings/       the Python module
//   system.cpp      building with validation, state access
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contact/contact.hpp"
#include "contact/self_contact.hpp"
#include "forces/stencils.hpp"
#include "model/model.hpp"
#include "model/state.hpp"
#include "model/system_model.hpp"
#include "time/simulator.hpp"

namespace ms {

template <int D>
class System {
 public:
  using VecD = Vec<D>;
  using MatD = Mat<D>;

  System();
  System(const System&) = delete;
  System& operator=(const System&) = delete;
  std::uint64_t id() const { return model_.id; }

  // ---- building ----
  // The one place input is checked: each add_* validates what it adds and names the
  // offending item in its message. By default an item is named as the seed API counts it
  // ("Mass 3", "Spring 5"); a builder from arrays passes `name` (item k of the call ->
  // "vertex 7", "spring 5 (vertices [2, 9])"). Callers above (the bindings, from_arrays,
  // the add-on) convert shapes and types, not values.
  using Names = std::function<std::string(std::size_t)>;
  Connector add_mass(double mass, const VecD& pos, const VecD& vel);
  // Bulk versions for big meshes: validate and grow the state once.
  void add_masses(const std::vector<double>& mass, const std::vector<VecD>& pos,
                  const std::vector<VecD>& vel, const Names& name = {});
  void add_constraints(const std::vector<DistanceConstraint>& cs, const Names& name = {});
  Connector add_fix(const VecD& pos, const Names& name = {});
  int add_spring(const Spring& s, const Names& name = {});
  int add_constraint(const DistanceConstraint& c);
  // An element of a law on k vertices (forces/stencils.hpp), e.g. WireBending; returns
  // its number among that law's elements.
  template <class Law>
  int add_stencil(const Law& law, const std::array<Connector, Law::K>& ends);
  // Many elements of one law at once (a mesh's hinges): validated together, then added.
  // A law's rest shape not given (e.g. a NaN rest angle) is where its vertices are now.
  template <class Law>
  void add_stencils(std::vector<Law> laws, const std::vector<std::array<Connector, Law::K>>& ends);
  // Where connector c is now (a fix: where it is at time()).
  VecD connector_pos(const Connector& c) const { return c.type == MASS ? pos(c.nr) : state_.fix_pos[c.nr]; }
  const Stencils& stencils() const { return model_.stencils; }
  // What the user built, read-only: changes go through add_* and set_*.
  const Model<D>& model() const { return model_; }

  int num_masses() const { return model_.num_masses(); }
  int num_fixes() const { return model_.num_fixes(); }
  const std::vector<Spring>& springs() const { return model_.springs; }
  const std::vector<DistanceConstraint>& constraints() const { return model_.constraints; }

  // ---- model parameters ----
  const VecD& gravity() const { return model_.gravity; }
  void set_gravity(const VecD& g);
  double mass(int i) const { return model_.mass[i]; }
  void set_mass(int i, double m);
  VecD fix_pos(int k) const { return model_.fix_target[k]; }
  void set_fix_pos(int k, const VecD& p);

  // ---- colliders (3-D systems only; contact.hpp) ----
  // Triangles the masses cannot pass and rest on, with per-triangle thickness and
  // friction. Set again with the same triangles, the colliders move from where they are to
  // the new positions during the next simulate() call.
  void set_colliders(const std::vector<Vec3>& vertices,
                     const std::vector<std::array<int, 3>>& triangles,
                     const std::vector<double>& thickness, const std::vector<double>& friction);
  const Colliders& colliders() const { return model_.colliders; }
  // A structure modelled within a collider's thickness (masses more than 1 % of it deep),
  // which the penalty would throw out, moved to just beyond it
  // (test_core_contact.py, test_a_mass_modelled_within_the_thickness_starts_on_it): each
  // group of pieces (masses joined by springs or rods) near enough to meet moves by one
  // translation, so that layers keep their order, rods their length and objects their
  // places; only where every such mass of the group leaves within kOneWay of one direction
  // (a floor, a table top: not a ball), no pin holds a piece of it, and the way is free (no
  // collider reaching into what it sweeps, crossed or entered). Velocities are kept.
  // Returns the masses that lay within a thickness and were moved.
  std::vector<int> move_out_of_colliders();
  static constexpr double kOneWay = 0.985;  // cos 10 degrees

  // ---- self-collision (3-D systems only; contact/self_contact.hpp) ----
  // Parts of the structure that share no vertex keep `distance` (m) apart: triangles and
  // edges as vertex indices (vertex()), with friction among them; distance 0 turns it
  // off. Distance and friction: one value, or one per vertex (a pair keeps the largest of
  // its vertices': SelfContact::set). InputError if two such parts are closer than their
  // distance now (the mesh could not rest as built), naming them.
  void set_self_contact(const std::vector<std::array<int, 3>>& triangles,
                        const std::vector<std::array<int, 2>>& edges, std::vector<double> distance,
                        std::vector<double> friction);
  const SelfContact& self_contact() const { return model_.self_contact; }

  // ---- state ----
  const State<D>& state() const { return state_; }
  // The state as a restart point: also restarts the hidden inputs of a step (the linear
  // solvers' factor reuse; under error control the step size carried between calls), so
  // that continuing from a checkpoint equals continuing from
  // its restore into any identical system (test_core_state.py). It is a command, not a
  // read: state() and every other read leave the run untouched (test_core_reads.py).
  const State<D>& checkpoint() {
    changed(kRestart);
    return state_;
  }
  void set_state(const State<D>& s);
  VecD pos(int i) const { return state_.q.template segment<D>(D * i); }
  VecD vel(int i) const { return state_.v.template segment<D>(D * i); }
  void set_pos(int i, const VecD& p);
  void set_vel(int i, const VecD& v);
  double time() const { return state_.time; }

  // ---- simulation ----
  // Its settings, statistics and diagnostics that need the solver (time/simulator.hpp).
  Simulator<D>& simulator() { return sim_; }
  const Simulator<D>& simulator() const { return sim_; }
  // Advances the state by `tend` seconds in `steps` equal steps (Simulator::simulate).
  void simulate(double tend, int steps, std::function<bool()> interrupted = {}) {
    sim_.simulate(tend, steps, std::move(interrupted));
  }

  // ---- diagnostics ----
  double kinetic_energy() const { return sim_.kinetic_energy(); }
  double potential_energy() const { return sim_.potential_energy(); }
  double total_energy() const { return sim_.total_energy(); }
  double max_constraint_violation() const;  // | |p_b - p_a| - L0 |, length units

  // ---- vertices ----
  // Vertex order: as built from arrays (build.hpp), else all masses, then all fixes.
  int num_vertices() const { return model_.num_vertices(); }
  Connector vertex(int i) const { return model_.vertex(i); }
  // The connector each vertex became, set once by build_from_arrays (empty otherwise).
  void set_vertices(std::vector<Connector> vertices) { model_.vertices = std::move(vertices); }
  const std::vector<Connector>& vertices_from_arrays() const { return model_.vertices; }
  // Where vertex i is now (a fix: where it is at time(), not its target).
  VecD vertex_pos(int i) const { return connector_pos(vertex(i)); }

  // Dimension of the unknown vector (D * masses + constraints).
  int num_unknowns() const { return model_.num_unknowns(); }

 private:
  // What a change of the model or the state makes stale (Change bits): the state's
  // consistency here, the simulator's caches there.
  void changed(unsigned what);
  void require_idle(const char* change) const { sim_.require_idle(change); }
  void check_connector(const Connector& c, const std::function<std::string()>& item) const;
  // Each mass's piece (the masses joined to it by springs or rods), numbered by one of its
  // masses; `pinned[piece]`: whether a pin holds it.
  std::vector<int> pieces(std::vector<bool>& pinned) const;
  // One group of pieces out of the colliders by one translation, if it can leave as one
  // (move_out_of_colliders): `out`, each mass's way out; `stuck`, none found.
  bool move_group_out(const std::vector<int>& masses, const std::vector<Vec3>& out, const std::vector<bool>& stuck,
                      const std::vector<bool>& pinned, const std::vector<int>& piece);
  // Mass i's way out of the colliders were it at `at` (Colliders::way_out; none in 2-D).
  bool way_out(int i, const Vec3& at, Vec3& move) const;
  // Where every vertex is now, in 3-D (self-contact's parts).
  std::vector<Vec3> vertex_points() const;

  Model<D> model_;  // what the user built (model/system_model.hpp)
  State<D> state_;
  Simulator<D> sim_{model_, model_.colliders, state_};
};

}  // namespace ms
