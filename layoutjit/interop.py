"""Interop with other array libraries: what kernels accept as buffers, and bfloat16.

A kernel (and ``reorder``, ``to_layout``, ``from_layout``) views its buffers
without copying (``layoutjit.buffers.as_array``):

* numpy arrays (any dtype; ``ml_dtypes.bfloat16`` included),
* objects with the buffer protocol: ``bytearray``, ``memoryview``, ``array.array``, ...,
* objects with ``__array_interface__``,
* objects with ``__dlpack__`` on the host: PyTorch, JAX, CuPy's host arrays, ...
  (``numpy.from_dlpack``). A tensor passed as ``dst`` is written in place and
  returned as is.

numpy's ``from_dlpack`` has no bfloat16, so :func:`dlpack_fallback` views a
PyTorch bfloat16 tensor through its 16-bit integer reinterpretation (no copy);
when ``ml_dtypes`` is installed the words are then seen as ``ml_dtypes.bfloat16``.

Buffers must be C-contiguous (a strided tensor is refused with a LayoutError
rather than copied, since a copy would silently drop the output); logical
arrays given to ``to_layout`` may have any strides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import BFLOAT16

__all__ = ["dlpack_fallback"]


def dlpack_fallback(x: Any) -> np.ndarray | None:
    """A zero-copy numpy view of a DLPack object numpy refused, or None.

    Handles PyTorch bfloat16 tensors (viewed as ``ml_dtypes.bfloat16`` when
    available, else as uint16 words). Anything else gives None, and the caller
    reports numpy's error.

    >>> import numpy as np
    >>> dlpack_fallback(np.zeros(3)) is None
    True
    """
    if type(x).__module__.split(".")[0] == "torch":
        import torch

        if x.dtype == torch.bfloat16:
            words = np.from_dlpack(x.detach().view(torch.int16)).view(np.uint16)
            return words.view(BFLOAT16) if BFLOAT16 is not None else words
    return None
