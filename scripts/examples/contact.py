"""Contact: a chain dropped onto the floor and a cloth draped over a ball.

Both meet the scene's Collision objects (Physics ▸ Collision): a floor and a UV sphere.
The chain falls flat from 1 m, lands and comes to rest on the floor; the cloth, with shear
springs and angular bending, falls onto the ball and drapes over it. The thin blue line is the
path of the chain's middle mass.

    python scripts/examples/contact.py [--frames N] [--out DIR] [--blend [PATH]]
"""

from __future__ import annotations

import os
import sys

# Blender's --python does not put the script's folder on sys.path; _common adds scripts/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import scenes  # noqa: E402

NAME = "contact"
TITLE = "Contact"
FRAMES = 72
RENDER_FRAME = 72
TUBE_RADIUS = 0.008

THICKNESS = 0.02  # the colliders' Thickness Outer
BALL = dict(radius=0.5, center=(1.6, 0.0, 0.5))
DEFAULTS = dict(links=20, chain_length=1.6, chain_height=1.0, cloth_vertices=17,
                cloth_width=1.6, cloth_height=1.2, substeps=5)


def build(**params):
    p = {**DEFAULTS, **params}
    floor = scenes.add_box("Floor", (-1.4, -1.5, -0.1), (3.0, 1.5, 0.0))
    floor.hide_render = True  # the stage's floor shows it
    scenes.collider(floor, thickness=THICKNESS)
    scenes.ball(radius=BALL["radius"], location=BALL["center"], thickness=THICKNESS)
    chain = scenes.free_chain("Chain", links=p["links"], length=p["chain_length"],
                              location=(-0.4, 0.3, p["chain_height"]), substeps=p["substeps"])
    cloth = scenes.falling_cloth(
        "Cloth", vertices=p["cloth_vertices"], width=p["cloth_width"],
        location=(BALL["center"][0], BALL["center"][1], p["cloth_height"]), substeps=p["substeps"])
    return [chain, cloth]


def decorate(scene, objects, results):
    chain = objects[0]
    positions = results[chain.name].world_positions()
    _common.add_trail("Middle path", positions[:, len(positions[0]) // 2], radius=0.008)
    return dict(center=(0.8, 0.0, 0.75), width=4.6, height=2.2,
                subtitle="a chain dropped 1 m onto the floor, a cloth onto a ball: Collision objects, "
                         f"thickness {THICKNESS * 100:g} cm, "
                         "friction 0.3 · blue: the chain's middle")


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
