"""Headless bake of Mass–Spring Baker objects, and the built-in demo.

Inside Blender (arguments for this script go after ``--``):

    blender --background scene.blend --python-exit-code 1 --python scripts/bake.py -- [options]

With the ``bpy`` module from PyPI (Blender as a Python module):

    python scripts/bake.py [scene.blend] [options]

Without an input .blend it builds the demo scene (several of the seeds' structures side by
side), bakes it, saves ``out/demo.blend`` and renders ``out/demo.png``.

Progress goes to stderr. Exit code 0 on success; on failure 1 (the bake failed, e.g. the
simulation diverged), 2 (bad input: missing file, no such object, not a mesh, bad option)
or 130 (interrupted), with one line saying what went wrong.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.util
import os
import signal
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
ADDON_DIR = REPO / "addon"
ADDON_NAME = "mass_spring_baker"


def integrator_names() -> tuple[str, ...] | None:
    """The core's integrators (mass_spring.INTEGRATORS) for --integrator; None (any name)
    when the core is missing, which the bake itself then reports."""
    _ensure_core_importable()
    try:
        import mass_spring
    except ImportError:
        return None
    return mass_spring.INTEGRATORS


ENGINES = {"workbench": "BLENDER_WORKBENCH", "cycles": "CYCLES", "eevee": "BLENDER_EEVEE"}


class CommandError(Exception):
    """Bad input: reported as one line, exit code 2."""

    exit_code = 2


class BakeFailed(Exception):
    """A bake that did not complete: reported as one line, exit code 1."""

    exit_code = 1


def say(message: str) -> None:
    print(f"[bake] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- arguments

def script_argv(argv: list[str] | None = None) -> list[str]:
    """This script's own arguments: after ``--`` inside Blender, else sys.argv[1:]."""
    argv = sys.argv if argv is None else argv
    if "--" in argv:
        return argv[argv.index("--") + 1:]
    if _inside_blender_binary(argv):
        return []
    return argv[1:]


def _inside_blender_binary(argv: list[str]) -> bool:
    # The bpy module leaves sys.argv alone; the Blender binary puts its own options there.
    return any(a in ("--python", "-P", "--background", "-b") for a in argv[1:])


