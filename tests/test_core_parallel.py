"""Parallel loops on any number of workers give the same bits (native/parallel/).

Loops are cut into chunks by their length alone and what the chunks produce is combined
in chunk order, so a bake on a 32-core farm node is the bake on a laptop.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets
from mass_spring.structure import build_system


@pytest.fixture
def restore_workers():
    before = ms.get_num_threads()
    yield
    ms.set_num_threads(before)


def folding_sheet(n: int, seconds: float = 0.25, **bending):
    """Flat, pinned by two corners of one side, under error control: it folds as it falls
    (multigrid, chunked smoother, chunked assembly and products; with angular bending,
    chunked hinges and merged stencil blocks)."""
    bending = bending or {"bending_stiffness": 5.0}
    sheet = presets.cloth(n, spacing=1.0 / (n - 1), pins=(0, n - 1), shear_stiffness=200.0, **bending)
    system = build_system(sheet)
    system.tolerance = 1e-2
    system.simulate(seconds, 6 if seconds >= 0.25 else 3)
    return system


def long_bridge():
    system = build_system(presets.bridge(width=120, height=10, spacing=0.1))
    system.simulate(0.2, 10)
    return system


def sheet_onto_a_thin_plate():
    """Thrown at 10 m/s onto a plate 1 cm thick with friction, 30 cm below: the contacts'
    search, their blocks in the multigrid and the crossing check at each step's end, all
    in chunks."""
    sheet = presets.cloth(33, spacing=1.0 / 32)
    sheet.velocities = np.tile([0.0, 0.0, -10.0], (len(sheet.positions), 1))
    system = build_system(sheet)
    system.tolerance = 1e-2
    plate = np.array([[-5, -5, -0.3], [5, -5, -0.3], [5, 5, -0.3], [-5, 5, -0.3]], float)
    system.set_colliders(plate, np.array([[0, 1, 2], [0, 2, 3]]), 0.01, 0.5)
    system.simulate(0.1, 3)
    assert np.array(system.positions)[:, 2].min() > -0.3 + 0.005  # landed, not through
    return system


# The 65^2 sheet for 0.1 s (4 steps, 23 Newton iterations): its loops are chunked from the
# first step, and under the sanitizers (scripts/test.sh) each run costs 24 times as much.
@pytest.mark.parametrize("make", [lambda: folding_sheet(65, 0.1), lambda: folding_sheet(33, bending_rigidity=1e-4),
                                  long_bridge, sheet_onto_a_thin_plate],
                         ids=["sheet65", "hinged_sheet33", "bridge", "sheet_onto_a_plate"])
def test_any_number_of_workers_gives_the_same_bits(make, restore_workers):
    runs = {}
    for workers in (1, 2, 3, 4):
        ms.set_num_threads(workers)
        system = make()
        assert len(system.masses) >= ms._core.SPLIT_MIN_MASSES  # the chunked loops ran
        runs[workers] = (np.array(system.positions), np.array(system.velocities),
                         system.stats["newton_iterations"], system.stats["steps"])
    for workers in (2, 3, 4):
        assert np.array_equal(runs[workers][0], runs[1][0]), f"{workers} workers: other positions"
        assert np.array_equal(runs[workers][1], runs[1][1]), f"{workers} workers: other velocities"
        assert runs[workers][2:] == runs[1][2:]
    assert np.abs(runs[1][1]).max() > 0.1  # it moved


def test_the_workers_can_be_set_and_read(restore_workers):
    ms.set_num_threads(3)
    assert ms.get_num_threads() == 3
    ms.set_num_threads(1)
    assert ms.get_num_threads() == 1
    for bad in (0, -2, 100000):
        with pytest.raises(ValueError, match="set_num_threads"):
            ms.set_num_threads(bad)
    assert ms.get_num_threads() == 1
    assert ms.usable_cores() >= 1


def _workers_in_fresh_process(value: str):
    env = dict(os.environ, MASS_SPRING_NUM_THREADS=value)
    return subprocess.run([sys.executable, "-c", "import mass_spring as ms; print(ms.get_num_threads())"],
                          env=env, capture_output=True, text=True)


def test_the_environment_sets_the_workers():
    done = _workers_in_fresh_process("3")
    assert done.returncode == 0 and done.stdout.strip() == "3"
    default = _workers_in_fresh_process("")
    assert default.stdout.strip() == str(ms.usable_cores())
    for bad in ("lots", "0", "2000"):
        done = _workers_in_fresh_process(bad)
        # named on stderr and left out: a bad variable must not stop Blender's add-on loading
        assert done.returncode == 0 and done.stdout.strip() == str(ms.usable_cores())
        assert f"MASS_SPRING_NUM_THREADS={bad!r} ignored" in done.stderr


def test_workers_stopped_before_they_ran_end():
    # Before: a worker made by one loop and stopped by set_num_threads before it first
    # ran waited for a loop that never came, and set_num_threads waited for it forever
    # (two threads running systems and setting workers hung the suite one run in three).
    import threading

    failures = []

    def restart():
        try:
            ms._core._restart_workers(2000)
        except Exception as ex:  # noqa: BLE001 (reported below)
            failures.append(ex)

    worker = threading.Thread(target=restart, daemon=True)
    worker.start()
    worker.join(timeout=30)  # the fixed pool takes well under a second
    assert not worker.is_alive(), "set_num_threads hung on a worker that had not started"
    assert not failures, failures
