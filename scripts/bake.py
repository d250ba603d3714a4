"""Headless bake of Mass–Spring Baker objects, and the built-in demo.

With the ``bpy`` module from PyPI (Blender as a Python module):

    python scripts/bake.py [scene.blend] [options]

Inside Blender (arguments for this script go after ``--``):

    blender --background scene.blend --python-exit-code 1 --python scripts/bake.py -- [options]

Without an input .blend it builds the demo scene (several of the seeds' structures side by
side), bakes it, saves ``out/demo.blend`` and renders ``out/demo.png``.

The bake itself is the extension's command (addon/cli.py, ``blender -c mass_spring_bake``);
this script adds rendering, the demo scene and the choice of add-on (--addon). Progress
goes to stderr. Exit code 0 on success; on failure 1 (the bake failed, e.g. the simulation
diverged), 2 (bad input: missing file, no such object, not a mesh, bad option) or 130
(interrupted), with one line saying what went wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from addon_loader import SOURCES, AddonUnavailable, addon_module  # noqa: E402
from script_args import blend_given_to_blender, script_argv  # noqa: E402

PROG = "bake.py"
DEMO_BLEND = os.path.join("out", "demo.blend")
DEMO_PNG = os.path.join("out", "demo.png")
BAD_INPUT = 2


def say(message: str) -> None:
    print(f"[bake] {message}", file=sys.stderr, flush=True)


def load_addon(source: str = "auto"):
    """Make sure the add-on is registered; return its ``bake`` module."""
    return addon_module("bake", source)


def addon_cli(source: str = "auto"):
    """The add-on's command module (addon/cli.py), the add-on registered first."""
    try:
        import bpy  # noqa: F401
    except ImportError:
        raise AddonUnavailable(
            "no bpy: run inside Blender (blender -b --python scripts/bake.py -- ...) or with a "
            "Python that has the bpy module (bash scripts/setup_env.sh)") from None
    try:
        return addon_module("cli", source)
    except ModuleNotFoundError as ex:
        if not (ex.name or "").endswith(".cli"):
            raise
        raise AddonUnavailable("this version of the add-on has no headless command (cli.py): "
                               "install the current extension, or use --addon repo") from None


# ----------------------------------------------------------------------------- arguments

def addon_source(argv: list[str]) -> str:
    """The --addon choice, read before the add-on (which defines the other options) loads."""
    p = argparse.ArgumentParser(prog=PROG, add_help=False)
    p.add_argument("--addon", choices=SOURCES, default="auto")
    return p.parse_known_args(argv)[0].addon


def build_parser(cli) -> argparse.ArgumentParser:
    """The extension command's options (`cli`, the add-on's cli module) plus rendering,
    the demo and --addon."""
    import render
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Bake Mass–Spring Baker objects headless; without an input .blend, "
                    "build, bake, save and render the built-in demo.",
        epilog="Inside Blender: blender -b scene.blend --python-exit-code 1 --python "
               f"scripts/bake.py -- [options]. {cli.EXIT_CODES_TEXT}")
    p.add_argument("input", nargs="?", help="the .blend to bake (default: the file Blender "
                   "opened, or the built-in demo scene when there is none; the demo saves "
                   f"{DEMO_BLEND})")
    cli.add_bake_arguments(p)
    p.add_argument("--render", metavar="PNG", help="render a still to this file "
                   f"(default for the demo: {DEMO_PNG})")
    p.add_argument("--no-render", action="store_true", help="the demo: don't render a still")
    p.add_argument("--render-frame", type=int, help="frame of the still (default: the scene's current frame)")
    p.add_argument("--engine", type=str.lower, choices=sorted(render.ENGINES), default=None,
                   help="render engine (default: workbench; cycles renders on the CPU)")
    p.add_argument("--samples", type=int, default=32, help="Cycles samples (default 32)")
    p.add_argument("--resolution", metavar="WxH", help="render size, e.g. 1280x720 "
                   "(default: the scene's)")
    p.add_argument("--video", metavar="PATH",
                   help="also render the baked frame range: a .mp4/.mkv/.webm file, or a folder "
                        "for PNG frames")
    p.add_argument("--video-scale", type=int, default=50, metavar="PERCENT",
                   help="video size in percent of the render resolution (default 50)")
    p.add_argument("--forces", action="store_true",
                   help="colour every member by its force, blue pushes and red pulls: Show "
                        "Forces on every baked object (the demo: on its tubes); renders "
                        "default to Cycles, which shows the colours")
    p.add_argument("--addon", choices=SOURCES, default="auto",
                   help="which add-on to use: an installed and enabled one, or the repo's "
                        "addon/ folder (default auto: installed if there is one, else the repo's)")
    return p


