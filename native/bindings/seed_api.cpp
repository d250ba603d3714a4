// The seed API: Mass, Fix, Spring, Chain and DistanceConstraint, and the systems' building
// (add), live element lists and energies, as the seed documents use them.
#include "bindings/common.hpp"

#include <cmath>
#include <optional>
#include <sstream>

namespace ms::bindings {

std::string connector_repr(const Connector& c) {
  return std::string("Connector(") + (c.type == FIX ? "FIX" : "MASS") + ", " +
         std::to_string(c.nr) + ")";
}

py::array_t<double> as_array(const VectorXd& x, py::ssize_t rows, py::ssize_t cols) {
  py::array_t<double> a(cols > 0 ? std::vector<py::ssize_t>{rows, cols}
                                 : std::vector<py::ssize_t>{rows});
  std::copy(x.data(), x.data() + x.size(), a.mutable_data());
  return a;
}

VectorXd from_array(const Arr& a,
                    Eigen::Index expected, const std::string& what) {
  if (a.size() != expected)
    throw InputError(what + ": expected " + std::to_string(expected) + " values, got " +
                     std::to_string(a.size()));
  VectorXd x(expected);
  std::copy(a.data(), a.data() + expected, x.data());
  if (!x.allFinite()) throw InputError(what + ": contains NaN or Inf");
  return x;
}

namespace {

// A rest angle as Python sees it: None where it was not given (NaN: the modelled shape).
py::object angle_or_none(double angle) {
  if (std::isnan(angle)) return py::none();
  return py::float_(angle);
}

// Live views into a system: they hold the system alive and read through to its state.
template <int D>
struct MassRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
template <int D>
struct FixRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
template <int D>
struct SpringRef {
  std::shared_ptr<System<D>> sys;
  int i;
  const Spring& get() const { return sys->springs()[i]; }
};
template <int D>
struct ConstraintRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
// Element i of a law on k vertices (forces/stencils.hpp).
template <int D, class Law>
struct StencilRef {
  std::shared_ptr<System<D>> sys;
  int i;
  const StencilSet<Law>& set() const { return std::get<StencilSet<Law>>(sys->stencils()); }
  py::tuple connectors() const {
    py::tuple out(Law::K);
    for (int k = 0; k < Law::K; ++k) out[k] = py::cast(set().ends[i][k]);
    return out;
  }
};
template <int D, class Law>
int stencil_count(const System<D>& s) {
  return static_cast<int>(std::get<StencilSet<Law>>(s.stencils()).size());
}
template <int D, class Ref>
struct ListView {
  std::shared_ptr<System<D>> sys;
  int (*count)(const System<D>&);
};

template <int D, class Ref>
void bind_list(py::module_& m, const std::string& name) {
  using L = ListView<D, Ref>;
  py::class_<L>(m, name.c_str())
      .def("__len__", [](const L& l) { return l.count(*l.sys); })
      .def("__getitem__",
           [](const L& l, int i) {
             const int n = l.count(*l.sys);
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("index out of range");
             return Ref{l.sys, i};
           })
      .def("__iter__", [](const L& l) {
        py::list items;
        for (int i = 0; i < l.count(*l.sys); ++i) items.append(Ref{l.sys, i});
        return py::iter(items);
      });
}

// The K connectors of an element from a Python sequence, or an InputError that says what
// belongs there.
template <int K>
std::array<Connector, K> connectors_of(const py::sequence& c, const char* what) {
  const char* shape = K == 2 ? "a pair (a, b)" : K == 3 ? "three connectors (a, b, c)" : "four connectors (a, b, c, d)";
  if (py::len(c) != K) throw InputError(std::string(what) + ": connectors must be " + shape);
  std::array<Connector, K> out;
  std::string got;
  for (int i = 0; i < K; ++i)
    got += (i == 0 ? "" : i + 1 < K ? ", " : " and ") + std::string(py::str(py::type::of(c[i]).attr("__name__")));
  try {
    for (int i = 0; i < K; ++i) out[i] = c[i].cast<Connector>();
  } catch (const py::cast_error&) {
    // e.g. Spring(1, 1, [0, 1]): vertex numbers where connectors belong
    throw InputError(std::string(what) + ": connectors must be " +
                     (K == 2 ? "the pair" : K == 3 ? "three connectors" : "four connectors") +
                     " returned by add(Mass(...)) / add(Fix(...)), got " + got);
  }
  return out;
}
std::array<Connector, 2> pair_of(const py::sequence& c, const char* what) { return connectors_of<2>(c, what); }

}  // namespace

void bind_elements(py::module_& m) {
  py::class_<Connector>(m, "Connector")
      .def(py::init([](int type, int nr) {
             if (type != FIX && type != MASS)
               throw InputError("Connector type must be FIX (1) or MASS (2)");
             return Connector{type, nr, 0};
           }),
           py::arg("type"), py::arg("nr"))
      .def_readonly("type", &Connector::type)
      .def_readonly("nr", &Connector::nr)
      .def_property_readonly_static("FIX", [](py::object) { return static_cast<int>(FIX); })
      .def_property_readonly_static("MASS", [](py::object) { return static_cast<int>(MASS); })
      .def("__eq__",
           [](const Connector& a, const Connector& b) {
             return a.type == b.type && a.nr == b.nr && a.owner == b.owner;
           })
      .def("__hash__", [](const Connector& c) { return py::hash(py::make_tuple(c.type, c.nr)); })
      .def("__repr__", &connector_repr);

  py::class_<MassSpec>(m, "Mass")
      .def(py::init([](double mass, std::vector<double> pos, py::object vel) {
             MassSpec s{mass, std::move(pos), {}};
             if (!(std::isfinite(mass) && mass > 0))
               throw InputError("Mass: mass must be positive, got " + std::to_string(mass));
             if (!vel.is_none()) s.vel = vel.cast<std::vector<double>>();
             return s;
           }),
           py::arg("mass"), py::arg("pos"), py::arg("vel") = py::none())
      .def_readwrite("mass", &MassSpec::mass)
      .def_readwrite("pos", &MassSpec::pos)
      .def_readwrite("vel", &MassSpec::vel);

  py::class_<FixSpec>(m, "Fix")
      .def(py::init([](std::vector<double> pos) { return FixSpec{std::move(pos)}; }),
           py::arg("pos"))
      .def_readwrite("pos", &FixSpec::pos);

  auto make_spring = [](double length, double stiffness, const py::sequence& c, double damping,
                        bool rope) {
    Spring s;
    s.length = length;
    s.stiffness = stiffness;
    s.damping = damping;
    s.rope = rope;
    s.c = pair_of(c, rope ? "Chain" : "Spring");
    return s;
  };
  py::class_<Spring>(m, "Spring")
      .def(py::init([make_spring](double length, double stiffness, const py::sequence& c,
                                  double damping) {
             return make_spring(length, stiffness, c, damping, false);
           }),
           py::arg("length"), py::arg("stiffness"), py::arg("connectors"),
           py::arg("damping") = 0.0)
      .def_readonly("length", &Spring::length)
      .def_readonly("stiffness", &Spring::stiffness)
      .def_readonly("damping", &Spring::damping)
      .def_property_readonly("connectors",
                             [](const Spring& s) { return py::make_tuple(s.c[0], s.c[1]); });

  py::class_<WireBendingSpec>(
      m, "WireBending",
      "Bending of a wire at b, the vertex between edges a-b and b-c: energy "
      "stiffness / 2 (kappa - kappa_rest)^2 with kappa = 2 tan(turning angle / 2), a moment of "
      "stiffness * (angle - rest_angle) for small angles (stiffness = EI / mean edge length, "
      "N m per radian). rest_angle: the turning angle at rest, radians in [0, pi): 0 straight "
      "(the default), None the angle where the three are when added (the modelled shape).")
      .def(py::init([](double stiffness, const py::sequence& c, std::optional<double> rest_angle) {
             return WireBendingSpec{WireBending{stiffness, rest_angle.value_or(std::nan(""))},
                                    connectors_of<3>(c, "WireBending")};
           }),
           py::arg("stiffness"), py::arg("connectors"), py::arg("rest_angle") = 0.0)
      .def_property_readonly("stiffness", [](const WireBendingSpec& s) { return s.law.stiffness; })
      .def_property_readonly("rest_angle", [](const WireBendingSpec& s) { return angle_or_none(s.law.rest_angle); })
      .def_property_readonly("connectors", [](const WireBendingSpec& s) {
        return py::make_tuple(s.ends[0], s.ends[1], s.ends[2]);
      });

  py::class_<HingeBendingSpec>(
      m, "HingeBending",
      "Bending of a sheet across the edge a-b that two triangles (a, b, c) and (a, b, d) "
      "share: energy stiffness / 2 (theta - rest_angle)^2, theta the dihedral angle (0 flat), "
      "a moment of stiffness * (theta - rest_angle). stiffness in N m per radian: for a plate "
      "of flexural rigidity D (N m), D |ab|^2 / (the two triangles' areas: "
      "mass_spring.structure.hinge_stiffnesses). Without rest_angle, the "
      "angle where the four are when the hinge is added (the modelled shape).")
      .def(py::init([](double stiffness, const py::sequence& c, std::optional<double> rest_angle) {
             return HingeBendingSpec{HingeBending{stiffness, rest_angle.value_or(std::nan(""))},
                                     connectors_of<4>(c, "HingeBending")};
           }),
           py::arg("stiffness"), py::arg("connectors"), py::arg("rest_angle") = py::none())
      .def_property_readonly("stiffness", [](const HingeBendingSpec& s) { return s.law.stiffness; })
      .def_property_readonly("rest_angle", [](const HingeBendingSpec& s) { return angle_or_none(s.law.rest_angle); })
      .def_property_readonly("connectors", [](const HingeBendingSpec& s) {
        return py::make_tuple(s.ends[0], s.ends[1], s.ends[2], s.ends[3]);
      });

  py::class_<ChainSpec>(m, "Chain", "A rope link: pulls when stretched, slack when compressed.")
      .def(py::init([make_spring](double length, double stiffness, const py::sequence& c,
                                  double damping) {
             return ChainSpec{make_spring(length, stiffness, c, damping, true)};
           }),
           py::arg("length"), py::arg("stiffness"), py::arg("connectors"),
           py::arg("damping") = 0.0)
      .def_property_readonly("length", [](const ChainSpec& s) { return s.spring.length; })
      .def_property_readonly("stiffness", [](const ChainSpec& s) { return s.spring.stiffness; });

  py::class_<DistanceConstraint>(m, "DistanceConstraint")
      .def(py::init([](double length, const py::sequence& c) {
             return DistanceConstraint{length, pair_of(c, "DistanceConstraint")};
           }),
           py::arg("length"), py::arg("connectors"))
      .def(py::init([](const Connector& a, const Connector& b, double length) {
             return DistanceConstraint{length, {a, b}};
           }),
           py::arg("c1"), py::arg("c2"), py::arg("length"))
      .def_readonly("length", &DistanceConstraint::length)
      .def_property_readonly("c1", [](const DistanceConstraint& d) { return d.c[0]; })
      .def_property_readonly("c2", [](const DistanceConstraint& d) { return d.c[1]; });
}

template <int D>
void bind_seed_api(py::module_& m, SystemClass<D>& cls, const std::string& name) {
  using S = System<D>;
  using SP = std::shared_ptr<S>;
  const std::string suffix = std::to_string(D) + "d";

  py::class_<MassRef<D>>(m, ("MassView" + suffix).c_str())
      .def_property(
          "mass", [](const MassRef<D>& r) { return r.sys->mass(r.i); },
          [](const MassRef<D>& r, double x) { r.sys->set_mass(r.i, x); })
      .def_property(
          "pos", [](const MassRef<D>& r) { return to_tuple<D>(r.sys->pos(r.i)); },
          [](const MassRef<D>& r, const std::vector<double>& x) {
            r.sys->set_pos(r.i, to_vec<D>(x, "Mass " + std::to_string(r.i) + " pos"));
          })
      .def_property(
          "vel", [](const MassRef<D>& r) { return to_tuple<D>(r.sys->vel(r.i)); },
          [](const MassRef<D>& r, const std::vector<double>& x) {
            r.sys->set_vel(r.i, to_vec<D>(x, "Mass " + std::to_string(r.i) + " vel"));
          })
      .def_property_readonly("nr", [](const MassRef<D>& r) { return r.i; })
      .def("__repr__", [](const MassRef<D>& r) {
        std::ostringstream s;
        s << "Mass(" << r.sys->mass(r.i) << ", " << py::str(to_tuple<D>(r.sys->pos(r.i)))
          << ")";
        return s.str();
      });

  py::class_<FixRef<D>>(m, ("FixView" + suffix).c_str())
      .def_property(
          "pos", [](const FixRef<D>& r) { return to_tuple<D>(r.sys->fix_pos(r.i)); },
          [](const FixRef<D>& r, const std::vector<double>& x) {
            r.sys->set_fix_pos(r.i, to_vec<D>(x, "Fix " + std::to_string(r.i) + " pos"));
          },
          "Anchor position. Written between simulate() calls, the fix moves linearly to it "
          "during the next call.")
      .def_property_readonly("nr", [](const FixRef<D>& r) { return r.i; })
      .def("__repr__", [](const FixRef<D>& r) {
        return "Fix(" + std::string(py::str(to_tuple<D>(r.sys->fix_pos(r.i)))) + ")";
      });

  py::class_<SpringRef<D>>(m, ("SpringView" + suffix).c_str())
      .def_property_readonly("length", [](const SpringRef<D>& r) { return r.get().length; })
      .def_property_readonly("stiffness",
                             [](const SpringRef<D>& r) { return r.get().stiffness; })
      .def_property_readonly("damping", [](const SpringRef<D>& r) { return r.get().damping; })
      .def_property_readonly("is_chain", [](const SpringRef<D>& r) { return r.get().rope; })
      .def_property_readonly("connectors",
                             [](const SpringRef<D>& r) {
                               return py::make_tuple(r.get().c[0], r.get().c[1]);
                             })
      .def_property_readonly("c1", [](const SpringRef<D>& r) { return r.get().c[0]; })
      .def_property_readonly("c2", [](const SpringRef<D>& r) { return r.get().c[1]; });

  py::class_<ConstraintRef<D>>(m, ("ConstraintView" + suffix).c_str())
      .def_property_readonly(
          "length", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].length; })
      .def_property_readonly(
          "c1", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].c[0]; })
      .def_property_readonly(
          "c2", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].c[1]; })
      .def_property_readonly(
          "connectors",
          [](const ConstraintRef<D>& r) {
            const auto& c = r.sys->constraints()[r.i];
            return py::make_tuple(c.c[0], c.c[1]);
          })
      .def_property_readonly(
          "force", [](const ConstraintRef<D>& r) { return r.sys->simulator().constraint_force(r.i); },
          "Rod tension (positive pulls the ends together) at the current time; before the "
          "first step, solved for at that instant.");

  using WireRef = StencilRef<D, WireBending>;
  using HingeRef = StencilRef<D, HingeBending>;
  py::class_<WireRef>(m, ("WireBendingView" + suffix).c_str())
      .def_property_readonly("stiffness", [](const WireRef& r) { return r.set().laws[r.i].stiffness; })
      .def_property_readonly("rest_angle", [](const WireRef& r) { return r.set().laws[r.i].rest_angle; })
      .def_property_readonly("connectors", &WireRef::connectors);
  py::class_<HingeRef>(m, ("HingeBendingView" + suffix).c_str())
      .def_property_readonly("stiffness", [](const HingeRef& r) { return r.set().laws[r.i].stiffness; })
      .def_property_readonly("rest_angle", [](const HingeRef& r) { return r.set().laws[r.i].rest_angle; })
      .def_property_readonly(
          "angle",
          [](const HingeRef& r) {
            if constexpr (D == 3) {
              const auto& c = r.set().ends[r.i];
              const System<D>& s = *r.sys;
              return dihedral_angle(s.connector_pos(c[0]), s.connector_pos(c[1]), s.connector_pos(c[2]),
                                    s.connector_pos(c[3])).theta();
            }
            return 0.0;
          },
          "The dihedral angle now (radians, 0 flat).")
      .def_property_readonly("connectors", &HingeRef::connectors);

  bind_list<D, MassRef<D>>(m, "MassList" + suffix);
  bind_list<D, WireRef>(m, "WireBendingList" + suffix);
  bind_list<D, HingeRef>(m, "HingeBendingList" + suffix);
  bind_list<D, FixRef<D>>(m, "FixList" + suffix);
  bind_list<D, SpringRef<D>>(m, "SpringList" + suffix);
  bind_list<D, ConstraintRef<D>>(m, "ConstraintList" + suffix);

  cls
      .def(py::init<>())
      .def_property_readonly_static("dim", [](py::object) { return D; })
      .def_property(
          "gravity", [](const S& s) { return to_tuple<D>(s.gravity()); },
          [](S& s, const std::vector<double>& g) { s.set_gravity(to_vec<D>(g, "gravity")); })
      // -- building
      .def("add",
           [](S& s, const MassSpec& x) {
             return s.add_mass(x.mass, to_vec<D>(x.pos, "Mass pos"),
                               x.vel.empty() ? Vec<D>::Zero() : to_vec<D>(x.vel, "Mass vel"));
           })
      .def("add", [](S& s, const FixSpec& x) { return s.add_fix(to_vec<D>(x.pos, "Fix pos")); })
      .def("add", [](S& s, const Spring& x) { return s.add_spring(x); })
      .def("add", [](S& s, const ChainSpec& x) { return s.add_spring(x.spring); })
      .def("add", [](S& s, const DistanceConstraint& x) { return s.add_constraint(x); })
      .def("add", [](S& s, const WireBendingSpec& x) { return s.add_stencil(x.law, x.ends); })
      .def("add", [](S& s, const HingeBendingSpec& x) { return s.add_stencil(x.law, x.ends); })
      .def("addDistanceConstraint",
           [](S& s, const DistanceConstraint& x) { return s.add_constraint(x); })
      // -- live lists
      .def_property_readonly("masses",
                             [](const SP& s) {
                               return ListView<D, MassRef<D>>{
                                   s, [](const S& x) { return x.num_masses(); }};
                             })
      .def_property_readonly("fixes",
                             [](const SP& s) {
                               return ListView<D, FixRef<D>>{
                                   s, [](const S& x) { return x.num_fixes(); }};
                             })
      .def_property_readonly("springs",
                             [](const SP& s) {
                               return ListView<D, SpringRef<D>>{s, [](const S& x) {
                                 return static_cast<int>(x.springs().size());
                               }};
                             })
      .def_property_readonly("constraints",
                             [](const SP& s) {
                               return ListView<D, ConstraintRef<D>>{s, [](const S& x) {
                                 return static_cast<int>(x.constraints().size());
                               }};
                             })
      .def_property_readonly("wire_bendings", [](const SP& s) {
        return ListView<D, WireRef>{s, &stencil_count<D, WireBending>};
      })
      .def_property_readonly("hinge_bendings", [](const SP& s) {
        return ListView<D, HingeRef>{s, &stencil_count<D, HingeBending>};
      });
  cls.def("kinetic_energy", &S::kinetic_energy)
      // Contact energies are found with the simulator's scratch (Simulator::touches),
      // which a running simulate() writes: refused meanwhile, as changes are.
      .def("potential_energy",
           [](const S& s) {
             s.simulator().require_idle("compute its energy");
             return s.potential_energy();
           })
      .def("energy",
           [](const S& s) {
             s.simulator().require_idle("compute its energy");
             return s.total_energy();
           })
      .def("max_constraint_violation", &S::max_constraint_violation)
      .def_property_readonly("constraint_forces",
                             [](S& s) {
                               const VectorXd f = s.simulator().constraint_forces();
                               return as_array(f, f.size(), 0);
                             })
      .def("__repr__", [name](const S& s) {
        return name + "(" + std::to_string(s.num_masses()) + " masses, " +
               std::to_string(s.num_fixes()) + " fixes, " + std::to_string(s.springs().size()) +
               " springs, " + std::to_string(s.constraints().size()) + " constraints, " +
               std::to_string(stencil_count<D, WireBending>(s)) + " wire bendings, " +
               std::to_string(stencil_count<D, HingeBending>(s)) + " hinge bendings, t=" +
               std::to_string(s.time()) + ")";
      });;
}

template void bind_seed_api<2>(py::module_&, SystemClass<2>&, const std::string&);
template void bind_seed_api<3>(py::module_&, SystemClass<3>&, const std::string&);

}  // namespace ms::bindings
