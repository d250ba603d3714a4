"""The headless bake command, registered by the add-on:

    blender -c mass_spring_bake scene.blend [--objects A,B] [--substeps 10] [--output X.blend]

It opens the .blend, bakes every object with Mass–Spring enabled (or the ones named),
and saves the result. Options such as --substeps or --frame-end change the bake only: the
saved file keeps the objects' own settings. scripts/bake.py wraps the same parser and run
for the ``bpy`` module and ``blender --python``, adding rendering and the demo scene.

Progress goes to stderr. Exit code 0 on success; on failure 1 (the bake failed, e.g. the
simulation diverged), 2 (bad input: missing file, no such object, not a mesh, bad option)
or 130 (interrupted: Ctrl-C, or SIGTERM as sent by `timeout` and render-farm managers),
with one line saying what went wrong. An interrupted or failed bake changes no file.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time

import bpy

from . import bake, writers
from .errors import BakeCancelled, BakeError
from .properties import INTEGRATOR_ITEMS, MAX_FRAME, bending_model

COMMAND = "mass_spring_bake"
INTEGRATOR_NAMES = tuple(identifier.lower() for identifier, *_ in INTEGRATOR_ITEMS)
EXIT_CODES_TEXT = "Exit codes: 0 ok, 1 bake failed, 2 bad input, 130 interrupted (SIGINT or SIGTERM)."
INTERRUPTED = 130
REPORT_COLUMNS = ("object", "frame", "substeps", "newton_iterations", "linear_iterations",
                  "energy", "max_constraint_error", "ms")

_handle = None


class CommandError(Exception):
    """Bad input: reported as one line, exit code 2."""

    exit_code = 2


class BakeFailed(Exception):
    """A bake that did not complete: reported as one line, exit code 1."""

    exit_code = 1


def say(message: str) -> None:
    print(f"[bake] {message}", file=sys.stderr, flush=True)


def one_line(ex) -> str:
    return " ".join(str(ex).split()) or ex.__class__.__name__


# ----------------------------------------------------------------------------- registration

def register() -> None:
    """Register ``blender -c mass_spring_bake`` where Blender has CLI commands (4.2+)."""
    global _handle
    if hasattr(bpy.utils, "register_cli_command") and _handle is None:
        _handle = bpy.utils.register_cli_command(COMMAND, execute)


def unregister() -> None:
    global _handle
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None


# ----------------------------------------------------------------------------- arguments

def add_bake_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose what is baked and how, and where it is saved."""
    p = parser
    p.add_argument("--objects", action="append", metavar="NAMES",
                   help="comma-separated objects to bake, may be repeated; write a comma "
                        "inside a name as \\, (default: every object with Mass–Spring enabled)")
    p.add_argument("--frame-start", type=int, help="first baked frame (default: the object's setting)")
    p.add_argument("--frame-end", type=int, help="last baked frame (default: the object's setting)")
    p.add_argument("--output", "-o", metavar="BLEND",
                   help="where to save the baked .blend (default: <input>_baked.blend beside "
                        "the input)")
    p.add_argument("--in-place", action="store_true", help="save the baked scene over the input file")
    p.add_argument("--mode", choices=("shape_keys", "pc2"),
                   help="bake output: shape keys in the .blend or a PC2 file read by a Mesh "
                        "Cache modifier (default: the object's setting)")
    p.add_argument("--integrator", type=str.lower, choices=INTEGRATOR_NAMES,
                   help="override every object's integrator for this bake")
    p.add_argument("--rho-inf", type=float, metavar="RHO",
                   help="override the generalized-α spectral radius ρ∞ (0..1) for this bake")
    p.add_argument("--substeps", type=int, help="override the integrator steps per frame for this bake "
                   "(the fewest, under error control)")
    p.add_argument("--accuracy", type=float, metavar="TOL",
                   help="override the error control's tolerance (a fraction of each object's "
                        "mean edge length, or of 1/40 of its size if that is longer; 0: fixed "
                        "steps) for this bake")
    p.add_argument("--bending-model", type=str.lower, choices=("angular", "linear"),
                   help="override every object's bending model for this bake")
    p.add_argument("--bending-rigidity", type=float, metavar="D",
                   help="override the angular model's flexural rigidity for this bake: D in "
                        "N·m for sheets, EI in N·m² for wires")
    for quantity in ("stiffness", "bending", "damping"):
        p.add_argument(f"--{quantity}-group", metavar="GROUP",
                       help=f"override the vertex group scaling the {quantity} for this bake "
                            "(each element takes its vertices' mean weight; '' for none)")
    p.add_argument("--no-collisions", action="store_true",
                   help="bake without the scene's Collision objects (default: every object "
                        "with Collisions on meets them)")
    p.add_argument("--self-collision", action="store_true",
                   help="turn self-collision on for this bake, at each object's distance")
    p.add_argument("--self-collision-distance", type=float, metavar="D",
                   help="turn self-collision on for this bake, parts of a structure keeping D (m) "
                        "apart (0: automatic, from the edge lengths)")
    p.add_argument("--no-self-collision", action="store_true",
                   help="turn self-collision off for this bake")
    p.add_argument("--self-friction", type=float, metavar="MU",
                   help="override the friction between touching parts of a structure for this bake")
    p.add_argument("--report", metavar="CSV",
                   help="write one row per baked frame and object: " + ",".join(REPORT_COLUMNS))
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"blender -c {COMMAND}",
        description="Bake the Mass–Spring Baker objects of a .blend and save the result. "
                    "The input .blend is required (the built-in demo scene is built by the "
                    "repository's scripts/bake.py, not by the extension). Overrides such as "
                    "--substeps change the bake only, not the settings saved in the file.",
        epilog=EXIT_CODES_TEXT)
    p.add_argument("input", help="the .blend to bake")
    add_bake_arguments(p)
    return p


