"""Per-object settings ``obj.mass_spring`` (saved in the .blend).

The property names are an interface (docs/architecture.md §2): scripts set them directly.
"""

import bpy
from bpy.props import (
    BoolProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)


def _blend_relative_path_options() -> dict:
    """A file path setting declares that it may start with '//' (relative to the .blend)
    where Blender has the option PATH_SUPPORTS_BLEND_RELATIVE; Blenders without it reject
    the option, so it is passed only where it exists."""
    if "is_path_supports_blend_relative" in bpy.types.Property.bl_rna.properties:
        return {"options": {'PATH_SUPPORTS_BLEND_RELATIVE'}}
    return {}


_BLEND_RELATIVE = _blend_relative_path_options()

# Blender's own limit on frame numbers (MAXFRAME): the one bound on baked frames, for the
# settings, the headless options and the bake's check of files saved before it existed
# (tests/test_addon_safety.py).
MAX_FRAME = 1048574


def _integrator_items() -> list:
    """The core's integrator table (mass_spring.INTEGRATOR_INFO) as enum items. The
    identifier is the core's name in capitals: .blend files store it."""
    try:
        import mass_spring
    except ImportError:  # a bake says how to install the core (simulation.import_core)
        return [("GENERALIZED_ALPHA", "Generalized-α", "")]
    return [(info.name.upper(), info.label, info.description)
            for info in mass_spring.INTEGRATOR_INFO]


INTEGRATOR_ITEMS = _integrator_items()

OUTPUT_ITEMS = [
    ("SHAPE_KEYS", "Shape Keys",
     "One shape key per frame, switched by keyframes: stored inside the .blend"),
    ("PC2", "PC2 File",
     "A PC2 point cache read by a Mesh Cache modifier: compact for big meshes, "
     "but the file must travel with the .blend"),
]


