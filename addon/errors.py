"""Exceptions shared by the bake pipeline (no bpy needed)."""


class BakeError(Exception):
    """A bake could not be done. The message says what is wrong and how to fix it.

    Whenever this is raised, nothing of the new bake has been written to the object.
    """


class BakeCancelled(Exception):
    """The user (or a ``should_cancel`` callback) stopped the bake; nothing was written."""