def parse_args(argv: list[str], cli=None) -> argparse.Namespace:
    """Parse this script's arguments; loads the add-on (given by --addon) unless `cli`."""
    cli = cli or addon_cli(addon_source(argv))
    parser = build_parser(cli)
    args = cli.check_args(parser.parse_args(argv), parser)
    if args.resolution:
        import render
        args.resolution = render.parse_resolution(args.resolution, parser)
    return args


# ----------------------------------------------------------------------------- run

def run(args, cli) -> None:
    """Open the input (or build the demo), bake and save through `cli`, then render."""
    import bpy

    import render
    import scenes
    t_start = time.perf_counter()
    given_to_blender = blend_given_to_blender()
    input_path = args.input or given_to_blender
    if input_path is not None:
        input_path = cli.open_input(input_path, opened_by_blender=not args.input)
    demo = input_path is None
    if demo:
        say("no input .blend: building the demo scene")
        frames = {k: v for k, v in (("frame_start", args.frame_start),
                                    ("frame_end", args.frame_end)) if v is not None}
        scenes.build_demo_scene(**frames)
    scene = bpy.context.scene
    objects = cli.select_objects(scene, args.objects)
    output = cli.output_path(args, input_path, default=DEMO_BLEND if demo else None)
    still = args.render or (DEMO_PNG if demo and not args.no_render else None)
    if (still or args.video) and not demo:  # the demo gets its camera in finish_demo_scene
        try:
            render.check_can_render(scene)
            for path in filter(None, (still, args.video)):
                cli.require_writable(os.path.abspath(path), "the render")
        except render.RenderFailed as ex:
            raise cli.BakeFailed(str(ex)) from None
    cli.bake_and_save(scene, objects, args, output,
                      before_save=lambda scene: finish(scene, objects, demo, args.forces))

    if still or args.video:
        engine = args.engine or ("cycles" if args.forces else None)
        render.configure_render(scene, engine, args.resolution, args.samples)
        if args.forces:  # the forces' colours as they are, not desaturated by AgX
            scene.view_settings.view_transform = "Standard"
    try:
        if still:
            render.render_still(scene, still, args.render_frame)
        if args.video:
            render.render_video(scene, args.video, cli.baked_frame_span(scene, objects, args),
                                args.video_scale)
    except render.RenderFailed as ex:
        raise cli.BakeFailed(f"{ex} (the bake was saved as {output}; a previous render of "
                             "that name is unchanged)") from None
    say(f"done in {time.perf_counter() - t_start:.1f} s")


def finish(scene, objects, demo: bool, forces: bool) -> None:
    """After the bake, before saving: the demo's tubes and balls; Show Forces if asked."""
    import scenes
    if demo:
        scenes.finish_demo_scene(scene, forces=forces)
    elif forces:
        for obj in objects:
            obj.mass_spring.show_forces = True


def main(argv: list[str] | None = None) -> int:
    argv = script_argv() if argv is None else argv
    try:
        cli = addon_cli(addon_source(argv))
    except AddonUnavailable as ex:
        print(f"{PROG}: error: {' '.join(str(ex).split())}", file=sys.stderr, flush=True)
        return BAD_INPUT
    args = parse_args(argv, cli)
    return cli.report_errors(PROG, lambda: run(args, cli))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        sys.exit(code)
