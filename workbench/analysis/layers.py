"""Which layer a range belongs to, read from its name."""

from __future__ import annotations

import re

_LAYER_DEFAULT = r"(?:^|[^A-Za-z0-9])layers?[._\-]?(\d+)(?![0-9])"

def layer_pattern(pattern: str | None = None) -> re.Pattern:
    """Compiled layer pattern: its first group is the layer index.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn`` and
    ``decoder_layer_12`` to 3, 3, 3 and 12.
    """
    return re.compile(pattern or _LAYER_DEFAULT, re.IGNORECASE)
