"""Mass–Spring Baker: turn a mesh into masses, springs and rigid rods, simulate it with the
compiled ``mass_spring`` core and bake the motion into shape keys or a PC2 cache.

Where things live:
    properties.py   obj.mass_spring settings
    mesh_arrays.py  Blender mesh → numpy arrays
    simulation.py   arrays → core system → positions per frame (no bpy)
    writers.py      positions → shape keys / PC2 + Mesh Cache; Free Bake
    bake.py         the bake used by operators and headless scripts
    live.py         Live Preview: the simulation plays with the timeline
    cli.py          the headless command: blender -c mass_spring_bake scene.blend ...
    operators.py    Bake (modal), Free Bake, mark rigid / rope edges
    ui.py           Properties ▸ Physics panel
    overlay.py      viewport drawing of rigid / rope edges
    add_menu.py     Add ▸ Mesh ▸ Mass–Spring: the seeds' structures as meshes
    module_exit.py  a clean exit from Blender 4.2's Python module
"""

import bpy

from . import add_menu, cli, live, module_exit, operators, overlay, properties, ui


class MassSpringPreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    show_edge_marks: bpy.props.BoolProperty(
        name="Show Edge Marks",
        description="Draw rod (rigid) edges blue and rope edges brown in the 3D viewport for the "
                    "selected objects",
        default=True,
    )

    def draw(self, context):
        self.layout.prop(self, "show_edge_marks")


_modules = (properties, operators, ui, overlay, add_menu, cli, live)


def register():
    module_exit.install()  # before the settings' update callbacks exist (module_exit.py)
    bpy.utils.register_class(MassSpringPreferences)
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
    bpy.utils.unregister_class(MassSpringPreferences)
