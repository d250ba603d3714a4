"""Renders are written under a temporary name beside their target and renamed when
complete (scripts/render.py): a failed or interrupted render leaves the previous picture,
video or frames byte-identical and no temporary file behind."""

from __future__ import annotations

import hashlib
import os

import pytest

from test_addon_helpers import make_mesh_object, require_bpy

bpy = require_bpy()
import render  # noqa: E402  (scripts/, after the skip above)


def checksum(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def leftovers(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if ".part" in name)


@pytest.fixture
def tiny_scene(scene):
    """The factory scene with a camera looking at a triangle, rendered at 32x24."""
    make_mesh_object("Tri", [(0, 0, 0), (1, 0, 0), (0, 1, 0)], faces=[(0, 1, 2)])
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    camera.location = (0.3, 0.3, 4.0)
    scene.collection.objects.link(camera)
    scene.camera = camera
    render.configure_render(scene, "workbench", (32, 24))
    return scene


def test_a_still_replaces_the_previous_picture_only_when_complete(tiny_scene, tmp_path):
    target = tmp_path / "still.png"
    target.write_bytes(b"the previous picture")
    before = checksum(target)

    # Interrupted while rendering (Ctrl-C): the previous picture stays, nothing left over.
    with pytest.raises(KeyboardInterrupt):
        with render.staged(str(target)) as part:
            open(part, "wb").write(b"half a picture")
            raise KeyboardInterrupt
    assert checksum(target) == before and leftovers(tmp_path) == []

    # Blender wrote nothing: a RenderFailed, the previous picture stays.
    with pytest.raises(render.RenderFailed, match="wrote no file"):
        with render.staged(str(target)):
            pass
    assert checksum(target) == before and leftovers(tmp_path) == []

    render.render_still(tiny_scene, str(target))
    assert open(target, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == []
    assert tiny_scene.render.filepath != str(target)  # the scene's own output path is kept


def test_frames_replace_their_namesakes_and_keep_other_files(tiny_scene, tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "frame_0001.png").write_bytes(b"old frame")
    (folder / "notes.txt").write_bytes(b"mine")
    tiny_scene.frame_start, tiny_scene.frame_end = 1, 24

    render.render_video(tiny_scene, str(folder), (1, 2), 100)

    assert sorted(os.listdir(folder)) == ["frame_0001.png", "frame_0002.png", "notes.txt"]
    assert open(folder / "frame_0001.png", "rb").read(4) == b"\x89PNG"
    assert (folder / "notes.txt").read_bytes() == b"mine"
    assert leftovers(tmp_path) == [] and (tiny_scene.frame_start, tiny_scene.frame_end) == (1, 24)
