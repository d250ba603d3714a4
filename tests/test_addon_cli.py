"""The extension's headless command (addon/cli.py, ``blender -c mass_spring_bake``), in
this process: its registration with Blender, and its function called with an argv."""

from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import require_bpy, submodule, world_coordinates

bpy = require_bpy()

pytestmark = pytest.mark.blender

COMMAND = "mass_spring_bake"


def cli_command_registered(capfd) -> bool:
    """Whether Blender has a CLI command named mass_spring_bake: registering the id a second
    time makes Blender warn about the duplicate (the probe is removed again)."""
    capfd.readouterr()
    probe = bpy.utils.register_cli_command(COMMAND, lambda argv: 0)
    bpy.utils.unregister_cli_command(probe)
    return "duplicate" in capfd.readouterr().err


@pytest.fixture
def chain_blend(scene, tmp_path):
    """A saved .blend with a small hanging chain (frames 1..12) and a camera."""
    import scenes
    scene.frame_end = 12
    scenes.hanging_chain(n=4, spacing=0.25, angle=60.0, stiffness=200.0,
                         location=(0.0, 0.0, 2.0), substeps=4)
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    path = tmp_path / "chain.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_command_registered_with_the_addon_and_removed_with_it(addon, capfd):
    assert hasattr(bpy.utils, "register_cli_command")
    assert cli_command_registered(capfd)
    addon.unregister()
    try:
        assert not cli_command_registered(capfd)
    finally:
        addon.register()
    assert cli_command_registered(capfd)


def test_command_bakes_a_saved_blend(chain_blend, tmp_path):
    """Exit code 0; the output holds the bake, and it is the add-on's own simulation of
    the input (positions per frame as the shape keys play them)."""
    bake = submodule("bake")
    bpy.ops.wm.open_mainfile(filepath=str(chain_blend))
    job = bake.BakeJob(bpy.context.scene, bpy.data.objects["Chain"])
    while not job.step(1.0):  # reads the animation: the matrices
        pass
    expected = submodule("simulation").simulate_world_positions(
        job.arrays, job.settings, job.simulation.matrices, job.frames)

    out = tmp_path / "out" / "baked.blend"
    code = submodule("cli").execute([str(chain_blend), "--output", str(out), "--quiet"])
    assert code == 0
    assert out.is_file()
    bpy.ops.wm.open_mainfile(filepath=str(out))
    scene, chain = bpy.context.scene, bpy.data.objects["Chain"]
    assert chain.data.shape_keys is not None
    baked = []
    for frame in range(1, 13):
        scene.frame_set(frame)
        baked.append(world_coordinates(chain))
    np.testing.assert_allclose(np.array(baked), expected, atol=1e-5)
    assert np.abs(expected[-1] - expected[0]).max() > 0.05  # it did move


def test_command_exit_codes_for_bad_input(chain_blend, tmp_path, capfd):
    execute = submodule("cli").execute
    out = tmp_path / "x.blend"

    assert execute([str(tmp_path / "missing.blend"), "--output", str(out)]) == 2
    assert "mass_spring_bake: error: input file not found" in capfd.readouterr().err

    assert execute([str(chain_blend), "--objects", "Nope", "--output", str(out)]) == 2
    assert "no such object: 'Nope'" in capfd.readouterr().err

    assert execute([str(chain_blend), "--substeps", "0"]) == 2  # a usage error
    assert execute(["--help"]) == 0
    assert "input .blend is required" in " ".join(capfd.readouterr().out.split())
    assert not out.exists()


@pytest.mark.parametrize("option, value, message", [
    ("--substeps", str(2 ** 40), "--substeps must be between 1 and 10000"),
    ("--frame-start", str(-2 ** 40), "--frame-start must be within Blender's frame range"),
    ("--frame-end", "2000000000", "--frame-end must be within Blender's frame range"),
    # Found by tests/fuzz_bake.py: error control at 7e-31 of an edge never finished.
    ("--accuracy", "7e-31", "--accuracy must be 0 (fixed steps) or between 1e-9 and 0.5"),
])
def test_absurd_counts_are_a_one_line_usage_error(chain_blend, tmp_path, capfd,
                                                   option, value, message):
    # Before: tracebacks, or a 14.9 GiB allocation for --frame-end 2000000000.
    out = tmp_path / "x.blend"
    capfd.readouterr()
    assert submodule("cli").execute([str(chain_blend), option, value, "--output", str(out)]) == 2
    err = capfd.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("options, message", [
    (["--objects", ""], "--objects names no object"),
    (["--objects", ","], "--objects names no object"),
    (["--in-place", "--output", "OUT"], "--in-place and --output contradict each other"),
])
def test_options_that_would_be_ignored_are_a_usage_error(chain_blend, tmp_path, capfd, options, message):
    # Found by an adversarial test: an empty --objects baked every enabled object, and
    # --in-place with --output saved over the input without writing the output.
    before = chain_blend.read_bytes()
    out = tmp_path / "x.blend"
    capfd.readouterr()
    assert submodule("cli").execute([str(chain_blend)] + [str(out) if o == "OUT" else o for o in options]) == 2
    err = capfd.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() and chain_blend.read_bytes() == before