# A bound on substeps far beyond any useful bake that keeps a typo from running for days
# (tests/test_addon_cli.py); frames are bounded by properties.MAX_FRAME.
MAX_SUBSTEPS = 10000


def object_names(values: list[str], known=()) -> list[str]:
    """The names in repeated, comma-separated --objects values, each once (an object named
    twice was baked twice, both into one PC2 file: found by tests/fuzz_bake.py); "\\," is
    a comma inside a name ("Rope\\, long"). Spaces around a name are dropped ("Chain,
    Bridge"), unless the name with them is one of `known` (an object named "Rope " is not
    "Rope": tests/test_addon_cli.py, test_a_name_with_spaces_around_it_bakes_that_object)."""
    names = []
    for value in values:
        for piece in re.split(r"(?<!\\),", value):
            piece = piece.replace("\\,", ",")
            name = piece if piece in known else piece.strip()
            if name and name not in names:
                names.append(name)
    return names


def check_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Split --objects lists and refuse inconsistent values (a usage error of `parser`)."""
    if args.objects is not None:  # kept as given: select_objects reads the names in the scene
        if not object_names(args.objects):  # `--objects ""` or `--objects ,` baked every enabled object
            parser.error("--objects names no object: give names, or leave it out to bake every "
                         "object with Mass–Spring enabled")
    if args.in_place and args.output:  # --output was ignored
        parser.error("--in-place and --output contradict each other: give one")
    if args.rho_inf is not None and not 0.0 <= args.rho_inf <= 1.0:
        parser.error(f"--rho-inf must be between 0 and 1, got {args.rho_inf}")
    if args.accuracy is not None and not (args.accuracy == 0.0 or 1e-9 <= args.accuracy <= 0.5):
        parser.error(f"--accuracy must be 0 (fixed steps) or between 1e-9 and 0.5, got {args.accuracy}")
    if args.bending_rigidity is not None and not 0.0 <= args.bending_rigidity <= 1e9:
        parser.error(f"--bending-rigidity must be between 0 and 1e9, got {args.bending_rigidity}")
    if (args.self_collision or args.self_collision_distance is not None) and args.no_self_collision:
        parser.error("--self-collision(-distance) and --no-self-collision contradict each other: give one")
    if args.self_collision_distance is not None and not 0.0 <= args.self_collision_distance <= 1e9:
        parser.error(f"--self-collision-distance must be between 0 (automatic) and 1e9 m, got "
                     f"{args.self_collision_distance}")
    if args.self_friction is not None and not 0.0 <= args.self_friction <= 1000.0:
        parser.error(f"--self-friction must be between 0 and 1000, got {args.self_friction}")
    if args.substeps is not None and not 1 <= args.substeps <= MAX_SUBSTEPS:
        parser.error(f"--substeps must be between 1 and {MAX_SUBSTEPS}, got {args.substeps}")
    for option, frame in (("--frame-start", args.frame_start), ("--frame-end", args.frame_end)):
        if frame is not None and not -MAX_FRAME <= frame <= MAX_FRAME:
            parser.error(f"{option} must be within Blender's frame range ±{MAX_FRAME}, got {frame}")
    if (args.frame_start is not None and args.frame_end is not None
            and args.frame_end <= args.frame_start):
        parser.error(f"--frame-end ({args.frame_end}) must be after --frame-start ({args.frame_start})")
    return args


# ----------------------------------------------------------------------------- the command

def execute(argv: list[str]) -> int:
    """``blender -c mass_spring_bake ARGV``: open, bake, save; the exit code."""
    parser = build_parser()
    try:
        args = check_args(parser.parse_args(argv), parser)
    except SystemExit as ex:  # --help (0) or a usage error (2): argparse has printed it
        return ex.code if isinstance(ex.code, int) else CommandError.exit_code
    return report_errors(COMMAND, lambda: bake_file(args))


def report_errors(prog: str, run) -> int:
    """Call `run()`; turn any failure into one line on stderr and its exit code (a
    traceback too only when MASS_SPRING_TRACEBACK is set: for bug reports). SIGTERM stops
    `run` as Ctrl-C does, from its start: Python's default for SIGTERM ended a run that was
    still opening its .blend at once, with status -15 and no line (tests/fuzz_bake.py)."""
    try:
        with _Interrupt(immediate=True):
            run()
    except (CommandError, BakeFailed) as ex:
        message, code = one_line(ex), ex.exit_code
    except KeyboardInterrupt:
        message, code = "interrupted, nothing was baked or saved", INTERRUPTED
    except (BakeError, OSError, MemoryError, RuntimeError) as ex:
        message, code = f"bake failed: {one_line(ex)}", BakeFailed.exit_code
    except Exception as ex:
        message = f"unexpected {ex.__class__.__name__}: {one_line(ex)} (please report it)"
        code = BakeFailed.exit_code
    else:
        return 0
    if os.environ.get("MASS_SPRING_TRACEBACK"):
        import traceback
        traceback.print_exc()
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return code


def bake_file(args) -> None:
    """Open args.input, bake the chosen objects with args' overrides, save."""
    t_start = time.perf_counter()
    input_path = open_input(args.input)
    scene = bpy.context.scene
    objects = select_objects(scene, args.objects)
    bake_and_save(scene, objects, args, output_path(args, input_path))
    say(f"done in {time.perf_counter() - t_start:.1f} s")


