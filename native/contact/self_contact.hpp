// Self-contact: parts of one structure (or of structures simulated together) that share
// no vertex keep `distance` apart. Three kinds of pairs, as in Bridson et al. 2002 and IPC
// (Li et al. 2020):
//   - a vertex and a triangle (the vertex's nearest point on the triangle),
//   - two edges (their nearest points: capsules), faded out as they turn parallel, where
//     their nearest points jump from end to end (IPC's mollifier): there the other
//     kinds hold them apart,
//   - a vertex and an edge in no face (ropes, chains and nets have no triangles),
// each a force stencil on four vertices. Within `distance` a pair is pushed apart along
// the line between its nearest points by a stiff penalty, damped, with smoothed Coulomb
// friction (SelfContact::terms), as the colliders push a mass (contact/contact.hpp).
// Parts that share a vertex touch by construction and are left out. Parts joined by a
// triangle's side (a vertex and the triangles around its neighbours) keep only half
// their distance in the mesh as built, if that is less: at the full distance, a sheet
// pressed together in its own plane (a hanging cloth's folds) met its own neighbours, and
// one of 33^2 vertices baked 30 times slower; left out, two quads folded over their
// shared edge passed through each other (tests/test_addon_self_collision.py).
// Pairs that can touch within a step are listed at its start (SelfContact::pairs) for
// vertices that end it within a margin of their predicted end; after the step,
// continuous detection over the straight paths of the vertices (SelfContact::crossing)
// rejects a step in which two parts passed through each other, and a step whose vertices
// ended farther from the prediction is rejected too (Simulator::self_crossing). Where the
// vertices move little relative to each other, pairs are listed with a skin and kept over
// many steps instead (SelfContact::open_window). Pairs of fixes only are left out.
#pragma once

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <vector>

#include "contact/contact.hpp"

