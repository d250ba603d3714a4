"""Self-collision: a rope coiling on the floor, a ribbon folding onto itself, and a chain
falling into a net.

All have Self Collision on (Physics ▸ Mass–Spring ▸ Collisions ▸ Self Collision): parts of
each that share no vertex keep its distance apart, so the rope piles up in coils instead of
passing through itself, and the ribbon lies in folds, layer on layer. Baked in one go, they
also keep apart from each other: the chain of rigid links lies in the net pinned at its
corners instead of falling through. The floor is a Collision object. The thin blue line is
the path of the rope's lower end.

    python scripts/examples/self_collision.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "self_collision"
TITLE = "Self-collision"
FRAMES = 48
RENDER_FRAME = 48
TUBE_RADIUS = 0.004

THICKNESS = 0.005  # the floor's Thickness Outer
ROPE_DISTANCE = 0.008  # m, what the rope's segments keep apart
NET_DISTANCE = 0.01  # m, what the net and the chain keep apart
BAKED_TOGETHER = ("Net", "Chain")  # as Bake with both selected (the others alone: no shared steps)
DEFAULTS = dict(rope_segments=60, rope_length=1.2, ribbon_rows=41, substeps=5)


def build(**params):
    p = {**DEFAULTS, **params}
    floor = scenes.add_box("Floor", (-1.2, -1.2, -0.1), (1.6, 1.2, 0.0))
    floor.hide_render = True  # the stage's floor shows it
    scenes.collider(floor, thickness=THICKNESS)
    rope = scenes.falling_rope("Rope", segments=p["rope_segments"], length=p["rope_length"],
                               distance=ROPE_DISTANCE, location=(-0.5, 0.0, p["rope_length"] + 0.01),
                               substeps=p["substeps"])
    ribbon = scenes.folding_ribbon("Ribbon", rows=p["ribbon_rows"], location=(0.6, 0.0, 0.02),
                                   substeps=p["substeps"])
    net = scenes.pinned_net("Net", cells=10, spacing=0.08, distance=NET_DISTANCE, location=(-0.2, 0.9, 0.9),
                            substeps=p["substeps"])
    chain = scenes.falling_chain("Chain", distance=NET_DISTANCE, location=(-0.2, 0.9, 1.2), substeps=p["substeps"])
    return [rope, ribbon, net, chain]


def decorate(scene, objects, results):
    rope = objects[0]
    positions = results[rope.name].world_positions()
    _common.add_trail("End path", positions[:, -1], radius=0.004)
    return dict(center=(0.1, 0.0, 0.5), width=3.0, height=1.4,
                subtitle="a rope coils, a ribbon folds onto itself, a chain of rods is caught by a net baked "
                         "with it · blue: the rope's end")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