def open_input(path: str, *, opened_by_blender: bool = False) -> str:
    """Open the .blend `path` (unless it is already open); return its absolute path.
    `opened_by_blender`: Blender was given `path` on its own command line."""
    if not path.lower().endswith(".blend"):
        raise CommandError(f"input must be a .blend file, got {path!r}")
    if not os.path.isfile(path):
        raise CommandError(f"input file not found: {path}")
    path = os.path.abspath(path)
    # (The open file may have been deleted since: found by tests/fuzz_bake.py.)
    if os.path.isfile(bpy.data.filepath) and os.path.samefile(bpy.data.filepath, path):
        return path
    if opened_by_blender:
        raise CommandError(f"Blender could not open {path}")
    # A signal while it opens stops the run once it is open: raised in one of Blender's
    # file-load handlers, the KeyboardInterrupt was printed as that handler's error and
    # lost (tests/fuzz_bake.py).
    with _Interrupt() as interrupt:
        try:
            bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        except RuntimeError as ex:
            raise CommandError(f"could not open {path}: {one_line(ex)}") from None
    interrupt.check()
    return path


def select_objects(scene, values: list[str] | None) -> list:
    """The objects --objects `values` name (object_names; each must be a mesh of `scene`),
    or every enabled one."""
    names = object_names(values, known={obj.name for obj in scene.objects}) if values else []
    if names:
        chosen = []
        for name in names:
            obj = bpy.data.objects.get(name)
            if obj is None or scene.objects.get(name) is None:
                known = ", ".join(sorted(o.name for o in scene.objects if o.type == "MESH"))
                raise CommandError(f"no such object: {name!r} in scene {scene.name!r} "
                                   f"(mesh objects: {known or 'none'})")
            if obj.type != "MESH":
                raise CommandError(f"object {name!r} is not a mesh (its type is {obj.type})")
            chosen.append(obj)
        return chosen
    chosen = bake.enabled_objects(scene)
    if not chosen:
        raise CommandError(f"no object in scene {scene.name!r} has Mass–Spring enabled "
                           "(enable it in Properties ▸ Physics, or name objects with --objects)")
    return chosen


