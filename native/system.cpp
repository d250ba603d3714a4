// System<D>: building with validation, and state access.
#include <cstdio>
#include "system.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "forces/laws.hpp"

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

// The diagonal of the box around the points.
double extent_of(const std::vector<Vec3>& x, const std::vector<int>& points) {
  Eigen::AlignedBox3d box;
  box.setEmpty();
  for (int v : points) box.extend(x[v]);
  return points.empty() ? 0.0 : box.diagonal().norm();
}

// The median length of the edges (0: none).
double median_edge(const std::vector<Vec3>& x, const std::vector<std::array<int, 2>>& edges) {
  std::vector<double> lengths;
  for (const auto& e : edges) lengths.push_back((x[e[1]] - x[e[0]]).norm());
  if (lengths.empty()) return 0.0;
  std::nth_element(lengths.begin(), lengths.begin() + lengths.size() / 2, lengths.end());
  return lengths[lengths.size() / 2];
}

// Sets of items joined pairwise (union-find with path halving): the pieces of a structure,
// the groups of pieces (System::move_out_of_colliders).
struct DisjointSets {
  std::vector<int> parent;
  explicit DisjointSets(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

// The least positive distance of the points that collide (inf: none).
double least_distance(const SelfContact& contact, const std::vector<double>& distance) {
  double least = std::numeric_limits<double>::infinity();
  for (int v : contact.points())
    if (distance[v] > 0) least = std::min(least, distance[v]);
  return least;
}

// An error message: a string, or a function that makes one. Why a function: every mass
// and spring is checked, and formatting their messages up front made a 129x129 sheet's
// build take 0.13 s instead of a few milliseconds.
template <class Message>
std::string text_of(const Message& message) {
  if constexpr (std::is_invocable_v<const Message&>)
    return message();
  else
    return std::string(message);
}

template <class Message>
void require(bool ok, const Message& message) {
  if (!ok) throw InputError(text_of(message));
}

// Coordinates, lengths and speeds beyond 1e9 (metres, m/s) are refused: no scene is that
// big, and at that size the solver's round-off exceeds any useful tolerance (a coordinate
// of 1e15 left rods metres off; tests/test_core_input.py).
constexpr double kMaxMagnitude = 1e9;

template <class V, class Message>
void require_magnitude(const V& v, const Message& what) {
  require(v.allFinite(), [&] { return text_of(what) + " contains NaN or Inf"; });
  require(v.cwiseAbs().maxCoeff() <= kMaxMagnitude, [&] {
    return text_of(what) + " beyond " + fmt(kMaxMagnitude) + " (got " + fmt(v.cwiseAbs().maxCoeff()) +
           "): use metres and seconds, or scale the scene down";
  });
}

}  // namespace

// ---------------------------------------------------------------- building

template <int D>
System<D>::System() {
  model_.id = next_system_id++;
  state_.q.resize(0);
  state_.v.resize(0);
  state_.acc.resize(0);
  state_.aux.resize(0);
  state_.lam.resize(0);
}

// What a change of the model or the state makes stale: the state's accelerations here,
// every cache in the simulator (Simulator::changed). A new way to change the system names
// what it changes (tests/test_core_state.py and test_core_reads.py check that changes take
// effect and reads change nothing).
template <int D>
void System<D>::changed(unsigned what) {
  // acc and lam solve the equations at the current state.
  if (what & (kTopology | kMasses | kPositions | kVelocities)) state_.consistent = false;
  sim_.changed(what);
}

template <int D>
Connector System<D>::add_mass(double mass, const VecD& pos, const VecD& vel) {
  add_masses({mass}, {pos}, {vel});
  return Connector{MASS, num_masses() - 1, model_.id};
}

template <int D>
void System<D>::add_masses(const std::vector<double>& mass, const std::vector<VecD>& pos,
                           const std::vector<VecD>& vel, const Names& name) {
  sim_.require_idle("add masses");
  const int n0 = num_masses(), count = static_cast<int>(mass.size());
  // Vertices are numbered masses then fixes: new masses would renumber the fixes the
  // self-contact's triangles and edges name (test_masses_added_after_self_contact_are_refused).
  require(count == 0 || num_fixes() == 0 || !model_.vertices.empty() || !model_.self_contact.enabled(),
          "add masses before set_self_contact: they would renumber the fixes its triangles and edges name "
          "(vertices are numbered masses, then fixes). Call set_self_contact([], [], 0) first and set it "
          "again after adding them");
  for (int k = 0; k < count; ++k) {
    auto item = [&] { return name ? name(k) : "Mass " + std::to_string(n0 + k); };
    require(std::isfinite(mass[k]) && mass[k] > 0, [&] {
      return item() + ": mass must be positive, got " + fmt(mass[k]) +
             " (give every vertex that is not pinned a mass)";
    });
    require_magnitude(pos[k], [&] { return item() + ": position"; });
    require_magnitude(vel[k], [&] { return item() + ": velocity"; });
  }
  const int n = D * (n0 + count);
  state_.q.conservativeResize(n);
  state_.v.conservativeResize(n);
  state_.acc.conservativeResize(n);
  state_.aux.conservativeResize(n);
  model_.spring_stiffness_at.resize(n0 + count, 0.0);
  for (int k = 0; k < count; ++k) {
    model_.mass.push_back(mass[k]);
    state_.q.template segment<D>(D * (n0 + k)) = pos[k];
    state_.v.template segment<D>(D * (n0 + k)) = vel[k];
    state_.acc.template segment<D>(D * (n0 + k)).setZero();
    state_.aux.template segment<D>(D * (n0 + k)).setZero();
    model_.extend_built_box(pos[k]);
    // A system built from arrays numbers its vertices in array order: masses added later
    // are the next vertices (tests/test_core_arrays.py).
    if (!model_.vertices.empty()) model_.vertices.push_back(Connector{MASS, n0 + k, model_.id});
  }
  changed(kTopology);
}

template <int D>
Connector System<D>::add_fix(const VecD& pos, const Names& name) {
  sim_.require_idle("add a fix");
  const std::string item = name ? name(0) : "Fix " + std::to_string(num_fixes());
  require_magnitude(pos, item + ": position");
  model_.fix_target.push_back(pos);
  state_.fix_pos.push_back(pos);
  model_.extend_built_box(pos);
  if (!model_.vertices.empty()) model_.vertices.push_back(Connector{FIX, num_fixes() - 1, model_.id});
  changed(kTopology);
  return Connector{FIX, num_fixes() - 1, model_.id};
}

template <int D>
void System<D>::check_connector(const Connector& c, const std::function<std::string()>& item) const {
  require(c.owner == 0 || c.owner == model_.id,
          [&] { return item() + ": connector belongs to another MassSpringSystem"; });
  require(c.type == MASS || c.type == FIX, [&] {
    return item() + ": connector type must be FIX (1) or MASS (2), got " + std::to_string(c.type);
  });
  const int count = c.type == MASS ? num_masses() : num_fixes();
  require(c.nr >= 0 && c.nr < count, [&] {
    return item() + ": connector " + (c.type == MASS ? "MASS " : "FIX ") + std::to_string(c.nr) +
           " is out of range (the system has " + std::to_string(count) +
           (c.type == MASS ? " masses)" : " fixes)");
  });
}

template <int D>
int System<D>::add_spring(const Spring& s, const Names& name) {
  sim_.require_idle("add a spring");
  const std::function<std::string()> item = [&] {
    return name ? name(0) : std::string(s.rope ? "Chain " : "Spring ") + std::to_string(model_.springs.size());
  };
  require(std::isfinite(s.length) && s.length >= 0 && s.length <= kMaxMagnitude, [&] {
    return item() + ": length must be >= 0 and at most " + fmt(kMaxMagnitude) + ", got " + fmt(s.length);
  });
  require(std::isfinite(s.stiffness) && s.stiffness >= 0,
          [&] { return item() + ": stiffness must be >= 0, got " + fmt(s.stiffness); });
  require(std::isfinite(s.damping) && s.damping >= 0,
          [&] { return item() + ": damping must be >= 0, got " + fmt(s.damping); });
  check_connector(s.c[0], item);
  check_connector(s.c[1], item);
  require(!(s.c[0].type == s.c[1].type && s.c[0].nr == s.c[1].nr),
          [&] { return item() + ": both ends are the same connector"; });
  model_.springs.push_back(s);
  for (const Connector& end : s.c)
    if (end.type == MASS) model_.spring_stiffness_at[end.nr] += s.stiffness;
  changed(kTopology);
  return static_cast<int>(model_.springs.size()) - 1;
}

template <int D>
template <class Law>
int System<D>::add_stencil(const Law& law, const std::array<Connector, Law::K>& ends) {
  add_stencils<Law>({law}, {ends});
  return static_cast<int>(std::get<StencilSet<Law>>(model_.stencils).size()) - 1;
}

template <int D>
template <class Law>
void System<D>::add_stencils(std::vector<Law> laws, const std::vector<std::array<Connector, Law::K>>& ends) {
  sim_.require_idle("add a force element");
  auto& set = std::get<StencilSet<Law>>(model_.stencils);
  require(laws.size() == ends.size(), [] { return std::string("add_stencils: one element per law"); });
  for (std::size_t k = 0; k < laws.size(); ++k) {
    const std::function<std::string()> item = [&] {
      return std::string(Law::kName) + " " + std::to_string(set.size() + k);
    };
    require(D >= Law::kMinDimension, [&] {
      return item() + ": a " + Law::kName + " needs " + std::to_string(Law::kMinDimension) +
             "-D positions (this system is " + std::to_string(D) + "-D)";
    });
    for (const Connector& c : ends[k]) check_connector(c, item);
    for (int i = 0; i < Law::K; ++i)
      for (int j = i + 1; j < Law::K; ++j)
        require(ends[k][i].type != ends[k][j].type || ends[k][i].nr != ends[k][j].nr,
                [&] { return item() + ": the same connector twice (" + model_.connector_name(ends[k][i]) + ")"; });
    std::array<VecD, Law::K> x;
    for (int i = 0; i < Law::K; ++i) x[i] = connector_pos(ends[k][i]);
    const char* refused = laws[k].take_rest_shape(x);
    require(refused == nullptr, [&] { return item() + ": " + refused; });
    laws[k].validate(item);
  }
  set.laws.insert(set.laws.end(), laws.begin(), laws.end());
  set.ends.insert(set.ends.end(), ends.begin(), ends.end());
  changed(kTopology);
}

template <int D>
int System<D>::add_constraint(const DistanceConstraint& c) {
  add_constraints({c});
  return static_cast<int>(model_.constraints.size()) - 1;
}

template <int D>
void System<D>::add_constraints(const std::vector<DistanceConstraint>& cs, const Names& name) {
  sim_.require_idle("add constraints");
  const std::size_t n0 = model_.constraints.size();
  for (std::size_t k = 0; k < cs.size(); ++k) {
    const DistanceConstraint& c = cs[k];
    const std::function<std::string()> item = [&] {
      return name ? name(k) : "DistanceConstraint " + std::to_string(n0 + k);
    };
    require(std::isfinite(c.length) && c.length > 0 && c.length <= kMaxMagnitude, [&] {
      return item() + ": length must be positive and at most " + fmt(kMaxMagnitude) + ", got " + fmt(c.length);
    });
    check_connector(c.c[0], item);
    check_connector(c.c[1], item);
    require(!(c.c[0].type == FIX && c.c[1].type == FIX),
            [&] { return item() + ": both ends are fixes; a constraint needs at least one mass"; });
    require(!(c.c[0].type == c.c[1].type && c.c[0].nr == c.c[1].nr),
            [&] { return item() + ": both ends are the same connector"; });
  }
  model_.constraints.insert(model_.constraints.end(), cs.begin(), cs.end());
  const auto n = static_cast<Eigen::Index>(model_.constraints.size());
  state_.lam.conservativeResize(n);
  state_.lam.tail(n - static_cast<Eigen::Index>(n0)).setZero();
  changed(kTopology | kRods);
}

// Gravity beyond 1e6 m/s^2 (1e5 g) is no scene's: a step's round-off would swamp any motion.
template <int D>
void System<D>::set_gravity(const VecD& g) {
  sim_.require_idle("change gravity");
  require(g.allFinite(), "gravity contains NaN or Inf");
  require(g.norm() <= 1e6, [&] {
    return "gravity beyond 1e6 m/s^2 (got " + fmt(g.norm()) + "): use metres and seconds";
  });
  model_.gravity = g;
}

template <int D>
void System<D>::set_mass(int i, double m) {
  sim_.require_idle("change a mass");
  require(std::isfinite(m) && m > 0,
          "Mass " + std::to_string(i) + ": mass must be positive, got " + fmt(m));
  model_.mass[i] = m;
  changed(kMasses);  // the energy, the length scale and the regularization depend on masses
}

template <int D>
void System<D>::set_fix_pos(int k, const VecD& p) {
  sim_.require_idle("move a fix");
  require_magnitude(p, "Fix " + std::to_string(k) + ": position");
  // The fix moves there linearly during the next simulate() call, the first one included:
  // an anchor moved before the first call drags its rods from where they fit
  // (test_moving_fix_is_interpolated_over_the_call, test_animated_pin_drags_a_rod_smoothly).
  model_.fix_target[k] = p;
}

template <int D>
void System<D>::set_pos(int i, const VecD& p) {
  require_magnitude(p, "Mass " + std::to_string(i) + ": position");
  state_.q.template segment<D>(D * i) = p;
  changed(kPositions);
}

template <int D>
void System<D>::set_vel(int i, const VecD& v) {
  require_magnitude(v, "Mass " + std::to_string(i) + ": velocity");
  state_.v.template segment<D>(D * i) = v;
  changed(kVelocities);
}

template <int D>
void System<D>::set_state(const State<D>& s) {
  sim_.require_idle("set its state");
  const int n = D * num_masses();
  require(s.q.size() == n && s.v.size() == n && s.acc.size() == n && s.aux.size() == n,
          "state: position/velocity/acceleration arrays must have " + std::to_string(n) +
              " entries for this system");
  require(s.lam.size() == static_cast<Eigen::Index>(model_.constraints.size()),
          "state: multiplier array must have " + std::to_string(model_.constraints.size()) +
              " entries");
  require(static_cast<int>(s.fix_pos.size()) == num_fixes(),
          "state: fix positions must have " + std::to_string(num_fixes()) + " rows");
  require(std::isfinite(s.time) && all_finite(s.q) && all_finite(s.v) && all_finite(s.acc) &&
              all_finite(s.aux) && all_finite(s.lam),
          "state: contains NaN or Inf");
  state_ = s;
  model_.fix_target = s.fix_pos;
  changed(kRestore);  // error control starts afresh from a restored state
}

// ---------------------------------------------------------------- diagnostics

template <int D>
void System<D>::set_colliders(const std::vector<Vec3>& vertices,
                              const std::vector<std::array<int, 3>>& triangles,
                              const std::vector<double>& thickness,
                              const std::vector<double>& friction) {
  sim_.require_idle("set colliders");
  require(D == 3 || triangles.empty(),
          "colliders are triangles in 3-D; this is a 2-D system (MassSpringSystem3d has them)");
  model_.colliders.set(vertices, triangles, thickness, friction);
  changed(kColliders);  // the energy at stake changed
}

template <int D>
std::vector<int> System<D>::move_out_of_colliders() {
  sim_.require_idle("move masses out of its colliders");
  std::vector<int> moved;
  if constexpr (D == 3) {
    const Colliders& colliders = model_.colliders;
    if (colliders.empty()) return moved;
    const int n = num_masses();
    std::vector<Vec3> out(n);
    std::vector<bool> stuck(n);
    for (int i = 0; i < n; ++i) stuck[i] = !way_out(i, pos(i), out[i]);
    // Pieces (masses joined by springs or rods) near enough to meet when one moves out
    // decide together, as a group; groups farther apart move or stay each on its own
    // (test_groups_far_apart_move_out_on_their_own).
    std::vector<bool> pinned;
    const std::vector<int> piece = pieces(pinned);
    const double reach = (1 + Colliders::kWayOutMargin) * colliders.thickest() / kOneWay +
                         model_.self_contact.distance();
    std::vector<int> index(n, -1);  // of each piece's box in `reached`
    std::vector<Eigen::AlignedBox3d> reached;
    for (int i = 0; i < n; ++i) {
      if (index[piece[i]] < 0) {
        index[piece[i]] = static_cast<int>(reached.size());
        reached.emplace_back(pos(i));
      }
      reached[index[piece[i]]].extend(pos(i));
    }
    // A piece's pins are part of it (a canopy pinned at its corners spans them).
    auto add_pins = [&](const std::array<Connector, 2>& c) {
      for (int k = 0; k < 2; ++k)
        if (c[k].type == MASS && c[1 - k].type == FIX) reached[index[piece[c[k].nr]]].extend(connector_pos(c[1 - k]));
    };
    for (const Spring& s : model_.springs) add_pins(s.c);
    for (const DistanceConstraint& c : model_.constraints) add_pins(c.c);
    for (auto& box : reached) box.extend(box.min() - Vec3::Constant(reach)).extend(box.max() + Vec3::Constant(reach));
    DisjointSets groups(reached.size());
    BoxTree tree;
    tree.build(reached);
    for (int k = 0; k < static_cast<int>(reached.size()); ++k)
      tree.overlapping(reached[k], [&](int other) { groups.join(other, k); }, k);
    std::vector<std::vector<int>> members(reached.size());
    for (int i = 0; i < n; ++i) members[groups.find(index[piece[i]])].push_back(i);
    for (const std::vector<int>& masses : members)
      if (!masses.empty() && move_group_out(masses, out, stuck, pinned, piece))
        for (int i : masses)
          if (!out[i].isZero()) moved.push_back(i);
    std::sort(moved.begin(), moved.end());
    if (!moved.empty()) changed(kPositions);
  }
  return moved;
}

template <int D>
bool System<D>::move_group_out(const std::vector<int>& masses, const std::vector<Vec3>& out,
                               const std::vector<bool>& stuck, const std::vector<bool>& pinned,
                               const std::vector<int>& piece) {
  if constexpr (D == 3) {
    // One way out for all: the mean of their directions, within kOneWay of each; none for
    // a group a pin holds or with a mass that has no way out.
    Vec3 mean = Vec3::Zero();
    for (int i : masses) {
      if (stuck[i] || (pinned[piece[i]] && !out[i].isZero())) return false;
      if (!out[i].isZero()) mean += out[i].normalized();
    }
    if (mean.isZero()) return false;
    const Vec3 direction = mean.normalized();
    double lift = 0;
    for (int i : masses) {
      if (pinned[piece[i]]) return false;
      if (out[i].isZero()) continue;
      const double along = out[i].normalized().dot(direction);
      if (along < kOneWay) return false;
      lift = std::max(lift, out[i].norm() / along);
    }
    const Vec3 move = lift * direction;
    // Nothing in the way: no collider reaching beyond the group's lowest mass (along the
    // way out) within the box it sweeps (a blade over a sheet on a floor), no mass that
    // crosses a collider (checked from just off where it is, as in Colliders::way_out) or
    // ends within a thickness (test_what_cannot_leave_as_one_is_not_moved).
    Eigen::AlignedBox3d swept;
    swept.setEmpty();
    double lowest = std::numeric_limits<double>::infinity();
    for (int i : masses) {
      swept.extend(pos(i)).extend(Vec3(pos(i) + move));
      lowest = std::min(lowest, pos(i).dot(direction));
    }
    const Colliders& colliders = model_.colliders;
    if (colliders.reaches(swept, direction, lowest + 1e-6 * lift, state_.time)) return false;
    for (int i : masses) {
      const Vec3 to = pos(i) + move;
      Vec3 further;
      if (colliders.crosses(pos(i) + 1e-9 * move, to, state_.time, state_.time) || !way_out(i, to, further) ||
          !further.isZero())
        return false;
    }
    for (int i : masses) state_.q.template segment<3>(3 * i) += move;
    return true;
  }
  return false;
}

template <int D>
std::vector<int> System<D>::pieces(std::vector<bool>& pinned) const {
  const int n = num_masses();
  DisjointSets sets(n);
  std::vector<std::array<Connector, 2>> links;
  for (const Spring& s : model_.springs) links.push_back(s.c);
  for (const DistanceConstraint& c : model_.constraints) links.push_back(c.c);
  for (const auto& c : links)
    if (c[0].type == MASS && c[1].type == MASS) sets.join(c[0].nr, c[1].nr);
  pinned.assign(n, false);
  for (const auto& c : links)
    for (int k = 0; k < 2; ++k)
      if (c[k].type == MASS && c[1 - k].type == FIX) pinned[sets.find(c[k].nr)] = true;
  std::vector<int> piece(n);
  for (int i = 0; i < n; ++i) piece[i] = sets.find(i);
  return piece;
}

template <int D>
bool System<D>::way_out(int i, const Vec3& at, Vec3& move) const {
  move.setZero();
  if constexpr (D == 3) {
    // A mass in a face's plane leaves against gravity (without gravity, as it moves).
    const Vec3 side = model_.gravity.isZero() ? Vec3(vel(i)) : Vec3(-model_.gravity);
    return model_.colliders.way_out(at, state_.time, side, move);
  }
  return true;
}

template <int D>
void System<D>::set_self_contact(const std::vector<std::array<int, 3>>& triangles,
                                 const std::vector<std::array<int, 2>>& edges, std::vector<double> distance,
                                 std::vector<double> friction) {
  sim_.require_idle("set self-collision");
  const auto n = static_cast<std::size_t>(num_vertices());
  // One value for all: copied out first, since assign() may free the storage it reads from
  // (libc++ does: the release wheels read the distance as 0; test_bad_self_contact_input_is_refused).
  if (distance.size() == 1) distance = std::vector<double>(n, distance.front());
  if (friction.size() == 1) friction = std::vector<double>(n, friction.front());
  const bool off = std::all_of(distance.begin(), distance.end(), [](double d) { return d == 0; });
  require(D == 3 || off || (triangles.empty() && edges.empty()),
          "self-collision is for 3-D systems (MassSpringSystem3d); this one is 2-D");
  const std::vector<Vec3> built = vertex_points();
  SelfContact next;
  next.set(built, triangles, edges, distance, friction);
  if constexpr (D == 3) {
    std::string where;
    double keeps = 0;
    const double closest = next.closest_parts(built, where, &keeps);
    auto metres = [](double x) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3g m", x);
      return std::string(text);
    };
    // Parts that touch as built (duplicate vertices, objects placed inside each other, or
    // apart by round-off: a millionth of the mesh's size): no distance helps
    // (test_parts_that_touch_as_built_are_named_as_such).
    if (closest < kSelfTouchingShare * extent_of(built, next.points()))
      throw InputError("self-collision: " + where + " share no vertex but touch as built (" + metres(closest) +
                       " apart): duplicate vertices, or parts placed inside each other. Merge the vertices "
                       "(Merge by Distance) or move the parts apart by more than the self-collision distance " +
                       metres(keeps));
    if (closest < keeps)
      throw InputError("the self-collision distance " + metres(keeps) + " is more than the mesh can hold: " + where +
                       " share no vertex but are " + metres(closest) +
                       " apart as built, and would push each other apart at rest. Use a distance below " +
                       metres(closest) + ", or model those parts farther apart");
    // A distance far below the edges: a step may move a vertex by little more than it,
    // so the steps shrink with it and the bake stalls (an 8 x 8 sheet of 5 cm edges at
    // 1e-9 m ran for minutes a frame; test_a_distance_far_below_the_edges_is_refused).
    // (the caller's edges: the mesh's, as the add-on measures them, not the quads' diagonals;
    // those at a vertex that keeps the least distance: of objects baked together each keeps
    // its own, and a fine one's is measured against its own edges, not a coarse one's:
    // test_objects_of_different_sizes_keep_their_own_distances)
    const double least = least_distance(next, distance);
    std::vector<std::array<int, 2>> keeping_least;
    for (const auto& e : edges.empty() ? next.edges() : edges)
      if (distance[e[0]] == least || distance[e[1]] == least) keeping_least.push_back(e);
    const double edge = median_edge(built, keeping_least);
    // A tenth of a per cent below the bound passes: the message prints it to three
    // digits, and the add-on stores distances in float32, so the value the message names
    // is accepted when entered (found by an adversarial test).
    if (least < 0.999 * kSelfLeastDistanceOfEdge * edge)
      throw InputError("the self-collision distance " + metres(least) + " is less than " +
                       metres(kSelfLeastDistanceOfEdge * edge) + " (a thousandth of the median edge, " + metres(edge) +
                       "): steps would have to be as short as the distance is small, and the bake would stall. "
                       "Use a larger distance");
  }
  model_.self_contact = std::move(next);
  changed(kSelfContact);
}

