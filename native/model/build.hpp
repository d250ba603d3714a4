// A system from vertex and edge arrays (mass_spring.from_arrays, the add-on's meshes).
//
// Vertex order: vertex i becomes a mass, or a fix if it is fixed, and System::vertex(i)
// says which; springs and constraints name vertices. Elements between two fixed vertices
// are dropped: they move no mass.
#pragma once

#include <cstddef>

#include "system.hpp"

namespace ms {

// A read-only array (a numpy array's buffer, a std::vector's data).
template <class T>
struct ArrayView {
  const T* data = nullptr;
  std::size_t size = 0;
  const T& operator[](std::size_t i) const { return data[i]; }
};

// The arrays, flattened row-major: N vertices, S springs, C constraints.
struct MeshArrays {
  ArrayView<double> positions;          // N x D
  ArrayView<double> masses;             // N (ignored for fixed vertices)
  ArrayView<bool> fixed;                // N
  ArrayView<double> velocities;         // N x D
  ArrayView<long long> springs;         // S x 2 vertex indices
  ArrayView<double> stiffness;          // S
  ArrayView<double> rest_length;        // S (NaN: the distance of its ends as built)
  ArrayView<double> damping;            // S
  ArrayView<bool> rope;                 // S
  ArrayView<long long> constraints;     // C x 2 vertex indices
  ArrayView<double> constraint_length;  // C (NaN: the distance of its ends as built)
  // Number the masses along a space-filling curve through their positions instead of in
  // vertex order (masses_in_locality_order), so that neighbours in space are neighbours in
  // memory; fixes keep the vertex order either way.
  bool locality_order = false;
};

// The free vertices (not `fixed`) in the order of a Morton (Z-order) curve through their
// positions, ties in vertex order. A mesh whose vertex order is scattered (modelled,
// triangulated, merged) otherwise makes every assembly and product jump through memory
// (docs/performance.md, "Masses in locality order"; test_core_arrays.py,
// test_locality_order_numbers_the_masses_along_space_and_keeps_vertex_order_outside).
template <int D>
std::vector<std::size_t> masses_in_locality_order(const ArrayView<double>& positions, const ArrayView<bool>& fixed);

// Fills an empty system. Every size and index is checked here, every value by
// System::add_*, with messages naming the vertex or edge as the arrays number them
// ("vertex 7", "spring 5 (vertices [2, 9])"): bad input raises InputError
// (test_core_arrays.py).
template <int D>
void build_from_arrays(System<D>& system, const MeshArrays& arrays);

}  // namespace ms
