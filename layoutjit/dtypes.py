"""Data types by oneDNN's names, their sizes and how numpy stores them.

A :class:`DataType` is a ``str`` (``"f32"``) that also knows its element size,
the numpy dtype that stores it in a buffer (bf16 and f16 are stored as 16-bit
words: Numba's CPU target has no float16) and, for integers, the range that
conversions saturate to.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import LayoutError

try:  # optional: bfloat16 as a real numpy dtype
    import ml_dtypes as _ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(_ml_dtypes.bfloat16)
except Exception:  # pragma: no cover - exercised only without ml_dtypes
    BFLOAT16 = None


class DataType(str):
    """One of oneDNN's data types; compares equal to its name.

    >>> from layoutjit.dtypes import as_dtype
    >>> t = as_dtype("bf16")
    >>> t == "bf16", t.size, t.storage
    (True, 2, dtype('uint16'))
    """

    size: int
    storage: np.dtype
    is_int: bool
    lowest: float
    highest: float
    onednn_id: int

    def __new__(cls, name: str, size: int, storage: Any, is_int: bool,
                lowest: float, highest: float, onednn_id: int) -> DataType:
        self = super().__new__(cls, name)
        self.size = size
        self.storage = np.dtype(storage)
        self.is_int = is_int
        self.lowest = lowest
        self.highest = highest
        self.onednn_id = onednn_id
        return self

    @property
    def name(self) -> str:
        """The oneDNN name as a plain ``str`` (``"bf16"``)."""
        return str.__str__(self)

    @property
    def value_dtype(self) -> np.dtype:
        """The numpy dtype of logical values (what ``from_layout`` returns)."""
        if self == "f16":
            return np.dtype(np.float16)
        if self == "bf16":
            return BFLOAT16 if BFLOAT16 is not None else np.dtype(np.uint16)
        return self.storage

    def __repr__(self) -> str:
        return f"DataType({str.__str__(self)!r})"

    def __reduce__(self) -> tuple:
        return (as_dtype, (str.__str__(self),))


_INF = float("inf")
F32 = DataType("f32", 4, np.float32, False, -_INF, _INF, 3)
F64 = DataType("f64", 8, np.float64, False, -_INF, _INF, 7)
F16 = DataType("f16", 2, np.uint16, False, -_INF, _INF, 1)
BF16 = DataType("bf16", 2, np.uint16, False, -_INF, _INF, 2)
S32 = DataType("s32", 4, np.int32, True, -2147483648.0, 2147483647.0, 4)
S8 = DataType("s8", 1, np.int8, True, -128.0, 127.0, 5)
U8 = DataType("u8", 1, np.uint8, True, 0.0, 255.0, 6)

ALL: tuple[DataType, ...] = (F32, F64, F16, BF16, S32, S8, U8)
BY_NAME: dict[str, DataType] = {str.__str__(t): t for t in ALL}

# numpy dtypes that name one of ours without ambiguity (uint16 could be f16 or bf16).
_BY_NUMPY: dict[np.dtype, DataType] = {
    np.dtype(np.float32): F32,
    np.dtype(np.float64): F64,
    np.dtype(np.float16): F16,
    np.dtype(np.int32): S32,
    np.dtype(np.int8): S8,
    np.dtype(np.uint8): U8,
}
if BFLOAT16 is not None:
    _BY_NUMPY[BFLOAT16] = BF16


def as_dtype(x: Any) -> DataType:
    """Turn a oneDNN name, a numpy dtype or a :class:`DataType` into a DataType.

    >>> as_dtype("s8"), as_dtype("float32")
    (DataType('s8'), DataType('f32'))
    """
    if isinstance(x, DataType):
        return x
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    try:
        nd = np.dtype(x)
    except Exception:
        raise LayoutError(
            f"dtype: {x!r} is not a data type; use one of {', '.join(BY_NAME)}"
        ) from None
    if nd in _BY_NUMPY:
        return _BY_NUMPY[nd]
    raise LayoutError(
        f"dtype: numpy dtype {nd} does not name a layoutjit data type without "
        f"ambiguity; use one of {', '.join(BY_NAME)}"
    )


def numpy_to_dtype(nd: np.dtype) -> DataType | None:
    """The DataType a numpy array of dtype ``nd`` holds, or None.

    >>> import numpy as np
    >>> numpy_to_dtype(np.float32), numpy_to_dtype(np.uint16)
    (DataType('f32'), None)
    """
    return _BY_NUMPY.get(np.dtype(nd))