def test_a_report_or_output_that_is_a_folder_is_refused_before_the_bake(chain_blend, tmp_path, capfd):
    # Found by tests/fuzz_bake.py: --report naming a folder failed after the bake, whose
    # PC2 files had already replaced the previous ones.
    execute = submodule("cli").execute
    (tmp_path / "folder.blend").mkdir()
    capfd.readouterr()
    assert execute([str(chain_blend), "--report", str(tmp_path)]) == 2
    assert "cannot write --report" in capfd.readouterr().err
    assert execute([str(chain_blend), "--output", str(tmp_path / "folder.blend")]) == 2
    err = capfd.readouterr().err
    assert "cannot write the baked .blend" in err and "it is a folder" in err
    assert "simulated" not in err  # refused before the bake


def test_an_unwritable_output_is_refused_before_the_bake(chain_blend, tmp_path, capfd):
    # Before: a traceback, after the whole simulation had run. A file where a folder
    # should be cannot be written even by root (who may write into read-only folders).
    execute = submodule("cli").execute
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    capfd.readouterr()
    assert execute([str(chain_blend), "--output", str(blocker / "sub" / "x.blend")]) == 2
    captured = capfd.readouterr()
    assert "cannot write the baked .blend" in captured.err
    assert "is a file, not a folder" in captured.err
    assert "vertices" not in captured.err  # refused before the bake announced the object
    assert execute([str(chain_blend), "--output", str(tmp_path / "ok.blend"),
                    "--report", str(blocker / "r.csv")]) == 2
    assert "cannot write --report" in capfd.readouterr().err
    assert not (tmp_path / "ok.blend").exists()


def test_a_failed_in_place_pc2_rebake_leaves_every_file_byte_identical(scene, tmp_path, capfd):
    # Before: the input .blend was saved over before the bake (plus a .blend1), and the
    # first object's .pc2 was overwritten before the second object failed, so the file
    # and its PC2 caches no longer matched.
    import hashlib
    import scenes
    scene.frame_end = 24
    scenes.hanging_chain("Chain", n=4, spacing=0.25, angle=60.0, stiffness=200.0,
                         location=(0.0, 0.0, 2.0), substeps=4)
    scenes.hanging_chain("Zlater", n=4, spacing=0.25, angle=60.0, stiffness=1e9,
                         location=(2.0, 0.0, 2.0), substeps=1)
    path = tmp_path / "two.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    execute = submodule("cli").execute
    assert execute([str(path), "--in-place", "--mode", "pc2", "--quiet"]) == 0
    # Make the later object fail (explicit Euler on stiff springs diverges), then re-bake
    # with a different frame range, so that a written file would differ.
    bpy.ops.wm.open_mainfile(filepath=str(path))
    bpy.data.objects["Zlater"].mass_spring.integrator = "EXPLICIT_EULER"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    for leftover in tmp_path.glob("*.blend1"):
        leftover.unlink()

    def checksums():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    before = checksums()
    assert {"two.blend", "Chain.pc2", "Zlater.pc2"} <= set(before)
    capfd.readouterr()
    code = execute([str(path), "--in-place", "--mode", "pc2", "--frame-end", "12", "--quiet"])
    assert code != 0
    assert "Zlater" in capfd.readouterr().err
    assert checksums() == before  # no file changed, none left behind


def test_object_names_may_contain_escaped_commas():
    names = submodule("cli").object_names
    assert names([r"Rope\, long", "Chain, Bridge"]) == ["Rope, long", "Chain", "Bridge"]
    assert names(["A,,B ,"]) == ["A", "B"]


