"""``LAYOUTJIT_VERBOSE=1``: one comma-separated line per compile and per run on stderr.

In the spirit of ``ONEDNN_VERBOSE``::

    layoutjit,<event>,<kind>,<src dtype:tag>,<dst dtype:tag>,<dims>,<attributes>,<ms>

event is ``compile`` (generated and compiled by Numba), ``disk load`` (machine
code loaded from the disk cache), ``cache hit`` (found in memory) or ``exec``
(one kernel call); kind is ``reorder`` or ``eltwise``. A layout without a tag
name is written ``strides=AxBxC[:blocks=16b][:off0=N]``. Attributes are
space-separated (``scales:src:0 post_ops:eltwise_relu:0:0``) and never contain
commas, so every line splits into exactly 8 fields. Set the variable before
importing layoutjit, or call ``set_verbose(True)``.

    $ LAYOUTJIT_VERBOSE=1 python -c "import layoutjit as lj; ..."
    layoutjit,compile,reorder,f32:nchw,f32:nChw16c,2x17x5x4,,291.8880
    layoutjit,exec,reorder,f32:nchw,f32:nChw16c,2x17x5x4,,0.0054
"""

from __future__ import annotations

import os
import sys
from typing import Any

enabled: bool = os.environ.get("LAYOUTJIT_VERBOSE", "0").strip().lower() not in ("", "0", "false", "no", "off")


def set_verbose(on: bool = True) -> None:
    """Turn the verbose log on or off at run time (overrides ``LAYOUTJIT_VERBOSE``).

    >>> import layoutjit as lj
    >>> lj.set_verbose(True)
    >>> lj.set_verbose(False)
    """
    global enabled
    enabled = bool(on)


def _md_text(md: Any) -> str:
    tag = md.tag
    if tag is None:
        tag = "strides=" + "x".join(str(s) for s in md.strides)
        if md.inner_blks:
            tag += ":blocks=" + "".join(f"{b}{'abcdefghijkl'[i]}" for b, i in zip(md.inner_blks, md.inner_idxs))
        if md.offset0:
            tag += f":off0={md.offset0}"
    return f"{md.dtype}:{tag}"


def line(event: str, kind: str, src_md: Any, dst_md: Any, attrs: str, ms: float) -> str:
    """One log line (without the newline).

    >>> import layoutjit as lj
    >>> s, d = lj.MemoryDesc([2, 3], "f32", "ab"), lj.MemoryDesc([2, 3], "bf16", "ba")
    >>> line("compile", "reorder", s, d, "", 12.5)
    'layoutjit,compile,reorder,f32:nc,bf16:cn,2x3,,12.5000'
    """
    dims = "x".join(str(d) for d in dst_md.dims)
    attrs = attrs.replace(",", ";")
    return f"layoutjit,{event},{kind},{_md_text(src_md)},{_md_text(dst_md)},{dims},{attrs},{ms:.4f}"


def emit(event: str, kind: str, src_md: Any, dst_md: Any, attrs: str, ms: float) -> None:
    """Print one log line to stderr (callers check ``enabled`` first)."""
    print(line(event, kind, src_md, dst_md, attrs, ms), file=sys.stderr, flush=True)


def log_exec(kernel: Any, ms: float) -> None:
    """Log one run of ``kernel`` that took ``ms`` milliseconds."""
    attrs = kernel.attrs.describe() if kernel.attrs is not None else ""
    emit("exec", kernel.kind, kernel.src_md, kernel.dst_md, attrs, ms)
