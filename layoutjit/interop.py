"""Interop with other array libraries: DLPack objects numpy cannot read directly.

numpy's ``from_dlpack`` has no bfloat16, so a PyTorch bfloat16 tensor is viewed
through its 16-bit integer reinterpretation (no copy); when ``ml_dtypes`` is
installed the words are then seen as ``ml_dtypes.bfloat16``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import BFLOAT16


def dlpack_fallback(x: Any) -> np.ndarray | None:
    """A zero-copy numpy view of a DLPack object numpy refused, or None."""
    if type(x).__module__.split(".")[0] == "torch":
        import torch

        if x.dtype == torch.bfloat16:
            words = np.from_dlpack(x.detach().view(torch.int16)).view(np.uint16)
            return words.view(BFLOAT16) if BFLOAT16 is not None else words
    return None
