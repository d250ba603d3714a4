// Numpy access for big meshes: positions and velocities as arrays, systems from arrays
// (mass_spring.from_arrays), and the state as a dict of arrays (checkpoints).
#include <limits>
#include "bindings/common.hpp"

#include "model/build.hpp"

#include <cmath>
#include <optional>

namespace ms::bindings {

namespace {

template <int D>
py::dict state_to_dict(const System<D>& s, const State<D>& st) {
  const auto n = static_cast<py::ssize_t>(s.num_masses());
  VectorXd fixes(D * s.num_fixes());
  for (int k = 0; k < s.num_fixes(); ++k) fixes.template segment<D>(D * k) = st.fix_pos[k];
  py::dict d;
  d["dim"] = D;
  d["time"] = st.time;
  d["q"] = as_array(st.q, n, D);
  d["v"] = as_array(st.v, n, D);
  d["acc"] = as_array(st.acc, n, D);
  d["aux"] = as_array(st.aux, n, D);
  d["lam"] = as_array(st.lam, st.lam.size(), 0);
  d["fix_pos"] = as_array(fixes, s.num_fixes(), D);
  d["consistent"] = st.consistent;
  return d;
}

template <class T>
T state_field(const py::dict& d, const char* key, const char* expected) {
  if (!d.contains(key)) throw InputError(std::string("state: missing '") + key + "'");
  try {
    return d[key].cast<T>();
  } catch (const std::exception&) {  // pybind11's cast_error, numpy's conversion errors
    throw InputError(std::string("state: '") + key + "' must be " + expected + ", got " +
                     std::string(py::str(py::type::of(d[key]).attr("__name__"))));
  }
}

template <int D>
void state_from_dict(System<D>& s, const py::dict& d) {
  if (state_field<int>(d, "dim", "an integer") != D)
    throw InputError("state: made by a system of another dimension");
  State<D> st;
  const Eigen::Index n = D * s.num_masses();
  const char* array = "an array of numbers";
  st.time = state_field<double>(d, "time", "a number");
  st.q = from_array(state_field<Arr>(d, "q", array), n, "state q");
  st.v = from_array(state_field<Arr>(d, "v", array), n, "state v");
  st.acc = from_array(state_field<Arr>(d, "acc", array), n, "state acc");
  st.aux = from_array(state_field<Arr>(d, "aux", array), n, "state aux");
  st.lam = from_array(state_field<Arr>(d, "lam", array),
                      static_cast<Eigen::Index>(s.constraints().size()), "state lam");
  const VectorXd fixes =
      from_array(state_field<Arr>(d, "fix_pos", array), D * s.num_fixes(), "state fix_pos");
  for (int k = 0; k < s.num_fixes(); ++k) st.fix_pos.push_back(fixes.template segment<D>(D * k));
  st.consistent = state_field<bool>(d, "consistent", "True or False");
  s.set_state(st);
}

template <class T, class Array>
ArrayView<T> view(const Array& a) {
  return {a.data(), static_cast<std::size_t>(a.size())};
}

// mass_spring.from_arrays normalizes the arrays and checks them with vertex- and
// edge-based messages; build_from_arrays checks sizes, indices and values again.
template <int D>
std::shared_ptr<System<D>> system_from_arrays(const Arr& positions, const Arr& masses,
                                              const MaskArr& fixed, const Arr& velocities,
                                              const IdxArr& springs, const Arr& stiffness,
                                              const Arr& rest, const Arr& damping,
                                              const MaskArr& rope, const IdxArr& constraints,
                                              const Arr& clength, bool locality_order) {
  MeshArrays arrays;
  arrays.positions = view<double>(positions);
  arrays.masses = view<double>(masses);
  arrays.fixed = view<bool>(fixed);
  arrays.velocities = view<double>(velocities);
  arrays.springs = view<long long>(springs);
  arrays.stiffness = view<double>(stiffness);
  arrays.rest_length = view<double>(rest);
  arrays.damping = view<double>(damping);
  arrays.rope = view<bool>(rope);
  arrays.constraints = view<long long>(constraints);
  arrays.constraint_length = view<double>(clength);
  arrays.locality_order = locality_order;
  auto system = std::make_shared<System<D>>();
  build_from_arrays<D>(*system, arrays);
  return system;
}

// Elements of a law on k vertices from n rows of k vertex indices (from_arrays'
// numbering), law(row) making each one's parameters. A row whose vertices are all
// pinned is left out, as springs between pins are.
template <class Law, int D, class MakeLaw>
void add_rows(System<D>& s, const IdxArr& rows, std::size_t n, const char* what, const MakeLaw& law) {
  constexpr int K = Law::K;
  const bool shaped = rows.ndim() == 2 ? rows.shape(1) == K : rows.size() == 0;
  if (!shaped || static_cast<std::size_t>(rows.size()) != K * n)
    throw InputError(std::string(what) + "s: expected an array of shape (" + std::to_string(n) + ", " +
                     std::to_string(K) + ") of vertex indices (one row per stiffness)");
  std::vector<Law> laws;
  std::vector<std::array<Connector, K>> ends;
  for (std::size_t r = 0; r < n; ++r) {
    std::array<Connector, K> c;
    bool moves = false;
    for (int k = 0; k < K; ++k) {
      const long long i = rows.data()[K * r + k];
      if (i < 0 || i >= s.num_vertices())
        throw InputError(std::string(what) + " " + std::to_string(r) + ": vertex index " + std::to_string(i) +
                         " out of range (there are " + std::to_string(s.num_vertices()) + " vertices)");
      c[k] = s.vertex(static_cast<int>(i));
      moves = moves || c[k].type == MASS;
    }
    // validated here, by the row's number, also where the row is left out below
    law(r).validate([&] { return std::string(what) + " " + std::to_string(r); });
    if (!moves) continue;
    laws.push_back(law(r));
    ends.push_back(c);
  }
  s.add_stencils(laws, ends);
}

// Laws with a stiffness and a rest angle per row (hinges, wire joints), many at once;
// without rest angles, the angles as built (NaN: take_rest_shape).
template <class Law, int D>
void add_angle_rows(System<D>& s, const IdxArr& rows, const Arr& stiffness, const std::optional<Arr>& rest,
                    const char* what) {
  const std::size_t n = stiffness.size();
  if (rest && static_cast<std::size_t>(rest->size()) != n)
    throw InputError("rest_angle: expected " + std::to_string(n) + " values, got " + std::to_string(rest->size()));
  add_rows<Law>(s, rows, n, what, [&](std::size_t r) {
    return Law{stiffness.data()[r], rest ? rest->data()[r] : std::nan("")};
  });
}

template <int D>
void add_hinges(System<D>& s, const IdxArr& hinges, const Arr& stiffness, const std::optional<Arr>& rest) {
  add_angle_rows<HingeBending>(s, hinges, stiffness, rest, "hinge");
}

template <int D>
void add_wire_bendings(System<D>& s, const IdxArr& joints, const Arr& stiffness, const std::optional<Arr>& rest) {
  add_angle_rows<WireBending>(s, joints, stiffness, rest, "wire joint");
}

}  // namespace

// The vertex each mass (type MASS) or fix (FIX) is, by its number; none in a system
// not built from arrays (it has no vertices).
template <int D>
py::array_t<long long> vertices_of(const System<D>& s, ConnectorType type, int count) {
  const auto& vertices = s.vertices_from_arrays();
  std::vector<long long> idx(vertices.empty() ? 0 : static_cast<std::size_t>(count), -1);
  for (std::size_t i = 0; i < vertices.size(); ++i)
    if (vertices[i].type == type) idx[static_cast<std::size_t>(vertices[i].nr)] = static_cast<long long>(i);
  return py::array_t<long long>(idx.size(), idx.data());
}

template <int D>
void bind_arrays(SystemClass<D>& cls) {
  using S = System<D>;
  cls
      .def_property(
          "positions",
          [](const S& s) { return as_array(s.state().q, s.num_masses(), D); },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_masses(), "positions");
            for (int i = 0; i < s.num_masses(); ++i) s.set_pos(i, x.template segment<D>(D * i));
          })
      .def_property(
          "velocities",
          [](const S& s) { return as_array(s.state().v, s.num_masses(), D); },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_masses(), "velocities");
            for (int i = 0; i < s.num_masses(); ++i) s.set_vel(i, x.template segment<D>(D * i));
          })
      .def_property(
          "fix_positions",
          [](const S& s) {
            VectorXd x(D * s.num_fixes());
            for (int k = 0; k < s.num_fixes(); ++k) x.template segment<D>(D * k) = s.fix_pos(k);
            return as_array(x, s.num_fixes(), D);
          },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_fixes(), "fix_positions");
            for (int k = 0; k < s.num_fixes(); ++k)
              s.set_fix_pos(k, x.template segment<D>(D * k));
          })
      .def("vertex_positions",
           [](const S& s) {
             const int n = s.num_vertices();
             VectorXd x(D * n);
             for (int i = 0; i < n; ++i) x.template segment<D>(D * i) = s.vertex_pos(i);
             return as_array(x, n, D);
           },
           "Positions of all vertices (masses and fixes) in vertex order, shape (N, D).")
      .def("vertex_velocities",
           [](const S& s) {
             const int n = s.num_vertices();
             VectorXd x = VectorXd::Zero(D * n);
             for (int i = 0; i < n; ++i) {
               const Connector c = s.vertex(i);
               if (c.type == MASS) x.template segment<D>(D * i) = s.vel(c.nr);
             }
             return as_array(x, n, D);
           },
           "Velocities of all vertices in vertex order (zero for fixes), shape (N, D).")
      .def_property_readonly("fixed_vertices", [](const S& s) { return vertices_of(s, FIX, s.num_fixes()); },
                             "The vertex of each fix (fix k: entry k).")
      .def_property_readonly("mass_vertices", [](const S& s) { return vertices_of(s, MASS, s.num_masses()); },
                             "The vertex of each mass (mass k: entry k; in vertex order unless built "
                             "with locality_order).")
      .def_static("_build_from_arrays", &system_from_arrays<D>)
      .def("add_hinges", &add_hinges<D>, py::arg("hinges"), py::arg("stiffness"), py::arg("rest_angle") = py::none(),
           "Bending across shared edges (HingeBending), many at once: hinges (n, 4) vertex "
           "indices (the edge's two, then the two opposite corners), stiffness (n,) in N m per "
           "radian (mass_spring.structure.hinge_stiffnesses), rest_angle (n,) radians or None: "
           "the angles as built.")
      .def("add_wire_bendings", &add_wire_bendings<D>, py::arg("joints"), py::arg("stiffness"),
           py::arg("rest_angle") = py::none(),
           "Bending of wires (WireBending), many at once: joints (n, 3) vertex indices (the "
           "middle one second), stiffness (n,) in N m per radian (EI / length), rest_angle (n,) "
           "turning angles in radians or None: the angles as built (the modelled shape).")
      .def(
          "set_self_contact",
          [](S& s, const IdxArr& triangles, const IdxArr& edges, const py::object& distance,
             const py::object& friction) {
            // A number, or an array of one per vertex.
            auto values = [](const py::object& given, const char* what) {
              if (py::isinstance<py::float_>(given) || py::isinstance<py::int_>(given))
                return std::vector<double>{given.cast<double>()};
              using Values = py::array_t<double, py::array::c_style | py::array::forcecast>;
              const Values a = Values::ensure(given);
              if (!a || a.ndim() > 1) throw InputError(std::string(what) + ": one value, or one per vertex");
              return std::vector<double>(a.data(), a.data() + a.size());
            };
            s.set_self_contact(index_rows<3>(triangles, "triangles"), index_rows<2>(edges, "edges"),
                               values(distance, "distance"), values(friction, "friction"));
          },
          py::arg("triangles"), py::arg("edges"), py::arg("distance"), py::arg("friction") = 0.0,
          "Self-collision: the parts of the structure that share no vertex keep `distance` (m) "
          "apart, with `friction` among them. triangles (n, 3) and edges (m, 2) are vertex "
          "indices (a mesh's faces, triangulated, and its edges; a rope or net has edges only). "
          "distance and friction: one value, or one per vertex (structures simulated together, "
          "each with its own; a pair keeps the largest of its vertices'). Distance 0 turns it "
          "off. ValueError if two parts that share no vertex are closer than their distance as "
          "built.")
      // -- checkpoint
      .def("get_state", [](const S& s) { return state_to_dict(s, s.state()); },
           "The state: a dict of numpy arrays and floats, everything set_state needs to "
           "continue from here. Reading it changes nothing.")
      .def("checkpoint", [](S& s) { return state_to_dict(s, s.checkpoint()); },
           "get_state() as a restart point: also restarts the linear solver's reuse of its "
           "factor, so that continuing from here and from set_state(checkpoint) into any "
           "identical system give bit-identical runs.")
      .def("set_state", &state_from_dict<D>, py::arg("state"));
}

template void bind_arrays<2>(SystemClass<2>&);
template void bind_arrays<3>(SystemClass<3>&);

}  // namespace ms::bindings
