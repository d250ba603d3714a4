#include "model/build.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace ms {

namespace {

void require_size(std::size_t size, std::size_t expected, const std::string& what) {
  if (size != expected)
    throw InputError(what + ": expected " + std::to_string(expected) + " values, got " +
                     std::to_string(size));
}

// The connectors of edge e of `pairs` (vertex indices, two per edge).
template <int D>
std::array<Connector, 2> edge_ends(const System<D>& system, const ArrayView<long long>& pairs,
                                   std::size_t e, const std::string& item) {
  std::array<Connector, 2> ends;
  for (int k = 0; k < 2; ++k) {
    const long long i = pairs[2 * e + k];
    if (i < 0 || i >= system.num_vertices())
      throw InputError(item + " " + std::to_string(e) + ": vertex index " + std::to_string(i) +
                       " out of range (there are " + std::to_string(system.num_vertices()) +
                       " vertices, numbered from 0)");
    if (k == 1 && i == pairs[2 * e])
      throw InputError(item + " " + std::to_string(e) + ": both ends are vertex " + std::to_string(i));
    ends[k] = system.vertex(static_cast<int>(i));
  }
  return ends;
}

// "spring 5 (vertices [2, 9])": edge e of `pairs` as a message names it.
std::string edge_name(const std::string& item, const ArrayView<long long>& pairs, std::size_t e) {
  return item + " " + std::to_string(e) + " (vertices [" + std::to_string(pairs[2 * e]) + ", " +
         std::to_string(pairs[2 * e + 1]) + "])";
}

// The given length, or the distance of the edge's ends as built if it is NaN.
template <int D>
double length_or_distance(double given, const System<D>& system, const std::array<Connector, 2>& ends) {
  if (!std::isnan(given)) return given;
  auto where = [&](const Connector& c) { return c.type == MASS ? system.pos(c.nr) : system.fix_pos(c.nr); };
  return (where(ends[1]) - where(ends[0])).norm();
}

}  // namespace

template <int D>
void build_from_arrays(System<D>& system, const MeshArrays& a) {
  if (system.num_vertices() != 0 || !system.springs().empty() ||
      !system.constraints().empty())
    throw InputError("build_from_arrays: the system must be empty");
  const std::size_t N = a.masses.size;
  require_size(a.positions.size, D * N, "positions");
  require_size(a.fixed.size, N, "fixed");
  require_size(a.velocities.size, D * N, "velocities");
  const std::size_t S = a.stiffness.size;
  require_size(a.springs.size, 2 * S, "springs");
  require_size(a.rest_length.size, S, "rest_length");
  require_size(a.damping.size, S, "damping");
  require_size(a.rope.size, S, "rope");
  const std::size_t C = a.constraint_length.size;
  require_size(a.constraints.size, 2 * C, "constraints");

  std::vector<Connector> vertices(N);
  std::vector<double> m;
  std::vector<Vec<D>> p, v;
  std::vector<std::size_t> mass_vertex;  // the vertex each mass is
  int fixes = 0;
  auto vertex_name = [](std::size_t i) { return "vertex " + std::to_string(i); };
  for (std::size_t i = 0; i < N; ++i) {
    if (!a.fixed[i]) {
      mass_vertex.push_back(i);
      continue;
    }
    system.add_fix(Eigen::Map<const Vec<D>>(a.positions.data + D * i), [&](std::size_t) { return vertex_name(i); });
    vertices[i] = Connector{FIX, fixes++, system.id()};
  }
  if (a.locality_order) mass_vertex = masses_in_locality_order<D>(a.positions, a.fixed);
  for (const std::size_t i : mass_vertex) {
    vertices[i] = Connector{MASS, static_cast<int>(m.size()), system.id()};
    m.push_back(a.masses[i]);
    p.push_back(Eigen::Map<const Vec<D>>(a.positions.data + D * i));
    v.push_back(Eigen::Map<const Vec<D>>(a.velocities.data + D * i));
  }
  system.add_masses(m, p, v, [&](std::size_t k) { return vertex_name(mass_vertex[k]); });
  system.set_vertices(std::move(vertices));

  for (std::size_t e = 0; e < S; ++e) {
    Spring s;
    s.c = edge_ends(system, a.springs, e, "spring");
    if (s.c[0].type == FIX && s.c[1].type == FIX) continue;
    s.length = length_or_distance(a.rest_length[e], system, s.c);
    s.stiffness = a.stiffness[e];
    s.damping = a.damping[e];
    s.rope = a.rope[e];
    system.add_spring(s, [&](std::size_t) { return edge_name("spring", a.springs, e); });
  }
  std::vector<DistanceConstraint> cs;
  std::vector<std::size_t> constraint_edge;  // the edge each constraint is
  for (std::size_t e = 0; e < C; ++e) {
    DistanceConstraint c;
    c.c = edge_ends(system, a.constraints, e, "constraint");
    if (c.c[0].type == FIX && c.c[1].type == FIX) continue;
    c.length = length_or_distance(a.constraint_length[e], system, c.c);
    cs.push_back(c);
    constraint_edge.push_back(e);
  }
  system.add_constraints(cs, [&](std::size_t k) { return edge_name("constraint", a.constraints, constraint_edge[k]); });
}

template <int D>
std::vector<std::size_t> masses_in_locality_order(const ArrayView<double>& positions, const ArrayView<bool>& fixed) {
  const std::size_t n = fixed.size;
  Vec<D> low = Vec<D>::Constant(std::numeric_limits<double>::infinity()), high = -low;
  for (std::size_t i = 0; i < n; ++i) {
    const Vec<D> x = Eigen::Map<const Vec<D>>(positions.data + D * i);
    if (!x.allFinite()) continue;  // System::add_masses names it
    low = low.cwiseMin(x);
    high = high.cwiseMax(x);
  }
  // Each coordinate to 21 bits (63 in all in 3-D), its bits interleaved.
  constexpr int kBits = 21;
  const Vec<D> size = (high - low).cwiseMax(1e-300);
  std::vector<std::pair<std::uint64_t, std::size_t>> keyed;
  for (std::size_t i = 0; i < n; ++i) {
    if (fixed[i]) continue;
    const Vec<D> x = Eigen::Map<const Vec<D>>(positions.data + D * i);
    std::uint64_t key = 0;
    for (int k = 0; k < D; ++k) {
      const double ratio = (x(k) - low(k)) / size(k);  // NaN where x or the range is not finite
      const double share = std::isfinite(ratio) ? std::clamp(ratio, 0.0, 1.0) : 0.0;
      const auto cell = static_cast<std::uint64_t>(share * ((1u << kBits) - 1));
      for (int b = 0; b < kBits; ++b) key |= ((cell >> b) & 1u) << (D * b + k);
    }
    keyed.emplace_back(key, i);
  }
  std::sort(keyed.begin(), keyed.end());  // ties: by vertex
  std::vector<std::size_t> order(keyed.size());
  for (std::size_t j = 0; j < keyed.size(); ++j) order[j] = keyed[j].second;
  return order;
}

template std::vector<std::size_t> masses_in_locality_order<2>(const ArrayView<double>&, const ArrayView<bool>&);
template std::vector<std::size_t> masses_in_locality_order<3>(const ArrayView<double>&, const ArrayView<bool>&);
template void build_from_arrays<2>(System<2>&, const MeshArrays&);
template void build_from_arrays<3>(System<3>&, const MeshArrays&);

}  // namespace ms
