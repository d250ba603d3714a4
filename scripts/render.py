"""Rendering for the headless script and the examples: a still and the baked range as a
video, with Workbench (default), Cycles (CPU) or EEVEE."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time

import bpy

import scenes

ENGINES = {"workbench": "BLENDER_WORKBENCH", "cycles": "CYCLES", "eevee": "BLENDER_EEVEE"}
MOVIE_FORMATS = {".mp4": "MPEG4", ".mkv": "MKV", ".webm": "WEBM", ".avi": "AVI", ".mov": "QUICKTIME"}


class RenderFailed(RuntimeError):
    """Blender did not write the picture it was asked for."""


def say(message: str) -> None:
    print(f"[render] {message}", file=sys.stderr, flush=True)


def parse_resolution(text: str, parser) -> tuple[int, int]:
    """'1280x720' -> (1280, 720); anything else is a usage error of `parser`."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
        if w > 0 and h > 0:
            return w, h
    except ValueError:
        pass
    parser.error(f"--resolution must look like 1280x720, got {text!r}")


def configure_render(scene, engine: str | None = None, resolution: tuple[int, int] | None = None,
                     samples: int = 32) -> None:
    """The project's render look with `engine` (a key of ENGINES, default workbench) at
    `resolution` (default: the scene's)."""
    blender_engine = ENGINES[engine or "workbench"]
    resolution = resolution or (scene.render.resolution_x, scene.render.resolution_y)
    scenes.set_render_defaults(scene, engine=blender_engine, resolution=resolution, samples=samples)
    if blender_engine == "CYCLES":
        scene.render.threads_mode = "AUTO"


def check_can_render(scene) -> None:
    """RenderFailed if `scene` cannot be rendered at all: checked before the bake, so that
    a missing camera is not found only after the whole simulation (tests/test_headless.py)."""
    if scene.camera is None:
        raise RenderFailed(f"scene '{scene.name}' has no camera to render with: add one, or set "
                           "Scene Properties > Camera")


# What Blender's GPU setup prints on a machine without a display each time it makes a
# context for a render (EGL from Mesa or the driver), harmless: the picture is rendered.
GPU_NOISE = ("EGL Error (0x3009): EGL_BAD_MATCH",)


@contextlib.contextmanager
def without_gpu_noise():
    """Run the block with the process's stderr (file descriptor 2, where Blender's C code
    writes) caught in a temporary file, then pass it on without the lines of GPU_NOISE:
    every other line, and all of them if the block fails, reaches stderr
    (tests/test_headless.py, test_the_demo_prints_no_gpu_noise)."""
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for line in caught.read().decode(errors="replace").splitlines(keepends=True):
                if not line.startswith(GPU_NOISE):
                    sys.stderr.write(line)
            sys.stderr.flush()


@contextlib.contextmanager
def staged(path: str):
    """Yield a temporary name beside `path` (same folder, same extension) to write to;
    rename it to `path` when the block succeeds, remove it when it fails or is interrupted:
    a failed render leaves the previous file at `path` byte-identical
    (tests/test_headless.py, test_a_failed_render_leaves_the_previous_picture)."""
    folder, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    os.makedirs(folder, exist_ok=True)
    part = os.path.join(folder, f".{stem}.{os.getpid()}.part{ext}")
    try:
        yield part
        if os.path.isdir(part):
            # A folder of frames: each frame replaces its namesake; other files stay.
            os.makedirs(path, exist_ok=True)
            for frame in sorted(os.listdir(part)):
                os.replace(os.path.join(part, frame), os.path.join(path, frame))
        elif not os.path.isfile(part):
            raise RenderFailed(f"rendering {path} failed: Blender wrote no file")
        else:
            os.replace(part, path)
    finally:
        if os.path.isdir(part):
            shutil.rmtree(part, ignore_errors=True)
        elif os.path.exists(part):
            os.remove(part)


def render_still(scene, path: str, frame: int | None = None) -> None:
    """Render frame `frame` (default: the current one) to the PNG `path`."""
    path = os.path.abspath(path)
    if frame is not None:
        scene.frame_set(frame)
    render = scene.render
    image = render.image_settings
    if hasattr(image, "media_type"):
        image.media_type = "IMAGE"
    image.file_format = "PNG"
    image.color_mode = "RGB"
    saved = render.filepath, render.use_file_extension
    t0 = time.perf_counter()
    try:
        with staged(path) as part:
            render.filepath, render.use_file_extension = part, False
            with without_gpu_noise():
                bpy.ops.render.render(write_still=True)
    finally:
        render.filepath, render.use_file_extension = saved
    say(f"rendered {path} (frame {scene.frame_current}, {render.engine.lower()}, "
        f"{time.perf_counter() - t0:.1f} s)")


def render_video(scene, path: str, frame_range: tuple[int, int], scale: int) -> None:
    """Render `frame_range` at `scale` percent of the render size: a movie file where
    Blender has FFmpeg (.mp4 .mkv .webm .avi .mov), else PNG frames in the folder `path`.
    The scene's render settings are put back afterwards."""
    render = scene.render
    image = render.image_settings
    saved = (scene.frame_start, scene.frame_end, render.resolution_percentage, render.filepath,
             scene.display.render_aa, render.use_file_extension)
    scene.frame_start, scene.frame_end = frame_range
    render.resolution_percentage = max(1, min(100, scale))
    # Workbench: FXAA renders each frame once; the sample counts render it that many times.
    scene.display.render_aa = "FXAA"
    ext = os.path.splitext(path)[1].lower()
    path = os.path.abspath(path)
    movie = ext in MOVIE_FORMATS and bpy.app.build_options.codec_ffmpeg
    if movie:
        if hasattr(image, "media_type"):
            image.media_type = "VIDEO"
        image.file_format = "FFMPEG"
        ff = render.ffmpeg
        ff.format = MOVIE_FORMATS[ext]
        ff.codec = "WEBM" if ext == ".webm" else "H264"
        ff.constant_rate_factor = "MEDIUM"
        target = path
    else:
        if ext in MOVIE_FORMATS:
            say("this Blender has no FFmpeg: writing PNG frames instead")
            path = os.path.splitext(path)[0]
        if hasattr(image, "media_type"):
            image.media_type = "IMAGE"
        image.file_format = "PNG"
        target = path + os.sep
    t0 = time.perf_counter()
    try:
        with staged(path) as part:
            render.use_file_extension = not movie
            render.filepath = part if movie else os.path.join(part, "frame_####")
            with without_gpu_noise():
                bpy.ops.render.render(animation=True)
    finally:
        scene.frame_start, scene.frame_end = saved[0], saved[1]
        render.resolution_percentage, render.filepath = saved[2], saved[3]
        scene.display.render_aa = saved[4]
        render.use_file_extension = saved[5]
    say(f"rendered {frame_range[1] - frame_range[0] + 1} frames to {target} "
        f"in {time.perf_counter() - t0:.1f} s")
    if hasattr(image, "media_type"):
        image.media_type = "IMAGE"
    image.file_format = "PNG"
