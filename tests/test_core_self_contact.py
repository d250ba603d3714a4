"""Self-collision (set_self_contact; native/contact/self_contact.hpp): parts that share no
vertex keep the distance apart and never pass through each other.

The pair law is checked against its energy; structures against what must hold at every
frame: ropes and wires keep their segments apart, where without self-collision they pass
through each other (the ribbon folding onto itself, checked with Blender's own BVH overlap,
is in tests/test_addon_self_collision.py).
"""
import dataclasses

import numpy as np
import pytest

import mass_spring as ms
from mass_spring._core import laws

G = 9.81
FLOOR_V = np.array([[-10, -10, 0], [10, -10, 0], [10, 10, 0], [-10, 10, 0]], float)
FLOOR_T = np.array([[0, 1, 2], [0, 2, 3]])


def segment_distances(a0, a1, b0, b1):
    """Distances of segments a (n) to segments b (m), (n, m): the nearest points of two
    segments, clamped as in Ericson's Real-Time Collision Detection 5.1.9, by brute force
    over the candidate parameters (interior solution and the four clamped edges)."""
    d1 = (a1 - a0)[:, None, :]
    d2 = (b1 - b0)[None, :, :]
    r = a0[:, None, :] - b0[None, :, :]
    a = (d1 * d1).sum(-1)
    e = (d2 * d2).sum(-1)
    b = (d1 * d2).sum(-1)
    c = (d1 * r).sum(-1)
    f = (d2 * r).sum(-1)

    def at(s, t):
        return np.linalg.norm(r + s[..., None] * d1 - t[..., None] * d2, axis=-1)

    denom = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.clip(np.where(denom > 1e-14 * a * e, (b * f - c * e) / denom, 0.0), 0, 1)
        t = np.clip((b * s + f) / e, 0, 1)
        best = at(s, t)
        for s_fixed in (0.0, 1.0):  # t free on an end of a
            sf = np.full_like(a, s_fixed)
            best = np.minimum(best, at(sf, np.clip((b * sf + f) / e, 0, 1)))
        for t_fixed in (0.0, 1.0):  # s free on an end of b
            tf = np.full_like(a, t_fixed)
            best = np.minimum(best, at(np.clip((b * tf - c) / a, 0, 1), tf))
    return best


def closest_unrelated_segments(x, edges, other=None):
    """The smallest distance between two edges that share no vertex (of `edges`, or
    between `edges` and `other`)."""
    other = edges if other is None else other
    d = segment_distances(x[edges[:, 0]], x[edges[:, 1]], x[other[:, 0]], x[other[:, 1]])
    shared = (edges[:, None, :, None] == other[None, :, None, :]).any(axis=(2, 3))
    return float(np.where(shared, np.inf, d).min())


def rope(n, length, start, direction):
    direction = np.asarray(direction, float) / np.linalg.norm(direction)
    x = np.asarray(start, float) + np.outer(np.linspace(0, length, n + 1), direction)
    edges = np.column_stack([np.arange(n), np.arange(1, n + 1)])
    return x, edges


def wire_system(x, edges, pinned=None, distance=0.0, friction=0.3, total_mass=0.1, stiffness=2000.0,
                wire_rigidity=0.0, floor=True):
    st = ms.Structure(positions=x, edges=edges, pinned=pinned, total_mass=total_mass, stiffness=stiffness,
                      damping=0.2, wire_joints=ms.wire_joints(edges), wire_rigidity=wire_rigidity,
                      self_collision_distance=distance, self_friction=friction)
    mss = ms.build_system(st)
    if floor:
        mss.set_colliders(FLOOR_V, FLOOR_T, 0.002, 0.5)
    mss.tolerance = 1e-3
    return mss


# ---------------------------------------------------------------- the pair law

def finite_difference_forces(kind, x, **law):
    eps = 1e-7
    grad = np.zeros(12)
    for k in range(12):
        xp, xm = x.copy(), x.copy()
        xp.flat[k] += eps
        xm.flat[k] -= eps
        grad[k] = (laws.self_contact_terms(kind, xp, np.zeros((4, 3)), **law)[0] -
                   laws.self_contact_terms(kind, xm, np.zeros((4, 3)), **law)[0]) / (2 * eps)
    return -grad