class MassSpringSettings(bpy.types.PropertyGroup):
    enabled: BoolProperty(
        name="Mass–Spring",
        description="Simulate this object as masses (vertices), springs (edges) and rigid rods "
                    "(edges marked rigid) when baking",
        default=False,
    )
    total_mass: FloatProperty(
        name="Total Mass",
        description="Mass of the whole object in kg, spread evenly over the vertices "
                    "(or by the weights of the mass vertex group)",
        default=1.0, min=1e-9, soft_max=1000.0, unit='MASS', precision=3,
    )
    mass_group: StringProperty(
        name="Mass Group",
        description="Optional vertex group: each vertex gets mass in proportion to its weight. "
                    "Empty: every vertex gets the same mass",
        default="",
    )
    pin_group: StringProperty(
        name="Pin Group",
        description="Vertex group of pinned vertices (weight above 0.5). Pinned vertices don't "
                    "simulate: they follow the object's animated transform, so animate the "
                    "object to move the pins",
        default="",
    )
    stiffness: FloatProperty(
        name="Stiffness",
        description="Spring constant of every edge in N/m (force per metre of stretch)",
        default=100.0, min=0.0, soft_max=1e5, precision=2,
    )
    damping: FloatProperty(
        name="Damping",
        description="Dashpot along every spring in N·s/m: damps stretching motion",
        default=0.1, min=0.0, soft_max=100.0, precision=3,
    )
    shear_stiffness: FloatProperty(
        name="Shear Stiffness",
        description="Spring constant in N/m of extra springs across both diagonals of every "
                    "quad face, which keep a subdivided plane from shearing like a net. "
                    "0: only the mesh's edges are springs",
        default=0.0, min=0.0, soft_max=1e5, precision=2,
    )
    bending_model: EnumProperty(
        name="Bending",
        description="How the structure resists folding",
        items=[
            ('ANGULAR', "Angular",
             "Resists the angle of every fold: across every edge two faces share (a sheet) and "
             "where two edges of no face meet (a wire), with the flexural rigidity below. "
             "Rest angles are the modelled shape"),
            ('LINEAR', "Linear",
             "Springs across every edge shared by two faces (Blender's linear model): they "
             "resist large folds, but not a small fold of a flat sheet"),
        ],
        default='ANGULAR',
    )
    bending_rigidity: FloatProperty(
        name="Bending Rigidity",
        description="Flexural rigidity of the angular model: D in N·m for sheets (per unit "
                    "width; woven cotton 1e-6 to 1e-5, 1 mm of steel about 20), EI in N·m² for "
                    "wires (a steel wire of 1 mm diameter about 0.01). 0: no bending",
        default=0.0, min=0.0, soft_max=100.0, precision=7, step=0.001,
    )
    bending_stiffness: FloatProperty(
        name="Bending Stiffness",
        description="Linear model: spring constant in N/m of extra springs across every edge "
                    "shared by two faces (each vertex to the vertices beyond its neighbours), "
                    "which make a sheet fold like cloth instead of crumpling like a net. 0: none",
        default=0.0, min=0.0, soft_max=1e5, precision=2,
    )
    stiffness_group: StringProperty(
        name="Stiffness Group",
        description="Optional vertex group scaling the stiffness of the edges and shear springs: "
                    "each spring takes the mean weight of its two vertices (as Cloth's property "
                    "weights; a vertex outside the group weighs 0). Empty: the same everywhere",
        default="",
    )
    bending_group: StringProperty(
        name="Bending Group",
        description="Optional vertex group scaling the bending: each hinge, wire joint or "
                    "bending spring takes the mean weight of its vertices (a stiff collar on a "
                    "soft shirt; a vertex outside the group weighs 0). Empty: the same everywhere",
        default="",
    )
    damping_group: StringProperty(
        name="Damping Group",
        description="Optional vertex group scaling the damping: each spring takes the mean "
                    "weight of its two vertices (a vertex outside the group weighs 0). Empty: "
                    "the same everywhere",
        default="",
    )
    stiffness_attribute: StringProperty(
        name="Stiffness Scale",
        description="Optional float edge attribute multiplying the stiffness per edge "
                    "(e.g. 2 = twice as stiff). Empty: every edge has the same stiffness",
        default="",
    )
    use_gravity: BoolProperty(
        name="Gravity",
        description="Apply the scene's gravity (Scene ▸ Gravity, including its on/off switch)",
        default=True,
    )
    initial_velocity: FloatVectorProperty(
        name="Initial Velocity",
        description="Linear velocity of every vertex at the first frame, world space, m/s",
        size=3, default=(0.0, 0.0, 0.0), subtype='VELOCITY', unit='VELOCITY',
    )
    initial_angular_velocity: FloatVectorProperty(
        name="Initial Angular Velocity",
        description="Spin at the first frame about the object's origin, world axes, in rad/s "
                    "(e.g. Z = 6.28 turns once per second about the vertical)",
        size=3, default=(0.0, 0.0, 0.0), subtype='XYZ',
    )
    integrator: EnumProperty(
        name="Integrator",
        description="Time integration method of the solver",
        items=INTEGRATOR_ITEMS,
        default="GENERALIZED_ALPHA",
    )
    rho_inf: FloatProperty(
        name="ρ∞",
        description="Generalized-α spectral radius at infinity: 1 keeps all energy, lower "
                    "values damp high-frequency jitter (0 damps most). Above 0.5, cloth "
                    "falling into folds can gain energy at 5 substeps per frame",
        # 0.5, not the core's 0.8: a sheet falling into folds at 5 substeps per frame gains
        # energy at 0.8, not at 0.5 (tests/test_core_newton.py, test_crumpling_sheet_*);
        # a swinging pendulum keeps its energy within 1e-3 m g L at both
        # (tests/test_validate.py, test_pendulum_keeps_its_rod).
        default=0.5, min=0.0, max=1.0,
    )
    substeps: IntProperty(
        name="Substeps",
        description="Integrator steps per frame: with Accuracy, the fewest (steps get "
                    "shorter where the motion needs it); without, exactly this many",
        default=5, min=1, soft_max=100,
    )
    accuracy: FloatProperty(
        name="Accuracy",
        description="Error control: the local error each step may make, as a fraction of "
                    "the mean edge length, or of 1/40 of the object's size for meshes divided "
                    "more finely (smaller is more accurate and slower). 0: fixed steps, "
                    "exactly Substeps per frame. The implicit integrators only",
        # Error control is the default: it is faster than fixed steps on every structure
        # measured (docs/performance.md) and keeps folding sheets and ropes from gaining
        # energy (tests/test_core_error_control.py).
        default=0.01, min=0.0, max=0.5, soft_min=1e-4, precision=4, step=0.1,
    )
    use_collisions: BoolProperty(
        name="Collisions",
        description="Collide with every mesh object that has Physics ▸ Collision and is "
                    "enabled in the view layer, static, animated or deforming: masses keep "
                    "its Thickness Outer from its surface and slide with the Mass–Spring "
                    "friction set in its Collision panel. For the structure against itself, "
                    "see Self Collision",
        default=True,
    )
    self_collision: BoolProperty(
        name="Self Collision",
        description="Keep the structure from passing through itself: faces, and edges of no "
                    "face (ropes, chains, nets), keep the Distance below apart wherever they "
                    "share no vertex. Costs time where parts come close",
        default=False,
    )
    self_collision_distance: FloatProperty(
        name="Distance",
        description="How far apart parts of the structure keep (m, in world space; like "
                    "Cloth's self-collision distance). 0: automatic, a quarter of the median "
                    "edge length, less where the mesh as modelled has parts closer, or "
                    "another object baked with it comes closer (at most half of either gap). "
                    "At least a thousandth of the median edge",
        default=0.0, min=0.0, soft_max=1.0, unit='LENGTH', precision=4, step=0.1,
    )
    self_friction: FloatProperty(
        name="Friction",
        description="Coulomb friction coefficient between parts of the structure that touch "
                    "(0: slippery as ice; 0.3: cloth on cloth)",
        default=0.3, min=0.0, soft_max=2.0, max=1000.0,
    )
    use_scene_frame_range: BoolProperty(
        name="Scene Frame Range",
        description="Bake the scene's frame range; off: use the start and end below",
        default=True,
    )
    frame_start: IntProperty(
        name="Start",
        description="First baked frame: the mesh as modelled is the state at this frame",
        default=1, min=-MAX_FRAME, max=MAX_FRAME,
    )
    frame_end: IntProperty(
        name="End",
        description="Last baked frame",
        default=250, min=-MAX_FRAME, max=MAX_FRAME,
    )
    output: EnumProperty(
        name="Output",
        description="Where the bake is stored",
        items=OUTPUT_ITEMS,
        default="SHAPE_KEYS",
    )
    pc2_path: StringProperty(
        name="PC2 File",
        description="File written for PC2 output; '//' means the folder of the .blend. "
                    "Empty: '//<object name>.pc2'",
        default="", subtype='FILE_PATH', **_BLEND_RELATIVE,
    )
    show_forces: BoolProperty(
        name="Show Forces",
        description="Colour the baked structure by the force in each edge: blue pushes, "
                    "white carries nothing, red pulls (up to the bake's largest force). Adds "
                    "the modifier 'Mass–Spring Force Colours' and the material 'Mass–Spring "
                    "Forces' (edges without faces become tubes; Workbench shows the colours "
                    "with its colour type Attribute); off removes them. The numbers are always on the baked "
                    "mesh as the edge attributes ms_force (N) and ms_strain. Forces along edges "
                    "only: angular bending acts across edges (a moment, not a pull) and is not "
                    "shown",
        default=False,
        update=lambda settings, context: _show_forces_changed(settings, context),
    )
    live_preview: BoolProperty(
        name="Live Preview",
        description="Simulate while the timeline plays or is scrubbed, no bake needed: each "
                    "frame change computes the frames up to it, computed frames are kept "
                    "(memory and a file in Blender's temporary folder) and shown through the "
                    "modifier 'Mass–Spring Live Preview'; the mesh stays as modelled. A change "
                    "of a setting, the mesh, its groups or the colliders computes again. Bake "
                    "stores what the preview computed and switches it off",
        default=False,
        options=set(),  # not animatable
        update=lambda settings, context: _live_preview_changed(settings, context),
    )