def bake_overrides(scene, obj, args) -> dict:
    """The settings this bake of `obj` uses instead of the stored ones (bake.BakeSettings).
    A chosen object is baked even when its Mass–Spring is not enabled."""
    overrides = {"enabled": True}
    if args.frame_start is not None or args.frame_end is not None:
        start, end = bake.frame_range(scene, obj)
        start = args.frame_start if args.frame_start is not None else start
        end = args.frame_end if args.frame_end is not None else end
        if end <= start:
            raise CommandError(f"{obj.name!r}: frame range {start}..{end} is empty")
        overrides.update(use_scene_frame_range=False, frame_start=start, frame_end=end)
    if args.mode:
        overrides["output"] = args.mode.upper()
    if args.integrator:
        overrides["integrator"] = args.integrator.upper()
    if args.rho_inf is not None:
        overrides["rho_inf"] = args.rho_inf
    if args.substeps is not None:
        overrides["substeps"] = args.substeps
    if args.accuracy is not None:
        overrides["accuracy"] = args.accuracy
    if args.bending_model:
        overrides["bending_model"] = args.bending_model.upper()
    if args.bending_rigidity is not None:
        overrides["bending_rigidity"] = args.bending_rigidity
        if args.bending_rigidity > 0 and bending_model(bake.BakeSettings(obj, overrides)) == 'LINEAR':
            raise CommandError(
                f"{obj.name!r} bends with the linear model (its Bending Stiffness springs), which "
                "--bending-rigidity does not set: add --bending-model angular, or leave "
                "--bending-rigidity out")
    for quantity in ("stiffness", "bending", "damping"):
        group = getattr(args, f"{quantity}_group")
        if group is not None:
            overrides[f"{quantity}_group"] = group
    if args.no_collisions:
        overrides["use_collisions"] = False
    if args.self_collision or args.self_collision_distance is not None:
        overrides["self_collision"] = True
    if args.self_collision_distance is not None:
        overrides["self_collision_distance"] = args.self_collision_distance
    if args.no_self_collision:
        overrides["self_collision"] = False
    if args.self_friction is not None:
        overrides["self_friction"] = args.self_friction
    return overrides


def output_path(args, input_path: str | None, default: str | None = None) -> str:
    """Where the baked scene is saved (absolute): --in-place, --output, `default`, or
    <input>_baked.blend."""
    if args.in_place:
        if input_path is None:
            raise CommandError("--in-place needs an input .blend")
        output = input_path
    elif args.output:
        output = args.output
    elif default is not None:
        output = default
    else:
        stem, _ = os.path.splitext(input_path)
        output = stem + "_baked.blend"
    if not output.lower().endswith(".blend"):
        raise CommandError(f"--output must end in .blend, got {output!r}")
    return os.path.abspath(output)


