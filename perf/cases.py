"""The benchmark cases.

A :class:`Case` is one reorder: logical dims, source and destination format
tags (oneDNN names or aliases), data types and a group. ``CASES`` lists them
all; ``quick`` marks the default subset (``python -m perf``), ``huge`` marks
cases that run only with ``--full`` even when ``--cases`` selects them.
``SMOKE_CASES`` are tiny versions used by ``--smoke`` and the tests.

Groups:

``transpose``  plain permutations (nchw<->nhwc, ncw<->nwc, ncdhw<->ndhwc, ab->ba)
``blocked``    plain <-> nChw8c/nChw16c, and blocked <-> blocked
``weights``    oihw/goihw -> OIhw16i16o, OIhw4i16o4i, gOIhw16i16o
``image``      C=3 inputs (nchw -> nChw16c, nhwc -> nchw)
``padding``    channel counts that are not multiples of the block (C=17, 100)
``convert``    f32 -> bf16 and f32 -> s8, mostly into blocked layouts
``small``      <= 64 KB, to measure per-call overhead
``custom``     a pair given on the command line (``--case DIMS:SRC:DST[:SDT[:DDT]]``)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DTYPE_SIZE = {"f32": 4, "bf16": 2, "f16": 2, "s8": 1, "u8": 1, "s32": 4}


@dataclass(frozen=True)
class Case:
    name: str
    dims: tuple[int, ...]
    src_tag: str
    dst_tag: str
    src_dtype: str = "f32"
    dst_dtype: str = "f32"
    group: str = "transpose"
    quick: bool = False
    huge: bool = False
    tags: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        d = asdict(self)
        d["dims"] = list(self.dims)
        d["tags"] = list(self.tags)
        return d


def _c(dims, src, dst, group, sdt="f32", ddt="f32", quick=False, huge=False, name=None):
    dims = tuple(dims)
    if name is None:
        conv = "" if sdt == ddt else f"_{sdt}-{ddt}"
        dt = sdt if sdt == ddt else ""
        name = f"{src}-{dst}_{'x'.join(map(str, dims))}" + (f"_{dt}" if dt else conv)
    return Case(name, dims, src, dst, sdt, ddt, group, quick, huge)


CASES: list[Case] = [
    # --- plain transposes ---------------------------------------------------------------
    _c((32, 256, 56, 56), "nchw", "nhwc", "transpose", quick=True),   # 102.8 MB
    _c((32, 256, 56, 56), "nhwc", "nchw", "transpose"),
    _c((8, 256, 56, 56), "nhwc", "nchw", "transpose", quick=True),    # 25.7 MB
    _c((8, 64, 112, 112), "nchw", "nhwc", "transpose"),
    _c((1, 512, 28, 28), "nchw", "nhwc", "transpose", quick=True),    # 1.6 MB
    _c((16, 128, 28, 28), "nhwc", "nchw", "transpose"),
    _c((64, 256, 128, 128), "nchw", "nhwc", "transpose", huge=True),  # 1 GiB
    _c((256, 1024, 7, 7), "nhwc", "nchw", "transpose"),               # 51 MB, rows of 49
    _c((128, 512, 14, 14), "nchw", "nhwc", "transpose"),              # 51 MB, planes of 196
    _c((32, 256, 56, 56), "nchw", "nhwc", "transpose", "bf16", "bf16"),  # 51 MB, 2-byte
    _c((64, 256, 56, 56), "nhwc", "nchw", "transpose", "s8", "s8"),   # 51 MB, 1-byte
    _c((32, 128, 1024), "ncw", "nwc", "transpose", quick=True),       # 16.8 MB
    _c((32, 1024, 128), "nwc", "ncw", "transpose"),
    _c((2, 64, 16, 56, 56), "ncdhw", "ndhwc", "transpose", quick=True),  # 25.7 MB
    _c((2, 64, 16, 56, 56), "ndhwc", "ncdhw", "transpose"),
    _c((8192, 4096), "ab", "ba", "transpose"),                        # 134 MB, power of two
    _c((4096, 4096), "ab", "ba", "transpose"),
    _c((2048, 2048), "ab", "ba", "transpose", quick=True),            # 16.8 MB, power of two
    _c((3001, 2999), "ab", "ba", "transpose", quick=True),            # 36 MB, odd
    _c((1000, 777), "ab", "ba", "transpose"),
    # --- blocked ------------------------------------------------------------------------
    _c((32, 256, 56, 56), "nchw", "nChw16c", "blocked"),
    _c((8, 256, 56, 56), "nchw", "nChw16c", "blocked", quick=True),
    _c((8, 256, 56, 56), "nChw16c", "nchw", "blocked", quick=True),
    _c((32, 256, 56, 56), "nChw16c", "nchw", "blocked"),
    _c((8, 256, 56, 56), "nchw", "nChw8c", "blocked"),
    _c((8, 256, 56, 56), "nChw8c", "nchw", "blocked"),
    _c((8, 256, 56, 56), "nhwc", "nChw16c", "blocked", quick=True),
    _c((8, 256, 56, 56), "nChw16c", "nhwc", "blocked"),
    _c((8, 256, 56, 56), "nChw8c", "nChw16c", "blocked", quick=True),
    _c((8, 256, 56, 56), "nChw16c", "nChw8c", "blocked"),
    _c((512, 512, 3, 3), "OIhw16i16o", "OIhw4i16o4i", "blocked", quick=True),
    _c((512, 512, 3, 3), "OIhw4i16o4i", "OIhw16i16o", "blocked"),
    # --- padding (C not a multiple of the block) ---------------------------------------
    _c((16, 17, 56, 56), "nchw", "nChw16c", "padding", quick=True),
    _c((16, 17, 56, 56), "nChw16c", "nchw", "padding"),
    _c((8, 100, 56, 56), "nhwc", "nChw16c", "padding", quick=True),
    _c((8, 100, 56, 56), "nChw16c", "nchw", "padding"),
    _c((8, 100, 56, 56), "nchw", "nChw8c", "padding"),
    # --- image inputs (C=3) -------------------------------------------------------------
    _c((8, 3, 224, 224), "nchw", "nChw16c", "image", quick=True),
    _c((32, 3, 224, 224), "nchw", "nChw16c", "image"),
    _c((8, 3, 224, 224), "nhwc", "nchw", "image", quick=True),
    _c((32, 3, 224, 224), "nhwc", "nchw", "image"),
    _c((32, 3, 224, 224), "nhwc", "nChw16c", "image"),                # 19 MB -> 103 MB
    _c((32, 3, 224, 224), "nhwc", "nChw8c", "image", "f32", "bf16"),
    # --- weights ------------------------------------------------------------------------
    _c((512, 512, 3, 3), "oihw", "OIhw16i16o", "weights", quick=True),  # 9.4 MB
    _c((256, 256, 3, 3), "oihw", "OIhw4i16o4i", "weights", quick=True),
    _c((512, 512, 3, 3), "oihw", "OIhw4i16o4i", "weights"),
    _c((32, 32, 32, 3, 3), "goihw", "gOIhw16i16o", "weights", quick=True),
    _c((100, 17, 3, 3), "oihw", "OIhw16i16o", "weights"),
    _c((1024, 1024, 1, 1), "oihw", "OIhw16i16o", "weights"),
    _c((2048, 2048, 3, 3), "oihw", "OIhw16i16o", "weights"),            # 151 MB
    # --- conversions --------------------------------------------------------------------
    _c((8, 256, 56, 56), "nchw", "nChw16c", "convert", "f32", "bf16", quick=True),
    _c((8, 256, 56, 56), "nchw", "nChw16c", "convert", "f32", "s8", quick=True),
    _c((32, 256, 56, 56), "nchw", "nChw16c", "convert", "f32", "bf16"),
    _c((8, 256, 56, 56), "nchw", "nhwc", "convert", "f32", "bf16"),
    _c((8, 256, 56, 56), "nhwc", "nhwc", "convert", "f32", "bf16"),
    _c((8, 256, 56, 56), "nhwc", "nhwc", "convert", "f32", "s8"),
    _c((512, 512, 3, 3), "oihw", "OIhw16i16o", "convert", "f32", "bf16"),
    _c((512, 512, 3, 3), "oihw", "OIhw4i16o4i", "convert", "f32", "s8"),
    _c((8, 100, 56, 56), "nchw", "nChw16c", "convert", "f32", "s8"),
    # --- small (<= 64 KB of traffic each side) ------------------------------------------
    _c((1, 16, 4, 4), "nchw", "nChw16c", "small", quick=True),          # 1 KB
    _c((1, 64, 4, 4), "nchw", "nhwc", "small"),                         # 4 KB
    _c((1, 64, 8, 8), "nchw", "nhwc", "small", quick=True),             # 16 KB
    _c((1, 64, 8, 8), "nchw", "nChw16c", "small", quick=True),
    _c((1, 64, 8, 8), "nChw16c", "nchw", "small"),
    _c((1, 17, 8, 8), "nchw", "nChw16c", "small"),
    _c((64, 64), "ab", "ba", "small"),
    _c((1, 256, 8, 8), "nchw", "nChw16c", "small"),                     # 64 KB
    _c((1, 128, 8, 8), "nchw", "nChw16c", "small", "f32", "bf16"),
]

# Tiny versions of a few shapes: --smoke runs these (and the tests use them).
SMOKE_CASES: list[Case] = [
    _c((2, 17, 5, 3), "nchw", "nChw16c", "padding", name="smoke_nchw-nChw16c_c17"),
    _c((2, 8, 3, 5), "nchw", "nhwc", "transpose", name="smoke_nchw-nhwc"),
    _c((20, 17, 3, 3), "oihw", "OIhw4i16o4i", "weights", name="smoke_oihw-OIhw4i16o4i"),
    _c((2, 17, 5, 3), "nchw", "nChw8c", "convert", "f32", "bf16", name="smoke_f32-bf16_nChw8c"),
    _c((2, 33, 3, 3), "nhwc", "nChw16c", "convert", "f32", "s8", name="smoke_f32-s8_nChw16c"),
    _c((13, 7), "ab", "ba", "transpose", name="smoke_ab-ba"),
]


def case_bytes(case: Case) -> tuple[int, int]:
    """(src, dst) buffer sizes in bytes, computed by layoutjit's MemoryDesc."""
    import layoutjit as lj

    s = lj.MemoryDesc(list(case.dims), case.src_dtype, case.src_tag)
    d = lj.MemoryDesc(list(case.dims), case.dst_dtype, case.dst_tag)
    return s.get_size(), d.get_size()