def test_a_name_with_spaces_around_it_bakes_that_object(scene, tmp_path):
    # Found by an adversarial tester: "--objects 'Chain '" baked 'Chain', not 'Chain '.
    import scenes
    scene.frame_end = 6
    for name, x in (("Chain", 0.0), ("Chain ", 3.0)):
        scenes.hanging_chain(name, n=4, spacing=0.25, angle=60.0, location=(x, 0.0, 2.0), substeps=4)
    path, out = tmp_path / "two.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    assert submodule("cli").execute([str(path), "--objects", "Chain ", "--output", str(out), "--quiet"]) == 0
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    assert bpy.data.objects["Chain "].data.shape_keys is not None
    assert bpy.data.objects["Chain"].data.shape_keys is None
    names = submodule("cli").object_names
    assert names(["Chain , Chain"], known={"Chain ", "Chain"}) == ["Chain ", "Chain"]
    assert names(["Chain , Chain"]) == ["Chain"]


def test_an_object_named_twice_is_baked_once(chain_blend, tmp_path):
    # Found by tests/fuzz_bake.py: "--objects Chain --objects Chain" baked it twice into one
    # PC2 file and failed halfway, after the first had replaced the previous cache.
    assert submodule("cli").object_names(["Chain", "Chain,Chain"]) == ["Chain"]
    out = tmp_path / "x.blend"
    assert submodule("cli").execute([str(chain_blend), "--objects", "Chain", "--objects", "Chain",
                                     "--mode", "pc2", "--output", str(out), "--quiet"]) == 0
    assert out.is_file() and (tmp_path / "Chain.pc2").is_file()
    assert [p.name for p in tmp_path.iterdir() if ".part" in p.name] == []


def test_overrides_do_not_touch_the_settings(chain_blend):
    """The override dict changes the bake, never obj.mass_spring."""
    bake = submodule("bake")
    bpy.ops.wm.open_mainfile(filepath=str(chain_blend))
    chain = bpy.data.objects["Chain"]
    stored = (chain.mass_spring.substeps, chain.mass_spring.integrator)
    assert stored == (4, "GENERALIZED_ALPHA")
    overrides = {"substeps": 2, "integrator": "IMPLICIT_EULER", "use_scene_frame_range": False,
                 "frame_start": 1, "frame_end": 6}
    result = bake.bake_object(bpy.context.scene, chain, overrides=overrides)
    assert (result.frame_start, result.frame_end) == (1, 6)
    assert (chain.mass_spring.substeps, chain.mass_spring.integrator) == stored
    settings = bake.simulation_settings(bpy.context.scene, chain, overrides)
    assert (settings.substeps, settings.integrator) == (2, "IMPLICIT_EULER")
    with pytest.raises(ValueError, match="unknown Mass–Spring setting"):
        bake.bake_object(bpy.context.scene, chain, overrides={"substep": 2})


@pytest.mark.parametrize("accuracy", [None, "0"])
def test_the_bake_report_has_one_row_per_frame_with_the_runs_own_figures(
        chain_blend, tmp_path, accuracy):
    """--report writes exactly the documented columns, one row per simulated frame; its
    figures are the in-process bake's own report. Under error control (the default) a
    frame takes at least its substeps; with --accuracy 0 exactly its substeps."""
    import csv
    report = tmp_path / "report.csv"
    argv = [str(chain_blend), "--output", str(tmp_path / "out.blend"), "--quiet",
            "--report", str(report)]
    if accuracy is not None:
        argv += ["--accuracy", accuracy]
    assert submodule("cli").execute(argv) == 0
    with open(report, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["object", "frame", "substeps", "newton_iterations", "linear_iterations",
                       "energy", "max_constraint_error", "ms"]
    assert [int(r[1]) for r in rows[1:]] == list(range(2, 13))
    assert {r[0] for r in rows[1:]} == {"Chain"}

    bpy.ops.wm.open_mainfile(filepath=str(chain_blend))
    overrides = None if accuracy is None else {"accuracy": float(accuracy)}
    chain = bpy.data.objects["Chain"]
    result = submodule("bake").bake_object(bpy.context.scene, chain, overrides=overrides)
    expected = result.report
    # The object keeps the totals for the panel.
    totals = submodule("writers").bake_record(chain)["totals"]
    assert totals == pytest.approx(result.totals())
    assert totals["substeps"] == sum(frame.substeps for frame in expected)
    for row, frame in zip(rows[1:], expected):
        assert int(row[2]) == frame.substeps and int(row[3]) == frame.newton_iterations
        assert int(row[4]) == frame.linear_iterations
        assert float(row[5]) == pytest.approx(frame.energy, rel=1e-8)
        assert float(row[7]) > 0
    substeps = [frame.substeps for frame in expected]
    if accuracy is None:
        assert min(substeps) >= 4
    else:
        assert substeps == [4] * 11
