"""layoutjit: compiled memory-layout reorders with oneDNN's semantics."""

__version__ = "0.1.0"

from .api import compile_eltwise, compile_reorder, from_layout, plain_desc, reorder, to_layout  # noqa: E402
from .buffers import aligned_empty  # noqa: E402
from .desc import MemoryDesc  # noqa: E402
from .dtypes import DataType, as_dtype  # noqa: E402
from .errors import LayoutError, Unimplemented  # noqa: E402
from .memory import Memory  # noqa: E402
from .pipeline import Pipeline  # noqa: E402
from .verbose import set_verbose  # noqa: E402

__all__ = [
    "DataType",
    "LayoutError",
    "Memory",
    "MemoryDesc",
    "Pipeline",
    "Unimplemented",
    "aligned_empty",
    "as_dtype",
    "compile_eltwise",
    "compile_reorder",
    "from_layout",
    "plain_desc",
    "reorder",
    "set_verbose",
    "to_layout",
    "__version__",
]