def select(*, mode: str = "quick", substring: str | None = None) -> list[Case]:
    """The cases of a run. ``mode`` is ``quick``, ``full`` or ``smoke``.

    ``substring`` (comma-separated alternatives, case-insensitive) filters by
    name or group. With a filter, quick mode searches all non-huge cases.
    """
    if mode == "smoke":
        pool = list(SMOKE_CASES)
    elif mode == "full":
        pool = list(CASES)
    elif substring:
        pool = [c for c in CASES if not c.huge]
    else:
        pool = [c for c in CASES if c.quick]
    if substring:
        keys = [k.strip().lower() for k in substring.split(",") if k.strip()]
        pool = [c for c in pool if any(k in c.name.lower() or k == c.group for k in keys)]
    return pool


def parse_spec(spec: str) -> Case:
    """A case from ``DIMS:SRC:DST[:SDT[:DDT]]``, e.g. ``8x256x56x56:nhwc:nChw16c:f32:bf16``.

    So a user can time their own pair with the harness's method; the tags and
    dtypes are checked by building the descriptors, so a typo fails here.
    """
    parts = spec.strip().split(":")
    if not 3 <= len(parts) <= 5:
        raise ValueError(f"case {spec!r}: expected DIMS:SRC:DST[:SDT[:DDT]]")
    try:
        dims = tuple(int(d) for d in parts[0].lower().split("x"))
    except ValueError:
        raise ValueError(f"case {spec!r}: dims {parts[0]!r} are not integers joined by 'x'") from None
    if not dims or min(dims) < 1:
        raise ValueError(f"case {spec!r}: dims must be positive")
    sdt = parts[3] if len(parts) > 3 else "f32"
    ddt = parts[4] if len(parts) > 4 else sdt
    case = _c(dims, parts[1], parts[2], "custom", sdt, ddt)
    try:
        case_bytes(case)
    except Exception as e:
        raise ValueError(f"case {spec!r}: {e}") from None
    return case
