"""The two public exception types.

Every error layoutjit raises for bad input is a :class:`LayoutError` (a
``ValueError``), so callers can catch one type. :class:`Unimplemented` marks
requests that are valid but that oneDNN also refuses as "unimplemented"
(e.g. a submemory whose offset is not a multiple of the block).
"""

from __future__ import annotations


class LayoutError(ValueError):
    """Invalid arguments: a bad descriptor, buffer, attribute or request.

    >>> import layoutjit as lj
    >>> try:
    ...     lj.MemoryDesc([2, 3], "f32", "nchw")
    ... except lj.LayoutError as e:
    ...     print("refused")
    refused
    """


class Unimplemented(LayoutError):
    """A valid request that oneDNN also refuses as unimplemented.

    >>> import layoutjit as lj
    >>> md = lj.MemoryDesc([2, 32, 4, 4], "f32", "nChw16c")
    >>> try:
    ...     md.submemory_desc([2, 8, 4, 4], [0, 8, 0, 0])
    ... except lj.Unimplemented:
    ...     print("unimplemented")
    unimplemented
    """