namespace ms {

// Self-collision's checks of the mesh as built (System::set_self_contact): parts nearer
// than this share of the mesh's size touch; a distance below this share of the median
// edge is refused (the steps would shrink with it).
constexpr double kSelfTouchingShare = 1e-6, kSelfLeastDistanceOfEdge = 1e-3;

// A pair listed for one step: vertices {point, a, b, c} of a vertex and a triangle,
// {a0, a1, b0, b1} of two edges, or {point, a, b, b} of a vertex and an edge.
struct SelfContactPair {
  enum Kind : int { kPointTriangle, kEdgeEdge, kPointEdge };
  std::array<int, 4> v;
  Kind kind = kPointTriangle;
  // Vertex-triangle: +1 or -1, the side of the triangle's plane the point was on when the
  // pair was listed (a point pressed into the plane is pushed back to its own side).
  double side = 1.0;
  double distance = 0.0;   // m, what the pair keeps: the distance, or less for neighbours
  double friction = 0.0;   // Coulomb coefficient (the largest of its vertices')
  double stiffness = 0.0;  // N/m, fixed for the step (SelfContact::pairs)
  double mass = 0.0;       // kg, the pair's mass along its normal (for the damping)
  // m: how far beyond its distance the pair was where it was listed (negative: within).
  double clearance = 0.0;
  bool carried = false;  // in the list before too: its stiffness carried on (SelfContact::pairs)
};

// Whether pair p stays beyond its distance with each vertex v displaced by moved[v] from
// where the pair was listed. The distance between two parts shrinks by at most the
// farthest any vertex of one moves relative to any vertex of the other (every point of a
// part is a weighted mean of its corners), bounded by each part's farthest move relative
// to the pair's first vertex: a pair carried along as one (a swinging sheet) stays apart.
// Most pairs listed for a step never touch in it: this spares them the nearest points at
// every assembly. The bound is on the distance itself; a point that went around a
// triangle to the other side of its plane, far from it (or a thin triangle that turned
// over), would read as deep in contact by the side it was listed with, and is rightly left
// alone (test_pairs_apart_skip_only_pairs_that_cannot_touch). A displacement that is not
// finite: not apart.
bool stays_apart(const SelfContactPair& p, const std::vector<Vec3>& moved);
// The same bound for a pair `clearance` beyond its distance somewhere, its vertices (in the
// pair's order) displaced by `moves` from there.
bool stays_apart(SelfContactPair::Kind kind, double clearance, const std::array<Vec3, 4>& moves);

// The displacements of stays_apart, with each point's distance r from the points' mean
// displacement: since |moved_i - moved_j| <= r_i + r_j, a pair whose bound through the
// mean is below its clearance stays apart on four numbers, most pairs where a structure
// moves much as a whole; the others are tested exactly. Vertices that are not points:
// NaN, never apart.
struct Displacements {
  std::vector<Vec3> moved;
  std::vector<double> spread;
  Displacements(std::vector<Vec3> moved, const std::vector<int>& points);
  bool apart(const SelfContactPair& p) const {  // (inline: asked of every pair, every assembly)
    const int split = p.kind == SelfContactPair::kEdgeEdge ? 2 : 1;
    // stays_apart's bound through the mean, |m_j - m_0| <= r_j + r_0. A displacement that
    // is not finite makes the mean, so every spread, NaN: the bound fails, and stays_apart
    // says not apart.
    double first = 0, second = 0;
    for (int j = 0; j < 4; ++j) {
      double& part = j < split ? first : second;
      part = std::max(part, spread[p.v[j]]);
    }
    return first + second + 2 * spread[p.v[0]] < p.clearance || stays_apart(p, moved);
  }
};

// A pair's forces at given positions and velocities: f on its four vertices; and the
// Newton matrix's block as an outer product of weights with one 3 x 3 block:
// -d f_i / d x_j = w_i w_j A,  -d f_i / d v_j = w_i w_j B  (Gauss-Newton: the turning of
// the normal is left out, as the colliders' penalty leaves it out on flat faces).
struct SelfContactTerms {
  bool touching = false;
  // m, how far beyond its distance a pair that does not touch is (NaN: not known, as for
  // parts without a direction or edges turned parallel).
  double clearance = std::numeric_limits<double>::quiet_NaN();
  double energy = 0.0;
  std::array<Vec3, 4> f{Vec3::Zero(), Vec3::Zero(), Vec3::Zero(), Vec3::Zero()};
  std::array<double, 4> w{0, 0, 0, 0};
  Mat3 A = Mat3::Zero(), B = Mat3::Zero();
};

// Where a list of pairs was made to be kept for a while (SelfContact::open_window).
struct SelfWindow {
  std::vector<Vec3> at;      // the vertices where it was listed; empty: no window
  double skin = 0.0;         // m, how much nearer than its distance a pair was listed
  std::vector<double> gaps;  // m, between the patches' boxes at `at`, row by row
  bool open() const { return !at.empty(); }
};

class SelfContact {
 public:
  // Vertices are numbered as `built` (the caller's: a system's vertices, where they are
  // as built). Distance and friction per vertex: a pair keeps the largest distance of its
  // vertices, with the largest friction (structures simulated together keep each their
  // own, and the larger between them). InputError names the offending item.
  void set(const std::vector<Vec3>& built, const std::vector<std::array<int, 3>>& triangles,
           const std::vector<std::array<int, 2>>& edges, const std::vector<double>& distance,
           const std::vector<double>& friction);
  // The same distance and friction at every vertex.
  void set(const std::vector<Vec3>& built, const std::vector<std::array<int, 3>>& triangles,
           const std::vector<std::array<int, 2>>& edges, double distance, double friction) {
    set(built, triangles, edges, std::vector<double>(built.size(), distance),
        std::vector<double>(built.size(), friction));
  }
  void clear() { *this = SelfContact(); }
  bool enabled() const { return distance_ > 0 && (!triangles_.empty() || !edges_.empty()); }
  // The largest distance of a vertex that collides.
  double distance() const { return distance_; }
  int num_vertices() const { return num_vertices_; }
  const std::vector<std::array<int, 3>>& triangles() const { return triangles_; }
  // The edges that collide: the triangles' sides, then the given edges in no triangle.
  const std::vector<std::array<int, 2>>& edges() const { return edges_; }
  // The vertices of the triangles and edges, once each, in increasing order.
  const std::vector<int>& points() const { return points_; }

