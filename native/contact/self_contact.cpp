// Self-contact (self_contact.hpp): the pairs, their forces, and the check of a step.
#include "contact/self_contact.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "parallel/parallel_for.hpp"

namespace ms {

namespace {

using Box = Eigen::AlignedBox3d;

// The share of the distance over which a pair's stiffness grows from 0 (contact_force's
// ramp). Two hundred times the colliders': on a ribbon folding onto itself, Newton cycled
// across the narrow ramp's kink in 2 of 5 steps, where a mass against a collider has its
// corrections cut short there (System::limit_contact_corrections).
constexpr double kSelfContactRamp = 0.1;

// Parts of one face closer than this share of their size as built count as touching
// there by construction (pair_distance).
constexpr double kFlat = 0.1;

// Listing and checking pairs go to the workers in one chunk per this many parts (or
// pairs): a smaller loop runs faster alone than handed over.
constexpr long kListGrain = 512;

double clamp01(double x) { return std::min(1.0, std::max(0.0, x)); }

// The distance between two boxes (0 where they meet), and the farthest apart two of their
// points are.
double box_gap(const Box& a, const Box& b) {
  return (a.min() - b.max()).cwiseMax(b.min() - a.max()).cwiseMax(0.0).norm();
}
double farthest_apart(const Box& a, const Box& b) {
  return (a.max() - b.min()).cwiseAbs().cwiseMax((b.max() - a.min()).cwiseAbs()).norm();
}

// The mean of f(v) over the points v (zero if there are none).
template <class F>
Vec3 mean_over(const std::vector<int>& points, F&& f) {
  Vec3 mean = Vec3::Zero();
  for (int v : points) mean += f(v);
  return points.empty() ? mean : Vec3(mean / static_cast<double>(points.size()));
}

// Where a pair's two parts are nearest at positions x: the weights w (sum_j w_j x_j is
// the vector between the nearest points), the unit normal n along it (from the second
// part to the first) and the distance. A vertex-triangle pair measures the distance of a
// point over the triangle's inside along the triangle's normal on the pair's own side
// (negative past the plane: pushed back, not through).
struct Nearest {
  bool ok = false;
  std::array<double, 4> w{0, 0, 0, 0};
  Vec3 n = Vec3::Zero();
  double distance = 0;
};

Nearest nearest(const SelfContactPair& pair, const std::array<Vec3, 4>& x) {
  Nearest out;
  Vec3 r, plane;
  if (pair.kind == SelfContactPair::kPointEdge) {
    const Vec3 e = x[2] - x[1];
    const double s = e.squaredNorm() > 0 ? clamp01((x[0] - x[1]).dot(e) / e.squaredNorm()) : 0.0;
    out.w = {1, -(1 - s), -s, 0};
    r = x[0] - x[1] - s * e;
    plane = Vec3::Zero();
  } else if (pair.kind == SelfContactPair::kEdgeEdge) {
    double s, t;
    segment_parameters(x[0], x[1], x[2], x[3], s, t);
    out.w = {1 - s, s, -(1 - t), -t};
    r = (1 - s) * x[0] + s * x[1] - (1 - t) * x[2] - t * x[3];
    plane = (x[1] - x[0]).cross(x[3] - x[2]);
  } else {
    const Vec3 b = closest_weights(x[0], x[1], x[2], x[3]);
    if (!b.allFinite()) return out;  // a triangle without area
    out.w = {1, -b(0), -b(1), -b(2)};
    r = x[0] - b(0) * x[1] - b(1) * x[2] - b(2) * x[3];
    plane = (x[2] - x[1]).cross(x[3] - x[1]);
    if (b.minCoeff() > 0 && plane.norm() > 0) {  // over the inside
      out.n = pair.side * plane.normalized();
      out.distance = out.n.dot(r);
      out.ok = true;
      return out;
    }
  }
  out.distance = r.norm();
  if (out.distance > 0) {
    out.n = r / out.distance;
  } else if (plane.norm() > 0) {
    out.n = pair.side * plane.normalized();
  } else {
    return out;  // touching parallel edges, or a vertex on an edge: no direction to push
  }
  out.ok = true;
  return out;
}

// The side of the triangle's plane (vertex-triangle) or of the plane of both edges the
// first part is on at x: +1 or -1.
double side_of(const SelfContactPair& pair, const std::array<Vec3, 4>& x) {
  double along;
  if (pair.kind == SelfContactPair::kPointEdge) return 1.0;
  if (pair.kind == SelfContactPair::kEdgeEdge) {
    double s, t;
    segment_parameters(x[0], x[1], x[2], x[3], s, t);
    const Vec3 r = (1 - s) * x[0] + s * x[1] - (1 - t) * x[2] - t * x[3];
    along = r.dot((x[1] - x[0]).cross(x[3] - x[2]));
  } else {
    along = (x[0] - x[1]).dot((x[2] - x[1]).cross(x[3] - x[1]));
  }
  return along < 0 ? -1.0 : 1.0;
}

std::array<Vec3, 4> corners(const std::vector<Vec3>& x, const std::array<int, 4>& v) {
  return {x[v[0]], x[v[1]], x[v[2]], x[v[3]]};
}

std::array<int, 5> key(const SelfContactPair& p) { return {p.kind, p.v[0], p.v[1], p.v[2], p.v[3]}; }

// How much of two edges' contact acts: 1, fading to 0 as they turn parallel (sin^2 of
// their angle below kParallel), where their nearest points jump from one end to the other
// as they turn (IPC's mollifier, Li et al. 2020). Newton cycled across such jumps on a
// ribbon folded onto itself; the vertex-triangle and vertex-edge pairs hold parallel
// edges apart.
constexpr double kParallel = 1e-2;
double edge_share(const std::array<Vec3, 4>& x) {
  const Vec3 a = x[1] - x[0], b = x[3] - x[2];
  const double scale = a.squaredNorm() * b.squaredNorm();
  if (!(scale > 0)) return 0.0;
  const double u = a.cross(b).squaredNorm() / (kParallel * scale);
  return u >= 1 ? 1.0 : u * (2 - u);
}

// The coplanarity of the pair's four vertices along their straight paths from x0 (t = 0)
// to x1 (t = 1): the triple product that is zero where a point meets a triangle's plane or
// two edges meet a common plane, a cubic in t.
double coplanarity(const SelfContactPair& pair, const std::array<Vec3, 4>& x0, const std::array<Vec3, 4>& x1,
                   double t) {
  std::array<Vec3, 4> x;
  for (int j = 0; j < 4; ++j) x[j] = (1 - t) * x0[j] + t * x1[j];
  if (pair.kind == SelfContactPair::kEdgeEdge) return (x[1] - x[0]).cross(x[3] - x[2]).dot(x[2] - x[0]);
  return (x[2] - x[1]).cross(x[3] - x[1]).dot(x[0] - x[1]);
}

// Whether the pair's parts meet at some time in (0, 1] along the straight paths: at a
// root of the coplanarity (a cubic; split at its turning points into pieces where it is
// monotone, each root found by bisection), the parts' distance is below `touch`.
bool meets(const SelfContactPair& pair, const std::array<Vec3, 4>& x0, const std::array<Vec3, 4>& x1, double touch) {
  const double f0 = coplanarity(pair, x0, x1, 0.0), f1 = coplanarity(pair, x0, x1, 1.0 / 3);
  const double f2 = coplanarity(pair, x0, x1, 2.0 / 3), f3 = coplanarity(pair, x0, x1, 1.0);
  // f(t) = c0 + c1 t + c2 t^2 + c3 t^3 through the four samples; its turning points.
  const double c1 = 0.5 * (-11 * f0 + 18 * f1 - 9 * f2 + 2 * f3);
  const double c2 = 4.5 * (2 * f0 - 5 * f1 + 4 * f2 - f3);
  const double c3 = 4.5 * (-f0 + 3 * f1 - 3 * f2 + f3);
  std::array<double, 4> cut{0.0, 1.0, 1.0, 1.0};
  int cuts = 1;
  const double a = 3 * c3, b = 2 * c2, c = c1;  // f' = a t^2 + b t + c
  if (std::abs(a) > 1e-14 * (std::abs(b) + std::abs(c))) {
    const double disc = b * b - 4 * a * c;
    if (disc > 0) {
      const double root = std::sqrt(disc);
      for (double t : {(-b - root) / (2 * a), (-b + root) / (2 * a)})
        if (t > 0 && t < 1) cut[cuts++] = t;
    }
  } else if (b != 0) {
    const double t = -c / b;
    if (t > 0 && t < 1) cut[cuts++] = t;
  }
  std::sort(cut.begin() + 1, cut.begin() + cuts);
  cut[cuts] = 1.0;
  auto touches_at = [&](double t) {
    std::array<Vec3, 4> x;
    for (int j = 0; j < 4; ++j) x[j] = (1 - t) * x0[j] + t * x1[j];
    SelfContactPair unsigned_pair = pair;
    unsigned_pair.side = 1.0;
    const Nearest at = nearest(unsigned_pair, x);
    return at.ok ? std::abs(at.distance) < touch : true;
  };
  for (int k = 0; k < cuts; ++k) {
    double lo = cut[k], hi = cut[k + 1];
    double flo = coplanarity(pair, x0, x1, lo), fhi = coplanarity(pair, x0, x1, hi);
    if (fhi == 0.0 && touches_at(hi)) return true;
    if ((flo < 0) == (fhi < 0) || flo == 0.0) continue;
    for (int it = 0; it < 50; ++it) {
      const double mid = 0.5 * (lo + hi), fmid = coplanarity(pair, x0, x1, mid);
      if ((fmid < 0) == (flo < 0)) lo = mid, flo = fmid;
      else hi = mid;
    }
    if (touches_at(hi)) return true;
  }
  return false;
}

// The distance shrinks by at most how far each part moves relative to the pair's first
// vertex's move from x0 to x1 (it does not change as the pair moves as one), each vertex
// within its `margin` (none: 0) of its move: every point of a part moves no farther than
// its farthest corner, so the bound is the sum of the two parts' farthest.
double most_shrink(const SelfContactPair& pair, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                   const std::vector<double>* margin) {
  const int split = pair.kind == SelfContactPair::kEdgeEdge ? 2 : 1;
  const Vec3 common = x1[pair.v[0]] - x0[pair.v[0]];
  double first = 0, second = 0;
  for (int j = 0; j < 4; ++j) {
    const double move = ((x1[pair.v[j]] - x0[pair.v[j]]) - common).norm() + (margin ? (*margin)[pair.v[j]] : 0.0);
    double& part = j < split ? first : second;
    part = std::max(part, move);
  }
  return first + second;
}

// Within the largest distance of any pair at x0, less what the step may shrink it: by the
// parts' boxes first (cheap), then exactly, setting `at`; before the pair's own distance,
// which for mesh neighbours needs their distance as built (pair_distance).
// What a candidate pair's first test found (each_near_pair): its nearest points at the
// step's start, and the most its distance can shrink in the step.
struct Candidate {
  Nearest at;
  double shrink = 0.0;
};

bool may_come_within(const SelfContactPair& pair, const std::vector<Vec3>& x0, double reach, Nearest& at) {
  const int split = pair.kind == SelfContactPair::kEdgeEdge ? 2 : 1;
  Box first, second;
  first.setEmpty();
  second.setEmpty();
  for (int j = 0; j < 4; ++j) (j < split ? first : second).extend(x0[pair.v[j]]);
  if (box_gap(first, second) >= reach) return false;
  at = nearest(pair, corners(x0, pair.v));  // side +1: the distance's size is the same
  return at.ok && std::abs(at.distance) < reach;  // (not ok: degenerate, never listed)
}

// How far beyond its distance a pair is where its nearest points are `at` (found with side
// +1: the distance's size is the same on either side).
double clearance_at(const Nearest& at, const SelfContactPair& pair) { return std::abs(at.distance) - pair.distance; }

// Each vertex's displacement from `at` to x (stays_apart).
std::vector<Vec3> moved_since(const std::vector<Vec3>& at, const std::vector<Vec3>& x) {
  std::vector<Vec3> moved(at.size());
  for (std::size_t v = 0; v < at.size(); ++v) moved[v] = x[v] - at[v];
  return moved;
}

std::string describe(const SelfContactPair& p) {
  auto v = [&](int j) { return std::to_string(p.v[j]); };
  if (p.kind == SelfContactPair::kEdgeEdge) return "edge " + v(0) + "-" + v(1) + " and edge " + v(2) + "-" + v(3);
  if (p.kind == SelfContactPair::kPointEdge) return "vertex " + v(0) + " and edge " + v(1) + "-" + v(2);
  return "vertex " + v(0) + " and triangle " + v(1) + "-" + v(2) + "-" + v(3);
}

}  // namespace

void segment_parameters(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double& s, double& t) {
  const Vec3 d1 = a1 - a0, d2 = b1 - b0, r = a0 - b0;
  const double a = d1.squaredNorm(), e = d2.squaredNorm(), f = d2.dot(r);
  s = t = 0.0;
  if (a <= 0 && e <= 0) return;
  if (a <= 0) {
    t = clamp01(f / e);
    return;
  }
  const double c = d1.dot(r);
  if (e <= 0) {
    s = clamp01(-c / a);
    return;
  }
  const double b = d1.dot(d2), denom = a * e - b * b;
  // Parallel (denom 0 up to round-off): any s will do; 0.
  s = denom > 1e-14 * a * e ? clamp01((b * f - c * e) / denom) : 0.0;
  t = (b * s + f) / e;
  if (t < 0) {
    t = 0;
    s = clamp01(-c / a);
  } else if (t > 1) {
    t = 1;
    s = clamp01((b - c) / a);
  }
}

bool stays_apart(const SelfContactPair& p, const std::vector<Vec3>& moved) {
  if (!(p.clearance > 0)) return false;
  return stays_apart(p.kind, p.clearance, {moved[p.v[0]], moved[p.v[1]], moved[p.v[2]], moved[p.v[3]]});
}

bool stays_apart(SelfContactPair::Kind kind, double clearance, const std::array<Vec3, 4>& moves) {
  if (!(clearance > 0)) return false;
  const int split = kind == SelfContactPair::kEdgeEdge ? 2 : 1;
  double first = 0, second = 0;
  for (int j = 0; j < 4; ++j) {
    const double m = (moves[j] - moves[0]).norm();
    if (!(m >= 0)) return false;  // NaN: evaluated, and the forces tell
    double& part = j < split ? first : second;
    part = std::max(part, m);
  }
  return first + second < clearance;
}

Displacements::Displacements(std::vector<Vec3> moved_, const std::vector<int>& points)
    : moved(std::move(moved_)), spread(moved.size(), std::numeric_limits<double>::quiet_NaN()) {
  if (moved.empty()) return;  // nothing listed where: never apart (apart() is not asked)
  const Vec3 mean = mean_over(points, [&](int v) { return moved[v]; });
  for (int v : points) spread[v] = (moved[v] - mean).norm();
}

void SelfContact::set(const std::vector<Vec3>& built, const std::vector<std::array<int, 3>>& triangles,
                      const std::vector<std::array<int, 2>>& edges, const std::vector<double>& distance,
                      const std::vector<double>& friction) {
  const int num_vertices = static_cast<int>(built.size());
  if (distance.size() != built.size() || friction.size() != built.size())
    throw InputError("self-collision distance and friction: one value, or one per vertex (" +
                     std::to_string(num_vertices) + "), got " + std::to_string(distance.size()) + " and " +
                     std::to_string(friction.size()));
  for (int v = 0; v < num_vertices; ++v) {
    const std::string at = num_vertices > 1 && (distance[v] != distance[0] || friction[v] != friction[0])
                               ? " at vertex " + std::to_string(v)
                               : "";
    if (!(std::isfinite(distance[v]) && distance[v] >= 0))
      throw InputError("self-collision distance must be a number >= 0 (m), got " + std::to_string(distance[v]) + at);
    if (!(std::isfinite(friction[v]) && friction[v] >= 0))
      throw InputError("self-collision friction must be a number >= 0, got " + std::to_string(friction[v]) + at);
  }
  auto check = [&](const auto& rows, const char* what) {
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (std::size_t j = 0; j < rows[k].size(); ++j) {
        if (rows[k][j] < 0 || rows[k][j] >= num_vertices)
          throw InputError(std::string(what) + " " + std::to_string(k) + " uses vertex " + std::to_string(rows[k][j]) +
                           ", but there are " + std::to_string(num_vertices));
        for (std::size_t i = 0; i < j; ++i)
          if (rows[k][i] == rows[k][j])
            throw InputError(std::string(what) + " " + std::to_string(k) + " uses vertex " +
                             std::to_string(rows[k][j]) + " twice");
      }
  };
  check(triangles, "self-collision triangle");
  check(edges, "self-collision edge");
  num_vertices_ = num_vertices;
  built_ = built;
  triangles_ = triangles;
  vertex_distance_ = distance;
  vertex_friction_ = friction;
  std::vector<char> used(num_vertices, 0);
  for (const auto& t : triangles) for (int v : t) used[v] = 1;
  for (const auto& e : edges) for (int v : e) used[v] = 1;
  points_.clear();
  distance_ = 0.0;
  for (int v = 0; v < num_vertices; ++v)
    if (used[v]) {
      points_.push_back(v);
      distance_ = std::max(distance_, distance[v]);
    }
  std::vector<std::array<int, 2>> sides;  // of the triangles, each sorted
  for (const auto& t : triangles)
    for (int k = 0; k < 3; ++k) sides.push_back({std::min(t[k], t[(k + 1) % 3]), std::max(t[k], t[(k + 1) % 3])});
  std::sort(sides.begin(), sides.end());
  sides.erase(std::unique(sides.begin(), sides.end()), sides.end());
  // Each vertex's neighbours across a triangle's side, sorted (neighbours()).
  neighbour_start_.assign(num_vertices + 1, 0);
  for (const auto& e : sides) ++neighbour_start_[e[0] + 1], ++neighbour_start_[e[1] + 1];
  for (int v = 0; v < num_vertices; ++v) neighbour_start_[v + 1] += neighbour_start_[v];
  neighbours_.resize(neighbour_start_[num_vertices]);
  std::vector<int> next(neighbour_start_.begin(), neighbour_start_.end() - 1);
  for (const auto& e : sides) neighbours_[next[e[0]]++] = e[1], neighbours_[next[e[1]]++] = e[0];
  for (int v = 0; v < num_vertices; ++v)
    std::sort(neighbours_.begin() + neighbour_start_[v], neighbours_.begin() + neighbour_start_[v + 1]);
  // The edges: every side of a triangle (a quad's diagonal too: two quads folded over
  // their shared edge pass through each other across their diagonals), and the wires.
  edges_ = sides;
  wires_.clear();
  for (const auto& e : edges)
    if (!std::binary_search(sides.begin(), sides.end(), std::array<int, 2>{std::min(e[0], e[1]), std::max(e[0], e[1])})) {
      wires_.push_back(e);
      edges_.push_back(e);
    }
  set_patches();
}

void SelfContact::set_patches() {
  // Patches grown breadth-first over the edges from the lowest point not yet in one, so
  // that a patch is a connected piece of one structure (structures simulated together
  // move apart as they like); if that makes too many (many small pieces), neighbours in
  // that order are joined.
  const int size = std::max<int>(kPatchSize, (static_cast<int>(points_.size()) + kMostPatches - 1) / kMostPatches);
  std::vector<int> start(num_vertices_ + 1, 0), joined;  // the edges at each vertex, CSR
  for (const auto& e : edges_) ++start[e[0] + 1], ++start[e[1] + 1];
  for (int v = 0; v < num_vertices_; ++v) start[v + 1] += start[v];
  joined.resize(start[num_vertices_]);
  std::vector<int> next(start.begin(), start.end() - 1), patch_of(num_vertices_, -1);
  for (const auto& e : edges_) joined[next[e[0]]++] = e[1], joined[next[e[1]]++] = e[0];
  std::vector<std::vector<int>> patches;
  for (int seed : points_) {
    if (patch_of[seed] >= 0) continue;
    patches.emplace_back();
    const int p = static_cast<int>(patches.size()) - 1;
    patches[p].push_back(seed);
    patch_of[seed] = p;
    for (std::size_t k = 0; k < patches[p].size() && static_cast<int>(patches[p].size()) < size; ++k)
      for (int i = start[patches[p][k]]; i < start[patches[p][k] + 1] && static_cast<int>(patches[p].size()) < size; ++i)
        if (patch_of[joined[i]] < 0) {
          patch_of[joined[i]] = p;
          patches[p].push_back(joined[i]);
        }
  }
  while (patches.size() > 2 * static_cast<std::size_t>(kMostPatches)) {
    std::vector<std::vector<int>> fewer((patches.size() + 1) / 2);
    for (std::size_t p = 0; p < patches.size(); ++p) {
      for (int v : patches[p]) patch_of[v] = static_cast<int>(p / 2);
      fewer[p / 2].insert(fewer[p / 2].end(), patches[p].begin(), patches[p].end());
    }
    patches.swap(fewer);
  }
  // Every part lies in the patch of each of its vertices: a triangle's corners are
  // joined by its sides, which are among the edges.
  for (const auto& e : edges_) {
    patches[patch_of[e[0]]].push_back(e[1]);
    patches[patch_of[e[1]]].push_back(e[0]);
  }
  patch_start_.assign(1, 0);
  patch_vertices_.clear();
  for (auto& patch : patches) {
    std::sort(patch.begin(), patch.end());
    patch.erase(std::unique(patch.begin(), patch.end()), patch.end());
    patch_vertices_.insert(patch_vertices_.end(), patch.begin(), patch.end());
    patch_start_.push_back(static_cast<int>(patch_vertices_.size()));
  }
}

SelfContact::PatchMoves SelfContact::patch_moves(const std::vector<Vec3>& at, const std::vector<Vec3>& x0,
                                                 const std::vector<Vec3>& x1, const std::vector<double>* margin) const {
  const int k = num_patches();
  PatchMoves m;
  m.ends.resize(k);
  m.grow.assign(k, 0.0);
  for (int p = 0; p < k; ++p) {
    m.ends[p][0].setEmpty();
    m.ends[p][1].setEmpty();
    for (int i = patch_start_[p]; i < patch_start_[p + 1]; ++i) {
      const int v = patch_vertices_[i];
      m.ends[p][0].extend(x0[v] - at[v]);
      m.ends[p][1].extend(x1[v] - at[v]);
      if (margin) m.grow[p] = std::max(m.grow[p], (*margin)[v]);
    }
  }
  return m;
}

double SelfContact::PatchMoves::shrink(int p, int q) const {
  return std::max(farthest_apart(ends[p][0], ends[q][0]), farthest_apart(ends[p][1], ends[q][1]) + grow[p] + grow[q]);
}

bool SelfContact::moved_as_one(const std::vector<Vec3>& at, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                               const std::vector<double>* margin, double skin) const {
  std::array<Box, 2> all;
  all[0].setEmpty();
  all[1].setEmpty();
  double most = 0;
  for (int v : points_) {
    all[0].extend(x0[v] - at[v]);
    all[1].extend(x1[v] - at[v]);
    if (margin) most = std::max(most, (*margin)[v]);
  }
  return std::max(farthest_apart(all[0], all[0]), farthest_apart(all[1], all[1]) + 2 * most) < skin;
}

bool SelfContact::patches_hold(const PatchMoves& m, const std::vector<double>* gaps, double skin) const {
  const int k = num_patches();
  // Each patch with itself, and with every other: a pair not listed was at least the
  // skin beyond its distance (at most distance_), and at least its patches' gap apart.
  for (int p = 0; p < k; ++p)
    if (!(m.shrink(p, p) < skin)) return false;
  if (!gaps) return true;
  for (int p = 0; p < k; ++p)
    for (int q = p + 1; q < k; ++q)
      if (!(m.shrink(p, q) < std::max(skin, (*gaps)[p * k + q] - distance_))) return false;
  return true;
}

SelfWindow SelfContact::open_window(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                    const std::vector<double>& margin, double skin) const {
  SelfWindow w;
  const bool as_one = moved_as_one(x0, x0, x1, &margin, skin);
  const PatchMoves moves = as_one ? PatchMoves() : patch_moves(x0, x0, x1, &margin);
  if (!as_one && !patches_hold(moves, nullptr, skin)) return w;  // (the gaps not computed)
  const int k = num_patches();
  std::vector<Box> boxes(k);
  for (int p = 0; p < k; ++p) {
    boxes[p].setEmpty();
    for (int i = patch_start_[p]; i < patch_start_[p + 1]; ++i) boxes[p].extend(x0[patch_vertices_[i]]);
  }
  w.gaps.assign(static_cast<std::size_t>(k) * k, 0.0);
  for (int p = 0; p < k; ++p)
    for (int q = p + 1; q < k; ++q)
      w.gaps[p * k + q] = box_gap(boxes[p], boxes[q]);
  if (!as_one && !patches_hold(moves, &w.gaps, skin)) return SelfWindow();
  w.at = x0;
  w.skin = skin;
  return w;
}

bool SelfContact::window_holds(const SelfWindow& w, const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                               const std::vector<double>* margin) const {
  const int k = num_patches();
  if (!w.open() || w.gaps.size() != static_cast<std::size_t>(k) * k) return false;
  // All points together first: a structure resting, or moving as one, passes at once.
  if (moved_as_one(w.at, x0, x1, margin, w.skin)) return true;
  return patches_hold(patch_moves(w.at, x0, x1, margin), &w.gaps, w.skin);
}

bool SelfContact::neighbours(int a, int b) const {
  return std::binary_search(neighbours_.begin() + neighbour_start_[a], neighbours_.begin() + neighbour_start_[a + 1],
                            b);
}

double SelfContact::full_distance(const SelfContactPair& pair) const {
  double d = 0;
  for (int v : pair.v) d = std::max(d, vertex_distance_[v]);
  return d;
}

double SelfContact::pair_distance(SelfContactPair pair) const {
  const int split = pair.kind == SelfContactPair::kEdgeEdge ? 2 : 1, last = pair.kind == SelfContactPair::kPointEdge ? 3 : 4;
  int joined = 0;  // pairs of the parts' vertices joined by a triangle's side
  for (int i = 0; i < split; ++i)
    for (int j = split; j < last; ++j) {
      if (pair.v[i] == pair.v[j]) return 0.0;
      joined += neighbours(pair.v[i], pair.v[j]);
    }
  if (joined == 0) return full_distance(pair);
  const std::array<Vec3, 4> x = corners(built_, pair.v);
  pair.side = side_of(pair, x);
  const Nearest built = nearest(pair, x);
  if (!built.ok) return 0.0;
  const bool all_joined = joined == split * (last - split);
  if (all_joined && pair.kind == SelfContactPair::kEdgeEdge) {
    // Four vertices all joined to each other: a quad cut both ways (triangles_of_faces).
    // Of its three pairs of opposite edges, the nearest as built are its diagonals, which
    // cross where it is flat and nearly so where it is warped: left out. Its opposite
    // sides keep their distance, or a quad folded into a bow tie let its neighbours pass
    // through each other (tests/test_core_self_contact.py, test_a_warped_quad_*).
    auto apart = [&](int a0, int a1, int b0, int b1) {
      double s, t;
      segment_parameters(x[a0], x[a1], x[b0], x[b1], s, t);
      return ((1 - s) * x[a0] + s * x[a1] - (1 - t) * x[b0] - t * x[b1]).norm();
    };
    const double here = apart(0, 1, 2, 3);
    if (here <= apart(0, 2, 1, 3) && here <= apart(0, 3, 1, 2)) return 0.0;
  } else if (all_joined) {
    // A point on a triangle of its own face as built (a degenerate face): touching there.
    double size = 0;
    for (int i = 0; i < last; ++i)
      for (int j = 0; j < i; ++j) size = std::max(size, (x[i] - x[j]).norm());
    if (std::abs(built.distance) < kFlat * size) return 0.0;
  }
  return std::min(full_distance(pair), 0.5 * std::abs(built.distance));
}

template <class Visit, class Quick>
void SelfContact::each_near_pair(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                 const std::vector<double>* margin, double reach, int chunks, Visit&& visit,
                                 Quick&& quick) const {
  // The parts' boxes over the step in a frame that moves with the points' mean
  // displacement: a distance between parts is the same in any frame that translates, and
  // in this one a structure falling or carried as one sweeps little.
  Vec3 common = mean_over(points_, [&](int v) { return Vec3(x1[v] - x0[v]); });
  if (!common.allFinite()) common.setZero();  // (a point not finite: the plain sweep)
  auto swept = [&](std::initializer_list<int> vs) {
    Box box;
    box.setEmpty();
    double grow = 0;
    for (int v : vs) {
      box.extend(x0[v]).extend(x1[v] - common);
      if (margin) grow = std::max(grow, (*margin)[v]);
    }
    box.min().array() -= grow;
    box.max().array() += grow;
    return box;
  };
  auto grown = [&](Box box) {
    box.min().array() -= reach;
    box.max().array() += reach;
    return box;
  };
  // Each kind's candidates in `chunks` fixed runs of its items, on the workers; slot
  // kind * chunks + c is run c's (parallel/parallel_for.hpp).
  auto in_chunks = [&](int kind, long items, const std::function<void(long, int)>& item) {
    WorkerPool::shared().run(chunks, [&](int c) {
      const long last = chunk_begin(items, chunks, c + 1);
      for (long i = chunk_begin(items, chunks, c); i < last; ++i) item(i, kind * chunks + c);
    });
  };
  auto offer = [&](SelfContactPair pair, int slot) {
    // Parts that share a vertex are left out (pair_distance): tested first, as most
    // candidates are parts around the same vertex.
    const int split = pair.kind == SelfContactPair::kEdgeEdge ? 2 : 1;
    for (int i = 0; i < split; ++i)
      for (int j = split; j < 4; ++j)
        if (pair.v[i] == pair.v[j]) return;
    Candidate candidate;
    if (!quick(pair, candidate)) return;
    pair.distance = pair_distance(pair);
    if (pair.distance > 0) visit(slot, pair, candidate);
  };
  const bool rebuild = trees_.calls++ % kTreeRebuild == 0;
  auto update = [&](BoxTree& tree, const std::vector<Box>& boxes) -> const BoxTree& {
    if (rebuild) tree.build(boxes);
    else tree.refit(boxes);
    return tree;
  };
  std::vector<Box> boxes(triangles_.size());
  for (std::size_t k = 0; k < triangles_.size(); ++k)
    boxes[k] = swept({triangles_[k][0], triangles_[k][1], triangles_[k][2]});
  const BoxTree& triangle_tree = update(trees_.triangles, boxes);
  in_chunks(0, static_cast<long>(points_.size()), [&](long i, int slot) {
    const int p = points_[i];
    triangle_tree.overlapping(grown(swept({p})), [&](int k) {
      const auto& t = triangles_[k];
      SelfContactPair pair;
      pair.v = {p, t[0], t[1], t[2]};
      offer(pair, slot);
    });
  });
  boxes.resize(edges_.size());
  for (std::size_t k = 0; k < edges_.size(); ++k) boxes[k] = swept({edges_[k][0], edges_[k][1]});
  const BoxTree& edge_tree = update(trees_.edges, boxes);
  in_chunks(1, static_cast<long>(edges_.size()), [&](long k, int slot) {
    const auto& e = edges_[k];
    edge_tree.overlapping(grown(boxes[k]), [&](int other) {
      const auto& o = edges_[other];
      SelfContactPair pair;
      pair.kind = SelfContactPair::kEdgeEdge;
      pair.v = {e[0], e[1], o[0], o[1]};
      offer(pair, slot);
    }, static_cast<int>(k));
  });
  boxes.resize(wires_.size());
  for (std::size_t k = 0; k < wires_.size(); ++k) boxes[k] = swept({wires_[k][0], wires_[k][1]});
  const BoxTree& wire_tree = update(trees_.wires, boxes);
  in_chunks(2, static_cast<long>(points_.size()), [&](long i, int slot) {
    const int p = points_[i];
    wire_tree.overlapping(grown(swept({p})), [&](int k) {
      const auto& e = wires_[k];
      SelfContactPair pair;
      pair.kind = SelfContactPair::kPointEdge;
      pair.v = {p, e[0], e[1], e[1]};
      offer(pair, slot);
    });
  });
}

std::vector<SelfContactPair> SelfContact::pairs(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                                const std::vector<double>& margin, const std::vector<Vec3>& v0,
                                                const std::vector<double>& inverse_mass,
                                                const std::vector<double>& spring_stiffness, double g_ref,
                                                const std::vector<SelfContactPair>& previous, bool& touching) const {
  std::vector<SelfContactPair> out;
  touching = false;
  if (!enabled()) return out;
  std::vector<std::pair<std::array<int, 5>, double>> kept;  // previous pairs' stiffness, by key
  for (const SelfContactPair& p : previous) kept.push_back({key(p), p.stiffness});
  // (a list comes out in key order unless its edges mix triangles' sides and wires)
  if (!std::is_sorted(kept.begin(), kept.end())) std::sort(kept.begin(), kept.end());
  auto quick = [&](const SelfContactPair& pair, Candidate& c) {
    c.shrink = most_shrink(pair, x0, x1, &margin);
    return may_come_within(pair, x0, distance_ + c.shrink, c.at);
  };
  // Listed in chunks on the workers, each into its own slot, joined in slot order: the
  // same list on any number of workers (each_near_pair).
  const int chunks = chunk_count(static_cast<long>(points_.size() + edges_.size()), kListGrain);
  std::vector<std::vector<SelfContactPair>> listed(3 * chunks);
  std::vector<char> slot_touching(3 * chunks, 0);
  each_near_pair(x0, x1, &margin, distance_, chunks, [&](int slot, SelfContactPair pair, const Candidate& c) {
    const Nearest& at = c.at;
    if (!at.ok || std::abs(at.distance) - c.shrink >= pair.distance) return;
    pair.side = side_of(pair, corners(x0, pair.v));
    double inverse = 0, springs = 0, lightest = 0;
    Vec3 relative = Vec3::Zero();
    for (int j = 0; j < 4; ++j) {
      inverse += at.w[j] * at.w[j] * inverse_mass[pair.v[j]];
      lightest = std::max(lightest, inverse_mass[pair.v[j]]);
      springs = std::max(springs, spring_stiffness[pair.v[j]]);
      relative += at.w[j] * v0[pair.v[j]];
    }
    if (!(lightest > 0)) return;  // fixes only
    // Nearest at a fix's end now, a free vertex's end may come nearest in the step
    // (test_a_pair_nearest_at_a_fix_is_kept): weighed as that vertex.
    if (!(inverse > 0)) inverse = lightest;
    for (int v : pair.v) pair.friction = std::max(pair.friction, vertex_friction_[v]);
    pair.mass = 1 / inverse;
    pair.clearance = clearance_at(at, pair);
    const auto found = std::lower_bound(kept.begin(), kept.end(), std::make_pair(key(pair), -1.0));
    pair.carried = found != kept.end() && found->first == key(pair);
    pair.stiffness = pair.carried ? found->second
                                  : contact_stiffness(pair.mass, g_ref, pair.distance, springs, relative.norm());
    if (!slot_touching[slot]) {
      const Nearest end = nearest(pair, corners(x1, pair.v));
      slot_touching[slot] = std::abs(at.distance) < pair.distance || (end.ok && end.distance < pair.distance);
    }
    listed[slot].push_back(pair);
  }, quick);
  // Each slot's pairs in the order of their vertices, not of the box trees' visits: the
  // same list whatever shape the trees have (kTreeRebuild).
  WorkerPool::shared().run(3 * chunks, [&](int slot) {
    std::sort(listed[slot].begin(), listed[slot].end(),
              [](const SelfContactPair& a, const SelfContactPair& b) { return key(a) < key(b); });
  });
  for (int slot = 0; slot < 3 * chunks; ++slot) {
    out.insert(out.end(), listed[slot].begin(), listed[slot].end());
    touching = touching || slot_touching[slot];
  }
  return out;
}

std::string SelfContact::crossing(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                  const std::vector<SelfContactPair>& listed,
                                  const std::vector<Vec3>* listed_at) const {
  if (listed_at && listed_at->size() != x0.size()) listed_at = nullptr;
  const std::vector<Vec3> none;
  const Displacements moved0(listed_at ? moved_since(*listed_at, x0) : none, points_),
      moved1(listed_at ? moved_since(*listed_at, x1) : none, points_);
  // In chunks on the workers; the first crossing pair in the list's order is named, on
  // any number of workers.
  const long n = static_cast<long>(listed.size());
  const int chunks = chunk_count(n, kListGrain);
  std::vector<long> first(chunks, -1);
  WorkerPool::shared().run(chunks, [&](int c) {
    const long last = chunk_begin(n, chunks, c + 1);
    for (long k = chunk_begin(n, chunks, c); k < last; ++k) {
      const SelfContactPair& pair = listed[k];
      if (pair.kind == SelfContactPair::kPointEdge) continue;  // a point passes a line nowhere
      if (listed_at && moved0.apart(pair) && moved1.apart(pair)) continue;
      const double touch = 1e-3 * pair.distance;
      const std::array<Vec3, 4> a = corners(x0, pair.v), b = corners(x1, pair.v);
      // The distance can shrink by at most twice the farthest move: a pair farther apart
      // at the start cannot meet.
      double move = 0;
      for (int j = 0; j < 4; ++j) move = std::max(move, (b[j] - a[j]).norm());
      const Nearest start = nearest(pair, a);
      if (start.ok && std::abs(start.distance) > 2 * move + touch) continue;
      if (meets(pair, a, b, touch)) {
        first[c] = k;
        return;
      }
    }
  });
  for (long k : first)
    if (k >= 0) return describe(listed[k]) + " pass through each other";
  return {};
}

std::string SelfContact::missed(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                                const std::vector<SelfContactPair>& listed, const std::vector<double>& inverse_mass,
                                const std::vector<char>* strayed) const {
  std::vector<std::array<int, 5>> known(listed.size());
  for (std::size_t k = 0; k < listed.size(); ++k) known[k] = key(listed[k]);
  std::sort(known.begin(), known.end());
  // The pairs not listed that come near on the way, in slot order (the same on any number
  // of workers), then the first of them that acts at an end or crosses.
  const int chunks = chunk_count(static_cast<long>(points_.size() + edges_.size()), kListGrain);
  std::vector<std::vector<SelfContactPair>> found(3 * chunks);
  each_near_pair(x0, x1, nullptr, distance_, chunks, [&](int slot, const SelfContactPair& pair, const Candidate& c) {
    if (std::abs(c.at.distance) - c.shrink >= pair.distance) return;
    const bool free = std::any_of(pair.v.begin(), pair.v.end(), [&](int v) { return inverse_mass[v] > 0; });
    if (free && !std::binary_search(known.begin(), known.end(), key(pair))) found[slot].push_back(pair);
  }, [&](const SelfContactPair& pair, Candidate& c) {
    if (strayed && std::none_of(pair.v.begin(), pair.v.end(), [&](int v) { return (*strayed)[v] != 0; }))
      return false;
    c.shrink = most_shrink(pair, x0, x1, nullptr);
    return may_come_within(pair, x0, distance_ + c.shrink, c.at);
  });
  std::vector<SelfContactPair> unlisted;
  for (auto& slot : found) {
    std::sort(slot.begin(), slot.end(), [](const SelfContactPair& a, const SelfContactPair& b) { return key(a) < key(b); });
    unlisted.insert(unlisted.end(), slot.begin(), slot.end());
  }
  for (const SelfContactPair& pair : unlisted) {
    const Nearest start = nearest(pair, corners(x0, pair.v)), end = nearest(pair, corners(x1, pair.v));
    if ((start.ok && std::abs(start.distance) < pair.distance) || (end.ok && std::abs(end.distance) < pair.distance))
      return describe(pair) + " came within their distance unlisted";
  }
  return crossing(x0, x1, unlisted);
}

bool SelfContact::touching(const std::vector<Vec3>& x0, const std::vector<Vec3>& x1,
                           const std::vector<SelfContactPair>& listed, const std::vector<Vec3>& listed_at) const {
  const bool since = listed_at.size() == x0.size();
  const std::vector<Vec3> none;
  const Displacements moved0(since ? moved_since(listed_at, x0) : none, points_),
      moved1(since ? moved_since(listed_at, x1) : none, points_);
  for (const SelfContactPair& pair : listed) {
    if (since && moved0.apart(pair) && moved1.apart(pair)) continue;
    for (const std::vector<Vec3>* x : {&x0, &x1}) {
      const Nearest at = nearest(pair, corners(*x, pair.v));
      if (at.ok && std::abs(at.distance) < pair.distance) return true;
    }
  }
  return false;
}

double SelfContact::closest_parts(const std::vector<Vec3>& x, std::string& where, double* keeps,
                                  const std::vector<int>* labels) const {
  double closest = std::numeric_limits<double>::infinity(), tightest = closest;
  if (!enabled()) return closest;
  auto quick = [&](const SelfContactPair& pair, Candidate& c) {
    const int other = pair.kind == SelfContactPair::kEdgeEdge ? 2 : 1;  // the second part's first vertex
    if (labels && (*labels)[pair.v[0]] == (*labels)[pair.v[other]]) return false;
    c.at = nearest(pair, corners(x, pair.v));
    return true;
  };
  each_near_pair(x, x, nullptr, distance_, 1, [&](int, const SelfContactPair& pair, const Candidate& c) {
    const Nearest& at = c.at;
    const double full = full_distance(pair);
    if (pair.distance < full) return;  // neighbours: they keep what they have
    const double d = at.ok ? std::abs(at.distance) : 0.0;
    if (d / full < tightest) {
      tightest = d / full;
      closest = d;
      where = describe(pair);
      if (keeps) *keeps = full;
    }
  }, quick);
  return closest;
}

double SelfContact::clearance(const SelfContactPair& p, const std::array<Vec3, 4>& x) const {
  SelfContactPair unsigned_pair = p;
  unsigned_pair.side = 1.0;
  const Nearest at = nearest(unsigned_pair, x);
  return at.ok ? clearance_at(at, p) : -p.distance;
}

SelfContactTerms SelfContact::terms(const SelfContactPair& pair, const std::array<Vec3, 4>& x,
                                    const std::array<Vec3, 4>& v, double g_ref) const {
  SelfContactTerms out;
  const Nearest at = nearest(pair, x);
  if (!at.ok) return out;
  if (at.distance >= pair.distance) {
    out.clearance = at.distance - pair.distance;  // (on its own side: the distance's size)
    return out;
  }
  // The colliders' law, on the vector between the nearest points and its velocity: the
  // distance's derivative by vertex j is w_j n (the nearest points are where the distance
  // is least, so their own motion does not change it).
  ContactPoint c;
  c.touching = true;
  c.normal = at.n;
  c.distance = std::max(at.distance, std::numeric_limits<double>::min());  // curvature / distance: 0
  c.thickness = pair.distance;
  c.ramp = kSelfContactRamp * pair.distance;
  c.friction = pair.friction;
  c.damper_friction = true;
  Vec3 relative = Vec3::Zero();
  for (int j = 0; j < 4; ++j) relative += at.w[j] * v[j];
  const ContactForce f = contact_force(c, pair.mass, pair.stiffness, relative, g_ref, true);
  // (the share's own derivative is left out: it acts only on edges turned almost parallel)
  const double share = pair.kind == SelfContactPair::kEdgeEdge ? edge_share(x) : 1.0;
  if (share == 0) return out;
  out.touching = true;
  out.energy = share * f.energy;
  out.w = at.w;
  for (int j = 0; j < 4; ++j) out.f[j] = share * at.w[j] * f.f;
  out.A = share * f.A;
  out.B = share * f.B;
  return out;
}

}  // namespace ms
