"""One palette for the parts of a structure, shared by the viewport overlay and the
rendered tubes and balls (scripts/scenes.py), so a rod is the same blue everywhere.

Colours are linear RGB, as materials take them; `display` converts one for drawing in the
viewport, whose shaders take display (sRGB) values.
"""

SPRING = (0.85, 0.55, 0.10)  # orange
ROD = (0.10, 0.25, 0.65)  # blue
ROPE = (0.55, 0.45, 0.35)  # brown
MASS = (0.75, 0.08, 0.06)  # red
PIN = (0.08, 0.08, 0.08)  # black


def display(linear_rgb, alpha: float = 1.0) -> tuple:
    """The sRGB display value of a linear colour, with alpha."""
    def encode(c: float) -> float:
        return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055
    return (*(encode(c) for c in linear_rgb), alpha)
