"""Codegen: render a Plan as the text of a Python module compiled by Numba.

The module defines one ``numba.cfunc`` ``kernel(sp, dp, ap, lo, hi)`` that runs
jobs ``[lo, hi)`` of the plan's flattened outer loops over the raw buffers
(``sp``/``dp`` point at the source/destination, ``ap`` at an int64 table of
extra operand pointers). Every extent, stride and offset is a literal, so LLVM
folds the index arithmetic and unrolls the small loops. A driver in
``runtime`` calls the kernel once (serial) or from a ``prange`` over threads;
since the drivers are compiled once, each kernel costs only a serial compile.

Padding never costs a guard in the main loop: the loop over a padded dim's
heaviest digit is split into a full range, one partial step and a zero range
(recursively, with constant bounds), as the planner's docstring describes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .ir import LoopIR, Node, Operand
from .plan import Plan

CODEGEN_VERSION = "1"

_NUMBA_TYPES = {
    "f32": "float32", "f64": "float64", "f16": "uint16", "bf16": "uint16",
    "s32": "int32", "s8": "int8", "u8": "uint8",
}


def runtime_fingerprint() -> str:
    """Hash of the runtime modules generated code calls into.

    Numba's disk cache only notices changes to the generated file itself, so
    this goes into every generated header: a changed helper changes every
    kernel's source hash, hence its file name, and nothing stale is loaded.
    """
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import pathlib

        h = hashlib.sha256()
        here = pathlib.Path(__file__).parent
        for name in ("convert.py", "simd.py", "eltwise_ops.py", "runtime.py"):
            try:
                h.update((here / name).read_bytes())
            except OSError:
                h.update(name.encode())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


_FINGERPRINT: str | None = None


def numba_type(dt: str) -> str:
    return _NUMBA_TYPES[str(dt)]


@dataclass
class Epilogue:
    """How one destination element's value is computed (plain conversion by default).

    ``lines(src, extra, dst_old)`` receives the source load expression, the
    load expressions of the extra operands (same order as ``ir.operands[2:]``)
    and the destination's current value (for a ``sum`` post-op); it returns
    statements to run first and the expression stored into the destination.
    ``imports`` lists module-level lines the code needs.
    """

    lines: Callable[[str, Sequence[str], str], tuple[list[str], str]]
    imports: tuple[str, ...] = ()
    reads_dst: bool = False
    tile_ok: bool = True  # the register tile can do it (plain conversions only)


def plain_epilogue(sdt: str, ddt: str) -> Epilogue:
    if str(sdt) == str(ddt):
        return Epilogue(lambda src, extra, dst_old: ([], src))
    from . import convert

    def lines(src: str, extra: Sequence[str], dst_old: str) -> tuple[list[str], str]:
        return [], convert.direct(sdt, ddt, src)

    names = ", ".join(convert.RUNTIME_NAMES)
    imports = (f"from layoutjit.convert import {names}",) if names else ()
    return Epilogue(lines, imports)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def put(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def var(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


def dim_segments(ir: LoopIR, node: Node, state: object) -> list[tuple[int, int, object]]:
    """Split the loop over ``node`` into (start, stop, new state of its dim) ranges.

    ``state`` of a padded dim is ``("partial", base)`` until its heaviest digit
    is entered; then the ranges are: all-valid steps (state "full"), at most one
    partially valid step (``("partial", base')``), and all-padding steps ("zero").
    Steps beyond the destination's padded size are dropped.
    """
    if node.dim is None or not ir.dims[node.dim].guarded or state in ("full", "zero"):
        return [(0, node.extent, state)]
    assert isinstance(state, tuple) and state[0] == "partial"
    base = state[1]
    r = ir.dims[node.dim]
    n, w = node.extent, node.weight
    v = r.valid - base
    wr = r.write - base
    full = _clamp(v // w, 0, n)
    segs: list[tuple[int, int, object]] = []
    if full > 0:
        segs.append((0, full, "full"))
    nxt = full
    if full < n and v - full * w > 0:
        segs.append((full, full + 1, ("partial", base + full * w) if w > 1 else "full"))
        nxt = full + 1
    zend = _clamp(-(-wr // w), 0, n)
    if zend > nxt:
        segs.append((nxt, zend, "zero"))
    return segs


class KernelWriter:
    """Renders one Plan (with an Epilogue) as module source."""

    def __init__(self, plan: Plan, epilogue: Epilogue, *, title: str = "") -> None:
        self.plan = plan
        self.ir = plan.ir
        self.ep = epilogue
        self.title = title
        self.w = _Writer()
        self.tiles: dict[tuple, str] = {}
        self.ops: list[Operand] = list(self.ir.operands)
        self.arr = ["dst", "src"] + [f"x{k}" for k in range(2, len(self.ops))]
        self.heaviest_first = self._digit_orders()
        # extra operands that are one value for the whole tensor: load once per call
        self.scalar_ops = {k for k in range(2, len(self.ops))
                           if all(n.strides[k] == 0 for n in self.ir.nodes)}
        self.uses_nt = False

    # ---------------------------------------------------------------- helpers
    def _digit_orders(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, n in enumerate(self.ir.nodes):
            if n.dim is not None:
                out.setdefault(n.dim, []).append(i)
        return out

    def _is_heaviest_remaining(self, idx: int, entered: set[int]) -> bool:
        n = self.ir.nodes[idx]
        for j in self.heaviest_first.get(n.dim, []):  # type: ignore[arg-type]
            m = self.ir.nodes[j]
            if j != idx and j not in entered and m.weight > n.weight:
                return False
        return True

    def _step(self, offs: list[str], node: Node, var: str, depth: int) -> list[str]:
        new = []
        for k, (o, s) in enumerate(zip(offs, node.strides)):
            if s is None or s == 0:
                new.append(o)
                continue
            nv = self.w.var("o")
            term = var if s == 1 else f"{var} * {s}"
            self.w.put(depth, f"{nv} = {o} + {term}")
            new.append(nv)
        return new

    def _step_const(self, offs: list[str], node: Node, value: int) -> list[str]:
        out = []
        for o, s in zip(offs, node.strides):
            if s is None or s == 0 or value == 0:
                out.append(o)
            else:
                out.append(f"({o} + {value * s})")
        return out

    # ---------------------------------------------------------------- the nest
    def render(self) -> str:
        p = self.plan
        body = self._render_body()
        head = [
            "# layoutjit generated kernel -- do not edit (regenerated from the plan)",
            f"# layoutjit codegen {CODEGEN_VERSION}, runtime {runtime_fingerprint()}",
        ]
        if self.title:
            head += ["# " + line for line in self.title.splitlines()]
        head += ["import numpy as np", "import numba as nb", "from numba import types as nbt",
                 "from layoutjit.runtime import ptr_from_int"]
        head += list(self.ep.imports)
        if self.tiles or self.uses_nt:
            head.append("from layoutjit.simd import tile, sfence")
        for spec, name in self.tiles.items():
            R, V, Rv, Vv, nt, rc = spec
            sdt, ddt = self.ops[1].dtype, self.ops[0].dtype
            head.append(f"{name} = tile({R}, {V}, {str(sdt)!r}, {str(ddt)!r}, Rv={Rv}, Vv={Vv}, "
                        f"nt={nt}, rows_contiguous={rc}, vbytes={p.vector_bytes})")
        sig_args = ", ".join(
            [f"nbt.CPointer(nbt.{numba_type(self.ops[1].dtype)})",
             f"nbt.CPointer(nbt.{numba_type(self.ops[0].dtype)})",
             "nbt.CPointer(nbt.int64)", "nbt.int64", "nbt.int64"])
        head += [
            "",
            f"SIG = nbt.void({sig_args})",
            "",
            "",
            '@nb.cfunc(SIG, cache=True, error_model="numpy")',
            "def kernel(sp, dp, ap, lo, hi):",
        ]
        return "\n".join(head + body) + "\n"

    def _extent_of(self, op: Operand) -> int:
        """Elements the operand's carray must span (offset0 + max reachable offset + 1)."""
        m = op.offset0
        for d, digs in enumerate(op.digits):
            r = self.ir.dims[d]
            top = max(0, r.write - 1)
            for dg in digs:
                q = top // dg.weight
                if dg.extent is not None:
                    q = min(q, dg.extent - 1)
                m += q * dg.stride
        return m + 1

    def _render_body(self) -> list[str]:
        w = self.w
        depth = 1
        for k, op in enumerate(self.ops):
            n = self._extent_of(op)
            if k == 0:
                w.put(depth, f"dst = nb.carray(dp, ({n},))")
            elif k == 1:
                w.put(depth, f"src = nb.carray(sp, ({n},))")
            else:
                w.put(depth, f"{self.arr[k]} = nb.carray(ptr_from_int(ap[{k - 2}], np.{numba_type(op.dtype)}), ({n},))")
        for k in sorted(self.scalar_ops):
            w.put(depth, f"v{k} = {self.arr[k]}[{self.ops[k].offset0}]")
        if self.plan.nt:
            w.put(depth, "if (dst.ctypes.data & 63) == 0:")
            self._render_jobs(depth + 1, nt=True)
            if self.uses_nt:
                w.put(depth + 1, "sfence()")
            w.put(depth, "else:")
            self._render_jobs(depth + 1, nt=False)
        else:
            self._render_jobs(depth, nt=False)
        return w.lines

    def _render_jobs(self, depth: int, nt: bool) -> None:
        p = self.plan
        order = p.loop_order()
        npar = min(p.parallel, len(order))
        macro_job = p.tile is not None and p.parallel > len(order)
        par_nodes = order[:npar]
        exts = [self.ir.nodes[i].extent for i in par_nodes]
        if macro_job:
            assert p.tile is not None
            a = self.ir.nodes[p.tile.a]
            exts.append(-(-a.extent // (p.tile.R * p.tile.M)))
        w = self.w
        offs = [str(op.offset0) for op in self.ops]
        state: dict[int, object] = {d: ("partial", 0) for d, r in enumerate(self.ir.dims) if r.guarded}
        terms: dict[int, list[str]] = {}
        if not exts:
            w.put(depth, "if lo < hi:")
            self._serial(depth + 1, 0, order, offs, state, terms, set(), nt)
            return
        w.put(depth, "for it in range(lo, hi):")
        depth += 1
        vars_ = []
        rest = "it"
        for k, e in enumerate(exts):
            inner = 1
            for e2 in exts[k + 1:]:
                inner *= e2
            v = f"j{k}"
            vars_.append(v)
            if inner == 1:
                w.put(depth, f"{v} = {rest}")
            else:
                w.put(depth, f"{v} = {rest} // {inner}")
                r = w.var("r")
                w.put(depth, f"{r} = {rest} % {inner}")
                rest = r
        self._decoded(depth, 0, par_nodes, vars_, order, npar, macro_job, offs, state, terms, set(), nt)

    def _decoded(self, depth: int, k: int, par_nodes: list[int], vars_: list[str], order: list[int],
                 npar: int, macro_job: bool, offs: list[str], state: dict, terms: dict,
                 entered: set[int], nt: bool) -> None:
        if k == len(par_nodes):
            if macro_job:
                self._tile(depth, offs, state, terms, entered, nt, group_var=vars_[k])
            else:
                self._serial(depth, npar, order, offs, state, terms, entered, nt)
            return
        idx = par_nodes[k]
        node = self.ir.nodes[idx]
        var = vars_[k]
        segs, st_key, state = self._segments_for(idx, state, entered)
        if segs is None:  # runtime guard fallback for this dim
            offs2 = self._step(offs, node, var, depth)
            self._decoded(depth, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, state,
                          self._add_term(terms, node, var), entered | {idx}, nt)
            return
        if len(segs) == 1 and segs[0][0] == 0 and segs[0][1] == node.extent:
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = segs[0][2]
            offs2 = self._step(offs, node, var, depth)
            self._decoded(depth, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, st2,
                          self._add_term(terms, node, var), entered | {idx}, nt)
            return
        first = True
        for s0, s1, new in segs:
            if s1 - s0 == 1:
                cond = f"{var} == {s0}"
            elif s0 > 0:
                cond = f"{var} >= {s0} and {var} < {s1}"
            else:
                cond = f"{var} < {s1}"
            self.w.put(depth, ("if " if first else "elif ") + cond + ":")
            first = False
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = new
            offs2 = self._step(offs, node, var, depth + 1)
            self._decoded(depth + 1, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, st2,
                          self._add_term(terms, node, var), entered | {idx}, nt)

    def _segments_for(self, idx: int, state: dict, entered: set[int]) -> tuple[list | None, int | None, dict]:
        """Segments of the loop over node idx, the dim they specialize, and the state to use.

        Returns ``(None, d, state')`` when dim d must fall back to a runtime guard
        (one of its lighter digits was entered before this heavier one).
        """
        node = self.ir.nodes[idx]
        d = node.dim
        if d is None or d not in state:
            return [(0, node.extent, None)], None, state
        st = state[d]
        if isinstance(st, tuple) and st[0] == "runtime":
            return None, d, state
        if isinstance(st, tuple) and st[0] == "partial" and not self._is_heaviest_remaining(idx, entered):
            st2 = dict(state)
            st2[d] = ("runtime", st[1])
            return None, d, st2
        return dim_segments(self.ir, node, st), d, state

    def _add_term(self, terms: dict, node: Node, var: str) -> dict:
        if node.dim is None:
            return terms
        t = dict(terms)
        t[node.dim] = terms.get(node.dim, []) + [var if node.weight == 1 else f"{var} * {node.weight}"]
        return t

    def _add_const_term(self, terms: dict, node: Node, value: int) -> dict:
        if node.dim is None or value == 0:
            return terms
        t = dict(terms)
        t[node.dim] = terms.get(node.dim, []) + [str(value * node.weight)]
        return t

    def _serial(self, depth: int, k: int, order: list[int], offs: list[str], state: dict,
                terms: dict, entered: set[int], nt: bool) -> None:
        if k == len(order):
            if self.plan.tile is not None:
                self._tile(depth, offs, state, terms, entered, nt, group_var=None)
            else:
                self._leaf(depth, offs, state, terms)
            return
        idx = order[k]
        node = self.ir.nodes[idx]
        segs, st_key, state = self._segments_for(idx, state, entered)
        if segs is None:
            var = self.w.var("i")
            self.w.put(depth, f"for {var} in range({node.extent}):")
            offs2 = self._step(offs, node, var, depth + 1)
            self._serial(depth + 1, k + 1, order, offs2, state, self._add_term(terms, node, var),
                         entered | {idx}, nt)
            return
        for s0, s1, new in segs:
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = new
            if s1 - s0 == 1:
                offs2 = self._step_const(offs, node, s0)
                self._serial(depth, k + 1, order, offs2, st2, self._add_const_term(terms, node, s0),
                             entered | {idx}, nt)
            else:
                var = self.w.var("i")
                rng = f"{s1}" if s0 == 0 else f"{s0}, {s1}"
                self.w.put(depth, f"for {var} in range({rng}):")
                offs2 = self._step(offs, node, var, depth + 1)
                self._serial(depth + 1, k + 1, order, offs2, st2, self._add_term(terms, node, var),
                             entered | {idx}, nt)

    # ---------------------------------------------------------------- leaves
    def _index_expr(self, d: int, state: dict, terms: dict) -> str:
        """The logical index of dim d: every entered digit adds a term (var or constant)."""
        parts = terms.get(d, [])
        return " + ".join(parts) if parts else "0"

    def _irregular_offsets(self, offs: list[str], state: dict, terms: dict, depth: int) -> list[str]:
        out = list(offs)
        for k, op in enumerate(self.ops):
            for d in range(len(self.ir.dims)):
                if any(n.dim == d and n.strides[k] is None for n in self.ir.nodes):
                    x = self.w.var("x")
                    self.w.put(depth, f"{x} = {self._index_expr(d, state, terms)}")
                    out[k] = f"({out[k]} + {op.offset_expr_of_dim(d, x)})"
        return out

    def _guard(self, depth: int, state: dict, terms: dict) -> tuple[int, str] | None:
        """Emit the runtime guard for dims in runtime mode; returns (depth, mode)."""
        rt = [d for d, s in state.items() if isinstance(s, tuple) and s[0] == "runtime"]
        if not rt:
            return None
        conds_valid = []
        conds_write = []
        for d in rt:
            x = self.w.var("x")
            self.w.put(depth, f"{x} = {self._index_expr(d, state, terms)}")
            r = self.ir.dims[d]
            conds_valid.append(f"{x} < {r.valid}")
            conds_write.append(f"{x} < {r.write}")
        return depth, " and ".join(conds_valid) + "|" + " and ".join(conds_write)

    def _leaf(self, depth: int, offs: list[str], state: dict, terms: dict) -> None:
        zero = any(s == "zero" for s in state.values())
        g = self._guard(depth, state, terms)
        if zero:
            if g is None:
                self._store_zero(depth, offs)
            else:
                self.w.put(depth, f"if {g[1].split('|')[1]}:")
                self._store_zero(depth + 1, offs)
            return
        if g is None:
            self._store_value(depth, offs, state, terms)
            return
        valid, write = g[1].split("|")
        self.w.put(depth, f"if {valid}:")
        self._store_value(depth + 1, offs, state, terms)
        self.w.put(depth, f"elif {write}:")
        self._store_zero(depth + 1, offs)

    def _store_zero(self, depth: int, offs: list[str]) -> None:
        self.w.put(depth, f"dst[{offs[0]}] = 0")

    def _store_value(self, depth: int, offs: list[str], state: dict, terms: dict) -> None:
        offs = self._irregular_offsets(offs, state, terms, depth)
        src = f"src[{offs[1]}]"
        extra = [f"v{k}" if k in self.scalar_ops else f"{self.arr[k]}[{offs[k]}]"
                 for k in range(2, len(self.ops))]
        stmts, expr = self.ep.lines(src, extra, f"dst[{offs[0]}]")
        for st in stmts:
            self.w.put(depth, st)
        self.w.put(depth, f"dst[{offs[0]}] = {expr}")

    # ---------------------------------------------------------------- tiles
    def _tile_fn(self, R: int, V: int, Rv: int, Vv: int, nt: bool, rc: bool) -> str:
        if Rv == 0 or Vv == 0:
            Rv = Vv = 0
        key = (R, V, Rv, Vv, nt, rc)
        if key not in self.tiles:
            self.tiles[key] = f"T{len(self.tiles)}"
        if nt:
            self.uses_nt = True
        return self.tiles[key]

    def _range_of(self, node: Node, state: dict) -> tuple[int, int]:
        """(valid steps, written steps) of a tile node in the current state."""
        n = node.extent
        d = node.dim
        if d is None or d not in state:
            return n, n
        st = state[d]
        if st == "full":
            return n, n
        if st == "zero":
            return 0, n
        assert isinstance(st, tuple) and st[0] == "partial"
        r = self.ir.dims[d]
        b = st[1]
        return _clamp(r.valid - b, 0, n), _clamp(r.write - b, 0, n)

    def _tile(self, depth: int, offs: list[str], state: dict, terms: dict, entered: set[int],
              nt: bool, group_var: str | None) -> None:
        t = self.plan.tile
        assert t is not None
        g = self._guard(depth, state, terms)
        if g is not None:
            valid, write = g[1].split("|")
            self.w.put(depth, f"if {valid}:")
            self._tile_body(depth + 1, offs, state, nt, group_var, zero=False)
            self.w.put(depth, f"elif {write}:")
            self._tile_body(depth + 1, offs, state, nt, group_var, zero=True)
            return
        zero = any(s == "zero" for d, s in state.items())
        self._tile_body(depth, offs, state, nt, group_var, zero=zero)

    def _tile_body(self, depth: int, offs: list[str], state: dict, nt: bool,
                   group_var: str | None, zero: bool) -> None:
        t = self.plan.tile
        assert t is not None
        A = self.ir.nodes[t.a]
        B = self.ir.nodes[t.b]
        vA, wrA = self._range_of(A, state)
        vB, wrB = self._range_of(B, state)
        if zero:
            vA = 0
        sA, dB = A.strides[1], B.strides[0]
        assert sA is not None and dB is not None
        dsz = self.ops[0].dtype.size
        q = max(1, 64 // dsz)
        # A micro tiles: (start, R, Rv)
        atiles = []
        for a0 in range(0, wrA, t.R):
            R = min(t.R, wrA - a0)
            atiles.append((a0, R, _clamp(vA - a0, 0, R)))
        groups = [atiles[i:i + t.M] for i in range(0, len(atiles), t.M)]
        # B steps: runs of identical (V, Vv)
        bsteps = []
        for c0 in range(0, wrB, t.V):
            V = min(t.V, wrB - c0)
            bsteps.append((c0, V, _clamp(vB - c0, 0, V)))
        bruns: list[list] = []
        for st in bsteps:
            if bruns and bruns[-1][-1][1:] == st[1:]:
                bruns[-1].append(st)
            else:
                bruns.append([st])

        def shape(gr: list) -> tuple:
            return tuple((R, Rv) for _, R, Rv in gr)

        # uniform groups (same shape as group 0, consecutive) become a loop
        nuni = 0
        while nuni < len(groups) and shape(groups[nuni]) == shape(groups[0]):
            nuni += 1

        def emit_group(dep: int, gr: list, base: str) -> None:
            for run in bruns:
                c_first, V, Vv = run[0]
                if len(run) > 1:
                    cv = self.w.var("c")
                    self.w.put(dep, f"for {cv} in range({c_first}, {run[-1][0] + t.V}, {t.V}):")
                    d2 = dep + 1
                    cexpr = cv
                else:
                    d2 = dep
                    cexpr = str(c_first)
                for a0, R, Rv in gr:
                    aexpr = f"{base} + {a0 - gr[0][0]}" if base != "0" else str(a0)
                    rc = t.rows_contiguous and R == A.extent
                    use_nt = nt and self._tile_nt_ok(R, V, rc, dsz, q)
                    fn = self._tile_fn(R, V, Rv, Vv, use_nt, rc)
                    so = f"{offs[1]} + ({aexpr}) * {sA} + {cexpr}"
                    do = f"{offs[0]} + {aexpr} + ({cexpr}) * {dB}"
                    self.w.put(d2, f"{fn}(src, {so}, {sA}, dst, {do}, {dB})")

        if group_var is not None:
            # the macro loop over A groups is decoded from the job index
            gsz = t.M * t.R
            first = True
            if nuni:
                self.w.put(depth, f"if {group_var} < {nuni}:")
                emit_group(depth + 1, groups[0], f"{group_var} * {gsz}")
                first = False
            for gi in range(nuni, len(groups)):
                self.w.put(depth, ("if " if first else "elif ") + f"{group_var} == {gi}:")
                emit_group(depth + 1, groups[gi], str(groups[gi][0][0]))
                first = False
            return
        if nuni > 1:
            gv = self.w.var("g")
            gsz = t.M * t.R
            self.w.put(depth, f"for {gv} in range(0, {nuni * gsz}, {gsz}):")
            emit_group(depth + 1, groups[0], gv)
        elif nuni == 1:
            emit_group(depth, groups[0], "0")
        for gi in range(nuni, len(groups)):
            emit_group(depth, groups[gi], str(groups[gi][0][0]))

    def _tile_nt_ok(self, R: int, V: int, rc: bool, dsz: int, q: int) -> bool:
        if rc:
            return (R * V) % q == 0
        return (R * dsz) % 64 == 0


def generate(plan: Plan, epilogue: Epilogue, title: str = "") -> str:
    """The module source for a plan."""
    return KernelWriter(plan, epilogue, title=title).render()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]
