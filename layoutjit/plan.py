"""The planner: meaning-preserving rewrites of a LoopIR, and the choices codegen follows.

Passes, in order (each is a function from IR to IR you can call and print):

1. ``drop_unit``   -- remove extent-1 nodes.
2. ``order_by_dst`` -- sort nodes by decreasing destination stride, so the
   destination is written contiguously (digits of one dim stay heaviest-first).
3. ``merge``       -- fuse adjacent nodes that are contiguous in every operand
   (oneDNN's ``prb_simplify``, HPTT's index fusion, CuTe's ``coalesce``).
4. ``choose_tile`` -- when the destination's unit-stride node (A) differs from the
   source's unit-stride node (B), the nest is a transpose: A x B is done by an
   R x V register tile (``simd.tile``) with R rows filling one destination line
   (or the block), V from the vector width and a shuffle network of at most 16
   registers (``MAX_TILE_NET_REGS``: spilling networks ran 2-2.5x slower), M micro
   tiles per macro tile so that ~32 source rows are read side by side (16 where they
   are a multiple of the L2 set period apart: ``_l2_aliased_rows``), and tiles
   reading part of each source line (16-/8-bit) read 8 KB a step
   (``PARTIAL_LINE_STEP_BYTES``); tiles that write whole blocks take enough
   columns to write whole lines (nchw -> nhwc C=3: 3x16 f32 with 32-byte vectors,
   ``BLOCK_TILE_LINES``); tails and zero padding become smaller or zero-filled tiles.
   Two digits can stand in for one: a short B whose source run continues into a
   node C gives columns over B x C placed by a table (``TileSpec.c``, oihw ->
   OIhw16i16o); a short A whose destination line continues into a node A2 gives
   a line of rows over A2 x A, each read from its own offset (``TileSpec.a2``,
   oihw -> OIhw4i16o4i). Runs contiguous on both sides are packed into lines
   (kind "lines"), one long run is streamed (kind "stream").
5. ``choose_parallel`` -- the outermost loops (the tile's macro loop included)
   are flattened into one job range split between threads; small problems run
   serially in one call.
6. Stores: non-temporal above half the LLC (read as at most 32 MiB: ``llc_bytes``; a
   third for register transposes) when
   one thread runs every job (``nt_min_bytes``), and above a threshold per micro-kernel
   kind when the jobs are split between threads (``nt_split_min_bytes``: 3/4 of the LLC
   for register transposes, the LLC for packed runs; the kernel reads its job range,
   ``Plan.nt_split``). From the one-thread threshold to the split one the kernel carries both
   store kinds and times them on its first calls at each thread count (``Plan.nt_tune``,
   ``store_choice.py``): which wins there depends on what else holds the cache, not
   on the layouts. Transposes with plain stores into 4-byte rows 1 KB
   or more apart read 256 rows per macro tile (``_wide_groups``; fewer where that
   would leave fewer than 4 jobs to share: ``_wide_group_tiles``); misaligned
   destination rows are realigned onto whole lines (``Plan.shifted``: in registers
   with a per-row carry, ``simd.tile_shift``; 1-byte ones of the source's type too), or,
   when they are short and follow one another (nhwc -> nchw 7x7), a block of V rows
   is staged and written as one run of whole lines (``Plan.panel``; with 32-byte
   vectors a job stages many blocks, up to a whole image, filled a strip of source
   rows at a time: ``wide_panel``) -- unless a
   panel would read more than ``PANEL_MAX_ROWS`` rows side by side, or many row
   groups of prefetchable rows make the realigning plan the better one
   (``_shift_better``). NT transposes that narrow their elements to a line of 64
   source rows, into whole-line rows that follow one another (f32 -> s8 nchw -> nhwc),
   take such wide panels too, filled 16 source rows at a time (``narrow_panel``).
   NT transposes whose source rows are short and
   follow one another read half a line of each (``_half_line_tiles``), and prefetch
   the next row group's source block, each tile its share, in order
   (``Plan.prefetch``); 16- and 8-bit NT transposes of long rows into long
   destination runs (nchw -> nhwc, C >= 256 bf16) take every row of A per macro
   tile, so that the destination is written in order (``_whole_runs``, measured with
   32-byte vectors only). The hardware fetches short-row blocks slowly when the tiles sweep
   them a column step at a time; so do runs packed several to a line (nhwc ->
   nChw8c, f32 -> bf16 into nChw16c) and realigned transposes (``shift_prefetch``;
   rows shorter than a line take groups of 4 KB, ``shift_rows``, unless a line's rows
   hold 1 KB and realign in registers, ``_shift_in_registers``). Stores that are
   pieces of lines become whole lines where the pieces can be regrouped: packed runs
   into columns that start inside a line cut their calls at the lines
   (``Plan.line_phases``: nChw8c -> nhwc, C=200; a job that starts inside a line takes a
   copy of its calls with the phases shifted, ``Plan.job_shifts``; columns under 192 B
   take a panel instead), or, where no cut falls on a run,
   go through a small stage a panel of columns at a time (``Plan.lines_panel``:
   nChw16c -> nhwc, C=60); columns that gather more than 8 source streams (nChw16c ->
   nhwc, C=256) are swept in blocks, 8 streams at a time (``Plan.lines_passes``); and
   table-placed tiles of short destination rows stage
   their macro tile's dense range (``Plan.cols_stage``: oihw -> OIhw8i8o). On the
   source side, line rows whose rows sit in runs a multiple of 4 KB apart (u8
   Ohwi16o -> oihw 7x7: 49 runs of 1 KB) copy each period's runs to a stage first
   (``Plan.src_stage``).

Zero padding is never a guard in the main loop: codegen splits the loop over a
padded dim's heaviest digit into a full range, one partial step and a zero
range (see ``segments``), recursively, all with compile-time bounds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .dtypes import DataType
from .ir import DimRange, LoopIR, Node

# Problems moving fewer bytes than this run in one serial call (no thread launch).
PARALLEL_MIN_BYTES = int(os.environ.get("LAYOUTJIT_PARALLEL_MIN_BYTES", 256 * 1024))
def _sysfs_caches() -> list[dict[str, str]]:
    """cpu0's caches as sysfs describes them (one dict of its files' text per cache)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    caches = []
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return []
    for entry in entries:
        info = {}
        for key in ("level", "type", "size", "number_of_sets", "coherency_line_size",
                    "ways_of_associativity"):
            try:
                with open(os.path.join(base, entry, key)) as f:
                    info[key] = f.read().strip()
            except OSError:
                pass
        caches.append(info)
    return caches


#: The store thresholds read the last-level cache as at most this much (0: no cap).
LLC_CAP_BYTES = 32 * 1024 * 1024


def llc_bytes() -> int:
    """The last-level cache the store thresholds are sized from: sysfs's size, at most
    ``LLC_CAP_BYTES``, 32 MiB when unknown; ``LAYOUTJIT_LLC_BYTES`` overrides it.

    The cap: the thresholds were measured on hosts of 32 MiB of L3 (Zen 3/4/5 guests), and
    a server's L3 (300 MiB on a 16-vCPU Xeon guest) is shared with every core and tenant.
    There, uncapped (NT from 100-150 MB), the quick list's 34-72 MB transposes ran with
    plain stores at 2-7x the copy's time, and a 206 MB one, NT, at 0.76x.
    """
    env = os.environ.get("LAYOUTJIT_LLC_BYTES", "").strip()
    if env:
        return int(env)
    best = 0
    for info in _sysfs_caches():
        text = info.get("size", "")
        mult = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}.get(text[-1:], 1)
        num = text[:-1] if text[-1:] in "KMG" else text
        if num.isdigit():
            best = max(best, int(num) * mult)
    best = best or 32 * 1024 * 1024
    return min(best, LLC_CAP_BYTES) if LLC_CAP_BYTES else best


def _l2_numbers(*keys: str) -> list[int] | None:
    """The first L2 data cache's sysfs numbers named ``keys``, all positive; None if none has them."""
    for info in _sysfs_caches():
        if info.get("level") != "2" or info.get("type") == "Instruction":
            continue
        texts = [info.get(k, "") for k in keys]
        if all(t.isdigit() and int(t) > 0 for t in texts):
            return [int(t) for t in texts]
    return None


def l2_set_period() -> int:
    """Bytes after which addresses map to the same L2 set (sets x line size, sysfs); 64 KiB
    (Zen 3's 512 KiB 8-way L2, Skylake-SP's 1 MiB 16-way) when unknown."""
    found = _l2_numbers("number_of_sets", "coherency_line_size")
    return found[0] * found[1] if found else 64 * 1024


def l2_ways() -> int:
    """The L2's associativity (sysfs); 8 (Zen 3) when unknown."""
    found = _l2_numbers("ways_of_associativity")
    return found[0] if found else 8


# Problems whose traffic (src + dst bytes) exceeds this use non-temporal stores where a
# micro-kernel writes whole lines. Measured on Zen 5: for traffic beyond half the
# last-level cache NT stores are 1.5-3x faster (a transpose's scattered plain stores wait
# on ownership reads); below it plain stores keep the output in cache, which is faster
# with two threads and for whoever reads the output next.
NT_MIN_BYTES = int(os.environ.get("LAYOUTJIT_NT_MIN_BYTES", llc_bytes() // 2))


#: Overrides the split thresholds of every kind (nt_split_min_bytes), e.g. to measure them.
NT_SPLIT_MIN_BYTES = (int(os.environ["LAYOUTJIT_NT_SPLIT_MIN_BYTES"])
                      if os.environ.get("LAYOUTJIT_NT_SPLIT_MIN_BYTES") else None)


#: Register transposes run by one thread take NT stores from this much traffic, a third
#: of the LLC (0: from ``NT_MIN_BYTES`` like every kind); split between threads they time
#: the store kind from there up to the split threshold (``Plan.nt_tune``).
NT_MIN_TRANSPOSE_BYTES = int(os.environ.get("LAYOUTJIT_NT_MIN_TRANSPOSE_BYTES", llc_bytes() // 3))


def nt_min_bytes(tile: TileSpec) -> int:
    """The NT threshold when one thread runs every job (the base threshold, every kind).

    Measured at 1 thread, 12-19 MB of traffic: NT stores beat plain ones for register
    transposes too (oihw -> OIhw16i16o 1.47x copy -> 1.29x, oihw -> OIhw4i16o4i 1.90x ->
    1.34x, f32 -> s8 6.0x -> 3.7x) and for runs packed into lines (nhwc -> nChw16c,
    C=100, 21 MB: plain 1.95x, NT 1.14x).

    Register transposes switch at a third of the LLC (``NT_MIN_TRANSPOSE_BYTES``), wide
    groups included; split between threads they time the store kind (``Plan.nt_tune``)
    up to the split threshold (see the end of this docstring). On a
    Zen 3 host (32 MiB L3 shared with other tenants), 10-14 MB of traffic, plain -> NT at
    1 thread, ratio to copy: in one process, the two plans timed alternately with a copy
    (medians of 9), nhwc -> nchw 16x128x28x28 1.61 -> 0.73, 4x960x20x20 1.74 -> 0.89, nchw
    -> nhwc 2x256x56x56 1.61 -> 1.02, nChw16c -> nchw 16x17x56x56 1.21 -> 0.90 (at 2
    threads, plain in both, the NT plans' tiles: 0.94 -> 0.88, 1.13 -> 1.09, 1.22 -> 1.17,
    1.09 -> 1.19); oihw -> OIhw4i16o4i f32 -> s8 512x512x3x3 1.74 -> 1.18 (it ran at
    0.84-1.05x oneDNN's time), oihw -> OIhw16i16o f32 -> s8 1.11 -> 0.76. In the harness,
    nine such pairs, 1 thread: geomean 1.42 -> 0.82. Below about a third NT lost there
    (3.2 MB 2.5 -> 15x, 4.7-6.4 MB 1.3-1.4 -> 1.8-3.0).

    At 2 threads the host's phases decide between the store kinds in this band: one
    session measured plain and NT equal on four of the pairs above and plain faster on
    nchw -> nChw16c C=17 (0.9-1.2 against 1.6-1.8), and kept plain stores there; the
    next, same host, measured (A/B, ratio to copy at 2 threads, plain -> NT) C=17 2.47 ->
    1.49, nhwc -> nchw 16x128x28x28 1.85-1.97 -> 0.70-0.80, 4x960x20x20 1.93 -> 0.85, oihw
    -> OIhw4i16o4i f32 -> s8 1.81 -> 0.96, oihw -> OIhw16i16o f32 -> bf16 2.09 -> 0.96,
    nchw -> nhwc 2x256x56x56 equal, and in the harness's full run the plain ones at
    1.5-3.5x copy (f32 -> s8 at 1.05x oneDNN's time). So the kind is timed at run time
    there, as from the base threshold: plain -> timed, 2 threads, C=17 1.11 -> 1.10, f32
    -> s8 1.86 -> 1.08, 16x128x28x28 2.20 -> 0.94, f32 -> bf16 2.68 -> 0.98, 2x256x56x56
    1.43 -> 1.57.
    """
    return _nt_min_for(tile.kind)


def _nt_min_for(kind: str) -> int:
    """``nt_min_bytes`` of a micro-kernel kind."""
    if kind == "transpose" and NT_MIN_TRANSPOSE_BYTES:
        return min(NT_MIN_BYTES, NT_MIN_TRANSPOSE_BYTES)
    return NT_MIN_BYTES


#: The NT thresholds compare the memory traffic with the source counted in the lines its
#: reads touch (``memory_traffic``) where that is at least LINE_TRAFFIC_MIN_RATIO times the
#: elements moved; ``LAYOUTJIT_LINE_TRAFFIC=0``: the elements moved, as before.
LINE_TRAFFIC = os.environ.get("LAYOUTJIT_LINE_TRAFFIC", "1") != "0"
LINE_TRAFFIC_MIN_RATIO = 2


def memory_traffic(ir: LoopIR, moved: int) -> int:
    """Bytes the memory moves where the source is mostly what its reads skip: the
    destination written and the source lines the reads touch, where that is at least
    ``LINE_TRAFFIC_MIN_RATIO`` times ``moved`` (every position's element on both sides);
    else ``moved``.

    A source whose unit-stride runs hold much less data than the step to the next run (a
    few channels of each padded block) is fetched a whole line at a time: f32 -> s8
    `nCw16c -> nwc` with C = 4 reads 16 B of each 64-byte line, 35 MB of traffic that
    counting elements put at 10 MB, under the NT threshold. The run's data is its span
    times the valid share of its dim; runs closer than a line share lines (data / step),
    farther ones take whole lines each. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2
    threads), plain -> NT: that pair 512x4x1000 1.72-2.12 (1.57-2.02) -> 1.00-1.12
    (1.00-1.09), oneDNN 1.55-1.81; f32 C = 2 1.28-1.48 (1.30-1.44) -> 0.81-0.96
    (0.83-0.90), oneDNN 1.46; f32 -> bf16 C = 4 1.47 (1.41) -> 1.03 (1.03); `nChw16c ->
    nhwc` f32 C = 4 1.41 (1.02) -> 0.77 (0.95), C = 5 1.18 (1.13) -> 0.90 (1.05), bf16 C = 2
    1.09 (0.95) -> 0.89 (0.81); `nCdhw16c -> ndhwc` bf16 C = 3 1.46 (1.34) -> 1.02 (0.88),
    C = 4 1.13 (1.12) -> 0.79 (0.86), f32 -> s8 C = 2 3.00 (2.08) -> 2.24 (1.59); u8
    `nChw16c -> nChw4c` C = 4 1.21 (1.20) -> 0.81 (0.96), `nCw8c -> nwc` C = 2 1.33 (1.42)
    -> 1.04 (1.21); mixed: s8 -> f32 `nCw16c -> nwc` C = 2 1.11 (1.02-1.16) -> 0.75 (1.16-1.35),
    u8 C = 5 1.47-2.08 (1.34-1.58) -> 1.51-1.54 (1.35-1.65). 3 of 2742 listed and
    generated pairs changed, 73 of 252 sparse-source pairs (15 of them measured).
    Sources a little sparser than the estimate (up to twice it) were mixed and keep it:
    `nChw16c -> nChw8c` f32 C = 4 1024x4x7x35 1.12 (1.10) -> 0.76 (1.41), f32 -> u8 C = 5
    128x5x56x56 1.42 -> 2.69 at 1 thread, s8 -> f32 `nChw16c -> nhwc` C = 3 1.08 (1.13) ->
    0.79 (1.58), `nCw16c -> nwc` C = 13 1.07 -> 1.60, u8 `nChw16c -> nhwc` C = 8 0.99 ->
    0.79."""
    if not LINE_TRAFFIC or len(ir.operands) < 2:
        return moved
    src = ir.operands[1]
    ssz = src.dtype.size
    unit = next((n for n in ir.nodes if n.strides[1] == 1 and n.extent > 1), None)
    steps = [n.strides[1] * ssz for n in ir.nodes
             if n is not unit and n.extent > 1 and n.strides[1] is not None and n.strides[1] > 0]
    if unit is None or not steps:
        return moved
    span = unit.extent * ssz
    step = min(steps)
    if step <= span:
        return moved  # runs back to back (or interleaved): the lines are dense
    run = span
    if unit.dim is not None and unit.weight == 1:
        run = span * min(ir.dims[unit.dim].valid, unit.extent) // unit.extent
    line = step if step < 64 else 64 * -(-span // 64)
    if run <= 0 or run >= line:
        return moved
    valid = math.prod(d.valid for d in ir.dims)
    lines = ir.total * ir.operands[0].dtype.size + valid * ssz * line // run
    return lines if lines >= LINE_TRAFFIC_MIN_RATIO * moved else moved


def data_bytes(ir: LoopIR) -> int:
    """Bytes of the positions a reorder writes (padding zeros included) and of the source
    data it reads: its size for the cache-size gates (skipped positions left out, unlike
    ``ir.total``)."""
    written = math.prod(r.write for r in ir.dims)
    valid = math.prod(r.valid for r in ir.dims)
    return written * ir.operands[0].dtype.size + valid * ir.operands[1].dtype.size


def _transpose_takes_nt(ir: LoopIR, ssz: int, dsz: int) -> bool:
    """Whether a register transpose of ir moves enough bytes for NT stores on one thread
    (``nt_min_bytes``), asked by rules measured on NT transposes before the tile exists."""
    return ir.total * (ssz + dsz) >= _nt_min_for("transpose")


def _narrowing_stream_nt_min(ir: LoopIR, tile: TileSpec) -> int:
    """The one-thread NT threshold of a stream that narrows its elements (f32 -> s8/bf16):
    a quarter of the LLC instead of half (no limit for other plans).

    In the band between, plain stores of the narrow destination ran at up to 1.7x copy
    at 1 thread while NT ones ran under it. A/B on Zen 3 (AVX2), ratio to copy at 1 thread
    (2 threads), plain -> NT: f32 -> s8 `nChw16c` 16x256x28x28 (16 MB) 1.15 -> 0.92 (1.13
    -> 0.58), `nchw` 12x256x28x28 1.67 -> 0.72 (1.18 -> 1.20), f32 -> bf16 1.16 -> 0.68
    (1.00 -> 0.73), 8 MB 1.01 -> 0.75 (1.44 -> 1.46); widening s8 -> f32 lost (6 MB: 1.01
    -> 1.48), f32 -> f32 12 MB 0.56 -> 0.48 (0.68 -> 0.74). Streams have no timed band
    (``Plan.nt_tune``): NT at every thread count.
    """
    if tile.kind != "stream" or ir.operands[0].dtype.size >= ir.operands[1].dtype.size:
        return 1 << 62
    return llc_bytes() // 4


def nt_split_min_bytes(tile: TileSpec) -> int:
    """The NT threshold when the jobs run on several threads (at least ``nt_min_bytes``).

    With two threads, plain stores keep an output that fits in cache for longer:
    register transposes switch at 3/4 of the LLC (:func:`one_rule_min_bytes`), runs
    packed into lines, whose blocks are written as sequential streams, at the LLC size
    (nhwc -> nChw16c, C=100, 21 MB at 2 threads: plain 1.28x copy, NT 1.85x, on a Zen 5
    host). Streams have their own (``stream_split_min_bytes``). On this session's Zen 4
    host (L3 shared with other tenants) the 19 MB weights at 2 threads measured both ways
    round in different phases of the machine: NT 1.3-1.6x copy against plain 2.5-3.6x in
    one (A/B script, and once in the harness), and in three alternating harness runs NT
    2.36-2.52x copy (0.95-1.18x oneDNN's time) against plain 1.45-1.74x (0.69-0.89x): kept
    plain.
    """
    if NT_SPLIT_MIN_BYTES is not None:
        return max(NT_MIN_BYTES, NT_SPLIT_MIN_BYTES)
    if tile.kind == "lines":
        return max(NT_MIN_BYTES, llc_bytes())
    if tile.kind == "transpose":
        return one_rule_min_bytes()
    return NT_MIN_BYTES


#: Streams (kind "stream") split between threads take NT stores from this many quarters of
#: the LLC of traffic, unless they narrow their elements (``stream_split_min_bytes``); 0:
#: from the base threshold, like one thread.
STREAM_SPLIT_PLAIN_QUARTERS = int(os.environ.get("LAYOUTJIT_STREAM_SPLIT_PLAIN_QUARTERS", 6))


def stream_split_min_bytes(ir: LoopIR, tile: TileSpec) -> int:
    """The NT threshold of a stream split between threads: 1.5x the LLC of traffic
    (``STREAM_SPLIT_PLAIN_QUARTERS``); a stream that narrows keeps its one-thread one.

    Two threads copying with plain stores keep part of an output near the LLC's size in
    cache, and there NT streams ran behind the copy and oneDNN (whose plain stores ran at
    its speed). Zen 4 (AVX-512, 32 MiB L3), A/B in one process, ratio to copy at 2
    threads, NT -> plain: f32 `ndhwc -> nCdhw16c` with C=16 (a copy) 512x16x8x7x7 (25 MB
    of traffic) 1.96 -> 1.03, 640x 1.47 -> 0.96, 768x (38 MB) 1.18-1.35 -> 0.95-0.97
    (oneDNN 0.98), 896x 0.90 -> 0.85; widening bf16 -> f32 `nchw` 10x256x56x56 (48 MB) 1.16
    -> 0.87, u8 -> f32 12x256x56x56 1.53 -> 1.20; at 48 MB and more even (f32 1024x 0.97
    -> 0.92, 1280x 0.81 -> 0.82 under the threshold and 0.98 beyond it). Narrowing streams
    lost (f32 -> bf16 `nhwc` 8x256x56x56, 38 MB: 0.73 -> 0.99; 58 MB: 0.66 -> 1.03): they
    keep their one-thread threshold (``_narrowing_stream_nt_min``) at every thread count.
    One thread unchanged (NT from the base threshold: 768x 0.81 against plain 0.96).
    """
    if NT_SPLIT_MIN_BYTES is not None:
        return max(NT_MIN_BYTES, NT_SPLIT_MIN_BYTES)
    if ir.operands[0].dtype.size < ir.operands[1].dtype.size:  # narrowing: one thread's
        return min(nt_min_bytes(tile), _narrowing_stream_nt_min(ir, tile))
    if not STREAM_SPLIT_PLAIN_QUARTERS:
        return NT_MIN_BYTES
    return max(NT_MIN_BYTES, llc_bytes() * STREAM_SPLIT_PLAIN_QUARTERS // 4)


def split_min_bytes(ir: LoopIR, tile: TileSpec) -> int:
    """The NT threshold of this plan's jobs split between threads, streams included."""
    return stream_split_min_bytes(ir, tile) if tile.kind == "stream" else nt_split_min_bytes(tile)


#: Time plain against NT stores at run time in the band where neither wins on every host
#: (store_choice.py; streams have no band: ``stream_split_min_bytes``); 0 keeps the fixed
#: thresholds.
NT_TUNE = os.environ.get("LAYOUTJIT_NT_TUNE", "1") != "0"


def one_rule_min_bytes() -> int:
    """The NT threshold of register transposes at 2 threads, and of the plans with one
    store rule for every thread count (wide groups, local permutations): 3/4 of the LLC.
    Their plain stores stay in cache for longer (19 MB at 2 threads, Zen 5: plain 1.0-1.4x
    copy, NT 1.2-2.3x; 34 MB: NT 0.9x, plain 2.4x; in this session's harness, 19-20 MB
    at 2 threads, plain -> NT: OIhw16i16o <-> OIhw4i16o4i 512x512x3x3 0.91-0.99 ->
    2.31-2.45, nchw -> nChw8c C=100 1.33 -> 1.86-2.33).
    """
    return NT_MIN_BYTES * 3 // 2


# Read ~this many source rows side by side in a transpose (the L2 streamer's sweet spot).
READ_STREAMS = int(os.environ.get("LAYOUTJIT_READ_STREAMS", 32))
READ_STREAMS_BLOCKED = int(os.environ.get("LAYOUTJIT_READ_STREAMS_BLOCKED", 16))
# Register tiles: at most this many rows (64: one line of 1-byte elements), at most this
# many source bytes, and at most this many registers of data through the shuffle network
# (narrowing conversions run before it, widening ones after): half of AVX-512's register
# file, so that the network does not spill. 32-register networks measured 2-2.5x slower per
# byte in cache; on 51 MB tensors at 1 thread, 8-bit nchw -> nhwc went from 3.0x copy to
# 1.0-1.3x, 16-bit nhwc -> nchw from 1.9-2.1x to 1.6x. (Those were single networks; with 16
# registers, simd now splits larger ones into row groups, which run near the speed of the
# small ones in cache -- but wider tiles measured no gain on those tensors.)
MAX_TILE_ROWS = int(os.environ.get("LAYOUTJIT_MAX_TILE_ROWS", 64))
MAX_TILE_SRC_BYTES = 2048
MAX_TILE_NET_REGS = 16
# Tiles that write whole blocks take enough columns to write whole lines (_transpose).
BLOCK_TILE_LINES = True
#: ... taking up to this many times the registers of MAX_TILE_NET_REGS for it (simd splits
#: the network into row groups) where the stores will be NT. 9x8 tiles (288 B, plain
#: stores) -> 9x16 (576 B, whole lines, NT), ratio to copy at 1 thread (2 threads), A/B:
#: OIhw16o16i -> oihw 1024x1024x3x3 1.11 -> 0.96 (1.09 -> 0.83), 1.52 -> 1.30 (1.19 ->
#: 1.05); gOIhw16o16i -> goihw 64x64x1024x3x3 1.36 -> 1.15 (1.24 -> 0.94); nChw16c -> nchw
#: 512x1024x3x3 1.14 -> 0.97 (0.95 -> 0.71), 2048x1024x3x3 1.07 -> 0.93 (1.06 -> 0.76).
#: In cache (plain stores) the wider network lost (256x256x3x3: 2.30 -> 2.64).
BLOCK_TILE_LINES_NET = int(os.environ.get("LAYOUTJIT_BLOCK_TILE_LINES_NET", 2))
#: Tiles write two lines of each destination row where rows repeat every 4 modulo 4 KB
#: (``_two_line_rows``; ``LAYOUTJIT_TWO_LINE_ROWS=0`` turns it off); measured with 32-byte
#: vectors only.
TWO_LINE_ROWS = os.environ.get("LAYOUTJIT_TWO_LINE_ROWS", "1") != "0"
TWO_LINE_ROWS_MAX_VECTOR = 64
ALIASED_L1_ROWS = 8  # rows per tile when source rows share an L1 set (0: off); see _transpose
#: Source rows an NT transpose reads side by side when they share an L2 set (0: off); see
#: ``_l2_aliased_rows``.
ALIASED_L2_STREAMS = int(os.environ.get("LAYOUTJIT_ALIASED_L2_STREAMS", 16))
#: Source rows an NT transpose reads side by side when they are far apart and the
#: destination rows short (0: off); see ``_short_rows_from_far_rows``.
SHORT_ROW_STREAMS = int(os.environ.get("LAYOUTJIT_SHORT_ROW_STREAMS", 16))
SHORT_ROW_MAX_BYTES = 256
SHORT_ROW_FAR_BYTES = 4096  # source rows at least a page apart: one stream each
#: ... and also into longer destination rows whose length is not a multiple of this many
#: bytes (0: off); see ``_short_rows_from_far_rows``.
ODD_ROW_PERIOD = int(os.environ.get("LAYOUTJIT_ODD_ROW_PERIOD", 512))
#: Bytes of the source rows by which the second row tile of a macro tile runs ahead of the
#: first where ``skewed_tiles`` applies (``LAYOUTJIT_SKEW_BYTES``; 0: off).
SKEW_BYTES = int(os.environ.get("LAYOUTJIT_SKEW_BYTES", 2048))
SKEW_MIN_ROW_BYTES = 512  # destination rows at least this long (see skewed_tiles)
SKEW_MAX_VECTOR = 64  # skewed tiles only with vectors shorter than this (measured with 32 B)
#: Bytes ahead at which NT conversion streams prefetch their source on hosts with vectors
#: under 64 bytes (``Plan.stream_prefetch``; 0: off). AVX-512 hosts take none by default
#: (``STREAM_PREFETCH_WIDE_BYTES``).
STREAM_PREFETCH_BYTES = int(os.environ.get("LAYOUTJIT_STREAM_PREFETCH_BYTES", 2048))
STREAM_PREFETCH_WIDE_BYTES = int(os.environ.get("LAYOUTJIT_STREAM_PREFETCH_WIDE_BYTES", 0))
# Padded runs shorter than a line (nhwc -> nChw8c, C=3) are packed this many per call.
PACKED_RUNS = 16
#: ... and this many where each run starts a line of its own in the source (0: as many as
#: PACKED_RUNS). Like thin tiles (``thin_tile_rows``), calls that read fewer separate lines
#: kept more of them in flight. Zen 3 (AVX2), one process, ratio to copy at 1 thread (2
#: threads), 16 -> 8 runs: f32 `nChw16c -> nChw8c` 32x3x224x224 0.92 (0.99) -> 0.80 (0.76),
#: oneDNN 0.89 (0.95); C = 5 1.01 (0.99) -> 0.82 (0.77); 4096x3x13x35 0.91 (0.95) -> 0.77
#: (0.77); `nCw16c -> nwc` 4096x4x299 1.23 (1.24) -> 0.92 (0.90), oneDNN 0.95; `nCdhw16c ->
#: nCdhw8c` 16x4x5x35x299 0.81 (0.75) -> 0.71 (0.71). Dense sources lost a little (`nwc ->
#: nCw16c` 4096x3x1000 0.45 -> 0.50 at 1 thread), u8 runs 16 bytes apart more (`nCw16c ->
#: nCw8c` 0.88 -> 1.02): those keep PACKED_RUNS.
PACKED_FAR_RUNS = int(os.environ.get("LAYOUTJIT_PACKED_FAR_RUNS", 8))
# A transpose whose tiles read part of each source line reads at least this much per step.
PARTIAL_LINE_STEP_BYTES = 8192
# Flatten outer loops until the job count reaches this (load balance between threads).
MIN_JOBS = 64


def by_vector_width(vbytes: int, narrow: int, wide: int) -> int:
    """The setting a plan for ``vbytes``-byte vectors takes: ``wide`` for 64-byte vectors,
    ``narrow`` below. The two hosts measured differ there (Zen 4 with AVX-512, Zen 3 with
    AVX2: their prefetchers wanted different software prefetches), and the plan's vector
    width is what tells them apart."""
    return wide if vbytes >= 64 else narrow


def vector_bytes() -> int:
    """Vector register width the kernels target (64 with AVX-512, 32 with AVX2)."""
    try:
        from .simd import HOST_VECTOR_BYTES  # type: ignore[attr-defined]

        return int(HOST_VECTOR_BYTES)
    except Exception:  # pragma: no cover - before simd exists / exotic hosts
        return 16


# ----------------------------------------------------------------- IR passes
def drop_unit(ir: LoopIR) -> LoopIR:
    """Remove nodes of extent 1 (they move nothing)."""
    nodes = [n for n in ir.nodes if n.extent != 1]
    return ir.with_nodes(nodes, None if len(nodes) == len(ir.nodes) else "drop_unit")


def trim_skipped(ir: LoopIR) -> LoopIR:
    """Stop a dim's only loop at the destination's padded size.

    A source blocked more coarsely than the destination lowers the dim to a multiple of
    its block (``ABcd4b16a4b -> abcd`` with a = 7: 16 steps, [7, 16) skipped). When one
    node holds the whole dim, the skipped steps are empty iterations; as jobs they were
    worse, most of the static split's share of one thread. The node and the dim's extent
    stop at the first multiple of the node's weight that covers the padded size. A/B on
    Zen 3, ratio to copy at 1 thread (2 threads): `ABcd4b16a4b -> abcd` 7x112x28x768
    2.26 (3.28) -> 1.07 (0.85) (a = 7 unguarded then joins the source run of the tile).
    Nodes with a unit stride are left whole: they become the tile's rows or columns, whose
    plans read a padded block whole (`nCw8c -> ncw` C=7: 0.84 -> 1.36 when trimmed). Runs
    (unit stride on both sides) are trimmed (``TRIM_RUNS``): `nCdhw16c -> ndhwc` u8 with C
    = 8 walked the whole 16c block per pixel, no micro-kernel took it, and element loops
    ran at 2.8x copy; trimmed, its 8-byte runs pack into lines (``_packed_padded_runs``).
    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), untrimmed -> trimmed and
    packed: u8 16x8x112x56x224 2.82 (1.31) -> 1.34 (0.71; oneDNN 2.32 (8.83)), f32
    `nCdhw16c -> nCdhw8c` 64x8x13x299x13 1.17 (1.15) -> 1.13 (1.10); 8 other pairs whose
    plans changed (runs of C = 1, 7 or 13) within the noise.

    A dim split in several nodes loses the outer digit's skipped steps the same way
    (``_outermost_digit``, ``LAYOUTJIT_TRIM_OUTER_STEPS``): `nChw16c -> nChw8c` C = 7
    had walked both halves of every 16c block, the second a column of nothing, so no call
    wrote whole lines (plain stores); trimmed, the 8c runs pack into NT lines. A/B, ratio
    to copy at 1 thread (2 threads): 32x7x299x299 0.96-1.02 (1.00-1.06) -> 0.82-0.85
    (0.79-0.82); `ABcd4b16a4b -> abcd` b = 8 12x8x128x384 1.40 (1.55) -> 0.81 (0.70);
    s8 `ABc16b64a2b -> ABc8a16b2a` 48x1024x1024 4.77 (4.25) -> 4.28 (2.76); f32 -> u8
    `nCdhw16c -> nCdhw8c` C = 3 1.18-1.20 (1.18-1.27) -> 1.01-1.24 (0.87-0.96). 23 of 909
    listed pairs changed; three moved within the noise, and C = 8 (`nCdhw16c ->
    nCdhw8c`, no padding left) lost its half-skipped "lines" tile: element loops where
    the types match, packed runs where they convert (``_packed_padded_runs``)."""
    dims = list(ir.dims)
    nodes = list(ir.nodes)
    for i, n in enumerate(nodes):
        d = n.dim
        run = TRIM_RUNS and all(st == 1 for st in n.strides)
        if d is None or (1 in n.strides and not run) or not _outermost_digit(n, nodes):
            continue  # (unit strides: tile nodes, kept; but runs, see TRIM_RUNS)
        if not TRIM_OUTER_STEPS and any(m.dim == d and m is not n for m in nodes):
            continue  # (switched off: dims held by one node only)
        r = dims[d]
        e = -(-r.write // n.weight)
        if r.write < r.extent and n.extent * n.weight == r.extent and e < n.extent:
            nodes[i] = Node(e, d, n.weight, n.strides)
            dims[d] = replace(r, extent=e * n.weight)
    if nodes == list(ir.nodes):
        return ir
    nodes = [n for n in nodes if n.extent != 1]
    return replace(ir.with_nodes(nodes, "trim_skipped"), dims=tuple(dims))


TRIM_OUTER_STEPS = os.environ.get("LAYOUTJIT_TRIM_OUTER_STEPS", "1") != "0"
#: trim_skipped also trims runs (0 for A/B); _packed_padded_runs packs runs of one type up to this many bytes.
TRIM_RUNS = os.environ.get("LAYOUTJIT_TRIM_RUNS", "1") != "0"
PACKED_SAME_MAX_BYTES = int(os.environ.get("LAYOUTJIT_PACKED_SAME_MAX_BYTES", 64))
#: Plan.elem_prefetch: bytes ahead (0: off, for A/B runs).
ELEM_PREFETCH_BYTES = int(os.environ.get("LAYOUTJIT_ELEM_PREFETCH_BYTES", 2048))


def _outermost_digit(n: Node, nodes: list[Node]) -> bool:
    """Whether ``n`` is its dim's heaviest node (the whole dim where it is the only one):
    its steps past the destination's padded size hold nothing but skipped indices
    (``nChw16c -> nChw8c`` with C = 7: the second half of every 16c block is read by no
    destination byte)."""
    return all(m is n or m.dim != n.dim or m.weight * m.extent <= n.weight for m in nodes)


def order_by_dst(ir: LoopIR) -> LoopIR:
    """Sort nodes outermost-first by decreasing destination stride (then source stride)."""
    def key(n: Node) -> tuple:
        s = n.strides[1]
        return (-(n.strides[0] or 0), -(s if s is not None else 0), -n.weight)
    return ir.with_nodes(_padded_digits_heaviest_first(ir, sorted(ir.nodes, key=key)), "order_by_dst")


def _padded_digits_heaviest_first(ir: LoopIR, nodes: list[Node]) -> list[Node]:
    """``nodes`` with each padded dim's digits put back heaviest-first, in the places its
    digits hold (compile-time padding splits need them in that order)."""
    by_dim: dict[int, list[Node]] = {}
    for n in nodes:
        if n.dim is not None:
            by_dim.setdefault(n.dim, []).append(n)
    for d, lst in by_dim.items():
        want = sorted(lst, key=lambda n: -n.weight)
        if want != lst and ir.dims[d].guarded:
            it = iter(want)
            nodes = [next(it) if n.dim == d else n for n in nodes]
    return nodes


def _mergeable(ir: LoopIR, outer: Node, inner: Node) -> bool:
    for so, si in zip(outer.strides, inner.strides):
        if so is None or si is None or so != si * inner.extent:
            return False
    if outer.dim is not None and outer.dim == inner.dim:
        return outer.weight == inner.weight * inner.extent
    # different dims: only where each node's steps lie wholly on one side of its dim's
    # padding bounds (then the dim's other digits decide every guard)
    return all(not _guarded(ir, n) or (UNIFORM_MERGE and _uniform_digit(ir, n)) for n in (outer, inner))


def _guarded(ir: LoopIR, n: Node) -> bool:
    """Whether node ``n`` is a digit of a padded dim."""
    return n.dim is not None and ir.dims[n.dim].guarded


#: Merge nodes of different padded dims when each digit is uniform (``_uniform_digit``).
UNIFORM_MERGE = os.environ.get("LAYOUTJIT_UNIFORM_MERGE", "1") != "0"


def _uniform_digit(ir: LoopIR, n: Node, span: int | None = None) -> bool:
    """Whether every value of digit ``n`` is on the same side of its dim's bounds.

    The dim's index is H + j*w + L with H a multiple of w*e (the heavier digits) and
    L < w: when ``valid``, ``write`` and the source's extent are multiples of w*e, H
    alone decides data, zeros or nothing. Such a digit may merge with another dim's
    (``AcdeB4b8a4b -> ABcde16b64a4b``: 8a x 4b is the same 32 contiguous elements on
    both sides, with a and b both padded). ``span``: w*e unless given."""
    if n.dim is None or not ir.dims[n.dim].guarded:
        return True
    r = ir.dims[n.dim]
    span = n.weight * n.extent if span is None else span
    return all(b % span == 0 for b in (r.valid, r.write, r.src_extent))


def merge(ir: LoopIR) -> LoopIR:
    """Fuse adjacent nodes that are contiguous in every operand."""
    out: list[Node] = []
    for n in ir.nodes:
        if out and SPLIT_MERGE and not _mergeable(ir, out[-1], n):
            cut = _uniform_cut(ir, out[-1], n)
            if cut is not None:
                out[-1:] = list(cut)
        if out and _mergeable(ir, out[-1], n):
            o = out.pop()
            same = o.dim is not None and o.dim == n.dim
            n = Node(o.extent * n.extent, n.dim if same else None, n.weight if same else 1, n.strides)
        out.append(n)
    return ir.with_nodes(out, None if len(out) == len(ir.nodes) else "merge")


def _uniform_cut(ir: LoopIR, outer: Node, inner: Node) -> tuple[Node, Node] | None:
    """A padded digit that is not uniform, cut into its heavier steps and the most light
    steps that are (``_uniform_digit``), so that the light part merges with the node inside
    it (`gOIhw4i16o4i -> gOhwI16o4i` with o = 40 of 48: the block's 16 o as 2 x 8, each 8 o
    x 4 i two lines on both sides, data or zeros as a whole). Only inner runs shorter than
    a line."""
    if outer.dim is None or not _guarded(ir, outer) or _uniform_digit(ir, outer) or outer.dim == inner.dim:
        return None
    if any(so is None or si is None or so != si * inner.extent
           for so, si in zip(outer.strides, inner.strides)):
        return None
    if _guarded(ir, inner) and not _uniform_digit(ir, inner):
        return None
    if inner.strides[0] != 1 or inner.extent * ir.operands[0].dtype.size >= 64:
        return None  # (runs of a line or more: no gain; 2 x 16 o of OIhw16i16o -> IOhw16i16o lost)
    r = ir.dims[outer.dim]
    span = math.gcd(r.valid, r.write, r.src_extent or r.valid, outer.weight * outer.extent)
    g = math.gcd(span // outer.weight, outer.extent) if span % outer.weight == 0 else 1
    if g <= 1 or g == outer.extent:
        return None
    return outer.split(g)


#: Cut a padded digit so that its uniform light steps merge inward (``_uniform_cut``). A/B
#: on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads), without -> with:
#: `gOIhw4i16o4i -> gOhwI16o4i` 8x40x512x7x7 f32 (1.87 / 1.38x oneDNN's time in a sweep)
#: element loops over 16-byte runs 2.02 (1.71) -> streamed 128-byte runs 1.14 (1.02);
#: `OIhw4i16o4i -> OhwI16o4i` 1000x512x3x3 f32 1.53 (1.46) -> 0.69 (0.73). With
#: ``SAME_PLACE_PADDED``, against neither: s8 10.9 (5.8) -> 1.5 (1.35), s8 `OhwI16o4i ->
#: OIhw4i16o4i` 3.7 (4.7) -> 1.08 (1.07), f32 -> s8 `gOIhw4i16o4i -> gOhwI16o4i` o = 100
#: 1.70 (1.53) -> 1.16 (1.11), bf16 `gOIhw8i16o2i -> gOhwI16o2i` 2.47 (2.2) -> 1.14 (0.87).
SPLIT_MERGE = os.environ.get("LAYOUTJIT_SPLIT_MERGE", "1") != "0"


def normalize(ir: LoopIR) -> LoopIR:
    """drop_unit, trim_skipped, order_by_dst, merge."""
    return merge(order_by_dst(trim_skipped(drop_unit(ir))))


# ------------------------------------------------------------- plan choices
@dataclass(frozen=True)
class TileSpec:
    """How the innermost nodes are moved by a vector micro-kernel.

    kind "transpose": node A (dst unit stride) x node B (src unit stride) by
    R x V register tiles (``simd.tile``), M tiles per macro tile.
    kind "lines": node ``l`` is contiguous on both sides (a run of elements);
    A is the node with dst stride = run length, B the one with src stride = run
    length: runs are transposed like elements, R runs per micro call
    (``simd.gather`` packs R runs into whole 64-byte lines), M calls per macro.
    A transpose with ``c`` set takes its columns from B x C, one source run of
    B.extent * C.extent elements (B short: oihw -> OIhw16i16o, B = hw = 9, C = i):
    V-column chunks of the run are loaded as whole vectors and each column is
    stored where a table says (``simd.tile_cols``, :func:`cols_table`).
    A transpose with ``a2`` set takes its R rows from A2 x A, the destination
    digits that make one whole line (A shorter than a line: oihw -> OIhw4i16o4i,
    A = 4 i, A2 = 4 of the 16 o), each row read from its own offset (:func:`src_rows`).
    kind "stream": node A is a long contiguous run on both sides, moved V
    elements (one destination line) per call, peeled at run time so that
    non-temporal stores hit whole aligned lines.
    """

    kind: str
    a: int
    b: int | None
    R: int
    V: int
    M: int
    rows_contiguous: bool
    l: int | None = None  # noqa: E741 - the run node of kind "lines"
    c: int | None = None  # kind "transpose": node continuing B's source run (see cols_table)
    a2: int | None = None  # kind "transpose": node continuing A's destination line (src_rows)
    a3: int | None = None  # ... and the node continuing A2's, when A2 is too short (_line_rows_two)
    skew: int = 0  # kind "transpose", M=2: columns of B the second tile runs ahead (skewed_tiles)

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(i for i in (self.a, self.b, self.l, self.c, self.a2, self.a3) if i is not None)


@dataclass(frozen=True)
class Plan:
    """The planned nest: ordered nodes, an optional tile, the parallel split."""

    ir: LoopIR
    tile: TileSpec | None
    parallel: int  # number of outermost loops flattened into the job range
    jobs: int  # product of their extents (and of the macro loop, when it is a job loop)
    vector_bytes: int
    nt: bool  # micro-kernels may use non-temporal stores (where alignment allows)
    bytes_moved: int
    notes: tuple[str, ...] = ()
    chunk: int = 0  # stream: elements per job along the run (0: whole runs)
    shifted: bool = False  # transpose into misaligned dst rows: lines realigned through a stage
    panel: bool = False  # transpose into short contiguous dst rows: whole panels staged, then lines
    panel_blocks: int = 1  # panel plans: blocks of V destination rows per job (wide_panel)
    # wide panels: staged and written out this many blocks at a time, each block's tiles
    # for all A rows before the next block (0: the whole job, a strip of rows at a time)
    panel_sub_blocks: int = 0
    nt_split: bool = True  # NT stores also when the jobs are split between threads
    prefetch: bool = False  # short source rows that follow one another: _prefetch_rows/_runs
    line_phases: int = 1  # kind "lines", columns starting off the lines: see line_phases()
    cols_stage: bool = False  # cols transposes of short destination pieces: see cols_stage()
    job_align: bool = False  # NT: each job checks that its destination offset starts a line
    # job_align with line_phases: the offsets (elements past a line) at which a job starts
    # and still takes phased NT calls (job_shifts())
    job_shifts: tuple[int, ...] = (0,)
    # plain or NT stores chosen at run time by timing (store_choice.py); a shifted plan's
    # "NT" is its realigned lines, its "plain" the tiles straight into the rows (SHIFT_TUNE_ROWS)
    nt_tune: bool = False
    nt_tune_one: bool = False  # nt_tune: one thread times too (BLOCK_LOCAL_TUNE, SHIFT_TUNE_ROWS)
    row_stage: int = 0  # NT transposes into rows 4 KB apart: A elements staged per chunk (row_stage())
    lines_panel: int = 0  # kind "lines", columns contiguous off the lines: columns per panel (lines_panel())
    lines_passes: int = 0  # kind "lines", NT: columns per block swept a few source streams at a time (lines_passes())
    lines_pass_streams: int = 0  # ... and the source streams (runs) each sweep reads
    job_stage: int = 0  # NT: each job's dense destination range (elements) staged, then written as lines
    src_stage: int = 0  # a2 period lines: source runs copied this many elements apart first (src_stage())
    job_prefetch: int = 0  # job_stage: elements to the next job's dense source block, prefetched (job_prefetch())
    job_shift: bool = False  # job_stage: jobs start anywhere in a line; partial end lines plain (job_stage())
    # each tile's source rows prefetched this many elements on: in staged jobs where the next
    # job reads them (job_rows_ahead()), in NT tiles where an outer step continues them
    # (tile_rows_ahead()), in lines calls a fixed distance ahead (runs_rows_ahead())
    rows_ahead: int = 0
    # job_stage_chunks: source elements from one outer index's block to the next; each
    # job prefetches its share of the next one, spread over its tile calls (0: none)
    chunk_prefetch: int = 0

    @property
    def stream_prefetch(self) -> int:
        """Bytes ahead at which an NT conversion stream that reads more than it writes (f32
        -> bf16/s8) prefetches its source; 0: none. One core's read stream is latency-bound
        and the hardware prefetcher alone leaves it well below the read bandwidth (Zen 3,
        AVX2, ratio to copy at 1 thread (2 threads), off -> 2 KB: nhwc f32 -> s8 8x256x56x56
        0.90 -> 0.74 (0.93 -> 0.77), f32 -> bf16 0.89 -> 0.67 (0.74 -> 0.60); 1, 3, 4 and 8
        KB measured too; streams that widen (bf16/s8 -> f32) or copy gain nothing). Direct
        conversions only: a stream through an epilogue computes into a buffer first.
        Integer narrowing (s32 -> s8/u8: saturating packs, no float rounding) loses with it:
        off -> 2 KB, 16x512x28x28 s32 -> s8 0.66-0.77 -> 0.97-0.99 (0.58-0.79 -> 0.74-0.95),
        64x256x56x56 0.71 -> 0.95 (0.84 -> 0.95), s32 -> u8 0.83 -> 0.99 (0.74 -> 0.80),
        while s32 -> bf16 gains (1.06 -> 0.76, 0.90 -> 0.70).

        Plans for 64-byte vectors take ``STREAM_PREFETCH_WIDE_BYTES`` (0) instead: on Zen 4
        (AVX-512, 1 MB L2) the hardware prefetcher keeps up and the prefetches only cost,
        A/B, ratio to copy at 1 thread (2 threads), 2 KB -> off, 7 rounds: nhwc f32 -> s8
        8x256x56x56 1.01 (0.88) -> 0.83 (0.69), oneDNN 1.18 (1.19); f32 -> bf16 0.77 (0.75)
        -> 0.65 (0.66), oneDNN 1.18 (0.98); f32 -> s8 32x256x56x56 0.87 (0.64) -> 0.66
        (0.62), oneDNN 0.88 (0.72). (No AVX-512 Xeon measured.)"""
        t = self.tile
        ssz = self.ir.operands[1].dtype.size
        if t is None or t.kind != "stream" or not self.nt or (t.V * ssz) % 64:
            return 0
        ahead = by_vector_width(self.vector_bytes, STREAM_PREFETCH_BYTES, STREAM_PREFETCH_WIDE_BYTES)
        return ahead if _narrowing_float(self.ir) else 0

    @property
    def job_stream_shift(self) -> bool:
        """``job_align`` plans whose tiles write whole blocks: the jobs off the lines realign
        their tiles' runs onto whole NT lines through a one-line carry (``job_stream_shift()``)."""
        return bool(self.job_align and not self.row_stage and self.tile is not None
                    and job_stream_shift(self.ir, self.tile, self.parallel))

    @property
    def shift_edges(self) -> bool:
        """Shifted plans whose destination rows follow one another (B's destination stride
        is A's extent: `nchw -> nhwc`, `ab -> ba`): the line where one row ends and the next
        begins is staged (``edge``) and written as one NT line, except at a job's ends
        (``SHIFT_EDGES``; see codegen ``_render_shifted``)."""
        t = self.tile
        if not (SHIFT_EDGES and self.shifted and t is not None and t.b is not None):
            return False
        a, b = self.ir.nodes[t.a], self.ir.nodes[t.b]
        return (a.strides[0] == 1 and b.strides[0] == a.extent
                and self.ir.operands[0].dtype.size <= SHIFT_EDGES_MAX_ELEM)

    @property
    def panel_spread(self) -> bool:
        """Panel plans of one block per job that prefetch: each job's share of the next
        outer block is prefetched a piece before each of its tile calls, in order, not all
        as the job starts (``PANEL_SPREAD_PREFETCH``; codegen ``_render_panel``)."""
        return bool(PANEL_SPREAD_PREFETCH and self.panel and self.panel_blocks == 1 and self.prefetch)

    @property
    def shift_panel(self) -> int:
        """Shifted plans: B blocks per panel -- whole rows where the per-row carry (one line
        per destination row of the panel) fits ``SHIFT_CARRY_BYTES``, else equal panels.

        Each panel restarts the walk along the group's source rows, so longer panels
        keep the hardware prefetchers streaming: on 3001x2999 f32 at 1 thread, 64 blocks
        (4 KB of each source row) measured 1.11x copy, 128 1.07x, the whole row 1.04x.
        """
        t = self.tile
        assert t is not None and t.b is not None
        nbb = -(-self.ir.nodes[t.b].extent // t.V)
        cap = max(1, SHIFT_CARRY_BYTES // (t.V * 64))
        panels = -(-nbb // cap)
        return -(-nbb // panels)

    @property
    def prefetch_block(self) -> int:
        """Bytes of one row group's source block, which a prefetching plan fetches one
        group ahead (0 when the plan does not prefetch)."""
        t = self.tile
        if not self.prefetch or t is None or t.b is None:
            return 0
        ssz = self.ir.operands[1].dtype.size
        row = self.ir.nodes[t.b].extent * ssz
        if t.l is not None:
            row *= self.ir.nodes[t.l].extent
        if self.panel:
            rows = self.ir.nodes[t.a].extent
        elif t.a2 is not None:
            rows = tile_rows(self.ir, t)
        else:
            rows = shift_rows(self.ir, t) if self.shifted else t.M * t.R
        return rows * row

    @property
    def row_prefetch(self) -> int:
        """Elements ahead at which a one-line ``a2`` tile prefetches each of its source rows
        (``row_continuation``); 0: none. NT plans only (data from memory)."""
        t = self.tile
        if not ROW_PREFETCH or not self.nt or self.prefetch or t is None:
            return 0
        return row_continuation(self.ir, t) or near_row_continuation(self.ir, t)

    @property
    def row_prefetch_l2(self) -> bool:
        """Whether the ``row_prefetch`` prefetches go to L2 only: always for
        ``near_row_continuation``, for ``row_continuation`` unless ``ROW_PREFETCH_L2`` is off."""
        t = self.tile
        return bool(self.row_prefetch and t is not None and (ROW_PREFETCH_L2 or not row_continuation(self.ir, t)))

    @property
    def row_stream_prefetch(self) -> int:
        """Bytes ahead at which a tall transpose tile prefetches its long source rows, each
        row once a line (0: none).

        f32 -> s8 `ba -> ab` 1999x8192: 64x8 tiles read 32 B of 64 rows 7996 B apart, off
        the lines; 64 streams are more than the hardware prefetchers follow, and a group
        of them is too large for the group prefetch (``PREFETCH_MAX_ROW``,
        ``PREFETCH_MAX_BLOCK``). A/B in one process, ratio to copy at 1 thread (2 threads),
        without -> 512 B ahead: 2.27 (2.55) -> 1.36 (1.43), f32 -> u8 2.11 (2.46) -> 1.35
        (1.54) (oneDNN 2.55 (2.06)), s8 2999x8192 (64 rows of 2999 B) 3.30 (2.49) -> 2.32
        (2.06); 256 B and 1 KB ahead measured 1.49 and 1.42. Rows on the lines lost (f32
        -> u8 `ab -> ba` 4096x8192 1.24 (1.30) -> 1.59 (1.40), u8 1.49 -> 1.60 at 1 thread,
        f32 8192x4096 (16-row tiles) 0.87 (0.72) -> 0.98 (0.91)), and staged plans gained
        nothing (f32 -> s8 3001x2999). ``LAYOUTJIT_ROW_STREAM_PREFETCH=0`` turns it off.
        Rows on the lines of 2-byte copies: ``ROW_STREAM_LINED_AHEAD``."""
        t = self.tile
        if (not ROW_STREAM_PREFETCH or t is None or not _two_node_transpose(self.ir, t) or not self.nt
                or self.prefetch or self.shifted or self.panel or self.row_stage or self.cols_stage):
            return 0
        assert t.b is not None
        a, b = self.ir.nodes[t.a], self.ir.nodes[t.b]
        ssz = self.ir.operands[1].dtype.size
        if t.R < ROW_STREAM_MIN_ROWS or b.strides[1] != 1 or a.strides[1] is None:
            return 0
        if b.extent * ssz < ROW_STREAM_MIN_ROW_BYTES:
            return 0
        if (a.strides[1] * ssz) % 64 == 0:  # rows on the lines: 2-byte copies only, see the constants
            lined = ROW_STREAM_LINED_AHEAD and ssz == self.ir.operands[0].dtype.size == 2
            return ROW_STREAM_LINED_AHEAD if lined and (a.strides[1] * ssz) % 2048 else 0
        return ROW_STREAM_AHEAD

    @property
    def prefetch_l2(self) -> bool:
        """Whether the prefetches go to L2 only: large blocks (``PREFETCH_L1_MAX_BLOCK``),
        panels (:func:`panel_prefetch`), register-tile transposes whose source rows are off
        the lines, realigned ones with long rows (``PREFETCH_L2_SHIFT_ROW``)."""
        t = self.tile
        if not self.prefetch or t is None or t.b is None:
            return False
        if self.panel or t.a2 is not None or self.prefetch_block > PREFETCH_L1_MAX_BLOCK:
            return True
        row = self.ir.nodes[t.b].extent * self.ir.operands[1].dtype.size
        if self.shifted:
            return row >= PREFETCH_L2_SHIFT_ROW
        return t.kind == "transpose" and row % 64 != 0

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.ir.nodes

    @property
    def serial(self) -> bool:
        """Small problems run in one call on the calling thread."""
        return self.bytes_moved < PARALLEL_MIN_BYTES or self.jobs < 2

    def loop_order(self) -> list[int]:
        """Indices of nodes looped over outside the micro-kernel (outermost first)."""
        skip = set() if self.tile is None else set(self.tile.nodes)
        return [i for i in range(len(self.nodes)) if i not in skip]

    @property
    def elem_prefetch(self) -> int:
        """Element loops (no micro-kernel) whose innermost loop reads a short contiguous
        piece of each source step of 32 or 64 bytes (`nChw16c -> nhwc` with C < 16: C of
        each pixel's 16 floats): source elements ahead at which each step of the loop
        around it prefetches a line of the source (0: none), for tensors that come from
        memory (``NT_MIN_BYTES``).

        The read stream skips most of each line and is latency-bound on one core, as in
        ``stream_prefetch``. A/B on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2
        threads), none -> 2 KB ahead (512 B was worse): f32 `nChw16c -> nhwc` C = 11
        64x11x112x112 1.21 (1.18) -> 1.00 (1.01), C = 13 128x13x128x224 1.67 (0.87) -> 1.48
        (0.82), C = 5 1.13 (0.99) -> 1.05 (0.95); `nChw8c -> nhwc` C = 7 32x7x112x299 0.88
        (0.73) -> 0.82 (0.75), `nCdhw8c -> ndhwc` 1x7x224x299x32 1.10 (0.78) -> 0.99 (0.81),
        C = 3 1.06 (1.00) -> 1.02 (1.01); u8 `nChw16c -> nhwc` (16-byte steps, left out)
        1.34 either way."""
        if self.tile is not None or not ELEM_PREFETCH_BYTES or len(self.ir.operands) != 2:
            return 0
        order = self.loop_order()
        npar = self.parallel - 1 if self.macro_job else self.parallel  # (codegen's job loops)
        if len(order) - 2 < npar or self.bytes_moved < NT_MIN_BYTES:
            return 0  # (the loop around the innermost one is the job loop: nowhere to put it)
        ssz = self.ir.operands[1].dtype.size
        inner, outer = self.nodes[order[-1]], self.nodes[order[-2]]
        if inner.strides[1] != 1 or outer.strides[1] is None:
            return 0
        step = outer.strides[1] * ssz
        if not (inner.extent * ssz < step <= 64 and step >= 32):
            return 0
        return ELEM_PREFETCH_BYTES // ssz

    @property
    def macro_job(self) -> bool:
        """Whether the micro-kernel's row groups (or a chunked run) are part of the job range."""
        n = len(self.loop_order())
        if self.tile is None:
            return self.chunk > 0  # element loops: the innermost loop is cut into chunks
        return self.parallel > n

    def describe(self) -> str:
        from .ir import format_ir

        letters = "abcdefghijkl"

        def nm(i: int) -> str:
            n = self.nodes[i]
            return f"#{i} ({letters[n.dim] if n.dim is not None else '-'}, {n.extent})"

        lines = [format_ir(self.ir), ""]
        order = self.loop_order()
        par = order[: self.parallel]
        if self.shifted or self.panel:
            assert self.tile is not None and self.tile.b is not None
            per = self.tile.V * self.panel_blocks
            lines.append(f"parallel: {self.jobs} jobs over the outer loops x blocks of {per} along "
                         f"{nm(self.tile.b)}; {'serial' if self.serial else 'split between threads'} "
                         f"({self.bytes_moved} B moved; serial below {PARALLEL_MIN_BYTES} B)")
        elif self.jobs > 1:
            what = " x ".join(f"#{i}" for i in par)
            if self.macro_job:
                what = (what + " x " if what else "") + ("the run's chunks" if self.tile and self.tile.kind == "stream"
                                                         else "the macro tiles")
            lines.append(f"parallel: {self.jobs} jobs over {what}; "
                         f"{'serial' if self.serial else 'split between threads'} "
                         f"({self.bytes_moved} B moved; serial below {PARALLEL_MIN_BYTES} B)")
        else:
            lines.append(f"parallel: none (one job; {self.bytes_moved} B moved)")
        t = self.tile
        if t is None:
            lines.append("micro-kernel: none (element loops; contiguous inner loops are vectorized by LLVM)")
        elif t.kind == "transpose" and t.a2 is not None:
            assert t.b is not None
            nl = tile_rows(self.ir, t) // t.R
            read = sum(1 for r in src_rows(self.ir, t)[:t.R] if r is not None)
            a3 = f"A3={nm(t.a3)} x " if t.a3 is not None else ""
            unit = "line" if t.R * self.ir.operands[0].dtype.size >= 64 else "half line"
            lines.append(f"micro-kernel: transpose rows {a3}A2={nm(t.a2)} x A={nm(t.a)} ("
                         + (f"one destination {unit}" if nl == 1
                            else f"{nl} destination {unit}s, a loop of tiles whose row offsets come from one table")
                         + f"), B={nm(t.b)}, src stride 1, by {t.R}x{t.V} register tiles "
                         f"whose rows start at {read} source offsets"
                         + (f" (the other {t.R - read}: padding, zeros)" if read < t.R else ""))
            staged = stage_runs(src_rows(self.ir, t), self.nodes[t.b].extent) if self.src_stage else None
            if staged is not None:
                lines.append(f"source stage: each period's {staged[2]} source runs of {staged[3]} elements, "
                             f"{staged[1]} apart (L1 set aliases), copied first to a stage {self.src_stage} "
                             "apart, the tiles' rows read from there")
        elif t.kind == "transpose" and t.c is not None:
            assert t.b is not None
            period = len(cols_table(self.ir, t))
            lines.append(f"micro-kernel: transpose A={nm(t.a)}, dst stride 1 x the source run B={nm(t.b)} "
                         f"x C={nm(t.c)} ({self.nodes[t.b].extent * self.nodes[t.c].extent} elements), "
                         f"by {t.R}x{t.V} register tiles over {t.V}-element chunks of the run, "
                         f"destination rows placed by a table of {period}, {t.M} per macro tile "
                         f"({t.M * t.R} source rows read side by side)")
        elif t.kind == "transpose":
            assert t.b is not None
            lines.append(f"micro-kernel: transpose A={nm(t.a)}, dst stride 1 x B={nm(t.b)}, src stride 1, "
                         f"by {t.R}x{t.V} register tiles, {t.M} per macro tile "
                         f"({t.M * t.R} source rows read side by side)"
                         + (", each tile writes whole blocks" if t.rows_contiguous else ""))
        elif t.kind == "lines" and t.b is not None and self.ir.nodes[t.b].extent == 1:
            assert t.l is not None
            lines.append(f"micro-kernel: padded runs of {nm(t.l)} packed along A={nm(t.a)}, "
                         f"{t.R} runs per call, stored as whole lines")
        elif t.kind == "lines":
            assert t.b is not None and t.l is not None
            lines.append(f"micro-kernel: runs of {nm(t.l)} (contiguous on both sides) transposed over "
                         f"A={nm(t.a)} x B={nm(t.b)}, {t.R} run(s) per call, {t.M} calls per macro tile")
        else:
            lines.append(f"micro-kernel: stream along {nm(t.a)}, {t.V} elements (one destination line) per "
                         f"call, head peeled at run time"
                         + (f", {self.chunk} elements per job" if self.chunk else "")
                         + (f"; a direct conversion prefetches its source {self.stream_prefetch} B ahead"
                            if self.stream_prefetch else ""))
        if self.shifted:
            lines.append("stores: destination rows do not start on 64-byte lines: each tile goes to a small "
                         "stage, and every row's elements are realigned (a carry of under one line per row "
                         "between row groups) so that all but a row's first and last line are written as "
                         f"whole aligned non-temporal lines; {self.shift_panel * (t.V if t else 0)} rows per panel, "
                         f"source rows in groups of {shift_rows(self.ir, t) if t else 0}"
                         + ("; the line where one row ends and the next begins is staged and written "
                            "whole (edges)" if self.shift_edges else "")
                         + ("; or plain tiles straight into the rows, chosen at run time: the first calls at "
                            "each thread count, one included, time both and keep the faster" if self.nt_tune else ""))
        elif self.panel:
            assert t is not None
            a = self.nodes[t.a]
            rows = t.V * (self.panel_sub_blocks or self.panel_blocks)
            dsz = self.ir.operands[0].dtype.size
            why = ("do not start on 64-byte lines" if (a.extent * dsz) % 64
                   else f"are read {t.R} source rows at a time")
            lines.append(f"stores: destination rows of {a.extent} elements, one after another, {why}: "
                         f"the tiles of {rows} rows go to a stage (one contiguous panel "
                         f"of {rows * a.extent} elements), which is written as whole aligned non-temporal lines "
                         "(plain stores for the panel's partial first and last line)")
        elif t is not None:
            how = "plain"
            if self.nt and self.job_stage:
                how = (f"plain, into a stage of the job's {self.job_stage} destination elements, written "
                       "out as whole aligned non-temporal lines (destinations off the lines: plain)")
                if not self.nt_split:
                    how += (" when one thread runs every job (split between threads: plain and "
                            f"unstaged, below {nt_split_min_bytes(t)} B)")
            elif self.nt:
                how = "non-temporal where a call writes whole aligned lines"
                if self.nt_tune_one:
                    how = ("plain or non-temporal, chosen at run time: the first calls at each "
                           "thread count, one included, time both and keep the faster (traffic "
                           f"between {nt_min_bytes(t)} and {nt_split_min_bytes(t)} B)")
                elif self.nt_tune:
                    how = ("non-temporal where a call writes whole aligned lines when one thread runs "
                           "every job; split between threads, plain or non-temporal, chosen at run "
                           "time: the first calls at each thread count time both and keep the faster "
                           "(traffic between "
                           f"{nt_min_bytes(t)} and {nt_split_min_bytes(t)} B)")
                elif not self.nt_split:
                    how += (" when one thread runs every job (split between threads: plain, below "
                            f"{split_min_bytes(self.ir, t)} B)")
            lines.append(f"stores: {how}; vector width {self.vector_bytes} B")
            if self.job_stream_shift:
                lines.append("stores: jobs off the lines realign each tile's run of whole blocks through a "
                             "one-line carry: whole aligned non-temporal lines, the job's partial first and "
                             "last line plain")
            if self.job_prefetch:
                lines.append(f"prefetch: each tile call its share of the next job's source block "
                             f"({self.job_prefetch} elements on), to L2")
        if self.rows_ahead and self.tile is not None and self.tile.kind == "lines":
            lines.append(f"prefetch: each call's source rows, {self.rows_ahead} elements ahead")
        elif self.rows_ahead:
            lines.append("prefetch: the lines of each tile's source rows where "
                         + ("the next job reads them" if self.job_stage else "an outer step continues them")
                         + f" ({self.rows_ahead} elements on), to L2")
        if self.prefetch:
            lines.append(f"prefetch: {self.prefetch_block} B per row group, one group ahead, to "
                         + ("L2 only" if self.prefetch_l2 else "all cache levels")
                         + ("; a job's share spread over its tile calls" if self.panel_spread else ""))
        if self.row_stream_prefetch:
            assert self.tile is not None
            step = self.ir.nodes[self.tile.a].strides[1] or 0
            lined = step * self.ir.operands[1].dtype.size % 64 == 0
            lines.append(f"prefetch: each tile's source rows, {self.row_stream_prefetch} B ahead, "
                         "each row once a line (" + ("2-byte rows on the lines" if lined
                                                       else "long rows off the lines") + ")")
        if self.row_prefetch:
            assert self.tile is not None
            where = ("the next step of an outer loop continues them)" if row_continuation(self.ir, self.tile)
                     else "the next steps of the innermost outer loop continue them)")
            lines.append(f"prefetch: each tile's source rows, {self.row_prefetch} elements ahead (where {where}"
                         + (", to L2" if self.row_prefetch_l2 else ""))
        if self.elem_prefetch:
            lines.append(f"prefetch: each step around the innermost loop, a source line "
                         f"{self.elem_prefetch} elements ahead (short pieces of each step's bytes)")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _tile_supported(sdt: DataType, ddt: DataType) -> bool:
    try:
        from . import simd
    except Exception:  # pragma: no cover - simd needs llvmlite, which numba brings
        return False
    return bool(simd.supports(sdt, ddt))


def _digit_order_ok(ir: LoopIR, nodes: list[Node], n: Node) -> bool:
    """A padded dim's node can be consumed by a micro-kernel only as its lightest digit
    (or as the lightest left, with the dim's bounds multiples of its weight)."""
    if n.dim is None or not ir.dims[n.dim].guarded:
        return True
    if any(m.dim == n.dim and m is not n and m.weight < n.weight for m in nodes):
        return False
    # a heavier digit whose lighter ones merged away as uniform digits (_uniform_digit)
    return n.weight == 1 or _uniform_digit(ir, n, span=n.weight)


def _lines_digits_ok(ir: LoopIR, nodes: list[Node], a: Node, b: Node, run: Node) -> bool:
    """Rows A and columns B may share the run's padded dim (as its next-heavier digit), not each other's."""
    guarded = [n for n in (a, b, run) if n.dim is not None and ir.dims[n.dim].guarded]
    dims = [n.dim for n in guarded]
    if len(dims) != len(set(dims)):
        if a.dim == b.dim:
            return False
        other = a if a.dim == run.dim else b
        # the run is the lightest digit, the other node the next one, every other digit heavier
        if run.weight != 1 or other.weight != run.extent:
            return False
        return not any(m.dim == run.dim and m is not run and m is not other and m.weight < other.weight
                       for m in nodes)
    return all(_digit_order_ok(ir, nodes, n) for n in guarded)


#: Runs shorter than a line, back to back on both sides but for their dim's padding
#: (same-layout conversions of a padded blocked layout: f32 -> bf16 `nCdhw16c`, C = 30),
#: packed whole into lines as "lines" plans with a unit column node
#: (``LAYOUTJIT_SAME_PLACE_RUNS=0``: element loops).
SAME_PLACE_RUNS = os.environ.get("LAYOUTJIT_SAME_PLACE_RUNS", "1") != "0"

#: Same-place runs whose row node is a padded dim's digit (`OIhw4i16o4i -> OhwI16o4i` with
#: O = 1000: the o steps of the last block past the data are zero rows), in place of element
#: loops. A/B as above: bf16 -> f32 `BcdeA16b4a -> BAcde2b8a16b4a` 13x1x13x112x64 1.97 ->
#: 0.60 at 1 thread; with ``SPLIT_MERGE`` the pairs there.
SAME_PLACE_PADDED = os.environ.get("LAYOUTJIT_SAME_PLACE_PADDED", "1") != "0"


#: Longest run (elements) of a "lines" plan: its calls are ``simd.gather``/``simd.tile``
#: micro-kernels, at most ``simd.MAX_GATHER`` elements a row.
LINES_MAX_RUN = int(os.environ.get("LAYOUTJIT_LINES_MAX_RUN", 128))


def _runs_per_call(run_bytes: int) -> int:
    """Runs a "lines" call packs: those that fill one 64-byte line, or for runs longer
    than a line (1-byte runs of 65-128) the fewest that end on a line (96 B: 2)."""
    if run_bytes < 64:
        return 64 // run_bytes if 64 % run_bytes == 0 else 1
    g = 64 // math.gcd(run_bytes, 64)
    return g if g * run_bytes <= LINES_MAX_CALL_BYTES else 1


#: Most bytes one "lines" call of runs longer than a line packs (72 B runs: 8, 576 B).
LINES_MAX_CALL_BYTES = 640


def choose_tile(ir: LoopIR, vbytes: int, allow: bool = True, allow_cols: bool = True
                ) -> tuple[LoopIR, TileSpec | None, list[str]]:
    """Pick the micro-kernel for the innermost nodes, if any (see TileSpec)."""
    notes: list[str] = []
    nodes = list(ir.nodes)
    if not allow or not nodes or vbytes < 16:
        return ir, None, notes
    dst, src = ir.operands[0], ir.operands[1]
    if not _tile_supported(src.dtype, dst.dtype):
        notes.append(f"no vector micro-kernel for {src.dtype}->{dst.dtype}")
        return ir, None, notes
    if any(s is None for n in nodes for s in n.strides):
        notes.append("an operand's blocks do not nest with the others: its offsets come from the "
                     "logical index, in element loops")
        return ir, None, notes
    ssz, dsz = src.dtype.size, dst.dtype.size
    ia = next((i for i, n in enumerate(nodes) if n.strides[0] == 1), None)
    ib = next((i for i, n in enumerate(nodes) if n.strides[1] == 1), None)
    if ia is None or ib is None:
        return ir, None, notes
    if ia != ib:
        if any(s is None for n in (nodes[ia], nodes[ib]) for s in n.strides):
            return ir, None, notes  # an operand's offset comes from the index: element loops
        return _transpose(ir, nodes, ia, ib, vbytes, ssz, dsz, notes, allow_cols)
    run = nodes[ia]
    if not _digit_order_ok(ir, nodes, run) or any(s is None for s in run.strides):
        return ir, None, notes
    run_bytes = run.extent * dsz
    ia2 = next((i for i, n in enumerate(nodes) if i != ia and n.strides[0] == run.extent), None)
    ib2 = next((i for i, n in enumerate(nodes) if i != ia and n.strides[1] == run.extent), None)
    if (ia2 is not None and ib2 is not None and ia2 != ib2 and run_bytes <= 128
            and run.extent <= LINES_MAX_RUN and all(s is not None for s in nodes[ia2].strides + nodes[ib2].strides)
            and _lines_digits_ok(ir, nodes, nodes[ia2], nodes[ib2], run)):
        a, b = nodes[ia2], nodes[ib2]
        G = _runs_per_call(run_bytes)
        G = min(G, a.extent)
        M = max(1, min(-(-a.extent // G), READ_STREAMS_BLOCKED // G))
        rest = [n for i, n in enumerate(nodes) if i not in (ia, ia2, ib2)]
        nodes2 = rest + [a, b, run]
        k = len(rest)
        rc = b.strides[0] == a.extent * run.extent
        return ir.with_nodes(nodes2, "choose_tile"), TileSpec("lines", k, k + 1, G, 1, M, rc, k + 2), notes
    packed = _packed_padded_runs(ir, nodes, run, ia, run_bytes)
    if packed is not None:
        return packed[0], packed[1], notes
    if (ia2 is not None and ia2 == ib2 and SAME_PLACE_RUNS and run_bytes < 64 and 64 % run_bytes == 0
            and all(s is not None for s in nodes[ia2].strides)
            and _lines_digits_ok(ir, nodes, nodes[ia2],
                                 _unit_column(nodes[ia2]) if SAME_PLACE_PADDED else nodes[ia2], run)):
        # runs back to back on both sides, kept apart by the padding of their dim
        # (_same_place_runs)
        ir2, spec = _lines_with_unit_column(ir, nodes, ia2, ia, min(64 // run_bytes, nodes[ia2].extent))
        return ir2, spec, notes
    if run_bytes >= 64:
        rest = [n for i, n in enumerate(nodes) if i != ia]
        V = max(1, 64 // dsz)
        return ir.with_nodes(rest + [run], "choose_tile"), TileSpec("stream", len(rest), None, 1, V, 1, True), notes
    return ir, None, notes


#: Stream plans whose runs are whole destination lines walk the outer loops in source order
#: (``LAYOUTJIT_STREAM_SRC_ORDER=0``: destination order, for A/B runs).
STREAM_SRC_ORDER = os.environ.get("LAYOUTJIT_STREAM_SRC_ORDER", "1") != "0"


def _stream_src_order(ir: LoopIR, tile: TileSpec) -> bool:
    """A stream plan with non-temporal stores whose every run starts on a destination line
    and is a whole number of lines: read the source in order instead of the destination.

    In destination order the node next to the run jumps through the source; when it is
    long, a job reads one run from each of its places, and the next job the next run of
    each (``abcd -> acbd`` 16x512x12x64 f32, heads split: 512 runs 3 KB apart). Whole-line
    runs lose nothing by being written anywhere (NT stores of whole lines read nothing),
    so the reads go in order. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads),
    destination -> source order, `abcd -> acbd`: 16x512x12x64 1.75 -> 0.74 (1.21 -> 0.58),
    16x256x12x128 1.30 -> 0.67 (1.01 -> 0.61), 8x64x12x1024 0.75 -> 0.54 (0.69 -> 0.56),
    4x256x256x64 1.66 -> 0.65 (1.25 -> 0.62), 4x200x256x64 1.62 -> 0.69 (1.34 -> 0.67);
    16x12x512x64 (512 destination streams) 0.69 -> 0.73 (0.59 -> 0.57).
    """
    if not STREAM_SRC_ORDER or len(ir.nodes) < 3:
        return False
    run = ir.nodes[tile.a]
    if run.extent % _line_elems(ir) or (run.dim is not None and ir.dims[run.dim].guarded
                                        and not (STREAM_SRC_ORDER_PADDED and _bounds_on_lines(ir, run))):
        return False
    return _starts_on_lines(ir, ir.nodes[:tile.a])


#: ... also where the run's dim is padded with its bounds on destination lines
#: (``_bounds_on_lines``), so that its calls still write whole lines of data or zeros.
STREAM_SRC_ORDER_PADDED = os.environ.get("LAYOUTJIT_STREAM_SRC_ORDER_PADDED", "1") != "0"


def _bounds_on_lines(ir: LoopIR, run: Node) -> bool:
    """Whether a padded run's data and zeros change only at whole destination lines (the
    run has destination stride 1: its dim's ``valid`` and ``write`` fall on lines)."""
    if run.dim is None or run.strides[0] != 1:
        return False
    r = ir.dims[run.dim]
    return all(b % (_line_elems(ir) * run.weight) == 0 for b in (r.valid, r.write))


def _line_elems(ir: LoopIR) -> int:
    """Destination elements in a 64-byte line."""
    return max(1, 64 // ir.operands[0].dtype.size)


def _starts_on_lines(ir: LoopIR, nodes: Sequence[Node]) -> bool:
    """Whether every step of ``nodes`` moves the destination by whole lines from a start on
    a line: what the inner loops write then starts on a line wherever the outer ones put it
    (the source orders below, ``_stream_src_order`` and ``_block_src_order``)."""
    q = _line_elems(ir)
    return ir.operands[0].offset0 % q == 0 and all(n.strides[0] is not None and n.strides[0] % q == 0
                                                    for n in nodes)


#: Whole-block NT transposes walk their outer loops in source order (``_block_src_order``).
BLOCK_SRC_ORDER = os.environ.get("LAYOUTJIT_BLOCK_SRC_ORDER", "1") != "0"
#: ... with plain stores too (in cache), for tiles that write whole blocks from 4 to 8
#: source rows (``BLOCK_SRC_ORDER_PLAIN_ROWS``). `ohwi -> OIhw8i8o` f32 128x1024x3x3: 8x8
#: tiles read 32 B of 8 rows 36 KB apart, the hw step 4 KB on (every line of a job in one
#: L1 set), and the i-block step that reads the rest of those lines came a whole job later.
#: A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), destination -> source order:
#: that pair 3.56 (3.59) -> 1.15 (1.15), oneDNN 3.60 (3.71), which it had been even with;
#: f32 -> u8 5x1 4.68 (4.74) -> 2.15 (1.98); `OIhw16i16o -> OIhw4o4i` 256x64x3x3 2.18
#: (1.81) -> 1.15 (1.04); `IOhw16i16o -> OIhw4o4i` 320x200x3x7 2.26 (2.27) -> 1.09 (1.27);
#: `gOhwi16o -> gOIhw4o4i` 2.07 (1.77) -> 1.10 (1.20); 15 more of 22 sampled of the 150
#: changed pairs (of 3333 listed and generated) within the noise. Tiles of 2 and 3 rows lost
#: (`hwio -> OIhw8i16o2i` 256x64x3x3 1.05 -> 1.82, bf16 -> f32 `IOhw16o16i -> oihw` 1x3
#: 1.60 -> 1.98), and so did tiles of 16 rows at 2 threads (s8 `IOhw16o16i -> OIhw16i16o`
#: 256x64x3x3 1.40 -> 2.52, `-> OIhw8i8o` 1.37 -> 2.01, f32 `IOhw16o16i -> Ohwi16o`
#: 384x96x5x3 1.11 -> 1.66; even at 1 thread): both keep the destination order.
BLOCK_SRC_ORDER_PLAIN = os.environ.get("LAYOUTJIT_BLOCK_SRC_ORDER_PLAIN", "1") != "0"
BLOCK_SRC_ORDER_PLAIN_ROWS = (4, 8)


#: Cols transposes whose source rows continue across an outer node walk their outer loops
#: in source order (``_cols_src_order``; 0: destination order).
COLS_SRC_ORDER = os.environ.get("LAYOUTJIT_COLS_SRC_ORDER", "1") != "0"


def _cols_src_order(ir: LoopIR, tile: TileSpec) -> int:
    """Outer nodes to put in source order for a cols transpose (NT) whose source rows go on
    past the tile's run into an outer node's next step (0: none).

    `oihw -> IOhw16i16o` f32 98304x40x1x3: each tile reads 16 rows (o) of 48 elements (16 i
    x 3 hw) of a 120-element source row, whose next 48 belong to the next i-block, the
    outermost node in destination order: the source was swept three times, a piece of
    each row (and of its lines) at a time. A/B on Zen 3 (AVX2), ratio to copy at 1 thread
    (2 threads), destination -> source order: that pair 2.72-2.85 (1.91-1.96) -> 1.85-1.98
    (1.29-1.31), oneDNN 3.52 (2.99); s8 -> f32 98304x56x3x5 1.90 (1.40) -> 1.34 (1.17);
    bf16 `iohw -> OIhw8o8i` 256x512x7x7 1.67 (1.89) -> 1.26 (1.58); f32 `iohw ->
    OIhw16o16i` 3x5 1.37 (2.59) -> 1.29 (1.27). 35 of 6915 listed and generated pairs
    changed, all measured: one lost (`iohw -> OIhw4o4i` f32 256x512x5x5 1.57 (1.99) -> 2.24
    (2.37)), the rest gained or stayed within the noise."""
    assert tile.c is not None and tile.b is not None
    if not COLS_SRC_ORDER:
        return 0
    n = len(ir.nodes)
    if sorted((tile.a, tile.b, tile.c)) != [n - 3, n - 2, n - 1] or n < 5:
        return 0
    b, c = ir.nodes[tile.b], ir.nodes[tile.c]
    run = b.extent * c.extent
    if b.strides[1] != 1 or c.strides[1] != b.extent:
        return 0
    outer = ir.nodes[:n - 3]
    if not _starts_on_lines(ir, outer) or any(m.strides[1] is None for m in outer):
        return 0
    if not any(m.strides[1] == run for m in outer):
        return 0
    src = [m.strides[1] or 0 for m in outer]
    return 0 if src == sorted(src, reverse=True) else n - 3


def _block_src_order(ir: LoopIR, tile: TileSpec) -> int:
    """Outer nodes to put in source order for a transpose whose tiles write whole blocks of
    whole lines with NT stores (0: none), as :func:`_stream_src_order` does for streams.

    `cdab -> ABcd8b8a` s8 -> f32 13x32x512x100: the destination order puts the 51200
    (c, d) positions innermost, 416 B apart in the source, and the 8 a and b blocks
    outside, 8-256 B apart: every (a, b) block swept the whole source again for a 64 B
    part of each 416 B. Whole-line blocks lose nothing by being written anywhere.
    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), destination -> source
    order: 2.91-3.82 (1.68-2.88) -> 0.59-1.27 (0.69-0.95) (oneDNN 3.72 (3.91)). Only where
    a tile's source rows are parts of lines (the rest of each line belongs to another
    outer step, far away in destination order): tiles that read whole lines lost (9x16 f32
    `OIhw16o16i -> oihw` 1024x1024x3x3 1.35 -> 1.49 (1.66 -> 1.79), `gOIhw16o16i ->
    goihw` 64x64x1024x3x3 1.04 -> 1.42 (0.93 -> 1.15)). Plans whose outer loops are in
    source order already are left as they are.

    Tiles that write whole lines apart (not whole blocks) take the same order where an
    outer step moves the source by less than a line (``_shares_source_lines``): in
    destination order each of its steps re-read the lines a whole sweep later. A/B, ratio
    to copy at 1 thread (2 threads), destination -> source order: f32 -> s8 `ABcd4b16a4b
    -> acbd` 3x1x384x512 0.30 (0.29) -> 0.13 (0.14); bf16 `ABcd4b16a4b -> acbd`
    13x56x1024x64 7.54 (5.53) -> 1.38 (1.38); f32 -> bf16 `cdab -> acbd` 112x8x12x1024 4.45
    (4.13) -> 2.33 (1.88); `adbc -> bacd` 1024x128x8x32 3.59 (3.43) -> 1.55 (1.55); 20 of
    22 random pairs it changed gained, two stayed within noise.
    """
    if tile.kind == "lines":
        return _lines_src_order(ir, tile)
    if not BLOCK_SRC_ORDER or tile.kind != "transpose" or tile.b is None:
        return 0
    if tile.c is not None and tile.a2 is None and tile.l is None:
        return _cols_src_order(ir, tile)
    if tile.c is not None or tile.l is not None or tile.a2 is not None:
        return 0
    n = len(ir.nodes)
    if sorted((tile.a, tile.b)) != [n - 2, n - 1] or n < 4:
        return 0
    ssz = ir.operands[1].dtype.size
    outer = ir.nodes[:n - 2]
    if not _starts_on_lines(ir, outer) or any(m.strides[1] is None for m in outer):
        return 0
    if tile.rows_contiguous:
        if (tile.R * tile.V) % _line_elems(ir) or (tile.V * ssz >= 64 and not _scattered_line_reads(ir, outer)):
            return 0
    elif (tile.R % _line_elems(ir) or not _shares_source_lines(ir, tile, outer)):
        return 0
    src = [m.strides[1] or 0 for m in outer]
    return 0 if src == sorted(src, reverse=True) else n - 2


#: Lines tiles writing whole blocks walk their outer loops in source order where the
#: destination order reads more than this many source rows before they continue
#: (``_lines_src_order``; ``LAYOUTJIT_LINES_SRC_ORDER=0``: never).
LINES_SRC_ORDER = os.environ.get("LAYOUTJIT_LINES_SRC_ORDER", "1") != "0"


def _lines_src_order(ir: LoopIR, tile: TileSpec) -> int:
    """Outer nodes to put in source order for a "lines" plan whose calls write whole
    blocks of whole lines (``_block_src_order`` for runs instead of elements).

    In destination order the outer node that continues the tiles' source rows (the one of
    least source stride) may sit outside a long loop: `nhwc -> OIhw8i16o2i` f32
    224x96x24x96 reads 16 rows of 64 B per block, the next 64 B of each (the next 16 i)
    a whole sweep over the 2304 pixels later, 36864 rows read side by side. In source
    order that step is innermost and the reads follow the rows; the blocks, whole lines,
    lose nothing by being written anywhere. Only where the destination order reads more
    rows side by side than ``READ_STREAMS_BLOCKED`` before the rows continue, or, for
    blocks under 512 B (source order writes them a sweep apart), than ``READ_STREAMS``:
    s8 -> f32 `OIhw4o4i -> NChw16n16c` 32x30x112x192 (16 rows, 256 B blocks) lost 0.81 ->
    0.98x copy at 1 thread, f32 -> bf16 `nChw8c -> OIhw4i16o4i` 512x2x112x128 (32 rows,
    256 B) 1.27 -> 1.48, where `AcdB32a4b -> ABcd8b16a2b` 13x64x100x48 (256 B, a million
    rows) gained 1.23 (1.66) -> 0.93 (0.77). A/B on Zen 3 (AVX2), ratio
    to copy at 1 thread (2 threads), destination -> source order: that `nhwc` pair 2.10-2.51
    (1.82-2.02) -> 0.73-0.79 (0.69-0.77); `cdab -> OIhw8i16o2i` 48x48x112x100 1.64-1.70
    (1.27-1.76) -> 1.11-1.14 (0.86-1.30); `Bcda16b -> aCdB8c2b` 16x1024x12x224 3.73 (2.23)
    -> 0.91 (0.53); `AcdB4b16a4b -> aCdB24c2b` 512x12x384x24 3.27 (1.72) -> 2.00 (0.98);
    s8 -> u8 `AcdeB4b8a4b -> ABcde16b64a4b` 112x224x13x13x32 0.97 (1.06) -> 0.43 (0.57);
    bf16 -> f32 `Ohwi8o -> OIhw16i16o` 100x256x128x17 0.73 (0.65) -> 0.45 (0.50).
    """
    if not LINES_SRC_ORDER or tile.b is None or tile.l is None:
        return 0
    outer = ir.nodes[:tile.a]
    if len(outer) < 2 or not _starts_on_lines(ir, outer) or any(m.strides[1] is None for m in outer):
        return 0
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    src = [abs(m.strides[1] or 0) for m in outer]
    if src == sorted(src, reverse=True):
        return 0
    if not tile.rows_contiguous:
        return tile.a if _line_pieces_src_order(ir, a, b, run, outer) else 0
    if (a.extent * b.extent * run.extent) % _line_elems(ir):
        return 0
    if _far_source_pieces(ir, outer):
        return tile.a
    k = src.index(min(src))  # the step that continues the rows
    # (blocks under 512 B, written a sweep apart in source order, want more rows to gain)
    block_bytes = a.extent * b.extent * run.extent * ir.operands[0].dtype.size
    most = READ_STREAMS_BLOCKED if block_bytes >= 512 else READ_STREAMS
    if a.extent * math.prod(m.extent for m in outer[k + 1:]) <= most:
        return 0
    return tile.a


def _line_pieces_src_order(ir: LoopIR, a: Node, b: Node, run: Node, outer: Sequence[Node]) -> bool:
    """Whether a lines plan whose calls write several whole lines apart (A x the run one
    destination piece of whole lines, B placing the pieces on lines) takes the source
    order: where, in destination order, the outer loops inside the step that continues
    the calls' source rows read more than ``READ_STREAMS`` stretches side by side (A's
    rows a line apart or less count as one), and the source holds half the LLC or more.

    f32 -> u8 `gOhwi16o -> gOIhw8i8o` 125x64x56x1x56: each call converts 8 c x 16 o (512 B
    of the source, two 64 B destination lines 25 KB apart); the c blocks (512 B on in the
    source) ran outside the 56 w (3.5 KB on), seven passes each reading a 512 B piece of
    every 3.5 KB. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2 threads),
    destination -> source order: 1.74-1.80 (1.36-2.00) -> 0.79-0.81 (0.76), oneDNN 2.9-3.1
    (2.0-3.3); f32 -> bf16 `IOhw16o16i -> IOhw8o8i` 96x16x448x24 1.40 (1.10) -> 0.67
    (0.67); f32 `OIhw2i8o4i -> OhwI16i48o2i` 32x224x16x112 1.56 (1.18) -> 0.74 (0.76),
    oneDNN 3.15 (2.27); `IOhw2i8o16i2o -> IhwO8i2o` 192x56x224x13 1.35 (1.51) -> 0.72
    (0.70); `gIOw8o8i -> abDC8d8c` 8x512x1024x7 1.12 (0.85) -> 0.63 (0.68). Without the
    stream count (``_far_source_pieces`` and A's rows counted each) it lost where few far
    stretches were read side by side (`OIhw8i8o2i -> hwoi` 7x112x56x1024, 7: 0.57 (0.67)
    -> 0.89 (0.75)); without the LLC gate, bf16 -> f32 `gOIw8o4i -> gOwI16i32o2i`
    1x37x512x256 (a 10 MB source, its pieces read again from the LLC) lost 0.83 -> 1.18 at
    1 thread."""
    if not LINE_PIECES_SRC_ORDER:
        return False
    if (a.strides[0] != run.extent or run.strides[0] != 1 or (a.extent * run.extent) % _line_elems(ir)
            or not _starts_on_lines(ir, [b])):
        return False
    ssz = ir.operands[1].dtype.size
    if math.prod(r.valid for r in ir.dims) * ssz < llc_bytes() // 2:
        return False
    # the outermost step that moves the source by less than LINE_PIECES_NEAR_BYTES continues
    # the calls' stretches; the loops inside it, and A, read one stretch per position
    # (steps a line apart or less stay in one)
    k = next((i for i, m in enumerate(outer) if 0 < abs(m.strides[1] or 0) * ssz < LINE_PIECES_NEAR_BYTES),
             None)
    if k is None:
        return False
    streams = math.prod(m.extent for m in [a, *outer[k + 1:]] if abs(m.strides[1] or 0) * ssz > 64)
    return streams > READ_STREAMS


#: Lines plans whose calls write several pieces of whole lines apart take the source order
#: as ``_lines_src_order`` (``_line_pieces_src_order``; ``LAYOUTJIT_LINE_PIECES_SRC_ORDER=0``:
#: never).
LINE_PIECES_SRC_ORDER = os.environ.get("LAYOUTJIT_LINE_PIECES_SRC_ORDER", "1") != "0"
LINE_PIECES_NEAR_BYTES = 65536


def _far_source_pieces(ir: LoopIR, outer: Sequence[Node]) -> bool:
    """Whether, in destination order, an outer step that moves the source by less than
    ``FAR_PIECES_BYTES`` runs outside loops that sweep ``FAR_ROWS_SPAN_BYTES`` or more of
    it: each sweep then reads a short piece of every stretch of the source, whose next
    piece comes a sweep later (from memory again, the prefetchers restarted per piece).

    `OIhw4o4i -> IOhw16o16i` f32 51200x100x5x1: the I blocks (1280 B on in the source) were
    the job loop outside the O blocks (32 KB on): seven sweeps, each reading 1280 B of every
    8000 B. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), destination ->
    source order: 1.53-1.59 (1.23-1.27) -> 0.71-0.72 (0.70-0.71), oneDNN 4.73-4.99
    (3.53-3.61); the O blocks moved outside the I blocks alone (5 KB destination pieces
    kept) 1.10 (0.78). Pieces up to 64 KB: `OIhw4i16o4i -> IOhw16o16i` f32 49152x256x1x7
    (pieces of 7 KB) 1.46 (1.06) -> 0.70 (0.70), 106496x24x3x3 1.27 (0.88) -> 0.63
    (0.64), f32 -> bf16 6144x128x3x7 (21 KB) 1.91 (1.87) -> 1.12 (1.40); s8
    `IOhw16o16i -> OIhw4i16o4i` 512x1024x7x7 1.70 (1.27) -> 0.84 (1.11); bf16 `OIhw8i16o2i
    -> IOhw16o16i` 512x1024x3x5 3.18 (1.99) -> 1.35 (1.43); `IOhw16o16i -> OIhw4i16o4i`
    f32 -> bf16 16384x384x5x3 1.87 (1.18) -> 1.20 (0.99); 27 of 6649 listed and generated
    pairs changed, all measured, the rest gained or stayed even. Tensors that move less
    than ``one_rule_min_bytes`` keep the destination order: bf16 256x2048x3x3 (9 MB)
    gained at 1 thread and lost at 2 (`OIhw8i16o2i -> IOhw16o16i` 1.85 -> 2.45; u8
    `IOhw16o16i -> OIhw4i16o4i` 768x256x7x7 1.89 -> 2.47)."""
    if not FAR_PIECES_BYTES:
        return False
    ssz = ir.operands[1].dtype.size
    if data_bytes(ir) < one_rule_min_bytes():
        return False  # (in cache at 2 threads: 9 MB bf16 and u8 weights lost there)
    return any(0 < abs(m.strides[1] or 0) * ssz < FAR_PIECES_BYTES
               and _source_span(outer[i + 1:]) * ssz >= FAR_ROWS_SPAN_BYTES
               for i, m in enumerate(outer))


#: Source step (bytes) under which an outer step outside a long sweep of the source puts a
#: lines plan's outer loops in source order (``_far_source_pieces``; 0: never).
FAR_PIECES_BYTES = int(os.environ.get("LAYOUTJIT_FAR_PIECES_BYTES", 65536))


#: NT transposes whose job loop barely moves the source read their rows a few at a time
#: (``_far_rows_order``; ``LAYOUTJIT_FAR_ROWS_ORDER=0``: never).
FAR_ROWS_ORDER = os.environ.get("LAYOUTJIT_FAR_ROWS_ORDER", "1") != "0"
#: Most tile calls between two steps of the node that continues the tiles' source rows.
FAR_ROWS_STREAMS = 16
#: 1: that node goes innermost of the outer loops instead (A/B probes only).
FAR_ROWS_INNERMOST = 0
#: Least source span (bytes) between two of its steps: below it the rows' next pieces are
#: still in cache (`OIhw16o16i -> oihw` 1024x1024x3x3, 576 KB: 1.16 -> 1.41x copy).
FAR_ROWS_SPAN_BYTES = 1 << 20
#: Least source bytes of a row group (the tile's A) where the move breaks a step that
#: continues the destination lines: groups of 256 B lost (`Acb16a -> nCw8c`).
FAR_ROWS_CONTINUED_READ_BYTES = 1024


def _far_rows_order(ir: LoopIR, tile: TileSpec) -> LoopIR | None:
    """The outer step that continues the tiles' source rows moved inward until at most
    ``FAR_ROWS_STREAMS`` tile calls run between two of its steps, for NT transposes that
    write whole lines.

    `oihw -> IOhw16o16i` 1024x1024x5x5: the destination order makes the I blocks the job
    loop. The source step of an I block is 16 x 25 elements, so each job read one 1.6 KB
    piece of every one of the 1024 o rows, 100 KB apart, and the next job read the next
    piece of each. The prefetchers never saw a stream. With the O blocks outside the I
    blocks, a job reads 16 rows in order and writes 64 runs of 25 KB, each whole lines
    (NT stores of whole lines read nothing wherever they land).

    Only where the source between two steps of that node spans ``FAR_ROWS_SPAN_BYTES``
    (else its next pieces come from cache), and where the move passes a step that continues
    the destination lines (the tiles' rows then jump at every call) only for row groups of
    ``FAR_ROWS_CONTINUED_READ_BYTES`` or more. A/B on Zen 3 (AVX2), ratio to copy at 1
    thread (2 threads), destination order -> moved: `oihw -> IOhw16o16i` bf16 1024x1024x5x5
    1.39-1.82 (1.35-1.41) -> 1.02-1.07 (0.88-0.89), 3x3 2.36-2.64 (1.49-1.82) -> 0.87-0.88
    (0.74-0.75), f32 -> bf16 3x3 2.06 (1.86) -> 0.87 (0.67), f32 3x3 1000x512 1.26-1.69
    (1.26-1.37) -> 0.80-1.17 (0.83-0.88), f32 5x5 1.79 (1.64) -> 1.48 (1.41), f32 -> s8 7x3
    2.35-3.41 (2.33-2.57) -> 1.40-1.45 (1.17-1.23), u8 7x7 1.59 (1.83) -> 1.52 (1.09);
    `OIhw4o4i -> Ohwi16o` 96x128x8x192 1.43-1.58 (0.96-1.33) -> 0.47-0.56 (0.36-0.56);
    `hwio -> OIhw8i16o2i` f32 -> bf16 1024x512x11x7 3.48-4.63 (2.35-3.61) -> 0.64-1.37
    (1.48-1.62); `OIhw16o16i -> hwio` bf16 -> f32 48x256x64x48 1.09-1.33 (1.00-1.25) ->
    0.41-0.54 (0.41-0.62), f32 7x7 1.35-1.53 (1.13-1.27) -> 1.25-1.27 (0.91-1.03);
    `OIhw16i16o -> ohwi` f32 -> bf16 768x1024x11x7 1.61-2.11 (1.12-1.69) -> 0.97-1.60
    (0.88-1.18); `IOhw16i16o -> oihw` 1024x512x7x7 1.80 (1.44) -> 1.15 (0.90), 3x3 1.85
    (1.69) -> 1.06 (1.03), bf16 1024x1024x3x3 2.82 (1.82) -> 2.25 (1.86). Lost before the
    two limits: `OIhw16o16i -> oihw` 1024x1024x3x3 (576 KB span) 1.16 (1.21) -> 1.41
    (1.29), `Acb16a -> nCw8c` bf16 -> f32 (256 B row groups) 1.68-1.88 (0.70-1.00) ->
    2.18-2.63 (0.97-1.38), s8 `AcdeB8b8a -> aBdec64b` 0.70-0.80 (0.71-0.78) -> 1.52-1.86
    (1.33-1.68).
    """
    if not FAR_ROWS_ORDER or tile.kind != "transpose" or tile.b is None or tile.c is not None:
        return None
    first = min(tile.nodes)
    outer = list(ir.nodes[:first])
    if len(outer) < 2 or any(s is None for m in outer for s in m.strides) or not _starts_on_lines(ir, outer):
        return None
    k = _continuing_step(outer)
    if k is None:
        return None
    # the calls of a step counted first (FAR_ROWS_CALLS), else the steps alone
    calls = _tile_calls_per_step(ir, tile) if FAR_ROWS_CALLS else 1
    for per_step in sorted({calls, 1}, reverse=True):
        moved = _far_rows_moved(ir, tile, outer, k, per_step)
        if moved is not None:
            return ir.with_nodes(moved + list(ir.nodes[first:]), "far_rows_order")
    return None


def _far_rows_moved(ir: LoopIR, tile: TileSpec, outer: list[Node], k: int, per_step: int
                    ) -> list[Node] | None:
    """The outer nodes with node k (continuing the tiles' source rows) moved inward until at
    most ``FAR_ROWS_STREAMS`` tile calls (``per_step`` a step) run between two of its steps;
    None where it stays (see :func:`_far_rows_order`)."""
    if math.prod(m.extent for m in outer[k + 1:]) * per_step <= FAR_ROWS_STREAMS:
        return None
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    if _source_span(outer[k + 1:]) * ssz < FAR_ROWS_SPAN_BYTES:
        return None
    outer = list(outer)
    step = outer.pop(k)
    j = len(outer)
    if not FAR_ROWS_INNERMOST:
        j = k
        while j < len(outer) and math.prod(m.extent for m in outer[j:]) * per_step > FAR_ROWS_STREAMS:
            j += 1
    passed = outer[k:j]
    if any(_guarded(ir, m) and m.dim == step.dim for m in passed):
        return None  # (a padded dim's digits stay heaviest-first)
    a = ir.nodes[tile.a]
    if (any(abs(m.strides[0] or 0) * dsz <= 64 for m in passed)
            and a.extent * abs(a.strides[1] or 0) * ssz < FAR_ROWS_CONTINUED_READ_BYTES):
        return None
    outer.insert(j, step)
    return outer


#: Count the tile calls of one outer step in ``_far_rows_order`` (the column tiles that share
#: a line of far source rows, ``_tile_calls_per_step``), not the steps alone
#: (``LAYOUTJIT_FAR_ROWS_CALLS=0``: steps, for A/B runs).
FAR_ROWS_CALLS = os.environ.get("LAYOUTJIT_FAR_ROWS_CALLS", "1") != "0"


def _tile_calls_per_step(ir: LoopIR, tile: TileSpec) -> int:
    """Tile calls inside one step of the outer loops, counted where they split source rows
    of at most a line between them (column tiles over B) and the rows are far apart (one
    index digit, not following one another); else 1.

    `Goihw16g -> gOIhw16o16i` f32 256x16x256x5x5: 16x8 tiles, two to the 16 g of a source
    row, 16 o steps between two steps of hw (which continues the rows): 32 calls, 256
    source rows 400 KB and 1.6 KB apart read a line each before their next lines. Counted
    as 16 steps, the order stayed. Zen 3 (AVX2), one process, ratio to copy at 1 thread (2
    threads), steps -> calls, medians of 5 rounds: 256x16x256x5x5 2.04 (1.47) -> 1.35 (1.00),
    oneDNN 5.43 (3.88); 512x16x128x7x7 1.72 (1.22) -> 1.18 (0.93); 64x16x384x5x7 2.10
    (1.30) -> 1.32 (0.98); 128x32x256x3x3 2.43 (2.13) -> 2.13 (1.42); 1x16x384x5x7 1.14
    (1.15) -> 0.97 (0.99). Not for tiles whose rows follow one another (`IOhw16o16i ->
    hwio` 192x384x7x3: one 1 KB block a call, 2 threads 1.41 -> 2.55), nor where rows come
    from two index digits or are longer than a line: 16 of the 20 listed pairs the count
    changed that way went both ways (`Goihw16g -> gOIhw4i16o4i` 64x200x40x5x7 0.93 -> 1.89,
    bf16 `iohw -> OIhw8i16o2i` 512x1024x7x7 1.92 -> 1.32)."""
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    if (tile.a2 is not None or b.extent * ir.operands[1].dtype.size > 64 or b.strides[1] != 1
            or _rows_follow(a, b)):
        return 1
    return -(-b.extent // tile.V)


def _scattered_line_reads(ir: LoopIR, outer: Sequence[Node]) -> bool:
    """Whether tiles that read whole source lines and narrow them 4x or more (f32 -> s8)
    take the source order all the same: in destination order the outer step that continues
    their rows runs outside loops that sweep ``SCATTERED_READS_BYTES`` or more of the
    source, so every line read is far from the last (`hwio -> OIhw4i16o4i`: 4 rows 2 KB
    apart, a line each, then the next i 8 KB on and the next hw 1 MB on; the next line of
    the rows a whole sweep later). Written a line at a time, the destination takes the
    scatter instead (NT stores of whole lines read nothing). A/B on Zen 3 (AVX2), ratio to
    copy at 1 thread (2 threads), destination -> source order: f32 -> s8 `hwio ->
    OIhw4i16o4i` 512x512x7x7 3.19 (2.66) -> 1.39 (1.17), `hwio -> OIhw16i16o` 1.40 (1.39)
    -> 1.15 (1.08). Without the narrowing no gain (f32 `hwio -> OIhw4i16o4i` 0.86 (0.68)
    -> 0.83 (0.65), f32 -> bf16 1.27 (1.29) -> 1.40 (1.28)), and the sweep below it lost
    (`OIhw16o16i -> oihw` 1024x1024x3x3, 576 KB: f32 0.95 (1.45) -> 1.41 (1.65), f32 -> s8
    3.61 (2.45) -> 3.30 (2.72))."""
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    if not SCATTERED_READS_BYTES or ssz < 4 * dsz:
        return False
    k = _continuing_step(outer)
    return k is not None and _source_span(outer[k + 1:]) * ssz >= SCATTERED_READS_BYTES


def _continuing_step(outer: Sequence[Node]) -> int | None:
    """Index of the outer node of least nonzero source stride: the step that continues the
    tiles' source rows (None where no outer node moves the source)."""
    moving = [i for i, m in enumerate(outer) if m.strides[1]]
    return min(moving, key=lambda i: abs(outer[i].strides[1] or 0)) if moving else None


def _source_span(nodes: Sequence[Node]) -> int:
    """Source elements between the first and the last position the loops ``nodes`` reach."""
    return sum((m.extent - 1) * abs(m.strides[1] or 0) for m in nodes)


#: Source span (bytes) of the loops inside the step that continues a tile's source rows
#: from which whole-line narrowing tiles take the source order (``_scattered_line_reads``;
#: 0: never).
SCATTERED_READS_BYTES = int(os.environ.get("LAYOUTJIT_SCATTERED_READS_BYTES", 4 << 20))


def _line_share_order(ir: LoopIR, tile: TileSpec) -> LoopIR | None:
    """Outer steps that move the source by less than a line, moved inward, just outside the
    steps that move the destination by less than one (those complete the lines the tiles
    write in part), where in destination order the tiles inside such a step touch
    ``LINE_SHARE_BYTES`` of source lines or more: the rest of each source line a tile reads
    is then read right after, not once the lines have left L2.

    `hwio -> OIhw2i8o4i` s8 384x384x11x11: 4x8 tiles read 8 bytes of 4 rows (an o-block's 8
    o); the o-blocks, 8 B apart in the source, were the outermost loop, so every source line
    was fetched once per o-block, 8 times in all. Only whole-block tiles reading pieces of
    lines whose stores cannot be NT (NT plans measured equal or lost: `ABc8b32a -> ABc8a8b`
    0.66 (0.69) -> 0.71 (0.82)), padded digits left in place but a padded dim's lightest
    digit over a long sweep (``LINE_SHARE_PADDED_SPAN_BYTES``). A/B on Zen 3 (AVX2), ratio to
    copy at 1 thread (2 threads), without -> with: that pair 2.49 (2.80) -> 1.66 (1.94)
    (oneDNN 2.94 (3.42)), `ihwo -> OIhw2i8o4i` 2.63 (1.97) -> 1.41 (1.43); `OIhw8i16o2i ->
    oihw` 512x512x7x7 f32 -> s8 3.83 (3.32) -> 1.90 (1.67), 5x5 bf16 2.41 (2.06) -> 1.89
    (1.69), f32 -> bf16 3.89 (2.89) -> 2.80 (2.21); `OIhw4i16o4i -> oihw` 7x7 f32 -> s8 4.60
    (3.85) -> 3.27 (2.70), s8 2.53 (2.77) -> 2.11 (2.16); u8 `OIhw8i8o -> OIhw4o4i` 2.08
    (1.80) -> 1.83 (1.70). Tiles whose lines stay in L2 meanwhile lost (`IOhw16o16i ->
    oihw` 1024x1024x3x3 bf16, 37 KB of lines: 1.46 (1.45) -> 2.04 (1.81)).
    """
    outer = _plain_block_tiles_outer(ir, tile) if LINE_SHARE_BYTES else None
    if outer is None:
        return None
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    k = min(tile.nodes)
    a = ir.nodes[tile.a]
    rows = [(a.strides[1] or 0, min(a.extent, tile.R * tile.M))]
    # (the L1 count not where the line split takes the plan as it is: s8 `hwio -> OIhw4o4i`
    # 49152x40x3x3 lost 3.3 -> 7.0 with both)
    l1 = LINE_SHARE_L1 and _line_split_order(ir, tile) is None

    def shares(i: int, n: Node) -> bool:
        if not 0 < abs(n.strides[1] or 0) * ssz < 64:
            return False
        wide = math.prod(m.extent for m in outer[i + 1:]) * tile.R * tile.M * 64 >= LINE_SHARE_BYTES
        if _guarded(ir, n):
            return (LINE_SHARE_PADDED_SPAN_BYTES > 0 and wide and _digit_order_ok(ir, list(ir.nodes), n)
                    and _source_span(outer[i + 1:]) * ssz >= LINE_SHARE_PADDED_SPAN_BYTES)
        return wide or (l1 and _lines_overload_l1(ir, rows + [(m.strides[1] or 0, m.extent)
                                                              for m in outer[i + 1:]]))

    share = [i for i, n in enumerate(outer) if shares(i, n)]
    others = [n for i, n in enumerate(outer) if i not in share]
    pos = next((i for i, n in enumerate(others) if 0 < abs(n.strides[0] or 0) * dsz < 64), len(others))
    nodes = others[:pos] + [outer[i] for i in share] + others[pos:]
    if not share or nodes == outer or _padded_digits_heaviest_first(ir, nodes) != nodes:
        return None  # (nothing to move, in place already, or a padded dim's digits out of order)
    return ir.with_nodes(nodes + list(ir.nodes[k:]), "line_share")


def _plain_block_tiles_outer(ir: LoopIR, tile: TileSpec) -> list[Node] | None:
    """The nodes outside a transpose whose tiles write whole blocks with plain stores and read
    pieces of source lines (``_line_share_order``, ``_line_split_order``); None for others,
    or where an outer node's offset is computed from the index."""
    if (tile.kind != "transpose" or not tile.rows_contiguous or tile.c is not None
            or tile.a2 is not None):
        return None
    if tile.V * ir.operands[1].dtype.size >= 64 or _nt_possible(ir, tile):
        return None
    outer = list(ir.nodes[:min(tile.nodes)])
    if any(s is None for m in outer for s in m.strides):
        return None
    return outer


def _line_split_order(ir: LoopIR, tile: TileSpec) -> tuple[LoopIR, TileSpec] | None:
    """The outer step that continues the tiles' source rows within their lines, split at a
    line and its steps within a line moved innermost (just outside the tile), where in the
    order as it is the source lines the tiles touch between two of its steps overload L2
    (``_lines_overload_l2``): each line is then read whole by consecutive tiles.

    u8 `hwio -> OIhw4o4i` 49152x40x7x7: 4x4 tiles read 4 bytes of 4 rows (i) 48 KB apart;
    the o-blocks (4 bytes apart in the source) were the outermost loop, so each source line
    was read by 16 o-blocks, a sweep of 1960 rows apart. Those rows fall in 4 of the L2's
    sets (48 KB and 1.9 MB strides), so no line survived to its next o-block. Also after
    ``_line_share_order``, whose place can leave such rows (s8 `hwio -> OIhw4o4i` 512x512x5x5:
    25 hw rows 256 KB apart inside the moved o-blocks). Not where the split steps' destination
    lines would overload an L1 set (u8 256x2048x3x3, 16 lines 72 KB apart, lost 3.2 -> 8.3).

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> with, oneDNN's
    last: that u8 pair 25.9-28.5 (17.5-18.0) -> 3.05-3.73 (2.03-2.52), oneDNN 19.8-21.6
    (13.3-13.9); s8 49152x40x3x3 19.6 (19.4) -> 2.6 (2.8), oneDNN 24.7; s8 512x512x5x5 11.3
    (11.3) -> 2.8 (2.8), oneDNN 18.8; u8 `Ohwi4o -> iohw` 512x512x5x5 49.6-52.2 (52.1-55.4)
    -> 9.6 (8.9-10.2), oneDNN 28.2 (28.5); u8 `Ohwi8o -> iohw` 768x256x7x7 21.9-24.3
    (25.6-27.0) -> 11.8-12.3 (12.5-13.9), oneDNN 15.1 (15.7); s8 `Ohwi16o -> iohw`
    512x1024x7x7 10.7-11.3 (7.8-12.7) -> 7.0-7.2 (5.7-8.5), oneDNN 8.3 (10.4); bf16 `hwio ->
    OIhw4o4i` 512x1024x7x7 3.3-3.6 (2.2-2.3) -> 2.8-2.9 (1.9-2.0), f32 -> bf16 14336x96x5x3
    5.7-6.0 (4.1-4.2) -> 5.0-5.1 (3.4-3.6). 31 of 6649 listed and generated pairs changed;
    of the 17 measured, one lost at 1 thread: bf16 `hwio -> OIhw4o4i` 256x2048x3x3 (9 MB,
    8 destination lines in one L1 set) 3.35 (3.32) -> 4.75 (3.29)."""
    outer = _plain_block_tiles_outer(ir, tile) if LINE_SPLIT else None
    if outer is None or tile.b is None:
        return None
    ssz = ir.operands[1].dtype.size
    k = min(tile.nodes)
    near = [i for i, n in enumerate(outer) if 0 < abs(n.strides[1] or 0) * ssz < 64 and not _guarded(ir, n)]
    if len(near) != 1:
        return None
    c = near[0]
    step = abs(outer[c].strides[1] or 0) * ssz
    q = 64 // step
    if 64 % step or outer[c].extent % q or outer[c].extent == q or c == len(outer) - 1:
        return None
    a = ir.nodes[tile.a]
    rows = [(a.strides[1] or 0, min(a.extent, tile.R * tile.M))]
    if not _lines_overload_l2(ir, rows + [(m.strides[1] or 0, m.extent) for m in outer[c + 1:]]):
        return None
    hi, lo = outer[c].split(q)
    dsz = ir.operands[0].dtype.size
    if lines_per_l1_set(j * (lo.strides[0] or 0) * dsz for j in range(q)) > L1_WAYS:
        return None  # (the steps' destination lines would fill an L1 set: see LINE_SPLIT)
    nodes = outer[:c] + [hi] + outer[c + 1:] + [lo]
    return (ir.with_nodes(nodes + list(ir.nodes[k:]), "line_split"),
            replace(tile, a=tile.a + 1, b=tile.b + 1))


def _lines_overload_l2(ir: LoopIR, loops: Sequence[tuple[int, int]]) -> bool:
    """Whether the source lines that loops of (source stride, extent) reach hold more than
    ``LINE_SHARE_BYTES``, or more lines in one L2 set than it has ways."""
    count = math.prod(e for _, e in loops)
    if (LINE_SHARE_BYTES and count * 64 >= LINE_SHARE_BYTES) or count > LINES_OVERLOAD_MAX_ENUM:
        return True
    return lines_per_set(_source_lines(ir, loops), L2_SET_PERIOD) > L2_WAYS


def _source_lines(ir: LoopIR, loops: Sequence[tuple[int, int]]) -> set[int]:
    """Byte offsets of the source lines that loops of (source stride, extent) reach."""
    ssz = ir.operands[1].dtype.size
    offs = [0]
    for stride, extent in loops:
        offs = [o + j * stride for o in offs for j in range(extent)]
    return {o * ssz // 64 * 64 for o in offs}


def _lines_overload_l1(ir: LoopIR, loops: Sequence[tuple[int, int]]) -> bool:
    """Whether the source lines that loops of (source stride, extent) reach put more lines
    in one L1 set than it has ways (``LINES_OVERLOAD_MAX_ENUM`` positions at most)."""
    if math.prod(e for _, e in loops) > LINES_OVERLOAD_MAX_ENUM:
        return False
    return lines_per_l1_set(_source_lines(ir, loops)) > L1_WAYS


#: ``_line_share_order`` for a padded dim's lightest digit too, where the loops inside it
#: sweep this many source bytes or more (0: never; unpadded digits need no sweep). In
#: destination order such a digit (the rows of the source's blocks, a few bytes apart)
#: ran outside the whole sweep of its block, so every source line was fetched once per
#: step from memory: s8 `OdhwI48o4i -> gOIhw8o4i` 112x6x128x32x28 (48 a of 4 bytes in each
#: 192 B block, a 44 MB sweep inside them). A/B on Zen 4 (AVX-512), ratio to copy at 1 thread
#: (2 threads), without -> with: that pair 5.63 (6.40) -> 3.02 (2.44), oneDNN 9.2 (9.6);
#: f32 `OhwI4i32o4i -> gOIw4i8o2i` 48x112x208x16 4.98 (5.12) -> 1.35 (1.39); f32 -> s8
#: `OhwI16i16o2i -> gOwI64o4i` 62x112x64x48 7.04 (8.62) -> 2.45 (1.93), oneDNN 280 (203);
#: f32 `OIdhw4i16o4i -> gOhwI16o2i` 28x1x48x128x14 1.50 (1.35) -> 0.93 (0.95), oneDNN 2.8
#: (2.3); f32 -> u8 `gIwO24i2o -> IhwO64i4o` 32x16x64x1024 6.33 (7.11) -> 2.57 (1.96),
#: oneDNN 9.0 (7.3). Without the 4 MB gate 24 of 2804 listed and generated pairs changed
#: (19 with it); of 21 measured, 16 gained, 3 even, and sweeps under 4 MB (their lines
#: in the LLC) lost: s8 -> f32 `OdhwI48o2i -> gOhwI24o2i` 256x7x56x8x16 (2.6 MB) 1.66
#: (1.56) -> 2.13 (1.66), f32 `ABcd8a2b -> gOwI16i48o4i` 100x2048x8x2 (1 MB) 1.72 (1.50)
#: -> 1.99 (1.53). Not with the L1 count (``LINE_SHARE_L1``): f32 `aCB16b48c2b ->
#: OIw8o16i2o` 256x384x224 lost 1.59 (1.46) -> 2.26 (1.77) with it.
LINE_SHARE_PADDED_SPAN_BYTES = int(os.environ.get("LAYOUTJIT_LINE_SHARE_PADDED_SPAN_BYTES", 4 << 20))


#: ``_line_share_order`` also where the source lines the tiles touch between two steps of
#: the node overload an L1 set (``_lines_overload_l1``; ``LAYOUTJIT_LINE_SHARE_L1=0``:
#: L2 bytes only). f32 `gOIhw4i16o4i -> goihw` 512x64x192x3x1: 3x4 tiles read 16 B of
#: three rows 1 KB apart; the o steps (16 B apart: four share each line) were the job's
#: outermost loop, and the 144 lines between two of them sit 256 B apart, 9 to each of 16
#: L1 sets of 8 ways. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without
#: -> with: 1.35-1.52 (1.03-1.12) -> 1.04-1.06 (0.90-0.94), oneDNN 2.89-3.15 (1.85-2.32);
#: s8 `OIhw4i16o4i -> oihw` 512x1024x3x5 8.06 (8.03) -> 4.50 (4.60), 768x256x7x7 6.84
#: (7.71) -> 4.19 (4.14); u8 `IOhw16i16o -> iohw` 768x256x7x7 4.04 (4.14) -> 2.98 (3.03);
#: s8 `hwio -> OIhw4o4i` 256x64x3x3 7.36 (4.37) -> 2.74 (2.21). 102 of 6649 listed and
#: generated pairs changed; of 18 measured, 14 gained, 2 even, and two bf16 ones lost at
#: 1 thread and gained more at 2 (`OIhw16i16o -> iohw` 256x2048x3x3 3.11 (9.65) -> 4.72
#: (3.10), `OIhw8i8o -> iohw` 512x512x5x5 3.60 (4.59) -> 4.15 (3.02)). Not where the line
#: split (``_line_split_order``) takes the plan as it is: with both, s8 `hwio -> OIhw4o4i`
#: 49152x40x3x3 lost 3.3 -> 7.0 (and `Ohwi16o -> iohw` 512x1024x7x7 gained 8.3 -> 4.9).
LINE_SHARE_L1 = os.environ.get("LAYOUTJIT_LINE_SHARE_L1", "1") != "0"


#: Outer steps that continue the tiles' source rows split at a line (``_line_split_order``).
LINE_SPLIT = os.environ.get("LAYOUTJIT_LINE_SPLIT", "1") != "0"
LINES_OVERLOAD_MAX_ENUM = 1 << 16  # (more positions than this count as an overload)


#: Source lines (bytes) the tiles inside an outer step that shares their source lines touch
#: (tiles x rows x 64 B), from which that step moves inward (``_line_share_order``; 0:
#: never): 3/4 of Zen 3's L2. At 295 KB it was mixed (`OIhw8i16o2i -> oihw` 1024x1024x3x3,
#: ratio to copy at 1 thread (2 threads), f32 1.54 (1.69) -> 1.39 (1.35), s8 2.61 (2.72) ->
#: 3.27 (3.11)).
LINE_SHARE_BYTES = int(os.environ.get("LAYOUTJIT_LINE_SHARE_BYTES", 384 * 1024))


def _shares_source_lines(ir: LoopIR, tile: TileSpec, outer: Sequence[Node]) -> bool:
    """Whether the tiles read parts of source lines whose other parts an outer step reads
    (that step moves the source by less than a line), and one sweep of the tiles over A
    touches few enough lines (``SHARED_LINES_BYTES``) that the next step finds them in
    cache once it runs right after (source order puts it innermost of the outer loops)."""
    assert tile.b is not None
    ssz = ir.operands[1].dtype.size
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    row = min(tile.V, b.extent) * ssz if b.strides[1] == 1 else ssz
    if row >= 64 or a.extent * 64 > SHARED_LINES_BYTES:
        return False
    return any(0 < abs(m.strides[1] or 0) * ssz < 64 for m in outer)


#: Most source-line bytes a sweep over A may touch for ``_shares_source_lines`` (Zen 3's
#: L2: 344 KB sweeps gained, `Acdb16a -> bacd` s8 100x192x7x768 4.41 -> 3.00x copy at 1
#: thread; 3 MB ones lost at 2 threads, `ABcd4b16a4b -> abcd` 12x8x128x384 1.72 -> 2.64).
SHARED_LINES_BYTES = 512 * 1024


def _by_source(ir: LoopIR, k: int | None = None) -> LoopIR:
    """The outer nodes (all but the last) by decreasing source stride, each padded dim's
    digits kept heaviest-first as :func:`order_by_dst` keeps them."""
    def key(n: Node) -> tuple:
        return (-(n.strides[1] or 0), -(n.strides[0] or 0), -n.weight)
    k = len(ir.nodes) - 1 if k is None else k
    nodes = _padded_digits_heaviest_first(ir, sorted(ir.nodes[:k], key=key))
    return ir.with_nodes(nodes + list(ir.nodes[k:]), "source_order")


PACKED_WHOLE_RUNS = os.environ.get("LAYOUTJIT_PACKED_WHOLE_RUNS", "1") != "0"


def _packed_padded_runs(ir: LoopIR, nodes: list[Node], run: Node, irun: int, run_bytes: int
                        ) -> tuple[LoopIR, TileSpec] | None:
    """Runs of at most a line whose tail is zero padding, packed whole into lines (runs
    that do not divide a line: ``PACKED_ODD_RUNS``).

    The run is a whole padded dim (one block: nhwc -> nChw8c, C=3, writes 3 values and 5
    zeros per pixel); node A places the runs back to back in the destination. No node
    has a source stride of the run's length, so the "lines" kind proper would not apply.
    Planned as "lines" with a unit column node: PACKED_RUNS runs per call (a multiple of
    the runs per line; ``simd.gather(Vv=valid)``, reading a dense source -- A's source
    stride is the valid length, nhwc -- as whole vectors), stored as whole (NT) lines.

    Runs that are their whole dim (no padding) take the same plan where they convert
    (``LAYOUTJIT_PACKED_WHOLE_RUNS``): `nCdhw16c -> nCdhw8c` C = 8 lost its half-skipped
    column to ``trim_skipped`` and fell to element loops, which convert lane by lane. A/B,
    ratio to copy at 1 thread (2 threads), element loops -> packed: 64x8x28x299x7 f32 ->
    bf16 1.07 (0.85) -> 0.88 (0.76), f32 -> s8 1.34 (1.11) -> 1.11 (1.01); 64x8x56x112
    f32 -> s8 1.14 (0.92) -> 0.83 (0.74). Without a conversion the element loops were as
    fast out of cache (a (3750656, 8) view of rows 16 apart 0.92 (0.96) against 1.07 (1.09)),
    but not for short runs: runs of one type of at most ``PACKED_SAME_MAX_BYTES`` (64) pack
    too (u8 `nCdhw16c -> ndhwc` C = 8, runs of 8 bytes: element loops 2.77 (1.30) ->
    packed 1.34 (0.71); f32 C = 8 `nCdhw16c -> nCdhw8c` 64x8x13x299x13 1.28 (1.15) -> 1.13
    (1.10)).
    """
    odd = 64 % run_bytes != 0  # runs that end on a line only every few runs (12 B: 16 runs)
    if run_bytes > 64 or (odd and not PACKED_ODD_RUNS) or run.dim is None or run.weight != 1:
        return None
    r = ir.dims[run.dim]
    if r.write != run.extent or not 0 < r.valid <= run.extent:
        return None
    if r.valid == run.extent and not (PACKED_WHOLE_RUNS and (ir.operands[0].dtype != ir.operands[1].dtype
                                                              or run_bytes <= PACKED_SAME_MAX_BYTES)):
        return None  # whole runs of one type: LLVM's element loops move them as well
    ia = next((i for i, n in enumerate(nodes) if i != irun and n.strides[0] == run.extent
               and n.extent > 1), None)
    if ia is None or len(ir.operands) != 2 or any(s is None for s in nodes[ia].strides):
        return None
    a = nodes[ia]
    G = 64 // math.gcd(64, run_bytes)  # runs that end on a line
    # a dense source is read as whole vectors; where each run starts a source line of its
    # own, fewer runs per call (PACKED_FAR_RUNS)
    far = PACKED_FAR_RUNS and abs(a.strides[1] or 0) * ir.operands[1].dtype.size >= 64
    R = min(a.extent, max(G, PACKED_FAR_RUNS if far else PACKED_RUNS))
    if odd and (R % G or G > 64 or (far and (G > PACKED_ODD_FAR_MAX_RUNS or run.extent
                                              * ir.operands[1].dtype.size < PACKED_ODD_FAR_MIN_BYTES))):
        return None
    return _lines_with_unit_column(ir, nodes, ia, irun, R)


#: Runs that do not divide a line pack too (``_packed_padded_runs``): 64 / gcd(64, run)
#: runs a call end on a line (u8 runs of 7: 64 runs, 7 lines; f32 runs of 13: 16 runs, 13
#: lines), each run's last piece read to a power of two where the source's padding follows
#: it (``simd.gather(src_pow2=True)``, codegen). Before, a blocked source with an odd channel
#: count into a plain layout (`nChw16c -> nhwc`, C = 13) went through element loops. Runs
#: that each start a source line of their own ("far") pack only up to
#: ``PACKED_ODD_FAR_MAX_RUNS`` a call and from ``PACKED_ODD_FAR_MIN_BYTES`` of source each:
#: f32 C = 3 (12 B of each 64-byte block, 16 a call) lost 1.30 -> 2.01 at 1 thread, f32 ->
#: s8 C = 5 (64 runs a call) 1.97 -> 2.73: the thin-row effect of ``thin_tile_rows``. A/B
#: on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), element loops -> packed: s8 ->
#: f32 `nCdhw16c -> ndhwc` 2048x13x16x13x64 3.02 (2.41) -> 0.76 (1.22) (oneDNN 1.92),
#: `nCw16c -> nwc` 4096x13x1000 2.78 (2.75) -> 0.75 (0.82) (oneDNN 1.79), 256x13x1000
#: 5.93 (7.07) -> 1.04 (1.19) (oneDNN 3.56); s8 `nChw16c -> nhwc` 4096x13x35x64 4.62 (2.75)
#: -> 0.74 (1.65) (oneDNN 3.21); u8 C = 7 3.34 (2.47) -> 1.12 (1.03) (oneDNN 3.09), C = 11
#: 5.53 (6.95) -> 1.19 (1.48) (oneDNN 5.18), `nChw8c -> nhwc` C = 5 3.49 (4.33) -> 0.87
#: (0.82); f32 C = 13 1.17 (0.99) -> 0.72 (0.79), C = 11 1.16 (1.03) -> 0.80 (0.79), `nChw8c
#: -> nhwc` C = 6 1.16 (1.04) -> 0.68 (0.71); bf16 C = 5 1.44 (1.10) -> 0.82 (0.92). 28
#: changed pairs measured, none lost (f32 C = 7 even at 2 threads); 15 of 2660 listed and
#: generated pairs changed.
PACKED_ODD_RUNS = os.environ.get("LAYOUTJIT_PACKED_ODD_RUNS", "1") != "0"
PACKED_ODD_FAR_MIN_BYTES = 16
PACKED_ODD_FAR_MAX_RUNS = 16


def _unit_column(a: Node) -> Node:
    """The column node of one step that a "lines" plan without a node B takes (no dim)."""
    return Node(1, None, 1, tuple(0 for _ in a.strides))


def _lines_with_unit_column(ir: LoopIR, nodes: list[Node], ia: int, irun: int, R: int
                            ) -> tuple[LoopIR, TileSpec]:
    """A "lines" plan of the runs of node ``irun`` placed back to back along node ``ia``,
    with a unit column node (no node B), R runs per call."""
    a, run = nodes[ia], nodes[irun]
    unit = _unit_column(a)
    rest = [n for i, n in enumerate(nodes) if i not in (ia, irun)]
    k = len(rest)
    return (ir.with_nodes(rest + [a, unit, run], "choose_tile"),
            TileSpec("lines", k, k + 1, R, 1, 1, False, k + 2))


def _two_line_rows(ir: LoopIR, a: Node, b: Node, dsz: int, ssz: int, vbytes: int) -> bool:
    """Whether a transpose's tiles write two lines of each destination row (R = 32 f32).

    Destination rows 1 or 3 KB apart modulo 4 KB (nhwc rows of C=256 or 768, nchw planes
    of 112x112) repeat their address bits 11:0 every 4 rows. Non-temporal line stores into
    such rows run slowly when lines of rows that repeat follow each other closely: a
    write-only probe (Zen 3, 1 thread, lines from L1 into 16 rows 50176 B apart) moved
    10-17 GB/s writing one line per row per pass and 40 GB/s writing two consecutive lines
    per row; 50240 B apart, 34-40 either way. Tiles of two lines per row (32x4 f32 instead
    of 16x8; with nChw16c sources this also brings the row-group prefetch of
    ``_prefetch_rows``), ratio to copy at 1 thread (2 threads), A/B in one process, three
    runs: nChw16c -> nchw 64x32x112x112 0.85-1.09 -> 0.60-0.80 (0.59-0.98 -> 0.54-0.74),
    nchw -> nhwc 32x256x56x56 0.71-0.83 -> 0.65-0.74 (0.75-0.94 -> 0.71-0.92), nhwc ->
    nchw 8x64x112x112 0.76-0.96 -> 0.70-0.81 (0.70-0.79 -> 0.60-0.73), nchw -> nhwc
    32x768x28x28 0.99-1.12 -> 0.86-1.01 (0.96-1.14 -> 0.92-1.14); the 1 GiB nchw -> nhwc
    equal. Rows 2 KB apart modulo 4 KB lost (nchw -> nhwc C=512 0.97 -> 1.09, ab -> ba
    2560 columns 0.91 -> 1.22), and so did rows that do not repeat (120x120 planes, C=384)
    and 2-byte destinations (64-row tiles; bf16 nhwc rows of C=512 1.50 -> 2.13, f32 ->
    bf16 1.89 -> 3.57). Only for tensors that take NT stores, measured
    with 32-byte vectors only (``TWO_LINE_ROWS_MAX_VECTOR``).
    """
    if not TWO_LINE_ROWS or vbytes >= TWO_LINE_ROWS_MAX_VECTOR or dsz != 4 or b.strides[0] is None:
        return False
    if _l2_aliased_rows(ir, a, b, ssz, dsz):
        return False
    return (b.strides[0] * dsz) % 4096 in (1024, 3072) and _transpose_takes_nt(ir, ssz, dsz)


#: Addresses this far apart (a multiple of it) map to one L2 set (see ``l2_set_period``).
L2_SET_PERIOD = l2_set_period()
#: Lines one L2 set holds (``l2_ways``).
L2_WAYS = l2_ways()


def rows_per_l2_set(row_bytes: int, rows: int) -> int:
    """How many of ``rows`` rows ``row_bytes`` apart put their lines in the busiest L2 set.

    Row starts repeat their place in the L2's set period every ``L2_SET_PERIOD / gcd(row,
    period)`` rows, and rows closer than a line to that place share its set: 1024 rows of
    5 KB (s8 ncdhw -> ndhwc, 32x32x5 planes) use 64 of a 64 KiB period's 1024 sets, 16
    rows' lines in each, and an 8-way L2 then loses lines it still has to serve."""
    row_bytes = abs(row_bytes)  # (rows in either direction)
    if L2_SET_PERIOD <= 0 or row_bytes == 0:
        return 1
    places = min(L2_SET_PERIOD // math.gcd(row_bytes, L2_SET_PERIOD), L2_SET_PERIOD // 64)
    return -(-rows // max(1, places))


def skewed_tiles(ir: LoopIR, tile: TileSpec, vbytes: int) -> int:
    """Columns of B by which the second of two row tiles runs ahead of the first; 0: none.

    An L2-aliased NT transpose (``_l2_aliased_rows``) reads 16 rows side by side, so it
    writes one line of each destination row per pass, and into rows of 512 B or more that
    write pattern alone costs most of the time: writing only, lines from L1 into nhwc rows
    of C=256 (1 KB), 1.68x the time of a copy of the same bytes with one line per row per
    pass, 1.03 with two, 0.78 with whole rows (C=512: 2.14, 1.36, 1.12 with four; Zen 3, 1
    thread). Two tiles of 16 rows at one column write two lines of each row but put 32
    rows' lines in each L2 set (2.2x copy on the 1 GiB nchw -> nhwc). With the second
    tile ``SKEW_BYTES`` ahead along the source rows each L2 set again holds the lines of 16
    rows, and every destination row still gets two lines per pass, a few microseconds
    apart. The lead tile runs alone over the run's first columns and the other alone over
    its last ones (a wrap-around, the lead tile going back to the row's start, measured
    1.71-1.85: as slow as no skew). Probe, nchw -> nhwc f32 with 128x128 planes, ratio to
    copy at 1 thread, medians of 5-7, 16 rows -> skewed 2 KB: C=256 (1 GiB) 1.63-1.97 ->
    1.31-1.45, C=512 1.71-1.75 -> 1.36, C=384 1.82-1.93 -> 1.39, C=128 1.86-1.91 -> 1.33;
    C=64 (rows of 256 B) 1.14-1.18 -> 1.34 and ncdhw -> ndhwc C=32 0.44-0.52 -> 0.80 lost,
    hence ``SKEW_MIN_ROW_BYTES``. Lead of 64 B 1.90, 256 B 1.96, 512 B 1.55-1.70, 1 KB
    1.38-1.51, 2 KB 1.31-1.37, 4 KB 1.54-1.56 (C=256); four tiles 1 KB apart 1.79.
    """
    if not SKEW_BYTES or tile.kind != "transpose" or tile.b is None or tile.M != 1 or len(ir.operands) != 2:
        return 0
    if tile.a2 is not None or tile.c is not None or tile.l is not None or tile.rows_contiguous:
        return 0
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    dsz, ssz = ir.operands[0].dtype.size, ir.operands[1].dtype.size
    if vbytes >= SKEW_MAX_VECTOR or dsz != 4 or ssz != 4 or tile.R != 16 or a.extent < 2 * tile.R:
        return 0  # (measured on f32 only)
    if b.strides[0] is None or b.strides[0] * dsz < SKEW_MIN_ROW_BYTES:
        return 0
    if not _l2_aliased_rows(ir, a, b, ssz, dsz):
        return 0
    skew = min(SKEW_BYTES // ssz, b.extent // 2) // tile.V * tile.V
    return skew if skew >= tile.V else 0


def _l2_aliased_rows(ir: LoopIR, a: Node, b: Node, ssz: int, dsz: int) -> bool:
    """Whether an NT transpose's source rows (A's source stride) all land in one L2 set.

    Then the lines the L2 streamer fetches ahead for each row compete for one set's ways,
    and reading 32 rows side by side runs far below reading 16. Read-only probe (Zen 3, 1
    thread, one line per row per visit, 512 MB): rows 64 KB apart 15.5 GB/s for 16 rows,
    5.8 for 32 (16 KB apart: 15.6 and 8.6; 12544 B: 13.5 and 8.8). Such transposes read at
    most ``ALIASED_L2_STREAMS`` rows side by side and drop two-line tiles. Ratio to copy at
    1 thread (2 threads), A/B in one process, without -> with: ncdhw -> ndhwc
    8x32x32x64x64 0.86-0.88 -> 0.43-0.66 (0.83-0.86 -> 0.49-0.56); nchw -> nhwc with
    128x128 planes, 16x64 0.82-0.87 -> 0.62-0.68 (0.74-0.79 -> 0.60-0.70), 8x256 1.03-1.20
    -> 0.99-2.70 (0.83-1.08 -> 0.84-1.08), 64x256 (the 1 GiB case) 1.86-3.58 -> 1.64-1.95
    (1.86-1.98 -> 1.47-1.56) in four runs; 4x64x256x256 0.85 -> 0.69 (0.86 -> 0.68). Not
    where the destination rows share an L1 set too: there the second tile of a macro tile
    writes each row's next line (``_two_line_rows``), and ab -> ba 2048x16384 lost (0.95 ->
    0.92-1.09 (0.77-0.80 -> 0.93-1.09)). Only for tensors that take NT stores.
    """
    if not ALIASED_L2_STREAMS or a.strides[1] is None or L2_SET_PERIOD <= 0:
        return False
    if b.strides[0] is None or _rows_share_l1_set(b.strides[0] * dsz):
        return False
    return (a.strides[1] * ssz) % L2_SET_PERIOD == 0 and _transpose_takes_nt(ir, ssz, dsz)


def _short_rows_from_far_rows(ir: LoopIR, a: Node, b: Node, ssz: int, dsz: int) -> bool:
    """Whether an NT transpose reads separate source streams into short destination rows,
    or into rows whose length is not a multiple of ``ODD_ROW_PERIOD`` bytes.

    Each source row (A's source stride at least a page apart) is a stream of its own;
    with destination rows of at most ``SHORT_ROW_MAX_BYTES``, 16 rows already write a
    quarter of each row per pass, and the 16 extra streams of a second tile cost more
    than the lines they add. Zen 3 (AVX2), nchw -> nhwc f32, 411 MB of traffic, ratio
    to copy at 1 thread (2 threads), 32 rows -> 16: C=32 112x112 1.50 -> 0.85 (0.59 ->
    0.60), C=64 1.44 -> 1.15 (0.74 -> 0.75), 8x64x112x112 (51 MB) 0.90 -> 0.77 (0.83 ->
    0.80). Not for rows of a multiple of 512 B: C=128 1.50 -> 2.06 (0.74 -> 0.95), C=512
    56x56 1.75 -> 2.13 (0.89 -> 1.11); C=256 56x56 even. Other lengths gain (A/B in one
    process, f32, same ratios): nchw -> nhwc C=96 16x96x364x112 1.47-1.52 -> 0.87-0.97
    (0.85-0.90 -> 0.59-0.69), 16x96x112x112 0.76-0.78 -> 0.46-0.53 (0.78 -> 0.64), C=160
    112x112 0.75-0.82 -> 0.49-0.50 (0.74 -> 0.61), C=80, 112 224x224 0.73-0.74 -> 0.54-0.55
    (0.78-0.85 -> 0.60-0.64), C=144 150x150 0.71 -> 0.51 (0.88 -> 0.63), C=240 56x56 0.94
    -> 0.74 (0.89 -> 0.75); ncdhw -> ndhwc 4x96x32x56x56 0.77 -> 0.54 (0.83 -> 0.65),
    16x96x28x13x112 1.52 -> 0.86 (0.79 -> 0.61); ab -> ba 2000x6000 0.82 -> 0.54 (0.92 ->
    0.79), 3000x4000 1.10 -> 1.15 (0.80 -> 0.82), 3001x2999 1.01 -> 0.98 (0.81 -> 0.87).
    Blocked sources (``nChw16c -> nchw``: rows 64 B apart) are not far rows and keep 32
    (there 16 lost: 32x256x56x56 0.70 -> 0.81).
    """
    if not SHORT_ROW_STREAMS or a.strides[1] is None or b.strides[0] is None:
        return False
    row = abs(b.strides[0]) * dsz
    short = row <= SHORT_ROW_MAX_BYTES or bool(ODD_ROW_PERIOD and row % ODD_ROW_PERIOD)
    return abs(a.strides[1]) * ssz >= SHORT_ROW_FAR_BYTES and short and _transpose_takes_nt(ir, ssz, dsz)


#: Columns (destination rows) a transpose's tile takes at most where its destination rows
#: are 2 KB apart modulo 4 KB, so that they fall on two page offsets only (nchw planes of
#: 3x112x224 f32): a tile of 32 columns sent 16 NT lines to one offset in a row.
#: A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), 32 -> 8 columns: s8 -> f32
#: `ndhwc -> ncdhw` 8x112x3x112x224 2.08 (1.56) -> 1.57 (1.32); planes off that offset
#: unchanged (8x100x3x56x224 0.65 -> 0.63, `nhwc -> nchw` 64x256x56x56 0.53 -> 0.53).
#: ``LAYOUTJIT_HALF_PAGE_ROW_COLS=0``: off.
HALF_PAGE_ROW_COLS = int(os.environ.get("LAYOUTJIT_HALF_PAGE_ROW_COLS", 8))
#: ... and this many in plans for 64-byte vectors whose tile rows are whole destination
#: lines (``LAYOUTJIT_HALF_PAGE_ROW_COLS_WIDE``): on Zen 4 (AVX-512) 8 columns (half a line
#: of f32 source rows) lost to a line of each, A/B, ratio to copy at 1 thread (2 threads),
#: 8 -> 16 columns: `ab -> ba` f32 512x28672 1.40-1.47 (1.08-1.45) -> 0.82-0.87
#: (0.83-0.89), oneDNN 3.2-3.4 (2.4-3.7); `iohw -> ohwi` 3584x512x5x5 1.18 (0.87) -> 0.94
#: (0.78); s8 -> f32 `ndhwc -> ncdhw` 8x112x3x112x224 0.99 (0.98) -> 0.77 (0.95); u8 `chwn
#: -> nchw` 448x2048x7x7 1.07-1.25 (0.90-1.12) -> 0.97-1.06 (0.92-1.05); f32 -> f16 `ab ->
#: ba` 1024x4096 3.77 (3.58) -> 1.46 (2.28); f32 -> bf16 `acdb -> hwio` 1024x32x224x13
#: 1.61 (1.56) -> 1.08 (1.10). 14 of 2894 listed and generated pairs change (the public
#: `nchw -> nhwc` 128x512x14x14 among them, even); of the 14 measured 8 gained, 6 even.
#: Rows under a line keep 8 (s8 `hwigo -> Oidhw8o` 8x48x384x299x2, 8-byte rows with plain
#: stores: 4.06 (2.63) -> 4.80 (3.27) with 16, 6.54 (4.37) with 48).
HALF_PAGE_ROW_COLS_WIDE = int(os.environ.get("LAYOUTJIT_HALF_PAGE_ROW_COLS_WIDE", 16))


#: Bytes of each destination row a transpose widening into 4-byte elements writes per visit
#: where its rows are 4 KB or more apart (``_transpose``): ndhwc -> ncdhw s8 -> f32 wrote 128 B (two 16-row
#: tiles) into each of 112 planes per step, NT lines a sweep apart. A/B on Zen 3 (AVX2),
#: ratio to copy at 1 thread (2 threads), 128 -> 256 B: u8 -> f32 8x512x3x56x224 1.79
#: (1.05) -> 1.22 (0.85), s8 -> f32 8x112x3x112x224 2.91 (1.76) -> 2.21 (1.67), bf16 ->
#: f32 8x512x3x56x224 1.67 (1.38) -> 1.53 (1.36). Destination rows close together
#: (ncdhw -> ndhwc, one pixel's channels) lost with more rows (0.57 -> 0.74) and keep
#: READ_STREAMS, as do 2-byte destinations (s8 -> bf16 8x112x3x56x224 3.04 -> 4.59).
#: Repeated with 13 rounds: s8 -> f32 `nhwc -> nchw` 32x512x56x112 1.77 (0.86) -> 1.16
#: (0.74), ndhwc -> ncdhw 8x100x3x56x224 0.83 (0.84) -> 0.60 (0.68), 8x112x3x112x224 2.12
#: (1.68) -> 2.00 (1.62). ``LAYOUTJIT_WIDE_ROW_VISIT_BYTES=0``: off.
WIDE_ROW_VISIT_BYTES = int(os.environ.get("LAYOUTJIT_WIDE_ROW_VISIT_BYTES", 256))


def _transpose(ir: LoopIR, nodes: list[Node], ia: int, ib: int, vbytes: int, ssz: int, dsz: int,
               notes: list[str], allow_cols: bool = True) -> tuple[LoopIR, TileSpec | None, list[str]]:
    a, b = nodes[ia], nodes[ib]
    if a.extent < 2 or b.extent < 2 or a.strides[1] is None or b.strides[0] is None:
        return ir, None, notes
    for n in (a, b):
        if not _digit_order_ok(ir, nodes, n):
            notes.append("transpose node carries padding in an unusual digit order; element loops")
            return ir, None, notes
    if a.dim is not None and a.dim == b.dim and ir.dims[a.dim].guarded:
        return ir, None, notes
    aliased = _rows_share_l1_set(a.strides[1] * ssz)
    # Source rows a multiple of 4 KB apart share one L1 set (8 ways). Where the output stays
    # in cache (plain stores) and a vector is shorter than a line, tiles take at most 8 such
    # rows and a whole line of each, so a line is read whole before it is evicted -- when 8
    # destination elements still fill a vector (Zen 3, AVX2, ratio to copy at 2 threads
    # (1 thread), 16x8 -> 8x16 f32 tiles: oihw -> OIhw16i16o 1024x1024x1x1 1.56 -> 1.23
    # (1.19 -> 1.13), ab -> ba 1024x1024 2.37 -> 1.81 (1.95 -> 1.70)).
    l1_rows = bool(aliased and _l1_row_tiles(dsz, vbytes) and ir.total * (ssz + dsz) < NT_MIN_BYTES)
    V = min(b.extent, max(1, vbytes // ssz, 64 // ssz if l1_rows else 1))
    row_elems = max(1, 64 // dsz)  # elements of one 64-byte output row
    rows_contig = b.strides[0] == a.extent
    if rows_contig and a.extent <= row_elems:
        R = a.extent  # a whole block (at most one line): tiles write R*V contiguous elements
    else:
        # Tiles take whole destination lines as rows (64 rows of 1-byte elements), with
        # fewer columns: half lines are plain stores, each paying an ownership read.
        R = min(a.extent, row_elems, MAX_TILE_ROWS)
        if _two_line_rows(ir, a, b, dsz, ssz, vbytes):
            R = min(a.extent, 2 * row_elems, MAX_TILE_ROWS)
            notes.append(f"destination rows {b.strides[0] * dsz % 4096} B apart modulo 4 KB: tiles "
                         f"write two lines of each row")
    if l1_rows:
        R = min(R, ALIASED_L1_ROWS)
    rows_contig = rows_contig and R == a.extent
    # Source rows a multiple of 4 KB apart share one L1 set, so a row's line does not
    # survive until the next tile reads it: such tiles read more of each line at once
    # (s8 ab -> ba 8192x8192: 1.5x copy at 1 thread with 2 KB tiles, 2.1x with 1 KB ones).
    # With 16 registers such a network runs as two row groups (simd._row_groups), which
    # took that case from 2.1 to 1.7 at 1 thread and 2.4 to 1.9 at 2.
    net = MAX_TILE_NET_REGS * (2 if aliased else 1)
    Rp = 1 << (R - 1).bit_length()  # the network works on R and V rounded up to powers of two

    def cap_for(regs: int) -> int:  # columns a network of Rp rows may take within regs registers
        return min(max(1, MAX_TILE_SRC_BYTES // (Rp * ssz)), max(1, regs * vbytes // (Rp * min(ssz, dsz))))
    cap = cap_for(net)
    V = min(V, cap)
    if (HALF_PAGE_ROW_COLS and not rows_contig and b.strides[0] is not None
            and (b.strides[0] * dsz) % 4096 == 2048 and _transpose_takes_nt(ir, ssz, dsz)):
        # (destination rows two 4 KB offsets only: see the constants)
        line_rows = vbytes >= 64 and R * dsz >= 64
        V = min(V, max(HALF_PAGE_ROW_COLS, HALF_PAGE_ROW_COLS_WIDE) if line_rows else HALF_PAGE_ROW_COLS)
    if BLOCK_TILE_LINES and rows_contig and (R * V * dsz) % 64:
        # Tiles that write whole blocks write R*V contiguous elements: enough columns for
        # whole lines make them NT-capable (nchw -> nhwc C=3 f32 with 32-byte vectors: 3x8
        # tiles write 96 B, 3x16 ones 192 B; 16x3x512x512, ratio to copy at 1 thread (2
        # threads): plain 3x8 0.80 (0.91) -> NT 3x16 0.52 (0.65)).
        whole = 64 // math.gcd(64, R * dsz)
        Vw = -(-V // whole) * whole
        wide = cap_for(BLOCK_TILE_LINES_NET * net) if _transpose_takes_nt(ir, ssz, dsz) else cap
        if Vw <= min(b.extent, wide, 2 * max(1, vbytes // ssz)):
            V = Vw
    # Source rows read side by side: a blocked destination (whole blocks written) prefers
    # fewer streams than a full transpose (measured on Zen 5: 16 vs 32).
    streams = READ_STREAMS_BLOCKED if rows_contig else READ_STREAMS
    l2_aliased = _l2_aliased_rows(ir, a, b, ssz, dsz)
    if l2_aliased:
        if max(1, ALIASED_L2_STREAMS // R) < streams // R:  # (a tile's own rows stay)
            notes.append(f"source rows a multiple of {L2_SET_PERIOD} B apart (one L2 set): "
                         f"at most {ALIASED_L2_STREAMS} read side by side")
        streams = min(streams, ALIASED_L2_STREAMS)
    if _short_rows_from_far_rows(ir, a, b, ssz, dsz):
        streams = min(streams, SHORT_ROW_STREAMS)
    M = max(1, min(-(-a.extent // R), streams // R))
    if (WIDE_ROW_VISIT_BYTES and dsz > ssz and dsz >= 4 and not rows_contig and b.strides[0] is not None
            and b.strides[0] * dsz >= 4096):
        # widening into rows far apart (ndhwc -> ncdhw s8 -> f32: one plane per channel): the
        # writes are most of the traffic, so each row gets WIDE_ROW_VISIT_BYTES per visit
        M = max(M, min(-(-a.extent // R), WIDE_ROW_VISIT_BYTES // (R * dsz)))
    # (Tiles whose rows are one whole line -- f32 -> bf16 nchw -> nhwc, 32 rows -- once took
    # two per macro tile, to write two lines of each destination row. Measured again with
    # the rest of the planner as it is now, 32x256x56x56 and 64x128x56x56, ratio to copy at
    # 1 thread (2 threads), 64 rows -> 32: 1.15-1.72 -> 1.02-1.35 (1.04-1.76 -> 0.94-1.37)
    # in five runs; bf16 and s8 nchw -> nhwc unchanged. The 32 read streams decide.)
    if vbytes >= 64 and not rows_contig and V * ssz < 64 <= b.extent * ssz and not l2_aliased:
        # tiles that read part of each source line (16-bit: 32 B, 8-bit: 16 B) fetch new
        # lines only every few steps along B; reading 8 KB per step keeps enough misses in
        # flight (16-bit nhwc -> nchw, 51 MB, 1 thread: 64 rows 1.5-1.8x copy, 256 rows
        # 0.96-1.06x; 8-bit: 128 rows 1.75x, 512 rows 1.55x). With 32-byte vectors every
        # tile reads half lines, and the wide steps lose (Zen 3, AVX2, ratio to copy at 1
        # thread (2 threads), 8 KB steps -> READ_STREAMS rows: ncw -> nwc 32x128x1024 1.42
        # -> 1.01 (1.55 -> 0.76), ab -> ba 2048x2048 1.96 -> 0.95 (1.39 -> 0.89), 8192x4096
        # 1.47 -> 1.01 (1.50 -> 0.83), nchw -> nhwc 32x256x56x56 1.26 -> 0.93 (1.05 ->
        # 0.86), f32 -> bf16 2.43 -> 1.23 (3.07 -> 1.74), bf16 ab -> ba 4096x4096 1.93 ->
        # 1.61 (2.01 -> 1.28), s8 nhwc -> nchw 1.31 -> 1.10 (0.83 -> 0.80)). Not where the
        # source rows share one L2 set: there the aliasing cap above holds (8 KB steps of
        # 32-byte pieces read 256 such rows, in a set of 16 ways).
        M = max(M, min(-(-a.extent // R), PARTIAL_LINE_STEP_BYTES // (R * V * ssz)))
    ic = (_cols_node(ir, nodes, ia, ib, vbytes // ssz)
          if allow_cols and (not rows_contig or _cols_over_blocks(ir, a, b, R, ssz, dsz)) else None)
    if ic is not None:
        rest = [n for i, n in enumerate(nodes) if i not in (ia, ib, ic)]
        k = len(rest)
        spec = TileSpec("transpose", k, k + 2, R, max(1, vbytes // ssz), M, False, c=k + 1)
        cols_ir = ir.with_nodes(rest + [a, nodes[ic], b], "choose_tile")
        short = a.extent * dsz <= LINE_ROWS_OVER_COLS_BYTES and b.extent * ssz >= max(8, a.extent * dsz)
        wide = (a.extent * dsz <= LINE_ROWS_OVER_COLS_WIDE_BYTES and ssz <= dsz
                and b.extent * ssz >= LINE_ROWS_OVER_COLS_SRC_BYTES)
        if ((short or wide)
                and (LINE_ROWS_PLAIN or _transpose_takes_nt(ir, ssz, dsz))
                and not (COLS_STAGE and cols_stage(cols_ir, spec))):
            lined = _line_rows(ir, nodes, ia, ib, dsz, vbytes // ssz, half=True)
            if lined is not None:
                return lined[0], lined[1], notes
        return cols_ir, spec, notes
    # (after cols: oihw -> OIhw16i16o bf16 could take either; cols 1.65x copy, line rows 3.3x)
    lined = _line_rows(ir, nodes, ia, ib, dsz, vbytes // ssz) if allow_cols and not rows_contig else None
    if lined is not None:
        return lined[0], lined[1], notes
    rest = [n for i, n in enumerate(nodes) if i not in (ia, ib)]
    nodes2 = rest + [a, b]
    spec = TileSpec("transpose", len(rest), len(rest) + 1, R, V, M, rows_contig)
    return ir.with_nodes(nodes2, "choose_tile"), spec, notes


#: Cols tiles whose B or C is a uniform digit of a padded dim (``_uniform_digit``), for B
#: of at most 2 elements or 4 bytes (``LAYOUTJIT_COLS_UNIFORM=0``: padded B and C never).
#: `OIhw8i16o2i -> nchw` 64x30x96x192 (i = 30 of 32: 2i, padded, is B): 16x2 tiles read 8
#: bytes from source rows 1 KB apart, the rest of each line read by other jobs; over the
#: 2i x 16o run, A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads): 5.05-6.00
#: (4.96-5.43) -> 1.24-1.38 (1.08-1.16); s8 `BAcde4b8a8b4a -> aBdeC16c64b2c` 8.07 (3.43)
#: -> 2.23 (1.66), s8 -> u8 `BcdeA8b2a -> aBdeC16c64b2c` 20.3 (13.2) -> 6.2 (4.4), s8
#: `aCdB16b16c4b -> Abcd4a` 2.78 (2.34) -> 1.45 (2.38). B of 4 f32 or bf16 was mixed
#: (`ABcd4b16a4b -> abcd` 12x8x128x384 1.38 -> 0.71, but bf16 `-> acbd` 13x56x1024x64 1.05
#: -> 1.38 and `aBCd2b8c16b4c -> Acdb16a` 0.88 -> 2.47), so those keep their tiles.
COLS_UNIFORM = os.environ.get("LAYOUTJIT_COLS_UNIFORM", "1") != "0"


#: Cols tiles storing pieces of at most this many bytes give way to line rows where those
#: read source pieces at least as long (and 8 B), the stores are NT (or ``LINE_ROWS_PLAIN``), and the cols tiles
#: would not go through a stage (``cols_stage``, which makes whole lines of them).
#: `chwn -> nChw8c` u8 100x32x192x112: A is the 8 c of a block (8-byte pieces, 100 rows
#: apart), B the 100 n; cols tiles 8x32 store 8 B into each of 32 rows. Line rows take 8
#: pixels x 8 c as 64 rows, 32 n a column, each column one whole NT line. A/B on Zen 3
#: (AVX2), ratio to copy at 1 thread (2 threads), cols -> line rows: 4.83 (3.41) -> 1.63
#: (1.33); 100x32x112x112 4.03 (3.31) -> 2.17 (1.67); f32 `Abcd4a -> aCdB16b16c4b`
#: 256x16x48x12 2.96 (2.46) -> 1.00 (0.87); bf16 `abDC32d4c -> BcdA32b4a` 256x64x48x64
#: 7.04 (5.23) -> 5.12 (3.79). Source pieces of 4 B lost (s8 `aCdB16b16c4b -> Abcd4a`
#: 1.78 -> 3.30 at 1 thread, `AcdeB24a4b -> abdec` 2.13 -> 5.04), and tiny tensors in
#: cache (f32 -> s8 17x16x14x14 chwn -> nChw16c +1.3 us). ``LAYOUTJIT_LINE_ROWS_OVER_COLS_BYTES=0``: never.
#: 32 since the fortieth session (Zen 4, AVX-512): f32 -> bf16 `oihw -> OIhw16i16o` (16 o of
#: 2 bytes, 32-byte pieces from 196-byte source runs) took cols tiles through a job stage;
#: line rows of 2 i x 16 o write whole NT lines. A/B in one process, ratio to copy at 1
#: thread (2 threads), cols -> line rows: 512x256x7x7 1.49-1.71 (1.14-1.30) -> 0.71-0.88
#: (0.78-0.85), 256x1024x7x7 1.19-1.22 (1.01-1.07) -> 1.15-1.17 (0.93-0.94), 512x1024x7x7
#: 1.03 (0.94) -> 1.02 (0.88); f32 -> bf16 `goihw -> gOhwi16o` (which lost on Zen 3 under
#: the wide rule below, hence its narrowing clause) 64x16x768x5x3 1.31 (1.14) -> 0.76
#: (0.68), 64x16x128x7x7 2.05 (3.08) -> 1.10 (1.55), 16x128x128x5x5 1.70 (1.85) -> 1.04
#: (1.25); mixed: `oihw -> Ohwi16o` 2048x1024x3x3 1.29 (1.15) -> 1.40 (1.07). Two of 5736
#: listed pairs change (none public), 1 of 20 and 3 of 70 generated weight conversions.
LINE_ROWS_OVER_COLS_BYTES = int(os.environ.get("LAYOUTJIT_LINE_ROWS_OVER_COLS_BYTES", 32))
#: ... with plain stores too (below the NT threshold), since the thirty-first session.
#: Measured with NT only at first; in cache the cols tiles' short scattered stores cost
#: more still. u8 `Goihw16g -> gOIhw4i16o4i` 16x16x1024x7x3 (5 MB): cols tiles 4x32 store
#: 4 B into each of 32 rows (16 g planes 344 KB apart). A/B on Zen 3 (AVX2), ratio to copy
#: at 1 thread (2 threads), cols -> line rows: 19.3 (20.0) -> 5.2 (4.0) (oneDNN 33.8);
#: s8 32x64x256x3x3 (4 MB) from `Goihw16g` into `gOIhw4i16o4i` 18.3 (12.5) -> 4.5 (3.3),
#: `gOIhw8i16o2i` 37.1 (35.8) -> 5.2 (4.8), `gOhwi16o` 15.4 (14.9) -> 5.1 (4.6), `gOIhw8i8o`
#: 10.0 (10.2) -> 3.1 (2.8); `gOIhw16i16o -> goihw` 5.2 (6.1) -> 2.1 (1.9); `IOhw16i16o ->
#: oihw` 1536x512x5x1 6.8 (6.2) -> 2.1 (2.1); bf16 `OIhw8i8o -> oihw` 512x256x3x3 2.33 ->
#: 1.65. Changed: 1 of 1896 listed and generated pairs, 20 of 738 small weight pairs; none lost.
#: ``LAYOUTJIT_LINE_ROWS_PLAIN=0``: NT stores only, as before.
LINE_ROWS_PLAIN = os.environ.get("LAYOUTJIT_LINE_ROWS_PLAIN", "1") != "0"
#: ... and so do cols tiles storing pieces of at most ``LINE_ROWS_OVER_COLS_WIDE_BYTES`` where
#: the line rows read source pieces of ``LINE_ROWS_OVER_COLS_SRC_BYTES`` or more and the
#: conversion does not narrow. s8 -> f32 `gOIhw16i16o -> goihw` 64x1024x96x5x1: cols tiles
#: 5x32 store 20 B into each of 32 rows; line rows take 16 of the (i, hw) positions of a
#: destination line as rows, 16 B of 16 o each. A/B on Zen 3 (AVX2), ratio to copy at 1
#: thread (2 threads), cols -> line rows: 2.04 (1.46) -> 0.59 (0.66) (oneDNN 1.69 (1.18));
#: 64x64x1024x1x7 2.14 (2.42) -> 1.21 (0.97) (oneDNN 1.50 (1.47), which had been ahead);
#: s8 -> f32 `ncdhw -> gOIhw8i8o` 192x30x96x13x8 2.04 (1.31) -> 0.73 (0.60); bf16 `goihw ->
#: gOIhw16i16o` 16x1024x56x7x5 2.04 (1.89) -> 0.85 (0.91); f32 and bf16 `gOIhw16i16o ->
#: goihw` 5x1 and 7x1 even. f32 -> bf16 `goihw -> gOhwi16o` 64x16x768x5x3 lost (1.32
#: (1.16) -> 2.28 (1.33)): narrowing conversions keep their cols tiles. Up to 32 B at first;
#: since the thirty-second session any piece shorter than a line: 1-byte weights with 5x7
#: and 7x7 planes (`OIhw16i16o -> oihw` u8: 49x32 cols tiles store 49 B into each of 32
#: rows) ran at 6-9x copy. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads),
#: cols -> line rows: u8 `OIhw16i16o -> oihw` 768x1024x7x7 (74 MB) 6.29 (4.53) -> 1.27
#: (0.90), oneDNN 8.42 (5.50); `IOhw16i16o -> oihw` 5.48 (4.39) -> 2.34 (1.77); 256x512x7x7
#: and 5x7, u8 and s8, from `OIhw16i16o`, `IOhw16i16o` and `OIhw16o16i`: 6.8-8.6 (6.4-7.7)
#: -> 1.9-2.3 (2.0-2.7); s8 -> f32 3x5 (60 B pieces) 3.1-3.4 (3.2-3.6) -> 1.8-1.9 (1.8-1.9);
#: f32 `OIhw4o4i -> iohw` 3x5 2.78 (3.83) -> 1.45 (1.56); bf16 `OIhw8i8o -> oihw` 5x5 1.71
#: (2.21) -> 1.56 (1.69). 24 of 3528 weight pairs changed (hw 1x7 to 11x11, 9 blocked
#: formats, 4 plain ones, 7 type pairs, both ways), none lost; none of 3286 listed and
#: generated pairs.
LINE_ROWS_OVER_COLS_WIDE_BYTES = int(os.environ.get("LAYOUTJIT_LINE_ROWS_OVER_COLS_WIDE_BYTES", 63))
LINE_ROWS_OVER_COLS_SRC_BYTES = 16


#: Cols tiles whose C is the lightest digit of a padded dim (`goihw -> gOIhw16i16o` with
#: i = 56 of 64, hw = 7): each state's run is cut after C's valid steps and the steps
#: past them get zeros (``codegen._cols_group``). They were 16x7 tiles, one line per
#: column. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), 16x7 tiles -> cols:
#: that pair 2.03 (1.47) -> 1.17 (0.96) (it was 1.23x oneDNN's time); `oihw -> OIhw16i16o`
#: 2048x1000x7x1 1.17 (0.99) -> 0.68 (0.70), 4096x1000x3x3 1.14 (0.95) -> 0.85 (0.78),
#: 8192x500x5x5 2.83 (2.31) -> 1.92 (1.76); `goihw -> gOIhw16i16o` 64x1024x56x3x3 1.03
#: (0.93) -> 0.90 (0.88); s8 -> u8 `aBdC64b4c -> AcdB16b32a` 5.09 (3.76) -> 3.25 (2.40).
#: Only for destination padding (a source-only padded C lost) and, for narrowing
#: conversions, pieces of whole lines. ``LAYOUTJIT_COLS_PADDED_C=0``: C unpadded (or
#: uniform) only.
COLS_PADDED_C = os.environ.get("LAYOUTJIT_COLS_PADDED_C", "1") != "0"


def _lightest_padded(ir: LoopIR, nodes: list[Node], n: Node) -> bool:
    """Whether n is its (padded) dim's lightest digit, every other digit of it heavier."""
    if n.weight != 1 or n.dim is None:
        return False
    r = ir.dims[n.dim]
    # (destination padding: a source-only padded C, `AcB4b24a4b -> aCB16b32c`, lost 1.00 -> 1.20)
    return r.write > r.valid and _digit_order_ok(ir, nodes, n)


#: Longest table of destination offsets a cols tile may use (elements of one period).
COLS_MAX_PERIOD = 1024


#: Tiles that write whole blocks take their columns over B x C too (``_cols_over_blocks``).
COLS_WHOLE_BLOCKS = os.environ.get("LAYOUTJIT_COLS_WHOLE_BLOCKS", "1") != "0"


def _cols_over_blocks(ir: LoopIR, a: Node, b: Node, rows: int, ssz: int, dsz: int) -> bool:
    """Whether a transpose whose tiles write whole blocks (B's destination stride is A's
    extent) takes columns over B x C (``_cols_node``) instead.

    Such tiles read B elements from each of A's rows. Three cases where that is too little:
    two f32 (`OIhw8i16o2i -> oihw`: 5x2 tiles, 40 bytes a call), taken up to 3/4 of the LLC
    (``one_rule_min_bytes``; above it the blocks' NT stores won: 65536x100x3x1 1.19 ->
    2.47x copy; f32 -> s8 and u8 gained nothing); 1-byte 4x4 tiles whose four rows are one
    64-byte source line (16-blocked -> `OIhw4o4i`: 16 bytes a call), in cache too (u8
    `Ohwi16o -> OIhw4o4i` 65536x128x3x3, 72 MB, lost 1.18 -> 1.73); and rows of at most 8
    bytes that all share one L1 set, more of them than its ways (`Ohwi4o -> iohw` u8 3x3: 9
    rows 8 KB apart, 4 bytes of each), which every tile reads from L2 again (16-55x copy).
    Columns over B x C (2 i x 16 o, 4 o x 4 o, 4 o x I) read a vector of each row a call.

    Zen 3 (AVX2), ``python -m perf.ab`` ratio to copy at 1 thread (2 threads), off -> on,
    and oneDNN's: f32 `OIhw8i16o2i -> oihw` 512x384x5x1 3.94 (3.70) -> 1.80 (1.80), oneDNN
    3.95 (3.84); 512x384x3x3 4.70 (5.20) -> 2.15 (1.68), oneDNN 4.91 (4.56); u8 `Ohwi4o ->
    iohw` 512x1024x3x5 51.2 (56.7) -> 8.5 (8.2), oneDNN 71.7 (77.1); u8 `Ohwi8o -> iohw`
    512x1024x7x7 18.1 (13.8) -> 6.1 (5.0), oneDNN 11.7 (9.3); bf16 `Ohwi4o -> iohw`
    512x512x5x5 25.4 (25.2) -> 3.9 (3.8): the 19 listed and generated pairs of the first
    and third case and the two above, geomean 0.34 (0.36), 21 (19) faster by a tenth, none
    slower. s8 `Ohwi16o -> OIhw4o4i` 512x1024x3x5 4.39 (5.08) -> 1.36 (1.48), oneDNN 10.9
    (12.6); u8 512x512x5x5 8.54 (8.97) -> 1.40 (1.57); s8 `IOhw16i16o -> OIhw4o4i`
    256x2048x3x3 2.37 (2.29) -> 1.58 (1.64): 18 pairs of the second case in cache, geomean
    0.49 (0.52), all faster by a tenth; with 8-byte rows (`OIhw8i8o -> OIhw4o4i` s8) they
    lost 1.68 -> 3.54. Taken wherever a C exists (424 pairs), columns lost up to 3.6x
    (1-byte tiles of 16-byte rows: `ohwi -> OIhw16i16o` s8 512x1024x7x7 0.81 -> 2.96).
    """
    if not COLS_WHOLE_BLOCKS or a.strides[1] is None:
        return False
    in_cache = ir.total * (ssz + dsz) < one_rule_min_bytes()
    if b.extent == 2 and ssz == dsz == 4 and in_cache:
        return True
    if ssz == dsz == 1 and b.extent == 4 and rows == 4 and a.strides[1] == 16 and in_cache:
        return True
    return b.extent * ssz <= 8 and rows > L1_WAYS and _rows_share_l1_set(a.strides[1] * ssz)


def _cols_node(ir: LoopIR, nodes: list[Node], ia: int, ib: int, lanes: int) -> int | None:
    """The node C that continues B's source run, when B alone makes poor register tiles.

    B (source stride 1) shorter than a few vectors and not a whole number of
    them wastes most of each tile (9 of 16 lanes for 3x3 weights); if the
    source stays contiguous into C (C's source stride is B's extent), the tile
    reads whole vectors of the B x C run instead. Only for src and dst alone,
    with B and C unpadded.
    """
    b = nodes[ib]
    if lanes < 2 or b.extent % lanes == 0 or b.extent >= 4 * lanes or len(ir.operands) != 2:
        return None
    for i, n in enumerate(nodes):
        if i in (ia, ib) or n.extent < 2 or n.strides[1] != b.extent or n.strides[0] is None:
            continue
        # padded dims only as uniform digits (every column of a step is data, or none is),
        # and only for B of at most 2 elements or 4 bytes (COLS_UNIFORM)
        tiny = b.extent <= 2 or b.extent * ir.operands[1].dtype.size <= 4
        # (a padded C: pieces of lines only where the conversion does not narrow; f32 ->
        # bf16 `oihw -> OIhw16i16o` 4096x1000x3x3, 32-byte pieces, lost 1.28 -> 1.57)
        dsz, ssz = ir.operands[0].dtype.size, ir.operands[1].dtype.size
        pieces_ok = (nodes[ia].extent * dsz) % 64 == 0 or ssz <= dsz
        if not all(not _guarded(ir, m) or (COLS_UNIFORM and tiny and _uniform_digit(ir, m))
                   or (m is n and COLS_PADDED_C and _lightest_padded(ir, nodes, m) and pieces_ok)
                   for m in (b, n)):
            return None
        if math.lcm(b.extent, lanes) > COLS_MAX_PERIOD:
            return None
        return i
    return None


def _line_rows(ir: LoopIR, nodes: list[Node], ia: int, ib: int, dsz: int, lanes: int, half: bool = False
               ) -> tuple[LoopIR, TileSpec] | None:
    """:func:`_line_rows_of` with rows of one line, or else (``half``: in place of cols
    tiles, ``LINE_ROWS_HALF``) of half a line."""
    lined = _line_rows_of(ir, nodes, ia, ib, dsz, lanes, 64)
    n = nodes[ia].extent
    if lined is None and half and LINE_ROWS_HALF and dsz < 4 and n & (n - 1):
        lined = _line_rows_of(ir, nodes, ia, ib, dsz, lanes, 32)
    return lined


#: Line rows whose period of whole lines does not divide the nodes that continue A (u8
#: `OIhw16i16o -> oihw` with 7x7 planes: a period is lcm(64, 49) = 64 i, four i-blocks,
#: and I = 96 is not a number of them) take rows of half a line (32 i, two blocks) before
#: falling back to cols tiles, whose pieces of 49 B land anywhere in a line. A/B on Zen 3
#: (AVX2), ratio to copy at 1 thread (2 threads), cols -> half lines: u8 `OIhw16i16o ->
#: oihw` 256x96x7x7 6.02 (4.64) -> 2.49 (1.90), 256x32x7x7 5.47 (3.87) -> 2.19 (1.64), u8
#: 1024x160x5x7 6.58 (7.08) -> 2.02 (2.00), s8 `IOhw16i16o -> oihw` 256x96x7x7 5.94 (5.05)
#: -> 2.54 (2.10); of 27 sampled changed weight pairs (123 of 22141 listed and generated),
#: `Ohwi16o -> oihw` u8 96x160x7x7 5.80 (3.42) -> 2.55 (1.54), bf16 -> s8 `OIhw8i8o ->
#: oihw` 8.68 (5.71) -> 4.64 (3.15), s8 -> bf16 13.0 (9.3) -> 10.3 (6.7). The half lines
#: are plain stores. Only in place of cols tiles, for destinations of 1 and 2 bytes and A
#: not a power of two (planes, not the 4i of `iohw -> OIhw4o4i`: that lost, bf16 1x7 1.69
#: (1.47) -> 7.52 (4.90), f32 -> bf16 3x5 3.59 -> 4.49).
LINE_ROWS_HALF = os.environ.get("LAYOUTJIT_LINE_ROWS_HALF", "1") != "0"


def _line_rows_of(ir: LoopIR, nodes: list[Node], ia: int, ib: int, dsz: int, lanes: int,
                  line: int) -> tuple[LoopIR, TileSpec] | None:
    """A transpose whose rows fill whole destination lines from two digits, when A is short.

    A (destination stride 1) shorter than a line makes tiles that store pieces of
    lines (oihw -> OIhw4i16o4i: 4 i = 16 bytes). If a node A2 continues the line
    (destination stride A.extent), it is split so that k = line / A.extent of its
    steps join the rows: R = one line of rows (A2lo x A), each read from its own
    source offset, every column stored as one whole (NT-capable) line. Only for src
    and dst alone; a padded A or A2 where its padding rows fill whole lines or are zeros
    in the registers (``_padded_line_digit``, ``_padded_line_steps``).

    When A is not a whole number of lines (OIhw16i16o -> oihw: 9 hw, f32 lines of 16),
    the rows repeat their pattern every lcm(line, A) elements: A2lo takes that many A's
    (16 i: 144 rows, 9 lines), and the macro tile is a loop over those lines, each
    tile reading its rows at the offsets of its slice of one table (``simd.tile_rows``;
    at most ``LINE_ROWS_MAX_ROWS`` rows). Unrolled tiles with constant offsets
    measured the same on 9 lines, but 27 (OIdhw16i16o -> oidhw) lost in cache, 3.56 ->
    4.60x copy, their bodies twice over the instruction cache. Measured
    OIhw16i16o -> oihw 1024x1024x3x3 f32, ratio to copy at 1 thread (2 threads): 9x16
    tiles storing 36-byte pieces 1.83-2.4 (1.88-2.1) -> 1.29 (1.30); gOIhw16i16o -> goihw
    64x128x128x3x3 1.72 -> 1.17 (1.45 -> 0.92).
    """
    a, b = nodes[ia], nodes[ib]
    q = line // dsz if dsz <= line else 1
    if (len(ir.operands) != 2 or a.extent % q == 0 or lanes < 2
            or any(s is None for s in a.strides)):
        return None
    if a.dim is not None and ir.dims[a.dim].guarded and not _padded_line_digit(ir, nodes, ia, q):
        return None
    k = math.lcm(q, a.extent) // a.extent
    if k * a.extent > LINE_ROWS_MAX_ROWS:
        return None
    for i, n in enumerate(nodes):
        if (i in (ia, ib) or n.strides[0] != a.extent or any(s is None for s in n.strides)):
            continue
        if n.extent % k or n.extent < k:
            two = _line_rows_two(ir, nodes, ia, ib, i, k, q, lanes)
            if two is not None:
                return two
            continue
        if n.dim is not None and ir.dims[n.dim].guarded and not (
                PADDED_LINE_ROWS and _padded_line_steps(ir.dims[n.dim], n, k, k * a.extent == q)):
            return None
        lo, rest = _split_lightest(nodes, i, k, (ia, ib))
        r = len(rest)
        spec = TileSpec("transpose", r + 1, r + 2, q, min(b.extent, lanes), 1, False, a2=r)
        return ir.with_nodes(rest + [lo, a, b], "choose_tile"), spec
    return None


def _padded_line_steps(r: DimRange, a2: Node, k: int, one_line: bool) -> bool:
    """Whether a padded A2 (its dim's lightest digit) can give k steps to line rows: the
    destination's written end falls on whole lines, and so does the data's end, or a period
    is one line, whose steps past the data are padding rows (``src_rows`` None, zeros in the
    registers; the codegen passes each state's data steps). Lines are never cut."""
    return a2.weight == 1 and r.write % k == 0 and (r.valid % k == 0 or one_line)


def _split_lightest(nodes: list[Node], i: int, k: int, leave: tuple[int, ...]) -> tuple[Node, list[Node]]:
    """Node i cut into its k lightest steps (returned) and the rest, which keeps i's place
    among the other nodes (those in ``leave`` left out; the rest dropped if one step)."""
    n = nodes[i]
    hi, lo = n.split(k)
    rest: list[Node] = []
    for j, m in enumerate(nodes):
        if j == i:
            if hi.extent > 1:
                rest.append(hi)
        elif j not in leave:
            rest.append(m)
    return lo, rest


def _line_rows_two(ir: LoopIR, nodes: list[Node], ia: int, ib: int, i2: int, k: int, q: int,
                   lanes: int) -> tuple[LoopIR, TileSpec] | None:
    """Line rows whose period takes A2 whole and part of the node A3 that continues it in the
    destination (``TileSpec.a3``): A2 alone is too short for a period (bf16 `OIhw16i16o ->
    oihw` 3x3: a line is 32 elements, so a period needs 32 i, A2 is the block's 16 i, A3 the
    i-blocks). Rows are A3lo x A2 x A, each read from its own offset (``src_rows``).

    Measured on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads), tiles
    storing pieces of an hw row (bf16 32x9, s8 cols 9x32) -> line rows (with
    ``_prefetch_periods``): `OIhw16i16o -> oihw` 1024x1024x3x3 bf16 2.07 -> 1.59, s8 2.37 ->
    1.27, 1024x512x7x7 bf16 1.96 (1.51) -> 1.06 (1.05), 512x512x7x7 f32 -> bf16 3.25 (2.52)
    -> 1.68 (1.94), 1024x1024x3x3 f32 -> bf16 2.54 (2.13) -> 2.29 (1.56), 1024x512x5x5 f32
    -> bf16 2.38 (2.61) -> 1.52 (1.68); `OIhw8i8o -> oihw` f32 -> s8 512x512x7x7 2.42 (2.02)
    -> 1.67 (1.69), f32 512x512x7x7 2.5 (2.4) -> 1.0 (0.95). Equal: f32 -> s8 `OIhw16i16o ->
    oihw` 512x512x7x7 (2.1-2.3 / 1.9, its 200 KB periods prefetched only from
    ``PREFETCH_PERIOD_MAX_BLOCK`` 256 KB: 1.9 (1.7)), kernels bound by the conversion."""
    a, b, n = nodes[ia], nodes[ib], nodes[i2]
    if not LINE_ROWS_TWO or k % n.extent or _guarded(ir, n):
        return None
    k3 = k // n.extent
    for i3, m in enumerate(nodes):
        if (i3 in (ia, ib, i2) or m.strides[0] != a.extent * n.extent or m.extent % k3
                or any(s is None for s in m.strides)):
            continue
        if _guarded(ir, a) or _guarded(ir, m):
            if not (PADDED_LINE_ROWS_TWO and _whole_padded_lines(ir, a, m, k3)):
                return None
        lo, rest = _split_lightest(nodes, i3, k3, (ia, ib, i2))
        r = len(rest)
        spec = TileSpec("transpose", r + 2, r + 3, q, min(b.extent, lanes), 1, False, a2=r + 1, a3=r)
        return ir.with_nodes(rest + [lo, n, a, b], "choose_tile"), spec
    return None


#: Line rows over two destination nodes (``_line_rows_two``).
LINE_ROWS_TWO = os.environ.get("LAYOUTJIT_LINE_ROWS_TWO", "1") != "0"


def _whole_padded_lines(ir: LoopIR, a: Node, m: Node, k3: int) -> bool:
    """Whether the padded dims of A and A3 (``_line_rows_two``) leave every period all data or
    all padding: A3lo holds its dim's lightest steps (after A's, when A is of its dim), and
    the dim's data and written ends fall on whole periods of it, so the outer digits' states
    (full or zero) place each tile and no row is half data (u8 `oihw -> OIhw8i16o2i` with
    I = 100 of 112: a line is 2i x 16o x 2i, 4 i, and 100 is a number of them)."""
    same = a.dim is not None and a.dim == m.dim
    if _guarded(ir, a) and not same:
        return False
    step = a.extent * k3 if same else k3
    r = ir.dims[m.dim] if m.dim is not None else None
    return (r is not None and m.weight == (a.extent if same else 1) and (not same or a.weight == 1)
            and r.valid % step == 0 and r.write % step == 0)


#: Line rows over two destination nodes whose A or A3 is padded (``_whole_padded_lines``).
PADDED_LINE_ROWS_TWO = os.environ.get("LAYOUTJIT_PADDED_LINE_ROWS_TWO", "1") != "0"


def _padded_line_digit(ir: LoopIR, nodes: list[Node], ia: int, q: int) -> bool:
    """Whether a padded A can form the rows of an ``a2`` transpose: its rows past the data
    are padding rows, zeros in the registers (``src_rows`` None), never read.

    Only A that is its dim's lightest digit, with the destination's written extent a whole
    number of A's steps (a tile's rows are data and padding, or all padding, or all data, as
    the outer digits place it: the codegen's states), and that divides a line (one line per
    period: the rows are constants, not a table); and A's source rows a line or more apart
    (bf16 -> f32 `aBCde16b16c -> aBcde8b`, rows 32 bytes apart in the source's blocks, lost:
    112x24x7x12x48 1.29 (1.21) -> 1.75 (1.47); measured again in a later session it gained,
    and nearer rows are taken too: ``NEAR_PADDED_ROWS``), or a dim of one element (f32 -> bf16
    `bcda -> Ohwi16o` 1x384x224x128, O = 1: 5.56 (4.72) -> 2.15 (1.99)). Measured
    (Zen 3, AVX2), ratio to copy at 1 thread (2 threads), tiles of one padded block storing
    pieces of lines -> line rows: aebcd -> aBcde8b 1024x1x4x64x12 (b: 1 of 8) 1.38 (1.23)
    -> 0.62 (0.82), oneDNN 0.98 (1.09); aBcde4b 1.79 (1.43) -> 0.86 (0.87); f32 -> bf16
    aBcde8b 1.91 (1.39) -> 0.83 (0.85); abced -> aBcde8b 64x3x4x64x64 1.96 (1.67) -> 1.07
    (1.05); abdc -> aBcd8b 256x3x64x64 1.49 (1.61) -> 1.16 (1.11); f32 -> bf16 abdc ->
    aBcd16b 1024x5x64x64 1.76 (1.35) -> 1.34 (1.18). Several blocks: `dcba -> aBcd4b`
    1024x13x12x48 4.65 (3.47) -> 1.58 (1.39), oneDNN 14.4 (10.2); f32 -> s8 `bacd ->
    Acdb16a` 4x1024x40x48 4.19 (3.59) -> 1.44 (1.28); `abdc -> ABcd4b16a4b` 112x100x48x40
    2.59 (2.12) -> 1.81 (1.40); bf16 `edcba -> aBCde16b16c` 64x112x4x128x8 4.14 (4.77) ->
    3.09 (1.28); of 10 random pairs it changes 7 gained, 3 held (within noise).
    """
    a = nodes[ia]
    assert a.dim is not None
    r = ir.dims[a.dim]
    # (a dim of one element, `bcda -> Ohwi16o` with O = 1: one data row, no line to share;
    # NEAR_PADDED_ROWS: nearer rows too)
    far = NEAR_PADDED_ROWS or abs(a.strides[1] or 0) * ir.operands[1].dtype.size >= 64 or r.valid == 1
    return (far and q % a.extent == 0 and a.weight == 1 and r.write % a.extent == 0
            and r.extent % a.extent == 0)


#: Padded line rows (``_padded_line_digit``) whose source rows are under a line apart.
#: `oihw -> OIhw4i16o4i` 4096x1000x3x3 (i = 1000 of 1008:
#: rows 36 B apart) took 4x8 tiles of 16-byte pieces, 1.37x oneDNN's time. A/B on Zen 3
#: (AVX2), ratio to copy at 1 thread (2 threads), without -> with: that pair 1.67 (1.89)
#: -> 1.21 (0.98); s8 -> f32 `OIhw16i16o -> nChw4c` 768x17x13x100 1.40 (1.30) -> 0.67
#: (0.73); `hwio -> nChw8c` 8x100x128x100 1.42 (1.32) -> 1.24 (0.97); bf16 -> f32
#: `aBCde16b16c -> aBcde8b` 112x24x7x12x48 (which had lost once, the rule's first
#: measurement) 1.42 (1.31) -> 1.19 (1.32); f32 -> s8 4096x1000x3x3 1.78 (1.72) -> 1.22
#: (1.30), f32 -> bf16 2.17 (1.96) -> 0.78 (1.65). 13 pairs changed, 11 gained; two f32 ->
#: bf16 pairs lost: `aBdC8b2c -> AcdB64a4b` 384x13x1024x3 3.31 (2.48) -> 3.49 (2.94),
#: `Ohwi8o -> nChw16c` 192x17x16x224 (the last block one channel of 16) 1.08 (1.15) ->
#: 1.61 (0.98).
NEAR_PADDED_ROWS = os.environ.get("LAYOUTJIT_NEAR_PADDED_ROWS", "1") != "0"

#: Line rows whose A2 is padded (``_padded_line_steps``), in place of 4x8 tiles storing
#: 16-byte pieces. A/B on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads),
#: without -> with: `goihw -> gOIhw4i16o4i` 64x24x1024x7x3 (o = 24 of 32; 1.97 (1.74) in
#: a sweep, slower than oneDNN's 1.75 (1.52)) 2.11 (1.48) -> 0.85 (0.71); `oihw ->
#: OIhw4i16o4i` 1000x512x3x3 1.31 (1.67) -> 0.57 (0.66), f32 -> s8 1.65 (1.76) -> 1.11
#: (0.93); `oihw -> OIhw8i16o2i` bf16 1000x512x3x3 4.1 (4.9) -> 1.0 (0.99), f32 -> bf16
#: 16.7 (15.6) -> 0.75 (0.93); `goihw -> gOIhw8i16o2i` bf16 32x24x512x3x3 2.50 (3.07) ->
#: 0.57 (0.96).
PADDED_LINE_ROWS = os.environ.get("LAYOUTJIT_PADDED_LINE_ROWS", "1") != "0"


#: Most rows in one period of an ``a2`` transpose (its row table: 32 KB of offsets). Once
#: 64 lines (1024 f32 rows): f32 `OIhw16i16o -> oihw` 11x11 (121 lines) took 16x8 tiles into
#: rows of 121 elements off the lines, realigned through a stage; its line rows, ratio to
#: copy at 1 thread (2 threads), 512x512x11x11: 2.03 (1.58) -> 0.97 (0.91), 256x512x13x13
#: (169 lines) 1.94 (1.64) -> 1.03 (0.94) (with ``_prefetch_periods``).
LINE_ROWS_MAX_ROWS = 4096


def tile_rows(ir: LoopIR, tile: TileSpec) -> int:
    """Rows the tile's A covers: A's extent, or A2lo x A for an ``a2`` transpose (one period)."""
    a = ir.nodes[tile.a]
    a2 = ir.nodes[tile.a2].extent if tile.a2 is not None else 1
    return a.extent * a2 * (ir.nodes[tile.a3].extent if tile.a3 is not None else 1)


def src_rows(ir: LoopIR, tile: TileSpec, valid: int | None = None, valid2: int | None = None
             ) -> tuple[int | None, ...]:
    """Source offsets of the rows of an ``a2`` transpose: row r = (A2 step r // A.extent,
    A step r % A.extent), whose destination offset is r; one period (``tile_rows``): a
    tile at row a0 takes ``rows[a0:a0 + R]``. None: a padding row (zeros) of a padded A,
    one whose A step is ``valid`` or more (default: the dim's data, as where A's dim has no
    other digit; the codegen passes what each state of the outer digits leaves), or of a
    padded A2, whose A2 step is ``valid2`` or more (default: every step)."""
    assert tile.a2 is not None
    a, a2 = ir.nodes[tile.a], ir.nodes[tile.a2]
    s3 = ir.nodes[tile.a3].strides[1] if tile.a3 is not None else 0
    assert a.strides[1] is not None and a2.strides[1] is not None and s3 is not None
    if valid is None:
        valid = ir.dims[a.dim].valid if a.dim is not None else a.extent
    if valid2 is None:
        valid2 = a2.extent
    return tuple(None if r % a.extent >= valid or (r // a.extent) % a2.extent >= valid2
                 else ((r // a.extent) % a2.extent * a2.strides[1] + (r // a.extent // a2.extent) * s3
                       + (r % a.extent) * a.strides[1])
                 for r in range(tile_rows(ir, tile)))


#: Source stages of ``a2`` period lines (``src_stage``): on/off, the fewest source runs
#: (half again an L1 set's 8 ways: 3x5 planes, 15 runs, gained; 3x3, 9 runs, lost), the
#: shortest run and the largest stage, in bytes.
SRC_STAGE = os.environ.get("LAYOUTJIT_SRC_STAGE", "1") != "0"
SRC_STAGE_MIN_RUNS = 12
SRC_STAGE_MIN_RUN_BYTES = 256
SRC_STAGE_MAX_BYTES = 256 * 1024
#: ... for rows of at most this many bytes (four or more to a line, each line read by as
#: many tiles far apart; rows of 32 and 64 B lost: f32 and bf16 1.5 -> 2.0)
SRC_STAGE_MAX_ROW_BYTES = 16


def stage_runs(rows: tuple[int | None, ...], length: int) -> tuple[int, int, int, int] | None:
    """The source runs that rows at these offsets, ``length`` elements each, read together:
    (first start, step between starts, count, run length) when they are evenly spaced
    runs of one length; None otherwise (or with a padding row)."""
    if any(r is None for r in rows) or length < 1:
        return None
    spans: list[list[int]] = []
    for r in sorted(r for r in rows if r is not None):  # (all of them: for the type checker)
        if spans and r <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], r + length)
        else:
            spans.append([r, r + length])
    first, run = spans[0][0], spans[0][1] - spans[0][0]
    if len(spans) < 2 or any(b - a != run for a, b in spans):
        return None
    step = spans[1][0] - first
    if any(spans[k][0] != first + k * step for k in range(len(spans))):
        return None
    return first, step, len(spans), run


def src_stage(plan: Plan) -> int:
    """Elements between two runs of the source stage of an ``a2`` transpose's period lines
    (``Plan.src_stage``); 0: none.

    A period of line rows (``Ohwi16o -> oihw``: 64 i x 49 hw rows of 16 o each) reads its
    rows from a few runs of the source (one per hw: 64 i x 16 o, 1 KB), and each line of
    a run is read over several tiles. Runs a multiple of 4 KB apart (I = 1024: 16 KB) all
    land in one L1 set, and 49 of them in the 8 ways of a Zen 3 L2 set's share too: every
    tile read missed. Each period first copies its runs, a line and a run apart, into a
    stage (about 50 KB, in L2, spread over the sets) and the tiles read from there.
    A/B on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads), no stage ->
    stage: u8 ``Ohwi16o -> oihw`` 512x1024x7x7 4.95 (3.77) -> 2.51 (1.93), 768x256x7x7
    7.00 (7.37) -> 2.40 (3.05), 512x512x5x5 4.75 (5.23) -> 2.41 (3.11), 512x1024x3x5
    3.03 (3.57) -> 2.35 (3.02); u8 ``gOhwi16o -> goihw`` 4x256x1024x7x7 3.91 (2.60) ->
    1.99 (1.59); bf16 ``Ohwi8o -> oihw`` 512x512x5x5 4.17 (4.89) -> 2.03 (2.27); s8 alike
    (oneDNN 24-110). Lost: 3x3 planes (9 runs: u8 2.20 -> 2.51, bf16 1.70 -> 2.06) and
    rows of 32 or 64 B (bf16, f32 ``Ohwi16o -> oihw``: 1.5 -> 2.0), whose lines are each
    read by one or two tiles in a row.
    """
    t = plan.tile
    if (not SRC_STAGE or t is None or t.kind != "transpose" or t.a2 is None or t.b is None
            or plan.shifted or plan.panel or plan.macro_job or tile_rows(plan.ir, t) <= t.R):
        return 0  # (macro_job: a job takes a group of the period's lines, not the period)
    ir = plan.ir
    b = ir.nodes[t.b]
    ssz = ir.operands[1].dtype.size
    if b.strides[1] != 1 or b.extent * ssz > SRC_STAGE_MAX_ROW_BYTES:
        return 0
    runs = stage_runs(src_rows(ir, t), b.extent)
    if runs is None:
        return 0
    first, step, n, length = runs
    per_line = max(1, 64 // ssz)
    pitch = -(-length // per_line) * per_line + per_line  # whole lines and one more
    if (n < SRC_STAGE_MIN_RUNS or length * ssz < SRC_STAGE_MIN_RUN_BYTES
            or not _rows_share_l1_set(step * ssz) or n * pitch * ssz > SRC_STAGE_MAX_BYTES):
        return 0
    return pitch


def cols_table(ir: LoopIR, tile: TileSpec) -> list[int]:
    """Destination offsets (elements, relative) of the columns of one period of a cols tile.

    Column l of the B x C run is element (b, c) = (l % B.extent, l // B.extent); the
    table covers lcm(B.extent, V) columns, after which the pattern repeats shifted by
    (period / B.extent) * C's destination stride.
    """
    assert tile.b is not None and tile.c is not None
    b, c = ir.nodes[tile.b], ir.nodes[tile.c]
    assert b.strides[0] is not None and c.strides[0] is not None
    period = math.lcm(b.extent, tile.V)
    return [(x % b.extent) * b.strides[0] + (x // b.extent) * c.strides[0] for x in range(period)]


STREAM_CHUNK_BYTES = 64 * 1024


def _wanted_jobs(bytes_moved: int) -> int:
    """Jobs a parallel split aims at: ``MIN_JOBS``, fewer for small problems (16 KB each)."""
    return min(MIN_JOBS, max(2, bytes_moved // (16 * 1024)))


def _job_candidates(ir: LoopIR, tile: TileSpec | None) -> list[int]:
    """The nodes the job range may flatten, outermost first: those outside the tile
    (without a tile, all but the innermost loop, which stays inside each job)."""
    skip = set(tile.nodes) if tile is not None else set()
    order = [i for i in range(len(ir.nodes)) if i not in skip]
    return order[:-1] if tile is None else order


def choose_parallel(ir: LoopIR, tile: TileSpec | None, bytes_moved: int) -> tuple[int, int, int]:
    """(loops flattened into the job range, job count, stream chunk elements).

    Small problems get one job (no index decoding at all); larger ones get at
    least ``MIN_JOBS`` jobs when the loops allow, for load balance; when the
    outer loops are too few, the micro-kernel's macro loop (or a stream's run,
    cut into chunks) joins the job range.
    """
    if bytes_moved < PARALLEL_MIN_BYTES:
        return 0, 1, 0
    want = _wanted_jobs(bytes_moved)
    order = _job_candidates(ir, tile)
    jobs = 1
    k = 0
    for i in order:
        if jobs >= want:
            break
        jobs *= ir.nodes[i].extent
        k += 1
    if tile is None and jobs < want and k == len(order) and ir.nodes:
        # cut the innermost loop into chunks that join the job range
        inner = ir.nodes[-1]
        if (inner.dim is None or not ir.dims[inner.dim].guarded) and inner.extent >= 128:
            chunk = max(64, -(-inner.extent // (want // jobs + 1)) + 63) // 64 * 64
            groups = -(-inner.extent // chunk)
            if groups > 1:
                return k + 1, jobs * groups, chunk
    if tile is not None and jobs < want and k == len(order):
        a = ir.nodes[tile.a]
        if tile.kind == "stream":
            esz = ir.operands[0].dtype.size + ir.operands[1].dtype.size
            chunk = max(tile.V, STREAM_CHUNK_BYTES // esz // tile.V * tile.V)
            chunk = max(chunk, -(-a.extent // (want // jobs + 1)) // tile.V * tile.V or tile.V)
            groups = -(-a.extent // chunk)
            if groups > 1:
                return k + 1, jobs * groups, chunk
        else:
            groups = -(-tile_rows(ir, tile) // (tile.R * tile.M))
            if groups > 1:
                return k + 1, jobs * groups, 0
    return k, jobs, 0


#: Transposes with fewer jobs than this outside the tile cut their columns into an outer
#: loop (``split_columns``; ``LAYOUTJIT_SPLIT_COLUMNS=0``: off, for A/B runs).
SPLIT_COLUMNS_BELOW = 8
SPLIT_JOB_BYTES = 128 * 1024  # the least traffic per job that the split aims at
SPLIT_COLUMNS = os.environ.get("LAYOUTJIT_SPLIT_COLUMNS", "1") != "0"
#: ... and so do runs packed into lines (kind "lines"): where the channels fit one
#: destination block (`nChw8c -> nChw16c` C <= 8, `nCdhw8c -> nCdhw16c`, `Goihw8g ->
#: Goihw16g`), n, h and w merge into the tile's columns and no node is left outside it, so
#: the whole reorder was one job and a second thread did nothing. A/B on Zen 3 (AVX2),
#: ratio to copy at 1 thread (2 threads), one job -> chunks: f32 `nCw8c -> nCw16c`
#: 1024x8x299 0.61 (1.74) -> 0.62 (0.91), oneDNN 1.44 (8.86); `nChw4c -> nChw8c` C = 3
#: 64x3x56x56 1.10 (2.08) -> 1.12 (1.17); u8 `nChw4c -> nChw16c` C = 4 2.61 (4.65) ->
#: 1.56 (1.63); `Goihw8g -> Goihw16g` 16x32x64x3x3 1.01 (1.69) -> 1.04 (1.04); the
#: memory-bound 272 MB `nChw4c -> nChw8c` 0.73 (0.92) -> 0.75 (0.93).
SPLIT_LINE_COLUMNS = os.environ.get("LAYOUTJIT_SPLIT_LINE_COLUMNS", "1") != "0"


def split_columns(ir: LoopIR, tile: TileSpec, moved: int) -> tuple[LoopIR, TileSpec] | None:
    """A transpose (or runs packed into lines, ``SPLIT_LINE_COLUMNS``) whose tile covers
    nearly everything (few outer loops, few row groups): node B split into (chunks, columns
    per chunk), the chunks an outer loop just outside the tile, so that the jobs can be
    shared between threads.

    `ab -> ba` 3x1000000 (a C=3 image plane to pixels) is one 3x16 tile per column step:
    no outer loop and one row group, so it ran as one job and a second thread did nothing
    (2 threads: 1.33x copy, oneDNN 0.91x). The chunks are a whole number of tile steps
    and divide B exactly (else no split), so that every job's tiles are whole and start
    where the unsplit plan's would. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2
    threads), one job -> chunks: 3x1000000 0.99 -> 0.65 (1.28 -> 0.62), `nchw -> nhwc`
    1x3x1024x1024 0.56 -> 0.57 (0.86 -> 0.67), `nchw -> nChw16c` 1x96x112x112 0.78 -> 0.51
    (1.00 -> 0.63), `abc -> bca` 100x100x100 2.36 -> 1.58 (1.46 -> 0.95). Jobs of 20 KB
    (`ab -> ba` 64x1000, 50 jobs for 2) lost: 1.34 -> 1.46 at 1 thread.
    """
    kinds = ("transpose", "lines") if SPLIT_LINE_COLUMNS else ("transpose",)
    if not SPLIT_COLUMNS or tile.kind not in kinds or tile.b is None or tile.c is not None \
            or tile.a2 is not None or moved < PARALLEL_MIN_BYTES:
        return None
    groups = -(-tile_rows(ir, tile) // (tile.R * tile.M))
    have = outer_count(ir, tile) * groups
    if have >= SPLIT_COLUMNS_BELOW:
        return None
    b = ir.nodes[tile.b]
    if any(s is None for s in b.strides) or (b.dim is not None and ir.dims[b.dim].guarded):
        return None
    want = -(-min(MIN_JOBS, max(2, moved // SPLIT_JOB_BYTES)) // have)
    steps = b.extent // tile.V
    if b.extent % tile.V or steps < 2:
        return None
    n = next((n for n in range(min(want, steps), min(2 * want, steps) + 1) if steps % n == 0), None)
    if n is None or n < 2:
        return None
    k = b.extent // n
    outer, inner = b.split(k)
    nodes = list(ir.nodes)
    nodes[tile.b] = inner
    nodes.insert(min(tile.a, tile.b), outer)  # the tile's two nodes move in by one
    return ir.with_nodes(nodes, "split_columns"), _tile_moved_in(tile, min(tile.a, tile.b))


#: Least traffic a job should move (``split_jobs``; ``LAYOUTJIT_JOB_MIN_BYTES=0``: off).
JOB_MIN_BYTES = int(os.environ.get("LAYOUTJIT_JOB_MIN_BYTES", 256))


def split_jobs(ir: LoopIR, tile: TileSpec | None, moved: int) -> tuple[LoopIR, TileSpec | None] | None:
    """Split the outer node that ``choose_parallel`` would flatten into tiny jobs.

    ``OIhw8i8o -> OIhw4o4i`` u8 24x32x768x192: the block digits outside the tile make 48
    jobs, short of ``MIN_JOBS``, so the next node (the 147456 pixels) joined the job
    range: seven million jobs of one 16-byte tile each, every one decoding five indices
    (6.6 (3.9)x copy at 1 thread (2 threads)). Where a job would move less than
    ``JOB_MIN_BYTES``, the node is cut into an outer digit of just enough steps (a divisor
    of its extent) and an inner one, a plain loop inside each job: that pair 2.3 (2.0);
    `OIhw8i16o2i -> OIhw8i8o` u8 3x64x512x384 1.49 (1.54) -> 1.25 (1.28); f32 -> s8
    `gOIhw8i8o -> nCdhw16c` 4x128x2x17x768 0.44 (0.46) -> 0.33 (0.36); five more within
    noise. At 1 KB it changed element-loop plans of 512 B jobs too, and lost (u8
    `OIhw16o16i -> NChw16n16c` 17x56x100x256 at 2 threads 0.84 -> 1.25). Unpadded nodes only.
    """
    if not JOB_MIN_BYTES or moved < PARALLEL_MIN_BYTES:
        return None
    want = _wanted_jobs(moved)
    jobs = 1
    for i in _job_candidates(ir, tile):
        if jobs >= want:
            return None
        n = ir.nodes[i]
        if jobs * n.extent <= want or moved // (jobs * n.extent) >= JOB_MIN_BYTES:
            jobs *= n.extent
            continue
        if any(s is None for s in n.strides) or _guarded(ir, n):
            return None
        need = -(-want // jobs)
        g = next((g for g in range(need, min(n.extent - 1, 4 * need) + 1) if n.extent % g == 0), None)
        if g is None:
            return None
        k = n.extent // g
        nodes = list(ir.nodes)
        nodes[i:i + 1] = n.split(k)  # (merged nodes carry weight 1)
        if tile is None:
            return ir.with_nodes(nodes, "split_jobs"), None
        return ir.with_nodes(nodes, "split_jobs"), _tile_moved_in(tile, i)
    return None


def _tile_moved_in(tile: TileSpec, at: int) -> TileSpec:
    """``tile`` after a node was inserted at index ``at``: its nodes from there move in by one."""
    def f(x: int | None) -> int | None:
        return x + 1 if x is not None and x >= at else x
    return replace(tile, a=tile.a + (tile.a >= at), b=f(tile.b), l=f(tile.l), c=f(tile.c), a2=f(tile.a2),
                   a3=f(tile.a3))


def make_plan(ir: LoopIR, *, allow_tile: bool = True, vbytes: int | None = None,
              allow_shift: bool = True, allow_cols: bool = True) -> Plan:
    """Run every pass and record the choices (see the module docstring); the source stage
    (``src_stage``) is decided on the finished plan."""
    plan = _make_plan(ir, allow_tile=allow_tile, vbytes=vbytes, allow_shift=allow_shift,
                      allow_cols=allow_cols)
    pitch = src_stage(plan)
    if pitch:
        plan = replace(plan, src_stage=pitch)
    ahead = job_prefetch(plan)
    if ahead:
        return replace(plan, job_prefetch=ahead)
    rows = job_rows_ahead(plan) or tile_rows_ahead(plan) or runs_rows_ahead(plan)
    return replace(plan, rows_ahead=rows) if rows else plan


def tile_rows_ahead(plan: Plan) -> int:
    """Source elements to where an outer loop's next step continues the rows of an NT
    transpose's tiles (unstaged; rows that follow one another: ``TILE_CHUNK_PREFETCH``), where that loop is not
    the innermost (else the next tile reads those lines); 0: none. Each tile prefetches
    the lines of its rows that far on, to L2, as ``row_continuation`` does for ``a2``
    tiles. Tensors that move the LLC's size or more only.

    `Goihw16g -> gOIhw16o16i` f32 512x384x13x1x7: 16x8 tiles read 16 rows 448 B apart, a
    line of each; the w step that reads their next lines runs outside the 16 i steps of
    the job (93 KB of source), so each pass reads one line in seven of the block.
    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> with: 1.75
    (1.70) -> 1.20 (1.14), oneDNN 5.21 (5.07); `OIhw16o16i -> oihw` 1024x1024x3x3 1.67
    (1.27) -> 1.10 (0.96); `gOIhw16o16i -> goihw` 64x64x1024x3x3 1.53 (1.61) -> 1.07
    (1.16); `abcd -> dcba` 64x64x64x64 3.25 (3.45) -> 2.46 (2.78); `Goihw16g ->
    gOIhw16i16o` 2048x512x8x3x7 1.41 (1.26) -> 1.06 (0.89). 10 of 6649 listed and
    generated pairs changed, all measured: six gained, three even, and one of 9 MB (in
    cache, now left out) lost (`Goihw16g -> gOhwi16o` 128x64x96x1x3 1.87 -> 2.23 at 1
    thread)."""
    t = plan.tile
    if (not TILE_ROWS_PREFETCH or not plan.nt or plan.job_stage or plan.prefetch or t is None
            or t.kind != "transpose" or t.a2 is not None or t.c is not None or t.b is None
            or plan.row_stage or plan.shifted or plan.panel or plan.cols_stage):
        return 0
    ir = plan.ir
    a, b = ir.nodes[t.a], ir.nodes[t.b]
    if b.strides[1] != 1:
        return 0
    # rows that follow one another: the tile reads one chunk, which the outer step moving
    # the source by the chunk continues (TILE_CHUNK_PREFETCH)
    follow = _rows_follow(a, b)
    if follow and (not TILE_CHUNK_PREFETCH or t.R * t.M < a.extent):
        return 0
    if data_bytes(ir) < llc_bytes():
        return 0
    step = a.extent * b.extent if follow else b.extent
    outer = outer_nodes(ir, t)
    for k, i in enumerate(reversed(outer)):
        if ir.nodes[i].strides[1] == step:
            return step if k > 0 else 0
    return 0


#: ``tile_rows_ahead`` also for tiles whose rows follow one another (each reads one chunk of
#: the source) where an outer step that is not the innermost continues the chunk
#: (``LAYOUTJIT_TILE_CHUNK_PREFETCH=0``: rows apart only). f32 `oihw -> OIhw16o16i`
#: 1600x832x3x3: 16x9 tiles read the 16 i x 9 hw of one o (576 B), the next 576 B of each o
#: row 16 tiles later (the o steps, 29 KB apart, inside the i blocks), 16 streams the
#: prefetchers left behind. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2 threads),
#: without -> with (the chunk one step ahead): 1.29-1.30 (0.95-1.31) -> 0.70-0.76 (0.73-0.75),
#: oneDNN 1.41-1.47 (1.26-1.65); 1024x2048x3x3 1.04 (0.89) -> 0.78 (0.77), oneDNN 1.97
#: (1.43); `NChw16n32c -> Ohwi32o` 128x192x56x17 1.59 (1.11) -> 1.01 (0.79); s8 -> f32
#: `gIdhwo64i -> gOdwhi16o` 112x24x24x18x2x6 1.89 (1.30) -> 1.44 (1.04); f32 -> s8 `ldOi16o
#: -> ldIo32i` 12x128x64x128 1.79 (1.42) -> 1.64 (1.27). 33 of 2864 listed and generated
#: pairs changed; of 15 measured, 9 gained and 6 stayed even. Two steps ahead gained more on
#: some (1600x832x3x3 0.67 (0.74), `ldOi16o -> ldIo32i` 1.36 (1.16)) and lost on others
#: (f32 `OIdhw16i16o -> ndhwc` 32x32x2x56x224 0.65 -> 0.77, u8 -> f32 `dhwioG16g ->
#: gOdhwi16o` 12x128x48x8x50x1 0.89 -> 1.09 against one step).
TILE_CHUNK_PREFETCH = os.environ.get("LAYOUTJIT_TILE_CHUNK_PREFETCH", "1") != "0"


def runs_rows_ahead(plan: Plan) -> int:
    """Source elements ahead at which an NT lines plan of a narrowing float conversion
    prefetches each of its rows, where its calls read two long rows that follow one
    another (too long for ``_prefetch_runs``), one of them partly padding (C = 13 of two
    8c blocks); tensors of the LLC's size or more; 0: none.

    f32 -> u8 `nCw8c -> nCw16c` 512x13x4096 (seed 5300, behind oneDNN at both thread
    counts): each call converts 32 B of each of the two 128 KB rows of an image. A/B on
    Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> 1 KB ahead: 2.48
    (1.74) -> 1.15 (0.88), oneDNN 1.74 (1.15); 512 B and 2 KB the same; f32 -> bf16
    `nChw8c -> nhwc` 2048x13x56x55 2.45 (1.68) -> 1.16 (0.95). Without the two limits 20
    listed and generated pairs changed, all measured: with more rows (`nCw8c -> nwc`
    f32 -> bf16 32x512x1000 1.22 -> 1.45, `nChw8c -> nhwc` 512x100x14x35 1.31 -> 1.43) or
    two unpadded ones (f32 -> s8 `nCdhw8c -> nCdhw16c` 1x512x64x28x17 1.14 -> 1.26) some
    lost and none gained; with them one changes (that bf16 pair).

    Plans for 64-byte vectors take ``RUNS_ROWS_AHEAD_WIDE_BYTES`` (0) instead: on Zen 4
    (AVX-512) the hardware prefetcher follows the two rows and the prefetches only cost,
    as the stream prefetch's (``Plan.stream_prefetch``). A/B, ratio to copy at 1 thread (2
    threads), off -> 1 KB, 5 rounds: that u8 pair 0.74 (0.79) -> 0.84 (0.89), oneDNN 1.04
    (1.12); the bf16 pair 0.80 (0.78) -> 0.89 (0.84), oneDNN 1.05 (0.96)."""
    t = plan.tile
    ahead = by_vector_width(plan.vector_bytes, RUNS_ROWS_AHEAD_BYTES, RUNS_ROWS_AHEAD_WIDE_BYTES)
    if (not ahead or not plan.nt or plan.prefetch or plan.job_stage or t is None
            or t.kind != "lines" or t.l is None or t.b is None):
        return 0
    ir = plan.ir
    if not _narrowing_float(ir) or data_bytes(ir) < llc_bytes():
        return 0
    a, b, run = ir.nodes[t.a], ir.nodes[t.b], ir.nodes[t.l]
    ssz = ir.operands[1].dtype.size
    if (a.extent > 2 or not _guarded(ir, a)
            or not (_rows_follow(a, b, run.extent) or _padded_rows_follow(ir, a, b, run))):
        return 0
    if b.extent * run.extent * ssz < 4 * ahead:
        return 0
    return ahead // ssz


#: ``runs_rows_ahead`` in plans for vectors under 64 bytes (``LAYOUTJIT_RUNS_ROWS_AHEAD_BYTES=0``:
#: never), and in plans for 64-byte vectors (``LAYOUTJIT_RUNS_ROWS_AHEAD_WIDE_BYTES``; 0: never).
RUNS_ROWS_AHEAD_BYTES = int(os.environ.get("LAYOUTJIT_RUNS_ROWS_AHEAD_BYTES", 1024))
RUNS_ROWS_AHEAD_WIDE_BYTES = int(os.environ.get("LAYOUTJIT_RUNS_ROWS_AHEAD_WIDE_BYTES", 0))


#: ``tile_rows_ahead`` (``LAYOUTJIT_TILE_ROWS_PREFETCH=0``: never).
TILE_ROWS_PREFETCH = os.environ.get("LAYOUTJIT_TILE_ROWS_PREFETCH", "1") != "0"


def _make_plan(ir: LoopIR, *, allow_tile: bool = True, vbytes: int | None = None,
               allow_shift: bool = True, allow_cols: bool = True) -> Plan:
    """Run every pass and record the choices (see the module docstring).

    ``allow_shift``: a transpose whose destination rows are not line-aligned may
    use the realigning (shifted) stores -- for plain conversions only (the
    compiler passes False when an epilogue computes the values).
    """
    vb = vector_bytes() if vbytes is None else vbytes
    ir = normalize(ir)
    ir, tile, notes = choose_tile(ir, vb, allow_tile, allow_cols)
    if tile is not None:
        shared = _line_share_order(ir, tile)
        if shared is not None:
            ir = shared
            notes.append("tiles read parts of source lines whose rest an outer step reads once they "
                         "have left L2: that step just outside the steps that complete destination lines")
        split = _line_split_order(ir, tile)
        if split is not None:
            ir, tile = split
            notes.append("tiles read parts of source lines far apart, whose rest an outer step reads "
                         "once they have left the caches: that step split at a line, its part innermost")
    dst = ir.operands[0]
    total = ir.total
    moved = total * (dst.dtype.size + ir.operands[1].dtype.size)
    traffic = memory_traffic(ir, moved)  # what the NT thresholds compare
    if tile is not None:
        split = split_columns(ir, tile, moved)
        if split is not None:
            ir, tile = split
            assert tile.b is not None
            b_out = ir.nodes[min(tile.a, tile.b) - 1]
            notes.append(f"too few jobs outside the tile: its columns cut into {b_out.extent} "
                         f"chunks of {ir.nodes[tile.b].extent}, an outer loop")
    jobs_split = split_jobs(ir, tile, moved)
    if jobs_split is not None:
        ir, tile = jobs_split
        notes.append("jobs of too little traffic: an outer node cut into a job digit and a loop")
    parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    nt = False
    if (tile is not None and allow_shift and COLS_STAGE and COLS_STAGE_WHOLE_A and tile.kind == "transpose"
            and tile.c is not None and not cols_stage(ir, tile)):
        whole_a = replace(tile, M=-(-ir.nodes[tile.a].extent // tile.R))
        if whole_a.M > tile.M and cols_stage(ir, whole_a):
            tile = whole_a  # (cols_stage: one macro tile covers A, its destination range staged)
            parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    staged_cols = bool(tile is not None and allow_shift and COLS_STAGE and cols_stage(ir, tile))
    lpanel = lines_panel(ir, tile) if tile is not None and allow_shift else 0
    if lpanel and tile is not None and parallel > len(outer_nodes(ir, tile)):
        lpanel = 0  # a job holds part of the macro tile: the panel would miss rows of A
    thin = thin_tile_rows(ir, tile) if tile is not None else 0
    static_nt = bool(tile is not None and not thin
                     and (staged_cols or lpanel or _nt_possible(ir, tile, phases=allow_shift)))
    # lines that start on 64-byte boundaries in some jobs only (nchw -> nChw8c with an odd
    # number of pixels: every other image half a line off): each job checks at run time
    job_align = bool(tile is not None and not static_nt and not thin and tile.kind in ("transpose", "lines")
                     and _nt_possible(ir, tile, phases=allow_shift and _job_align_phases(ir, tile),
                                      runtime=_job_nodes(ir, tile, parallel)))
    if job_align and tile is not None and allow_shift and traffic >= nt_split_min_bytes(tile):
        staged = _grouped_job_stage(ir, tile, moved)
        if staged is not None:
            g_ir, g_tile, g_par, g_jobs, g_chunk, jstage, k = staged
            notes.append(f"jobs of {k} outer steps, whose destination ranges ({jstage} elements) start "
                         f"on lines: each job fills a stage (plain stores, in cache), written out as "
                         f"whole non-temporal lines")
            return Plan(g_ir, g_tile, g_par, g_jobs, vb, True, moved, tuple(notes), g_chunk,
                        job_stage=jstage)
    if tile is not None and (static_nt or job_align):
        # one store rule for transposes that take wide macro tiles when their stores are
        # plain, and for local permutations (both sides contiguous per tile: streaming)
        if _block_local(ir, tile):
            nt = traffic >= (nt_min_bytes(tile) if BLOCK_LOCAL_TUNE and NT_TUNE else one_rule_min_bytes())
        elif _wide_groups(ir, tile):
            nt = traffic >= min(one_rule_min_bytes(), nt_min_bytes(tile))
        else:
            nt = traffic >= min(nt_min_bytes(tile), _narrowing_stream_nt_min(ir, tile))
    if nt and tile is not None and tile.kind == "stream" and _stream_src_order(ir, tile):
        ir = _by_source(ir)
        notes.append("runs of whole destination lines: the outer loops in source order (reads in "
                     "order, each run written as whole non-temporal lines wherever it goes)")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    blocks_outer = (_block_src_order(ir, tile) if tile is not None and (nt or (
        BLOCK_SRC_ORDER_PLAIN and tile.kind == "transpose" and tile.rows_contiguous
        and BLOCK_SRC_ORDER_PLAIN_ROWS[0] <= tile.R <= BLOCK_SRC_ORDER_PLAIN_ROWS[1])) else 0)
    far = _far_rows_order(ir, tile) if nt and tile is not None and not blocks_outer else None
    if far is not None:
        ir = far
        notes.append("the job loop barely moves the source: the step that continues the tiles' source "
                     f"rows moved inward (at most {FAR_ROWS_STREAMS} tile calls between its steps)")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    if blocks_outer:
        ir = _by_source(ir, blocks_outer)
        assert tile is not None
        notes.append("tiles write whole blocks of whole lines: the outer loops in source order"
                     if tile.rows_contiguous else
                     "calls write whole lines apart, and destination order reads many source stretches "
                     "side by side: the outer loops in source order" if tile.kind == "lines" else
                     "tiles write whole lines and read parts of source lines that an outer step "
                     "shares: the outer loops in source order (that step innermost)")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    narrow = narrow_panel(ir, tile) if nt and allow_shift and tile is not None else None
    if narrow is not None:
        assert tile is not None
        tile_rows_before = tile.R * tile.M
        tile, pb = narrow
        notes.append(f"narrow destination elements: a line takes {tile_rows_before} source rows; wide panels "
                     f"instead: {pb} blocks of {tile.V} rows per job, filled a strip of {tile.R} "
                     f"source rows at a time, written out as whole lines")
        return _staged_plan(ir, tile, vb, moved, notes, panel=True, panel_blocks=pb)
    half = bool(nt and tile is not None and HALF_LINE_TILES and _half_line_tiles(ir, tile, vb))
    if half:
        assert tile is not None
        tile = _with_half_lines(ir, tile)
    prefetch = bool(nt and tile is not None and PREFETCH_ROWS
                    and (_prefetch_rows(ir, tile) or _prefetch_runs(ir, tile) or _prefetch_periods(ir, tile)))
    if prefetch:
        assert tile is not None
        if tile.kind == "transpose" and tile.a2 is None:
            tile = _with_prefetch_groups(ir, tile, vb)
    whole = bool(nt and tile is not None and not (half or prefetch) and WHOLE_RUNS
                 and _whole_runs(ir, tile, vb))
    if whole:
        assert tile is not None
        tile = replace(tile, M=-(-ir.nodes[tile.a].extent // tile.R))
        notes.append(f"narrow tiles into long destination runs: all {ir.nodes[tile.a].extent} rows "
                     f"per step, so that the destination is written in order")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    skew = skewed_tiles(ir, tile, vb) if nt and tile is not None and not (half or prefetch or whole) else 0
    if skew:
        assert tile is not None
        tile = replace(tile, M=2, skew=skew)
        notes.append(f"two row tiles per step, the second {skew} columns ahead: {2 * tile.R} source "
                     f"rows read side by side, {tile.R} at each column (one L2 set), two lines of "
                     f"each destination row per pass")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    if half or prefetch:
        assert tile is not None
        rows = f"{tile.M * tile.R} rows per step"
        if half:
            notes.append(f"source rows follow one another: tiles read half a line of each "
                         f"({tile.V} columns)" + ("" if prefetch else f", {rows}"))
        if prefetch and tile.a2 is not None:
            notes.append("prefetch: each period reads one contiguous source block; each line's "
                         "call prefetches its share of the next period's block (to L2)")
        elif prefetch:
            notes.append(f"prefetch: the source rows follow one another; each micro-kernel call "
                         f"prefetches its share of the next group's block ({rows})")
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    if allow_shift and tile is not None and not nt and not thin and traffic >= nt_min_bytes(tile):
        # destination rows off the lines: a short contiguous panel is staged whole, longer
        # rows are realigned through a carry; both run jobs of (outer loops x blocks of B).
        # Realigned rows and wide panels from the one-thread NT threshold at every thread
        # count (narrow panels from the split one): plain stores into rows off the lines pay
        # for partial lines, in cache or not. (Realigned rows once started at the split
        # threshold, 3/4 of the LLC; A/B at 1 thread (2 threads), ratio to copy, plain ->
        # realigned, 18-24 MB: nhwc -> nchw 16x128x35x35 1.98 -> 0.97 (1.78 -> 0.93),
        # 32x96x27x27 1.32 -> 0.55 (1.36 -> 0.90), ab -> ba 1999x1500 1.93 -> 0.49 (1.89 ->
        # 1.03), f32 -> bf16 3000x1001 2.96 -> 1.38 (2.89 -> 1.21), 1000x4096 1.63-3.25 ->
        # 1.07-2.22 (2.22-2.55 -> 1.00-1.35), ndhwc -> ncdhw 64x128x7x7x7 1.28-2.22 ->
        # 1.19-2.09 (1.37-3.03 -> 0.81-1.74).)
        panel = _panel_possible(ir, tile) and not (_shift_better(ir, tile) or _long_rows_shift(ir, tile, traffic))
        wide, pb = wide_panel(ir, tile, vb) if panel else (tile, 1)
        line_blocks = panel_line_blocks(ir, tile) if panel and pb == 1 else 1
        if line_blocks > 1:
            wide, pb = replace(tile, M=1), line_blocks
            notes.append(f"panels of {line_blocks} blocks of {tile.V} rows per job: whole destination lines")
        if (pb > 1 or not panel or traffic >= nt_split_min_bytes(tile)) and (panel or _shift_possible(ir, tile)):
            tile = wide
            assert tile.b is not None
            nbb = -(-ir.nodes[tile.b].extent // tile.V)
            # (a wide panel prefetches only when its jobs take whole outer blocks)
            pf = bool(PREFETCH_ROWS and (pb == 1 or pb >= nbb or line_blocks > 1)
                      and (panel_prefetch(ir, tile) if panel else shift_prefetch(ir, tile)))
            sub = panel_sub_blocks(ir, tile, pb, pf) if panel and pb > 1 else 0
            if pb > 1 and sub:
                notes.append(f"wide panels: {pb} blocks of {tile.V} rows per job, staged {sub} blocks "
                             f"at a time, each block's tiles for all {ir.nodes[tile.a].extent} rows")
            elif pb > 1:
                notes.append(f"wide panels: {pb} blocks of {tile.V} rows per job, filled a strip of "
                             f"{tile.R} source rows at a time")
            if pf:
                notes.append("prefetch: the source rows follow one another; each block's tile "
                             "prefetches its share of the next " + ("outer index's" if panel else "row group's")
                             + " block")
            tuned = not panel and NT_TUNE and (ir.nodes[tile.b].extent < SHIFT_TUNE_ROWS or (
                SHIFT_TUNE_BAND and traffic < nt_split_min_bytes(tile)))
            return _staged_plan(ir, tile, vb, moved, notes, shifted=not panel, panel=panel, prefetch=pf,
                                panel_blocks=pb, nt_tune=tuned, nt_tune_one=tuned, panel_sub_blocks=sub)
    if thin:
        assert tile is not None
        assert tile.b is not None
        cols = _written_steps(ir, ir.nodes[tile.b])
        notes.append(f"tiles read {cols} elements of each source line (plain stores): "
                     f"{thin} rows per tile instead of {tile.R}")
        V = max(tile.V, min(cols, max(1, vb // ir.operands[1].dtype.size)))
        tile = replace(tile, R=thin, V=V, M=max(1, tile.M * tile.R // thin), rows_contiguous=False)
        parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    if tile is not None and not nt and _wide_groups(ir, tile):
        M = _wide_group_tiles(ir, tile, vb, moved)
        if M != tile.M:
            tile = replace(tile, M=M)
            notes.append(f"plain stores into rows {WIDE_GROUP_STRIDE_BYTES} B or more apart: "
                         f"{M * tile.R} rows per macro tile")
            parallel, jobs, chunk = choose_parallel(ir, tile, moved)
    if (tile is not None and not nt and not (static_nt or job_align) and allow_shift
            and traffic >= nt_min_bytes(tile)):
        jstage = job_stage(ir, tile, parallel)  # (no NT possible: tiles store pieces of lines)
        chunked_jobs = False
        chunk_pf = 0
        if JOB_STAGE_CHUNK_ABOVE and jstage * ir.operands[0].dtype.size > JOB_STAGE_CHUNK_ABOVE:
            chunked = job_stage_chunks(ir, tile)
            if chunked is not None:
                whole = _prefetch_rows(ir, tile) and PREFETCH_ROWS and JOB_STAGE_ROW_PREFETCH
                ir, tile, parallel, jobs, jstage = chunked
                chunk, chunked_jobs = 0, True
                a = ir.nodes[tile.a]
                if whole:  # the next row group's block (the rows follow one another): past A's rows
                    chunk_pf = a.extent * (a.strides[1] or 0)
                assert tile.b is not None
                notes.append(f"stages in L1: the tile's columns in chunks of {ir.nodes[tile.b].extent} "
                             f"(a job each)" + ("; each job prefetches its share of the next outer "
                                                "index's block, a piece before each tile call" if chunk_pf else ""))
        shift = False
        if not jstage and JOB_STAGE_SHIFT and traffic >= nt_split_min_bytes(tile):
            staged = _grouped_job_stage(ir, tile, moved, JOB_STAGE_GROUP_BYTES) if JOB_STAGE_GROUP_BYTES else None
            if staged is not None:
                ir, tile, parallel, jobs, chunk, jstage, k = staged
                notes.append(f"jobs of {k} outer steps, whose destination ranges start on lines")
            else:
                jstage = job_stage(ir, tile, parallel, anywhere=True)
                shift = bool(jstage)
        if jstage:
            notes.append(f"the tiles store pieces of lines into one dense destination range per job: "
                         f"each job fills a stage of {jstage} elements (plain stores, in cache), "
                         f"written out as whole non-temporal lines"
                         + (" (the job's partial first and last line plain)" if shift else ""))
            # split between threads below their NT threshold, the jobs store plainly, unstaged
            split_nt = traffic >= nt_split_min_bytes(tile) or not JOB_STAGE_SPLIT_PLAIN
            pf = bool(JOB_STAGE_ROW_PREFETCH and PREFETCH_ROWS and tile.kind == "transpose"
                      and tile.a2 is None and not chunked_jobs and _prefetch_rows(ir, tile))
            if pf:
                tile = _with_prefetch_groups(ir, tile, vb)
                if not chunked_jobs:  # (the chunks' job split stays)
                    parallel, jobs, chunk = choose_parallel(ir, tile, moved)
            return Plan(ir, tile, parallel, jobs, vb, True, moved, tuple(notes), chunk, job_stage=jstage,
                        nt_split=split_nt, job_shift=shift, prefetch=pf, chunk_prefetch=chunk_pf)
    if job_align and nt:
        assert tile is not None
        nt = _nt_possible(ir, tile, phases=allow_shift and _job_align_phases(ir, tile),
                          runtime=_job_nodes(ir, tile, parallel))  # the final split
        if nt:
            notes.append("destination lines start on 64-byte boundaries in some jobs only: each job "
                         "checks its offset at run time (non-temporal stores where it does)")
    job_align = job_align and nt
    # (streams have no timed band: their own split threshold, stream_split_min_bytes)
    nt_split = not nt or tile is None or traffic >= split_min_bytes(ir, tile)
    # between the NT thresholds at one thread and split between threads, the store kind
    # is timed at run time (see nt_min_bytes for the band below the base threshold)
    nt_tune = NT_TUNE and nt and not nt_split and tile is not None and tile.kind != "stream"
    # local permutations stream like a copy, and tiles that write whole blocks keep a warm
    # destination in cache: in that band one thread times the kinds too
    phases = line_phases(ir, tile) if nt and tile is not None else 1
    tune_one = bool(nt_tune and tile is not None and (
        (BLOCK_LOCAL_TUNE and _block_local(ir, tile))
        or (WHOLE_BLOCK_TUNE and tile.kind == "transpose" and tile.rows_contiguous)
        or (PHASED_LINES_TUNE and phases > 1 and not lpanel)))
    if lpanel and nt:
        phases = 0  # short columns: a panel even where the calls could follow the lines
    staged_cols = staged_cols and nt
    if staged_cols:
        notes.append("the tiles' stores are pieces shorter than a line: each macro tile's destination "
                     "range goes to a small stage, written out as whole non-temporal lines")
    if phases > 1:
        notes.append(f"destination columns start on {phases} different offsets within a line: "
                     f"the calls of each column are cut at the lines (column loop unrolled by "
                     f"{phases}); a line shared by two columns gets plain stores")
    shifts = job_shifts(ir, tile, parallel) if job_align and phases > 1 and tile is not None else (0,)
    if len(shifts) > 1:
        notes.append(f"jobs start at {len(shifts)} offsets within a line ({', '.join(map(str, shifts))} "
                     f"elements in): each offset has its own phased calls")
    lpanel = lpanel if nt else 0
    if lpanel:
        assert tile is not None and tile.b is not None
        notes.append(f"destination columns of {ir.nodes[tile.b].strides[0]} elements follow one another off "
                     f"the lines: {lpanel} columns at a time go to a small stage (plain stores), written "
                     f"out as whole aligned non-temporal lines")
    passes = lines_passes(ir, tile) if nt and tile is not None and not lpanel and phases == 1 else 0
    if passes:
        assert tile is not None
        notes.append(f"a column's {tile.M * tile.R} runs come from as many source streams: blocks of "
                     f"{passes} columns, swept {LINES_PASS_STREAMS} streams at a time")
    stage = row_stage(ir, tile, vb) if nt and allow_shift and tile is not None else 0
    if stage:
        assert tile is not None and tile.b is not None
        if parallel > len(outer_nodes(ir, tile)):  # the macro loop is a job loop: chunks instead
            # (codegen's job decoding divides the rows the same way: _render_jobs)
            jobs = outer_count(ir, tile) * -(-tile_rows(ir, tile) // stage)
        rb = (ir.nodes[tile.b].strides[0] or 0) * ir.operands[0].dtype.size
        notes.append((f"destination rows a multiple of {L1_SET_PERIOD} B apart" if rb % L1_SET_PERIOD == 0
                      else f"destination rows {rb % L1_SET_PERIOD} B apart modulo {L1_SET_PERIOD} B")
                     + ": each job stages "
                     f"{stage} elements of its {ir.nodes[tile.b].extent} rows at a time (plain "
                     f"stores), then writes them row by row as whole non-temporal lines")
    return Plan(ir, tile, parallel, jobs, vb, nt, moved, tuple(notes), chunk, nt_split=nt_split,
                nt_tune=nt_tune, nt_tune_one=tune_one, prefetch=prefetch, line_phases=phases,
                cols_stage=staged_cols, job_align=job_align, job_shifts=shifts, row_stage=stage,
                lines_panel=lpanel,
                lines_passes=passes, lines_pass_streams=LINES_PASS_STREAMS if passes else 0)


def _staged_plan(ir: LoopIR, tile: TileSpec, vb: int, moved: int, notes: list[str], *,
                 panel_blocks: int = 1, **kw: Any) -> Plan:
    """A realigned or panel plan (``Plan.shifted``/``Plan.panel``): NT stores, one job per
    outer index and run of ``panel_blocks`` blocks of B (codegen's ``_panel_jobs``)."""
    assert tile.b is not None
    nbb = -(-ir.nodes[tile.b].extent // tile.V)
    jobs = outer_count(ir, tile) * -(-nbb // panel_blocks)
    return Plan(ir, tile, len(outer_nodes(ir, tile)), jobs, vb, True, moved, tuple(notes), 0,
                panel_blocks=panel_blocks, **kw)


#: Most bytes a row stage holds (``row_stage``): within L1 beside the tiles' source lines.
#: 0 (off) since the thirtieth session: measured again on Zen 3 (AVX2), one process, every
#: pair that took a stage ran faster with the tiles' NT lines straight into the rows, ratio
#: to copy at 1 thread (2 threads), 16 KB stage -> none: f32 `nChw16c -> nchw` 32x96x64x64
#: 1.87 (1.89) -> 0.77 (0.87), 4x16x512x560 1.96 (1.48) -> 0.76 (0.75) (oneDNN 1.80
#: (1.38)), `nCw16c -> ncw` 2048x16x4096 1.82-1.84 (1.79-1.81) -> 0.73-0.75 (0.74-0.89),
#: `Goihw16g -> goihw` 4096x32x48x1x7 1.84 (1.34) -> 0.66 (0.68), `nchw -> nhwc`
#: 256x2048x7x7 (near rows) 1.59 (1.23) -> 1.02 (0.88), s8 `acdeb -> abcde` 2.29 (1.61) ->
#: 1.05 (0.75); 8 KB and 4 KB stages and 256 B per row lost too (1.06-1.59); two pairs
#: even (s8 `oihw -> hwio` 8192x1024x5x7 6.13 (3.56) against 6.40 (4.27), s8 -> f32 `ndhwc
#: -> ncdhw` 8x64x64x64x8 1.70 (1.48) against 1.76 (1.32)). 14 of 17 listed pairs gained.
ROW_STAGE_BYTES = int(os.environ.get("LAYOUTJIT_ROW_STAGE_BYTES", 0))
#: Bytes of each destination row a row stage collects before writing it out.
ROW_STAGE_ROW_BYTES = 1024
#: A row stage collects at least this much of each destination row: a stage of one line per
#: row (A = 16 f32: a weights block) only adds a pass through L1 to the NT lines the tiles
#: would write anyway. Zen 3, A/B in one process, ratio to copy at 1 thread (2 threads),
#: stage -> none: s8 -> f32 `goihw -> gOhwi16o` 2x384x512x5x7 1.82-2.16 -> 1.31-1.47
#: (1.49-1.73 -> 1.11-1.20; oneDNN 1.92-2.13 (1.60-1.77)), `OIdhw16i16o -> ndhwc`
#: 32x32x2x56x224 1.50-1.65 -> 1.18-1.41 (1.14-1.28 -> 0.98-1.37), `OIhw16o16i -> hwio`
#: 1024x1024x11x3 1.74 -> 1.79-1.85 (1.27-1.41 -> 1.21-1.42).
ROW_STAGE_MIN_ROW_BYTES = int(os.environ.get("LAYOUTJIT_ROW_STAGE_MIN_ROW_BYTES", 128))
#: Row stages only with vectors shorter than this (measured with 32-byte vectors only).
ROW_STAGE_MAX_VECTOR = 64


#: Row stages also for destination rows half a page apart modulo 4 KB (two L1 set offsets
#: for all the rows), where each row gets a whole ``ROW_STAGE_ROW_BYTES`` per chunk. Zen 3,
#: AVX2, one process, ratio to copy at 1 thread (2 threads), without -> with: nChw16c ->
#: nchw f32 16x512x56x64 1.29 (1.16) -> 1.20 (1.03), 64x512x16x32 1.22 (1.01) -> 0.98
#: (0.86), 64x256x32x48 1.22 (1.02) -> 1.11 (1.01); bf16 64x256x32x32 1.50 (1.50) -> 1.26
#: (1.37), 32x256x48x64 1.93 (1.38) -> 1.28 (1.13); s8 `acdeb -> abcde` 256x16x32x24x56
#: 1.71 (1.20) -> 1.23 (0.97); f32 -> bf16 16x512x56x64 equal. Chunks of one line per row
#: (`OIhw16o16i -> hwio`, A = 16) lost (1.45 (1.23) -> 1.65 (1.49)) and stay out.
ROW_STAGE_HALF_PAGE = os.environ.get("LAYOUTJIT_ROW_STAGE_HALF_PAGE", "1") != "0"


def row_stage(ir: LoopIR, tile: TileSpec, vbytes: int) -> int:
    """Elements of A per chunk when an NT transpose stages its destination rows; 0: none.

    A register tile writes one line into each of V destination rows. When those rows are
    a multiple of 4 KB apart (nchw planes of 64x64, 32x32, 128x128 f32) every line of a
    tile falls in one L1 set, and NT stores of lines in one set run slowly: writing alone,
    8 rows a line each per visit, 14 GB/s into rows 16 KB apart against 19 into rows 16
    KB + 64 B apart (Zen 3, 1 thread; 1 KB per row per visit: 19.5 either way). So the
    job's tiles fill a small stage (plain stores, in L1) with ``ROW_STAGE_ROW_BYTES`` of
    each of B's rows, whole macro tiles at a time, and the stage is written out row by
    row as whole NT lines (Zen 3, AVX2, ratio to oneDNN's time in the harness at 1 thread
    (2 threads), two runs each, without -> with: nChw16c -> nchw 64x96x64x64 0.95-1.01 ->
    0.89-0.92 (0.82-1.00 -> 0.81-0.94), 32x96x64x64 1.11-1.23 -> 0.90-0.95 (0.97-1.02 ->
    0.75-0.83), 256x96x32x32 0.91-1.06 -> 0.87-0.94 (0.80-0.83 -> 0.85); bf16 64x96x64x64,
    ratio to copy, 1.11 -> 0.87 (1.04 -> 0.95)). Blocks of 8 (nChw8c -> nchw) measured no
    gain and longer source runs of B (nhwc -> nchw, C=96: 16-256 B per row) lost; both are
    left out, except rows off the lines that follow one another into destination rows at
    most 8 KB apart (``_near_rows_stage``: nchw -> nhwc, C=2048, 7x7). Transposes without
    padding or an epilogue whose destination rows are contiguous along A; when the macro
    tiles are jobs, the jobs become chunks. Measured with 32-byte vectors only
    (``ROW_STAGE_MAX_VECTOR``).
    """
    if vbytes >= ROW_STAGE_MAX_VECTOR or not ROW_STAGE_BYTES or tile.kind != "transpose":
        return 0
    if tile.b is None or len(ir.operands) != 2:
        return 0
    if tile.a2 is not None or tile.c is not None or tile.l is not None or tile.rows_contiguous:
        return 0
    if _padded(ir):
        return 0
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    dsz, ssz = ir.operands[0].dtype.size, ir.operands[1].dtype.size
    if a.strides[0] != 1 or b.strides[0] is None:
        return 0
    half = bool(ROW_STAGE_HALF_PAGE and (b.strides[0] * dsz) % L1_SET_PERIOD == L1_SET_PERIOD // 2)
    if not (half or _rows_share_l1_set(b.strides[0] * dsz)):
        return 0
    if b.extent < 16:
        return 0
    group = tile.M * tile.R
    if (group * dsz) % 64:
        return 0
    near = b.extent * ssz > 64  # past blocks of 16 (nChw8c -> nchw measured no gain)
    if near and not _near_rows_stage(a, b, dsz, ssz):
        return 0
    limit = ROW_STAGE_NEAR_BYTES if near else ROW_STAGE_BYTES
    k = min(a.extent // group, max(1, ROW_STAGE_ROW_BYTES // (group * dsz)),
            limit // (b.extent * group * dsz))
    if k < 1 or ((near or half) and k * group * dsz < ROW_STAGE_ROW_BYTES):  # 1 KB each
        return 0
    if k * group * dsz < ROW_STAGE_MIN_ROW_BYTES:
        return 0
    return k * group


#: Most bytes a row stage of near rows holds (``_near_rows_stage``).
ROW_STAGE_NEAR_BYTES = int(os.environ.get("LAYOUTJIT_ROW_STAGE_NEAR_BYTES", 64 * 1024))
#: ... for destination rows at most this far apart.
ROW_STAGE_NEAR_STRIDE = 8192


def _near_rows_stage(a: Node, b: Node, dsz: int, ssz: int) -> bool:
    """Whether a row stage pays for source rows longer than a line (``row_stage``).

    nchw -> nhwc with 7x7 planes and many channels (C = 1024 or 2048 f32): the planes
    follow one another (one contiguous block per row group, prefetched) and are not a
    whole number of lines, and the destination's pixel rows are 4 or 8 KB apart, so the
    tiles write 256 B into each of B rows at one offset within 4 KB per visit. Staging
    1 KB of each of the B rows (in at most ``ROW_STAGE_NEAR_BYTES``) and writing them out
    row by row, ratio to copy at 1 thread (2 threads), two harness runs each way, without
    -> with: 256x2048x7x7 1.18-1.27 (0.93-0.99) -> 1.00-1.15 (0.92-0.94), 128x1024x7x7
    1.13-1.32 (0.92-1.00) -> 0.92-0.98 (0.81-0.92), bf16 128x2048x7x7 1.53-1.77 (1.17-1.34)
    -> 0.94-1.22 (0.85-0.96); in one-process A/B 128x2048x7x7 1.15 -> 0.94-0.97. A 196 KB
    stage (14x14 planes, C=1024 and 2048) gained nothing at 1 thread and lost at 2 (0.91
    -> 1.04-1.08); planes of whole lines lost (8x8: 0.82 -> 0.96), and so did rows further
    apart (`nwc -> ncw` C=64, rows 16 KB apart: 1.10 -> 1.16 (0.84 -> 0.96)), the other
    direction (`nhwc -> nchw` 128x256x32x32, 1 KB rows into 4 KB planes: 0.99 -> 1.14 (0.70
    -> 0.94)), stages of less than 1 KB per row (`ab -> ba` 2048x2048: 0.86 -> 1.89) and
    rows that do not follow one another (`abcd -> dcba` 64^4: 1.85 -> 2.10).
    """
    assert b.strides[0] is not None
    return (ROW_STAGE_NEAR_BYTES > 0 and _rows_follow(a, b) and (b.extent * ssz) % 64 != 0
            and b.strides[0] * dsz <= ROW_STAGE_NEAR_STRIDE)


#: Jobs whose tiles store pieces of lines into a dense destination range of at most this
#: many bytes stage the range and write it out as whole NT lines (``job_stage``; 0: never).
JOB_STAGE_BYTES = int(os.environ.get("LAYOUTJIT_JOB_STAGE_BYTES", 64 * 1024))
#: Staged jobs split between threads below the split NT threshold store plainly, unstaged
#: (``Plan.nt_split`` false; ``LAYOUTJIT_JOB_STAGE_SPLIT_PLAIN=0``: staged at every thread
#: count). Staging starts at the one-thread NT threshold (a third of the LLC for
#: transposes); on two threads an output under 3/4 of it stays in cache, and the stage's
#: NT lines lost: f32 `Ohwi8o -> ohwi` 6144x60x1x5 (15 MB of traffic) ran at 2.50x copy at
#: 2 threads staged, 1.18 plain (oneDNN 1.99). Zen 3 (AVX2), ``python -m perf.ab``, 2
#: threads, staged -> plain: 41 of the 253 listed and generated pairs that change (every
#: staged pair in that band), 3 rounds: geomean 0.86, 27 faster by a tenth, the 7 slower
#: ones faster again in 5 rounds (u8 `OIhw16i16o -> ohwi` 65536x24x1x5 4.09 -> 2.08, s8
#: `OIhw8i8o -> OIhw16i16o` 768x256x7x7 1.60 -> 1.24). One thread keeps the stage (always
#: plain there: 18 faster, 7 slower by a tenth).
JOB_STAGE_SPLIT_PLAIN = os.environ.get("LAYOUTJIT_JOB_STAGE_SPLIT_PLAIN", "1") != "0"
#: Phased "lines" plans (``line_phases``) between the NT thresholds time their store kind
#: on one thread too (``Plan.nt_tune_one``; ``LAYOUTJIT_PHASED_LINES_TUNE=0``: NT on one
#: thread). u8 `nCdhw8c -> ndhwc` C = 200 (200-byte pixels: 7 of 25 lines shared by two
#: pixels, stored plainly in 8-byte pieces beside the NT lines) ran at 3.0x copy on one
#: thread, 1.6 with plain stores. Zen 3 (AVX2), ``python -m perf.ab``, 1 thread, NT ->
#: timed, the 21 listed and generated pairs that change and that one: geomean 0.94, 3
#: faster by a tenth (3.27 -> 1.76; u8 `nCdhw16c -> nCdhw8c` 32x512x3x7x35 2.57 -> 1.80;
#: s8 -> f32 `nChw16c -> nChw8c` 16x48x17x299 1.62 -> 1.15), one slower (f32 `nChw16c ->
#: nChw4c` 32x200x14x35 0.88 -> 0.98).
PHASED_LINES_TUNE = os.environ.get("LAYOUTJIT_PHASED_LINES_TUNE", "1") != "0"
JOB_STAGE_MAX_ENUM = 1 << 17  # most inner positions enumerated to prove a range dense


#: Jobs whose destination ranges start on lines in some jobs only take this many steps of
#: the node just outside the tile at most, to start on a line in every job, and stage the
#: range (``job_line_groups``; 0: off).
JOB_LINE_GROUPS = int(os.environ.get("LAYOUTJIT_JOB_LINE_GROUPS", 8))
#: ... into stages of at most this many bytes: jobs of a few whole lines.
JOB_LINE_GROUP_BYTES = 8192


def _grouped_job_stage(ir: LoopIR, tile: TileSpec, moved: int, max_bytes: int | None = None
                       ) -> tuple[LoopIR, TileSpec, int, int, int, int, int] | None:
    """The IR and tile of ``job_line_groups``, their parallel split (parallel, jobs, chunk),
    the job stage and k, where the grouped jobs can be staged; None otherwise."""
    grouped = job_line_groups(ir, tile, max_bytes)
    if grouped is None:
        return None
    g_ir, g_tile, k = grouped
    g_par, g_jobs, g_chunk = choose_parallel(g_ir, g_tile, moved)
    jstage = job_stage(g_ir, g_tile, g_par)
    return (g_ir, g_tile, g_par, g_jobs, g_chunk, jstage, k) if jstage else None


#: Job stages of more than this many bytes (L1's size) are cut, where the tile writes
#: whole blocks, into jobs of a chunk of the tile's columns each (``job_stage_chunks``) of
#: at most ``JOB_STAGE_CHUNK_BYTES``; 0: never.
JOB_STAGE_CHUNK_ABOVE = int(os.environ.get("LAYOUTJIT_JOB_STAGE_CHUNK_ABOVE", 32 * 1024))
JOB_STAGE_CHUNK_BYTES = 4096


def job_stage_chunks(ir: LoopIR, tile: TileSpec) -> tuple[LoopIR, TileSpec, int, int, int] | None:
    """A staged plan's IR and tile with the tile's node B cut into (chunks, columns per
    chunk), the chunks the innermost job loop: (ir, tile, parallel, jobs, job stage) where
    each chunk's destination range is dense, whole lines and at most
    ``JOB_STAGE_CHUNK_BYTES``; None otherwise.

    s8 `nhwc -> nchw` 1024x1024x7x7: 49x16 tiles (49 pixels of 16 channels, 784 B of the
    destination each) filled a stage of the whole image (49 KB, more than L1) before its
    NT write-out. A hand-edited kernel of jobs of 64 channels (3136 B) ran at 1.15x copy
    against 1.48 at 1 thread (Zen 4; 128 channels 1.24, 256 1.25). Where the unchunked
    plan prefetched the next outer index's block (``_prefetch_rows``), each chunk's job
    prefetches its share of it, a piece before each tile call (``Plan.chunk_prefetch``):
    the row prefetches a staged job takes otherwise (``job_rows_ahead``: the next job's
    line of each of the 49 rows, from every tile call) ran at 1.28-1.44. A/B, ratio to
    copy at 1 thread (2 threads), 5 rounds, whole-image stage -> chunks: that pair 1.40
    (1.24) -> 1.09 (0.89), 1.50 (1.23) -> 1.18 (0.87) in another run; 512x1024x7x7 (24
    MB) 1.61 (1.38) -> 1.25 (0.97); u8 1024x1024x7x7 1.53 (1.18) -> 1.17 (0.84). Stages of
    25 KB were left whole (2048x512x7x7: 1.18 (1.08) -> 1.23 (0.94)), and jobs too large
    for a stage (C = 2048, 98 KB) stay unstaged: chunked, they went both ways (1.86 (1.44)
    -> 2.02 (1.37); u8 `hwio -> iohw` 16x256000x7x7 1.86 -> 1.49)."""
    if not JOB_STAGE_CHUNK_ABOVE or not tile.rows_contiguous or tile.kind != "transpose" or tile.b is None:
        return None
    outer = outer_nodes(ir, tile)
    if not outer or outer[-1] > min(tile.nodes):
        return None  # (the chunks must go just outside the tile, inside every outer loop)
    b = ir.nodes[tile.b]
    if any(x is None for x in b.strides) or _guarded(ir, b):
        return None
    dsz = ir.operands[0].dtype.size
    span = b.strides[0] or 0  # destination elements from one column to the next (job_stage checks density)
    best = None
    for k in range(tile.V, b.extent, tile.V):
        if b.extent % k == 0 and (k * span * dsz) % 64 == 0 and k * span * dsz <= JOB_STAGE_CHUNK_BYTES:
            best = k
    if best is None:
        return None
    at = min(tile.nodes)
    nodes = list(ir.nodes)
    o, inner = b.split(best)
    nodes[tile.b] = inner
    nodes.insert(at, o)
    ir2, tile2 = ir.with_nodes(nodes, "job_stage_chunks"), _tile_moved_in(tile, at)
    parallel = at + 1
    jobs = math.prod(ir2.nodes[i].extent for i in range(parallel))
    jstage = job_stage(ir2, tile2, parallel)
    if not jstage or jstage * dsz > JOB_STAGE_CHUNK_BYTES:
        return None
    return ir2, tile2, parallel, jobs, jstage


def job_line_groups(ir: LoopIR, tile: TileSpec, max_bytes: int | None = None
                    ) -> tuple[LoopIR, TileSpec, int] | None:
    """The plan's IR and tile with the node just outside the tile cut into (jobs, k steps
    per job), and k: the fewest of its steps whose destination range is whole lines; None
    where that is not possible (``make_plan`` then checks the job stage of the new jobs).

    `nchw -> nChw4c` f32 4096x100x7x5: a job (4 c of one image) writes 4 x 35 f32 = 560 B,
    so one job in four started on a line: those took NT stores, the others plain ones into
    lines partly written by their neighbours (1.86 (1.23)x copy at 1 thread (2 threads),
    oneDNN 0.98 (0.97)). Four such steps are 2240 B, 35 whole lines: each job of four fills
    a stage, written out as whole NT lines (``job_stage``). A/B on Zen 3 (AVX2), ratio to
    copy at 1 thread (2 threads), checked offsets -> staged groups: that pair 1.71-2.00
    (1.34) -> 0.74-0.84 (1.09-1.19), oneDNN 0.92-1.14 (1.00-1.17); `nchw -> nChw8c`
    2048x40x7x7 2.22 (2.27) -> 1.01 (1.72), oneDNN 1.89 (1.97); f32 -> bf16 `nchw ->
    nChw4c` 2048x96x14x5 1.88 (2.26) -> 1.82 (2.16). Only from the split NT threshold
    (``nt_split_min_bytes``): staged lines are NT at every thread count, and in cache at 2
    threads they lost (512x100x7x5, 14 MB: 1.24 -> 3.26). Only into stages of at most
    ``JOB_LINE_GROUP_BYTES``: of 24 changed listed and generated pairs, the 12 with stages of
    2-7 KB gained (bf16 `ncw -> nCw8c` 2048x1024x55 1.74 -> 0.81, `ncdhw -> nCdhw8c`
    4096x64x5x7x1 1.83 -> 0.92, `ncw -> nCw8c` 4096x200x55 1.48 -> 0.93, bf16 -> f32 `nchw ->
    nChw8c` 4096x56x7x13 1.75 -> 1.01, 32x1024x3x35x1 1.83 -> 1.34 at 1 thread) and those of
    9-38 KB lost, where partial lines were a small part of each job (`nchw -> nChw8c`
    4096x24x7x55 1.39 -> 1.77, bf16 `ncw -> nCw16c` 64x512x299 1.87 -> 3.42).
    """
    if not JOB_LINE_GROUPS or len(ir.operands) != 2:
        return None
    outer = outer_nodes(ir, tile)
    if not outer:
        return None
    i = outer[-1]
    n = ir.nodes[i]
    if n.strides[0] is None or n.strides[1] is None or _guarded(ir, n):
        return None
    step = n.strides[0] * ir.operands[0].dtype.size
    k = 64 // math.gcd(step, 64)
    if (k == 1 or k > JOB_LINE_GROUPS or n.extent % k or n.extent == k
            or k * step > (JOB_LINE_GROUP_BYTES if max_bytes is None else max_bytes)):
        return None
    nodes = list(ir.nodes)
    nodes[i:i + 1] = n.split(k)
    return ir.with_nodes(nodes, "job_line_groups"), _tile_moved_in(tile, i + 1), k


#: Staged jobs that prefetch the next job's source block (``job_prefetch``): on/off and
#: the largest block, in bytes.
JOB_PREFETCH = os.environ.get("LAYOUTJIT_JOB_PREFETCH", "1") != "0"
JOB_PREFETCH_MAX_BYTES = 64 * 1024
#: ... for tiles of runs too (kind "lines", since the thirty-sixth session), where each job's
#: block holds ``JOB_PREFETCH_LINES_MIN_BYTES`` or more and the reorder moves at least the
#: LLC's size. f32 `OIhw4o4i -> OIhw8i16o2i` 49152x16x5x5 (75 MB): a job (16 o, 25 KB of
#: source and of destination) gathers 8-byte runs of 16 source lines per hw step across the
#: block. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> with: 1.95
#: (1.43) -> 0.88 (0.89), oneDNN 1.93 (1.47), which had been ahead; `OIhw8i16o2i ->
#: OIhw4o4i` 65536x24x3x7 (147 MB) 1.91 (1.35) -> 1.02 (0.88). Blocks of 256 B (s8
#: `OIhw4i16o4i -> OIhw16o16i` 13312x384x3x5 0.83 -> 0.90, u8 `OIhw16o16i -> OIhw8i16o2i`
#: 512x1024x7x7 1.95 -> 2.10) and tensors in cache (bf16 -> f32 `OIhw16o16i -> ohwi`
#: 6144x24x3x7, 25 MB, 1.69 (1.38) -> 1.78 (1.60)) lost.
JOB_PREFETCH_KINDS = (("transpose", "lines") if os.environ.get("LAYOUTJIT_JOB_PREFETCH_LINES", "1") != "0"
                      else ("transpose",))
JOB_PREFETCH_LINES_MIN_BYTES = 4096


def job_prefetch(plan: Plan) -> int:
    """Source elements from one job's block to the next one's, when each job of a staged
    plan (``Plan.job_stage``) reads one dense source block and the next job's follows it;
    0: none. Each tile call then prefetches its share of the next block (its destination
    position in the job, scaled to the block), to L2.

    ``OIhw4i16o4i -> oihw`` 98304x48x7x1 f32: a job (one block of 16 o) reads 21 KB of
    source, 7x4 tiles of rows 1 KB apart, each line by four tiles (four o): a strided
    sweep of the block that the hardware prefetchers fetch slowly; the next block follows
    it. A/B on Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads): 2.48
    (2.36) -> 1.56 (1.52), oneDNN 2.80 (2.95), which had been even with it at 2 threads.
    Over the 60 listed and generated pairs it changed, geomean 0.88 (0.88) of the time,
    22 (24) faster by more than a tenth: u8 `Ohwi16o -> OIhw4o4i` 65536x128x3x3 0.62
    (0.58), s8 `Ohwi8o -> OIhw8i16o2i` 0.47 (0.60), bf16 `gOIhw4i16o4i -> goihw`
    4096x48x32x3x7 0.55 (0.51), f32 `OIhw16o16i -> oihw` 14336x24x3x3 0.48 (0.67). Not
    where the tiles' rows follow one another and are a line or longer (activations:
    `nchw -> nChw8c`, `ncdhw -> nCdhw8c`, `ncw -> nCw8c` lost 3-33%): the hardware follows
    those few streams.
    """
    t = plan.tile
    if (not JOB_PREFETCH or not plan.job_stage or plan.prefetch or plan.chunk_prefetch or t is None
            or t.kind not in JOB_PREFETCH_KINDS or t.a2 is not None or t.c is not None):
        return 0
    ir = plan.ir
    outer = outer_nodes(ir, t)
    if not 1 <= plan.parallel <= len(outer):
        return 0
    ahead = ir.nodes[outer[plan.parallel - 1]].strides[1]
    inner = [n for i, n in enumerate(ir.nodes) if i not in outer[:plan.parallel]]
    size = _dense_size((n.strides[1] or 0, n.extent) for n in inner if n.extent > 1)
    ssz = ir.operands[1].dtype.size
    assert t.b is not None
    a, b = ir.nodes[t.a], ir.nodes[t.b]
    if _rows_follow(a, b) and b.extent * ssz >= 64:
        return 0  # (a few streams of whole lines, which the hardware follows)
    if t.kind == "lines" and (size * ssz < JOB_PREFETCH_LINES_MIN_BYTES
                              or ir.total * (ssz + ir.operands[0].dtype.size) < llc_bytes()):
        return 0  # (lines plans: blocks of a few KB from memory only; see JOB_PREFETCH_KINDS)
    return ahead if ahead and size == ahead and size * ssz <= JOB_PREFETCH_MAX_BYTES else 0


def job_rows_ahead(plan: Plan) -> int:
    """Source elements from a staged job's reads to the next job's (at least a line on:
    the step of the job node, times the jobs that take), where the job's source is not
    one dense block (``job_prefetch`` takes those): each tile then prefetches the lines
    of its rows that far on, to L2; 0: none.

    f32 `IOhw16o16i -> oihw` 24576x200x3x1: a job (16 o, 38 KB of destination) reads 3 KB
    from each of 13 I blocks 4.5 MB apart, as 3x16 tiles of three rows 1 KB apart: 39
    interleaved streams that the hardware prefetchers do not follow; each job's pieces
    continue the last job's. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads),
    without -> with: 2.62-2.67 (1.87-2.18) -> 1.29-1.32 (1.14-1.33), oneDNN 3.72-3.79
    (2.47-2.55); u8 `Ohwi16o -> OIhw8i16o2i` 512x1024x7x7 2.21-2.52 (1.76-1.81) ->
    0.82-0.88 (0.87-0.96); s8 `Ohwi8o -> OIhw4i16o4i` 2.58-3.44 (2.24-3.43) -> 1.00-1.53
    (1.19-1.68); bf16 `OIhw4o4i -> Ohwi16o` (the next job 32 B on: two jobs ahead)
    2.38-2.89 (1.83-1.91) -> 1.34-1.39 (1.02-1.11); f32 -> bf16 `hwio -> OIhw4o4i`
    14336x96x5x3 5.27 (4.18) -> 2.61 (3.16). 49 of 6649 listed and generated pairs
    changed; of 26 measured, one lost at 2 threads (u8 `OIhw16o16i -> oihw` 512x1024x7x7
    2.69 -> 3.45, 1 thread even). Tensors under the LLC lost (bf16 `OIhw4o4i ->
    OIhw8i8o` 256x2048x3x3, 9 MB: 1.73 -> 2.20), and so did prefetches of each row where
    the rows follow one another in a line (one prefetch a line now)."""
    t = plan.tile
    if (not JOB_ROWS_PREFETCH or not plan.job_stage or plan.prefetch or plan.chunk_prefetch or t is None
            or t.kind != "transpose" or t.a2 is not None or t.c is not None or t.b is None):
        return 0
    ir = plan.ir
    outer = outer_nodes(ir, t)
    if not 1 <= plan.parallel <= len(outer):
        return 0
    a, b = ir.nodes[t.a], ir.nodes[t.b]
    if _rows_follow(a, b) and b.extent * ir.operands[1].dtype.size >= 64:
        return 0
    ssz = ir.operands[1].dtype.size
    if data_bytes(ir) < llc_bytes():
        return 0
    step = ir.nodes[outer[plan.parallel - 1]].strides[1] or 0
    if not step:
        return 0
    return step * -(-JOB_ROWS_LINE_AHEAD // (abs(step) * ssz))  # (at least a line on)


#: ``job_rows_ahead`` (``LAYOUTJIT_JOB_ROWS_PREFETCH=0``: never).
JOB_ROWS_PREFETCH = os.environ.get("LAYOUTJIT_JOB_ROWS_PREFETCH", "1") != "0"
#: ... at least this many bytes on (whole jobs): the next job's lines are mostly this one's.
JOB_ROWS_LINE_AHEAD = 64


#: Jobs whose destination ranges start anywhere in a line stage them too (``job_stage``
#: with ``anywhere``, ``Plan.job_shift``): the stage starts at the job's place in its first
#: line, the whole lines go out NT and the partial first and last line plain (the
#: neighbouring jobs write their other parts). Only from the split NT threshold, for job
#: ranges of ``JOB_STAGE_SHIFT_MIN_BYTES`` to ``JOB_STAGE_SHIFT_MAX_BYTES``. f32 `nCw16c ->
#: ncw` 4096x60x55 (C = 60: 13200 B an image, 16 B on modulo a line from one to the next)
#: took plain 16x8 tiles into rows of 220 B (C = 64 takes panels of whole lines, 1.22 (1.04)).
#: A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> with: 1.77
#: (1.73) -> 1.29 (1.55), oneDNN 1.46 (1.80), which had been ahead; `nChw8c -> nchw`
#: 4096x13x28x5 1.77 (1.51) -> 1.06 (0.91); `nChw8c -> nChw4c` 4096x16x7x17 2.11 (1.53) ->
#: 0.81 (0.99); `nChw4c -> nhwc` 4096x200x1x7 2.70 (2.26) -> 1.04 (1.30); u8 `OIhw4o4i ->
#: Ohwi8o` 102400x60x3x7 2.55 (1.81) -> 1.61 (1.10); s8 `nChw16c -> nChw4c` 4096x60x5x35
#: 2.05 (1.48) -> 1.27 (1.26); s8 -> f32 `nCw8c -> ncw` 4096x13x299 2.38 (1.65) -> 1.85
#: (1.42); f32 `nChw8c -> nChw4c` 4096x16x7x17 (jobs of one 8c block, 3808 B) 2.11 (1.53)
#: -> 0.81 (0.99), 4096x200x13x3 (1248 B) 1.06 (0.99) -> 0.84 (0.90). Of the 17 listed and
#: generated pairs it took with no limit, the smallest range lost (s8 `OIhw4o4i -> ohwi`
#: 65536x60x1x5, 1200 B: 2.13 -> 5.90 at 2 threads), and so did the largest (s8 `nChw16c ->
#: nChw8c` 4096x100x17x35, 61880 B, past L1: 1.25 (1.04) -> 1.58 (1.25)) and a narrowing one
#: (f32 -> bf16 `nCw16c -> nCw8c` 4096x48x55: 1.20 -> 1.55 at 2 threads; others even):
#: narrowing conversions keep their plain tiles. Of the 13 it takes, three lost a little:
#: u8 `nCw16c -> ncw` 4096x56x299 2.06 (1.46) -> 2.20 (1.56), u8 `nCdhw8c -> ncdhw`
#: 4096x4x7x17x35 1.47 (1.09) -> 1.51 (1.15), bf16 -> f32 `nCw16c -> ncw` 4096x24x299 2.32
#: (1.46) -> 2.36 (1.60).
JOB_STAGE_SHIFT = os.environ.get("LAYOUTJIT_JOB_STAGE_SHIFT", "1") != "0"
#: ... but first jobs of several outer steps whose range starts on lines (``job_line_groups``)
#: where those stay under this many bytes (0: never): every line of them whole and NT, none
#: shared by two jobs. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2 threads), of the
#: 16 of 5630 listed and generated pairs it changes (13 gained at 1 thread, none lost when
#: measured again): f32 `nCw8c -> ncw` 1024x3072x13 0.92 (0.93) -> 0.66 (0.66), s8 -> f32
#: `nchw -> nChw8c` 272x4096x7x7 2.03 (1.46) -> 1.01 (0.99), f32 `nChw8c -> nchw`
#: 256x16384x3x3 0.91 (0.94) -> 0.62 (0.61), bf16 `ncdhw -> nCdhw16c` 8192x1536x7x1x1 0.82
#: (0.95) -> 0.60 (0.66); bf16 `nChw16c -> nChw8c` 512x1024x7x7 (not in those lists) went
#: both ways, 0.81-0.89 -> 1.05-1.11 at 1 thread, 1.19-1.32 -> 0.88-0.89 at 2.
JOB_STAGE_GROUP_BYTES = int(os.environ.get("LAYOUTJIT_JOB_STAGE_GROUP_BYTES", 32768))
#: Staged jobs (``job_stage``) whose tiles' source rows follow one another prefetch the next
#: row group's block as NT transposes do (``Plan.prefetch``, ``_prefetch_rows``), which the
#: job stage had gone without. f32 `nchw -> nChw8c` 2048x60x7x17 (seed 5000; C = 60: every
#: other 8c block starts off a line, so the tiles stage): 8 planes of 476 B a tile group, no
#: prefetch. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), without -> with:
#: 2.42 (1.71) -> 1.75 (1.36), oneDNN 1.90 (1.41), which had been ahead; the 7 listed and
#: generated pairs it changes (1- and 2-byte `ohwi -> oihw` weights) 2.39-3.65 (2.47-3.00) ->
#: 1.85-3.34 (2.00-2.62), all faster; C = 64 and 100 (which it changes too) even.
JOB_STAGE_ROW_PREFETCH = os.environ.get("LAYOUTJIT_JOB_STAGE_ROW_PREFETCH", "1") != "0"
JOB_STAGE_SHIFT_MIN_BYTES = 1248
JOB_STAGE_SHIFT_MAX_BYTES = 32 * 1024


def job_stage(ir: LoopIR, tile: TileSpec, parallel: int, anywhere: bool = False) -> int:
    """Elements of each job's destination range when a plan of plain stores can stage it
    (0: none): the job's loops write one dense range, line-aligned in every job.

    `gOIhw16i16o -> goihw` s8 -> f32 64x1024x100x5x1: 5x16 tiles store 20 bytes into each
    of 16 rows 2000 B apart, pieces of lines that stay plain, so every line is read before
    it is written; the job (one g x O block) covers 16 whole rows, 32000 B in a row. Its
    tiles now fill a stage (in cache), copied out as whole NT lines. Needs no padded dim
    among the job loops (every job the same shape), two operands, every node's destination
    stride known, the job strides and ``offset0`` whole lines, and the positions the
    job's loops write (padding zeros included, skipped positions not) exactly
    ``[0, span)`` with ``span`` whole lines of at most ``JOB_STAGE_BYTES``.

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), plain -> staged: that pair
    2.41-2.49 (1.79-1.90) -> 1.74-1.94 (1.27-1.50) (oneDNN 2.02 (1.72), which had been
    ahead), I = 96 2.67 (2.14) -> 2.08 (1.69); f32 4x7x7 (I = 4 of 16) 0.91 (0.77) -> 0.75
    (0.58); `OIhw8i16o2i -> OIhw4i16o4i` 384x512x7x7 (256 B a job) 0.95 (0.93) -> 0.71
    (0.73); s8 -> f32 `OIhw4o4i -> OIhw8i8o` 1.26 (1.09) -> 0.89 (0.63); bf16 `BcdeA8b4a ->
    aBdeC16c48b2c` 1.16 (1.12) -> 0.54 (0.46); `aCdB16b32c4b -> abCd4c` 1.00 (1.06) -> 0.86
    (0.68); six others even.
    Narrowing 4x went both ways (f32 -> s8 `gOIhw16i16o -> goihw` 64x384x16x7x5 3.08 (2.58)
    -> 2.48 (2.12), f32 -> u8 `OIhw8o8i -> OIhw16o16i` 1.77 (1.80) -> 2.26 (2.03)) and is
    left out, and so are plans whose tiles could store whole lines but whose size kept them
    plain (local permutations below their NT threshold).
    """
    if not JOB_STAGE_BYTES or len(ir.operands) != 2:
        return 0
    dst = ir.operands[0]
    dsz = dst.dtype.size
    if 4 * dsz <= ir.operands[1].dtype.size:
        return 0  # (narrowing 4x: the stores are a fifth of the traffic; f32 -> u8 lost)
    q = max(1, 64 // dsz)
    outer = outer_nodes(ir, tile)
    if parallel < 1 or parallel > len(outer) or (dst.offset0 % q and not anywhere):
        return 0
    if any(n.strides[0] is None for n in ir.nodes):
        return 0
    jobs = [ir.nodes[i] for i in outer[:parallel]]
    if any(_guarded(ir, n) or ((n.strides[0] or 0) % q and not anywhere) for n in jobs):
        return 0
    inner = [n for i, n in enumerate(ir.nodes) if i not in outer[:parallel]]
    if math.prod(n.extent for n in inner) > JOB_STAGE_MAX_ENUM:
        return 0
    off = np.zeros(1, np.int64)
    keep = np.ones(1, bool)
    index = {d: np.zeros(1, np.int64) for d, r in enumerate(ir.dims) if r.guarded}
    for n in inner:
        step = np.arange(n.extent, dtype=np.int64)
        off = (off[:, None] + step[None, :] * (n.strides[0] or 0)).ravel()
        keep = np.repeat(keep, n.extent)
        for d in index:
            add = step * n.weight if n.dim == d else np.zeros(n.extent, np.int64)
            index[d] = (index[d][:, None] + add[None, :]).ravel()
    for d, x in index.items():
        keep &= x < ir.dims[d].write
    written = np.sort(off[keep])
    span = int(written.size)
    if span == 0 or (span % q and not anywhere) or span * dsz > JOB_STAGE_BYTES:
        return 0
    if anywhere and (not JOB_STAGE_SHIFT_MIN_BYTES <= span * dsz <= JOB_STAGE_SHIFT_MAX_BYTES
                     or dsz < ir.operands[1].dtype.size):
        return 0
    if written[0] != 0 or written[-1] != span - 1 or np.any(np.diff(written) != 1):
        return 0
    return span


def _job_nodes(ir: LoopIR, tile: TileSpec, parallel: int) -> frozenset[int]:
    """The nodes flattened into the job range (their offsets are known per job)."""
    return frozenset(outer_nodes(ir, tile)[:parallel])


def outer_nodes(ir: LoopIR, tile: TileSpec) -> list[int]:
    """The nodes outside the tile, outermost first (the loops that run the macro tiles)."""
    return [i for i in range(len(ir.nodes)) if i not in tile.nodes]


def outer_count(ir: LoopIR, tile: TileSpec) -> int:
    """How many times the macro tiles run: the product of the outer nodes' extents."""
    return math.prod(ir.nodes[i].extent for i in outer_nodes(ir, tile))


#: Addresses this far apart (a multiple of it) map to one L1 set (32 KiB, 8 ways).
L1_SET_PERIOD = 4096


#: Ways of an L1 data cache set (Zen 3/4: 8; Intel from Ice Lake: 12, read as 8).
L1_WAYS = 8


def lines_per_l1_set(offsets: Iterable[int]) -> int:
    """Most of the lines at these byte offsets that fall into one L1 set (64 sets of 64 B):
    more than ``L1_WAYS`` and they evict one another before they are read again."""
    return lines_per_set(offsets, L1_SET_PERIOD)


def lines_per_set(offsets: Iterable[int], period: int) -> int:
    """Most of the lines at these byte offsets that fall into one set of a cache whose sets
    repeat every ``period`` bytes (one count per offset)."""
    sets: dict[int, int] = {}
    for off in offsets:
        k = (off // 64) % max(1, period // 64)
        sets[k] = sets.get(k, 0) + 1
    return max(sets.values(), default=0)


def _rows_share_l1_set(row_bytes: int) -> bool:
    """Whether source rows ``row_bytes`` apart all land in one L1 set: each tile then reads
    its rows' lines from L2 or beyond (see ``_transpose`` and ``_whole_runs``)."""
    return row_bytes % L1_SET_PERIOD == 0


def _l1_row_tiles(dsz: int, vbytes: int) -> bool:
    """Whether tiles over source rows that share an L1 set may take ``ALIASED_L1_ROWS``
    rows and a whole line of each: vectors shorter than a line, and that many destination
    elements still filling one (see ``_transpose``, ``wide_panel``)."""
    return bool(ALIASED_L1_ROWS and vbytes < 64 and ALIASED_L1_ROWS * dsz >= vbytes)


#: Transposes with plain stores into destination rows at least this far apart...
WIDE_GROUP_STRIDE_BYTES = 1024
#: ... read this many source rows per macro tile (each row of the destination then gets
#: that many elements in a row before the tiles move on).
WIDE_GROUP_ROWS = 256
#: ... unless that leaves fewer jobs than this (outer indices x macro tiles): then the
#: groups narrow to twice as many jobs (``_wide_group_tiles``).
WIDE_GROUP_MIN_JOBS = 4


def _wide_groups(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a plain-store transpose should use wide macro tiles (``WIDE_GROUP_ROWS``).

    A macro tile of 32 rows writes 128 bytes of each destination row before moving to
    the next rows; with rows 1 KB or more apart (nchw -> nhwc, C >= 256 f32) those
    short pieces land on few cache sets and the cached stores thrash. Measured at 1
    thread (in-cache sizes, ratio to copy; 32 rows -> 256 rows): C=512, HW=784: 2.5 ->
    1.2; C=1024, HW=784: 4.3 -> 2.3; C=768: 1.32 -> 1.14; C=256: 1.5 -> 1.4. With NT
    stores (large tensors) 32 rows stay best (2048x4096: 0.91 vs 1.55 for whole rows),
    and rows less than 1 KB apart too (C=96: 1.2 vs 2.0).

    Destinations of 1 or 2 bytes keep one tile of rows (a line of each destination row):
    their wide groups lost everywhere on Zen 3 (nhwc -> nchw at 1 thread (2 threads), 256
    rows -> one tile, 1-13 MB: bf16 C=256 2.40-3.11 -> 1.58-1.66 (2.59-2.75 -> 1.39-1.62),
    C=128 1.94 -> 1.57 (2.04 -> 1.69), s8 2.12-3.36 -> 1.75 (3.54 -> 2.35), f32 -> bf16
    3.02-3.55 -> 2.25-2.38 (3.40-3.96 -> 2.52-2.63), f32 -> s8 2.22 -> 1.82 (2.25 -> 1.84);
    nchw -> nhwc bf16 1.49-1.82 -> 1.66-2.10 at 1 thread, 1.86-2.12 -> 1.67-1.69 at 2).
    """
    if (tile.kind != "transpose" or tile.rows_contiguous or tile.c is not None or tile.a2 is not None
            or tile.b is None or ir.operands[0].dtype.size < 4):
        return False
    b = ir.nodes[tile.b]
    return (b.strides[0] or 0) * ir.operands[0].dtype.size >= WIDE_GROUP_STRIDE_BYTES


#: Transposes whose rows are a few elements of consecutive padded blocks take plain tiles
#: of half the columns (rounded up to a power of two) in rows, 2 to this many
#: (``thin_tile_rows``; 0: off).
THIN_TILE_ROWS = int(os.environ.get("LAYOUTJIT_THIN_TILE_ROWS", 4))
#: ... where those elements are at most this many bytes of the line.
THIN_TILE_MAX_ROW_BYTES = 32
#: ... also tiles that write whole blocks, rows of at most THIN_BLOCK_MAX_ROW_BYTES.
THIN_BLOCK_TILES = os.environ.get("LAYOUTJIT_THIN_BLOCK_TILES", "1") != "0"
THIN_BLOCK_MAX_ROW_BYTES = 16


def thin_tile_rows(ir: LoopIR, tile: TileSpec) -> int:
    """Rows per tile for a transpose whose rows are the few elements written of consecutive
    padded blocks of whole lines (nChw16c -> nchw with C = 3: 12 bytes of each 64-byte
    block); 0: keep the tile. Such tiles store plainly (``make_plan``).

    Every row is its own line read for a few bytes. A tall network (16 rows, a destination
    line each, by 4 columns) kept fewer of those lines in flight than small ones, and NT
    stores save little where the destination is a fraction of the source. Zen 3 (AVX2), one
    process (``perf.ab``), ratio to copy at 1 thread (2 threads), f32 ``nChw16c -> nchw``:
    C = 3, 64x3x299x299 (plain 16-row tiles) 2.01-2.08 (1.39) -> 0.97-0.99 (0.94-0.97),
    oneDNN 1.16 (0.96-0.98); 64x3x304x304 (NT 32-row tiles before) 1.49 (1.13) -> 1.00
    (0.98); 16x3x1024x1024 1.37 (1.38) -> 0.93 (0.91); C = 8 32x8x304x304 1.77 (1.80) ->
    1.06 (1.06); C = 6 1.25 (1.46) -> 0.97 (1.00); f32 -> bf16 C = 3 2.62 (2.05) -> 0.88
    (0.94). Rows 1 KB apart (IOhw16o16i -> oihw, I = 3) lost (1.85 -> 2.04), so the blocks
    must follow one another.

    Tiles that write whole blocks (``THIN_BLOCK_TILES``: gOIhw16o16i -> gOhwi16o, a 16x3
    tile per 1 KB block) shrink too where the rows are at most ``THIN_BLOCK_MAX_ROW_BYTES``;
    their pieces then go through a job stage. 4096x32xIx1x5, ratio to copy at 1 thread (2
    threads): f32 -> u8 I = 3 1.63 (1.58) -> 0.91 (0.89), oneDNN 1.09 (1.50); f32 I = 2
    1.74 (1.47) -> 0.85 (0.92); I = 4 1.62 (1.30) -> 0.92 (0.83). I = 5 and 8 gained in f32
    (0.99 -> 0.80, 0.94 -> 0.76) but f32 -> u8 I = 8 lost (0.80 -> 1.07), hence the bar.
    """
    if (not THIN_TILE_ROWS or tile.kind != "transpose" or (tile.rows_contiguous and not THIN_BLOCK_TILES)
            or tile.c is not None or tile.a2 is not None or tile.b is None or tile.skew):
        return 0
    ssz = ir.operands[1].dtype.size
    a = ir.nodes[tile.a]
    b = ir.nodes[tile.b]
    if a.strides[1] != b.extent or b.extent * ssz < 64:
        return 0  # rows are not consecutive blocks of whole lines
    cols = _written_steps(ir, b)  # (the rest of each block is padding where cols < its extent)
    if not 0 < cols < b.extent or cols * ssz > (THIN_BLOCK_MAX_ROW_BYTES if tile.rows_contiguous
                                                else THIN_TILE_MAX_ROW_BYTES):
        return 0
    R = min(THIN_TILE_ROWS, max(2, (1 << (cols - 1).bit_length()) // 2))
    return R if 1 <= R < tile.R else 0


def _wide_group_tiles(ir: LoopIR, tile: TileSpec, vbytes: int, moved: int) -> int:
    """Tiles per wide macro tile: ``WIDE_GROUP_ROWS`` rows, fewer where that leaves few
    jobs (never fewer than the tile's own ``M``).

    Jobs are the outer indices times the macro tiles, and the threads share them in
    contiguous ranges. With one image (nchw -> nhwc, N=1) 256-row groups leave C/256 jobs:
    one for C=256, so at 2 threads one thread does everything; two or three measured slow
    at 2 threads too. Below ``WIDE_GROUP_MIN_JOBS`` jobs the groups narrow to twice that
    many. Measured on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), 256-row groups
    -> 8 jobs: 1x256x56x56 1.39 -> 1.37 (2.91 -> 1.29), 1x512x28x28 1.36 -> 1.24 (2.02 ->
    1.49), 1x384x28x28 1.25 -> 1.25 (1.68 -> 1.31). Four jobs stay: narrower groups lost
    at 1 thread on 2-D transposes (ab -> ba 1000x777 1.76 -> 1.95, 1000x1000 1.61 -> 1.73)
    and changed nothing on 1x1024x28x28. With 64-byte vectors the groups were not measured
    narrower, so there only a lone job is split (two jobs: no thread idles). Problems that
    run serially (below ``PARALLEL_MIN_BYTES``) keep their groups.
    """
    n_outer = outer_count(ir, tile)
    a_tiles = -(-ir.nodes[tile.a].extent // tile.R)
    M = max(tile.M, min(a_tiles, WIDE_GROUP_ROWS // tile.R))
    low, want = (WIDE_GROUP_MIN_JOBS, 2 * WIDE_GROUP_MIN_JOBS) if vbytes < 64 else (2, 2)
    if moved < PARALLEL_MIN_BYTES or n_outer * -(-a_tiles // M) >= low:
        return M
    groups = -(-want // n_outer)
    return max(tile.M, min(M, -(-a_tiles // groups)))


#: Local permutations (``_block_local``) between the NT thresholds time the store kind
#: at run time on one thread too (``Plan.nt_tune_one``); off: plain stores up to the
#: split threshold at every thread count (``LAYOUTJIT_BLOCK_LOCAL_TUNE=0``).
BLOCK_LOCAL_TUNE = os.environ.get("LAYOUTJIT_BLOCK_LOCAL_TUNE", "1") != "0"
#: ... and so do transposes whose tiles write whole blocks (``TileSpec.rows_contiguous``:
#: nchw -> nChw4c, a tile writes 8 pixels of 4 channels), whose one-thread NT stores lost to
#: plain ones in cache (``LAYOUTJIT_WHOLE_BLOCK_TUNE=0``: NT from the one-thread threshold).
#: A/B on Zen 3 (AVX2), one process, ratio to copy at 1 thread, NT -> timed, the 79 listed
#: and generated pairs it changes: geomean 0.90 of the time, 14 faster by more than a tenth,
#: none slower by as much; f32 `nchw -> nChw4c` 32x512x7x17 2.31 -> 1.28 (oneDNN 1.67,
#: which had been ahead), `nchw -> nChw8c` 64x512x7x7 3.08 -> 1.20, u8 `nchw -> nChw16c`
#: 64x100x14x64 11.7 -> 3.9, f32 -> bf16 16x256x28x28 12.8 -> 4.9.
WHOLE_BLOCK_TUNE = os.environ.get("LAYOUTJIT_WHOLE_BLOCK_TUNE", "1") != "0"


def _block_local(ir: LoopIR, tile: TileSpec) -> bool:
    """A transpose whose tiles read one contiguous source run and write one contiguous
    block (OIhw16i16o -> OIhw4i16o4i): it streams on both sides like a copy.

    Below the split threshold the faster store kind changes with the host's phase, at
    one thread as at two: one session measured plain stores as fast as NT ones (1 thread,
    19 MB: plain 0.98x copy, NT 1.08-1.30x), a later one, same host kind,
    OIhw4i16o4i -> OIhw16i16o 512x512x3x3 plain 1.09x and NT 0.79x (2 threads: 0.98 and
    0.62), when numpy ran at 0.93-1.2x copy. So from the one-thread threshold such plans
    time both kinds at every thread count (``BLOCK_LOCAL_TUNE``)."""
    if tile.kind != "transpose" or not tile.rows_contiguous or tile.b is None:
        return False
    b = ir.nodes[tile.b]
    return ir.nodes[tile.a].strides[1] == b.extent == tile.V  # the tile's rows are adjacent


def shift_group(R: int, q: int) -> int:
    """Source rows per group of a shifted transpose: whole lines (q elements) per row.

    As few as possible: walking a group of rows along the panel is what reads
    them, and 16 rows read side by side measured 0.9-1.0x copy at 1 thread
    where 32 rows measured 1.6-1.7x (a 3001x2999 f32 transpose).
    """
    return R * max(1, -(-q // R))


#: Bound on a shifted transpose's carry (one 64-byte line per destination row of a panel).
SHIFT_CARRY_BYTES = 256 * 1024
#: Shifted transposes of short source rows that follow one another read groups of at
#: least this many bytes (shift_rows).
SHIFT_BLOCK_BYTES = 4096


def shift_rows(ir: LoopIR, tile: TileSpec) -> int:
    """Source rows per group of a shifted transpose (``Plan.shifted``).

    :func:`shift_group`, unless the source rows follow one another and are shorter than
    a line (nhwc -> nchw with C=3 and planes off the lines: rows of 12 bytes); then a
    group is one contiguous block, read like a copy however many rows it has, and groups
    of at least ``SHIFT_BLOCK_BYTES`` spread each row's realignment (a carry in, the
    lines out, a carry back) over more elements. Kept to half of A or less. Measured at
    1 thread (2 threads), ratio to copy, 16 rows -> 4 KB groups: nhwc -> nchw 64x3x299x299
    f32 1.82 -> 0.75 (1.32 -> 0.77), bf16 2.18 -> 0.87 (1.54 -> 0.79), 16x4x300x299 1.95
    -> 0.74 (1.37 -> 0.88); ab -> ba 2000003x12 1.89 -> 0.85 (1 KB groups: 0.79-0.93,
    16 KB: 1.06-1.32). Rows of a line (C=16) keep 16 (0.83 against 0.93 with 4 KB).
    """
    q = 64 // ir.operands[0].dtype.size
    g = shift_group(tile.R, q)
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    if not _rows_follow(a, b):
        return g
    row = b.extent * ir.operands[1].dtype.size
    if row >= 64:  # rows of a line or more: 16x16 tiles realign in registers (tile_shift)
        return g
    if _shift_in_registers(ir, tile, q, row):
        return g
    want = -(-SHIFT_BLOCK_BYTES // row)
    return max(g, min(-(-want // g) * g, a.extent // 2 // g * g))


#: Shifted transposes of rows shorter than a line keep groups of one line's rows where
#: those rows hold at least this many source bytes and the tiles realign in registers
#: (``_shift_in_registers``; ``LAYOUTJIT_SHIFT_REGISTER_ROWS=0``: 4 KB groups, for A/B runs).
SHIFT_REGISTER_GROUP_BYTES = 1024
SHIFT_REGISTER_ROWS = os.environ.get("LAYOUTJIT_SHIFT_REGISTER_ROWS", "1") != "0"


def _shift_in_registers(ir: LoopIR, tile: TileSpec, q: int, row: int) -> bool:
    """Whether a shifted transpose of short source rows (``row`` bytes, under a line) keeps
    groups of one destination line's rows (q), so that its middle groups transpose, realign
    and store in registers (``simd.tile_shift``: R = q rows) instead of through the stage.

    Where the q rows hold ``SHIFT_REGISTER_GROUP_BYTES`` or more, as the 16 rows of 64 bytes
    of f32 do: bf16 rows of 32 bytes (16 channels, 32 rows a line) went through the stage
    in 4 KB groups at about twice a copy. Zen 3 (AVX2), one process, ratio to copy at
    1 thread (2 threads), 4 KB groups -> one line's rows: bf16 `nCw16c -> ncw` 32x1024x1000
    2.10 -> 1.20 (1.47 -> 0.97), `nChw16c -> nchw` 32x64x299x57 1.81 -> 1.08 (3.08 ->
    1.19), `nhwc -> nchw` C = 16 16x16x300x299 2.20 -> 1.18 (1.24 -> 0.92), C = 24 1.78 ->
    0.96 (1.25 -> 0.73), `ab -> ba` 4000003x16 1.87 -> 0.98. Smaller line groups lost:
    512 bytes (f32 `nChw8c -> nchw` 0.97 -> 1.61 (0.71 -> 1.08), bf16 -> f32 `nhwc -> nchw`
    C = 16 1.07 -> 3.15), 768 (f32 C = 12) a draw. Same type only: f32 -> bf16 `nwc -> ncw`
    C = 13 (rows of 52 bytes) lost, 1.78 -> 3.07 (2.77 -> 3.67). 1-byte rows (64 a line,
    16 bytes and up) always hold 1 KB: they realign in registers wherever ``tile_shift``
    takes bytes (``simd.TILE_SHIFT_BYTES``).
    """
    dst, src = ir.operands[0].dtype, ir.operands[1].dtype
    if not SHIFT_REGISTER_ROWS or tile.R != q or q * row < SHIFT_REGISTER_GROUP_BYTES or src != dst:
        return False
    from .simd import tile_shift_supported

    return tile_shift_supported(src, dst)


def _rows_follow(a: Node, b: Node, run: int = 1) -> bool:
    """Whether the source rows A (B steps of ``run`` elements each) follow one another, so
    that any range of rows is one contiguous source block."""
    return a.strides[1] == b.extent * run and b.strides[1] == run


def _two_node_transpose(ir: LoopIR, tile: TileSpec) -> bool:
    """A full transpose of A x B alone (no whole-block rows, table columns or line rows),
    between src and dst only: the tiles the staged and half-line plans work with."""
    return (tile.kind == "transpose" and not tile.rows_contiguous and tile.b is not None
            and tile.c is None and tile.a2 is None and len(ir.operands) == 2)


def _shift_possible(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose can realign its destination rows onto whole lines (``Plan.shifted``).

    Needs: a register-tile transpose (not whole blocks), only src and dst, a
    destination of 1, 2, 4 or 8-byte elements whose row group (R*M elements) is a
    whole number of lines, no padding (but a source's of B's dim, ``padded_b_blocks``) or
    index-computed offsets, and rows of at least two groups and ``SHIFT_MIN_ROW_BYTES``
    (else there is little to realign); 1-byte destinations also at least
    ``SHIFT_MIN_BYTE_ROWS`` rows (B).
    """
    if not _two_node_transpose(ir, tile) or tile.b is None:
        return False
    dsz = ir.operands[0].dtype.size
    if dsz not in (1, 2, 4, 8):
        return False
    if dsz == 1 and ir.nodes[tile.b].extent < SHIFT_MIN_BYTE_ROWS:
        return False
    q = 64 // dsz
    group = shift_rows(ir, tile)
    if group % q:
        return False
    if _padded(ir) and not padded_b_blocks(ir, tile):
        return False
    if any(n.strides[0] is None or n.strides[1] is None for n in ir.nodes):
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    return (a.strides[0] == 1 and b.strides[1] == 1 and a.extent >= 2 * group
            and a.extent * dsz >= SHIFT_MIN_ROW_BYTES)


#: Shifted transposes only for destination rows of at least this many bytes
#: (``LAYOUTJIT_SHIFT_MIN_ROW_BYTES=0``: any, for A/B runs). A row of a few lines is mostly
#: its partial first and last line, stored plainly either way; the realignment then costs
#: more than its few NT lines gain, and plain tiles straight into the rows win. Zen 3 (AVX2),
#: one process, ratio to copy at 1 thread (2 threads), shifted -> plain: `gOIhw16i16o ->
#: goihw` 64x384x4x7x7 f32 (rows of 196 B) 1.98 -> 1.00 (1.47 -> 0.77); with I = 16 (the
#: same rows) a draw, 0.93 -> 1.03 (0.93 -> 0.86).
SHIFT_MIN_ROW_BYTES = int(os.environ.get("LAYOUTJIT_SHIFT_MIN_ROW_BYTES", 512))

#: 1-byte destinations (a line is 64 rows of the tile) realign only when a job writes at
#: least this many rows (B's extent): with 8 the plain tiles finish each row's partial lines
#: from cache at once and the realignment's stage and carry copies cost more than the
#: write-allocate reads they save. Zen 3 (AVX2), one process, ratio to copy at 1 thread
#: (2 threads), plain -> realigned: s8 `nhwc -> nchw` 16x96x299x56 3.44-3.67 -> 1.39-1.47
#: (2.56-2.75 -> 1.05-1.09), 64x512x112x14 1.61 -> 1.02 (1.62 -> 1.20), 64x16x299x57 1.07
#: -> 0.84 (1.33 -> 1.01); f32 -> u8 `nhwc -> nchw` C = 32 2.36 -> 1.47 (2.19 -> 1.48);
#: f32 -> s8 `ndhwc -> ncdhw` C = 48 2.54 -> 1.35 (2.22 -> 1.38), `nhwc -> nchw` C = 96
#: 3.41 -> 2.09 (2.37 -> 1.78), `nChw16c -> nchw` 8x256x299x56 1.01 -> 1.09 (0.91 ->
#: 1.11); u8 `nChw16c -> nchw` 64x96x32x299 1.49-1.59 -> 1.28-1.39 (1.35-1.37 ->
#: 1.01-1.05); with 8 rows: u8 `nhwc -> nchw` C = 8 0.83 -> 1.05 (1.06 -> 1.06), f32 -> s8
#: `nChw8c -> nchw` 2x768x299x224 1.93 -> 2.79-2.86 (0.88-1.05 -> 1.23-1.30), s8 `nChw8c ->
#: nchw` 0.83 -> 0.96 (0.84 -> 0.88).
SHIFT_MIN_BYTE_ROWS = int(os.environ.get("LAYOUTJIT_SHIFT_MIN_BYTE_ROWS", 16))

#: Realigned transposes whose jobs write fewer rows than this (B's extent: `nChw8c ->
#: nchw`, nhwc -> nchw with C < 16) carry the plain tiles too, straight into the rows in
#: the same loop order, and time both on their first calls at each thread count, one
#: included (``Plan.nt_tune``; store_choice.py). Which wins there changes with the thread
#: count: Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads), realigned ->
#: plain: `nChw8c -> nchw` 32x128x299x7 1.04 -> 0.82 (0.66 -> 0.75), 16x64x299x57 0.94 ->
#: 0.73 (0.83 -> 0.89); with 16 rows and more the realigned lines won at both (`nChw16c ->
#: nchw` 32x128x299x7 0.69 -> 0.95 (0.75 -> 1.12), nhwc -> nchw C = 96 0.62 -> 1.50, s8
#: 1.68 -> 3.06, ab -> ba 3001x2999 0.85 -> 1.48 (0.79 -> 1.61)).
SHIFT_TUNE_ROWS = int(os.environ.get("LAYOUTJIT_SHIFT_TUNE_ROWS", 16))
#: ... and so do realigned transposes of any row count whose traffic lies between the
#: one-thread and the split NT thresholds (``nt_split_min_bytes``), where the output may stay
#: in cache between calls. There the realigned NT lines lost to plain tiles, which keep it
#: in cache: Zen 3 (AVX2), one process, medians of each kind's own calls (``perf.ab``),
#: ratio to copy at 1 thread (2 threads), realigned NT -> plain tiles: f32 `nChw16c -> nchw`
#: 8x256x27x27 (12 MB of traffic) 2.09 -> 1.24-1.35 (2.65 -> 1.31-1.44), 1x384x299x17 (16
#: MB) 1.79 -> 1.30-1.45 (2.56 -> 1.48), 12x256x27x27 (18 MB) 1.95 -> 1.41 (2.55 -> 1.42),
#: nhwc -> nchw 16x128x27x27 2.12 -> 1.51 (2.77 -> 1.56), ab -> ba 1500x1001 2.37 -> 1.45
#: (2.81 -> 1.62); but ab -> ba 2000x1001 (16 MB) 1.23 against 1.88 at 1 thread. Timed in
#: the harness (the choice made at run time, two runs each), ratio to copy at 2 threads,
#: before -> after: `nChw16c -> nchw` 1x384x299x17 2.45-2.64 -> 1.37-1.42 (1.45-1.52 ->
#: 1.06-1.07x oneDNN's time), 8x256x27x27 2.45-2.87 -> 1.50-1.57, 12x256x27x27 2.08-2.21 ->
#: 1.49-1.55, ab -> ba 2000x1001 2.10-2.36 -> 1.30-1.40; one thread within the noise.
SHIFT_TUNE_BAND = os.environ.get("LAYOUTJIT_SHIFT_TUNE_BAND", "1") != "0"


#: Whether NT transposes of short source rows that follow one another read half lines
#: (``_half_line_tiles``), for rows of HALF_LINE_MIN_ROW <= bytes < HALF_LINE_MAX_ROW.
HALF_LINE_TILES = True
HALF_LINE_MIN_ROW = 256
HALF_LINE_MAX_ROW = 4096
#: (with 64-byte vectors, a partial last group of 4-byte rows keeps half lines from this many
#: groups on: `nhwc -> nchw` 64x128x28x28, 784 rows, 0.91 -> 1.04 at 1 thread without them)
HALF_LINE_MANY_GROUPS = 4
#: ... and with 64-byte vectors, for narrowing conversions, under this many bytes
#: (``LAYOUTJIT_HALF_LINE_MAX_ROW_WIDE``; see _half_line_tiles).
HALF_LINE_MAX_ROW_WIDE = int(os.environ.get("LAYOUTJIT_HALF_LINE_MAX_ROW_WIDE", 448))


def _half_line_tiles(ir: LoopIR, tile: TileSpec, vbytes: int = 32) -> bool:
    """Whether a transpose with NT stores should read half a line of each source row.

    When the tile's source rows follow one another (source stride of A == B's extent)
    and are short (256 B to 4 KB: nhwc -> nchw with C = 64..1023 f32), the source of a
    macro tile is one contiguous block. Tiles of half a line (f32: 16x8) with
    ``PARTIAL_LINE_STEP_BYTES`` per step (256 rows) measured 0.85-1.0x copy at 1 thread
    where full-line tiles (16x16, 32 rows) took 1.27-1.35x (nhwc -> nchw, C=128 and 256,
    51-205 MB; 2 threads 0.7-0.9x vs 1.0-1.1x; f32 -> bf16 1.66x -> 1.20x; C=64
    1.59x -> 1.34x). Longer rows (nchw -> nhwc: planes of 12 KB; ab -> ba) measured
    0-6% slower with them, rows of one block (nChw16c -> nchw: 64 B) 15% slower.

    With 64-byte vectors only where the groups of rows of 4-byte elements
    (``_with_prefetch_groups``: 64 rows) divide A evenly or are many (``HALF_LINE_MANY_GROUPS``),
    and for narrowing conversions only in rows under
    ``HALF_LINE_MAX_ROW_WIDE``. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2
    threads), half -> whole lines: A of 96 (a group of 64 rows and one of 32) lost with
    half lines (`ncdhw -> ndhwc` 2048x96x3x5x5 1.09 -> 0.87, 1598x96x3x5x5 1.24 -> 0.93
    (1.24 -> 0.99), `nchw -> nhwc` 2048x96x9x9 1.06 -> 0.87 (0.83 -> 0.74), `ncw -> nwc`
    975x96x99 1.19 -> 0.99, 331x96x300 1.05 -> 0.81; A of 80 even); f32 -> bf16 rows of 484
    B and up gained (`nchw -> nhwc` 256x384x13x13 1.30 -> 1.08 (0.91 -> 0.83), 215x256x15x15
    1.38 -> 1.23, 1084x64x11x11 1.24 -> 0.98, 77x512x15x15 1.34 -> 1.10 (but 0.98 -> 1.29);
    `nhwc -> nchw` 32x256x56x56 1.13 -> 0.94 (1.02 -> 0.87)). Other rows went both ways:
    short ones lost (`nhwc -> nchw` C = 64 0.75 -> 1.01, C = 96 0.92 -> 1.06; `ab -> ba`
    500000x64 0.81 -> 1.03, 131072x128 0.84 -> 1.11), some long ones gained (`ab -> ba`
    12000x1000 0.85 -> 0.73, `ohwi -> iohw` 65536x512x1x1 0.76 -> 0.65) and others lost
    (`ohwi -> hwio` 32768x104x3x3 0.71 -> 0.79): they keep half lines. So do 1-byte sources
    whose 256-row groups leave a remainder (s8 -> f32 `nhwc -> nchw` 32x512x56x112, 6272
    rows, lost: 0.88 -> 1.09).
    """
    if not _two_node_transpose(ir, tile) or tile.b is None:
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    ssz = ir.operands[1].dtype.size
    row = b.extent * ssz
    if not (_rows_follow(a, b) and tile.V * ssz == 64 and tile.V % 2 == 0
            and HALF_LINE_MIN_ROW <= row < HALF_LINE_MAX_ROW):
        return False
    if vbytes < 64:
        return True
    g = _with_prefetch_groups(ir, _with_half_lines(ir, tile), vbytes)
    rows = g.R * g.M
    narrowing = ir.operands[0].dtype.size < ssz
    even = a.extent <= rows or a.extent % rows == 0 or a.extent >= HALF_LINE_MANY_GROUPS * rows or ssz < 4
    return (row < HALF_LINE_MAX_ROW_WIDE or not narrowing) and even


def _with_half_lines(ir: LoopIR, tile: TileSpec) -> TileSpec:
    """The tile with half its columns and enough rows for ``PARTIAL_LINE_STEP_BYTES`` a step."""
    a = ir.nodes[tile.a]
    ssz = ir.operands[1].dtype.size
    V = tile.V // 2
    M = max(tile.M, min(-(-a.extent // tile.R), PARTIAL_LINE_STEP_BYTES // (tile.R * V * ssz)))
    return replace(tile, V=V, M=M)


#: Whether NT transposes of narrow elements take every row of A per step (``_whole_runs``):
#: when a macro tile would write at most 1/WHOLE_RUN_MIN_PARTS of each destination run, all
#: A rows lie within WHOLE_RUN_MAX_SPAN bytes of source (a fixed size: wins were measured
#: up to 6.4 MB and losses from 16 MB on a 32 MiB L3, whose cause is not known to scale
#: with the LLC), and there are at least WHOLE_RUN_MIN_JOBS outer jobs.
WHOLE_RUNS = os.environ.get("LAYOUTJIT_WHOLE_RUNS", "1") != "0"
WHOLE_RUN_MIN_PARTS = 8
WHOLE_RUN_MAX_SPAN = 8 << 20
WHOLE_RUN_MIN_JOBS = 8
WHOLE_RUN_MIN_ROW = 1024  # source row bytes (shorter rows: prefetched groups, _prefetch_rows)
#: ... and at most this share of an L2 set's ways holds the A rows' lines (rows_per_l2_set).
WHOLE_RUN_L2_SHARE = float(os.environ.get("LAYOUTJIT_WHOLE_RUN_L2_SHARE", 0.5))


def _whole_runs(ir: LoopIR, tile: TileSpec, vbytes: int) -> bool:
    """Whether a macro tile should take every row of A, so that the destination is written
    in order.

    A 16- or 8-bit tile takes one destination line of rows (32 bf16, 64 s8): nchw -> nhwc
    with 256 bf16 channels writes one line of each 512-byte pixel per step, and the other
    7 lines are written by other jobs, far apart in time: the non-temporal writes reach
    memory scattered. Taking all C rows per step writes the destination in order, at the
    cost of reading C source rows side by side. Measured on Zen 3 (AVX2; A/B in one
    process, ratio to copy at 1 thread (2 threads), one line of rows -> all of C), bf16:
    C=256 56x56 1.39 -> 0.83 (1.09 -> 0.84), 112x112 1.34 -> 1.14 (1.38 -> 1.00), C=512
    1.74 -> 1.01 (1.47 -> 0.94), C=1024 1.98 -> 1.35 (1.71 -> 1.20); s8 C=512 112x112
    1.48 -> 1.15 (1.41 -> 0.96), 56x56 (rows of 3 KB, too large a group to prefetch) 1.28-1.39
    -> 1.06-1.08 (1.06-1.08 -> 1.00-1.01), C=1024 1.57 -> 1.32 (1.33 -> 1.20). Not taken
    where it lost: a quarter of each run or more
    per step (bf16 C=128: 0.88 -> 1.02), rows a multiple of 4 KB apart (bf16 C=256 64x64:
    1.45 -> 1.53; s8 C=512 2.29 -> 2.85), a source span of more than a few MB (f32 C=256
    128x128, 16 MB: 1.72 -> 4.24), conversions (f32 -> bf16 C=256 0.94 -> 1.58, bf16 ->
    f32 1.36 -> 1.40: the source and destination streams no longer match), and f32 (16
    rows a tile, two tiles a step: C=256 1.00 -> 0.99, 64x64 0.90 -> 1.25, C=384 60x60
    0.83 -> 0.96). Only measured with 32-byte vectors: AVX-512 plans are left as they were.

    Nor where more than half an L2 set's ways would hold the A rows' lines
    (``rows_per_l2_set``): each line is read over several steps (8 for s8 tiles of 8
    columns), and all A rows are in flight at once. Rows whose starts repeat their L2
    place every few rows then evict lines before their last visit. Zen 3 (8-way, 64 KiB
    period), whole runs -> one tile of rows, A/B in one process, 1 thread (2 threads): s8
    ncdhw -> ndhwc C=1024 with 5 KB rows (16 a set) 2.51-3.05 -> 1.79-1.80 (1.94-2.79 ->
    1.35-1.65), nchw -> nhwc C=1024 48x64 (3 KB, 16 a set) 2.50 -> 1.73 (2.02 -> 1.41), C=512
    5 KB rows (8 a set) 2.53 -> 1.71 (1.89 -> 1.40), bf16 C=512 32x96 (6 KB, 16 a set) 2.15
    -> 0.94 (1.77 -> 1.04); 4 a set: C=1024 with 1280 B rows 1.30 -> 1.22 (1.14 -> 1.13).
    """
    if vbytes >= 64 or not _two_node_transpose(ir, tile) or tile.b is None:
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    ssz = ir.operands[1].dtype.size
    if (ir.operands[0].dtype.size != ssz or ssz > 2 or a.strides[1] is None
            or b.strides[0] != a.extent or tile.M * tile.R * WHOLE_RUN_MIN_PARTS > a.extent):
        return False
    row = a.strides[1] * ssz  # bytes between source rows
    outer = outer_count(ir, tile)
    return (b.extent * ssz >= WHOLE_RUN_MIN_ROW and not _rows_share_l1_set(row)
            and a.extent * row <= WHOLE_RUN_MAX_SPAN and outer >= WHOLE_RUN_MIN_JOBS
            and rows_per_l2_set(row, a.extent) <= L2_WAYS * WHOLE_RUN_L2_SHARE)


#: Largest stage of a panel plan (V destination rows of A elements each).
PANEL_MAX_BYTES = 32 * 1024
#: Most long source rows a panel job reads side by side (A: a piece of each; _shift_better).
PANEL_MAX_ROWS = 128


def _panel_possible(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose's destination rows are short, contiguous and off the lines (``Plan.panel``).

    Rows of A elements that follow one another (destination stride of B == A's extent:
    nhwc -> nchw, HxW = 7x7 or 14x14) form one contiguous panel per block of V rows;
    when the rows do not start on lines and a panel fits a small stage, the tiles fill
    the stage and the panel is written as whole lines, instead of realigning every
    short row (whose first and last lines would be partial). Rows of at most a line
    keep their whole-block tiles, which write the panel directly (8-bit 7x7: 1.7x copy
    direct, 2.2x staged). No padding (but a source's of B's dim, ``padded_b_blocks``),
    index-computed offsets or extra operands.
    """
    if not _two_node_transpose(ir, tile) or not _rows_form_panels(ir, tile, padded_b=True):
        return False
    dsz = ir.operands[0].dtype.size
    a = ir.nodes[tile.a]
    return (a.extent * dsz) % 64 != 0 and tile.V * a.extent * dsz <= PANEL_MAX_BYTES


def _padded(ir: LoopIR) -> bool:
    """Whether any dim carries padding (``DimRange.guarded``: its data short of its extent;
    its written zeros end between the two)."""
    return any(r.guarded for r in ir.dims)


#: Staged transposes (``Plan.panel``/``Plan.shifted``) also from a source that pads B's dim
#: (``padded_b_blocks``; ``LAYOUTJIT_STAGED_PADDED_B=0``: never, for A/B runs), into
#: destination rows of at least this many bytes.
STAGED_PADDED_B = os.environ.get("LAYOUTJIT_STAGED_PADDED_B", "1") != "0"
STAGED_PADDED_B_MIN_ROW_BYTES = 256


def padded_b_blocks(ir: LoopIR, tile: TileSpec) -> tuple[int, int, int] | None:
    """(node of B's block digit, index of the last block, its columns) where a staged
    transpose's only padding is a source's padding of B's dim, B being that dim's inner
    digit of one block of V columns and its block digit an outer node; None otherwise.

    Blocked sources whose channels end inside a block (`nChw16c -> nchw` with C = 200:
    13 blocks, 8 channels in the last) pad the dim the destination rows come from, and
    with padding no staged plan applied: the rows of 55x55 (12100 B) or 27x27 planes, off
    the lines, took plain stores. The padding is never read (the last block's tiles take
    its columns of data) nor written (the destination has none), so the staged plans run
    as for C = 208 with the last block's tiles and rows cut to its data. Zen 4 (AVX-512),
    A/B in one process, ratio to copy at 1 thread (2 threads), plain -> staged: f32
    `nChw16c -> nchw` 16x200x55x55 (realigned rows) 1.21 (1.20) -> 0.73 (0.69), oneDNN
    2.57 (1.79); 64x17x55x55 1.65 (1.51) -> 1.00 (0.98); 32x1000x13x13 (panels) 2.67
    (1.70) -> 1.22 (1.10), oneDNN 2.07 (1.71); `nChw8c -> nchw` 128x100x27x27 1.22 (1.33)
    -> 1.22 (1.13). Over 37 generated blocked -> plain pairs with C off the block, geomean
    1.47 (1.40) -> 1.20 (1.20); the losses were rows under ``STAGED_PADDED_B_MIN_ROW_BYTES``
    (s8 `nChw8c -> nchw` 8302x20x13x14, rows of 182 B, 1.09 (1.01) -> 1.81 (1.38); f32 ->
    bf16 `nChw16c -> nchw` 186x500x7x7, 98 B, 1.64 (1.40) -> 1.52 (2.66)), kept plain.
    """
    if not STAGED_PADDED_B or tile.b is None:
        return None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    if a.extent * ir.operands[0].dtype.size < STAGED_PADDED_B_MIN_ROW_BYTES:
        return None
    if b.dim is None or [i for i, r in enumerate(ir.dims) if r.guarded] != [b.dim]:
        return None
    r = ir.dims[b.dim]
    if r.write != r.valid or b.weight != 1 or b.extent != tile.V or r.valid % b.extent == 0:
        return None
    digits = [i for i, n in enumerate(ir.nodes) if n.dim == b.dim and i != tile.b]
    if len(digits) != 1 or digits[0] not in outer_nodes(ir, tile):
        return None
    blk = ir.nodes[digits[0]]
    if blk.weight != b.extent or blk.extent != -(-r.valid // b.extent):
        return None
    return digits[0], r.valid // b.extent, r.valid % b.extent


def _rows_form_panels(ir: LoopIR, tile: TileSpec, padded_b: bool = False) -> bool:
    """Whether a transpose's destination rows (A elements each, unit stride) follow one
    another (B's destination stride is A's extent), so that a block of B columns is one
    contiguous destination panel; every stride known, no padding (``padded_b``: but for a
    source that pads B's dim, ``padded_b_blocks``; the staged panels of ``_panel_possible``,
    not ``narrow_panel``)."""
    if tile.b is None or (_padded(ir) and not (padded_b and padded_b_blocks(ir, tile))):
        return False
    if any(n.strides[0] is None or n.strides[1] is None for n in ir.nodes):
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    return a.strides[0] == 1 and b.strides[1] == 1 and b.strides[0] == a.extent


#: Whether NT transposes (and packed runs) of short source rows that follow one another
#: prefetch (``_prefetch_rows``, ``_prefetch_runs``), for rows shorter than PREFETCH_MAX_ROW
#: bytes; source rows per group for 4-byte (and wider) source elements; most bytes of a
#: group's source block.
PREFETCH_ROWS = os.environ.get("LAYOUTJIT_PREFETCH", "1") != "0"
PREFETCH_MAX_ROW = 4096
PREFETCH_GROUP_ROWS = 64
PREFETCH_MAX_BLOCK = 128 * 1024
#: Tall tiles (at least ROW_STREAM_MIN_ROWS rows) of long source rows off the lines prefetch
#: each row ROW_STREAM_AHEAD bytes ahead (``Plan.row_stream_prefetch``).
ROW_STREAM_PREFETCH = os.environ.get("LAYOUTJIT_ROW_STREAM_PREFETCH", "1") != "0"
ROW_STREAM_MIN_ROWS = 32
ROW_STREAM_MIN_ROW_BYTES = 1024
ROW_STREAM_AHEAD = 512
#: ... and, for 2-byte elements on both sides, rows on the lines that are not a multiple of
#: 2 KB apart, ROW_STREAM_LINED_AHEAD bytes ahead (0: never). bf16 `nchw -> nhwc` with few
#: channels reads 32 B of 64 rows per tile (32x16 tiles, two a step: 2 KB a step, where
#: C=256 reads 8 KB); the rows' streams are more than the prefetchers follow. A/B on the
#: AVX-512 host (Zen 4), ratio to copy at 1 thread (2 threads), without -> 1 KB ahead:
#: 32x64x112x112 1.50-1.55 (1.05-1.33) -> 0.97-1.07 (0.83-0.99) (512 B: 1.19 (0.93));
#: 64x64x56x56 1.43 (2.17) -> 0.92 (0.95), f16 1.45 (1.08) -> 0.96 (0.84); C=128 112x112
#: 0.90 (0.92) -> 0.83 (0.89); C=96 0.86 -> 0.81; C=256 56x56 1.24 (0.89) -> 1.21 (0.88).
#: Rows 2 KB modulo 4 KB apart lost or gained nothing (`ncdhw -> ndhwc` 8x64x16x56x56 0.93
#: -> 1.10; ab -> ba 3072x3072, 6144x5120 even), and so did other element sizes: f32 ->
#: bf16 `nchw -> nhwc` 32x256x56x56 1.25 (0.92) -> 1.64 (1.04), u8/s8 mixed (32x256x56x56
#: 1.46 -> 1.19, 12288x3072 1.68 -> 1.89).
ROW_STREAM_LINED_AHEAD = int(os.environ.get("LAYOUTJIT_ROW_STREAM_LINED_AHEAD", 1024))
#: Tiles that write whole blocks prefetch their rows too, rows shorter than
#: ``PREFETCH_MAX_BLOCK_ROW`` bytes (see ``_prefetch_rows``).
PREFETCH_BLOCK_ROWS = os.environ.get("LAYOUTJIT_PREFETCH_BLOCK_ROWS", "1") != "0"
PREFETCH_MAX_BLOCK_ROW = 2048
#: Prefetched row groups write at least this many lines of each destination row per visit
#: (``_with_prefetch_groups``; 0: off).
PREFETCH_DST_LINES = int(os.environ.get("LAYOUTJIT_PREFETCH_DST_LINES", 2))
PREFETCH_DST_LINES_MAX_BLOCK = 32 * 1024  # ... where the group's block stays this small
#: Prefetches of row-group blocks larger than this go to L2 only (``Plan.prefetch_l2``).
#: A tile reading part of each source line comes back to that line for its next column
#: steps; prefetching a large next block into L1 evicts those lines first. Measured at 1
#: thread (2 threads), ratio to copy, to all levels -> to L2: s8 nhwc -> nchw 64x256x56x56
#: (128 KB blocks) 1.42-1.45 -> 1.12-1.13 (1.06-1.65 -> 0.96-1.32), 256x64x56x56 (32 KB)
#: 1.38 -> 0.93 (1.16 -> 0.94), bf16 nhwc -> nchw 32x256x56x56 (128 KB) 0.94 -> 0.85; with
#: 16 KB blocks L1 wins (f32 nhwc -> nchw C=64: 0.78 -> 1.06).
PREFETCH_L1_MAX_BLOCK = 16 * 1024
#: (``Plan.prefetch_l2``) Register-tile transposes whose source rows are not a whole number
#: of lines prefetch to L2 whatever the block: each column step reads lines that straddle
#: into the next step's. Measured at 1 thread (2 threads), ratio to copy, to all levels ->
#: to L2: nchw -> nhwc 1024x256x7x7 (rows of 196 B, 6 KB blocks) 1.10 -> 0.76 (0.98 ->
#: 0.78), f32 -> bf16 1.82 -> 1.19 (1.48 -> 1.08), ab -> ba 200000x48 (192 B) 1.10 -> 0.77
#: (0.94 -> 0.87); rows of whole lines keep L1 (nchw -> nhwc 8x8, 256 B: 0.81 -> 0.97;
#: nhwc -> nchw C=64 0.95 -> 1.04), and so do runs into lines (nhwc -> nChw8c 0.63 -> 0.85)
#: and realigned transposes (nhwc -> nchw 8x40x150x150, rows of 160 B: 1.25 -> 1.61).
#: Realigned (shifted) transposes prefetch to L2 when their source rows have at least this
#: many bytes. Measured nhwc -> nchw at 1 thread (2 threads), to all levels -> to L2:
#: 8x256x75x75 (rows of 1 KB) 1.79 -> 1.10 (1.23 -> 0.83), ndhwc -> ncdhw 64x256x7x7x7 1.70
#: -> 1.14 (1.44 -> 1.12), 32x128x35x35 (512 B) 1.49 -> 1.27 (1.58 -> 1.03), bf16
#: 64x256x28x28 1.44 -> 1.02 (1.33 -> 1.10), 128x256x14x14 1.96 -> 1.51 (1.64 -> 1.14);
#: shorter rows lose (8x96x150x150, 384 B: 0.69 -> 0.81; 256x64x14x14 at 2 threads 2.38 ->
#: 2.61).
PREFETCH_L2_SHIFT_ROW = 512


def _prefetch_rows(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose reads contiguous blocks of short rows a part of each row at a time.

    When the tile's source rows follow one another (source stride of A == B's extent:
    nchw -> nhwc with small planes, nhwc -> nchw with few channels, ab -> ba with short
    rows) a group of rows is one contiguous block, but the tiles sweep it a column step
    at a time: every step touches every few lines of the block, and the hardware
    prefetchers fetch such a block slowly (a read-only probe of 256 B rows: 8.5 GB/s,
    against 23 GB/s for a sequential read). Each tile then prefetches its share (its own
    size) of the next group's block, in order, so the whole block is fetched as a stream
    one group ahead (``Plan.prefetch``). Measured at 1 thread, 51-103 MB, ratio to copy
    (without -> with; 2 threads in brackets): nchw -> nhwc 8x8 1.33 -> 0.97 (1.13 -> 0.84),
    14x14 1.38 -> 0.85 (1.10 -> 0.92), 7x7 1.59 -> 1.05 (1.12 -> 0.86); nhwc -> nchw C=64
    1.51 -> 0.78 (1.11 -> 0.80); ndhwc -> ncdhw C=64 1.57 -> 1.02 (1.48 -> 0.80); ab -> ba
    200000x48 1.36 -> 0.93; f32 -> bf16 nchw -> nhwc 14x14 2.32 -> 1.75 (1.74 -> 1.25);
    s8 nhwc -> nchw C=256 1.50 -> 1.37 (1.08 -> 0.93). Rows that are one tile wide are
    read in order already (nChw16c -> nchw: 0.61 without, 0.95 with), and rows of 4 KB
    or more stream well on their own. The next block must be close: blocks of at most
    ``PREFETCH_MAX_BLOCK`` (s8 nchw -> nhwc 56x56, 200-800 KB a group: 1.17 -> 1.32-1.48
    with prefetch; at 128 KB and below no loss was seen). Tiles that write whole blocks
    (nchw -> nChw16c) read 16 rows a group; they were left out while their loads were
    slower (helped on 14x14 1.55 -> 1.27, hurt on 7x7 1.00 -> 1.31 and 28x28 0.80 -> 1.00).
    Measured again on the present tiles (``LAYOUTJIT_PREFETCH_BLOCK_ROWS``), without ->
    with, A/B in one process: nchw -> nChw16c 256x512x7x7 1.54 -> 1.12 (1.22 -> 0.92),
    64x512x14x14 1.22 -> 0.86 (0.99 -> 0.75), 64x256x17x17 0.99 -> 0.85 (0.95 -> 0.86),
    f32 -> s8 14x14 1.42 -> 0.81 (1.29 -> 0.84), f32 -> bf16 7x7 1.68 -> 1.19 (1.97 ->
    1.25), bf16 nchw -> nChw8c 128x1024x5x64 1.27 -> 0.77 (0.97 -> 0.71), ncw -> nCw16c
    64x768x299 1.13-1.30 -> 0.87-1.04 (0.93-1.10 -> 0.74-0.88); rows of 3136 B were
    mixed (28x28 f32 0.65 -> 0.76 (0.75 -> 0.72), u8 56x56 0.74 -> 0.85 (0.93 -> 0.88)),
    so whole-block tiles take rows under ``PREFETCH_MAX_BLOCK_ROW``. Only with NT stores
    (data from memory). Rows of one or two tile steps are read in order already:
    f32 rows of 128 B (two steps of 16), without -> with prefetch, 1 thread (2 threads):
    nhwc -> nchw C=32 0.89 -> 1.70 (1.10 -> 1.32), nchw -> nhwc 4x8 planes 1.08 -> 1.99,
    ab -> ba 1000000x32 0.61 -> 1.13; three steps break even (C=40: 1.28 -> 1.18-1.28,
    2 threads 1.22-1.27 -> 0.98; C=48 equal), so the rule wants more than two.
    """
    if (tile.kind != "transpose" or (tile.rows_contiguous and not PREFETCH_BLOCK_ROWS)
            or tile.c is not None or tile.a2 is not None or tile.b is None):
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    ssz = ir.operands[1].dtype.size
    max_row = PREFETCH_MAX_BLOCK_ROW if tile.rows_contiguous else PREFETCH_MAX_ROW
    return (_rows_follow(a, b) and 2 * tile.V < b.extent
            and b.extent * ssz < max_row and tile.R * b.extent * ssz <= PREFETCH_MAX_BLOCK)


def shift_prefetch(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a shifted transpose prefetches the next row group's source block.

    The same situation as :func:`_prefetch_rows`: source rows that follow one another
    (nhwc -> nchw), a group of them one contiguous block, read a block of V columns at
    a time; each block's tile prefetches its share of the next group's block. Measured
    on planes off the lines, ratio to copy at 1 thread (2 threads), without -> with:
    nhwc -> nchw 8x256x75x75 f32 1.88 -> 1.12-1.21 (1.32 -> 0.96-1.08), bf16 2.06 ->
    1.32-1.36 (1.70 -> 1.22-1.61), 8x40x150x150 f32 1.85 -> 0.85-1.22 (1.72 -> 0.91-1.14);
    two or four groups ahead measured the same or worse. Rows of ``PREFETCH_MAX_ROW``
    or more stream on their own (3001x2999 f32: 0.85 -> 1.16 with it), and so do blocks
    above ``PREFETCH_MAX_BLOCK``.
    """
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    row = b.extent * ir.operands[1].dtype.size
    return (_rows_follow(a, b) and b.extent > tile.V and row < PREFETCH_MAX_ROW
            and shift_rows(ir, tile) * row <= PREFETCH_MAX_BLOCK)


#: Shifted plans stage the line two destination rows share (``Plan.shift_edges``). A row
#: off the lines starts and ends in partial lines, stored plainly: each line read before
#: it is written, from memory. Where the rows follow one another, the end of one row and
#: the start of the next are one line, filled in the stage across the first and the last
#: row group and written once as a whole NT line; only a job's first and last line stay
#: plain. f32 -> bf16 `nchw -> nhwc` 256x200x13x13 (rows of 400 B, 6.25 lines): of 1056
#: lines an image, 338 were plain; without them (a probe that skipped them) 1.66 -> 1.04x
#: copy at 1 thread. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2 threads), plain
#: partial lines -> staged edges: bf16 `nChw16c -> nchw` 75x300x27x27 1.59 (1.16) -> 1.27
#: (0.96), s8 `nhwc -> nchw` 56x768x28x28 1.55 (1.12) -> 1.39 (1.06), s8 `nCdhw16c ->
#: ncdhw` 34x500x3x27x27 1.70 (1.26) -> 1.41 (1.18), s8 `gOidhw16o -> abdfce`
#: 1024x64x25x1x56x1 1.25 (1.30) -> 0.98 (1.09), bf16 `ab -> ba` 6000x6000 0.94 -> 0.80.
#: 4-byte rows (a line holds 16 elements: fewer of a row's lines are partial) went both ways
#: over two runs (`nhwc -> nchw` 64x1024x14x14 1.42-1.68 -> 1.23-1.53, `ncw -> nwc`
#: 256x200x128 1.15 (1.38) -> 1.10 (1.50), `nCw8c -> ncw` 29x500x500 1.30 (1.05) -> 1.09
#: (1.04) and 1.35 (1.01) -> 1.30 (1.20)): destination elements of up to
#: ``SHIFT_EDGES_MAX_ELEM`` bytes only.
SHIFT_EDGES = os.environ.get("LAYOUTJIT_SHIFT_EDGES", "1") != "0"
SHIFT_EDGES_MAX_ELEM = 2


#: Largest stage of a wide panel (``wide_panel``); 0 turns wide panels off.
PANEL_WIDE_BYTES = int(os.environ.get("LAYOUTJIT_PANEL_WIDE_BYTES", 256 * 1024))
#: Wide panels with vectors of this many bytes or more only where ``_many_short_rows``.
PANEL_WIDE_MAX_VECTOR = 64
#: ... from this many source rows (A) side by side (``LAYOUTJIT_PANEL_WIDE_MIN_ROWS=0``: never).
PANEL_WIDE_MIN_ROWS = int(os.environ.get("LAYOUTJIT_PANEL_WIDE_MIN_ROWS", 64))


def _many_short_rows(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a panel plan with 64-byte vectors takes wide panels: its narrow jobs would read
    ``PANEL_WIDE_MIN_ROWS`` or more source rows side by side, each shorter than a page
    (``PREFETCH_MAX_ROW``), into destination elements of 2 bytes or more.

    A narrow job reads a line of each of A source rows; over an outer index the jobs sweep
    the rows a line at a time, A streams of a few lines each, which the prefetchers follow
    badly (the next outer index's rows start the streams over). Wide jobs read R rows in
    order (``wide_panel``). Zen 4 (AVX-512), A/B in one process, ratio to copy at 1 thread
    (2 threads), narrow -> wide: `ncw -> nwc` 256x100x500 (100 rows of 2000 B) 1.56-1.63
    (1.34-1.40) -> 0.87-1.05 (0.96-0.99), oneDNN 2.24 (1.71); f32 -> bf16 `nchw -> nhwc`
    256x200x13x13 (200 rows of 676 B) 1.74-2.03 (1.53-1.61) -> 1.26-1.36 (1.19-1.29), oneDNN
    1.96 (1.80). Of 34 listed and generated pairs that wide panels change at this width,
    geomean 1.21 (1.18) -> 1.30 (1.22): fewer rows (`nchw -> nhwc` 256x24x56x56, 24 rows,
    0.61 (0.75) -> 1.26 (1.11); `nhwc -> nchw` 128x512x7x7, 49, 1.12 -> 1.31), rows of
    megabytes (`ab -> ba` 68x524288 1.07 -> 1.25) and 1-byte destinations (f32 -> u8 `nchw
    -> nhwc` 96x136x56x56 1.70 -> 2.27) lost; this rule keeps the two that gained.
    """
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    return bool(PANEL_WIDE_MIN_ROWS and a.extent >= PANEL_WIDE_MIN_ROWS and ir.operands[0].dtype.size >= 2
                and b.extent * ir.operands[1].dtype.size < PREFETCH_MAX_ROW)


#: Panels of one block whose stage is not whole lines take this many blocks per job at
#: most, to end on a line (``panel_line_blocks``; 0: off). A/B on the AVX-512 host (Zen
#: 4), ratio to copy at 1 thread (2 threads), 5 rounds, one block -> two: bf16 `nhwc ->
#: nchw` 512x1024x7x7 1.16 (0.86) -> 0.93 (0.71), 256x1024x7x7 1.28 (0.97) -> 1.01 (0.78),
#: 128x512x7x7 (6 MB) 2.90 (2.25) -> 2.11 (2.58). Narrowing conversions went both ways and
#: are left out: f32 -> bf16 `ohwi -> oihw` 1024x1024x7x7 0.91 (0.93) -> 0.99 (0.85), f32
#: -> u8 `ndhwc -> ncdhw` 448x896x2x7x7 1.33 (1.12) -> 1.49 (1.15).
PANEL_LINE_BLOCKS = int(os.environ.get("LAYOUTJIT_PANEL_LINE_BLOCKS", 4))


def panel_line_blocks(ir: LoopIR, tile: TileSpec) -> int:
    """Blocks of V destination rows per panel job so that a job's panel is whole lines (1:
    one block is, or no such count divides the blocks).

    bf16 `nhwc -> nchw` 512x1024x7x7: a job (16 channels) writes 784 elements, 1568 B,
    so every other job started and ended in the middle of a line, those two partial lines
    stored plainly (each read from memory first). Two blocks a job (3136 B, 49 lines): a
    hand-edited kernel at 1 thread, ratio to copy, 1.32 -> 1.11 (Zen 4). The job's tiles
    go strip by strip (``_render_wide_panel``), each call prefetching its share of the
    job's part of the next outer index's block. Not for narrowing conversions."""
    if not PANEL_LINE_BLOCKS or tile.b is None:
        return 1
    dsz = ir.operands[0].dtype.size
    if ir.operands[1].dtype.size > dsz:
        return 1  # (narrowing: see PANEL_LINE_BLOCKS)
    per = tile.V * ir.nodes[tile.a].extent * dsz
    nbb, rem = divmod(ir.nodes[tile.b].extent, tile.V)
    if per % 64 == 0 or rem:
        return 1
    k = 64 // math.gcd(per, 64)
    return k if k <= PANEL_LINE_BLOCKS and nbb % k == 0 and nbb > k else 1


def wide_panel(ir: LoopIR, tile: TileSpec, vbytes: int) -> tuple[TileSpec, int]:
    """A panel plan's tile and its blocks of V destination rows per job (``Plan.panel_blocks``).

    A narrow panel job (one block of V rows) reads a piece of every one of the A source
    rows: over an outer index the jobs sweep its source block column by column, A
    streams side by side (nhwc -> nchw 7x7: 49 rows), which the hardware fetches
    slowly (a read-only probe of that order on Zen 3 ran at 2.3-2.9x a copy's time, an
    in-order read at 0.63). A wide job stages many blocks, up to ``PANEL_WIDE_BYTES``
    (the whole 200 KB image of 7x7 C=1024), filling them a strip of R source rows at a
    time, so it reads R rows in order, and writes the stage as whole lines. Source rows
    a multiple of 4 KB apart share one L1 set: their tiles take 8 rows and a whole line
    of each (as ``_transpose`` does in cache). A job that takes whole outer blocks
    prefetches the next one, each tile call its share (without: C=256 1.54 -> 2.15).
    Measured with 32-byte vectors (Zen 3), nhwc -> nchw, ratio to copy at 1 thread (2
    threads), narrow -> wide, A/B in one process: 256x1024x7x7 1.55-1.86 -> 1.07-1.13
    (1.20-1.39 -> 0.99-1.10), 256x2048x7x7 1.51 -> 1.27 (1.34 -> 1.08), 256x1000x7x7 1.74
    -> 1.19 (1.40 -> 1.20), 1024x256x7x7 1.14 -> 0.92 (1.13 -> 0.94), 4096x64x7x7 1.48 ->
    1.22 (1.26 -> 1.02), bf16 256x1024x7x7 1.99 -> 1.08 (1.51 -> 1.07), f32 -> bf16 2.39
    -> 1.49 (2.23 -> 1.35). With 64-byte vectors the tiles read whole lines already, and
    wide panels gain only where the narrow jobs read many short rows (``_many_short_rows``).

    Wide panels start at the one-thread NT threshold of register transposes
    (``nt_min_bytes``, 11 MB here) at every thread count, where narrow ones and realigned
    rows wait for the split one (24 MB). 12-20 MB nhwc -> nchw, ratio to copy at 1 thread
    (2 threads), plain tiles -> wide panels: 64x512x7x7 1.81 -> 1.13 (1.77 -> 1.39),
    100x512x7x7 1.36 -> 0.97 (1.22 -> 0.99), 48x1024x7x7 1.69 -> 1.03 (1.54 -> 0.87),
    bf16 128x512x7x7 1.66 -> 0.97 (1.37 -> 0.77), f32 -> bf16 96x512x7x7 2.05 -> 1.51
    (2.06 -> 1.59). Below it NT loses at 2 threads (16x1024x7x7, 6 MB: 2.2-2.4 -> 1.3-2.6)
    and a plain copy of the stage loses everywhere.
    """
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    assert a.strides[1] is not None
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    if not PANEL_WIDE_BYTES or _padded(ir):
        return tile, 1  # (a padded B, padded_b_blocks: one block of V columns a job)
    if vbytes >= PANEL_WIDE_MAX_VECTOR and not _many_short_rows(ir, tile):
        return tile, 1
    wide = replace(tile, M=1)
    if _rows_share_l1_set(a.strides[1] * ssz) and _l1_row_tiles(dsz, vbytes) and 64 % ssz == 0:
        wide = replace(wide, R=min(a.extent, ALIASED_L1_ROWS), V=min(b.extent, 64 // ssz))
    nbb = -(-b.extent // wide.V)
    cap = PANEL_WIDE_BYTES // (wide.V * a.extent * dsz)
    if cap < 2 or nbb < 2:
        return tile, 1
    panels = -(-nbb // cap)
    return wide, -(-nbb // panels)


#: Panel jobs spread their prefetch of the next outer block over their tile calls
#: (``Plan.panel_spread``): issued at once as a job started, its share (49 lines of the
#: next image at 7x7 pixels) filled the miss queue ahead of the tiles' own loads. A/B on the
#: AVX-512 host (Zen 4), scratch stages in their page, ratio to copy at 1 thread (2
#: threads), 5 rounds, at once -> spread: `nhwc -> nchw` 1024x384x7x7 1.10 (1.41) -> 0.76
#: (0.79), 256x1024x7x7 1.03 (0.84) -> 0.87 (0.81), 256x768x7x7 1.28 (1.31) -> 0.89 (1.06),
#: 128x2048x7x7 1.18 (1.32) -> 1.17 (1.44); `nwc -> ncw` 1024x800x56 0.97 (0.99) -> 0.72
#: (0.75); `ncdhw -> ndhwc` 224x100x32x7x7 1.77 (1.51) -> 1.17 (1.01). Two stages, the
#: previous job's written out between this job's tiles (so that the NT stores drain while
#: the tiles compute), were tried with it and lost where the spread alone won: 256x1024x7x7
#: 1.39 (1.03), 128x2048x7x7 1.67 (1.88), 1024x384x7x7 0.99 (1.08).
PANEL_SPREAD_PREFETCH = os.environ.get("LAYOUTJIT_PANEL_SPREAD_PREFETCH", "1") != "0"


#: Wide panels of short source rows staged a few blocks at a time (``panel_sub_blocks``):
#: the most bytes of such a stage; 0: off.
PANEL_SUB_BYTES = int(os.environ.get("LAYOUTJIT_PANEL_SUB_BYTES", 16 * 1024))


def panel_sub_blocks(ir: LoopIR, tile: TileSpec, pb: int, prefetched: bool) -> int:
    """Blocks a wide panel stages and writes out at a time, each block filled for every A
    row before the next (``Plan.panel_sub_blocks``); 0: the whole job, a strip of R
    source rows at a time (``wide_panel``).

    The strips read R source rows in order. Where the job's block of source rows is
    prefetched whole (each tile call its share of the next one), nothing is gained by
    that, and a whole-image stage (nchw -> nhwc f32 C = 100 with 17x13 planes: 88 KB;
    nhwc -> nchw 7x7 C = 1024: 200 KB) lives in L2 beside the prefetched block: the
    tiles' stores and the write-out each pass through it. Sub-panels of at most
    ``PANEL_SUB_BYTES`` stay in L1.
    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), whole-job stage -> 16 KB
    sub-panels: nchw -> nhwc 2372x100x17x13 1.69 (1.32) -> 1.10 (1.07), f32 -> bf16 2.64
    (1.65) -> 1.53 (1.41), 1024x56x5x64 1.74 (1.49) -> 1.30 (1.18), 64x100x28x17 2.29
    (2.64) -> 1.64 (2.14), 256x100x7x17 1.69-1.81 (2.03-2.30) -> 1.33-1.53 (1.89-2.18);
    ncdhw -> ndhwc 4096x40x7x17x3 1.66 (1.30) -> 1.13 (0.96); nwc -> ncw s8 -> f32
    1024x256x55 2.02 (1.89) -> 1.80 (1.65), f32 -> u8 4096x64x299 2.06 (1.93) -> 1.88
    (1.69). Mixed: ncdhw -> ndhwc 512x60x7x1x17 1.52-1.83 (1.78-2.37) -> 1.63-1.72
    (1.82-2.46), s8 nchw -> nhwc 512x100x64x5 at 2 threads 1.89-2.01 -> 2.16-2.29 (1
    thread even); 11 of 2681 listed and generated pairs changed. Source rows of 2 KB and
    more were left out at first (nhwc -> nchw 128x512x7x7 2.16 (2.90) -> 2.30 (3.05) in
    one run); measured again with them in: nhwc -> nchw 256x1024x7x7 (the public list)
    1.48-1.84 (1.61-1.67) -> 1.10-1.27 (1.03-1.16), 128x512x7x7 2.07-2.14 (1.60-2.01) ->
    1.90-2.26 (1.45-1.70), 256x256x7x7 2.05 (2.15) -> 1.94 (2.39); ncw -> nwc 32x56x1000
    (4 KB rows) 2.32 (2.47) -> 1.48 (1.94), 128x56x1000 1.73 (1.46) -> 1.38 (1.20); u8
    ncdhw -> ndhwc 2048x100x3x13x64 1.56 (1.52) -> 1.33 (1.30).
    """
    if not PANEL_SUB_BYTES or not prefetched:
        return 0
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    dsz = ir.operands[0].dtype.size
    nbb = -(-b.extent // tile.V)
    if pb < nbb or a.strides[1] != b.extent:
        return 0
    sub = PANEL_SUB_BYTES // (tile.V * a.extent * dsz)
    return sub if 1 <= sub < pb else 0


#: Narrow-destination panels (``narrow_panel``): on/off (LAYOUTJIT_NARROW_PANEL=0 for A/B
#: runs), source rows per strip, the shortest source run a strip reads from each row, the
#: register tiles' rows from which a plan takes them, the source bytes a strip's tile
#: reads from each row, and the most bytes of a job's stage.
NARROW_PANEL = os.environ.get("LAYOUTJIT_NARROW_PANEL", "1") != "0"
NARROW_PANEL_ROWS = 16
NARROW_PANEL_MIN_RUN = 2048
NARROW_PANEL_MIN_TILE_ROWS = 64
NARROW_PANEL_READ_BYTES = 32
NARROW_PANEL_BYTES = 256 * 1024


def narrow_panel(ir: LoopIR, tile: TileSpec) -> tuple[TileSpec, int] | None:
    """Wide panels for NT transposes that narrow their elements into whole-line rows.

    A line of 1-byte destination elements gathers 64 source rows: f32 -> s8 nchw -> nhwc
    takes 64x8 register tiles, 64 source rows read side by side, which the hardware
    fetches at a third of a copy's rate (``python -m perf.patterns``). When the destination rows
    follow one another (dst stride of B == A's extent), the destination of a run of B
    columns is one contiguous block, a quarter of its source's size: each job stages up
    to ``NARROW_PANEL_BYTES`` of it (``Plan.panel_blocks`` blocks of V rows), fills it a
    strip of ``NARROW_PANEL_ROWS`` source rows at a time, each row read in a run of at
    least ``NARROW_PANEL_MIN_RUN`` bytes, and writes it out as whole lines (the wide
    panel of ``wide_panel``, whose rows are off the lines; these are on them).

    Measured on Zen 3 (32-byte vectors), ratio to copy at 1 thread (2 threads), 64-row
    tiles -> narrow panels, A/B in one process: f32 -> s8 64x256x56x56 2.52 -> 1.58 (1.85
    -> 1.15), 2.15 -> 1.05 (1.64 -> 1.07); 64x256x28x28 2.16 -> 1.25 (1.57 -> 1.16);
    32x64x112x112 (whole-block tiles) 2.07 -> 1.25 (1.78 -> 1.21); 32x64x56x56 1.57 ->
    1.27 (1.35 -> 1.17); f32 -> u8 128x128x28x28 1.86 -> 1.26 (1.42 -> 1.16). Left out:
    runs under 2 KB (C=512 28x28, 1.5 KB: 2.07 -> 1.95 (2.07 -> 1.57) in one run, 1.49 ->
    1.60 (1.21 -> 1.49) in the next; C=1024, 784 B, and 14x14 or 7x7 planes: within the
    noise), 1-byte sources (s8 -> s8 C=256: 1.16 -> 1.50, 16x32 tiles), stages of 128 or
    384 KB (1.05 -> 1.28-1.34 on 64x256x56x56), and a prefetch of the next image where a
    job stages a whole one (64x256x28x28 1.25 -> 1.58, 32x64x56x56 1.27 -> 1.92). A
    2-byte destination (32-row tiles: f32 -> bf16) did not gain in a probe (1.25 -> 1.34).
    Returns the strip's tile and the blocks of V per job, or None.
    """
    if not (NARROW_PANEL and NARROW_PANEL_BYTES) or tile.kind != "transpose" or tile.b is None:
        return None
    if tile.c is not None or tile.a2 is not None or len(ir.operands) != 2:
        return None
    if tile.R * tile.M < NARROW_PANEL_MIN_TILE_ROWS or not _rows_form_panels(ir, tile):
        return None
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    if ssz < 2 * dsz:
        return None
    V = min(b.extent, max(tile.V, NARROW_PANEL_READ_BYTES // ssz))
    strip = replace(tile, R=min(a.extent, NARROW_PANEL_ROWS), V=V, M=1, skew=0, rows_contiguous=False)
    cap = NARROW_PANEL_BYTES // (strip.V * a.extent * dsz)
    nbb = -(-b.extent // strip.V)
    if cap < 1:
        return None
    panels = -(-nbb // cap)
    pb = -(-nbb // panels)
    if min(pb * strip.V, b.extent) * ssz < NARROW_PANEL_MIN_RUN:
        return None
    return strip, pb


def panel_prefetch(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a panel transpose prefetches the next outer block's source, to L2.

    A panel job reads one line of each of the A source rows; when those rows follow one
    another the A rows are one contiguous block (one image of nhwc -> nchw), read by the
    B-block jobs as A interleaved streams, which the hardware fetches slowly (a read-only
    probe of that order, 7x7 C=256: 13 GB/s against 28 for a sequential read). Each job
    then prefetches its share of the next outer index's block, in order, one block ahead
    (to L2: ``Plan.prefetch_l2``). Measured nhwc -> nchw at 1 thread (2 threads), ratio to
    copy, without -> with, to all levels / to L2: 256x1024x7x7 1.34 -> 1.32 / 0.99 (1.09
    -> 0.98 / 0.91), 1024x256x7x7 1.93 -> 1.74 / 1.48 (2.12 -> 2.02 / 1.46), 4096x64x7x7
    2.10 -> 1.79 / 1.51 (2.48 -> 2.13 / 1.64), f32 -> bf16 256x1024x7x7 1.56 -> 1.41 /
    1.31 (1.22 -> 1.12 / 1.06), bf16 1.57 -> 1.35 / 1.46 (2.12 -> 1.88 / 1.88). Rows of
    one tile step are read in order already (nChw16c -> nchw 256x512x7x7: 1.14 without,
    1.31 with; 14x14 equal): left out, and so are rows of one line read in two steps of
    half a line (32-byte vectors, Zen 3: nChw16c -> nchw 64x512x14x14 0.96 without, 1.21
    with; 7x7 equal).
    """
    assert tile.b is not None
    b = ir.nodes[tile.b]
    line = max(1, 64 // ir.operands[1].dtype.size)
    return bool(outer_nodes(ir, tile)) and _rows_follow(ir.nodes[tile.a], b) and b.extent > max(tile.V, line)


#: A shifted transpose that prefetches (shift_prefetch) beats the panel plan from this many
#: row groups per destination row on.
SHIFT_OVER_PANEL_GROUPS = 8


def _shift_better(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose that could stage panels should realign its rows instead:
    when it can, and either its panel jobs would read more than ``PANEL_MAX_ROWS`` long
    source rows side by side or the realignment prefetches (:func:`_prefetched_shift_better`).

    A panel job reads a piece of each of the A source rows side by side. When the rows
    are long (``PREFETCH_MAX_ROW`` or more: no block to prefetch), more than about 128 of
    them are read far below copy speed, and the realigning plan, which reads row groups,
    wins. Measured on Zen 3 (AVX2: 8-float panels, so more shapes fit a panel's 32 KB),
    ratio to copy at 1 thread (2 threads), panel -> shifted: abc -> acb 32x131x3001 2.02
    -> 1.11 (2.14 -> 1.38), 4x1000x4001 2.07 -> 0.95 (1.95 -> 1.02); nhwc -> nchw C=1024
    14x14 (196 rows of 4 KB) about equal; 10x10 1.53 -> 3.94 and 7x7 1.56 -> 2.26 keep
    their panels, and so do short rows (bf16 C=256 14x14, 196 rows of 512 B: 1.13 ->
    1.75, 0.96 -> 1.71).
    """
    assert tile.b is not None
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    long_rows = b.extent * ir.operands[1].dtype.size >= PREFETCH_MAX_ROW
    if a.extent > PANEL_MAX_ROWS and long_rows and _shift_possible(ir, tile):
        return True
    if _few_wide_rows(ir, tile) and _shift_possible(ir, tile):
        return True
    return _prefetched_shift_better(ir, tile)


#: Destination rows of at least this many bytes realign rather than stage whole panels
#: once the traffic reaches the LLC size (``_long_rows_shift``; 0: never); rows
#: of a conversion that narrows its elements from ``SHIFT_LONG_ROW_NARROW_BYTES``.
SHIFT_LONG_ROW_BYTES = int(os.environ.get("LAYOUTJIT_SHIFT_LONG_ROW_BYTES", 1280))
SHIFT_LONG_ROW_NARROW_BYTES = 1792
SHIFT_LONG_ROW_MIN_SRC_BYTES = 16  # ... from source rows of this many bytes


def _long_rows_shift(ir: LoopIR, tile: TileSpec, traffic: int) -> bool:
    """Whether a panel transpose into destination rows of ``SHIFT_LONG_ROW_BYTES`` or more
    (blocked -> plain with planes of 18x18 f32 and up) should realign its rows instead,
    out of cache (traffic of the LLC size or more; the band of 24-25 MB below measured
    both ways: f32 `nChw8c` 16x200x31x31 1.29 (1.49) -> 1.59 (1.33)).

    A panel of V such rows is a stage of 16 KB and more (V=8, 729 f32: 23 KB) beside the
    source stream in a 32 KB L1; a probe of its two phases out of cache put the loss on
    the tiles that fill it (2.4-2.6 ms for 39 MB read, against 1.2-1.5 with stages of 3-13
    KB). Realigned rows stage one tile at a time. A/B on the AVX-512 host (Zen 4), ratio
    to copy at 1 thread (2 threads), panel -> realigned: f32 `nChw8c -> nchw` 128x100x27x27
    1.49 (1.25) -> 0.88 (0.83), 256x64x27x27 1.54 (1.12) -> 0.91 (0.83), 64x200x31x31
    1.51 (1.32) -> 0.95 (0.83); `nCw8c -> ncw` 256x64x777 1.67 (1.19) -> 0.98 (0.79); bf16
    `nChw16c -> nchw` 256x128x27x27 1.72 (1.30) -> 1.29 (1.05); u8 45x45 1.72 (1.31) ->
    1.35 (0.98); s8 39x39 1.74 (1.23) -> 1.66 (1.15); bf16 -> f32 `nChw8c` 64x128x27x27
    1.88 (2.97) -> 1.24 (1.94); `OIhw4i4o -> ohwi` bf16 32768x2000x1x1 1.06 (0.90) -> 0.63
    (0.69). Shorter rows keep their panels (784 B, f32 `nChw16c -> nchw` 256x512x14x14:
    0.90 -> 1.16 at 1 thread; 1020 B, bf16 -> f32 `nCw16c` 1172x17x255: 1.67 -> 2.12), and
    so do f32 -> bf16 rows under 1792 B (27x27, 1458 B: `nChw16c` 128x128x27x27 1.43
    (1.66) -> 1.68 (2.03), `nChw8c` 1.25 (0.95) -> 1.43 (0.91)), which gain from 31x31
    (1922 B, `nChw8c` 64x256x31x31 1.48 (1.64) -> 0.97 (1.19)). Source rows of 16 B and
    more: bf16 `nhwc -> nchw` 2048x8x35x35 gains (1.64 -> 1.24 at 1 thread), C = 4 (rows
    of 8 B) loses (4096x4x35x35 1.03 -> 1.32).
    """
    if not SHIFT_LONG_ROW_BYTES or traffic < llc_bytes():
        return False
    assert tile.b is not None
    dsz, ssz = ir.operands[0].dtype.size, ir.operands[1].dtype.size
    if ir.nodes[tile.b].extent * ssz < SHIFT_LONG_ROW_MIN_SRC_BYTES:
        return False
    row = ir.nodes[tile.a].extent * dsz
    return row >= (SHIFT_LONG_ROW_NARROW_BYTES if dsz < ssz else SHIFT_LONG_ROW_BYTES) and _shift_possible(ir, tile)


def _few_wide_rows(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose reads source rows of at most ``SHIFT_FEW_ROWS_BYTES`` of 4-byte
    elements, the same type on both sides (f32 `nhwc -> nchw` with C of 2 to 4): its
    panels of C planes lose to realigned rows (``_shift_better``).

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), panel -> realigned: f32
    `nhwc -> nchw` 4096x4x35x35 1.45-1.55 (1.09-1.61) -> 0.76-0.84 (0.72-0.87), oneDNN 1.37
    (1.41), which it had been even with; 8192x4x17x17 1.22 (0.97) -> 0.97 (0.91); C = 3
    1.25 (0.95) -> 0.89 (0.85); C = 2 0.94 (1.03) -> 0.82 (0.89); 1024x4x112x112 0.66
    (0.71) -> 0.61 (0.69). Equal from C = 8 (0.83 -> 0.86, 0.72 -> 0.71); bf16 C = 4 lost
    (0.99 (1.02) -> 1.30 (1.40)) and keeps its panels. Only for destination rows of
    ``SHIFT_FEW_ROWS_MIN_ROW_BYTES`` or more: `nChw4c -> nchw` (the same nest) with short
    planes lost (4096x96x7x28, 784 B rows, 1.15 (0.83) -> 1.46 (1.08); 32x512x3x56 1.15 ->
    1.41) and was even from 1 KB (4096x64x1x299 1.02 (0.91) -> 1.00 (0.87), 1024x60x7x56
    0.79 (0.72) -> 0.82 (0.74), 32x192x5x55 1.08 (1.20) -> 1.10 (1.25))."""
    if not SHIFT_FEW_ROWS_BYTES or tile.b is None:
        return False
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    return (ssz == dsz == 4 and b.strides[1] == 1 and b.extent * ssz <= SHIFT_FEW_ROWS_BYTES
            and a.extent * dsz >= SHIFT_FEW_ROWS_MIN_ROW_BYTES)


#: Source rows of at most this many bytes realign rather than take panels (``_few_wide_rows``;
#: ``LAYOUTJIT_SHIFT_FEW_ROWS_BYTES=0``: never).
SHIFT_FEW_ROWS_BYTES = int(os.environ.get("LAYOUTJIT_SHIFT_FEW_ROWS_BYTES", 16))
SHIFT_FEW_ROWS_MIN_ROW_BYTES = 1024


def _prefetched_shift_better(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a transpose that could stage panels should realign its rows instead.

    A panel job reads one line of every source row of the image; a shifted one reads
    a block of whole rows, which it can prefetch (:func:`shift_prefetch`), and with
    enough row groups per destination row that reads like a copy. Measured nhwc ->
    nchw at 1 thread (2 threads), ratio to copy, panel -> shifted with prefetch: 14x14
    f32 C=64 2.00 -> 1.22 (1.44 -> 1.30), C=160 1.53 -> 1.19, C=256 1.81 -> 1.44 (1.41
    -> 1.29), C=512 1.63 -> 1.57; bf16 28x28 C=256 1.97 -> 1.45 (1.52 -> 1.22); 35x35
    C=192 equal. With few groups the panel stays: 7x7 (4 groups) C=256 2.03 -> 2.45,
    C=1024 1.12 -> 2.36 (rows of 4 KB: no prefetch); bf16 14x14 (7 groups of 32) 2.00
    -> 1.77 but 1.66 -> 2.00 at 2 threads.
    """
    if not (PREFETCH_ROWS and _shift_possible(ir, tile) and shift_prefetch(ir, tile)):
        return False
    return -(-ir.nodes[tile.a].extent // shift_rows(ir, tile)) >= SHIFT_OVER_PANEL_GROUPS


def _prefetch_runs(ir: LoopIR, tile: TileSpec) -> bool:
    """The same for runs packed into lines (kind "lines"): rows of B x L that follow one
    another, swept a column (one run per row) at a time, several runs per call.

    Each call prefetches its share (its R runs) of the next group's block. Measured at 1
    thread (2 threads), 32x256x56x56, ratio to copy, without -> with: nhwc -> nChw8c f32
    1.19 -> 0.67 (0.97 -> 0.74), bf16 1.41 -> 0.66 (1.08 -> 0.74); nhwc -> nChw16c f32 ->
    bf16 1.28 -> 0.97 (1.27 -> 0.93), f32 -> s8 1.60 -> 0.94 (1.23 -> 0.92). Runs of a
    whole line are one per call and read the rows in order (nhwc -> nChw16c f32: 0.63
    without, 0.80 with), so do rows of one line (nChw16c -> nChw8c: 0.58 -> 0.66), and
    blocks above ``PREFETCH_MAX_BLOCK`` are too far ahead (nChw16c -> nhwc, a whole image
    per group: 0.77 -> 0.92): all left out -- but for narrowing float conversions, whose
    reads are most of their traffic (as ``Plan.stream_prefetch``), rows of one line whose
    groups follow one another: ratio to copy at 1 thread (2 threads), without -> with,
    f32 -> s8 `nCdhw16c -> nCdhw8c` 64x30x14x128x17 1.60 (1.33) -> 1.10 (0.95) (it was
    slower than oneDNN), 16x256x8x28x28 2.06 (1.56) -> 1.01 (0.85), f32 -> u8 `nChw16c ->
    nChw8c` 64x100x56x56 1.39 (1.33) -> 1.03 (0.89), f32 -> bf16 64x64x56x56 1.09 (1.03) ->
    0.82 (0.80), `NChw16n16c -> OIhw4i16o4i` 17x768x2x1024 1.40 (1.19) -> 0.78 (0.85).
    Groups that are half of each source block (`gOIhw16i16o -> gOIhw8i8o`, the other half
    a pass later) lost, 1.55 -> 1.92 at 1 thread, and stay without.
    """
    if tile.kind != "lines" or tile.l is None or tile.b is None or tile.R < 2 or len(ir.operands) != 2:
        return False
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    ssz = ir.operands[1].dtype.size
    row = b.extent * run.extent * ssz
    if not ((_rows_follow(a, b, run.extent) or _padded_rows_follow(ir, a, b, run))
            and tile.M * tile.R * row <= PREFETCH_MAX_BLOCK):
        return False
    if 64 < row:
        return True
    # rows of one line, the calls reading all of it (not where B's last steps are past the
    # destination's padding: f32 -> u8 `nCdhw16c -> nCdhw8c` C=3 reads 32 B of each 64-byte
    # pixel; its prefetches, half the next group's lines, took it from 1.30 to 1.93x copy)
    return (row == 64 and _written_steps(ir, b) == b.extent and _narrowing_float(ir)
            and _groups_follow(ir, tile))


#: One-line ``a2`` tiles prefetch their rows' continuation (``row_continuation``).
ROW_PREFETCH = os.environ.get("LAYOUTJIT_ROW_PREFETCH", "1") != "0"


def row_continuation(ir: LoopIR, tile: TileSpec) -> int:
    """Source elements from where a one-line ``a2`` tile reads each of its rows to where an
    outer loop's next step continues that row; 0 where no outer loop does.

    f32 `oihw -> OIhw4i16o4i` 1024x256x8x8: a tile's 16 rows are 4 o (64 KB apart: one L1
    set) x 4 i, each i a run of 64 hw, the 4 i one run of 256 elements that the next step
    of the 4-i loop continues; o's loops between them keep 16 such rows in flight, which the
    hardware prefetchers follow slowly. Each tile call prefetches the line of every row it
    reads, that far ahead. Zen 3 (AVX2), one process, ratio to copy at 1 thread (2
    threads), without -> with: 1.62 (1.33) -> 1.21 (1.11); a first probe: 1.46 (1.40) ->
    1.15 (1.06), 4 KB ahead (the next i-block) 1.27 (1.10), to L2 only 1.22 (1.10). To L2
    only since the forty-first session (``ROW_PREFETCH_L2``).
    """
    if (tile.kind != "transpose" or tile.a2 is None or tile.b is None or len(ir.operands) != 2
            or tile_rows(ir, tile) > tile.R):
        return 0
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    if b.strides[1] != 1 or a.strides[1] is None:
        return 0
    run = a.extent * b.extent if a.strides[1] == b.extent else b.extent
    ahead = tile.R * b.extent * ir.operands[1].dtype.size  # source bytes one macro tile reads
    inner = True
    for i in reversed(outer_nodes(ir, tile)):
        n = ir.nodes[i]
        if n.strides[1] == run:
            return run if not inner and ahead <= ROW_PREFETCH_MAX_AHEAD else 0
        ahead *= n.extent
        inner = False
    return 0


#: ``near_row_continuation`` goes at least this many bytes ahead (steps of short runs: 3x3
#: weights, 144 B of f32 a step). f32 -> s8 `oihw -> OIhw4i16o4i`, ratio to copy at 1 thread
#: (2 threads), 2, 4, 8, 16 steps ahead: 2048x1024x3x3 1.07 / 1.01 / 0.99 / 0.92 (1.12 / 1.10
#: / 0.98 / 1.01); 1024x1024x3x3 (2, 8, 16, 32) 0.97 / 0.86 / 0.96 / 1.01; 7x7 (784 B a step)
#: 2 / 4 / 8: 1.07 / 1.12 / 1.14, f32 -> bf16 `oihw -> OIhw16i16o` 7x7 (392 B) 0.97 / 0.98 /
#: 1.02 (Zen 4).
#: Of 14 sampled other pairs it changes, tiles of up to 16 rows gained at every step size
#: (f32 `IhwO48i4o -> gIwO8i2o` 4x17x768x200, 32 B a step, 0.83 (0.61) -> 0.62 (0.51); s8 ->
#: f32 `ghwIo2i -> IdhwO48i2o` 16x28x7x32x250, 16 B, 1.36 (0.93) -> 0.99 (0.64); `Oiw16o ->
#: aCB24c8b` 1536x112x112 0.87 -> 0.76), and 64-row tiles of steps under 128 B lost (f32 -> s8
#: `IhwO16o16i4o -> gIOw16o16i` 96x24x110x64 2.17 (2.24) -> 2.58 (2.67), `IdhwO32i2o ->
#: gIhwO16i4o` 32x64x768x1x27 3.22 (2.44) -> 3.42 (2.76)): those keep two steps, and so do
#: 32-row tiles of such steps.
ROW_PREFETCH_NEAR_MIN_BYTES = int(os.environ.get("LAYOUTJIT_ROW_PREFETCH_NEAR_MIN_BYTES", 1536))
ROW_PREFETCH_NEAR_MIN_STEP = 128  # ... for steps of this many bytes or more
#: ... or tiles of at most this many rows (32-row tiles of 64-B steps lost: f32 -> bf16
#: `OIhw16o16i2o -> gOwI8o4i` 56x56x192x32 1.40 (1.55) at two steps, 1.79 (1.86) at 1.5 KB)
ROW_PREFETCH_NEAR_FEW_ROWS = 16
#: ``near_row_continuation`` also where the tile's second row digit (``a2``) continues the
#: rows' runs (`oihw -> OIhw16i16o` f32 -> bf16: 2 i x 49 elements of each o row a step).
#: A/B on Zen 4, ratio to copy at 1 thread (2 threads), without -> with: that pair
#: 256x1024x7x7 1.13 (1.00) -> 1.03 (0.99); bf16 `iohw -> OIhw4i16o4i` 1024x896x7x7 1.68
#: (1.61) -> 1.24 (1.17); f32 -> bf16 `OIhw16o16i2o -> gOwI8o4i` 56x56x192x32 1.76 -> 1.54;
#: f32 -> u8 `gOdhwI24o2i -> dhwioG8g` 8x256x2x1x32x224 2.43 (2.51) -> 2.08 (1.95); bf16
#: `goihw -> gOIhw16i16o` 16x1024x64x7x5 2.22 -> 1.92; of 16 sampled of the 158 listed and
#: generated pairs it changes, two lost at 2 threads (`adbc -> IOhw2i8o16i4o` f32 -> bf16
#: 36x8x384x128 1.59 -> 1.75, `OdhwI8i8o -> gOIhw2i8o4i` 2x18x32x128x18 1.95 -> 2.13, which
#: gained at 1 thread: 1.74 -> 1.52).
ROW_PREFETCH_NEAR_A2 = os.environ.get("LAYOUTJIT_ROW_PREFETCH_NEAR_A2", "1") != "0"


def near_row_continuation(ir: LoopIR, tile: TileSpec) -> int:
    """Source elements ahead at which an ``a2`` tile prefetches each of its rows, to L2,
    where the loop that continues the rows is the innermost outer loop (which
    ``row_continuation`` leaves out): ``ROW_PREFETCH_NEAR_RUNS`` of its steps ahead, when
    that is at most ``ROW_PREFETCH_NEAR_MAX_BYTES``; 0 otherwise.

    f32 -> s8 `oihw -> OIhw4i16o4i` 1024x512x7x7: the 64 rows of a tile are 16 o (100 KB
    apart) x 4 i, and each step of the 4-i loop reads the next 784 B of the 16 o rows. A
    read-only probe of that order ran at 14.6 GB/s against 22-26 for 1 to 8 streams, and
    the kernel at the probe's time; padding the o rows off their 2 KB offsets changed
    nothing, and neither did writing the destination in order. Prefetching each row two
    steps ahead to all levels lost (1.45 -> 2.43), to L2 gained. A/B on the AVX-512 host
    (Zen 4), ratio to copy at 1 thread (2 threads), without -> with: 1024x512x7x7 1.57
    (1.20-1.27) -> 1.10-1.21 (1.00-1.01), 2048x1024x3x3 1.42 (1.36) -> 1.27 (1.26); u8
    262144x64x3x3 2.76 (1.73) -> 1.73 (1.12); f32 -> u8 `goihw -> gOIhw4i16o4i`
    192x256x17x3x16 1.81 (1.30) -> 1.40 (1.11); f32 -> u8 `gOIhw4i16o4i -> Goihw16g`
    56x8x28x7x384 2.13 (1.58) -> 1.60 (1.24); f32 -> s8 `hwigo -> Goihw16g` 64x136x17x1x256
    (17 KB ahead) 2.23 (1.67) -> 1.59 (1.39); bf16 `OIdhw8i32o -> gIhwO8i4o` 1x32x250x48x48
    1.48 (1.64) -> 1.23 (1.49); 13 pairs of this kind, none lost. Rows that a loop further
    out continues measured both ways and are left out: gains (bf16 `hwigo -> Goihw16g`
    28x2x112x512x28 2.78 (2.97) -> 2.03 (2.11), `nchw -> NChw16n16c` 14x4096x28x28 1.93 ->
    1.68 at 1 thread), losses (f32 -> s8 `nchw -> NChw16n16c` 12x62x224x224, a plane of 200
    KB a step, 1.03 (0.97) -> 1.15 (1.17); s8 16x224x224x224 2.37 -> 2.60 at 2 threads;
    `OIhw4i16o4i -> Oihw8o` 55x16x48x440 1.05 -> 1.21 at 2 threads).
    """
    if (not ROW_PREFETCH_NEAR_RUNS or tile.kind != "transpose" or tile.a2 is None or tile.b is None
            or len(ir.operands) != 2):
        return 0
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    if b.strides[1] != 1 or a.strides[1] is None:
        return 0
    run = a.extent * b.extent if a.strides[1] == b.extent else b.extent
    a2 = ir.nodes[tile.a2]
    if ROW_PREFETCH_NEAR_A2 and run == b.extent and a2.strides[1] == b.extent:
        run *= a2.extent  # (the rows' second digit continues them: 2 i x 49 of an o row)
    step = run * ir.operands[1].dtype.size
    far = step >= ROW_PREFETCH_NEAR_MIN_STEP or tile_rows(ir, tile) <= ROW_PREFETCH_NEAR_FEW_ROWS
    ahead = max(ROW_PREFETCH_NEAR_RUNS, -(-ROW_PREFETCH_NEAR_MIN_BYTES // step) if far else 0) * run
    if ahead * ir.operands[1].dtype.size > ROW_PREFETCH_NEAR_MAX_BYTES:
        return 0
    outer = outer_nodes(ir, tile)
    return ahead if outer and ir.nodes[outer[-1]].strides[1] == run else 0


#: ``row_continuation`` prefetches go to L2 only (``Plan.row_prefetch_l2``). They went to
#: every level, measured on Zen 3 (AVX2) about even with L2 only (f32 `oihw ->
#: OIhw4i16o4i` 1024x256x8x8 1.21 against 1.22); on the AVX-512 host (Zen 4), A/B over 24
#: listed and generated pairs that take them, ratio to copy at 1 thread (2 threads), all
#: levels -> L2: geomean 1.37 (1.19) -> 1.20 (1.07), 11 (10) gained more than 10%, 2 (3)
#: lost as much: s8 `hwioG16g -> gIhwO16o64i4o` 10x192x56x5x256 1.86 (1.58) -> 0.88
#: (0.73), `NChw16n16c -> chwn` 2048x512x7x7 1.36 (1.40) -> 0.98 (1.03), f32 -> bf16
#: `goihw -> gOIhw16o16i` 16x64x256x5x5 2.09 (1.41) -> 1.48 (1.21), `iohw -> OIhw16i16o`
#: 4096x256x1x7 1.38 (1.45) -> 0.96 (1.22), f32 `oihw -> OIhw4i16o4i` 192x1024x7x7 1.24
#: (0.92) -> 0.92 (0.66), 1024x256x8x8 1.13 (1.00) -> 0.90 (0.79); lost: `Oihw4o ->
#: gIwO64i4o` 6x8x6144x96 1.09 -> 1.26 at 1 thread, bf16 -> f32 `gOIw4o8i8o2i -> OIhw8o8i`
#: 3x256x112x288 0.82 (0.69) -> 0.91 (0.79). ``LAYOUTJIT_ROW_PREFETCH_L2=0``: all levels.
ROW_PREFETCH_L2 = os.environ.get("LAYOUTJIT_ROW_PREFETCH_L2", "1") != "0"
#: ``near_row_continuation``: steps ahead (0: off), and the most bytes ahead.
ROW_PREFETCH_NEAR_RUNS = int(os.environ.get("LAYOUTJIT_ROW_PREFETCH_NEAR_RUNS", 2))
ROW_PREFETCH_NEAR_MAX_BYTES = 32 * 1024


#: ``row_continuation`` only where the tiles read at most this many source bytes before the
#: continuing loop's next step uses what they prefetched. Measured A/B (ratio to copy at 1
#: thread, without -> with), near: `NChw16n16c -> bcda` f32 -> bf16 1024x56x48x7 (64 KB)
#: 2.99 -> 2.10, bf16 -> f32 `aBCde16b16c -> aBcde8b` 112x24x7x12x48 (147 KB) 2.07 -> 1.06;
#: far: `hwio -> nChw8c` 8x100x128x100 (6.5 MB) 1.24 -> 1.66, f32 -> s8 `gOIhw4i16o4i ->
#: ndhwc` 192x64x1x128x1 (100 MB) 0.49 -> 0.83, f32 -> s8 `nchw -> NChw16n16c`
#: 256x256x256x7 (rows of 7 KB, 458 KB) 3.04 -> 3.97. Nor where the continuing loop is the
#: innermost (the next tile reads the lines; the prefetches are only overhead: f32 -> s8
#: `oihw -> OIhw4i16o4i` 4096x1000x3x3, 64 rows of 36 B, 0.66-1.18 -> 0.90-1.61 in 3 runs).
ROW_PREFETCH_MAX_AHEAD = 256 * 1024


def _dense_size(parts: Iterable[tuple[int, int]]) -> int:
    """Elements of the block that loops of these (stride, extent) fill exactly, each stride
    the product of the smaller loops' extents; 0 when they leave gaps or overlap."""
    size = 1
    for stride, extent in sorted(parts):
        if stride != size:
            return 0
        size *= extent
    return size


def period_next(ir: LoopIR, tile: TileSpec) -> int:
    """Source elements from one period's block to the next one's, for an ``a2`` transpose
    whose period (``tile_rows`` rows of B) reads one contiguous block that the next step of
    the innermost outer loop follows; 0 otherwise.

    `OIhw16i16o -> oihw` f32: a period is a 16 i x hw x 16 o block of the source (49 KB
    for 7x7), contiguous, and the next i-block follows it."""
    if tile.kind != "transpose" or tile.a2 is None or tile.b is None:
        return 0
    size = _dense_size((ir.nodes[i].strides[1] or 0, ir.nodes[i].extent)
                       for i in (tile.a3, tile.a2, tile.a, tile.b) if i is not None)
    outer = outer_nodes(ir, tile)
    return size if size and outer and ir.nodes[outer[-1]].strides[1] == size else 0


def _prefetch_periods(ir: LoopIR, tile: TileSpec) -> bool:
    """The same for ``a2`` transposes that loop over the lines of a period (rows in a table):
    every line reads 64 bytes from each of its rows, rows a step of A apart (1 KB for f32
    `OIhw16i16o -> oihw`), so a period sweeps its contiguous source block once per step of
    A2lo, a line of every row at a time -- a pattern the hardware prefetchers fetch slowly.
    Each line's call prefetches its share of the next period's block, in order, to L2
    (``Plan.prefetch_l2``). Measured on Zen 3 (AVX2), one process, ratio to copy at 1 thread
    (2 threads), without -> with: `OIhw16i16o -> oihw` 1024x512x7x7 1.41 (0.97) -> 0.96
    (0.69), 1024x1024x3x3 1.67 (1.60) -> 1.13 (1.09), 512x512x11x11 (line rows since
    ``LINE_ROWS_MAX_ROWS``) 1.21 (1.03) -> 0.97 (0.91); `gOIhw16i16o -> goihw`
    32x128x128x5x5 1.72 (1.32) -> 0.98 (0.87). To all levels: 1.26 (1.03), 0.96 (0.76),
    1.08 (1.23), 1.01 (0.81).
    """
    if tile.a2 is None or tile_rows(ir, tile) <= tile.R or not period_next(ir, tile):
        return False
    assert tile.b is not None
    block = tile_rows(ir, tile) * ir.nodes[tile.b].extent * ir.operands[1].dtype.size
    return block <= PREFETCH_PERIOD_MAX_BLOCK


#: Largest period block that ``_prefetch_periods`` fetches ahead (this one and the next fill
#: a 512 KB L2). `OIhw16i16o -> oihw` 256x512x13x13 f32 (173 KB), ratio to copy at 1 thread
#: (2 threads), without -> with: 1.24 (1.06) -> 1.03 (0.94); f32 -> s8 512x512x7x7 (200 KB)
#: 2.20 (1.82) -> 1.92 (1.69); 320 KB measured the same on both.
PREFETCH_PERIOD_MAX_BLOCK = 256 * 1024


def _written_steps(ir: LoopIR, n: Node) -> int:
    """Steps of node n that the destination holds (its padding included): fewer than its
    extent where n is the heaviest digit of a dim whose source padding reaches past the
    destination's (`nCdhw16c -> nCdhw8c` C=3: 8 of the 16 channels of a block)."""
    if n.dim is None or not ir.dims[n.dim].guarded:
        return n.extent
    r = ir.dims[n.dim]
    if n.weight * n.extent < r.extent:
        return n.extent  # not the heaviest digit: each state of the heavier ones decides
    return max(0, min(n.extent, -(-r.write // n.weight)))


def _narrowing_float(ir: LoopIR) -> bool:
    """Whether the source elements are wider than the destination's, not both integers (f32
    -> bf16/s8/u8): the reads are most of the traffic (``Plan.stream_prefetch``)."""
    s, d = ir.operands[1].dtype, ir.operands[0].dtype
    return s.size > d.size and not (s.is_int and d.is_int)


def _groups_follow(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a lines plan's next group of rows follows the current one in the source: the
    groups are steps along A, or A is one group and the node outside it continues A."""
    a = ir.nodes[tile.a]
    if a.extent > tile.M * tile.R:
        return True
    sa = a.strides[1]
    return tile.a > 0 and sa is not None and ir.nodes[tile.a - 1].strides[1] == a.extent * sa


def _padded_rows_follow(ir: LoopIR, a: Node, b: Node, run: Node) -> bool:
    """Whether rows of B x run that are one padded dim whole (its blocks and the runs in
    them) follow one another in the source at the dim's unpadded length: `nhwc` pixels of
    C=36 read as 3 runs of 16 (48 with the zeros the destination adds).

    Their calls prefetch shares of B x run elements from the next group's start, past the
    block's end by the padding (a hint, never a fault). A/B on Zen 3 (AVX2), ratio to
    copy at 1 thread (2 threads), without -> with, `nhwc -> nChw16c`: f32 -> s8
    32x36x112x112 2.75 (1.98) -> 0.95 (0.76) (oneDNN 2.53 (2.00); C=48, no padding, had it
    already: 0.71 (0.76)), 64x100x56x56 1.97 (1.67) -> 0.89 (0.69); f32 -> bf16
    32x36x112x112 1.19 (0.98) -> 0.90 (0.74), 32x20x112x112 1.05 (0.86) -> 0.85 (0.67);
    f32 `nhwc -> nChw8c` 32x20x112x112 equal (0.81-0.84).
    """
    if b.dim is None or b.dim != run.dim or run.weight != 1 or b.weight != run.extent:
        return False
    r = ir.dims[b.dim]
    return (b.extent * run.extent == r.extent and r.guarded and b.strides[1] == run.extent
            and a.strides[1] == (r.src_extent or r.valid))


def _with_prefetch_groups(ir: LoopIR, tile: TileSpec, vbytes: int) -> TileSpec:
    """Groups of at most ``PREFETCH_MAX_BLOCK`` bytes, and of ``PREFETCH_GROUP_ROWS`` rows
    for tiles of 4-byte elements.

    Measured (f32, 1 thread, ratio to copy, 16/32/64/128/256 rows): nchw -> nhwc 8x8:
    0.72/0.60/0.69/1.19/1.02, 14x14: 1.03/0.98/0.81/0.88/0.91; nhwc -> nchw C=64: 0.95/
    0.87/0.80/1.36/1.22. 16- and 8-bit tiles keep their longer steps (bf16 nchw -> nhwc
    14x14, 64/128/256 rows: 1.58/1.51/1.35; s8 nhwc -> nchw 64/512 rows: 1.40/1.35).

    4-byte tiles that read part of each source line (32-byte vectors: 16x8 f32) take
    ``PREFETCH_GROUP_ROWS`` rows even where ``READ_STREAMS`` gave them fewer. Measured on
    Zen 3 (AVX2), 32 -> 64 rows, ratio to copy at 1 thread (2 threads): nchw -> nhwc 7x7
    C=512 1.72 -> 1.37 (1.32 -> 1.14), C=2048 1.84 -> 1.53 (1.38 -> 1.15), 8x8 0.82 ->
    0.75 (0.83 -> 0.76); nhwc -> nchw C=64 0.70 -> 0.75 (0.75 -> 0.72), C=32 0.68 -> 0.73
    (0.70 -> 0.71).

    With 32-byte vectors, groups whose tiles write one line of each destination row (16-
    and 8-bit: 32x8 bf16, 64x8 s8 tiles) take ``PREFETCH_DST_LINES`` tiles, where the
    group's block stays within ``PREFETCH_DST_LINES_MAX_BLOCK``. Zen 3, 1 tile -> 2, ratio
    to copy at 1 thread (2 threads), A/B in one process: s8 nhwc -> nchw 64x256x56x56
    0.94-1.12 -> 0.81-1.01 (0.76-1.13 -> 0.65-0.98) in five runs, 64x64x112x112 0.87 ->
    0.62 (0.79 -> 0.69), 8x256x56x56 1.00 -> 0.84; bf16 32x256x56x56 0.88-0.90 -> 0.79-0.83
    (0.75-0.77 -> 0.73-0.78), 32x64x112x112 1.03-1.06 -> 0.79-0.88 (1.04 -> 0.89-0.96),
    ndhwc -> ncdhw 8x128x28x28x28 0.95 -> 0.80 (0.76 -> 0.70). Larger blocks did not gain:
    s8 nwc -> ncw C=1024 (128 KB) 1.02-1.17 -> 1.20-1.35, C=512 28x28 (64 KB) 1.41 both,
    bf16 C=512 56x56 (64 KB) 0.74 -> 0.76 (0.65 -> 0.72).
    """
    assert tile.b is not None
    ssz, dsz = ir.operands[1].dtype.size, ir.operands[0].dtype.size
    M = tile.M
    row = ir.nodes[tile.b].extent * ssz  # bytes of one source row
    if PREFETCH_DST_LINES and vbytes < 64:  # that many lines of each destination row per visit
        Ml = min(-(-ir.nodes[tile.a].extent // tile.R), -(-PREFETCH_DST_LINES * 64 // (tile.R * dsz)))
        if Ml * tile.R * row <= PREFETCH_DST_LINES_MAX_BLOCK:
            M = max(M, Ml)
    if ssz >= 4 and tile.V * ssz < 64:
        M = max(M, min(-(-ir.nodes[tile.a].extent // tile.R), PREFETCH_GROUP_ROWS // tile.R))
    M = min(M, max(1, PREFETCH_MAX_BLOCK // (tile.R * row)))
    if ssz == dsz == 1 and vbytes >= 64 and row < PREFETCH_BYTE_GROUP_MAX_ROW:
        M = min(M, max(2, PREFETCH_BYTE_GROUP_BLOCK // (tile.R * row)))
    if ssz >= 4:
        M = min(M, max(1, PREFETCH_GROUP_ROWS // tile.R))
    return replace(tile, M=M)


#: Prefetched groups of 1-byte transposes (1 byte on both sides) with 64-byte vectors hold
#: at most this many bytes of source (``_with_prefetch_groups``; ``PREFETCH_MAX_BLOCK``
#: otherwise). s8 `nhwc -> nchw` 64x256x56x56: 64x16 tiles read 16 B of each of 512 rows
#: (128 KB groups) a step, 512 lines (all of L1) revisited at each of a line's four steps.
#: 32 KB groups (128 rows): A/B on Zen 4, ratio to copy at 1 thread (2 threads), 128 KB ->
#: 32 KB: that pair 1.11-1.25 (0.93-0.94) -> 0.98-0.99 (0.81-0.85); u8 `ndhwc -> ncdhw`
#: 16x128x28x28x28 1.33 (1.00) -> 1.01 (0.81); u8 `nhwc -> nchw` 128x128x56x56 1.09 (1.22)
#: -> 0.91 (0.97); s8 `ndhwc -> ncdhw` 224x128x128x5x5 1.38 (1.19) -> 1.06 (0.92); u8
#: `goihw -> hwigo` 4000x256x1x112x1 1.62 (1.01) -> 1.16 (0.77). bf16 32x256x56x56 lost (0.85
#: -> 1.05), s8 -> f32 even: 1-byte pairs only; and rows under ``PREFETCH_BYTE_GROUP_MAX_ROW``,
#: in groups of two tiles or more: one tile of rows of 448-896 B lost (u8 `ba -> ab`
#: 448x262144 1.15 (1.05) -> 1.26 (1.22), s8 `chwn -> nChw16c` 896x32768x1x1 1.34 (1.53) ->
#: 1.57 (1.74)) and two were even or worse at 1 thread (1.07 -> 1.11, s8 `ab -> ba` 262144x512
#: 1.08 -> 1.15).
PREFETCH_BYTE_GROUP_BLOCK = int(os.environ.get("LAYOUTJIT_PREFETCH_BYTE_GROUP_BLOCK", 32 * 1024))
PREFETCH_BYTE_GROUP_MAX_ROW = 448


COLS_STAGE = True
#: Largest destination region a cols transpose stages (cols_stage).
COLS_STAGE_BYTES = 16 * 1024
#: ... and cols transposes whose tiles store whole-line pieces into rows off the lines take
#: macro tiles of all of A to stage ranges up to this many bytes (0: off, for A/B runs).
COLS_STAGE_WHOLE_A = os.environ.get("LAYOUTJIT_COLS_STAGE_WHOLE_A", "1") != "0"
COLS_STAGE_WIDE_BYTES = 64 * 1024
#: ... which is also the stage's limit for tiles of one element size (0: COLS_STAGE_BYTES).
COLS_STAGE_SAME_WIDE = os.environ.get("LAYOUTJIT_COLS_STAGE_SAME_WIDE", "1") != "0"


def cols_stage(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether a cols transpose whose stores are pieces shorter than a line can stage its
    macro tile's destination region and write it out as whole non-temporal lines.

    oihw -> OIhw8i8o: a tile of 8 rows (o) stores 32-byte pieces, half a line each, so
    its stores are plain; but one macro tile (all of A) x the source run (B x C) covers
    one dense destination range (8i x hw x 8o = 576 elements, 36 lines). Its tiles
    then write into a small stage, which is copied out as whole lines. Needs: one row
    group covering A, no padding or extra operands, A x B x C dense in the destination,
    line-aligned (every outer stride and offset0 a whole number of lines), at most
    ``COLS_STAGE_BYTES``. Measured, ratio to copy at 1 thread (2 threads), pieces stored
    in place -> staged: oihw -> OIhw8i8o 2048x1024x3x3 1.29 -> 0.70 (1.37 -> 0.78),
    1024x1024x5x5 1.88 -> 0.80 (1.47 -> 0.76), f32 -> bf16 0.99 -> 0.73 (1.00 -> 0.77);
    goihw -> gOIhw8i8o 64x128x128x3x3 1.30 -> 0.89 (1.32 -> 0.84).

    Tiles whose pieces are whole lines but land in rows off the lines (``COLS_STAGE_WHOLE_A``:
    `gOIhw16i16o -> goihw` with 7x7 planes, 16 f32 of rows 196 B apart) kept plain stores
    into partial lines; one macro tile now takes all of A and stages the job's dense range,
    up to ``COLS_STAGE_WIDE_BYTES``. A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2
    threads), plain -> staged: s8 -> f32 64x512x8x7x7 (25 KB a job) 2.31 -> 1.32 (1.70 ->
    1.15; oneDNN 1.70 (1.31), which had been ahead), 64x512x16x7x7 (50 KB) 2.45 -> 1.48 (1.87
    -> 1.35; oneDNN 3.06 (2.41)). Tiles of one element size stage up to that size too
    (``COLS_STAGE_SAME_WIDE``): bf16 `goihw -> gOIhw16i16o` 16x1024x64x7x5 (18 KB a macro
    tile) 1.88 -> 1.14 (1.74 -> 1.20), 7x7 (25 KB) 1.61 -> 1.02 (1.35 -> 1.03); with f32 ->
    bf16 it went both ways (5x7 1.43 -> 0.90 (1.86 -> 1.99), 64x1024x64x7x7 1.57 -> 2.41),
    so conversions keep 16 KB.
    """
    if tile.kind != "transpose" or tile.c is None or tile.b is None or len(ir.operands) != 2:
        return False
    dst = ir.operands[0]
    dsz = dst.dtype.size
    q = max(1, 64 // dsz)
    a, b, c = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.c]
    rows_on_lines = all((n.strides[0] or 0) % q == 0 for n in (b, c))
    if ((tile.R * dsz) % 64 == 0 and (rows_on_lines or not COLS_STAGE_WHOLE_A)) or tile.R * tile.M < a.extent:
        return False
    if any(n.dim is not None and ir.dims[n.dim].guarded for n in (a, b, c)):
        return False
    span = 1
    for n in sorted((a, b, c), key=lambda n: n.strides[0] or 0):
        if n.strides[0] != span:
            return False
        span *= n.extent
    same = ir.operands[1].dtype.size == dsz
    cap = COLS_STAGE_WIDE_BYTES if (tile.R * dsz) % 64 == 0 or (same and COLS_STAGE_SAME_WIDE) else COLS_STAGE_BYTES
    if span % q or span * dsz > cap or dst.offset0 % q:
        return False
    return all((n.strides[0] or 0) % q == 0 for i, n in enumerate(ir.nodes) if i not in tile.nodes)


#: Jobs that check their destination offset at run time (Plan.job_align) also take kind
#: "lines" that follows its columns' lines (line_phases; 0 for A/B).
JOB_ALIGN_PHASES = os.environ.get("LAYOUTJIT_JOB_ALIGN_PHASES", "1") != "0"
#: ... for columns shorter than the rows: of at least this many destination bytes.
JOB_ALIGN_PHASES_MIN_BYTES = 2048


def _job_align_phases(ir: LoopIR, tile: TileSpec) -> bool:
    """Whether jobs that check their offset at run time may take phased "lines" calls
    (``JOB_ALIGN_PHASES``): where the columns are shorter than the rows (A longer than B),
    columns of at least ``JOB_ALIGN_PHASES_MIN_BYTES``.

    Pixels as columns (`nChw8c -> nhwc` f32 C = 56 with 299x13 planes: every other image
    half a line off): plain -> phases 0.81 -> 0.65 (0.96 -> 0.73; oneDNN 0.69 (0.90)).

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), plain -> phases in the jobs
    that start a line: bf16 `nChw16c -> nChw8c` 32x256x55x55 (columns of 48 KB) 0.97 ->
    0.86 (0.96 -> 0.91), f32 -> bf16 1.08 -> 0.82 (1.11 -> 0.88); with 7x7 planes (784 B)
    f32 -> bf16 1.34-1.37 -> 1.46 (1.10-1.12 -> 1.23), bf16 1.29 -> 1.19 (1.08 -> 1.06):
    short columns cut into calls of one to three runs lose what the NT stores save.
    """
    if not JOB_ALIGN_PHASES or tile.kind != "lines" or tile.l is None or tile.b is None:
        return False
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    if a.extent <= b.extent:  # columns at least as many as their runs (nChw8c -> nhwc): always
        return True
    return a.extent * run.extent * ir.operands[0].dtype.size >= JOB_ALIGN_PHASES_MIN_BYTES
#: Kind "lines" follows the lines of columns shorter than the rows too (line_phases; 0 for A/B).
LINE_PHASES_LONG_ROWS = os.environ.get("LAYOUTJIT_LINE_PHASES_LONG_ROWS", "1") != "0"
#: ... and of padded dims (a channel count not a multiple of the block; 0 for A/B).
LINE_PHASES_PADDED = os.environ.get("LAYOUTJIT_LINE_PHASES_PADDED", "1") != "0"


def line_phases(ir: LoopIR, tile: TileSpec) -> int:
    """Kind "lines" whose destination columns (B) do not start on 64-byte lines: how many
    alignments (phases) they cycle through, or 0 where the calls cannot follow the lines.

    nChw8c -> nhwc with C=200: each pixel is 25 runs of 8 floats, 800 B, so every other
    pixel starts half a line in. The calls of such a column are cut where the lines are
    (one run, then pairs): every whole line is one aligned non-temporal store and only the
    line shared by two columns gets two plain half-line stores. The column loop is unrolled
    by the number of phases, so each call's alignment is known when the kernel is generated.
    Needs every phase to fall on a run boundary and no padding in A, B or the run. The
    columns stay outer (each column's calls in turn, so a call writes whole lines of one
    column). Measured on 32xCx56x56, ratio to copy at 1 thread
    (2 threads), plain stores -> phases: nChw8c -> nhwc C=200 1.30 -> 0.73 (1.37 -> 0.78),
    C=40 1.16 -> 0.84 (1.50 -> 1.44); nChw4c -> nhwc C=200 1.74 -> 0.89 (1.20 -> 0.80);
    f32 -> bf16 nChw8c -> nhwc C=200 (four phases) 1.10 -> 1.23 (1.34 -> 1.12).

    Columns shorter than the rows (A longer than B; ``LINE_PHASES_LONG_ROWS``) once kept
    plain stores: nChw16c -> nChw8c with an odd number of pixels, where each source line
    feeds two planes and every other plane starts half a line in. Each plane is then
    written in turn from the macro tile's source lines (read twice, from L1). A/B on Zen 3
    (AVX2), one process, ratio to copy at 1 thread (2 threads), plain -> phases:
    `nCw16c -> nCw8c` 128x1024x299 1.20 -> 0.66 (1.13 -> 0.65; oneDNN 0.90 / 0.89),
    `nChw16c -> nChw8c` 32x256x55x55 1.23 -> 0.88 (1.19 -> 0.72), `nCdhw16c -> nCdhw8c`
    64x256x3x5x55 1.03 -> 0.64 (1.07 -> 0.45), `nhwc -> nChw8c` 32x256x55x55 1.61 -> 0.88
    (1.56 -> 0.87), f32 -> s8 `nhwc -> nChw8c` 128x384x1x299 1.91 -> 1.19 (1.90 -> 1.05).

    Padded dims (``LINE_PHASES_PADDED``): C = 56 in 16c blocks skips the last block's
    second 8c half, and the segments of the padded dim cut the column runs with it, so
    each call's alignment is still known when the kernel is generated. A/B on Zen 3 (AVX2),
    one process, plain -> phases: `nCdhw16c -> nCdhw8c` 16x56x7x299x7 1.09-1.29 ->
    0.90-0.93 (1.35-1.38 -> 1.01-1.03; oneDNN 1.20-1.33), 128x56x3x299x5 1.17 -> 0.87
    (1.23 -> 0.89), f32 -> bf16 `nhwc -> nChw16c` 1024x200x17x17 3.31 -> 1.25 (2.11 ->
    0.98), f32 -> u8 `nwc -> nCw16c` C = 24 1.13 -> 0.96, s8 -> f32 `nChw16c -> nChw8c`
    C = 56 1.36 -> 1.25 (1.18 -> 1.15).
    """
    if tile.kind != "lines" or tile.b is None or tile.l is None:
        return 1
    q = max(1, 64 // ir.operands[0].dtype.size)
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    dB = b.strides[0] or 0
    if dB % q == 0:
        return 1
    g = math.gcd(dB, q)
    if (g % run.extent or (tile.R * run.extent) % q or (a.extent > b.extent and not LINE_PHASES_LONG_ROWS)
            or b.extent < 2 or (not LINE_PHASES_PADDED
                                and any(n.dim is not None and ir.dims[n.dim].guarded for n in (a, b, run)))):
        return 0
    return q // g


#: Jobs off the lines realign whole-block tiles (job_stream_shift; 0: plain stores there).
JOB_STREAM_SHIFT = os.environ.get("LAYOUTJIT_JOB_STREAM_SHIFT", "1") != "0"


def job_stream_shift(ir: LoopIR, tile: TileSpec, parallel: int) -> bool:
    """Whether the jobs of a ``Plan.job_align`` plan that start off the lines realign their
    tiles onto whole non-temporal lines (``Plan.job_stream_shift``, ``simd.tile_stream_shift``)
    rather than store plainly.

    `nchw -> nChw8c` f32 with 27x27 planes: a job (8 c of one image) writes one run of
    729 x 32 B, every other job half a line off. Those took plain stores, each line read
    before it is written. Each tile's run (16 pixels: 512 B) now joins the last line of the
    previous tile's (a carry of one line), stored as whole aligned NT lines; the job's
    partial first and last line stay plain. Needs a transpose tile that writes whole
    blocks (rows of R = A's extent, one after another: B's destination stride R), one
    macro tile per job, no padding, a whole number of lines per tile and two tiles or more
    per job. A/B on Zen 4 (AVX-512), ratio to copy at 1 thread (2 threads), plain -> realigned:
    that pair 1.07 -> 0.81 (1.16 -> 0.86), oneDNN 1.48 (1.61); 64x128x55x55 0.97 -> 0.70
    (0.94 -> 0.67); f32 -> bf16 `nchw -> nChw16c` 16x2048x27x27 1.13 -> 0.97 (1.14 -> 0.95);
    f32 -> s8 64x128x55x55 1.10 -> 0.85 (1.09 -> 0.83); `nchw -> nChw4c` 128x64x35x35 1.28 ->
    0.98 (1.54 -> 1.06); `ncw -> nCw8c` 512x64x1001 1.14 -> 0.81 (1.10 -> 0.81), bf16 `nCw16c`
    1.14 -> 0.70; f32 -> s8 `ncdhw -> ndhwc` 3072x14x17x7x7 1.39 -> 1.15 (1.10 -> 0.95). In
    cache (6 MB) nothing changed; in the timed band at 2 threads one pair lost (`ncw -> nCw8c`
    64x64x999, 16 MB: 1.23 -> 1.35) while 1 thread gained (1.35 -> 0.92).
    """
    if not JOB_STREAM_SHIFT or tile.kind != "transpose" or not tile.rows_contiguous or tile.b is None:
        return False
    if tile.a2 is not None or tile.c is not None or tile.skew or tile.M != 1 or len(ir.operands) != 2:
        return False
    if _padded(ir) or any(_guarded(ir, n) for n in ir.nodes):
        return False
    s, d = ir.operands[1].dtype, ir.operands[0].dtype
    from . import simd
    if not simd.tile_stream_shift_supported(s, d):
        return False
    a, b = ir.nodes[tile.a], ir.nodes[tile.b]
    q = 64 // d.size
    return (a.extent == tile.R and a.strides[0] == 1 and b.strides[0] == tile.R
            and (tile.R * tile.V) % q == 0 and b.extent >= 2 * tile.V
            and parallel == len(outer_nodes(ir, tile)))


#: Phased jobs (job_shifts) that start off the lines take their own NT calls, up to this
#: many start offsets (each is one more copy of the job's code; 1: aligned jobs only, A/B).
JOB_SHIFTS_MAX = int(os.environ.get("LAYOUTJIT_JOB_SHIFTS_MAX", 4))


def job_shifts(ir: LoopIR, tile: TileSpec, parallel: int) -> tuple[int, ...]:
    """Jobs with phased "lines" calls (``line_phases``) that check their destination offset at
    run time (``Plan.job_align``): the offsets within a line, in elements, at which a job
    takes NT calls; other jobs take plain stores.

    The columns' phases within a job are fixed when the kernel is generated; a job starting
    ``s`` elements past a line shifts them all by ``s``. Where the jobs' offsets step by
    less than a line (s8 -> f32 `nChw16c -> nChw8c` C = 56 with 5x55 planes: images of
    61600 B, every other one half a line in), each possible start that falls on a run
    boundary gets its own copy of the job with its phases shifted (at most
    ``JOB_SHIFTS_MAX`` copies). A/B on Zen 3 (AVX2), one process, ratio to copy at 1
    thread (2 threads), aligned jobs only -> every job: that pair 1.18 (1.10) -> 0.86
    (0.96; oneDNN 0.98 (1.10)), f32 0.93 (0.98) -> 0.75 (0.74); `nCw8c -> nwc` f32 C = 56
    W = 299 1.52 (1.56) -> 0.85 (0.95; oneDNN 1.32); `nCdhw8c -> ndhwc` C = 200 3x1x17 1.45
    (1.09) -> 1.03 (0.77); bf16 -> f32 `nhwc -> nChw8c` C = 200 1x299 1.40 (1.45) -> 0.85
    (0.97); `nCdhw16c -> nCdhw8c` C = 56 3x299x5 0.92 (1.01) -> 0.68 (0.70); f32 -> u8
    `nChw16c -> nChw4c` 1.55 (1.13) -> 1.35 (1.02); five more 0.02-0.15 better. Short
    columns (f32 -> bf16 `nCw8c -> nwc` C = 40: 80 B) lost 1.47 -> 1.73: they take a
    lines panel instead (``LINES_PANEL_OVER_PHASES_BYTES``).
    """
    if JOB_SHIFTS_MAX <= 1 or tile.kind != "lines" or tile.l is None:
        return (0,)
    q = max(1, 64 // ir.operands[0].dtype.size)
    run = ir.nodes[tile.l].extent
    h = math.gcd(q, ir.operands[0].offset0, *((ir.nodes[i].strides[0] or 0) for i in _job_nodes(ir, tile, parallel)))
    shifts = tuple(s for s in range(0, q, h) if s % run == 0)
    return shifts if 1 < len(shifts) <= JOB_SHIFTS_MAX else (0,)


def _nt_possible(ir: LoopIR, tile: TileSpec, phases: bool = False,
                 runtime: frozenset[int] = frozenset()) -> bool:
    """Static part of the NT test: the micro-kernel's lines can start on 64-byte boundaries
    (``phases``: or kind "lines" follows them, :func:`line_phases`). ``runtime``: nodes
    (and offset0) left to a check of each job's destination offset (``Plan.job_align``)."""
    dst = ir.operands[0]
    dsz = dst.dtype.size
    q = max(1, 64 // dsz)
    if tile.kind == "stream":
        return True  # peeled at run time
    if dst.offset0 % q and not runtime:
        return False
    for i, n in enumerate(ir.nodes):
        if i in tile.nodes or i in runtime:
            continue
        if (n.strides[0] or 0) % q:
            return False
    assert tile.b is not None
    b = ir.nodes[tile.b]
    if tile.kind == "lines":
        assert tile.l is not None
        run = ir.nodes[tile.l]
        if phases and line_phases(ir, tile) > 1:
            return True
        return (tile.R * run.extent) % q == 0 and (b.strides[0] or 0) % q == 0
    if tile.rows_contiguous:
        return (tile.R * tile.V) % q == 0
    if tile.c is not None and (ir.nodes[tile.c].strides[0] or 0) % q:
        return False
    return (b.strides[0] or 0) % q == 0 and tile.R % q == 0


#: Kind "lines" into contiguous columns off the lines (``lines_panel``): the most bytes of a
#: panel (within L1 beside the source lines; 3.8 KB measured better than 15 KB), and whether
#: panels are used (``LAYOUTJIT_LINES_PANEL=0``: plain stores, for A/B runs).
LINES_PANEL_BYTES = 4096
LINES_PANEL = os.environ.get("LAYOUTJIT_LINES_PANEL", "1") != "0"
#: ... also for columns that are blocks of a dim, and panels shorter than LINES_PANEL_BYTES
#: down to LINES_PANEL_MIN_BYTES (0: off, for A/B runs).
LINES_PANEL_BLOCKS = os.environ.get("LAYOUTJIT_LINES_PANEL_BLOCKS", "1") != "0"
LINES_PANEL_MIN_BYTES = 512
#: Columns shorter than this many destination bytes take a lines panel even where the calls
#: could follow their lines (``line_phases``): most of their lines are shared by two
#: columns, so phased calls leave most stores plain (0: phases wherever they apply).
LINES_PANEL_OVER_PHASES_BYTES = int(os.environ.get("LAYOUTJIT_LINES_PANEL_OVER_PHASES_BYTES", 192))


def lines_panel(ir: LoopIR, tile: TileSpec) -> int:
    """Kind "lines" whose destination columns (B) follow one another but do not start on
    64-byte lines, where the calls cannot follow the lines (:func:`line_phases` is 0): how
    many columns go to one panel (0: none).

    nChw16c -> nhwc with C=60: each pixel is four runs of 16 floats (the last one 12), 240
    B, so no run starts on a line and no store can be a whole aligned line. The columns of
    a panel are written into a small stage (plain stores, in L1), which then goes out as
    whole aligned non-temporal lines: the panel starts on a line because it holds a
    multiple of q / gcd(dB, q) columns, and the columns before the first one that starts on
    a line (found at run time: outer offsets need not be whole lines) are plain stores.
    Needs each column to be one contiguous piece of exactly dB elements (the runs adjacent,
    nothing skipped inside), all of A in one macro tile, the columns outer, and every other
    node's destination stride a multiple of gcd(dB, q), so that some column starts a line.

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), plain -> panels:
    16x60x64x64 0.87 -> 0.57 (0.90 -> 0.52), 64x60x35x35 0.85 -> 0.56 (0.99 -> 0.39),
    16x100x56x56 0.85 -> 0.71 (0.87 -> 0.63), 8x200x56x56 0.84 -> 0.47 (0.99 -> 0.45),
    bf16 -> f32 16x100x56x56 0.99-1.06 -> 0.48-0.60, `nCdhw16c -> ndhwc` 4x60x16x40x40
    0.82 -> 0.47 (0.89 -> 0.54). A probe of 16x60x64x64 at 1 thread: panels of 16 columns
    (3.8 KB) 0.75-0.92x copy, of 64 columns (15 KB) 0.91-1.26.

    Columns that are blocks of a dim (``LINES_PANEL_BLOCKS``): `nChw8c -> nChw16c` with
    2- or 1-byte elements writes a pixel's 16c block, half or a quarter of a line, per
    call; the columns (pixels) follow one another, each the two 8c runs A x L of an
    unpadded dim whose outer digit is elsewhere. Runs of columns shorter than a panel (7x7
    planes: 49) take one panel of most of them (at least ``LINES_PANEL_MIN_BYTES``). A/B
    on Zen 3 (AVX2), plain -> panels, ratio to copy at 1 thread (2 threads): bf16
    256x2048x7x7 1.59 -> 0.65 (1.35 -> 0.72), 32x256x56x56 0.72 -> 0.59 (0.96 -> 0.70),
    128x384x299x7 1.49 -> 1.21 (0.98 -> 0.73); u8 128x1024x56x28 1.49 -> 1.22 (1.00 ->
    0.71); s8 8x768x128x128 0.85 -> 0.72 (0.69 -> 0.45); `nCdhw8c -> nCdhw16c` bf16 0.92
    -> 0.84 (1.00 -> 0.71); f32 -> bf16 0.99 -> 0.90 (0.81 -> 0.75); `OhwI16o4i ->
    OIhw16o16i` bf16 3072x256x5x5 1.54 -> 0.88 (1.43 -> 0.78); f32 -> u8 2x256x112x224
    0.97 -> 1.09 (0.96 -> 0.94).

    Columns shorter than ``LINES_PANEL_OVER_PHASES_BYTES`` take a panel even where phased
    calls could follow their lines (:func:`line_phases`): with 80-160 B columns most lines
    are shared by two columns, so most phased stores stay plain. A/B on Zen 3 (AVX2), one
    process, phases -> panel, ratio to copy at 1 thread (2 threads): bf16 `nCw8c -> nwc`
    4096x40x299 1.61 (1.20) -> 0.92 (0.78), bf16 `nChw8c -> nhwc` 128x80x56x56 0.94-0.95
    (0.79-1.01) -> 0.72 (0.75-0.76), C = 56 1.36 (1.07) -> 0.78 (0.83), f32 C = 40 0.79
    (0.77) -> 0.70 (0.74), `nCdhw8c -> ndhwc` 128x24x3x299x56 0.84 (1.06) -> 0.61 (0.89);
    224 B columns (f32 `nCw8c -> nwc` C = 56) measured 0.88 (0.80) against 0.96 (0.78).
    """
    if not LINES_PANEL or tile.kind != "lines" or tile.b is None or tile.l is None:
        return 0
    dst = ir.operands[0]
    dsz = dst.dtype.size
    q = max(1, 64 // dsz)
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    dB = b.strides[0] or 0
    if dB <= 0 or dB % q == 0 or (line_phases(ir, tile) != 0 and dB * dsz >= LINES_PANEL_OVER_PHASES_BYTES):
        return 0
    if a.strides[0] != run.extent or a.extent > b.extent or tile.M * tile.R < a.extent:
        return 0
    if b.dim is not None and ir.dims[b.dim].guarded:
        return 0
    if a.dim is not None and a.dim == run.dim:
        r = ir.dims[a.dim]
        if run.weight != 1 or a.weight != run.extent:
            return 0
        if a.extent * run.extent >= r.extent:
            written = r.write
        elif LINES_PANEL_BLOCKS and not r.guarded:
            written = a.extent * run.extent  # inner digits of an unpadded dim (blocks of it)
        else:
            return 0
    elif any(n.dim is not None and ir.dims[n.dim].guarded for n in (a, run)):
        return 0
    else:
        written = a.extent * run.extent
    g = math.gcd(dB, q)  # every column start is a multiple of g plus the outer offset
    if written != dB or dst.offset0 % g:
        return 0
    for i, n in enumerate(ir.nodes):
        if i not in tile.nodes and (n.strides[0] is None or n.strides[0] % g):
            return 0
    base = q // g
    cols = max(base, LINES_PANEL_BYTES // (dB * dsz) // base * base)
    if LINES_PANEL_BLOCKS and b.extent < cols:
        cols = b.extent // base * base  # short runs of columns (7x7 planes): one panel of most
        if cols * dB * dsz < LINES_PANEL_MIN_BYTES:
            return 0
    if cols * dB * dsz > 4 * LINES_PANEL_BYTES or b.extent < cols:
        return 0
    return cols


#: Kind "lines" that reads many source streams per column (``lines_passes``): streams per
#: pass (0: off; ``LAYOUTJIT_LINES_PASS_STREAMS`` for A/B runs) and the source bytes a pass
#: reads from each stream per block of columns.
LINES_PASS_STREAMS = int(os.environ.get("LAYOUTJIT_LINES_PASS_STREAMS", 8))
LINES_PASS_BYTES = 64 * 1024
#: ... not where a sweep of 1-byte source runs writes under 128 B of each column and the
#: columns are a multiple of this many bytes apart (0: off, for A/B runs).
LINES_PASS_ALIAS_BYTES = int(os.environ.get("LAYOUTJIT_LINES_PASS_ALIAS_BYTES", 512))


def lines_passes(ir: LoopIR, tile: TileSpec) -> int:
    """Kind "lines" whose columns gather their runs from more than ``LINES_PASS_STREAMS``
    source streams: how many columns go to one block (0: the columns outer, every stream
    read at each column).

    nChw16c -> nhwc with C=256: a pixel is 16 runs of 16 values, one from each channel
    block's plane, so column by column the kernel reads 16 planes side by side. A block
    of columns is swept once per group of 8 planes instead, ``LINES_PASS_BYTES`` of each
    plane per sweep; each sweep writes its lines of every pixel in the block (NT). Rows
    innermost (``A`` longer than ``B``: nhwc -> nChw16c) have no column loop to block.

    A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads), columns outer -> blocks
    swept 8 streams at a time: f32 -> u8 32x256x56x56 0.60 -> 0.59 (0.90 -> 0.75; oneDNN
    0.92 (0.98)), f32 -> bf16 0.96 -> 0.84 (0.85 -> 0.59), s8 0.71 -> 0.58 (0.59 -> 0.50),
    f32 0.73 -> 0.55 (0.69 -> 0.63); nChw8c -> nhwc f32 0.60 -> 0.47 (0.56 -> 0.56), f32
    -> u8 0.94 -> 0.73 (0.86 -> 0.62); in the lists: 8x256x56x56 0.58 -> 0.51 (0.64 ->
    0.58), `nCdhw8c -> ndhwc` 8x128x16x28x28 0.67 -> 0.54 (0.64 -> 0.61), `oihw ->
    OIhw4i16o4i` 4096x4096 0.45 -> 0.42 (0.60 -> 0.54), five more equal or better. Sweeps
    of 4 streams: f32 -> u8 0.59 (0.74), but nChw8c -> nhwc f32 lost (0.60 -> 0.71).

    Not where a sweep of 1-byte source runs writes single lines (under 128 B) of columns a
    multiple of 512 B apart (``LINES_PASS_ALIAS_BYTES``): s8 `nChw8c -> nhwc` with C = 1024 wrote 64 B (8
    runs of 8) of each 1 KB pixel per sweep, one NT line per row, rows whose addresses
    repeat modulo 4 KB every 4 rows (as in ``_two_line_rows``). A/B on Zen 3 (AVX2), ratio
    to copy at 1 thread (2 threads), sweeps -> columns outer: 64x1024x14x112 1.34-1.42 ->
    0.71-0.78 (1.07-1.10 -> 0.73-0.77; oneDNN 1.83-2.05 (1.72-2.10), 1.37 (1.44) in the
    harness), u8 1.29 -> 0.80 (1.07 -> 0.74), C = 512 64x512x28x56 1.16 -> 0.81 (0.96 ->
    0.79). Other strides keep the sweeps, which won there: C = 384 s8 0.61 (0.63) with
    sweeps against 0.93 (1.05) without, C = 768 f32 -> s8 0.73 (0.77) against 0.92 (0.85),
    f32 -> u8 C = 384 0.77 (0.78) against 1.05 (0.91); so did wider sources into such
    columns (f32 -> s8 `nCdhw8c -> ndhwc` C = 1024 0.75 (0.71) against 0.96-1.02 (0.83-0.89),
    f32 `ABcd16b16a2b -> aBcd32b` 1.05 (0.73) against 1.36 (0.93)): they convert or move
    more source bytes per line, and keep the sweeps. Smaller blocks of columns (16 or 4 KB
    of each stream instead of 64) did not help the 1-byte sweeps (1.29-1.33).
    """
    if not LINES_PASS_STREAMS or tile.kind != "lines" or tile.b is None or tile.l is None:
        return 0
    if LINES_PASS_STREAMS % tile.R or tile.M * tile.R <= LINES_PASS_STREAMS:
        return 0
    a, b, run = ir.nodes[tile.a], ir.nodes[tile.b], ir.nodes[tile.l]
    if a.extent > b.extent:  # the rows innermost (codegen's emit_group): no column loop to block
        return 0
    dsz = ir.operands[0].dtype.size
    sweep = LINES_PASS_STREAMS * run.extent * dsz  # bytes of each column a sweep writes
    if (LINES_PASS_ALIAS_BYTES and b.strides[0] is not None and sweep < 128
            and ir.operands[1].dtype.size == 1 and (abs(b.strides[0]) * dsz) % LINES_PASS_ALIAS_BYTES == 0):
        return 0  # a sweep would write single lines into columns whose addresses alias
    return max(1, LINES_PASS_BYTES // (run.extent * ir.operands[1].dtype.size))


def with_plan_options(plan: Plan, **kw: object) -> Plan:
    return replace(plan, **kw)  # type: ignore[arg-type]
