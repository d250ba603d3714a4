// Contact of the masses with colliders: triangle surfaces given by the caller (the
// add-on passes the scene's Collision objects), static or moving linearly during one
// simulate() call. A mass touches a collider when it comes within the collider's
// thickness of its surface (both sides: a plane is a thin shell); it is then pushed out by
// a stiff penalty force, damped, with smoothed Coulomb friction (contact_force below).
// A mass touches a surface at every point where its distance to the surface has a local
// minimum (Colliders::contacts): once on a plane or over a convex edge, on both faces in
// a concave crease, so that the force turns with the faces there instead of flipping from
// one face's normal to the other's (a mass sliding into a bowl or a V trough,
// tests/test_core_contact.py). Self-collision is not handled.
#pragma once

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "model/model.hpp"

namespace ms {

using Vec3 = Eigen::Vector3d;
using Mat3 = Eigen::Matrix3d;

// The point of the colliders nearest to a mass, when the mass is within thickness of it.
struct ContactPoint {
  bool touching = false;
  Vec3 normal = Vec3::Zero();  // unit, from the surface to the mass
  double distance = 0;         // from the surface to the mass
  // d(normal)/d(position) = curvature / distance: 0 on a face's interior, the projector
  // across the edge on an edge, I - n n^T at a corner.
  Mat3 curvature = Mat3::Zero();
  Vec3 surface_velocity = Vec3::Zero();
  double thickness = 0, friction = 0;
  // The depth over which the penalty's stiffness grows from 0 (contact_force); 0:
  // contact_ramp(thickness).
  double ramp = 0;
  // The speed below which friction is smoothed (contact_force); 0: friction_speed(g_ref).
  double slip_speed = 0;
  // Newton's matrix takes the friction as a damper of its present strength along every
  // direction of sliding, leaving out that its force stops growing with the speed: a
  // Picard step, which does not overshoot where the friction saturates (self-contact,
  // whose corrections are not cut short as a mass's on a collider are).
  bool damper_friction = false;
};

// Closest point of triangle (a, b, c) to p, as barycentric weights (Ericson, Real-Time
// Collision Detection, 5.1.5): the weights that are zero tell the region (interior, edge,
// corner).
Vec3 closest_weights(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c);

// A bounding-volume hierarchy (axis-aligned boxes, median splits) over boxes.
class BoxTree {
 public:
  void build(const std::vector<Eigen::AlignedBox3d>& boxes);
  // The same items' new boxes: the tree's shape kept, its nodes' boxes made to hold them
  // (as good for queries as a new tree while the items keep near their old neighbours).
  void refit(const std::vector<Eigen::AlignedBox3d>& boxes);
  std::size_t size() const { return boxes_.size(); }
  // Calls visit(i) for every box i that holds p (its boundary included), each node's
  // right child before its left.
  template <class Visit>
  void containing(const Vec3& p, Visit&& visit) const;
  bool holds(int i, const Vec3& p) const { return boxes_[i].contains(p); }
  // Calls visit(i) for every box i > `after` that meets box b (a tree's items against
  // each other: each pair once, from its first item).
  template <class Visit>
  void overlapping(const Eigen::AlignedBox3d& b, Visit&& visit, int after = -1) const;
  bool empty() const { return nodes_.empty(); }

 private:
  struct Node {
    Eigen::AlignedBox3d box;
    int first = 0, count = 0;  // leaf: items order_[first, first + count)
    int left = -1, right = -1;
    int last = -1;  // the largest item below
  };
  int build_node(const std::vector<Eigen::AlignedBox3d>& boxes, int first, int count);
  std::vector<Node> nodes_;
  std::vector<int> order_;
  std::vector<Eigen::AlignedBox3d> boxes_;
};

class Colliders {
 public:
  // Replaces the colliders. With the same triangles as before, the new vertex positions
  // are where they move to during the next simulate() call, from where they are now;
  // otherwise they are placed there at once. thickness and friction are per triangle.
  // InputError names the offending item.
  void set(const std::vector<Vec3>& vertices, const std::vector<std::array<int, 3>>& triangles,
           const std::vector<double>& thickness, const std::vector<double>& friction);
  void clear();
  bool empty() const { return triangles_.empty(); }
  int num_triangles() const { return static_cast<int>(triangles_.size()); }
  bool moving() const { return moving_; }
  // Changes whenever the colliders or their motion do (set, each call's begin and end,
  // stop_at): the same points at the same version are the same contacts.
  std::uint64_t version() const { return version_; }

