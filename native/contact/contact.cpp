// Colliders: their geometry, motion and hierarchy, the nearest-point and tunnelling
// queries, and the contact force law (contact.hpp).
#include "contact/contact.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>

namespace ms {

namespace {

using Box = Eigen::AlignedBox3d;

std::string fmt(double x) { return std::to_string(x); }

}  // namespace

Vec3 closest_weights(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const Vec3 ab = b - a, ac = c - a, ap = p - a;
  const double d1 = ab.dot(ap), d2 = ac.dot(ap);
  if (d1 <= 0 && d2 <= 0) return {1, 0, 0};
  const Vec3 bp = p - b;
  const double d3 = ab.dot(bp), d4 = ac.dot(bp);
  if (d3 >= 0 && d4 <= d3) return {0, 1, 0};
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    const double s = d1 / (d1 - d3);
    return {1 - s, s, 0};
  }
  const Vec3 cp = p - c;
  const double d5 = ab.dot(cp), d6 = ac.dot(cp);
  if (d6 >= 0 && d5 <= d6) return {0, 0, 1};
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    const double s = d2 / (d2 - d6);
    return {1 - s, 0, s};
  }
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
    const double s = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    return {0, 1 - s, s};
  }
  const double denom = 1 / (va + vb + vc);
  const double v = vb * denom, w = vc * denom;
  return {1 - v - w, v, w};
}

// ---------------------------------------------------------------- BoxTree