def _live_preview_changed(settings, context) -> None:
    from . import live
    live.live_preview_changed(settings, context)


def _show_forces_changed(settings, context) -> None:
    from . import forces
    obj = settings.id_data
    if settings.show_forces and forces.has_data(obj):
        forces.show(obj)
    elif not settings.show_forces:
        forces.hide(obj)


class MassSpringCollisionSettings(bpy.types.PropertyGroup):
    """``obj.mass_spring_collision``: how a Collision object acts on Mass–Spring structures."""

    friction: FloatProperty(
        name="Mass–Spring Friction",
        description="Coulomb friction coefficient between this collider and Mass–Spring "
                    "structures: a mass slides once the force along the surface exceeds "
                    "friction × the force pressing it on (0: ice; 0.3: wood on wood; above "
                    "tan of a slope's angle, nothing slides down it)",
        default=0.3, min=0.0, soft_max=2.0, max=1000.0,
    )


classes = (MassSpringSettings, MassSpringCollisionSettings)


@bpy.app.handlers.persistent
def write_older_bending_model(_path=None) -> None:
    """On opening a file, an object set up before there was a bending model that has
    bending springs gets 'LINEAR' written out: the panel then shows the model the bake
    uses, and copying or resetting the field acts on that (bending_model below)."""
    for obj in bpy.data.objects:
        settings = getattr(obj, "mass_spring", None)
        if obj.library is None and settings is not None and bending_model(settings) != settings.bending_model:
            settings.bending_model = bending_model(settings)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.app.handlers.load_post.append(write_older_bending_model)
    bpy.types.Object.mass_spring = PointerProperty(
        type=MassSpringSettings,
        name="Mass–Spring",
        description="Mass–Spring Baker settings of this object",
    )
    bpy.types.Object.mass_spring_collision = PointerProperty(
        type=MassSpringCollisionSettings,
        name="Mass–Spring Collision",
        description="How this Collision object acts on Mass–Spring structures",
    )


def unregister():
    if write_older_bending_model in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(write_older_bending_model)
    del bpy.types.Object.mass_spring_collision
    del bpy.types.Object.mass_spring
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)


def bending_model(settings) -> str:
    """The bending model a bake uses: the panel's, except for an object set up before there
    was a choice (the model never set) that has bending springs: it keeps them, as it did
    (tests/test_bending.py, test_an_older_file_keeps_its_bending_springs). Opening a file
    writes that out (write_older_bending_model); this rule holds where no file was opened."""
    if settings.is_property_set("bending_model") or settings.bending_stiffness <= 0:
        return settings.bending_model
    return 'LINEAR'