template <int D>
double System<D>::max_constraint_violation() const {
  double worst = 0;
  for (const DistanceConstraint& c : model_.constraints)
    worst = std::max(worst, std::abs((connector_pos(c.c[1]) - connector_pos(c.c[0])).norm() - c.length));
  return worst;
}

template <int D>
std::vector<Vec3> System<D>::vertex_points() const {
  std::vector<Vec3> x(num_vertices(), Vec3::Zero());
  for (int i = 0; i < num_vertices(); ++i) x[i].template head<D>() = vertex_pos(i);
  return x;
}

template class System<2>;
template class System<3>;
// Every law of Stencils (forces/stencils.hpp), in 2-D and 3-D.
#define MS_INSTANTIATE_STENCIL(D, Law)                                                      \
  template int System<D>::add_stencil(const Law&, const std::array<Connector, Law::K>&); \
  template void System<D>::add_stencils(std::vector<Law>,                                \
                                        const std::vector<std::array<Connector, Law::K>>&);
MS_INSTANTIATE_STENCIL(2, WireBending)
MS_INSTANTIATE_STENCIL(3, WireBending)
MS_INSTANTIATE_STENCIL(2, HingeBending)
MS_INSTANTIATE_STENCIL(3, HingeBending)
#undef MS_INSTANTIATE_STENCIL

}  // namespace ms