void BoxTree::build(const std::vector<Box>& boxes) {
  nodes_.clear();
  boxes_ = boxes;
  order_.resize(boxes.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (!boxes.empty()) build_node(boxes, 0, static_cast<int>(boxes.size()));
}

void BoxTree::refit(const std::vector<Box>& boxes) {
  if (boxes.size() != boxes_.size()) return build(boxes);
  boxes_ = boxes;
  // Children come after their parent (build_node): from the last node back, every
  // child's box is new before its parent's.
  for (auto node = nodes_.rbegin(); node != nodes_.rend(); ++node) {
    node->box.setEmpty();
    if (node->left < 0) {
      for (int k = node->first; k < node->first + node->count; ++k) node->box.extend(boxes_[order_[k]]);
    } else {
      node->box.extend(nodes_[node->left].box).extend(nodes_[node->right].box);
    }
  }
}

int BoxTree::build_node(const std::vector<Box>& boxes, int first, int count) {
  const int index = static_cast<int>(nodes_.size());
  nodes_.push_back({});
  Box box;
  box.setEmpty();
  for (int k = first; k < first + count; ++k) box.extend(boxes[order_[k]]);
  nodes_[index].box = box;
  constexpr int kLeafSize = 4;
  if (count <= kLeafSize) {
    nodes_[index].first = first;
    nodes_[index].count = count;
    nodes_[index].last = *std::max_element(order_.begin() + first, order_.begin() + first + count);
    return index;
  }
  // Split at the median of the box centres along the longest axis.
  int axis;
  box.sizes().maxCoeff(&axis);
  const int half = count / 2;
  std::nth_element(order_.begin() + first, order_.begin() + first + half,
                   order_.begin() + first + count, [&](int i, int j) {
                     return boxes[i].center()(axis) < boxes[j].center()(axis);
                   });
  const int left = build_node(boxes, first, half);
  const int right = build_node(boxes, first + half, count - half);
  nodes_[index].left = left;
  nodes_[index].right = right;
  nodes_[index].last = std::max(nodes_[left].last, nodes_[right].last);
  return index;
}


// ---------------------------------------------------------------- Colliders

void Colliders::set(const std::vector<Vec3>& vertices,
                    const std::vector<std::array<int, 3>>& triangles,
                    const std::vector<double>& thickness, const std::vector<double>& friction) {
  const int nv = static_cast<int>(vertices.size());
  if (thickness.size() != triangles.size() || friction.size() != triangles.size())
    throw InputError("colliders: thickness and friction need one value per triangle");
  for (int k = 0; k < nv; ++k)
    if (!vertices[k].allFinite() || vertices[k].cwiseAbs().maxCoeff() > 1e9)
      throw InputError("collider vertex " + std::to_string(k) +
                       " is not finite or beyond 1e9");
  std::vector<std::array<int, 3>> kept;
  std::vector<double> kept_thickness, kept_friction;
  for (std::size_t t = 0; t < triangles.size(); ++t) {
    for (int k : triangles[t])
      if (k < 0 || k >= nv)
        throw InputError("collider triangle " + std::to_string(t) + " uses vertex " +
                         std::to_string(k) + ", but there are " + std::to_string(nv));
    if (!(std::isfinite(thickness[t]) && thickness[t] > 0 && thickness[t] <= 1e9))
      throw InputError("collider triangle " + std::to_string(t) +
                       ": thickness must be positive, got " + fmt(thickness[t]));
    if (!(std::isfinite(friction[t]) && friction[t] >= 0 && friction[t] <= 1e3))
      throw InputError("collider triangle " + std::to_string(t) +
                       ": friction must be zero or positive, got " + fmt(friction[t]));
    const Vec3 &a = vertices[triangles[t][0]], &b = vertices[triangles[t][1]],
               &c = vertices[triangles[t][2]];
    // Triangles without area have no surface to touch (their edges belong to others).
    const double scale = std::max({(b - a).squaredNorm(), (c - a).squaredNorm(), 1e-300});
    if ((b - a).cross(c - a).norm() <= 1e-12 * scale) continue;
    kept.push_back(triangles[t]);
    kept_thickness.push_back(thickness[t]);
    kept_friction.push_back(friction[t]);
  }
  // Same triangles: the colliders move there from where they are during the next call
  // (compared as given: a face that gains or loses its area does not make a jump).
  const bool same = triangles == given_triangles_ && vertices.size() == start_.size();
  if (!same) start_ = vertices;
  given_triangles_ = triangles;
  target_ = vertices;
  triangles_ = std::move(kept);
  thickness_ = std::move(kept_thickness);
  friction_ = std::move(kept_friction);
  moving_ = start_ != target_;
  in_call_ = false;
  welded_.resize(vertices.size());
  std::vector<int> by_position(vertices.size());
  std::iota(by_position.begin(), by_position.end(), 0);
  auto before = [&](int i, int j) {
    const Vec3 &a = vertices[i], &b = vertices[j];
    return std::tie(a.x(), a.y(), a.z(), i) < std::tie(b.x(), b.y(), b.z(), j);
  };
  std::sort(by_position.begin(), by_position.end(), before);
  for (std::size_t k = 0; k < by_position.size(); ++k) {
    const int i = by_position[k];
    const bool repeat = k > 0 && vertices[i] == vertices[by_position[k - 1]];
    welded_[i] = repeat ? welded_[by_position[k - 1]] : i;
  }
  // The triangles around each (welded) vertex.
  fan_start_.assign(vertices.size() + 1, 0);
  for (const auto& tri : triangles_)
    for (int k : tri) ++fan_start_[welded_[k] + 1];
  for (std::size_t v = 0; v < vertices.size(); ++v) fan_start_[v + 1] += fan_start_[v];
  fan_.resize(fan_start_.back());
  std::vector<int> next(fan_start_.begin(), fan_start_.end() - 1);
  for (std::size_t t = 0; t < triangles_.size(); ++t)
    for (int k : triangles_[t]) fan_[next[welded_[k]]++] = static_cast<int>(t);
  // Over the boxes the triangles sweep from start to target: valid all along the path.
  std::vector<Box> boxes(triangles_.size());
  for (std::size_t t = 0; t < triangles_.size(); ++t) {
    Box b;
    b.setEmpty();
    for (int k : triangles_[t]) b.extend(start_[k]).extend(target_[k]);
    boxes[t] = b.extend(b.min() - Vec3::Constant(thickness_[t]))
                   .extend(b.max() + Vec3::Constant(thickness_[t]));
  }
  tree_.build(boxes);
  ++version_;
  ++tree_version_;
}

void Colliders::near_triangles(const Box& box, std::vector<int>& near) const {
  near.clear();
  tree_.overlapping(box, [&](int tri) { near.push_back(tri); });
}

double Colliders::thickest() const {
  return thickness_.empty() ? 0.0 : *std::max_element(thickness_.begin(), thickness_.end());
}

void Colliders::clear() { set({}, {}, {}, {}); }

Vec3 Colliders::vertex(int k, double t) const {
  if (!moving_ || !in_call_) return start_[k];
  const double s = std::clamp((t - t0_) / duration_, 0.0, 1.0);
  return start_[k] + s * (target_[k] - start_[k]);
}

double Colliders::largest_move() const {
  double move = 0;
  if (moving_)
    for (std::size_t k = 0; k < start_.size(); ++k)
      move = std::max(move, (target_[k] - start_[k]).norm());
  return move;
}

double Colliders::thinnest() const {
  return thickness_.empty() ? 0.0 : *std::min_element(thickness_.begin(), thickness_.end());
}

void Colliders::begin_call(double t0, double duration) {
  ++version_;
  t0_ = t0;
  duration_ = duration;
  in_call_ = true;
}

void Colliders::end_call() {
  ++version_;
  in_call_ = false;
  start_ = target_;
  moving_ = false;
}

void Colliders::stop_at(double t) {
  ++version_;
  if (!in_call_) return;
  for (std::size_t k = 0; k < start_.size(); ++k) start_[k] = vertex(static_cast<int>(k), t);
  in_call_ = false;
  moving_ = start_ != target_;
}

Colliders::Foot Colliders::foot(int tri, const Vec3& p, double t, const Vec3& velocity) const {
  Foot f;
  f.tri = tri;
  f.touching = false;
  f.normal.setZero();
  const auto& ix = triangles_[tri];
  const Vec3 a = vertex(ix[0], t), b = vertex(ix[1], t), c = vertex(ix[2], t);
  f.w = closest_weights(p, a, b, c);
  if ((f.w.array() != 0.0).all()) {
    // Over the face: distance and normal from the face's plane, exact even for a mass
    // lying in it (where p - q is round-off and the normal would point anywhere). A mass
    // in the plane goes to the face's front, or to its back if it moves that way
    // (test_mass_in_the_plane_of_a_collider_goes_to_one_side).
    const Vec3 face = (b - a).cross(c - a).normalized();
    const double side = face.dot(p - a);
    f.distance = std::abs(side);
    f.normal = side > 0 || (side == 0 && face.dot(velocity) >= 0) ? face : Vec3(-face);
  } else {
    const Vec3 q = f.w(0) * a + f.w(1) * b + f.w(2) * c;
    f.distance = (p - q).norm();
    if (f.distance == 0) return f;  // on an edge or corner exactly: no direction to push
    f.normal = (p - q) / f.distance;
  }
  f.touching = f.distance < thickness_[tri];
  return f;
}

int Colliders::feature(const Foot& f, std::array<int, 3>& corners) const {
  // A weight within round-off of zero counts as zero: over an edge two triangles' feet
  // may both come out inside their faces by 1e-17, and the plane would be touched twice
  // (test_a_plane_is_touched_once_even_over_its_diagonal).
  constexpr double kRoundOff = 1e-12;
  int n = 0;
  corners = {-1, -1, -1};
  for (int k = 0; k < 3; ++k)
    if (f.w(k) > kRoundOff) corners[n++] = welded_[triangles_[f.tri][k]];
  std::sort(corners.begin(), corners.begin() + n);
  return n;
}

bool Colliders::bends_toward(int other, int tri, const Vec3& p, double t) const {
  const auto& ix = triangles_[tri];
  const Vec3 a = vertex(ix[0], t), n = (vertex(ix[1], t) - a).cross(vertex(ix[2], t) - a);
  const auto& ox = triangles_[other];
  const Vec3 centre = (vertex(ox[0], t) + vertex(ox[1], t) + vertex(ox[2], t)) / 3.0;
  const double side = n.dot(p - a), rise = n.dot(centre - a);
  // Beyond round-off of the triangles' size: coplanar neighbours do not bend.
  const double size = (vertex(ix[1], t) - a).squaredNorm() + (vertex(ix[2], t) - a).squaredNorm();
  return side * rise > 0 && std::abs(rise) > 1e-9 * n.norm() * std::sqrt(size);
}

bool Colliders::reports(const Foot& f, const Vec3& p, double t, const Vec3& velocity, const Foot* known,
                        int known_count) const {
  std::array<int, 3> corners;
  const int n = feature(f, corners);
  const double gap = f.distance - thickness_[f.tri];
  if (n == 3) return true;  // a face's inside (duplicates: contacts())
  // The triangles around the edge or corner (all, not only those near p: a thin
  // neighbour counts as much as a thick one).
  for (int q = fan_start_[corners[0]]; q < fan_start_[corners[0] + 1]; ++q) {
    const int other = fan_[q];
    if (other == f.tri) continue;
    bool around = true;
    for (int k = 1; k < n; ++k) {
      bool has = false;
      for (int c : triangles_[other]) has = has || welded_[c] == corners[k];
      around = around && has;
    }
    if (!around) continue;
    const Foot* found = std::find_if(known, known + known_count, [&](const Foot& k) { return k.tri == other; });
    const Foot g = found != known + known_count ? *found : foot(other, p, t, velocity);
    std::array<int, 3> other_corners;
    if (feature(g, other_corners) == n && other_corners == corners) {
      // The same point: reported once, by the deepest (then the first) of them.
      const double other_gap = g.distance - thickness_[other];
      if (g.touching && (other_gap < gap || (other_gap == gap && other < f.tri))) return false;
    } else if (!bends_toward(other, f.tri, p, t)) {
      // Its nearest point is elsewhere: this point is no minimum of the distance over a
      // flat or convex neighbour. Over a concave one (a crease seen from inside) it
      // still counts, so that its force fades with depth instead of jumping when its
      // nearest point moves onto the face (a mass deep in a V trough).
      return false;
    }
  }
  return true;
}

ContactPoint Colliders::contact_point(const Foot& f, double t) const {
  ContactPoint c;
  c.touching = true;
  c.distance = std::max(f.distance, 1e-12 * thickness_[f.tri]);
  c.normal = f.normal;
  c.thickness = thickness_[f.tri];
  c.friction = friction_[f.tri];
  const Vec3& w = f.w;
  const auto& ix = triangles_[f.tri];
  const int zeros = (w.array() == 0.0).count();
  if (zeros > 0) {
    const Mat3 across = Mat3::Identity() - f.normal * f.normal.transpose();
    if (zeros == 2) {
      c.curvature = across;
    } else {
      const Vec3 e0 = vertex(w(0) == 0 ? ix[1] : ix[0], t), e1 = vertex(w(2) == 0 ? ix[1] : ix[2], t);
      const Vec3 e = (e1 - e0).normalized();
      c.curvature = across - e * e.transpose();
    }
  }
  if (moving_ && in_call_)
    for (int k = 0; k < 3; ++k) c.surface_velocity += w(k) * (target_[ix[k]] - start_[ix[k]]) / duration_;
  return c;
}

ContactPoint Colliders::nearest(const Vec3& p, double t, const Vec3& velocity) const {
  Foot best;
  best.touching = false;
  double best_gap = 0;  // distance - thickness of the best so far (< 0: touching)
  tree_.containing(p, [&](int tri) {
    const Foot f = foot(tri, p, t, velocity);
    if (f.touching && f.distance - thickness_[tri] < best_gap) {
      best_gap = f.distance - thickness_[tri];
      best = f;
    }
  });
  return best.touching ? contact_point(best, t) : ContactPoint();
}

bool Colliders::crosses(const Vec3& p0, const Vec3& p1, double t0, double t1) const {
  Box box(p0.cwiseMin(p1), p0.cwiseMax(p1));  // the tree's boxes hold each triangle's sweep
  bool hit = false;
  tree_.overlapping(box, [&](int tri) {
    if (hit) return;
    const auto& ix = triangles_[tri];
    // The mass's side of the triangle's plane at the start and at the end, each with the
    // triangle where it is then: a collider that moves past a mass crosses it as surely
    // as a mass that moves through a collider.
    const Vec3 a0 = vertex(ix[0], t0), b0 = vertex(ix[1], t0), c0 = vertex(ix[2], t0);
    const Vec3 n0 = (b0 - a0).cross(c0 - a0);
    const double s0 = n0.dot(p0 - a0);
    double s1;
    if (moving_ && in_call_) {
      const Vec3 a1 = vertex(ix[0], t1), b1 = vertex(ix[1], t1), c1 = vertex(ix[2], t1);
      s1 = (b1 - a1).cross(c1 - a1).dot(p1 - a1);
    } else {
      s1 = n0.dot(p1 - a0);  // where it stands still: the same plane at t1
    }
    if (s0 * s1 >= 0) return;  // on one side (or starting or ending in the plane)
    // Where and when it passes the plane (exact for a translation), and whether the
    // triangle is there then.
    const double f = s0 / (s0 - s1);
    const double t = t0 + f * (t1 - t0);
    const Vec3 a = vertex(ix[0], t), b = vertex(ix[1], t), c = vertex(ix[2], t);
    const Vec3 n = (b - a).cross(c - a);
    const Vec3 x = p0 + f * (p1 - p0);
    const double u = n.dot((b - a).cross(x - a)), v = n.dot((c - b).cross(x - b)),
                 w = n.dot((a - c).cross(x - c));
    // u, v and w are |n|^2 times x's barycentric weights. A segment through an edge or a
    // corner meets its triangles there only up to round-off, and may miss them all: each
    // triangle is widened by 1e-9 of its size (a mass falling along a sphere's seam
    // passed through it, test_mass_inside_a_sphere_stays_inside).
    const double slack = -1e-9 * n.squaredNorm();
    hit = (u >= slack && v >= slack && w >= slack);
  });
  return hit;
}

bool Colliders::way_out(const Vec3& p, double t, const Vec3& side, Vec3& move) const {
  // Within round-off of the surface (a sheet modelled in a floor's plane, where the side of
  // a face is the sign of round-off, or over the floor's diagonal, where p - q has no
  // direction at all) the way out is the normal of the face there that faces `side` most
  // (test_a_sheet_in_a_floors_plane_starts_on_it).
  constexpr double kOnSurface = 1e-9;  // of the thickness
  move.setZero();
  for (int round = 0; round <= kWayOutRounds; ++round) {
    const Vec3 at = p + move;
    Vec3 normal = Vec3::Zero();
    double depth = 0, thickness = 0;
    contacts(at, t, side, [&](const ContactPoint& c) {
      if (c.distance > kOnSurface * c.thickness && c.thickness - c.distance > depth) {
        depth = c.thickness - c.distance;
        normal = c.normal;
        thickness = c.thickness;
      }
    });
    // A mass resting on a collider sinks a little into it (7e-4 of its thickness under its
    // weight, contact_stiffness): it lies on the surface already.
    if (round == 0 && depth > 0 && depth < kSettledDepth * thickness) return true;
    if (depth == 0) {
      double facing = -2;
      tree_.containing(at, [&](int tri) {
        const Foot f = foot(tri, at, t, side);
        if (f.distance > kOnSurface * thickness_[tri]) return;
        const auto& ix = triangles_[tri];
        const Vec3 a = vertex(ix[0], t);
        Vec3 face = (vertex(ix[1], t) - a).cross(vertex(ix[2], t) - a).normalized();
        if (face.dot(side) < 0) face = -face;
        const double f_facing = side.norm() > 0 ? face.dot(side) / side.norm() : 1.0;
        if (f_facing > facing) {
          facing = f_facing;
          depth = thickness_[tri] - f.distance;
          normal = face;
          thickness = thickness_[tri];
        }
      });
      if (depth == 0) return true;  // out of every thickness
    }
    if (round == kWayOutRounds) break;
    // Checked for crossings from just off the surface: from within round-off of a face, its
    // side is the sign of round-off, and leaving would count as crossing it.
    const Vec3 next = at + (depth + kWayOutMargin * thickness) * normal;
    if (crosses(at + kOnSurface * thickness * normal, next, t, t)) return false;
    move = next - p;
  }
  return false;  // still within a thickness (a gap narrower than two of them)
}

bool Colliders::reaches(const Box& box, const Vec3& direction, double level, double t) const {
  bool found = false;
  tree_.overlapping(box, [&](int tri) {
    if (found) return;
    // The triangle's part within the box (clipped by its six planes, Sutherland-Hodgman),
    // and its corners beyond the level: a floor sloping up far off lies below a sheet
    // within the box.
    std::vector<Vec3> polygon;
    for (int k : triangles_[tri]) polygon.push_back(vertex(k, t));
    for (int axis = 0; axis < 3 && !polygon.empty(); ++axis)
      for (int side = 0; side < 2 && !polygon.empty(); ++side) {
        const double bound = side == 0 ? box.min()(axis) : box.max()(axis);
        auto inside = [&](const Vec3& x) { return side == 0 ? x(axis) >= bound : x(axis) <= bound; };
        std::vector<Vec3> clipped;
        for (std::size_t k = 0; k < polygon.size(); ++k) {
          const Vec3 &a = polygon[k], &b = polygon[(k + 1) % polygon.size()];
          if (inside(a)) clipped.push_back(a);
          if (inside(a) != inside(b)) clipped.push_back(a + (bound - a(axis)) / (b(axis) - a(axis)) * (b - a));
        }
        polygon = std::move(clipped);
      }
    for (const Vec3& x : polygon) found = found || x.dot(direction) > level;
  });
  return found;
}

double Colliders::largest_speed() const {
  return in_call_ && duration_ > 0 ? largest_move() / duration_ : 0.0;
}

// ---------------------------------------------------------------- the force law

ContactForce contact_force(const ContactPoint& c, double m, double k, const Vec3& v,
                           double g_ref, bool lagged, bool derivatives) {
  ContactForce out;
  if (!c.touching) return out;
  const Vec3& n = c.normal;
  const double pen = c.thickness - c.distance;  // > 0; d pen / d p = -n^T
  // Elastic: T(pen) n, with T = k pen^2 / (2 sink) up to pen = sink, then k (pen - sink / 2).
  // The stiffness grows from 0 instead of jumping to k at the surface: at a jump, Newton
  // cycles between a point inside (stiff) and one just outside (free) (a sheet landing on
  // a plane, tests/test_core_contact.py); with a derivative that is continuous and growing,
  // it converges.
  const double sink_e = c.ramp > 0 ? c.ramp : contact_ramp(c.thickness);
  const bool ramp = pen < sink_e;
  const double T = ramp ? 0.5 * k * pen * pen / sink_e : k * (pen - 0.5 * sink_e);
  const double dT = ramp ? k * pen / sink_e : k;
  out.f = T * n;
  out.energy = ramp ? k * pen * pen * pen / (6 * sink_e)
                    : k * sink_e * sink_e / 6 + 0.5 * k * (pen - 0.5 * sink_e) * (pen - 0.5 * sink_e) -
                          k * sink_e * sink_e / 8;
  // Damping along n: c(pen) = 2 sqrt(k m) min(u, 1), u = pen / damping_depth. (Growing
  // as u^2 deeper let a mass that starts deep inside out at 0.6 instead of 4.3 m/s, but
  // made a sheet dropped onto a ball 1.6x slower: docs/performance.md.)
  const Vec3 vr = v - c.surface_velocity;
  const double vn = n.dot(vr);
  const double c_full = 2 * std::sqrt(k * m);
  const double damp_depth = kContactDampingShare * c.thickness;
  const double u = pen / damp_depth;
  const double damp = c_full * std::min(u, 1.0);
  // The damper would pull a leaving mass back: a contact only pushes, so it lets go
  // (no normal force; test_mass_in_the_plane_of_a_collider_goes_to_one_side).
  const bool pushes = T - damp * vn >= 0;
  if (pushes)
    out.f -= damp * vn * n;
  else
    out.f.setZero();
  // Friction: -mu T s(vt), s(vt) = vt / sqrt(|vt|^2 + eps^2).
  Vec3 vt, s;
  double r = 0;
  if (c.friction > 0) {
    vt = (Mat3::Identity() - n * n.transpose()) * vr;
    const double eps = c.slip_speed > 0 ? c.slip_speed : friction_speed(g_ref);
    r = std::sqrt(vt.squaredNorm() + eps * eps);
    s = vt / r;
    out.f -= c.friction * T * s;
  }
  if (!derivatives) return out;

  // A = -dF/dp, B = -dF/dv. n turns with p where the surface is curved (an edge or a
  // corner): dn = d n / d p; on a face's inside it is 0 and its terms are left out.
  const Mat3 nn = n * n.transpose();
  const bool curved = (c.curvature.array() != 0.0).any();
  const Mat3 dn = curved ? Mat3(c.curvature / c.distance) : Mat3::Zero();
  out.A = dT * nn;
  if (curved) out.A -= T * dn;
  if (pushes) {
    const double ddamp = u < 1 ? c_full / damp_depth : 0.0;  // d c / d pen
    // -d/dp(-c vn n) with d c/dp = -ddamp n^T ... (Newton's matrix, `lagged`, leaves it
    // out where it is negative, a mass leaving the surface: it keeps the matrix definite)
    if (!lagged || vn < 0) out.A -= ddamp * vn * nn;
    if (curved) out.A += damp * (n * (vr.transpose() * dn) + vn * dn);  // ... and with n turning
    out.B += damp * nn;
  } else {
    out.A.setZero();
  }
  if (c.friction > 0) {
    const Mat3 P = Mat3::Identity() - nn;
    const Mat3 ds_dvt = c.damper_friction ? Mat3(Mat3::Identity() / r)
                                          : Mat3(Mat3::Identity() / r - vt * vt.transpose() / (r * r * r));
    out.B += c.friction * T * ds_dvt * P;
    out.A -= c.friction * dT * s * n.transpose();  // d fn / d p = -dT n^T
    // d vt / d p is 0 on a face's inside, else -(vn dn + n vr^T dn)
    if (curved) out.A -= c.friction * T * ds_dvt * (vn * dn + n * (vr.transpose() * dn));
  }
  return out;
}

}  // namespace ms
