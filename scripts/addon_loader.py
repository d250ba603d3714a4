"""Register the Mass–Spring Baker add-on in this Blender process: the one loader of the
headless script, the examples, the benchmarks and the tests.

    package = register_addon("repo")    # the add-on's package module, registered
    bake = addon_module("bake")         # one of its modules

From the repository the ``addon/`` folder is imported as the package ``mass_spring_baker``
(the extension id), so its relative imports work as they do in an installed extension.
Works in a Blender binary (``blender -b --python ...``) and with the ``bpy`` module.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
ADDON_DIR = REPO / "addon"
PACKAGE = "mass_spring_baker"
SOURCES = ("auto", "installed", "repo")


class AddonUnavailable(RuntimeError):
    """The requested add-on cannot be loaded (not installed, or no addon/ folder)."""


def register_addon(source: str = "auto") -> ModuleType:
    """Make sure the add-on is registered; return its package module.

    source: "installed" (an installed extension, enabled if needed), "repo" (the
    repository's addon/ folder) or "auto" (installed if there is one, else the repo's).
    An add-on that is already registered is used whatever its source.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    package = _registered_package()
    if package is None and source != "repo":
        package = _enable_installed()
        if package is None and source == "installed":
            raise AddonUnavailable(
                "the Mass–Spring Baker extension is not installed in this Blender "
                "(install the zip from dist/, or use --addon repo)")
    if package is None:
        package = _register_from_repo()
    return package


def addon_module(name: str, source: str = "auto") -> ModuleType:
    """The add-on's module `name` (e.g. "bake"), the add-on registered first."""
    return importlib.import_module(f"{register_addon(source).__name__}.{name}")


def _loaded_package() -> ModuleType | None:
    for name, module in list(sys.modules.items()):
        if name == PACKAGE or name.endswith("." + PACKAGE):
            return module
    return None


def _registered_package() -> ModuleType | None:
    import bpy
    return _loaded_package() if hasattr(bpy.types.Object, "mass_spring") else None


def _enable_installed() -> ModuleType | None:
    import addon_utils
    for mod in addon_utils.modules():
        if mod.__name__.rsplit(".", 1)[-1] == PACKAGE:
            addon_utils.enable(mod.__name__, default_set=False, persistent=True)
            return _registered_package()
    return None


def _register_from_repo() -> ModuleType:
    package = sys.modules.get(PACKAGE)
    if package is None:
        init = ADDON_DIR / "__init__.py"
        if not init.exists():
            raise AddonUnavailable(f"the add-on is not installed and {init} does not exist")
        _ensure_core_importable()
        spec = importlib.util.spec_from_file_location(
            PACKAGE, init, submodule_search_locations=[str(ADDON_DIR)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
        # bpy 4.2 crashes and 4.5 hangs at exit while a Python-defined operator or panel is
        # still registered: unregister before Blender shuts down.
        atexit.register(_unregister_at_exit, package)
    package.register()
    return package


def _unregister_at_exit(package: ModuleType) -> None:
    import bpy
    if hasattr(bpy.types.Object, "mass_spring"):
        package.unregister()


def _ensure_core_importable() -> None:
    """Inside a Blender binary the core is not on sys.path: use the wheel that
    scripts/build_extension.py left in addon/wheels/ (extracted once)."""
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