PAIRS = {
    # a point 6 mm over a triangle's inside
    "point_triangle": np.array([[0.2, 0.3, 0.006], [0, 0, 0], [1, 0, 0.0], [0, 1, 0.001]]),
    # a point 5 mm beyond a triangle's edge, 4 mm up: nearest point on the edge
    "point_triangle_edge": np.array([[0.5, -0.005, 0.004], [0, 0, 0], [1, 0, 0], [0, 1, 0]]),
    # two edges crossing at right angles, 7 mm apart
    "edge_edge": np.array([[-0.5, 0.1, 0.007], [0.5, 0.12, 0.007], [0, -0.5, 0], [0.02, 0.5, 0]]),
    # a point 3 mm from a wire
    "point_edge": np.array([[0.3, 0.003, 0.0], [0, 0, 0], [1, 0, 0], [1, 0, 0]]),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_pair_forces_are_minus_the_gradient_of_the_energy(name):
    kind = name if name != "point_triangle_edge" else "point_triangle"
    law = dict(distance=0.01, friction=0.0, stiffness=500.0, mass=0.01)
    x = PAIRS[name]
    energy, f, _, _ = laws.self_contact_terms(kind, x, np.zeros((4, 3)), **law)
    assert energy > 0 and np.abs(f).max() > 0  # within the distance: pushed apart
    np.testing.assert_allclose(f, finite_difference_forces(kind, x, **law), rtol=1e-5, atol=1e-9)
    # equal and opposite: no net force, and the point is pushed away from the other part
    np.testing.assert_allclose(f.reshape(4, 3).sum(axis=0), 0, atol=1e-12)


def test_the_newton_block_is_the_stiffness_along_the_normal():
    """Moving the point along the normal, the force changes by df/dx times the move."""
    law = dict(distance=0.01, friction=0.0, stiffness=500.0, mass=0.01)
    x = PAIRS["point_triangle"]
    _, f0, dfdx, _ = laws.self_contact_terms("point_triangle", x, np.zeros((4, 3)), **law)
    normal = np.cross(x[2] - x[1], x[3] - x[1])
    normal /= np.linalg.norm(normal)
    move = np.zeros(12)
    move[:3] = 1e-7 * normal
    f1 = laws.self_contact_terms("point_triangle", x + move.reshape(4, 3), np.zeros((4, 3)), **law)[1]
    np.testing.assert_allclose(f1 - f0, dfdx @ move, rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("kind", ["point_triangle", "edge_edge", "point_edge"])
def test_pairs_apart_skip_only_pairs_that_cannot_touch(kind):
    """A listed pair is skipped at an assembly (stays_apart) only where its parts are still
    beyond its distance, and its law finds it apart too: pairs listed at random, their
    vertices moved at random by up to the pair's own size. The one exception is meant: a
    point that went to the other side of a triangle's plane without coming near it (around
    its edge, or the triangle turned over) reads as deep in contact by the side it was
    listed on, a push through the triangle that the skip leaves out."""
    rng = np.random.default_rng(7)
    distance, skipped, other_side = 0.05, 0, 0

    def side(x):  # of the triangle's plane the point is on
        return np.sign(np.dot(x[0] - x[1], np.cross(x[2] - x[1], x[3] - x[1])))

    for _ in range(4000):
        listed = rng.uniform(-0.2, 0.2, (4, 3))
        if kind == "point_edge":
            listed[3] = listed[2]
        x = listed + rng.uniform(-1, 1, (4, 3)) * rng.choice([0.005, 0.02, 0.1])
        if kind == "point_edge":
            x[3] = x[2]
        apart, clearance, touching = laws._self_pair_stays_apart(kind, listed, x, distance)
        if apart:
            skipped += 1
            assert clearance > 0, (listed, x)
            if touching:
                assert kind == "point_triangle" and side(x) != side(listed), (listed, x)
                other_side += 1
    # the skip is not vacuous: most pairs listed at random are far beyond 5 cm and move less
    assert skipped > 1000
    # a thin triangle turned over: far from the point, which its old side reads as deep in
    listed = np.array([[0.01, -0.003, 0.2], [0, 0, 0], [0.02, 0, 0], [0.01, -0.01, 0]])
    turned = listed.copy()
    turned[0, 1], turned[3, 1] = 0.003, 0.01
    if kind == "point_triangle":
        assert laws._self_pair_stays_apart(kind, listed, turned, distance) == (True, pytest.approx(0.15), True)


def test_a_pair_beyond_the_distance_has_no_force():
    x = PAIRS["point_triangle"].copy()
    x[0, 2] = 0.02
    energy, f, dfdx, _ = laws.self_contact_terms("point_triangle", x, np.zeros((4, 3)), 0.01, 0.3, 500.0, 0.01)
    assert energy == 0 and not f.any() and not dfdx.any()


def test_friction_opposes_sliding_up_to_mu_times_the_normal_force():
    law = dict(distance=0.01, friction=0.4, stiffness=500.0, mass=0.01)
    x = PAIRS["point_triangle"]
    v = np.zeros((4, 3))
    v[0] = (1.0, 0, 0)  # the point slides along x at 1 m/s
    _, f, _, _ = laws.self_contact_terms("point_triangle", x, v, **law)
    _, f_still, _, _ = laws.self_contact_terms("point_triangle", x, np.zeros((4, 3)), **law)
    tangential = f[:3] - f_still[:3]
    normal_force = np.linalg.norm(f_still[:3])
    assert tangential[0] < 0
    assert np.linalg.norm(tangential) == pytest.approx(0.4 * normal_force, rel=1e-3)


def test_edges_turned_parallel_fade_out():
    """Parallel edges' nearest points jump from end to end as they turn: their pair fades
    to nothing there (the other kinds of pairs hold such edges apart)."""
    law = dict(distance=0.01, friction=0.0, stiffness=500.0, mass=0.01)
    x = np.array([[0, 0, 0.005], [1, 0, 0.005], [0.2, 0, 0], [1.2, 0, 0]])
    assert laws.self_contact_terms("edge_edge", x, np.zeros((4, 3)), **law)[0] == 0.0
    x[3] = (0.2, 1.0, 0)  # at right angles: the full force
    assert laws.self_contact_terms("edge_edge", x, np.zeros((4, 3)), **law)[0] > 0


# ---------------------------------------------------------------- input

def test_a_distance_the_mesh_cannot_hold_is_refused_naming_the_parts():
    x, edges = rope(10, 0.5, (0, 0, 0.5), (1, 0, 0))  # segments of 5 cm
    st = ms.Structure(positions=x, edges=edges, total_mass=0.1, stiffness=100.0)
    mss = ms.build_system(st)
    with pytest.raises(ValueError, match=r"self-collision distance 0\.06.* edge \d+-\d+ and edge \d+-\d+ share no "
                                         r"vertex but are 0\.05"):
        mss.set_self_contact(np.zeros((0, 3), int), edges, 0.06)
    mss.set_self_contact(np.zeros((0, 3), int), edges, 0.04)  # below the spacing: fine
    assert ms.closest_parts(x, np.zeros((0, 3), int), edges, 0.06)[0] == pytest.approx(0.05)


@pytest.mark.parametrize("triangles, edges, distance, friction, message", [
    ([[0, 1, 7]], [], 0.01, 0.0, "self-collision triangle 0 uses vertex 7, but there are 3"),
    ([[0, 1, 1]], [], 0.01, 0.0, "self-collision triangle 0 uses vertex 1 twice"),
    (np.zeros((0, 3)), [[0, 5]], 0.01, 0.0, "self-collision edge 0 uses vertex 5"),
    (np.zeros((0, 3)), [[0, 1]], -0.01, 0.0, "distance must be a number >= 0"),
    (np.zeros((0, 3)), [[0, 1]], 0.01, -1.0, "friction must be a number >= 0"),
    (np.zeros((0, 3)), [[0, 1]], float("nan"), 0.0, "distance must be a number >= 0"),
])
def test_bad_self_contact_input_is_refused(triangles, edges, distance, friction, message):
    mss = ms.from_arrays(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float), np.ones(3),
                         springs=np.array([[0, 1], [1, 2]]), stiffness=10.0)
    with pytest.raises(ValueError, match=message):
        mss.set_self_contact(np.asarray(triangles, dtype=np.int64).reshape(-1, 3),
                             np.asarray(edges, dtype=np.int64).reshape(-1, 2), distance, friction)


def test_masses_added_after_self_contact_are_refused():
    """Vertices are numbered masses, then fixes: a mass added later would renumber the
    fixes the triangles and edges name. Refused with the way out, which works."""
    mss = ms.MassSpringSystem3d()
    a = mss.add(ms.Mass(1.0, [0.0, 0.0, 0.0]))
    f = mss.add(ms.Fix([1.0, 0.0, 0.0]))
    mss.add(ms.Spring(10.0, 1.0, (a, f)))
    mss.set_self_contact(np.zeros((0, 3), np.int64), np.array([[0, 1]]), 0.01)
    with pytest.raises(ValueError, match="add masses before set_self_contact"):
        mss.add(ms.Mass(1.0, [0.0, 1.0, 0.0]))
    mss.add(ms.Fix([2.0, 0.0, 0.0]))  # a fix is numbered last: nothing moves
    mss.set_self_contact(np.zeros((0, 3), np.int64), np.zeros((0, 2), np.int64), 0.0)
    mss.add(ms.Mass(1.0, [0.0, 1.0, 0.0]))
    mss.set_self_contact(np.zeros((0, 3), np.int64), np.array([[0, 2], [1, 3]]), 0.01)


def test_self_contact_is_for_3d_systems():
    mss = ms.from_arrays(np.array([[0, 0], [1, 0], [2, 0]], float), np.ones(3), springs=np.array([[0, 1], [1, 2]]),
                         stiffness=10.0)
    with pytest.raises(ValueError, match="self-collision is for 3-D systems"):
        mss.set_self_contact(np.zeros((0, 3), np.int64), np.array([[0, 1], [1, 2]]), 0.01)


# ---------------------------------------------------------------- structures

def crossing_wires(distance):
    """A free wire dropped crosswise onto a wire pinned at its ends, 5 cm below."""
    low, low_edges = rope(20, 1.0, (-0.5, 0, 0), (1, 0, 0))
    up, up_edges = rope(20, 1.0, (0, -0.5, 0.05), (0, 1, 0))
    x = np.vstack([low, up])
    edges = np.vstack([low_edges, up_edges + len(low)])
    pinned = np.zeros(len(x), bool)
    pinned[[0, 20]] = True
    mss = wire_system(x, edges, pinned, distance, total_mass=0.2, floor=False)
    return mss, edges[:20], edges[20:]


def test_a_wire_dropped_across_another_rests_on_it_and_falls_through_without():
    distance = 0.01
    mss, low, up = crossing_wires(distance)
    for _ in range(24):
        mss.simulate(1 / 24, 1)
        x = mss.vertex_positions()
        assert closest_unrelated_segments(x, low, up) >= 0.5 * distance
    x = mss.vertex_positions()
    assert x[31, 2] > x[10, 2] + 0.5 * distance  # the free wire's middle lies on the pinned one's
    assert mss.stats["self_contact_pairs"] > 0
    loose, _, _ = crossing_wires(0.0)
    loose.simulate(1.0, 24)
    assert loose.vertex_positions()[31, 2] < -1.0  # fell through


def test_from_arrays_takes_self_collision():
    """The array API's self_collision_distance and self_friction: a wire dropped across
    a pinned one, built by from_arrays, rests on it; without, falls through."""
    low, low_edges = rope(20, 1.0, (-0.5, 0, 0), (1, 0, 0))
    up, up_edges = rope(20, 1.0, (0, -0.5, 0.05), (0, 1, 0))
    x = np.vstack([low, up])
    edges = np.vstack([low_edges, up_edges + len(low)])

    def dropped(distance):
        mss = ms.from_arrays(x, 0.2 / len(x), fixed=[0, 20], springs=edges, stiffness=2000.0, damping=0.2,
                             gravity=[0, 0, -G], self_collision_distance=distance, self_friction=0.3)
        mss.tolerance = 1e-3
        mss.simulate(1.0, 24)
        return mss.vertex_positions()

    rests = dropped(0.01)
    assert closest_unrelated_segments(rests, edges[:20], edges[20:]) >= 0.005
    assert rests[31, 2] > rests[10, 2]  # the free wire's middle lies on the pinned one's
    assert dropped(0.0)[31, 2] < -1.0  # fell through


def rope_pile(distance, frames=36):
    """A rope of 50 segments of 2 cm hanging straight down, its lower end 1 cm over the
    floor, let go: it piles up on the floor."""
    x, edges = rope(50, 1.0, (0, 0, 1.01), (0.05, 0, -1))
    mss = wire_system(x, edges, distance=distance, total_mass=0.1, stiffness=3000.0, wire_rigidity=1e-5)
    closest = []
    for _ in range(frames):
        mss.simulate(1 / 24, 1)
        closest.append(closest_unrelated_segments(mss.vertex_positions(), edges))
    return mss, np.array(closest)


def test_a_rope_piled_on_the_floor_keeps_its_segments_apart():
    distance = 0.008
    mss, closest = rope_pile(distance)
    assert closest.min() >= 0.5 * distance
    assert mss.vertex_positions()[:, 2].max() < 0.2  # it has fallen
    assert mss.stats["self_contact_pairs"] > 0
    _, loose = rope_pile(0.0)
    assert loose.min() < 0.1 * distance  # without: segments pass through each other


def test_a_resting_structure_keeps_its_pairs_over_many_steps():
    """Once the rope has piled up and lies still, its pairs are listed with a skin around
    every vertex and kept while no two of its parts come nearer by the skin
    (SelfContact::window_holds): a second of rest lists them at most a few times over its
    steps, and the segments still keep at least half the distance."""
    distance = 0.008
    mss, _ = rope_pile(distance)
    _, edges = rope(50, 1.0, (0, 0, 1.01), (0.05, 0, -1))
    # Until it lies still: a pile's motion is chaotic (round-off in the 1e-15 changes when
    # it comes to rest), so the frame it does is not fixed.
    for _ in range(72):
        if np.linalg.norm(mss.vertex_velocities(), axis=1).max() < 0.01:
            break
        mss.simulate(1 / 24, 1)
    assert np.linalg.norm(mss.vertex_velocities(), axis=1).max() < 0.01
    before = mss.stats
    for _ in range(24):
        mss.simulate(1 / 24, 1)
        assert closest_unrelated_segments(mss.vertex_positions(), edges) >= 0.5 * distance
    after = mss.stats
    assert before["self_contact_listings"] >= before["steps"]  # falling: listed every step
    assert after["steps"] - before["steps"] >= 24
    assert after["self_contact_listings"] - before["self_contact_listings"] <= 3
    assert after["self_contact_pairs"] > 0


def square_sheet(n, height, pins, distance):
    """A square sheet of n x n vertices, 50 cm, 200 g, flat at `height`."""
    from mass_spring import presets
    sheet = presets.cloth(n, n, spacing=0.5 / (n - 1), pins=pins, total_mass=0.2, stiffness=500.0, damping=0.01)
    x = np.asarray(sheet.positions, float).copy()
    x[:, 2] = height
    return dataclasses.replace(sheet, positions=x, self_collision_distance=distance, self_friction=0.3)


def test_a_sheet_falling_as_one_keeps_its_pairs_and_falls_as_without():
    """A sheet falling freely moves as one: no two of its parts come nearer, so the pairs
    listed at the start hold for the whole fall (one listing in 24 steps), and it falls to
    the same bits as without self-collision."""

    def fall(distance):
        mss = ms.build_system(square_sheet(9, 0.3, [], distance))
        mss.tolerance = 1e-3
        mss.simulate(0.5, 24)
        return mss

    kept, loose = fall(0.01), fall(0.0)
    assert kept.stats["steps"] >= 24
    assert kept.stats["self_contact_listings"] == 1
    np.testing.assert_array_equal(kept.vertex_positions(), loose.vertex_positions())


def test_a_sheet_landing_flat_on_the_floor_keeps_its_pairs():
    """A sheet dropped flat 10 cm onto the floor never touches itself. Its masses are
    predicted to stop where the floor's penalty is fully stiff, not below it, so landing
    is no stray from the prediction: the pairs listed at the start hold through the fall,
    the landing and the rest (once in 48 steps; at every landing step without that), and
    it lands to the same bits as without self-collision."""

    def drop(distance):
        mss = ms.build_system(square_sheet(9, 0.1, [], distance))
        mss.set_colliders(FLOOR_V, FLOOR_T, 0.01, 0.5)
        mss.tolerance = 1e-3
        mss.simulate(1.0, 48)
        return mss

    kept, loose = drop(0.01), drop(0.0)
    assert kept.vertex_positions()[:, 2].max() < 0.011  # landed
    assert kept.stats["steps"] >= 48
    assert kept.stats["self_contact_listings"] == 1
    np.testing.assert_array_equal(kept.vertex_positions(), loose.vertex_positions())


def test_a_sheet_falling_onto_another_is_listed_anew_as_they_near():
    """A sheet dropped from 20 cm onto a sheet pinned flat below, the two in one system:
    the pairs listed at the start hold while the gap between the sheets is larger than
    their fall (SelfContact::window_holds, by the patches' gap), and are listed anew as
    the sheets near, so that the falling one comes to rest on the other, never nearer
    than half the distance; without self-collision it falls through."""
    n, distance = 9, 0.01

    def drop(d):
        mss = ms.build_system([square_sheet(n, 0.0, list(range(n * n)), d), square_sheet(n, 0.2, [], d)])
        mss.tolerance = 1e-3
        return mss

    mss = drop(distance)
    mss.simulate(3 / 24, 6)  # falling: 15 cm of the 20
    assert mss.vertex_positions()[n * n:, 2].min() > 0.05
    assert mss.stats["self_contact_listings"] <= 2 < mss.stats["steps"]
    lowest = []
    for _ in range(21):
        mss.simulate(1 / 24, 2)
        lowest.append(mss.vertex_positions()[n * n:, 2].min())
    assert min(lowest) >= 0.5 * distance
    assert lowest[-1] < 1.5 * distance  # it lies on the pinned sheet
    assert mss.stats["self_contact_listings"] > 2  # listed anew as they neared
    loose = drop(0.0)
    loose.simulate(1.0, 48)
    assert loose.vertex_positions()[n * n:, 2].min() < -0.5


@pytest.mark.parametrize("speed, height", [(3.0, 0.012), (10.0, 0.03)])
def test_a_sheet_thrown_onto_another_stops_at_the_distance(speed, height):
    """A sheet thrown down at 3 or 10 m/s from just above a pinned one (12 mm and 3 cm,
    the distance 1 cm): its pairs are listed while it closes in fast, from its first
    step on, and it stops where the distance keeps it, never nearer."""
    n, distance = 9, 0.01
    mss = ms.build_system([square_sheet(n, 0.0, list(range(n * n)), distance),
                           square_sheet(n, height, [], distance)])
    mss.tolerance = 1e-3
    state = mss.get_state()
    v = np.asarray(state["v"], float).reshape(-1, 3).copy()
    v[:, 2] = -speed
    mss.set_state({**state, "v": v.ravel()})
    lowest = []
    for _ in range(12):
        mss.simulate(1 / 48, 2)
        lowest.append(mss.vertex_positions()[n * n:, 2].min())
    assert min(lowest) > 0.9 * distance
    assert np.abs(mss.vertex_velocities()[n * n:, 2]).max() < 0.1 * speed  # stopped


def test_two_ropes_dropped_crosswise_tangle_without_crossing():
    distance = 0.008
    a, a_edges = rope(40, 0.8, (-0.4, 0.0, 0.1), (1, 0, 0))
    b, b_edges = rope(40, 0.8, (0.0, -0.4, 0.13), (0, 1, 0.05))
    x = np.vstack([a, b])
    edges = np.vstack([a_edges, b_edges + len(a)])
    mss = wire_system(x, edges, distance=distance, total_mass=0.2)
    for _ in range(24):
        mss.simulate(1 / 24, 1)
        y = mss.vertex_positions()
        assert closest_unrelated_segments(y, a_edges, b_edges + len(a)) >= 0.5 * distance
    y = mss.vertex_positions()
    # b still lies over a where they cross
    assert y[len(a) + 20, 2] > y[20, 2]


def test_a_rope_dropped_across_a_pinned_net_never_passes_through_it():
    """A net of wires (11 x 11, 10 cm apart, no faces) pinned at its corners, and a rope
    1.2 m long dropped across it from 10 cm above."""
    n = 11
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    net = np.column_stack([i.ravel() * 0.1 - 0.5, j.ravel() * 0.1 - 0.5, np.zeros(n * n)])
    idx = np.arange(n * n).reshape(n, n)
    net_edges = np.vstack([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                           np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
    line, line_edges = rope(40, 1.2, (-0.6, 0.03, 0.1), (1, 0.1, 0))
    x = np.vstack([net, line])
    edges = np.vstack([net_edges, line_edges + len(net)])
    pinned = np.zeros(len(x), bool)
    pinned[[0, n - 1, n * n - n, n * n - 1]] = True
    distance = 0.01
    mss = wire_system(x, edges, pinned, distance, total_mass=0.3, floor=False)
    for _ in range(24):
        mss.simulate(1 / 24, 1)
        y = mss.vertex_positions()
        assert closest_unrelated_segments(y, net_edges, line_edges + len(net)) >= 0.5 * distance
    y = mss.vertex_positions()
    sag = y[n * n // 2, 2]  # the net's middle
    assert sag < -0.01  # the rope's weight pulls the net down ...
    assert y[len(net) + 20, 2] > sag  # ... and lies in it, above


def folding_sheet(n=32):
    """A sheet of n x n vertices (1 m, 1 kg) pinned at two corners, self-collision distance
    8 mm: it swings down and folds onto itself."""
    from mass_spring import presets
    cloth = presets.cloth(n, n, spacing=1.0 / (n - 1), pins=[0, n - 1], total_mass=1.0, stiffness=1000.0,
                          damping=0.01)
    cloth.self_collision_distance = 0.008
    cloth.self_friction = 0.3
    mss = ms.build_system(cloth)
    mss.tolerance = 1e-2
    return mss


def test_self_contact_gives_the_same_bits_on_any_number_of_workers():
    """Over 1000 masses (the multigrid solver, work split among the workers), pairs
    touching and steps that ended beyond their margins, their pairs listed anew."""
    def run(threads):
        before = ms.get_num_threads()
        ms.set_num_threads(threads)
        try:
            mss = folding_sheet()
            mss.simulate(10 / 24, 10)
            assert mss.stats["multigrid"] and mss.stats["self_contact_pairs"] > 1000
            assert mss.stats["self_contact_relistings"] > 0  # steps beyond their margins, checked
            return mss.vertex_positions()
        finally:
            ms.set_num_threads(before)
    assert np.array_equal(run(1), run(2))


def test_a_step_beyond_its_margins_stands_if_it_missed_no_pair():
    """A folding sheet's steps often end with a vertex beyond the margin its pairs were
    listed with. Listed anew over the step as taken, the pairs it missed neither act at its
    ends nor cross: the step stands (none is refused), and no two edges that share no
    vertex come within half the distance."""
    from mass_spring import presets
    n, distance = 32, 0.008
    mss = folding_sheet(n)
    edges = presets.cloth(n, n).edges
    for frame in range(12):
        mss.simulate(1 / 24, 5)
        if frame % 3 == 2:
            assert closest_unrelated_segments(mss.vertex_positions(), edges) >= 0.5 * distance
    assert mss.stats["self_contact_relistings"] > 10
    assert mss.stats["self_contact_refusals"] == 0
    assert mss.stats["self_contact_pairs"] > 1000  # it touches itself


def test_pairs_listed_touching_do_not_count_as_energy_the_step_gained():
    """Two ropes set across each other 4 mm apart, with a self-collision distance of 8 mm:
    the first step lists their pairs already touching. Their energy belongs to the new
    pairs, not to the step: the step stands (before, every step, however short, failed
    the energy test), the ropes push each other apart, and lose energy from then on."""
    a, a_edges = rope(10, 0.2, (-0.1, 0, 0.02), (1, 0, 0))
    b, b_edges = rope(10, 0.2, (0, -0.1, 0.0), (0, 1, 0))
    mss = wire_system(np.vstack([a, b]), np.vstack([a_edges, b_edges + len(a)]), distance=0.008, floor=False)
    mss.gravity = [0, 0, 0]
    state = mss.get_state()
    q = np.asarray(state["q"], float).reshape(-1, 3).copy()
    q[:len(a), 2] = 0.004
    mss.set_state({**state, "q": q.ravel()})
    assert mss.energy() == 0.0  # at rest, no pairs listed yet
    mss.simulate(1e-6, 1)
    touching = mss.energy()
    assert touching > 0.1  # the pairs' energy, from the first step's list
    mss.simulate(0.05, 5)
    x = mss.vertex_positions()
    assert x[5, 2] - x[len(a) + 5, 2] > 0.008  # where they cross: pushed apart beyond the distance
    assert mss.energy() < 0.1 * touching


def test_a_checkpoint_restored_after_the_multigrid_fell_back_gives_the_same_bits():
    """A sheet thrown onto a pinned one, with a rope, on the multigrid: a failed solve
    makes it fall back to LDL^T for good after the checkpoint. Restored into the same
    system, the run went on with LDL^T and differed by 3 cm; a restart point now chooses
    the multigrid again, so both runs take the same path (found by an adversarial test)."""
    n = 12
    base = square_sheet(n, 0.05, list(range(n * n)), 0.01)
    base = dataclasses.replace(base, positions=base.positions - (0.25, 0.25, 0.0))
    top = square_sheet(n, 0.0, [], 0.01)
    axis = np.array([1.0, 0.3, 0.0]) / np.linalg.norm([1.0, 0.3, 0.0])
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    turn = np.eye(3) + np.sin(0.4) * k + (1 - np.cos(0.4)) * k @ k
    x = top.positions @ turn.T
    top = dataclasses.replace(top, positions=x - x.mean(0) + (0.1, 0, 0.3), self_friction=0.5,
                              velocities=np.tile((0.3, 0, -3.0), (n * n, 1)))
    r, edges = rope(40, 0.8, (-0.3, 0.05, 0.5), (1, 0.2, -0.1))
    line = ms.Structure(positions=r, edges=edges, total_mass=0.05, stiffness=2000.0, damping=0.2,
                        wire_joints=ms.wire_joints(edges), wire_rigidity=1e-5, self_collision_distance=0.006,
                        self_friction=0.2)
    mss = ms.build_system([base, top, line])
    mss.set_colliders(FLOOR_V, FLOOR_T, 0.005, 0.5)
    mss.tolerance = 1e-3
    mss.linear_solver = "multigrid"
    mss.simulate(0.25, 6)
    saved = mss.checkpoint()
    # The scene fell back by itself until the smoother took friction whole
    # (test_the_smoother_takes_friction_whole); a solve's failure is now made at a point.
    runs = []
    for restored in (False, True):
        if restored:
            mss.set_state(saved)
        mss.simulate(0.25, 6)
        middle = mss.vertex_positions().copy()
        fallbacks = mss.stats["multigrid_fallbacks"]
        mss._fall_back_to_direct()
        assert mss.stats["multigrid_fallbacks"] == fallbacks + 1
        mss.simulate(0.25, 6)
        runs.append((middle, mss.vertex_positions().copy()))
    assert np.array_equal(runs[1][0], runs[0][0]) and np.array_equal(runs[1][1], runs[0][1])


def test_a_restart_from_a_checkpoint_gives_the_same_bits():
    """The pairs listed for the last step carry their stiffness on; a restart from a
    checkpoint lists them afresh, in the run that goes on and in the restored one alike."""
    mss, _ = rope_pile(0.008, frames=10)
    saved = mss.checkpoint()
    mss.simulate(1 / 24, 4)
    first = mss.vertex_positions().copy()
    mss.set_state(saved)
    mss.simulate(1 / 24, 4)
    assert np.array_equal(mss.vertex_positions(), first)
    again, _ = rope_pile(0.008, frames=0)
    again.set_state(saved)
    again.simulate(1 / 24, 4)
    assert np.array_equal(again.vertex_positions(), first)


def warped_quad_on_the_floor(warp):
    """A quad of 10 cm sides, one corner raised by `warp`, cut both ways into four
    triangles as the add-on cuts quads, springs on its sides only (it can fold flat),
    self-collision distance 1 cm; dropped from 1 mm over the floor."""
    x = np.array([[0, 0, 0], [0.1, 0, 0], [0.1, 0.1, warp], [0, 0.1, 0]], float)
    x[:, 2] += 0.003
    sides = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    st = ms.Structure(positions=x, edges=sides, faces=[[0, 1, 2, 3]], total_mass=0.01, stiffness=100.0,
                      damping=0.5, self_collision_distance=0.01)
    mss = ms.build_system(st)
    mss.set_colliders(FLOOR_V, FLOOR_T, 0.002, 0.5)
    mss.tolerance = 1e-3
    return mss


@pytest.mark.parametrize("warp", [0.004, 0.04])
def test_a_warped_quad_falls_flat_its_diagonals_left_out(warp):
    """A quad's diagonals cross where it is flat: whether it is built flat or warped (its
    diagonals 2 cm apart, more than twice the distance), they are left out, and the quad
    lies flat on the floor."""
    mss = warped_quad_on_the_floor(warp)
    mss.simulate(1.0, 24)
    z = mss.vertex_positions()[:, 2]
    assert z.max() - z.min() < 1e-3, z


def test_a_pair_nearest_at_a_fix_is_kept():
    """A wire pinned at one end (F) swings past another pinned wire (Q-R) whose end is 1.05
    distances from F (within the margins): nearest at two fixes now, the pair is listed
    all the same, for the free end may bring it nearer within the step."""
    x = np.array([[-0.0105, 0, 0], [-0.0105, 0, 0.1], [0, 0, 0], [0.1, 0, 0]], float)
    mss = ms.from_arrays(x, np.ones(4), fixed=[0, 1, 2], springs=np.array([[2, 3]]), stiffness=100.0,
                         gravity=[0, 0, -G])
    mss.set_self_contact(np.zeros((0, 3), np.int64), np.array([[0, 1], [2, 3]]), 0.01)
    mss.simulate(1e-3, 1)
    assert mss.stats["self_contact_pairs"] >= 1


def test_pinned_parts_moved_close_together_refuse_no_step():
    """Two pinned wires animated to 6 mm apart (distance 10 mm) while a free wire swings
    far away whose steps end beyond their margins: the pinned pair acts on nothing, so
    checking those steps never refuses one for it (as listing never lists it)."""
    x = np.array([[0, 0, 0], [0, 1, 0], [0.5, 0, 0], [0.5, 1, 0], [10, 0, 0], [10.3, 0, 0]], float)
    mss = ms.from_arrays(x, np.ones(6), fixed=[0, 1, 2, 3, 4], springs=np.array([[4, 5]]), stiffness=200.0,
                         gravity=[0, 0, -G])
    mss.set_integrator("implicit_euler")
    mss.set_self_contact(np.zeros((0, 3), np.int64), np.array([[0, 1], [2, 3], [4, 5]]), 0.01)
    mss.simulate(1 / 24, 1)
    moved = np.array(mss.fix_positions)
    moved[2:4, 0] = 0.006  # fixes 2 and 3 are vertices 2 and 3
    mss.fix_positions = moved
    for _ in range(5):
        mss.simulate(1 / 24, 1)
    assert mss.stats["self_contact_relistings"] > 0
    assert mss.stats["self_contact_refusals"] == 0 and mss.stats["rejected_steps"] == 0


def test_an_explicit_integrator_halves_a_step_that_crossed():
    """Symplectic Euler with steps that let the free wire pass through the pinned one at
    its landing speed: those steps are halved (as implicit ones are), not the run failed."""
    distance = 0.01
    mss, low, up = crossing_wires(distance)
    mss.tolerance = 0.0
    mss.set_integrator("symplectic_euler")
    for _ in range(12):
        mss.simulate(1 / 24, 100)
        assert closest_unrelated_segments(mss.vertex_positions(), low, up) >= 0.5 * distance
    assert mss.stats["self_contact_refusals"] > 0
    assert mss.vertex_positions()[31, 2] > mss.vertex_positions()[10, 2]  # resting on it


def test_structures_built_together_collide_each_keeping_its_distance():
    """A net (1 cm) and a rope (4 mm) as two structures in one system (build_system of a
    list): the rope lies in the net, the two 1 cm apart (the larger distance of the two),
    the rope's own segments 4 mm."""
    n = 11
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    net_x = np.column_stack([i.ravel() * 0.1 - 0.5, j.ravel() * 0.1 - 0.5, np.zeros(n * n)])
    idx = np.arange(n * n).reshape(n, n)
    net_edges = np.vstack([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                           np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
    pinned = np.zeros(n * n, bool)
    pinned[[0, n - 1, n * n - n, n * n - 1]] = True
    net = ms.Structure(positions=net_x, edges=net_edges, pinned=pinned, total_mass=0.2, stiffness=2000.0,
                       damping=0.2, self_collision_distance=0.01, self_friction=0.3)
    line_x, line_edges = rope(60, 1.2, (-0.6, 0.03, 0.05), (1, 0.1, 0))
    line = ms.Structure(positions=line_x, edges=line_edges, total_mass=0.1, stiffness=2000.0, damping=0.2,
                        wire_joints=ms.wire_joints(line_edges), wire_rigidity=1e-5,
                        self_collision_distance=0.004, self_friction=0.3)
    mss = ms.build_system([net, line])
    mss.tolerance = 1e-3
    rope_edges = line_edges + n * n
    for _ in range(24):
        mss.simulate(1 / 24, 1)
        y = mss.vertex_positions()
        assert closest_unrelated_segments(y, net_edges, rope_edges) >= 0.5 * 0.01
        assert closest_unrelated_segments(y, rope_edges) >= 0.5 * 0.004
    y = mss.vertex_positions()
    assert y[n * n // 2, 2] < -0.01  # the net sags under the rope ...
    # ... which lies in it, sagging between the wires it crosses (without self-collision
    # it falls through, 5 m in this second)
    assert y[n * n + 30, 2] > y[:n * n, 2].min() - 0.02
    with pytest.raises(ValueError, match="self-collision distance 0.01 m is more than the mesh can hold"):
        ms.build_system([net, dataclasses.replace(line, positions=line_x - [0, 0, 0.045])])


def test_parts_that_touch_as_built_are_named_as_such():
    """Two ropes built crossing through each other, or a duplicate vertex: no distance can
    hold them, and the message says what to do (it advised a distance below 0 m)."""
    a, a_edges = rope(10, 0.2, (-0.1, 0, 0), (1, 0, 0))
    b, b_edges = rope(10, 0.2, (0, -0.1, 0), (0, 1, 0))
    st = ms.Structure(positions=np.vstack([a, b]), edges=np.vstack([a_edges, b_edges + len(a)]),
                      total_mass=0.1, stiffness=2000.0, self_collision_distance=0.004)
    with pytest.raises(ValueError, match=r"edge .* and edge .* share no vertex but touch as built .* Merge the "
                                         r"vertices \(Merge by Distance\) or move the parts apart"):
        ms.build_system(st)
    x, edges = rope(10, 0.2, (0, 0, 0), (1, 0, 0))
    doubled = np.vstack([x, x[-1:]])  # the last vertex twice, the copy on a segment of its own
    with pytest.raises(ValueError, match="touch as built"):
        ms.build_system(ms.Structure(positions=doubled, edges=np.vstack([edges, [[5, 11]]]), total_mass=0.1,
                                     stiffness=2000.0, self_collision_distance=0.004))


def test_a_distance_far_below_the_edges_is_refused():
    """A distance under a thousandth of the median edge would shrink the steps with it (an
    8 x 8 sheet of 5 cm edges at 1e-9 m ran for minutes a frame): refused, with the least
    it takes. A distance far above what the mesh holds says so, not that parts touch."""
    x, edges = rope(10, 0.5, (0, 0, 0), (1, 0, 0))  # segments of 5 cm
    def build(distance):
        return ms.build_system(ms.Structure(positions=x, edges=edges, total_mass=0.1, stiffness=2000.0,
                                            self_collision_distance=distance))
    with pytest.raises(ValueError, match=r"distance 1e-06 m is less than 5e-05 m \(a thousandth of the median "
                                         r"edge, 0.05 m\).* stall"):
        build(1e-6)
    assert build(1e-4).stats["steps"] == 0  # twice the least: taken
    assert build(float(np.float32(5e-5))).stats["steps"] == 0  # the least as named, in float32: taken
    bent, bent_edges = rope(10, 0.5, (0, 0, 0), (1, 0, 0))
    bent[6:] = bent[5] + (bent[6:] - bent[5]) @ np.diag([-1, 1, 1]) + (0, 0.1, 0)  # folded back 10 cm away
    with pytest.raises(ValueError, match="more than the mesh can hold.* model those parts farther apart"):
        ms.build_system(ms.Structure(positions=bent, edges=bent_edges, total_mass=0.1, stiffness=2000.0,
                                     self_collision_distance=1e6))


def test_objects_of_different_sizes_keep_their_own_distances():
    """Objects simulated together each keep their own distance (a quarter of their own
    edges, as the add-on chooses it): a rope of 1 mm segments beside one of 1 m segments
    with more edges is not refused because the median edge of both is the long one's.
    Each is still held to a thousandth of its own edges."""
    fine, fine_edges = rope(10, 0.01, (0, 0, 0), (1, 0, 0))  # segments of 1 mm
    coarse, coarse_edges = rope(30, 30.0, (0, 5, 0), (1, 0, 0))  # segments of 1 m

    def build(fine_distance):
        return ms.build_system([
            ms.Structure(positions=fine, edges=fine_edges, total_mass=0.01, stiffness=200.0,
                         self_collision_distance=fine_distance),
            ms.Structure(positions=coarse, edges=coarse_edges, total_mass=1.0, stiffness=200.0,
                         self_collision_distance=0.25)])
    assert build(0.25e-3).stats["steps"] == 0  # taken (before: refused against the 1 m edges)
    with pytest.raises(ValueError, match=r"a thousandth of the median edge, 0.001 m"):
        build(1e-7)


def test_only_colliding_vertices_must_keep_to_the_margin():
    """A rope whipping down from level (no self-collision) simulated with a short wire
    falling freely far away (self-collision at 1 mm): the rope's vertices end its steps
    far from any prediction, but they list no pairs, so no step is refused for them."""
    whip, whip_edges = rope(20, 1.0, (0, 0, 0), (1, 0, 0))
    pinned = np.zeros(len(whip), bool)
    pinned[0] = True
    free = ms.Structure(positions=whip, edges=whip_edges, pinned=pinned, total_mass=0.1, stiffness=5000.0,
                        damping=0.1)
    wire_x, wire_edges = rope(2, 0.1, (5, 0, 0), (1, 0, 0))
    wire = ms.Structure(positions=wire_x, edges=wire_edges, total_mass=0.01, stiffness=100.0,
                        self_collision_distance=0.001)
    mss = ms.build_system([free, wire])
    mss.tolerance = 1e-3
    mss.simulate(0.5, 12)
    assert mss.vertex_positions()[20, 2] < -0.5  # the rope swung down
    assert mss.stats["self_contact_refusals"] == 0


def test_a_crossing_that_halving_cannot_avoid_fails_naming_it_and_keeps_the_last_step():
    """A wire shot at 20 m/s through a pinned one 5 cm below, with no halving allowed: the
    step would carry it through (20 cm in 10 ms), so it is refused; the call fails naming
    the two parts and the cures, and the state is that of the last whole step (the bake
    then writes nothing: tests/test_addon_self_collision.py). With halving, the same
    throw is caught and the wire stays above."""
    low, low_edges = rope(10, 1.0, (-0.5, 0, 0), (1, 0, 0))
    up, up_edges = rope(10, 1.0, (0, -0.5, 0.05), (0, 1, 0))
    x = np.vstack([low, up])
    v = np.zeros_like(x)
    v[11:, 2] = -20.0
    edges = np.vstack([low_edges, up_edges + len(low)])

    def shot(halvings):
        mss = ms.from_arrays(x, 0.01, fixed=[0, 10], velocities=v, springs=edges, stiffness=2000.0,
                             self_collision_distance=0.01)
        mss.max_halvings = halvings
        return mss

    mss = shot(0)
    before = mss.vertex_positions().copy()
    with pytest.raises(ms.SimulationError, match=r"(?s)edge .* edge .*larger self-collision distance"):
        mss.simulate(0.01, 1)
    np.testing.assert_array_equal(mss.vertex_positions(), before)
    assert mss.time == 0.0
    caught = shot(12)
    caught.simulate(0.01, 1)
    assert closest_unrelated_segments(caught.vertex_positions(), edges[:10], edges[10:]) >= 0.005
    assert caught.stats["self_contact_refusals"] >= 1


def test_pairs_evaluated_apart_are_spared_while_they_stay_apart():
    """A listed pair evaluated beyond its distance is not evaluated again while its vertices
    move relative to each other by less than it was beyond (Simulator::self_seen_apart_),
    and is evaluated again once they may have moved in: the forces are those of a system
    that never saw the pairs apart."""
    def folded():
        mss = folding_sheet()
        mss.simulate(10 / 24, 10)
        assert mss.stats["self_contact_pairs"] > 1000
        return mss
    mss = folded()
    q = mss.positions.ravel()
    v, lam = np.zeros_like(q), np.zeros(0)
    # Smooth moves, of up to 4 mm (the distance is 8 mm), that differ between the layers
    # the sheet folded into (a move at random would tilt triangles past points lying in
    # their plane, which then read as pushed through from the other side: an artefact of
    # the vertex-triangle law that both skips leave alone, stays_apart).
    masses = np.delete(np.arange(32 * 32), [0, 31])
    i, j = masses % 32, masses // 32
    def smooth(phase):
        w = 2 * np.pi / 16
        return 0.004 * np.column_stack([np.sin(w * i + phase), np.cos(w * j + phase),
                                        np.sin(w * (i + j) + phase)]).ravel()
    moved, again = q + smooth(0.0), q + smooth(1.0)
    counts = [mss.stats["self_contact_evaluations"]]
    forces = []
    for _ in range(2):
        forces.append(mss.evaluate(moved, v, lam)[0])
        counts.append(mss.stats["self_contact_evaluations"])
    assert np.array_equal(forces[0], forces[1])
    assert 0 < counts[2] - counts[1] < 0.5 * (counts[1] - counts[0])  # the second time, only pairs touching
    seen = mss.evaluate(again, v, lam)[0]
    assert mss.stats["self_contact_evaluations"] - counts[2] > counts[2] - counts[1]
    fresh = folded()
    assert np.array_equal(seen, fresh.evaluate(again, v, lam)[0])
    assert np.array_equal(forces[0], fresh.evaluate(moved, v, lam)[0])