  // Motion during one simulate() call over [t0, t0 + duration]. Outside a call the
  // colliders are where the last call left them.
  void begin_call(double t0, double duration);
  // After the call: at the positions they were moved to; if it stopped early (an
  // exception), where they were at time t, to move on from there in the next call.
  void end_call();
  void stop_at(double t);
  // Nearest collider point within its thickness of p at time t (inside the current call);
  // `velocity` of the mass picks the side of a face for a mass lying in its plane.
  ContactPoint nearest(const Vec3& p, double t, const Vec3& velocity = Vec3::Zero()) const;
  // Every point of the colliders within their thickness of p where p's distance to the
  // surface has a local minimum: a face's nearest point inside it (once for a face given
  // twice), or an edge's or corner's if it is the nearest point of every flat or convex
  // triangle around it, reported once by the deepest; and an edge's or corner's nearest
  // point next to a face that bends toward p (a concave crease), whose force then fades
  // with depth instead of jumping on as p's nearest point moves onto that face. Vertices
  // at the same position are one vertex here. visit(point) for each, in the box tree's
  // order.
  template <class Visit>
  void contacts(const Vec3& p, double t, const Vec3& velocity, Visit&& visit) const;
  // The same, the triangles looked for among `near` alone: what near_triangles() gave
  // for a box that holds p (then the same points, in the same order, as contacts()
  // above finds: every triangle whose box holds p is among them).
  template <class Visit>
  void contacts(const std::vector<int>& near, const Vec3& p, double t, const Vec3& velocity, Visit&& visit) const;
  // The triangles whose boxes meet `box`, in the box tree's order.
  void near_triangles(const Eigen::AlignedBox3d& box, std::vector<int>& near) const;
  // Changes whenever the box tree does (set()): near_triangles() lists stay valid until then.
  std::uint64_t tree_version() const { return tree_version_; }
  double thickest() const;
  // The largest distance a collider vertex moves in the next call, and the thinnest
  // collider (steps are kept short enough that a moving collider cannot pass a mass).
  double largest_move() const;
  double thinnest() const;
  // Whether a mass moving straight from p0 at time t0 to p1 at t1 passes through a
  // collider's surface as the collider moves meanwhile: neither may tunnel through the
  // other within one step. Exact for colliders that translate; one that turns is checked
  // by its planes at t0 and t1 and may slip a mass near an edge through.
  bool crosses(const Vec3& p0, const Vec3& p1, double t0, double t1) const;
  // The speed of the fastest collider vertex in the running call (0 outside one).
  double largest_speed() const;
  // The move that takes a mass at p (time t) out of every collider's thickness to just
  // beyond it (kWayOutMargin: a structure placed exactly at the thickness over a finely
  // divided floor took minutes for its first step): out of the deepest contact along its
  // normal, again until none is left (a crease), at most kWayOutRounds times; none for a
  // mass less than kSettledDepth deep (resting on it). `side` picks the side of a face for
  // a mass in its plane. False where the way out would cross a collider or is not found
  // (a gap narrower than two thicknesses) (System::move_out_of_colliders).
  bool way_out(const Vec3& p, double t, const Vec3& side, Vec3& move) const;
  // Whether a triangle has a point within `box` beyond `level` along the unit `direction`
  // at time t (in the way of what moves along it within the box).
  bool reaches(const Eigen::AlignedBox3d& box, const Vec3& direction, double level, double t) const;
  static constexpr int kWayOutRounds = 16;
  static constexpr double kSettledDepth = 0.01;  // of the thickness: no way out needed
  static constexpr double kWayOutMargin = 0.01;  // of the thickness

