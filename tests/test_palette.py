"""One palette: the viewport overlay and the rendered scenes colour a structure's parts
alike (addon/palette.py), in the colour spaces each one takes."""

import pytest

from test_addon_helpers import require_bpy, submodule

bpy = require_bpy()


def test_display_colours_are_blenders_own_srgb_encoding():
    from mathutils import Color
    palette = submodule("palette")
    for name in ("SPRING", "ROD", "ROPE", "MASS", "PIN"):
        linear = getattr(palette, name)
        expected = Color(linear).from_scene_linear_to_srgb()
        # Blender converts through OpenColorIO in float32 (4e-5 off the exact sRGB curve);
        # a display value is shown in 8 bits (steps of 4e-3).
        assert palette.display(linear)[:3] == pytest.approx(tuple(expected), abs=1e-4)
        assert palette.display(linear)[3] == 1.0


def test_overlay_and_renders_use_the_palette(scene):
    import scenes
    palette, overlay, mesh_arrays = (submodule(n) for n in ("palette", "overlay", "mesh_arrays"))
    assert overlay.COLORS[mesh_arrays.RIGID_ATTRIBUTE] == palette.display(palette.ROD)
    assert overlay.COLORS[mesh_arrays.ROPE_ATTRIBUTE] == palette.display(palette.ROPE)
    for material_name, part in scenes.PART_COLORS.items():
        material = scenes.material(material_name)
        assert tuple(material.diffuse_color)[:3] == pytest.approx(getattr(palette, part))