  // The pairs that may come within the distance in a step whose vertices move from x0
  // to within their `margin` of x1 (its predicted end; fixes have inverse_mass 0), each with the
  // colliders' stiffness (contact_stiffness: for the weight of its vertices, their speed
  // toward each other and the stiffest spring at them); a pair also in `previous` keeps
  // its stiffness there, so that its energy stays that of one law while it stays listed.
  // `touching`: whether a pair is within the distance at x0 or x1.
  std::vector<SelfContactPair> pairs(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                     const std::vector<double>& margin,
                                     const std::vector<Vec3>& v0, const std::vector<double>& inverse_mass,
                                     const std::vector<double>& spring_stiffness, double g_ref,
                                     const std::vector<SelfContactPair>& previous, bool& touching) const;
  // Two parts of `listed` that pass through each other on the straight paths from x0 to
  // x1 (continuous detection), described; empty: none. Complete for a step that ended
  // within the margin of the end its pairs were listed for.
  // With `listed_at` (where the vertices were when `listed` was listed), a pair that
  // stays apart (stays_apart) at x0 and at x1 is passed over: its bound holds along the
  // straight paths between them.
  std::string crossing(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                       const std::vector<SelfContactPair>& listed,
                       const std::vector<Vec3>* listed_at = nullptr) const;
  // For a step that ended beyond the margin of the end its pairs were listed for: the
  // pairs with a free vertex (inverse_mass > 0; as pairs() lists them) are listed anew
  // over the straight paths from x0 to x1, and the first one not in `listed` that is
  // within its distance at x0 or at x1, or passes through, is described; empty: none (the
  // step felt every pair that acts at its ends, and nothing crossed). With `strayed`,
  // only pairs with a vertex marked in it: the others kept to the margins `listed` was
  // made with, and the most_shrink the list was made with bounds their shrink (through
  // any vertex, |d_i - d_j| <= |d_i - d_0| + |d_j - d_0|), so they were listed if they could
  // come near (test_a_step_beyond_its_margins_stands_if_it_missed_no_pair: no two edges
  // nearer than half the distance, no step refused).
  std::string missed(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                     const std::vector<SelfContactPair>& listed, const std::vector<double>& inverse_mass,
                     const std::vector<char>* strayed = nullptr) const;
  // Whether a pair of `listed` (listed where the vertices were at `listed_at`) is within
  // its distance at x0 or at x1.
  bool touching(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1, const std::vector<SelfContactPair>& listed,
                const std::vector<Vec3>& listed_at) const;

  // Pairs listed for a while (a window): listed at x0 for every vertex anywhere within
  // half the skin of where it is (pairs() with x1 = x0 and that margin), the list holds
  // every pair that can come within its distance until a pair not listed has come nearer
  // by the skin: it was that far beyond its distance. Checked by patches (set_patches):
  // any two vertices of two patches have moved relative to each other by no more than
  // the farthest apart their displacements' boxes are, and no distance between parts in
  // them has shrunk by more; parts in patches farther apart than the distance and the
  // skin where listed may shrink by that gap, less the distance. So a structure resting,
  // falling or carried as a whole keeps its list (test_a_sheet_falling_as_one_keeps_*),
  // and one falling onto another keeps it while the gap allows
  // (test_a_sheet_falling_onto_another_is_listed_anew_as_they_near).
  // A window opened at x0 if it holds for the step to x1, each vertex within its margin
  // there (not open: it does not).
  SelfWindow open_window(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                         const std::vector<double>& margin, double skin) const;
  // Whether the window's list still holds every pair that can come within its distance on
  // the straight paths from x0 to x1, each vertex within its `margin` (none: 0) of x1.
  bool window_holds(const SelfWindow& window, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                    const std::vector<double>* margin) const;
  // The distance between the two parts at x that keep their full distance (not
  // neighbours in the mesh) and come nearest to it, relative to it, among those within the
  // distance (for the check that it fits the mesh as built; inf if none is), a description
  // of where, and (keeps) the distance they keep. With `labels` (one per vertex), only
  // pairs whose two parts have different labels count: objects simulated together.
  double closest_parts(const std::vector<Vec3>& x, std::string& where, double* keeps = nullptr,
                       const std::vector<int>* labels = nullptr) const;
  // How far beyond its distance pair p is at positions x of its vertices (negative:
  // within), as pairs() records it in p.clearance.
  double clearance(const SelfContactPair& p, const std::array<Vec3, 4>& x) const;
  // Forces of pair p at positions x and velocities v of its vertices.
  SelfContactTerms terms(const SelfContactPair& p, const std::array<Vec3, 4>& x, const std::array<Vec3, 4>& v,
                         double g_ref) const;