def baked_frame_span(scene, objects, args) -> tuple[int, int]:
    """First and last frame baked for any of `objects` (with args' overrides)."""
    ranges = [bake.frame_range(scene, o, bake_overrides(scene, o, args)) for o in objects]
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def bake_and_save(scene, objects, args, output: str, before_save=None) -> None:
    """Bake `objects` with args' overrides and save the scene as `output`.
    `before_save(scene)` runs after a successful bake. A failed or interrupted bake (Ctrl-C,
    SIGTERM) changes no file and leaves none behind: the PC2 files and the report are put
    in place with the .blend, and put back if anything fails before it is saved
    (tests/test_addon_safety.py)."""
    overrides = {obj.name: bake_overrides(scene, obj, args) for obj in objects}
    # Before simulating, not after: a bake that cannot be saved should not run first.
    require_writable(output, "the baked .blend")
    report = os.path.abspath(args.report) if args.report else None
    if report:
        require_writable(report, "--report")
        for path, what in ((output, "the output .blend"), (bpy.data.filepath, "the input .blend")):
            if path and bake.same_file(report, path):
                raise CommandError(f"--report {args.report} is {what}: choose another report file")
    # Before: an output or report that names the cache an object plays replaced it, and the
    # saved scene played a .blend or a CSV file (tests/fuzz_bake.py). Relative paths are
    # read from the open .blend, the input, as its objects play them.
    for path, option in ((output, "--output"), (report, "--report")):
        players = bake.pc2_users(path) if path else []
        if players:
            raise CommandError(f"{option} {path} is the PC2 cache of {players[0].name!r}: "
                               "choose another file")
    existed = os.path.exists(output)
    swap = writers.FileSwap()
    with _Interrupt() as interrupt:
        interrupt.check()  # a signal that Blender swallowed while the .blend opened
        remove_abandoned_staging(output)
        # PC2 paths are relative to the .blend ("//"), so the scene must live in the
        # output's folder before the bake writes them; it is saved there under a
        # temporary name, so that the output (with --in-place, the input) stays
        # byte-identical unless the whole bake succeeds (tests/test_addon_cli.py).
        staging = None
        try:
            try:
                if any(bake.BakeSettings(o, overrides[o.name]).output == "PC2" for o in objects):
                    staging = staging_path(output)
                    save_blend(staging, keep_backup=False)
                results = bake_objects(scene, objects, overrides, output, interrupt, args.quiet,
                                       swap, report)
                if report:
                    write_report(report, results, swap)
            finally:
                if staging is not None and os.path.exists(staging):
                    os.remove(staging)
            interrupt.check()
            if before_save is not None:
                before_save(scene)
            interrupt.check()
            save_blend(output, keep_backup=existed)
        except BaseException:
            # Before: a failed report or a signal after the PC2 files were written left
            # them replaced, the .blend that plays them unsaved (tests/fuzz_bake.py).
            swap.roll_back()
            raise
        swap.commit()
    say(f"saved {output}")


STAGING_PATTERN = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.baking\.blend$")


def staging_path(output: str) -> str:
    """The hidden name the scene is saved under beside `output` while it bakes."""
    folder, name = os.path.split(output)
    return os.path.join(folder, f".{name}.{os.getpid()}.baking.blend")


def remove_abandoned_staging(output: str) -> None:
    """Remove staging files of `output` left by a run that was killed outright (SIGKILL,
    power loss: nothing can clean up after those), i.e. whose process is gone."""
    folder, name = os.path.split(output)
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return
    for entry in entries:
        match = STAGING_PATTERN.match(entry)
        if match is None or match["name"] != name or process_alive(int(match["pid"])):
            continue
        try:
            os.remove(os.path.join(folder, entry))
        except OSError:
            pass


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # someone else's process, or unknown: leave its file alone
    return True