 private:
  Vec3 vertex(int k, double t) const;
  // Triangle tri's nearest point to p: its barycentric weights (zeros: on an edge or a
  // corner), the distance and the normal there, and whether p is within the thickness.
  struct Foot {  // no initializers: contacts() keeps an array of them per query
    int tri;
    Vec3 w, normal;
    double distance;
    bool touching;
  };
  Foot foot(int tri, const Vec3& p, double t, const Vec3& velocity) const;
  ContactPoint contact_point(const Foot& f, double t) const;
  // The feature a foot lies on: its triangle's welded corners whose weight is not zero
  // (three: the face's inside), sorted; returns how many.
  int feature(const Foot& f, std::array<int, 3>& corners) const;
  // Whether a foot on an edge or a corner is a point where the colliders touch p
  // (contacts()), and the one that reports it. `known`: feet already found for p (the
  // same as foot() would give them again).
  bool reports(const Foot& f, const Vec3& p, double t, const Vec3& velocity, const Foot* known,
               int known_count) const;
  // Whether triangle `other` rises from triangle tri's plane toward p (a concave crease
  // seen from p).
  bool bends_toward(int other, int tri, const Vec3& p, double t) const;
  // contacts() over the triangles each_candidate(visit) visits.
  template <class Candidates, class Visit>
  void contacts_among(Candidates&& each_candidate, const Vec3& p, double t, const Vec3& velocity,
                      Visit&& visit) const;
  std::vector<int> fan_start_, fan_;  // the triangles around each welded vertex
  std::vector<Vec3> start_, target_;
  // Each vertex's first vertex at the same position: the vertex that stands for it in
  // the triangles' shared edges and corners (a mesh split at its seams is one surface).
  std::vector<int> welded_;
  std::vector<std::array<int, 3>> triangles_, given_triangles_;
  std::vector<double> thickness_, friction_;
  double t0_ = 0, duration_ = 1;
  bool moving_ = false;   // start_ != target_
  bool in_call_ = false;  // inside simulate(): positions follow the path
  std::uint64_t version_ = 0, tree_version_ = 0;
  BoxTree tree_;
};

// Force of the contact on a mass of mass m at velocity v, and its derivatives
// A = -dF/dp, B = -dF/dv (the blocks the mass's diagonal of the Newton matrix gains).
struct ContactForce {
  Vec3 f = Vec3::Zero();
  Mat3 A = Mat3::Zero(), B = Mat3::Zero();
  double energy = 0;  // elastic energy stored in the penalty
};

// Where a mass touches, as Newton's corrections need it (Simulator::limit_contact_corrections).
struct ContactState {
  int mass = -1;
  Vec3 normal = Vec3::Zero(), surface_velocity = Vec3::Zero();
  double penetration = 0, ramp = 0;  // depth, and the depth where the penalty is fully stiff
  bool friction = false;
};

// The penalty: stiffness k = max(m g_ref 2000 / thickness, a quarter of the stiffness of
// the springs at the mass), reached over the first 1/2000 of the thickness
// (contact_force), so that a mass resting on a collider under its own weight sinks less
// than 1/1000 of the thickness into it (tests/test_core_contact.py,
// test_mass_rests_on_a_plane_at_its_thickness), and a stretched sheet cannot press its
// masses in much deeper than it stretches (test_sheet_33_drapes_over_a_sphere). All of
// the springs' stiffness costs twice the time on a sheet dropped onto a ball
// (docs/performance.md).
// Friction: Coulomb with the elastic normal force, smoothed over speeds below
// friction_speed(g_ref) so that it has a derivative.
constexpr double kContactSinkShare = 5e-4;
constexpr double kContactSpringShare = 0.25;
// The normal damping grows from 0 at the surface to critical at this share of the
// thickness: continuous in the position, and gentle enough within Newton's reach that
// Newton does not cycle between its two sides (test_sheet_settles_on_a_plane).
constexpr double kContactDampingShare = 0.1;
// Depth over which the penalty's stiffness grows from 0 to k (contact_force).
inline double contact_ramp(double thickness) { return kContactSinkShare * thickness; }
inline double friction_speed(double g_ref) { return 3e-5 * g_ref; }
// And at least m (v / thickness)^2 for a mass meeting the collider at relative speed v:
// with critical damping it then stops within about a third of the thickness (v / (e w),
// w = v / thickness), where a stiffness for its weight alone let a fast mass or a fast
// collider pass through (tests/test_core_contact.py,
// test_fast_collider_carries_a_resting_mass and test_fast_mass_stops_on_a_thin_floor).
inline double contact_stiffness(double m, double g_ref, double thickness, double springs, double speed = 0.0) {
  const double stop = speed / thickness;
  return std::max({m * g_ref / (kContactSinkShare * thickness), kContactSpringShare * springs, m * stop * stop});
}
// With `lagged` (Newton's matrix), A leaves out the damping's softening of a mass leaving
// the surface. Without `derivatives` (a residual, an energy), A and B are left at zero.
ContactForce contact_force(const ContactPoint& c, double m, double k, const Vec3& v,
                           double g_ref, bool lagged = false, bool derivatives = true);

// ---------------------------------------------------------------- templates

template <class Visit>
void BoxTree::containing(const Vec3& p, Visit&& visit) const {
  if (nodes_.empty()) return;
  // Depth first: at most two entries a level, and median splits keep the depth within
  // log2 of the boxes (no allocation per query: one per mass and assembly). A test of
  // p against the box's faces, no distance: this runs for every mass at every assembly.
  std::array<int, 2 * 64> stack;
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const Node& node = nodes_[stack[--top]];
    if (!node.box.contains(p)) continue;
    if (node.left < 0) {
      for (int k = node.first; k < node.first + node.count; ++k)
        if (boxes_[order_[k]].contains(p)) visit(order_[k]);
      continue;
    }
    stack[top++] = node.left;
    stack[top++] = node.right;
  }
}

