"""Structure → system (mass_spring.structure) and the seeds' structures (mass_spring.presets),
without Blender."""
import ast
import dataclasses
import inspect
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets


def kite():
    """Five vertices, hand-counted: 0 and 1 pinned; edges 0-1 (between pins), 1-2 spring,
    2-3 rod, 3-4 rope, 1-3 spring of scale 2, 0-4 rod."""
    positions = [[0, 0, 0], [1, 0, 0], [1, 0, -1], [0, 0, -2], [0, 0, -1]]
    edges = [[0, 1], [1, 2], [2, 3], [3, 4], [1, 3], [0, 4]]
    return ms.Structure(positions=positions, edges=edges,
                        pinned=[True, True, False, False, False],
                        rigid=[True, False, True, False, False, True],
                        rope=[False, False, False, True, False, False],
                        stiffness_scale=[1, 1, 1, 1, 2, 1], masses=[9, 9, 1, 2, 3],
                        stiffness=100.0, damping=0.5)


def test_edges_become_springs_rods_and_ropes():
    s = kite()
    mss = ms.build_system(s)
    # 0-1 dropped (both pinned); springs 1-2, 3-4 (rope), 1-3; rods 2-3, 0-4
    assert len(mss.masses) == 3 and len(mss.fixes) == 2
    assert [sp.is_chain for sp in mss.springs] == [False, True, False]
    assert [sp.stiffness for sp in mss.springs] == [100.0, 100.0, 200.0]
    assert [sp.damping for sp in mss.springs] == [0.5, 0.5, 0.5]
    np.testing.assert_allclose([sp.length for sp in mss.springs], [1.0, 1.0, math.sqrt(5)],
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose([c.length for c in mss.constraints], [math.sqrt(2), 1.0],
                               rtol=0, atol=1e-15)
    assert [m.mass for m in mss.masses] == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(mss.fixed_vertices, [0, 1])


def test_edges_between_pins_are_dropped():
    s = kite()
    np.testing.assert_array_equal(ms.between_pins(s.edges, s.pinned),
                                  [True, False, False, False, False, False])
    np.testing.assert_array_equal(s.spring_edges(), [False, True, False, True, True, False])
    np.testing.assert_array_equal(s.rod_edges(), [False, False, True, False, False, True])
    # a rod between two pins would make the system singular: it must not reach the core
    s.rigid[0] = True
    assert len(ms.build_system(s).constraints) == 2


def test_shear_pairs_are_springs_only_with_shear_stiffness():
    s = presets.cloth(3, 2, spacing=1.0, pins=[0, 1, 2], stiffness=10.0, shear_stiffness=0.0)
    # 2 faces, 4 diagonals; 7 edges, 2 of them between the pinned first row
    assert len(ms.build_system(s).springs) == 5
    s.shear_stiffness = 3.0
    springs = ms.build_system(s).springs
    assert len(springs) == 9
    assert [sp.stiffness for sp in springs] == [10.0] * 5 + [3.0] * 4
    np.testing.assert_allclose([sp.length for sp in springs][5:], [math.sqrt(2)] * 4)


def test_quad_diagonals_of_a_grid():
    s = presets.cloth(3, 3, spacing=1.0)
    # vertex (i, j) = 3j + i; faces (a, a+1, a+4, a+3) for a = 0, 1, 3, 4
    np.testing.assert_array_equal(s.faces, [[0, 1, 4, 3], [1, 2, 5, 4], [3, 4, 7, 6],
                                            [4, 5, 8, 7]])
    np.testing.assert_array_equal(ms.quad_diagonals(s.faces), [
        [0, 4], [1, 5], [3, 7], [4, 8],      # first diagonals
        [1, 3], [2, 4], [4, 6], [5, 7]])     # second diagonals
    np.testing.assert_array_equal(s.shear_pairs, ms.quad_diagonals(s.faces))
    # triangles and n-gons have no quad diagonals; a list of faces works like an array
    np.testing.assert_array_equal(
        ms.quad_diagonals([(0, 1, 2), (0, 1, 2, 3), (0, 1, 2, 3, 4)]), [[0, 2], [1, 3]])
    assert ms.quad_diagonals([]).shape == (0, 2)


def test_a_structure_simulates_bit_for_bit_like_the_same_arrays():
    s = presets.cloth(6, 5, spacing=0.2, plane="XZ", pins=[24, 29], stiffness=500.0,
                      shear_stiffness=200.0, damping=0.02, total_mass=2.0)
    s.rigid[3] = True
    s.rope[7] = True
    a = ms.build_system(s)
    springs = s.moving() & ~s.rigid
    b = ms.from_arrays(s.positions, 2.0 / 30, fixed=[24, 29],
                       springs=np.vstack([s.edges[springs], s.shear_pairs]),
                       stiffness=[500.0] * int(springs.sum()) + [200.0] * len(s.shear_pairs),
                       damping=0.02, rope=np.r_[s.rope[springs], np.zeros(len(s.shear_pairs))],
                       constraints=s.edges[[3]], gravity=[0, 0, -9.81])
    for mss in (a, b):
        mss.simulate(0.5, 40)
    assert np.abs(a.vertex_positions() - s.positions).max() > 0.01  # it moved
    np.testing.assert_array_equal(a.vertex_positions(), b.vertex_positions())
    np.testing.assert_array_equal(a.vertex_velocities(), b.vertex_velocities())


def test_structures_built_together_are_numbered_one_after_the_other():
    """build_system([a, b]): a's vertices, springs, rods, hinges and wire joints, then b's;
    each keeps its own stiffness, damping, pins and bending. Two structures that never
    meet move as each does alone (fixed steps: only Newton's stopping point differs)."""
    kite_ = kite()
    cloth = presets.cloth(4, 3, spacing=0.2, plane="XZ", pins=[8, 11], stiffness=500.0, shear_stiffness=200.0,
                          damping=0.02, total_mass=2.0)
    cloth.hinges, cloth.hinge_weights = ms.hinges_of_faces(cloth.faces)
    cloth.hinge_rigidity = 1e-3
    cloth.positions = cloth.positions + [5.0, 0, 0]
    rope = ms.Structure(positions=[[0, 3, 0], [0.1, 3, 0], [0.2, 3, 0.05]], edges=[[0, 1], [1, 2]],
                        pinned=[True, False, False], total_mass=0.1, stiffness=50.0,
                        wire_joints=[[0, 1, 2]], wire_rigidity=1e-4)
    parts = [kite_, cloth, rope]
    together = ms.build_system(parts)
    alone = [ms.build_system(p) for p in parts]
    assert len(together.masses) == sum(len(a.masses) for a in alone)
    assert [sp.stiffness for sp in together.springs] == [sp.stiffness for a in alone for sp in a.springs]
    assert [sp.damping for sp in together.springs] == [sp.damping for a in alone for sp in a.springs]
    np.testing.assert_array_equal(together.fixed_vertices, [0, 1, 5 + 8, 5 + 11, 17])
    for mss in (together, *alone):
        mss.tolerance = 0.0
        mss.simulate(0.5, 50)
    moved = np.vstack([a.vertex_positions() for a in alone])
    assert np.abs(moved - np.vstack([p.positions for p in parts])).max() > 0.05
    np.testing.assert_allclose(together.vertex_positions(), moved, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="no structure"):
        ms.build_system([])


def test_velocities_and_total_mass():
    s = ms.Structure(positions=[[0, 0, 0], [1, 0, 0]], edges=[[0, 1]], total_mass=4.0,
                     stiffness=1.0, velocities=[[0, 0, 0], [0, 2.0, 0]])
    np.testing.assert_array_equal(s.vertex_masses(), [2.0, 2.0])
    mss = ms.build_system(s, gravity=None)
    np.testing.assert_array_equal(mss.vertex_velocities(), [[0, 0, 0], [0, 2.0, 0]])


@pytest.mark.parametrize("kwargs, message", [
    (dict(edges=[[0, 5]]), r"edge 0: vertex index \[0, 5\] out of range"),
    (dict(shear_pairs=[[0, 1], [-1, 1]]), r"shear pair 1: vertex index"),
    (dict(pinned=[True]), r"pinned: expected 2 flags"),
    (dict(pinned=[0, 1]), None),  # 0/1 are flags
    (dict(rigid=[True, False]), r"rigid: expected 1 flags"),
    (dict(stiffness_scale=[1.0, 2.0]), r"stiffness_scale: expected 1 values"),
    (dict(faces=[[0, 1, 7]]), r"face 0: vertex index \[0, 1, 7\] out of range \(there are 2 vertices\)"),
    (dict(faces=[[0, 1, 1], [0, 1, -1, 1]]), r"face 1: vertex index \[0, 1, -1, 1\] out of range"),
    # unsigned indices beyond int64 are named as given, not wrapped to a negative vertex
    (dict(edges=np.array([[0, 2**63]], dtype=np.uint64)),
     r"edges row 0: vertex index \[0, 9223372036854775808\] out of range"),
    (dict(faces=[[0, 1, 1], np.array([0, 1, 2**64 - 1], dtype=np.uint64)]),
     r"face 1: vertex index \[0, 1, 18446744073709551615\] out of range"),
    (dict(faces=np.array([[0, 1, 2**63]], dtype=np.uint64)), r"face 0: vertex index \[0, 1, 9223372036854775808\]"),
    # a face of two vertices bounds nothing; self-collision would leave it out silently
    (dict(faces=[[0, 1, 1], [0, 1]], self_collision_distance=0.1), r"face 1: 2 vertex\(es\); a face needs at least 3"),
    (dict(faces=[[0, 1, 1], [0.0, 1.0, 1.5]]), r"face 1: expected integer vertex indices"),
    # weights are no flags: cast to bool, every vertex of nonzero weight was pinned
    (dict(pinned=[0.0, 0.3]), r"pinned: expected 2 flags \(True/False or 0/1\), got 0.3 at 1; .*weights > 0.5"),
    (dict(rope=["yes"]), r"rope: expected 1 flags"),
    # one number for the structure (numpy's "truth value ... is ambiguous" before)
    (dict(self_collision_distance=[0.01, 0.01]), r"self_collision_distance must be one number .* shape \(2,\)"),
])
def test_bad_structures_raise_value_errors(kwargs, message):
    args = dict(positions=[[0, 0, 0], [1, 0, 0]], edges=[[0, 1]])
    args.update(kwargs)
    if message is None:
        assert ms.Structure(**args).pinned.tolist() == [False, True]
        return
    with pytest.raises(ValueError, match=message):
        ms.Structure(**args)


@pytest.mark.parametrize("arrays, message", [
    (dict(springs=np.array([[0, 2**63]], dtype=np.uint64)), r"spring 0: vertex index \[0, 9223372036854775808\]"),
    (dict(constraints=np.array([[2**64 - 1, 0]], dtype=np.uint64)), r"constraint 0: vertex index \[18446744073709551615, 0\]"),
    (dict(springs=[[0, 1]], faces=[[0, 1, 2**63]], self_collision_distance=0.1), r"face 0: vertex index \[0, 1, 9223372036854775808\]"),
    (dict(springs=[[0, 1]], faces=[[0, 1]], self_collision_distance=0.1), r"face 0: 2 vertex\(es\); a face needs at least 3"),
])
def test_from_arrays_names_indices_as_given(arrays, message):
    """Unsigned indices beyond int64 were reported as a negative vertex, and a face of two
    vertices was left out of self-collision silently (an adversarial test's findings)."""
    with pytest.raises(ValueError, match=message):
        ms.from_arrays(np.array([[0, 0, 0], [1, 0, 0.0]]), np.ones(2), stiffness=1.0, **arrays)


def test_bad_values_reach_from_arrays_checks():
    s = ms.Structure(positions=[[0, 0, 0], [1, 0, 0]], edges=[[0, 1]], masses=[1.0, -1.0])
    with pytest.raises(ValueError, match="vertex 1: mass must be positive"):
        ms.build_system(s)


# ----------------------------------------------------------------------------- presets

def edge_lengths(s, mask=None):
    e = s.edges if mask is None else s.edges[mask]
    return np.linalg.norm(s.positions[e[:, 1]] - s.positions[e[:, 0]], axis=1)


def edge_keys(s):
    return {(min(a, b), max(a, b)) for a, b in s.edges.tolist()}


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_is_a_valid_structure(name):
    s = presets.PRESETS[name]()
    assert len(edge_keys(s)) == len(s.edges)           # no edge twice
    assert (s.edges[:, 0] != s.edges[:, 1]).all()
    assert not ms.between_pins(s.edges, s.pinned).any()
    assert not (s.rigid & s.rope).any()
    assert (edge_lengths(s) > 1e-6).all()
    mss = ms.build_system(s)
    mss.simulate(0.1, 5)
    assert np.isfinite(mss.vertex_positions()).all()
    assert mss.max_constraint_violation() < 1e-6


def test_chain():
    s = presets.chain(n=4, spacing=0.5, angle=90.0, mass=0.1)
    assert (len(s.positions), len(s.edges)) == (5, 4)
    np.testing.assert_array_equal(np.flatnonzero(s.pinned), [0])
    np.testing.assert_allclose(edge_lengths(s), 0.5, rtol=1e-15)
    np.testing.assert_allclose(s.positions[:, 0], [0, 0.5, 1.0, 1.5, 2.0])
    assert s.total_mass == pytest.approx(0.5) and s.masses is None
    assert not s.rigid.any() and not s.rope.any()


def test_pendulums_are_rods():
    p = presets.pendulum(length=1.5, angle=90.0)
    assert p.rigid.tolist() == [True] and p.pinned.tolist() == [True, False]
    np.testing.assert_allclose(edge_lengths(p), [1.5])
    d = presets.double_pendulum(lengths=(0.8, 0.6), angles=(120.0, 150.0))
    assert d.rigid.tolist() == [True, True] and d.pinned.tolist() == [True, False, False]
    np.testing.assert_allclose(edge_lengths(d), [0.8, 0.6])
    assert d.positions[1, 2] == pytest.approx(-0.8 * math.cos(math.radians(120)))
    mss = ms.build_system(d)
    mss.simulate(1.0, 200)
    assert mss.max_constraint_violation() < 1e-9


@pytest.mark.parametrize("cross, per_cell", [(True, 2), (False, 1)])
def test_bridge(cross, per_cell):
    W, H = 6, 3
    s = presets.bridge(width=W, height=H, spacing=0.5, cross=cross)
    # rows, columns (less the 2 × (H-1) between the pinned end columns), diagonals
    assert len(s.edges) == H * (W - 1) + (W - 2) * (H - 1) + per_cell * (W - 1) * (H - 1)
    np.testing.assert_array_equal(np.flatnonzero(s.pinned), [0, 5, 6, 11, 12, 17])
    assert set(np.round(edge_lengths(s), 12)) == {0.5, round(0.5 * math.sqrt(2), 12)}
    corners = presets.bridge(width=W, height=H, pins="corners")
    np.testing.assert_array_equal(np.flatnonzero(corners.pinned), [0, W - 1])
    assert len(corners.edges) == H * (W - 1) + W * (H - 1) + 2 * (W - 1) * (H - 1)


def test_spinning_ring():
    n, r, spin = 12, 0.8, 6.0
    s = presets.spinning_ring(n=n, radius=r, spin=spin)
    assert len(s.positions) == n + 1 and len(s.edges) == 3 * n
    np.testing.assert_array_equal(np.flatnonzero(s.pinned), [n])
    np.testing.assert_allclose(np.linalg.norm(s.positions[:n], axis=1), r)
    speed = np.linalg.norm(s.velocities, axis=1)
    np.testing.assert_allclose(speed[:n], spin * r)
    assert speed[n] == 0
    free = presets.spinning_ring(n=n, hub=False)
    assert len(free.positions) == n and not free.pinned.any() and len(free.edges) == 2 * n


def test_crane():
    s = presets.crane(levels=4, jib_segments=3, rope_segments=4, rope_length=1.2,
                      mass=0.05, load_mass=1.0)
    assert s.pinned.sum() == 4 and (s.positions[s.pinned, 2] == 0).all()
    assert s.rope.sum() == 4
    np.testing.assert_allclose(edge_lengths(s, s.rope), 0.3)
    assert s.masses[-1] == 1.0 and (s.masses[:-1] == 0.05).all()
    # the rope hangs from the one vertex that also carries rods: the hook
    hook = set(s.edges[s.rope].ravel()) & set(s.edges[s.rigid].ravel())
    assert len(hook) == 1
    mss = ms.build_system(s)
    rods = s.rod_edges()
    mss.simulate(0.2, 40)
    p = mss.vertex_positions()
    np.testing.assert_allclose(np.linalg.norm(p[s.edges[rods, 1]] - p[s.edges[rods, 0]], axis=1),
                               edge_lengths(s, rods), rtol=0, atol=1e-6)


def test_cloth():
    s = presets.cloth(4, 3, spacing=0.5, plane="XZ", pins=[8, 11])
    assert len(s.positions) == 12 and len(s.edges) == 3 * 3 + 4 * 2 and len(s.faces) == 6
    np.testing.assert_allclose(s.positions[7], [1.5, 0.0, 0.5])
    np.testing.assert_allclose(edge_lengths(s), 0.5)
    np.testing.assert_array_equal(np.flatnonzero(s.pinned), [8, 11])
    assert len(s.shear_pairs) == 12
    flat = presets.cloth(4, 3, spacing=0.5)
    np.testing.assert_allclose(flat.positions[7], [1.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="at least 2"):
        presets.cloth(1, 3)


@pytest.mark.parametrize("fields, message", [
    (dict(positions=np.zeros((6, 2))), r"positions: expected shape \(count, 3\)"),
    (dict(edges=[(0, 1, 2, 3)]), r"edges: expected shape \(count, 2\)"),
    (dict(edges=[(0.7, 1.2)]), "edges: expected integer"),
    (dict(edges=[(1, 1)]), "edge 0: both ends are vertex 1"),
    (dict(rigid=[True], rope=[True]), "edge 0 is marked both rigid and rope"),
    (dict(masses=[1.0, 2.0]), "masses: expected 3 values"),
    (dict(velocities=np.zeros((2, 3))), "velocities: expected 3 rows"),
])
def test_malformed_input_is_refused_not_reshaped(fields, message):
    args = dict(positions=np.zeros((3, 3)) + np.arange(3)[:, None], edges=[(0, 1)])
    args.update(fields)
    with pytest.raises(ValueError, match=message):
        ms.Structure(**args)


def test_bending_pairs_join_the_vertices_beyond_each_shared_edge():
    grid = presets.cloth(3, 3)  # vertex (i, j) = 3 j + i
    assert ms.bending_pairs(grid.faces).tolist() == [[0, 2], [0, 6], [1, 7], [2, 8], [3, 5],
                                                    [6, 8]]
    assert ms.bending_pairs([(0, 1, 2), (1, 0, 3)]).tolist() == [[2, 3]]
    assert ms.bending_pairs([(0, 1, 2), (0, 1, 3)]).tolist() == [[2, 3]]  # either winding
    assert ms.bending_pairs([(0, 1, 2, 3)]).tolist() == []  # no edge shared
    # A triangle beside a quad: across their shared edge 1-2, 0 faces 3 and 4.
    assert ms.bending_pairs([(0, 1, 2), (2, 1, 3, 4)]).tolist() == [[0, 3], [0, 4]]
    # A face of two vertices is refused by its number, as Structure does, not left out.
    for helper in (ms.bending_pairs, ms.hinges_of_faces):
        with pytest.raises(ValueError, match="face 1: 2 vertex"):
            helper([(0, 1, 2), (1, 2)])


def test_bending_springs_are_added_only_with_a_stiffness_and_resist_folding():
    """A horizontal strip clamped along its first two columns of vertices falls: without
    bending springs it folds sharply at the clamp, a net hinged there; with them the fold
    spreads along the strip and the first free column stays far closer to the plane."""
    def first_free_column_drop(bending):
        strip = presets.cloth(9, 3, spacing=0.1, pins=[0, 1, 9, 10, 18, 19], total_mass=0.1,
                              stiffness=2000.0, shear_stiffness=2000.0, damping=2.0,
                              bending_stiffness=bending)
        mss = ms.build_system(strip)
        springs = len(mss.springs)
        mss.simulate(0.3, 30)
        return springs, -mss.vertex_positions()[[2, 11, 20], 2].mean()
    plain, drop_plain = first_free_column_drop(0.0)
    bent, drop_bent = first_free_column_drop(20000.0)
    pairs = ms.bending_pairs(presets.cloth(9, 3).faces)
    pinned = np.isin(pairs, [0, 1, 9, 10, 18, 19]).all(axis=1)
    assert bent - plain == (~pinned).sum()  # links between two pins are left out
    assert drop_plain > 0.08
    assert drop_bent < 0.5 * drop_plain


def documented_structure_call() -> ast.Call:
    """The ``mass_spring.Structure(...)`` call that docs/architecture.md gives as its
    signature."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", doc, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "mass_spring.Structure":
                return node
    raise AssertionError("docs/architecture.md gives no mass_spring.Structure(...) call")


def test_the_documented_structure_signature_is_the_code_s():
    """docs/architecture.md's Structure(...) names every parameter of the code in its
    order, the ones without a default as positional, and defaults that make the same
    Structure as the code's own (a doc's () is the code's empty pair array)."""
    call = documented_structure_call()
    parameters = inspect.signature(ms.Structure).parameters
    documented = [a.id for a in call.args] + [k.arg for k in call.keywords]
    assert documented == list(parameters)
    required = [name for name, p in parameters.items() if p.default is inspect.Parameter.empty]
    assert [a.id for a in call.args] == required
    defaults = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    positions, edges = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], [[0, 1]]
    as_documented = ms.Structure(positions, edges, **defaults)
    as_coded = ms.Structure(positions, edges)
    for field in dataclasses.fields(ms.Structure):
        doc_value, code_value = getattr(as_documented, field.name), getattr(as_coded, field.name)
        assert type(doc_value) is type(code_value), field.name
        np.testing.assert_array_equal(np.asarray(doc_value), np.asarray(code_value),
                                      err_msg=field.name)
        assert np.shape(doc_value) == np.shape(code_value), field.name


@pytest.mark.parametrize("make, values, message", [
    (presets.bridge, dict(width=2), "bridge width must be a whole number of at least 3, got 2"),
    (presets.bridge, dict(width=3.7), "bridge width must be a whole number of at least 3, got 3.7"),
    (presets.bridge, dict(width="5"), "bridge width must be a whole number of at least 3, got '5'"),
    (presets.bridge, dict(height=0), "bridge height must be a whole number of at least 1, got 0"),
    (presets.bridge, dict(spacing=0.0), "bridge spacing must be positive and finite (metres), got 0.0"),
    (presets.bridge, dict(spacing=-0.25), "bridge spacing must be positive"),
    (presets.bridge, dict(spacing=math.nan), "bridge spacing must be positive"),
    (presets.chain, dict(n=0), "chain n must be a whole number of at least 1, got 0"),
    (presets.chain, dict(n=-1), "chain n must be a whole number of at least 1, got -1"),
    (presets.chain, dict(spacing=0.0), "chain spacing must be positive"),
    (presets.pendulum, dict(length=0.0), "pendulum length must be positive"),
    (presets.double_pendulum, dict(lengths=(0.8, 0.0)), "double_pendulum lengths must be positive"),
    (presets.spinning_ring, dict(n=4), "spinning_ring n must be a whole number of at least 5, got 4"),
    (presets.spinning_ring, dict(radius=0.0), "spinning_ring radius must be positive"),
    (presets.crane, dict(levels=0), "crane levels must be a whole number of at least 1, got 0"),
    (presets.crane, dict(jib_segments=0), "crane jib_segments must be a whole number of at least 1"),
    (presets.crane, dict(rope_segments=0), "crane rope_segments must be a whole number of at least 1"),
    (presets.crane, dict(side=0.0), "crane side must be positive"),
    (presets.cloth, dict(nx=2, ny=1), "cloth ny must be a whole number of at least 2, got 1"),
    (presets.cloth, dict(nx=2.5), "cloth nx must be a whole number of at least 2, got 2.5"),
    (presets.cloth, dict(spacing=0.0), "cloth spacing must be positive"),
    (presets.cloth, dict(nx=3, pins=[9]), "cloth pins must be vertex indices from 0 to 8, got 9"),
    (presets.cloth, dict(nx=3, pins=[-1]), "cloth pins must be vertex indices from 0 to 8, got -1"),
])
def test_presets_refuse_bad_counts_and_lengths_by_name(make, values, message):
    """A count that is no whole number or below the structure's least, or a length that is
    not positive, is refused before anything is built, naming the parameter and its range:
    before, 3.7 columns became 3, a zero spacing made vertices the bake refuses, a crane
    without jib segments divided by zero and pin -1 pinned the last vertex."""
    with pytest.raises(ValueError, match=re.escape(message)):
        make(**values)


@pytest.mark.parametrize("make, values", [
    (presets.bridge, dict(width=3, height=1)),
    (presets.bridge, dict(width=np.int64(3), height=1, pins="corners")),
    (presets.chain, dict(n=1)),
    (presets.spinning_ring, dict(n=5)),
    (presets.crane, dict(levels=1, jib_segments=1, rope_segments=1)),
    (presets.cloth, dict(nx=2, ny=2, pins=[0, 1])),
])
def test_the_least_structures_the_presets_accept_simulate(make, values):
    mss = ms.build_system(make(**values))
    before = mss.vertex_positions()
    mss.simulate(0.25, 6)
    after = mss.vertex_positions()
    assert np.isfinite(after).all() and np.abs(after - before).max() > 0


@pytest.mark.parametrize("count", [0, 1, 2, 7, 8, 1001])
def test_median_is_numpys(count):
    """ms.median gives np.median's value, bit for bit (the bake's automatic self-collision
    distance and warnings read it), without importing numpy.ma."""
    values = np.random.default_rng(count).normal(size=count)
    if count:
        assert ms.median(values) == np.median(values)
        assert ms.median(values.tolist()) == np.median(values)
    else:
        assert math.isnan(ms.median(values))
    assert ms.median(np.full(4, 0.1)) == np.median(np.full(4, 0.1))


def test_median_does_not_import_numpy_ma():
    """What ms.median is for: in a fresh process, numpy.ma stays unimported (numpy 1.x
    imports it with numpy itself: nothing to spare there)."""
    code = ("import sys, numpy; before = 'numpy.ma' in sys.modules; import mass_spring as ms; "
            "ms.median([3.0, 1.0, 2.0, 5.0]); ms.scattered_vertex_order([[0, 1], [1, 2]], 3); "
            "print(before, 'numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    with_numpy, after = out.stdout.split()
    if with_numpy == "True":
        pytest.skip("this numpy imports numpy.ma itself")
    assert after == "False"