def require_writable(path: str, what: str) -> None:
    """CommandError unless `path` can be written: the nearest existing folder above it
    (missing ones are made when saving) is a writable folder, and the file, if it exists,
    is writable too (tests/test_addon_cli.py)."""
    if os.path.isdir(path):  # (found by tests/fuzz_bake.py: it failed after the bake)
        raise CommandError(f"cannot write {what} {path}: it is a folder")
    folder = os.path.dirname(path) or "."
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise CommandError(f"cannot write {what} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CommandError(f"cannot write {what} {path}: permission denied")


def bake_objects(scene, objects, overrides: dict, output: str, interrupt, quiet: bool = False,
                 swap=None, report: str | None = None) -> list:
    """Bake each object with its overrides ({object name: dict}); `interrupt` (an active
    _Interrupt) cancels cleanly. Every object is checked before the first is simulated,
    and simulated before any bake is written, so that a failing object leaves the others'
    previous bakes (and PC2 files) as they were. `swap`: the writers.FileSwap that puts the
    PC2 files in place, for the caller to commit (bake.finish_all); `report`: the --report
    file, which must be no object's PC2 file. The BakeResults."""
    jobs = [_new_job(scene, obj, overrides[obj.name]) for obj in objects]
    try:
        bake.check_distinct_pc2_files(jobs)
        for job in jobs:
            if job.output != 'PC2':
                continue
            pc2_file = bake.pc2_paths(job.obj)[1]
            for path, what in ((output, "the output .blend"), (report, "the --report file")):
                if path and bake.same_file(pc2_file, path):
                    raise CommandError(f"{job.object_name!r}: its PC2 file is {what} {path}: "
                                       "choose another PC2 File, or another file for that")
    except BakeError as ex:
        raise CommandError(one_line(ex)) from None
    try:
        runs = bake.simulation_runs(jobs)
    except BakeError as ex:  # objects that cannot be baked together, as set up
        raise CommandError(one_line(ex)) from None
    for run in runs:
        _simulate_one(run, quiet, interrupt)
    interrupt.check()
    try:
        results = bake.finish_all(jobs, swap)
    except BakeError as ex:
        raise BakeFailed(f"bake failed: {one_line(ex)}") from None
    for result in results:
        for warning in result.warnings:
            say(f"{result.object_name}: warning: {one_line(warning)}")
    return results


def write_report(path: str, results, swap=None) -> None:
    """The bake report: one CSV row per baked frame and object (REPORT_COLUMNS). `swap`:
    the writers.FileSwap that puts it in place (the caller commits it), else renamed."""
    import csv
    # Written whole under a temporary name, then renamed: an earlier report is replaced
    # only by a complete one. Its folder is made as the output's is (save_blend).
    folder, name = os.path.split(os.path.abspath(path))
    part = os.path.join(folder, f".{name}.{os.getpid()}.part")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(part, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(REPORT_COLUMNS)
            for result in results:
                for row in result.report:
                    writer.writerow([result.object_name, row.frame, row.substeps,
                                     row.newton_iterations, row.linear_iterations,
                                     f"{row.energy:.9g}", f"{row.max_constraint_error:.3g}",
                                     f"{row.ms:.3f}"])
        if swap is None:
            os.replace(part, path)
        else:
            swap.put(part, path)
    except OSError as ex:
        raise CommandError(f"cannot write the report {path!r}: {ex.strerror or ex}") from None
    finally:
        if os.path.exists(part):
            os.remove(part)
    say(f"wrote the bake report {path}")


def _new_job(scene, obj, overrides: dict):
    """The BakeJob of `obj`: everything checked, nothing simulated yet."""
    try:
        return bake.BakeJob(scene, obj, overrides)
    except BakeError as ex:  # refused before anything is simulated: the input's
        raise CommandError(_named(obj.name, ex)) from None


def _named(name: str, ex) -> str:
    message = one_line(ex)
    return message if message.startswith(f"'{name}'") else f"'{name}': {message}"


def _simulate_one(run, quiet: bool, interrupt) -> None:
    """Simulate `run` (a BakeJob, or a GroupJob of objects baked together) to its end
    (nothing written yet)."""
    members = run.jobs if isinstance(run, bake.GroupJob) else [run]
    settings = members[0].stored_settings
    name = ", ".join(job.object_name for job in members)
    start, end = int(run.frames[0]), int(run.frames[-1])
    vertices = sum(len(job.obj.data.vertices) for job in members)
    edges = sum(len(job.obj.data.edges) for job in members)
    together = " (baked together: they collide with each other)" if len(members) > 1 else ""
    substeps = max(job.stored_settings.substeps for job in members)  # simulation.solver_settings
    say(f"{name}: {vertices} vertices, {edges} edges, frames {start}..{end}, "
        f"{settings.integrator.lower()}, {substeps} substeps{together}")
    progress = Progress(name, quiet)
    t0 = time.perf_counter()
    try:
        bake.run_job(run, progress=progress, should_cancel=lambda: interrupt.requested)
    except BakeCancelled:
        raise KeyboardInterrupt from None
    except BakeError as ex:
        raise BakeFailed(f"bake failed: {_named(members[0].object_name, ex)}") from None
    steps = bake.report_totals(run.simulation.report)["substeps"]
    dt = time.perf_counter() - t0
    say(f"{name}: simulated {end - start + 1} frames in {dt:.2f} s "
        f"({steps / max(dt, 1e-9):,.0f} steps/s)")


def save_blend(path: str, *, keep_backup: bool = True) -> None:
    """Save as `path`. Blender keeps the previous file as `path`1; `keep_backup=False`
    removes that backup when this run made it (saving over our own PC2-mode pre-save).
    BakeFailed if it can't be saved (a full disk, a folder that refuses writes)."""
    path = os.path.abspath(path)
    backup = path + "1"
    had_backup = os.path.exists(backup)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=path, check_existing=False)
    except (OSError, RuntimeError) as ex:
        raise BakeFailed(f"could not save {path}: {one_line(ex)}") from None
    # Only a file is ours to remove: Blender 4.2 renames a directory in the way to `path`1.
    if not keep_backup and not had_backup and os.path.isfile(backup):
        os.remove(backup)


# ----------------------------------------------------------------------------- progress

class Progress:
    """Progress lines on stderr: frame, simulated frames per second, time left.

    On a terminal one line is rewritten in place; in a log, a line every few seconds.
    """

    def __init__(self, name: str, quiet: bool = False):
        self.name, self.quiet = name, quiet
        self.start = time.perf_counter()
        self.last_print = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, frame, done, total):
        """The bake's progress callback: frame reached, frames simulated, frames to do."""
        if self.quiet or done is None or total is None:
            return
        now = time.perf_counter()
        final = done >= total
        if not final and now - self.last_print < (0.25 if self.tty else 3.0):
            return
        self.last_print = now
        elapsed = max(now - self.start, 1e-9)
        frames_per_s = done / elapsed
        left = (total - done) * elapsed / done if done else float("nan")
        shown = f"frame {frame}" if frame is not None else f"frame {done}"
        line = (f"[bake] {self.name}: {shown} ({done}/{total}, {100.0 * done / max(total, 1):.0f}%)"
                f"  {frames_per_s:,.1f} frames/s  {_seconds(left)} left")
        if self.tty:
            print("\r" + line + "\033[K", end="\n" if final else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def _seconds(s: float) -> str:
    if s != s:  # NaN
        return "?"
    if s < 60:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


class _Interrupt:
    """While active, Ctrl-C (SIGINT) and SIGTERM (what `timeout`, `kill` and render-farm
    managers send) ask the running bake to cancel cleanly: the core does not see Python
    signals, and Python's default for SIGTERM ends the process without cleaning up. The
    previous handlers are put back afterwards (tests/test_addon_safety.py).

    `immediate` (report_errors, around a whole run): a signal also raises
    KeyboardInterrupt at once, as Python's default for Ctrl-C does. An _Interrupt entered
    inside another one is requested if the outer one is: a KeyboardInterrupt that Blender
    swallowed (raised in one of its handlers, it is printed and lost) still stops the bake
    before it writes anything (tests/fuzz_bake.py)."""

    SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))
    _active = []  # the _Interrupts entered and not left, outermost first

    def __init__(self, immediate: bool = False):
        self.immediate = immediate
        self._requested = False
        self._previous = {}

    @property
    def requested(self) -> bool:
        return self._requested or any(outer._requested for outer in self._active
                                      if outer is not self)

    def __call__(self, *_):
        self._requested = True
        if self.immediate:
            raise KeyboardInterrupt

    def check(self) -> None:
        """KeyboardInterrupt if a signal came: at the points where stopping is clean."""
        if self.requested:
            raise KeyboardInterrupt

    def __enter__(self):
        for number in self.SIGNALS:
            try:
                self._previous[number] = signal.signal(number, self)
            except ValueError:  # not the main thread
                pass
        self._active.append(self)
        return self

    def __exit__(self, *_):
        self._active.remove(self)
        for number, previous in self._previous.items():
            signal.signal(number, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}
