"""layoutjit: compiled memory-layout reorders with oneDNN's semantics."""
from .desc import MemoryDesc
from .dtypes import DataType, as_dtype
from .errors import LayoutError, Unimplemented

__version__ = "0.1.0"