template <class Visit>
void BoxTree::overlapping(const Eigen::AlignedBox3d& b, Visit&& visit, int after) const {
  if (nodes_.empty()) return;
  std::array<int, 2 * 64> stack;  // as in containing()
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const Node& node = nodes_[stack[--top]];
    if (node.last <= after || !node.box.intersects(b)) continue;
    if (node.left < 0) {
      for (int k = node.first; k < node.first + node.count; ++k)
        if (order_[k] > after && boxes_[order_[k]].intersects(b)) visit(order_[k]);
      continue;
    }
    stack[top++] = node.left;
    stack[top++] = node.right;
  }
}

template <class Visit>
void Colliders::contacts(const Vec3& p, double t, const Vec3& velocity, Visit&& visit) const {
  contacts_among([&](auto&& each) { tree_.containing(p, each); }, p, t, velocity, visit);
}

template <class Visit>
void Colliders::contacts(const std::vector<int>& near, const Vec3& p, double t, const Vec3& velocity,
                         Visit&& visit) const {
  contacts_among(
      [&](auto&& each) {
        for (int tri : near)
          if (tree_.holds(tri, p)) each(tri);
      },
      p, t, velocity, visit);
}

template <class Candidates, class Visit>
void Colliders::contacts_among(Candidates&& each_candidate, const Vec3& p, double t, const Vec3& velocity,
                               Visit&& visit) const {
  // The feet of the triangles near p that touch it: a few, kept on the stack (this runs
  // for every mass at every assembly); more than kKept go to `more`.
  constexpr int kKept = 32;
  std::array<Foot, kKept> kept;
  std::vector<Foot> more;
  int count = 0;
  each_candidate([&](int tri) {
    const Foot f = foot(tri, p, t, velocity);
    if (!f.touching) return;
    if (count < kKept) kept[count] = f;
    else more.push_back(f);
    ++count;
  });
  auto at = [&](int i) -> const Foot& { return i < kKept ? kept[i] : more[i - kKept]; };
  for (int i = 0; i < count; ++i) {
    const Foot& f = at(i);
    std::array<int, 3> corners;
    if (feature(f, corners) == 3) {
      // A face's inside, once however often the face is given (a duplicated collider):
      // by the deepest (then the first) of its copies.
      bool first = true;
      for (int j = 0; j < count && first; ++j) {
        std::array<int, 3> other;
        if (j == i || feature(at(j), other) != 3 || other != corners) continue;
        const double gap = f.distance - thickness_[f.tri], other_gap = at(j).distance - thickness_[at(j).tri];
        first = !(other_gap < gap || (other_gap == gap && j < i));
      }
      if (first) visit(contact_point(f, t));
    } else if (reports(f, p, t, velocity, kept.data(), std::min(count, kKept))) {
      visit(contact_point(f, t));
    }
  }
}

}  // namespace ms