def blend_given_to_blender(argv: list[str] | None = None) -> str | None:
    """The .blend named on Blender's own command line (before ``--``), if any."""
    argv = sys.argv if argv is None else argv
    if not _inside_blender_binary(argv):
        return None
    head = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    skip_next = False
    for arg in head:
        if skip_next:
            skip_next = False
            continue
        if arg in ("--python", "-P", "--python-exit-code", "--python-expr", "--addons",
                   "--engine", "-E", "--scene", "-S", "--frame-start", "-s", "--frame-end", "-e",
                   "--render-output", "-o", "--threads", "-t", "--app-template"):
            skip_next = True
            continue
        if arg.lower().endswith(".blend"):
            return arg
    return None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bake.py",
        description="Bake Mass–Spring Baker objects headless; without an input .blend, "
                    "build, bake, save and render the built-in demo.",
        epilog="Inside Blender: blender -b scene.blend --python-exit-code 1 --python "
               "scripts/bake.py -- [options]. Exit codes: 0 ok, 1 bake failed, 2 bad input, "
               "130 interrupted.")
    p.add_argument("input", nargs="?", help="the .blend to bake (default: the file Blender "
                   "opened, or the built-in demo scene when there is none)")
    p.add_argument("--objects", action="append", metavar="NAMES",
                   help="comma-separated objects to bake, may be repeated (default: every "
                        "object with Mass–Spring enabled)")
    p.add_argument("--frame-start", type=int, help="first baked frame (default: the object's setting)")
    p.add_argument("--frame-end", type=int, help="last baked frame (default: the object's setting)")
    p.add_argument("--output", "-o", metavar="BLEND",
                   help="where to save the baked .blend (default: out/demo.blend for the demo, "
                        "<input>_baked.blend beside the input otherwise)")
    p.add_argument("--in-place", action="store_true", help="save the baked scene over the input file")
    p.add_argument("--mode", choices=("shape_keys", "pc2"),
                   help="bake output: shape keys in the .blend or a PC2 file read by a Mesh "
                        "Cache modifier (default: the object's setting)")
    p.add_argument("--integrator", type=str.lower, choices=integrator_names(),
                   help="override every object's integrator")
    p.add_argument("--rho-inf", type=float, metavar="RHO",
                   help="override the generalized-α spectral radius ρ∞ (0..1)")
    p.add_argument("--substeps", type=int, help="override the integrator steps per frame")
    p.add_argument("--render", metavar="PNG", help="render a still to this file "
                   "(default for the demo: out/demo.png)")
    p.add_argument("--no-render", action="store_true", help="the demo: don't render a still")
    p.add_argument("--render-frame", type=int, help="frame of the still (default: the scene's current frame)")
    p.add_argument("--engine", type=str.lower, choices=sorted(ENGINES), default=None,
                   help="render engine (default: workbench; cycles renders on the CPU)")
    p.add_argument("--samples", type=int, default=32, help="Cycles samples (default 32)")
    p.add_argument("--resolution", metavar="WxH", help="render size, e.g. 1280x720 "
                   "(default: the scene's)")
    p.add_argument("--video", metavar="PATH",
                   help="also render the baked frame range: a .mp4/.mkv/.webm file, or a folder "
                        "for PNG frames")
    p.add_argument("--video-scale", type=int, default=50, metavar="PERCENT",
                   help="video size in percent of the render resolution (default 50)")
    p.add_argument("--addon", choices=("auto", "installed", "repo"), default="auto",
                   help="which add-on to use: an installed and enabled one, or the repo's "
                        "addon/ folder (default auto: installed if there is one, else the repo's)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.objects:
        args.objects = [n.strip() for item in args.objects for n in item.split(",") if n.strip()]
    if args.rho_inf is not None and not 0.0 <= args.rho_inf <= 1.0:
        parser.error(f"--rho-inf must be between 0 and 1, got {args.rho_inf}")
    if args.substeps is not None and args.substeps < 1:
        parser.error(f"--substeps must be at least 1, got {args.substeps}")
    if (args.frame_start is not None and args.frame_end is not None
            and args.frame_end <= args.frame_start):
        parser.error(f"--frame-end ({args.frame_end}) must be after --frame-start ({args.frame_start})")
    if args.resolution:
        args.resolution = parse_resolution(args.resolution, parser)
    return args


def parse_resolution(text: str, parser) -> tuple[int, int]:
    """'1280x720' -> (1280, 720); anything else is a usage error of `parser`."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
        if w > 0 and h > 0:
            return w, h
    except ValueError:
        pass
    parser.error(f"--resolution must look like 1280x720, got {text!r}")


# ----------------------------------------------------------------------------- add-on

def _ensure_core_importable() -> None:
    """Inside a Blender binary with the repo's add-on the core is not on sys.path: use the
    wheel that scripts/build_extension.py left in addon/wheels/ (extracted once)."""
    try:
        import mass_spring  # noqa: F401
        return
    except ImportError:
        pass
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    for wheel in sorted((ADDON_DIR / "wheels").glob(f"mass_spring-*-{tag}-*.whl")):
        target = REPO / "build" / "wheel-extract" / wheel.stem
        if not target.exists():
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(target)
        sys.path.insert(0, str(target))
        importlib.invalidate_caches()
        return


def _loaded_addon_package() -> str | None:
    for name in list(sys.modules):
        if name == ADDON_NAME or name.endswith("." + ADDON_NAME):
            return name
    return None


def _enable_installed_addon() -> str | None:
    import addon_utils
    for mod in addon_utils.modules():
        if mod.__name__.rsplit(".", 1)[-1] == ADDON_NAME:
            addon_utils.enable(mod.__name__, default_set=False, persistent=True)
            if _loaded_addon_package():
                return mod.__name__
    return None


def _register_repo_addon() -> str:
    init = ADDON_DIR / "__init__.py"
    if not init.exists():
        raise CommandError(f"the add-on is not installed and {init} does not exist")
    _ensure_core_importable()
    spec = importlib.util.spec_from_file_location(
        ADDON_NAME, init, submodule_search_locations=[str(ADDON_DIR)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[ADDON_NAME] = module
    spec.loader.exec_module(module)
    module.register()
    # bpy 4.2 crashes and 4.5 hangs at exit while a Python operator is still registered.
    atexit.register(_unregister_at_exit, module)
    return ADDON_NAME


def _unregister_at_exit(module) -> None:
    import bpy
    if hasattr(bpy.types.Object, "mass_spring"):
        module.unregister()


def load_addon(source: str = "auto"):
    """Make sure the add-on is registered; return its ``bake`` module."""
    import bpy
    package = None
    if source in ("auto", "installed"):
        if hasattr(bpy.types.Object, "mass_spring"):
            package = _loaded_addon_package()
        if package is None:
            package = _enable_installed_addon()
        if package is None and source == "installed":
            raise CommandError("the Mass–Spring Baker extension is not installed in this Blender "
                               "(install the zip from dist/, or use --addon repo)")
    if package is None:
        package = _loaded_addon_package() if hasattr(bpy.types.Object, "mass_spring") else None
        if package is None:
            package = _register_repo_addon()
    return importlib.import_module(package + ".bake")


# ----------------------------------------------------------------------------- progress

class Progress:
    """Progress lines on stderr: frame, simulated steps per second, time left.

    On a terminal one line is rewritten in place; in a log, a line every few seconds.
    """

    def __init__(self, name: str, substeps: int, quiet: bool = False):
        self.name, self.substeps, self.quiet = name, max(1, substeps), quiet
        self.start = time.perf_counter()
        self.last_print = 0.0
        self.tty = sys.stderr.isatty()
        self.printed = False
        self.frames_done = 0

    def __call__(self, frame, done, total):
        """The add-on's progress callback: frame reached, frames simulated, frames to do."""
        self.update(frame, done, total)

    def update(self, frame, done, total):
        if self.quiet or done is None or total is None:
            return
        now = time.perf_counter()
        self.frames_done = done
        final = done >= total
        if not final and now - self.last_print < (0.25 if self.tty else 3.0):
            return
        self.last_print = now
        elapsed = max(now - self.start, 1e-9)
        steps_per_s = done * self.substeps / elapsed
        left = (total - done) * elapsed / done if done else float("nan")
        shown = f"frame {frame}" if frame is not None else f"frame {done}"
        line = (f"[bake] {self.name}: {shown} ({done}/{total}, {100.0 * done / max(total, 1):.0f}%)"
                f"  {steps_per_s:,.0f} steps/s  {_seconds(left)} left")
        if self.tty:
            print("\r" + line + "\033[K", end="\n" if final else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)
        self.printed = True


def _seconds(s: float) -> str:
    if s != s:  # NaN
        return "?"
    if s < 60:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


# ----------------------------------------------------------------------------- steps

def open_input(args) -> str | None:
    """Open the input .blend (unless Blender already did); return its path or None (demo)."""
    import bpy
    given_to_blender = blend_given_to_blender()
    path = args.input or given_to_blender
    if path is None:
        return None
    if not path.lower().endswith(".blend"):
        raise CommandError(f"input must be a .blend file, got {path!r}")
    if not os.path.isfile(path):
        raise CommandError(f"input file not found: {path}")
    path = os.path.abspath(path)
    if bpy.data.filepath and os.path.samefile(bpy.data.filepath, path):
        return path
    if given_to_blender and not args.input and not bpy.data.filepath:
        raise CommandError(f"Blender could not open {path}")
    try:
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
    except RuntimeError as ex:
        raise CommandError(f"could not open {path}: {_one_line(ex)}") from None
    return path


def select_objects(scene, names: list[str] | None) -> list:
    import bpy
    if names:
        chosen = []
        for name in names:
            obj = bpy.data.objects.get(name)
            if obj is None or scene.objects.get(name) is None:
                known = ", ".join(sorted(o.name for o in scene.objects if o.type == "MESH"))
                raise CommandError(f"no such object: {name!r} in scene {scene.name!r} "
                                   f"(mesh objects: {known or 'none'})")
            if obj.type != "MESH":
                raise CommandError(f"object {name!r} is not a mesh (it is a {obj.type.lower()})")
            chosen.append(obj)
        return chosen
    chosen = [o for o in scene.objects
              if o.type == "MESH" and getattr(o, "mass_spring", None) is not None
              and o.mass_spring.enabled]
    if not chosen:
        raise CommandError(f"no object in scene {scene.name!r} has Mass–Spring enabled "
                           "(enable it in Properties ▸ Physics, or name objects with --objects)")
    return chosen


def apply_overrides(obj, args) -> None:
    ms = obj.mass_spring
    ms.enabled = True
    if args.frame_start is not None or args.frame_end is not None:
        scene_start, scene_end = _frame_range(obj)
        ms.use_scene_frame_range = False
        ms.frame_start = args.frame_start if args.frame_start is not None else scene_start
        ms.frame_end = args.frame_end if args.frame_end is not None else scene_end
        if ms.frame_end <= ms.frame_start:
            raise CommandError(f"{obj.name!r}: frame range {ms.frame_start}..{ms.frame_end} is empty")
    if args.mode:
        ms.output = args.mode.upper()
    if args.integrator:
        ms.integrator = args.integrator.upper()
    if args.rho_inf is not None:
        ms.rho_inf = args.rho_inf
    if args.substeps is not None:
        ms.substeps = args.substeps


def _frame_range(obj) -> tuple[int, int]:
    import bpy
    ms = obj.mass_spring
    if ms.use_scene_frame_range:
        scene = bpy.context.scene
        return scene.frame_start, scene.frame_end
    return ms.frame_start, ms.frame_end


def _one_line(ex) -> str:
    return " ".join(str(ex).split()) or ex.__class__.__name__


class _Interrupt:
    """Ctrl-C cancels the running bake cleanly (the core does not see Python signals)."""

    def __init__(self):
        self.requested = False

    def __call__(self, *_):
        self.requested = True

    def install(self):
        try:
            signal.signal(signal.SIGINT, self)
        except ValueError:  # not the main thread
            pass


def bake_all(bake, scene, objects, args) -> None:
    interrupt = _Interrupt()
    interrupt.install()
    errors = bake_errors(bake)
    for obj in objects:
        start, end = _frame_range(obj)
        say(f"{obj.name}: {len(obj.data.vertices)} vertices, {len(obj.data.edges)} edges, "
            f"frames {start}..{end}, {obj.mass_spring.integrator.lower()}, "
            f"{obj.mass_spring.substeps} substeps")
        progress = Progress(obj.name, obj.mass_spring.substeps, args.quiet)
        t0 = time.perf_counter()
        try:
            result = bake.bake_object(scene, obj, progress=progress,
                                      should_cancel=lambda: interrupt.requested)
        except errors["cancelled"]:
            raise KeyboardInterrupt from None
        except errors["error"] as ex:
            message = _one_line(ex)
            if not message.startswith(f"'{obj.name}'"):
                message = f"'{obj.name}': {message}"
            raise BakeFailed(f"bake failed: {message}") from None
        steps = (end - start) * obj.mass_spring.substeps
        dt = time.perf_counter() - t0
        say(f"{obj.name}: baked {end - start + 1} frames in {dt:.2f} s "
            f"({steps / max(dt, 1e-9):,.0f} steps/s)")
        for warning in getattr(result, "warnings", None) or []:
            say(f"{obj.name}: warning: {_one_line(warning)}")


def bake_errors(bake) -> dict:
    """The add-on's BakeError / BakeCancelled classes (from its errors module)."""
    package = bake.__name__.rsplit(".", 1)[0]
    errors_module = importlib.import_module(package + ".errors")
    return {"error": errors_module.BakeError,
            "cancelled": getattr(errors_module, "BakeCancelled", KeyboardInterrupt)}


def save_blend(path: str, *, keep_backup: bool = True) -> None:
    """Save as `path`. Blender keeps the previous file as `path`1; `keep_backup=False`
    removes that backup when this run made it (saving over our own PC2-mode pre-save)."""
    import bpy
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    backup = path + "1"
    had_backup = os.path.exists(backup)
    bpy.ops.wm.save_as_mainfile(filepath=path, check_existing=False)
    if not keep_backup and not had_backup and os.path.exists(backup):
        os.remove(backup)


def configure_render(scene, args) -> None:
    import scenes
    engine = ENGINES[args.engine or "workbench"]
    resolution = args.resolution or (scene.render.resolution_x, scene.render.resolution_y)
    scenes.set_render_defaults(scene, engine=engine, resolution=resolution, samples=args.samples)
    if engine == "CYCLES":
        scene.render.threads_mode = "AUTO"


def render_still(scene, path: str, frame: int | None) -> None:
    import bpy
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if frame is not None:
        scene.frame_set(frame)
    render = scene.render
    image = render.image_settings
    if hasattr(image, "media_type"):
        image.media_type = "IMAGE"
    image.file_format = "PNG"
    image.color_mode = "RGB"
    render.filepath = path
    t0 = time.perf_counter()
    bpy.ops.render.render(write_still=True)
    if not os.path.isfile(path):
        raise BakeFailed(f"rendering {path} failed")
    say(f"rendered {path} (frame {scene.frame_current}, {render.engine.lower()}, "
        f"{time.perf_counter() - t0:.1f} s)")


def render_video(scene, path: str, frame_range: tuple[int, int], scale: int) -> None:
    import bpy
    render = scene.render
    image = render.image_settings
    saved = (scene.frame_start, scene.frame_end, render.resolution_percentage, render.filepath,
             scene.display.render_aa)
    scene.frame_start, scene.frame_end = frame_range
    render.resolution_percentage = max(1, min(100, scale))
    scene.display.render_aa = "FXAA"  # Workbench: 5-10x faster per frame than 16 samples
    is_movie = os.path.splitext(path)[1].lower() in (".mp4", ".mkv", ".webm", ".avi", ".mov")
    path = os.path.abspath(path)
    if is_movie and bpy.app.build_options.codec_ffmpeg:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if hasattr(image, "media_type"):
            image.media_type = "VIDEO"
        image.file_format = "FFMPEG"
        ff = render.ffmpeg
        ext = os.path.splitext(path)[1].lower()
        ff.format = {".mkv": "MKV", ".webm": "WEBM", ".avi": "AVI", ".mov": "QUICKTIME"}.get(ext, "MPEG4")
        ff.codec = "WEBM" if ext == ".webm" else "H264"
        ff.constant_rate_factor = "MEDIUM"
        render.use_file_extension = False
        render.filepath = path
        target = path
    else:
        if is_movie:
            say("this Blender has no FFmpeg: writing PNG frames instead")
            path = os.path.splitext(path)[0]
        os.makedirs(path, exist_ok=True)
        if hasattr(image, "media_type"):
            image.media_type = "IMAGE"
        image.file_format = "PNG"
        render.filepath = os.path.join(path, "frame_####")
        target = path + os.sep
    t0 = time.perf_counter()
    bpy.ops.render.render(animation=True)
    say(f"rendered {frame_range[1] - frame_range[0] + 1} frames to {target} "
        f"in {time.perf_counter() - t0:.1f} s")
    scene.frame_start, scene.frame_end = saved[0], saved[1]
    render.resolution_percentage, render.filepath = saved[2], saved[3]
    scene.display.render_aa = saved[4]
    if hasattr(image, "media_type"):
        image.media_type = "IMAGE"
    image.file_format = "PNG"


# ----------------------------------------------------------------------------- main

def run(args) -> None:
    try:
        import bpy
    except ImportError:
        raise CommandError("no bpy: run inside Blender (blender -b --python scripts/bake.py -- ...) "
                           "or with a Python that has the bpy module (bash scripts/setup_env.sh)") from None
    if args.input and not os.path.isfile(args.input):
        raise CommandError(f"input file not found: {args.input}")
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))

    bake = load_addon(args.addon)
    t_start = time.perf_counter()
    input_path = open_input(args)
    demo = input_path is None
    import scenes
    if demo:
        say("no input .blend: building the demo scene")
        kwargs = {}
        if args.frame_start is not None:
            kwargs["frame_start"] = args.frame_start
        if args.frame_end is not None:
            kwargs["frame_end"] = args.frame_end
        scenes.build_demo_scene(**kwargs)
        # The add-on stays registered across the factory reset; the scene is new.
    scene = bpy.context.scene

    objects = select_objects(scene, args.objects)
    for obj in objects:
        apply_overrides(obj, args)

    if args.in_place:
        if demo:
            raise CommandError("--in-place needs an input .blend")
        output = input_path
    elif args.output:
        output = args.output
    elif demo:
        output = os.path.join("out", "demo.blend")
    else:
        stem, _ = os.path.splitext(input_path)
        output = stem + "_baked.blend"
    if not output.lower().endswith(".blend"):
        raise CommandError(f"--output must end in .blend, got {output!r}")
    output = os.path.abspath(output)
    existed = os.path.exists(output)

    # PC2 paths are relative to the .blend ("//"): save first so they land beside the output.
    if any(o.mass_spring.output == "PC2" for o in objects):
        save_blend(output)
    try:
        bake_all(bake, scene, objects, args)
    except BaseException:
        if not existed and os.path.exists(output):
            os.remove(output)
        raise
    if demo:
        scenes.finish_demo_scene(scene)
    save_blend(output, keep_backup=existed)
    say(f"saved {output}")

    still = args.render or (os.path.join("out", "demo.png") if demo and not args.no_render else None)
    if still or args.video:
        configure_render(scene, args)
    if still:
        render_still(scene, still, args.render_frame)
    if args.video:
        ranges = [_frame_range(o) for o in objects]
        render_video(scene, args.video, (min(r[0] for r in ranges), max(r[1] for r in ranges)),
                     args.video_scale)
    say(f"done in {time.perf_counter() - t_start:.1f} s")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(script_argv() if argv is None else argv)
    try:
        run(args)
    except (CommandError, BakeFailed) as ex:
        print(f"bake.py: error: {_one_line(ex)}", file=sys.stderr, flush=True)
        return ex.exit_code
    except KeyboardInterrupt:
        print("bake.py: error: interrupted, nothing was baked for the current object",
              file=sys.stderr, flush=True)
        return 130
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        sys.exit(code)