 private:
  // Whether vertices a and b are joined by a triangle's side.
  bool neighbours(int a, int b) const;
  // The distance a pair keeps: half its distance as built, if its parts are neighbours in
  // the mesh and that is less than the distance; 0 (left out) if they share a vertex, or
  // are parts of one face that touch as built (a flat quad's diagonals).
  double pair_distance(SelfContactPair pair) const;
  // The distance a pair of parts that are not neighbours keeps: the largest of its vertices'.
  double full_distance(const SelfContactPair& pair) const;
  std::vector<int> neighbour_start_, neighbours_;  // across triangles' sides, CSR
  std::vector<Vec3> built_;
  // Calls visit(slot, pair, candidate) for every pair of parts that share no vertex and
  // whose boxes over x0 ... x1, grown by their vertices' `margin` (none: 0), come within
  // `reach` of each other, pair.distance set: from `chunks` runs on the workers at once,
  // each with slots of its own, in slot order the vertex-triangle pairs, then the edge
  // pairs, then the vertex-wire pairs (3 * chunks slots). quick(pair, candidate): a test
  // first, before the pair's distance is looked up, that sets the candidate's nearest
  // points and what else visit needs (false: the pair is skipped). visit and quick must
  // be safe to call from several workers at once for different slots.
  template <class Visit, class Quick>
  void each_near_pair(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1, const std::vector<double>* margin,
                      double reach, int chunks, Visit&& visit, Quick&& quick) const;
  // The patches (window_holds): each patch's points and the vertices of the parts
  // around them, CSR; connected pieces of up to kPatchSize points (more where that would
  // make more than kMostPatches), grown over the edges (set_patches).
  static constexpr int kPatchSize = 8, kMostPatches = 256;
  std::vector<int> patch_start_, patch_vertices_;
  int num_patches() const { return std::max(0, static_cast<int>(patch_start_.size()) - 1); }
  void set_patches();
  // Each patch's displacements from `at` at x0 and at x1 (boxes), and its largest margin.
  // On the straight paths between, two vertices' displacements differ by no more than at
  // one of the ends.
  struct PatchMoves {
    std::vector<std::array<Eigen::AlignedBox3d, 2>> ends;
    std::vector<double> grow;
    // The most any distance between parts in patches p and q can have shrunk.
    double shrink(int p, int q) const;
  };
  PatchMoves patch_moves(const std::vector<Vec3>& at, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                         const std::vector<double>* margin) const;
  // Whether no two points have moved relative to each other by the skin: a structure
  // resting, or moving as one (then no pair not listed can come within its distance).
  bool moved_as_one(const std::vector<Vec3>& at, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                    const std::vector<double>* margin, double skin) const;
  // Whether no pair not listed can come within its distance (gaps: none, only the
  // patches each with itself are checked).
  bool patches_hold(const PatchMoves& moves, const std::vector<double>* gaps, double skin) const;
  int num_vertices_ = 0;
  std::vector<std::array<int, 3>> triangles_;
  std::vector<std::array<int, 2>> edges_;
  std::vector<int> points_;  // the vertices of the triangles and edges, once each
  std::vector<std::array<int, 2>> wires_;  // the edges in no triangle
  std::vector<double> vertex_distance_, vertex_friction_;
  double distance_ = 0.0;  // the largest of vertex_distance_ over the vertices that collide
  // The box trees of each_near_pair, refit to the new boxes at each call and built anew
  // every kTreeRebuild calls: speed only, as the pairs listed do not depend on them. (So
  // pairs, missed and closest_parts, though const, must not run at once on one object;
  // a System runs them from simulate() only.)
  struct Trees {
    BoxTree triangles, edges, wires;
    int calls = 0;
  };
  static constexpr int kTreeRebuild = 8;
  mutable Trees trees_;
};

// Nearest points of two segments: parameters s on a0-a1, t on b0-b1 (Ericson, Real-Time
// Collision Detection, 5.1.9), also for parallel and zero-length segments.
void segment_parameters(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double& s, double& t);

}  // namespace ms
