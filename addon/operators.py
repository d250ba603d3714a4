"""Operators: Bake (modal with progress, or synchronous from scripts), Free Bake, edge marks."""

import time

import bmesh
import bpy
from bpy.props import BoolProperty, EnumProperty

from .bake import Batch, BakeError, SimulationThread, free_bake, has_bake, run_job
from .mesh_arrays import RIGID_ATTRIBUTE, ROPE_ATTRIBUTE
from .overlay import remember_marks

# Events that only move the view: let them through while a bake runs.
NAVIGATION_EVENTS = {
    'MOUSEMOVE', 'INBETWEEN_MOUSEMOVE', 'MIDDLEMOUSE', 'WHEELUPMOUSE', 'WHEELDOWNMOUSE',
    'TRACKPADPAN', 'TRACKPADZOOM', 'MOUSEROTATE', 'MOUSESMARTZOOM',
    'NDOF_MOTION', 'NDOF_BUTTON_MENU', 'NDOF_BUTTON_FIT',
}


def _report_results(operator, results) -> None:
    for result in results:
        _report_result(operator, result)


def objects_to_bake(context) -> list:
    """The active object, then the other selected mesh objects with Mass–Spring enabled:
    baked in one go (those with Self Collision on collide with each other)."""
    active = context.object
    others = [obj for obj in context.selected_objects
              if obj is not active and obj.type == 'MESH' and obj.mass_spring.enabled]
    return [active, *sorted(others, key=lambda obj: obj.name)]


def _report_result(operator, result) -> None:
    for warning in result.warnings:
        operator.report({'WARNING'}, warning)
    where = "shape keys" if result.output == 'SHAPE_KEYS' else f"PC2 file {result.pc2_file}"
    operator.report(
        {'INFO'},
        f"Baked '{result.object_name}' frames {result.frame_start}–{result.frame_end} into {where} "
        f"(simulation {result.simulate_seconds:.1f} s, writing {result.write_seconds:.2f} s)")


def _mesh_object_poll(cls, context, mode: str) -> bool:
    obj = context.object
    if obj is None or obj.type != 'MESH':
        cls.poll_message_set("Select a mesh object")
        return False
    if mode == 'OBJECT' and obj.mode == 'EDIT':
        cls.poll_message_set("Leave Edit Mode (Tab) first")
        return False
    if mode == 'EDIT' and obj.mode != 'EDIT':
        cls.poll_message_set("Enter Edit Mode (Tab) and select edges")
        return False
    return True


class MASS_SPRING_OT_bake(bpy.types.Operator):
    bl_idname = "mass_spring.bake"
    bl_label = "Bake Mass–Spring"
    bl_description = ("Simulate the active object's masses, springs and rods over the frame range "
                      "and store the motion (replaces a previous bake); with other Mass–Spring "
                      "objects selected, those too, in one go (with Self Collision on, they collide "
                      "with each other). Esc cancels")
    bl_options = {'REGISTER', 'UNDO'}

    _job = None
    _timer = None
    _thread = None  # the simulation of the current run (SimulationThread)
    _shown = None  # the progress and status text last shown

    @classmethod
    def poll(cls, context):
        return _mesh_object_poll(cls, context, 'OBJECT')

    def execute(self, context):
        """Synchronous bake (scripts, `bpy.ops.mass_spring.bake()`)."""
        try:
            batch = Batch(context.scene, objects_to_bake(context))
            for run in batch.runs:
                run_job(run)
            results = batch.finish()
        except BakeError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        _report_results(self, results)
        return {'FINISHED'}

    def invoke(self, context, event):
        if context.window is None or bpy.app.background:
            return self.execute(context)  # no event loop to drive a modal operator
        try:
            self._job = Batch(context.scene, objects_to_bake(context))
        except BakeError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self._timer = wm.event_timer_add(0.01, window=context.window)
        wm.modal_handler_add(self)
        self._show_status(context)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        if event.type == 'ESC' and event.value == 'PRESS':
            self._stop_thread()
            self._job.cancel()
            self._end(context)
            self.report({'INFO'}, "Mass–Spring bake cancelled: nothing was changed")
            return {'CANCELLED'}
        if event.type != 'TIMER' or event.is_repeat:
            # Block editing while baking (the mesh must not change under the simulation),
            # but let the user look around.
            return {'PASS_THROUGH'} if event.type in NAVIGATION_EVENTS else {'RUNNING_MODAL'}
        try:
            done = self._advance()
            if done:
                results = self._job.finish()
        except BakeError as ex:
            self._job.cancel()
            self._end(context)
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception:
            self._job.cancel()
            self._end(context)
            raise
        if not done:
            self._show_status(context)
            return {'RUNNING_MODAL'}
        self._end(context)
        _report_results(self, results)
        return {'FINISHED'}

    def cancel(self, context):
        # Called when Blender ends the modal operator itself (e.g. the file is closed).
        self._stop_thread()
        if self._job is not None:
            self._job.cancel()
        self._end(context)

    def _advance(self) -> bool:
        """One timer tick: what reads Blender's data here (Batch.prepare), the simulation
        in a thread (SimulationThread), so that the window stays responsive and Esc acts
        within a frame. True when every run is simulated."""
        if self._thread is not None:
            if self._thread.running:
                return False
            thread, self._thread = self._thread, None
            thread.result()  # a BakeError from the simulation, here
        if self._job.simulated:
            return True
        if self._job.prepare(time.perf_counter() + 0.1):
            self._thread = SimulationThread(self._job)
        return False

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _show_status(self, context):
        # Only what changed: the timer ticks every 10 ms while the thread simulates, and
        # each new text redraws the status bar.
        shown = (int(100 * self._job.fraction), self._job.status())
        if shown == self._shown:
            return
        self._shown = shown
        context.window_manager.progress_update(shown[0])
        if context.workspace is not None:
            context.workspace.status_text_set(shown[1])

    def _end(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)


