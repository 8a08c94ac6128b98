"""Runs the cases: buffers, verification across peers, paired timing per thread count."""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import layout as L
from .buffers import aligned_empty, compare_outputs, fill_source
from .cases import Case
from .peers import CopyPeer, Job, Peer, Prepared
from .timing import paired

LARGE_BYTES = 32 << 20  # "large" case: copy size (src+dst)/2 >= 32 MiB
GARBAGE = 0xA5  # dst is pre-filled with this byte before a verification run


@dataclass
class Settings:
    threads: tuple[int, ...] = (1, 2)
    repeats: int = 15
    warmup: int = 2
    warmup_s: float = 0.1
    min_sample_s: float = 0.002
    verify: bool = True
    verbose: bool = False
    retries: int = 2  # re-runs of a phase that ran beside other processes' work
    load_threshold: float = 0.25  # CPUs used by other processes (+ steal) that make a phase "busy"
    wait_s: float = 10.0  # longest wait for quiet before one re-run
    wait_budget_s: float = 60.0  # waiting + re-running allowed in the whole run


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def make_descs(case: Case) -> tuple[Any, Any]:
    import layoutjit as lj

    return (lj.MemoryDesc(list(case.dims), case.src_dtype, case.src_tag),
            lj.MemoryDesc(list(case.dims), case.dst_dtype, case.dst_tag))


def make_source(md: Any, seed: int = 1234) -> np.ndarray:
    """An aligned source buffer: random values, padding zero (as oneDNN expects)."""
    st = np.dtype(md.dtype.storage)
    buf = aligned_empty(md.get_size(), st)
    fill_source(buf, str(md.dtype), seed)
    for b in L.padding_boxes(md):
        L.np_view(buf, b, 0).fill(0)
    return buf


def run_case(case: Case, peers: dict[str, Peer], copy: CopyPeer, st: Settings,
             log: Any = sys.stdout, probe: Any = None, monitor: Any = None,
             budget: dict | None = None) -> dict:
    out: dict = {"case": case.to_json(), "name": case.name, "group": case.group}
    try:
        src_md, dst_md = make_descs(case)
    except Exception as e:
        out["error"] = f"MemoryDesc: {_err(e)}"
        return out
    sb, db = src_md.get_size(), dst_md.get_size()
    copy_bytes = (sb + db) // 2
    out.update(src_bytes=sb, dst_bytes=db, copy_bytes=copy_bytes,
               large=copy_bytes >= LARGE_BYTES)
    src = make_source(src_md)
    dst = aligned_empty(db, np.dtype(dst_md.dtype.storage))
    ca, cb = copy.buffers(copy_bytes)
    live = {n: p for n, p in peers.items() if p.available}
    out["peer_errors"] = {}
    out["info"] = {}
    out["verify"] = {}
    out["results"] = []
    ref: np.ndarray | None = None
    ref_name = None
    try:
        for ti, nthr in enumerate(st.threads):
            copy.set_threads(nthr)
            for p in live.values():
                try:
                    p.set_threads(nthr)
                except Exception as e:
                    out["peer_errors"].setdefault(p.name, _err(e))
            prepared: dict[str, Prepared] = {}
            for n, p in live.items():
                if n in out["peer_errors"]:
                    continue
                try:
                    prepared[n] = p.prepare(Job(case, src_md, dst_md, src, dst, nthr))
                    out["info"].setdefault(n, {})[str(nthr)] = prepared[n].info
                except Exception as e:
                    out["peer_errors"][n] = _err(e)
                    if st.verbose:
                        traceback.print_exc()
            if ti == 0 and st.verify:
                order = sorted(prepared, key=lambda n: n != "numpy")  # numpy is the reference
                for n in order:
                    dst.view(np.uint8).fill(GARBAGE)
                    try:
                        prepared[n].fn()
                    except Exception as e:
                        out["peer_errors"][n] = _err(e)
                        out["verify"][n] = {"status": "error", "detail": _err(e)}
                        continue
                    if ref is None:
                        ref = dst.copy()
                        ref_name = n
                        out["verify"][n] = {"status": "reference"}
                    else:
                        out["verify"][n] = compare_outputs(ref, dst, str(dst_md.dtype))
                out["verify_reference"] = ref_name
                ref = None
            for n in list(prepared):
                if n in out["peer_errors"]:
                    del prepared[n]
            cp = copy.prepare_copy(ca, cb, nthr)
            t0 = time.perf_counter()
            try:
                res = _timed_phase(cp.fn, {n: p.fn for n, p in prepared.items()}, st, probe,
                                   monitor, budget if budget is not None else {})
            except Exception as e:  # a contender failed while being timed
                out["peer_errors"][f"timing t={nthr}"] = _err(e)
                if st.verbose:
                    traceback.print_exc()
                continue
            res["threads"] = nthr
            res["copy"]["kind"] = cp.info["kind"]
            for n, pr in prepared.items():
                if pr.after is not None and n in res["contenders"]:
                    try:
                        res["contenders"][n].update(pr.after())
                    except Exception as e:
                        out["peer_errors"].setdefault(f"after t={nthr}", _err(e))
            res["timing_wall_s"] = time.perf_counter() - t0
            tot = sb + db
            res["copy"]["gbps"] = 2 * ca.nbytes / res["copy"]["median_s"] / 1e9
            for r in res["contenders"].values():
                r["gbps"] = tot / r["median_s"] / 1e9
            out["results"].append(res)
            _progress(case, out, res, log)
    finally:
        for p in live.values():
            try:
                p.finish_case()
            except Exception:
                pass
    return out


