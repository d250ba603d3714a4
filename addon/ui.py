"""Properties ▸ Physics panel, laid out like Cloth's: a header switch and sub-panels."""

import bpy

from . import colliders, live, writers
from .mesh_arrays import RIGID_ATTRIBUTE, ROPE_ATTRIBUTE
from .overlay import marked_edge_counts
from .properties import bending_model


class MassSpringPanelBase:
    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "physics"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.type == 'MESH'

    def settings_layout(self, context):
        """The panel's layout, split and greyed out like Cloth's while the switch is off,
        and the object's settings."""
        layout = self.layout
        settings = context.object.mass_spring
        layout.use_property_split = True
        layout.active = settings.enabled
        return layout, settings


class PHYSICS_PT_mass_spring(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Mass–Spring"

    def draw_header(self, context):
        self.layout.prop(context.object.mass_spring, "enabled", text="")

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        obj = context.object
        if not settings.enabled:
            layout.label(text="Tick the box to simulate this mesh", icon='INFO')
        record = writers.bake_record(obj)
        row = layout.row(align=True)
        row.scale_y = 1.3
        row.operator("mass_spring.bake", text="Bake" if record is None else "Bake Again", icon='PHYSICS')
        row.operator("mass_spring.free_bake", text="Free Bake", icon='TRASH')
        row = layout.row()
        row.prop(settings, "live_preview", icon='PLAY')
        if settings.live_preview:
            row.label(text=live.status(obj))
        if record is not None and record.get("output") == writers.DAMAGED:
            layout.label(text="The bake record is damaged: Free Bake removes it", icon='ERROR')
        elif record is not None:
            where = "shape keys" if record.get("output") == 'SHAPE_KEYS' else "PC2 + Mesh Cache"
            layout.label(text=f"Baked frames {record.get('frame_start')}–{record.get('frame_end')} "
                              f"into {where}", icon='CHECKMARK')
            totals = record.get("totals")
            if totals:
                layout.label(text=f"{totals['substeps']:,} steps, {totals['newton_iterations']:,} "
                                  f"Newton and {totals['linear_iterations']:,} linear iterations "
                                  f"in {totals['seconds']:.1f} s", icon='TIME')
            row = layout.row()
            row.prop(settings, "show_forces", icon='FORCE_FORCE')
            largest = (record.get("forces") or {}).get("range")
            if largest:
                row.label(text=f"largest |force| {largest:.4g} N")


class PHYSICS_PT_mass_spring_mass(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Masses"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        obj = context.object
        layout.prop(settings, "total_mass")
        layout.prop_search(settings, "mass_group", obj, "vertex_groups", text="Weight Group")
        layout.prop_search(settings, "pin_group", obj, "vertex_groups", text="Pin Group")


class PHYSICS_PT_mass_spring_springs(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Springs"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        obj = context.object
        layout.prop(settings, "stiffness")
        layout.prop_search(settings, "stiffness_group", obj, "vertex_groups", text="Stiffness Group")
        layout.prop_search(settings, "stiffness_attribute", obj.data, "attributes", text="Stiffness Scale")
        layout.prop(settings, "damping")
        layout.prop_search(settings, "damping_group", obj, "vertex_groups", text="Damping Group")
        layout.prop(settings, "shear_stiffness")
        layout.prop(settings, "bending_model")
        if bending_model(settings) == 'LINEAR':
            if settings.bending_model != 'LINEAR':
                layout.label(text="Linear: bending springs set up before there was a choice")
            layout.prop(settings, "bending_stiffness")
        else:
            layout.prop(settings, "bending_rigidity")
        layout.prop_search(settings, "bending_group", obj, "vertex_groups", text="Bending Group")


class PHYSICS_PT_mass_spring_marks(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Rigid and Rope Edges"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw(self, context):
        layout = self.layout
        obj = context.object
        layout.active = obj.mass_spring.enabled
        counts = marked_edge_counts(obj)
        col = layout.column(align=True)
        col.label(text=f"Rigid rods: {counts.get(RIGID_ATTRIBUTE, 0)} edges (drawn blue)", icon='LINKED')
        col.label(text=f"Rope links: {counts.get(ROPE_ATTRIBUTE, 0)} edges (drawn brown)", icon='CURVE_PATH')
        if obj.mode != 'EDIT':
            layout.label(text="In Edit Mode, select edges to mark them", icon='INFO')
            return
        grid = layout.grid_flow(columns=2, align=True)
        grid.operator("mass_spring.mark_edges", text="Mark Rigid").mark = 'RIGID'
        op = grid.operator("mass_spring.mark_edges", text="Clear Rigid")
        op.mark, op.clear = 'RIGID', True
        grid.operator("mass_spring.mark_edges", text="Mark Rope").mark = 'ROPE'
        op = grid.operator("mass_spring.mark_edges", text="Clear Rope")
        op.mark, op.clear = 'ROPE', True


class PHYSICS_PT_mass_spring_velocity(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Initial Velocity"
    bl_parent_id = "PHYSICS_PT_mass_spring"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        layout.prop(settings, "initial_velocity", text="Linear")
        layout.prop(settings, "initial_angular_velocity", text="Angular (rad/s)")


class PHYSICS_PT_mass_spring_solver(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Solver"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        scene = context.scene
        layout.prop(settings, "integrator")
        row = layout.row()
        row.active = settings.integrator == 'GENERALIZED_ALPHA'
        row.prop(settings, "rho_inf")
        layout.prop(settings, "accuracy")
        layout.prop(settings, "substeps", text="Min Substeps" if settings.accuracy > 0 else "Substeps")
        fps = scene.render.fps / scene.render.fps_base
        longest = "at most " if settings.accuracy > 0 else ""
        layout.label(text=f"Step: {longest}1/{fps:g} s per frame ÷ {settings.substeps}")
        row = layout.row()
        row.prop(settings, "use_gravity")
        if settings.use_gravity and not scene.use_gravity:
            layout.label(text="Gravity is off in the scene settings", icon='INFO')


class PHYSICS_PT_mass_spring_collisions(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Collisions"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw_header(self, context):
        self.layout.prop(context.object.mass_spring, "use_collisions", text="")

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        layout.active = settings.enabled and settings.use_collisions
        # The view layer's depsgraph as it is: drawing must not start an evaluation.
        found = colliders.scene_colliders(context.scene, context.object,
                                          context.view_layer.depsgraph)
        if found:
            names = ", ".join(obj.name for obj in found[:4]) + (" …" if len(found) > 4 else "")
            layout.label(text=f"With {len(found)}: {names}", icon='MOD_PHYSICS')
        else:
            layout.label(text="No Collision objects in the scene", icon='INFO')


class PHYSICS_PT_mass_spring_self_collision(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Self Collision"
    bl_parent_id = "PHYSICS_PT_mass_spring_collisions"

    def draw_header(self, context):
        self.layout.prop(context.object.mass_spring, "self_collision", text="")

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        layout.active = settings.enabled and settings.self_collision
        layout.prop(settings, "self_collision_distance", text="Distance (0: Auto)")
        layout.prop(settings, "self_friction")


def draw_collider_friction(self, context):
    """Our friction, in Blender's Collision panel of a collider."""
    obj = context.object
    if obj is None or obj.type != 'MESH' or not colliders.is_collider(obj):
        return
    layout = self.layout
    layout.use_property_split = True
    layout.prop(obj.mass_spring_collision, "friction")


class PHYSICS_PT_mass_spring_output(MassSpringPanelBase, bpy.types.Panel):
    bl_label = "Frame Range and Output"
    bl_parent_id = "PHYSICS_PT_mass_spring"

    def draw(self, context):
        layout, settings = self.settings_layout(context)
        layout.prop(settings, "use_scene_frame_range")
        col = layout.column(align=True)
        col.active = not settings.use_scene_frame_range
        col.prop(settings, "frame_start", text="Frame Start")
        col.prop(settings, "frame_end", text="End")
        layout.prop(settings, "output")
        if settings.output == 'PC2':
            layout.prop(settings, "pc2_path")


classes = (
    PHYSICS_PT_mass_spring,
    PHYSICS_PT_mass_spring_mass,
    PHYSICS_PT_mass_spring_springs,
    PHYSICS_PT_mass_spring_marks,
    PHYSICS_PT_mass_spring_velocity,
    PHYSICS_PT_mass_spring_solver,
    PHYSICS_PT_mass_spring_collisions,
    PHYSICS_PT_mass_spring_self_collision,
    PHYSICS_PT_mass_spring_output,
)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.PHYSICS_PT_collision.append(draw_collider_friction)


def unregister():
    bpy.types.PHYSICS_PT_collision.remove(draw_collider_friction)
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