class MASS_SPRING_OT_free_bake(bpy.types.Operator):
    bl_idname = "mass_spring.free_bake"
    bl_label = "Free Bake"
    bl_description = "Remove the baked shape keys or Mesh Cache modifier of the active object"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        if not _mesh_object_poll(cls, context, 'OBJECT'):
            return False
        if not has_bake(context.object):
            cls.poll_message_set("The active object has no Mass–Spring bake")
            return False
        return True

    def execute(self, context):
        try:
            free_bake(context.object)
        except BakeError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, f"Removed the Mass–Spring bake of '{context.object.name}'")
        return {'FINISHED'}


def _set_edge_marks_bmesh(mesh, name: str, other: str, clear: bool) -> int:
    bm = bmesh.from_edit_mesh(mesh)
    layers = bm.edges.layers.bool
    layer = layers.get(name)
    if layer is None:
        if clear:
            return 0
        layer = layers.new(name)
    other_layer = None if clear else layers.get(other)
    count = 0
    for edge in bm.edges:
        if edge.select:
            edge[layer] = not clear
            if other_layer is not None:
                edge[other_layer] = False  # rigid and rope exclude each other
            count += 1
    bmesh.update_edit_mesh(mesh, loop_triangles=False, destructive=False)
    return count


def _set_edge_marks_object_mode(obj, name: str, other: str, clear: bool) -> int:
    # Blender versions whose BMesh API has no boolean layers: write the attribute in
    # Object Mode and come back.
    import numpy as np
    bpy.ops.object.mode_set(mode='OBJECT')
    try:
        mesh = obj.data
        selected = np.zeros(len(mesh.edges), dtype=bool)
        mesh.edges.foreach_get("select", selected)
        attribute = mesh.attributes.get(name)
        if attribute is None:
            if clear:
                return 0
            attribute = mesh.attributes.new(name, 'BOOLEAN', 'EDGE')
        values = np.zeros(len(mesh.edges), dtype=bool)
        attribute.data.foreach_get("value", values)
        values[selected] = not clear
        attribute.data.foreach_set("value", values)
        other_attribute = mesh.attributes.get(other)
        if not clear and other_attribute is not None:
            other_attribute.data.foreach_get("value", values)
            values[selected] = False
            other_attribute.data.foreach_set("value", values)
        return int(selected.sum())
    finally:
        remember_marks(obj)
        bpy.ops.object.mode_set(mode='EDIT')


class MASS_SPRING_OT_mark_edges(bpy.types.Operator):
    bl_idname = "mass_spring.mark_edges"
    bl_label = "Mark Edges"
    bl_description = "Mark or clear the selected edges as rigid rods or rope links"
    bl_options = {'REGISTER', 'UNDO'}

    mark: EnumProperty(
        name="Mark",
        items=[
            ('RIGID', "Rigid", "Rigid rod: the edge keeps its length exactly (distance constraint)"),
            ('ROPE', "Rope", "Rope link: pulls when stretched, goes slack when compressed"),
        ],
        default='RIGID',
        description="Which mark to set or clear",
    )
    clear: BoolProperty(
        name="Clear",
        description="Remove the mark from the selected edges instead of setting it",
        default=False,
    )

    @classmethod
    def description(cls, context, properties):
        what = "rigid rods" if properties.mark == 'RIGID' else "rope links (tension only)"
        if properties.clear:
            return f"Make the selected edges ordinary springs again (clear the {what} mark)"
        return f"Mark the selected edges as {what}"

    @classmethod
    def poll(cls, context):
        return _mesh_object_poll(cls, context, 'EDIT')

    def execute(self, context):
        name, other = ((RIGID_ATTRIBUTE, ROPE_ATTRIBUTE) if self.mark == 'RIGID'
                       else (ROPE_ATTRIBUTE, RIGID_ATTRIBUTE))
        objects = [o for o in (context.objects_in_mode or [context.object]) if o.type == 'MESH']
        count = 0
        for obj in objects:
            if hasattr(bmesh.types.BMLayerAccessEdge, "bool"):
                count += _set_edge_marks_bmesh(obj.data, name, other, self.clear)
            else:
                count += _set_edge_marks_object_mode(obj, name, other, self.clear)
        verb = "Cleared" if self.clear else "Marked"
        self.report({'INFO'}, f"{verb} {self.mark.lower()} on {count} edge(s)")
        for area in context.screen.areas if context.screen else []:
            if area.type == 'VIEW_3D':
                area.tag_redraw()
        return {'FINISHED'}


def edge_menu(self, context):
    layout = self.layout
    layout.separator()
    layout.operator(MASS_SPRING_OT_mark_edges.bl_idname, text="Mark Rigid (Mass–Spring)").mark = 'RIGID'
    op = layout.operator(MASS_SPRING_OT_mark_edges.bl_idname, text="Clear Rigid (Mass–Spring)")
    op.mark, op.clear = 'RIGID', True
    layout.operator(MASS_SPRING_OT_mark_edges.bl_idname, text="Mark Rope (Mass–Spring)").mark = 'ROPE'
    op = layout.operator(MASS_SPRING_OT_mark_edges.bl_idname, text="Clear Rope (Mass–Spring)")
    op.mark, op.clear = 'ROPE', True


classes = (MASS_SPRING_OT_bake, MASS_SPRING_OT_free_bake, MASS_SPRING_OT_mark_edges)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.VIEW3D_MT_edit_mesh_edges.append(edge_menu)


def unregister():
    bpy.types.VIEW3D_MT_edit_mesh_edges.remove(edge_menu)
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