def _timed_phase(copy_fn: Any, fns: dict, st: Settings, probe: Any, monitor: Any,
                 budget: dict) -> dict:
    """``paired`` timing, repeated when other processes were busy meanwhile.

    A phase is *busy* when other processes (plus host steal) used at least
    ``st.load_threshold`` CPUs during it. It is then re-run, up to
    ``st.retries`` times, each after waiting (at most ``st.wait_s``) for the
    machine to be quiet; waits and re-runs together may take at most
    ``st.wait_budget_s`` over the whole run, which bounds the run time.
    The least disturbed attempt is kept; ``busy`` stays set if none was clean.
    """
    best: dict | None = None
    best_key: tuple = ()
    attempts = []
    for attempt in range(st.retries + 1):
        t_att = time.perf_counter()
        if attempt:
            left = st.wait_budget_s - budget.get("waited_s", 0.0)
            if left <= 0 or monitor is None:
                break  # the run's budget for waiting and re-running is spent
            monitor.wait_quiet(min(st.wait_s, left), st.load_threshold)
        a = monitor.snap() if monitor is not None else None
        res = paired(copy_fn, fns, repeats=st.repeats, warmup=st.warmup,
                     min_sample_s=st.min_sample_s, probe=probe, warmup_s=st.warmup_s)
        if attempt:  # waiting and re-running both count against the budget
            budget["waited_s"] = budget.get("waited_s", 0.0) + time.perf_counter() - t_att
        load = monitor.load(a, monitor.snap()) if monitor is not None else {}
        busy_cpu = (load.get("others_cpu") or 0.0) + (load.get("steal_cpu") or 0.0)
        res["load"] = load
        res["busy"] = bool(monitor is not None and monitor.ok and busy_cpu >= st.load_threshold)
        attempts.append({"busy_cpu": busy_cpu, "stable": res["stable"],
                         "rounds_disturbed": res["rounds_disturbed"]})
        key = (res["busy"], not res["stable"], busy_cpu)
        if best is None or key < best_key:
            best, best_key = res, key
        if not res["busy"] and res["stable"]:
            break
    assert best is not None
    best["attempts"] = attempts
    return best


def _progress(case: Case, out: dict, res: dict, log: Any) -> None:
    if log is None:
        return
    parts = [f"copy {res['copy']['median_s'] * 1e3:8.3f} ms"]
    for n, r in res["contenders"].items():
        parts.append(f"{n} {r['ratio']:.2f}" + (f" ({r['stores']} stores)" if r.get("stores") else ""))
    bad = [n for n, v in out.get("verify", {}).items() if v.get("status") in ("mismatch", "error")]
    flag = f"  !! {','.join(bad)} wrong" if bad else ""
    if res.get("busy"):
        flag += f"  [busy: others used {res['load'].get('others_cpu', 0):.2f} CPUs]"
    if res.get("rounds_disturbed"):
        flag += f"  ({res['rounds_disturbed']} disturbed rounds dropped" + (
            ", UNSTABLE)" if not res.get("stable", True) else ")")
    print(f"  {case.name:44s} t={res['threads']}  " + "  ".join(parts) + flag, file=log,
          flush=True)
