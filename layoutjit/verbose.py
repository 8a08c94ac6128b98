"""``LAYOUTJIT_VERBOSE=1``: one comma-separated line per compile and per run on stderr.

In the spirit of ``ONEDNN_VERBOSE``::

    layoutjit,<event>,<kind>,<src dtype:tag>,<dst dtype:tag>,<dims>,<attributes>,<ms>

event is ``compile`` (generated and compiled by Numba), ``disk load`` (machine
code loaded from the disk cache), ``cache hit`` (found in memory) or ``exec``.
Set it before importing layoutjit, or call ``set_verbose(True)``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

enabled: bool = os.environ.get("LAYOUTJIT_VERBOSE", "0") not in ("", "0", "false", "False", "no")


def set_verbose(on: bool = True) -> None:
    """Turn the verbose log on or off at run time."""
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
    dims = "x".join(str(d) for d in dst_md.dims)
    return f"layoutjit,{event},{kind},{_md_text(src_md)},{_md_text(dst_md)},{dims},{attrs},{ms:.4f}"


def emit(event: str, kind: str, src_md: Any, dst_md: Any, attrs: str, ms: float) -> None:
    print(line(event, kind, src_md, dst_md, attrs, ms), file=sys.stderr, flush=True)


def log_exec(kernel: Any, ms: float) -> None:
    attrs = kernel.attrs.describe() if kernel.attrs is not None else ""
    emit("exec", kernel.kind, kernel.src_md, kernel.dst_md, attrs, ms)
