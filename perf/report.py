"""Text table, summary, machine information, JSON and PNG charts."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .peers import PEER_ORDER
from .timing import SLOW_RATIO, SLOW_ROUNDS

PEER_LABEL = {"layoutjit": "lj", "numpy": "numpy", "torch": "torch", "onednn": "oneDNN"}


# ------------------------------------------------------------------------- machine
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def machine_info() -> dict:
    info: dict[str, Any] = {"platform": platform.platform(), "python": sys.version.split()[0],
                            "logical_cpus": os.cpu_count()}
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    cpuinfo = _read("/proc/cpuinfo") or ""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and "cpu_model" not in info:
            info["cpu_model"] = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    info["simd"] = sorted(f for f in flags if f.startswith(("avx", "sse4", "f16c", "fma")))
    caches = {}
    for idx in range(8):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{idx}"
        lvl, typ, size = _read(base + "/level"), _read(base + "/type"), _read(base + "/size")
        if lvl and size:
            caches[f"L{lvl}{'d' if typ == 'Data' else 'i' if typ == 'Instruction' else ''}"] = size
    info["caches_cpu0"] = caches
    info["thp"] = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    mem = _read("/proc/meminfo") or ""
    for line in mem.splitlines():
        if line.startswith("MemTotal"):
            info["mem_total"] = line.split(":", 1)[1].strip()
    info["env"] = {k: v for k, v in os.environ.items()
                   if k.startswith(("OMP_", "GOMP_", "KMP_", "NUMBA_", "MKL_", "DNNL_", "ONEDNN_"))}
    return info


def software_info() -> dict:
    import numba
    import numpy as np

    out: dict[str, Any] = {"numpy": np.__version__, "numba": numba.__version__}
    try:
        import llvmlite

        out["llvmlite"] = llvmlite.__version__
    except Exception:
        pass
    try:
        out["numba_threading_layer"] = numba.threading_layer()
    except Exception as e:  # no parallel region run yet
        out["numba_threading_layer"] = f"unknown ({e})"
    out["numba_num_threads"] = numba.config.NUMBA_NUM_THREADS
    for mod in ("layoutjit", "ml_dtypes", "torch", "matplotlib"):
        m = sys.modules.get(mod)
        if m is None:
            try:
                m = __import__(mod)
            except Exception:
                continue
        out[mod] = getattr(m, "__version__", "?")
    # which OpenMP runtimes are mapped into this process
    maps = _read("/proc/self/maps") or ""
    libs = sorted({ln.split()[-1] for ln in maps.splitlines()
                   if any(k in ln for k in ("libgomp", "libiomp", "libomp", "libtbb"))})
    out["openmp_libraries_loaded"] = libs
    return out


# --------------------------------------------------------------------------- ratios
def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def derive(case_res: dict) -> None:
    """Add ``ratios`` to every per-thread result (in place).

    ``<peer>/copy`` is the paired ratio. ``layoutjit/<peer>`` divides the two
    copy-normalised ratios, so drift between their samples cancels.
    """
    for r in case_res.get("results", []):
        c = r["contenders"]
        rat: dict[str, float] = {}
        for n, v in c.items():
            rat[f"{n}/copy"] = v["ratio"]
        if "layoutjit" in c:
            for n in c:
                if n != "layoutjit":
                    rat[f"layoutjit/{n}"] = c["layoutjit"]["ratio"] / c[n]["ratio"]
        r["ratios"] = rat


def summarize(cases: list[dict], threads: tuple[int, ...], peers: dict) -> dict:
    out: dict = {"by_threads": {}}
    for t in threads:
        rows = [(c, r) for c in cases for r in c.get("results", []) if r["threads"] == t]
        s: dict[str, Any] = {"n_cases": len(rows)}
        for key in ("layoutjit/onednn", "layoutjit/copy", "layoutjit/numpy", "layoutjit/torch",
                    "numpy/copy", "torch/copy", "onednn/copy"):
            vals = [r["ratios"][key] for _, r in rows if key in r.get("ratios", {})]
            s[f"geomean {key}"] = geomean(vals)
            s[f"n {key}"] = len(vals)
        for p in PEER_ORDER:
            over = [{"case": c["name"], "ratio": r["ratios"][f"{p}/copy"]}
                    for c, r in rows if c.get("large") and f"{p}/copy" in r.get("ratios", {})
                    and r["ratios"][f"{p}/copy"] > 1.1]
            s[f"large cases over 1.1x copy: {p}"] = over
        s["large cases"] = [c["name"] for c, _ in rows if c.get("large")]
        out["by_threads"][str(t)] = s
    ct = [c["info"]["layoutjit"][k]["compile_s"] for c in cases
          for k in c.get("info", {}).get("layoutjit", {})
          if "compile_s" in c["info"]["layoutjit"][k]]
    out["layoutjit_compile_s"] = {"n": len(ct), "total": sum(ct),
                                  "median": sorted(ct)[len(ct) // 2] if ct else None}
    impls: dict[str, list[str]] = {}
    for c in cases:
        for t, info in c.get("info", {}).get("onednn", {}).items():
            if "impl" in info and t == str(threads[0]):
                impls.setdefault(info["impl"], []).append(c["name"])
    out["onednn_impls"] = impls
    bad = []
    for c in cases:
        for n, v in c.get("verify", {}).items():
            if v.get("status") in ("mismatch", "error"):
                bad.append({"case": c["name"], "peer": n, **v})
    out["verification_failures"] = bad
    out["unstable_results"] = [{"case": c["name"], "threads": r["threads"]}
                               for c in cases for r in c.get("results", [])
                               if not r.get("stable", True)]
    out["busy_results"] = [{"case": c["name"], "threads": r["threads"],
                            "others_cpu": r.get("load", {}).get("others_cpu")}
                           for c in cases for r in c.get("results", []) if r.get("busy")]
    # a contender that kept more CPUs busy than its phase's thread count (0.5 of slack for
    # clock granularity and the caller's own work between calls)
    out["over_threads"] = [{"case": c["name"], "threads": r["threads"], "peer": n,
                            "cpu_threads": round(v["cpu_threads"], 2)}
                           for c in cases for r in c.get("results", [])
                           for n, v in [("copy", r["copy"]), *r["contenders"].items()]
                           if v.get("cpu_threads", 0) > r["threads"] + 0.5]
    out["slow_peers"] = [{"case": c["name"], "threads": r["threads"], "peer": n}
                         for c in cases for r in c.get("results", [])
                         for n, v in r["contenders"].items() if v.get("slow")]
    out["disturbed_rounds_dropped"] = sum(r.get("rounds_disturbed", 0)
                                          for c in cases for r in c.get("results", []))
    # kernels that timed plain against NT stores at run time: what each kept
    out["store_choices"] = [{"case": c["name"], "threads": r["threads"],
                             "stores": r["contenders"]["layoutjit"]["stores"]}
                            for c in cases for r in c.get("results", [])
                            if r["contenders"].get("layoutjit", {}).get("stores")]
    return out


# ---------------------------------------------------------------------------- text
def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def table(cases: list[dict], peers: dict) -> str:
    """One row per case and thread count. Ratios are time ratios (< 1: faster)."""
    have = [p for p in PEER_ORDER if p in peers and peers[p].get("available")]
    others = [p for p in ("numpy", "torch", "onednn") if p in have]
    hdr = ["case", "MB", "thr", "copy GB/s", "lj GB/s", "lj/copy"]
    hdr += [f"lj/{PEER_LABEL[p]}" for p in others]
    hdr += [f"{PEER_LABEL[p]}/copy" for p in others]
    hdr += ["check"]
    rows = [hdr]
    for c in cases:
        if "error" in c:
            rows.append([c["name"], "-", "-", c["error"][:60]] + [""] * (len(hdr) - 4))
            continue
        mb = (c["src_bytes"] + c["dst_bytes"]) / 1e6
        bad = [PEER_LABEL.get(n, n) for n, v in c.get("verify", {}).items()
               if v.get("status") in ("mismatch", "error")]
        errs = [PEER_LABEL.get(n, n) for n in c.get("peer_errors", {})]
        ftz = [PEER_LABEL.get(n, n) for n, v in c.get("verify", {}).items()
               if v.get("status") == "denormals_flushed"]
        chk = "ok" if not bad and not errs else ""
        if ftz and chk:
            chk += " (ftz:" + ",".join(ftz) + ")"
        if bad:
            chk += "WRONG:" + ",".join(bad)
        if errs and not bad:
            chk += "err:" + ",".join(errs)
        for r in c["results"]:
            ct = r["contenders"]
            rchk = chk + ("" if r.get("stable", True) else " UNSTABLE") + (
                f" BUSY({r['load'].get('others_cpu') or 0:.1f})" if r.get("busy") else "") + (
                f" ({r['rounds_disturbed']}d)" if r.get("rounds_disturbed") else "")
            rat = r.get("ratios", {})
            lj = ct.get("layoutjit")
            row = [c["name"], f"{mb:.3g}" if mb < 10 else f"{mb:.0f}", str(r["threads"]),
                   _f(r["copy"]["gbps"], "{:.1f}"), _f(lj["gbps"] if lj else None, "{:.1f}"),
                   _f(rat.get("layoutjit/copy"))]
            row += [_f(rat.get(f"layoutjit/{p}")) for p in others]
            row += [_f(rat.get(f"{p}/copy")) for p in others]
            row += [rchk]
            rows.append(row)
    w = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
    lines = []
    for k, r in enumerate(rows):
        cells = [r[0].ljust(w[0])] + [r[i].rjust(w[i]) for i in range(1, len(r) - 1)] + [r[-1]]
        lines.append("  ".join(cells))
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def summary_text(summary: dict, peers: dict) -> str:
    lines = []
    lj_ok = peers.get("layoutjit", {}).get("available")
    for t, s in summary["by_threads"].items():
        parts = [f"threads={t}:"]
        if lj_ok:
            parts.append(f"geomean layoutjit/oneDNN {_f(s['geomean layoutjit/onednn'])} "
                         f"(n={s['n layoutjit/onednn']}),")
            parts.append(f"layoutjit/copy {_f(s['geomean layoutjit/copy'])} "
                         f"(n={s['n layoutjit/copy']});")
            over = s["large cases over 1.1x copy: layoutjit"]
            parts.append("large cases > 1.1x copy: " + (
                ", ".join(f"{o['case']} ({o['ratio']:.2f})" for o in over) if over else "none")
                + f" (of {len(s['large cases'])})")
        else:
            parts.append(f"layoutjit unavailable ({peers.get('layoutjit', {}).get('note', '')});")
        peer_parts = [f"{PEER_LABEL[p]}/copy {_f(s.get(f'geomean {p}/copy'))}"
                      for p in ("numpy", "torch", "onednn") if s.get(f"n {p}/copy")]
        if peer_parts:
            parts.append("| peers geomean: " + ", ".join(peer_parts))
        lines.append(" ".join(parts))
    if summary.get("onednn_impls"):
        lines.append("oneDNN implementations: " + ", ".join(
            f"{k} x{len(v)}" for k, v in sorted(summary["onednn_impls"].items())))
    ct = summary["layoutjit_compile_s"]
    if ct["n"]:
        lines.append(f"layoutjit compile: {ct['n']} kernels, total {ct['total']:.1f} s, "
                     f"median {ct['median']:.2f} s")
    if summary.get("disturbed_rounds_dropped"):
        lines.append(f"CPU probe: {summary['disturbed_rounds_dropped']} disturbed rounds dropped; "
                     f"{len(summary['unstable_results'])} results unstable (too few clean rounds)")
    if summary.get("store_choices"):
        kept: dict[str, int] = {}
        for o in summary["store_choices"]:
            kept[o["stores"]] = kept.get(o["stores"], 0) + 1
        lines.append("layoutjit stores timed at run time (Plan.nt_tune), kept: " + ", ".join(
            f"{k} x{v}" for k, v in sorted(kept.items())) + " (per case: results.json)")
    if summary.get("slow_peers"):
        per: dict[str, int] = {}
        for o in summary["slow_peers"]:
            per[o["peer"]] = per.get(o["peer"], 0) + 1
        lines.append(f"slow peers (first two calls over {SLOW_RATIO:g}x the copy; timed in {SLOW_ROUNDS} "
                     "rounds): " + ", ".join(
            f"{p} x{k}" for p, k in sorted(per.items())))
    if summary.get("over_threads"):
        lines.append("CPU check: used more CPUs than their thread count: " + "; ".join(
            f"{o['peer']} {o['case']} threads={o['threads']}: {o['cpu_threads']:.1f}"
            for o in summary["over_threads"]))
    elif "over_threads" in summary:
        lines.append("CPU check: no contender used more CPUs than its thread count")
    if summary.get("busy_results"):
        lines.append(f"BUSY: {len(summary['busy_results'])} results were timed while other "
                     "processes used CPU (marked BUSY(cpus)); their ratios are unreliable")
    if summary["verification_failures"]:
        lines.append("VERIFICATION FAILURES: " + "; ".join(
            f"{b['case']}:{b['peer']} {b.get('status')}" for b in summary["verification_failures"]))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- json
def _clean(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            return _clean(x.item())
        except Exception:
            return str(x)
    return x


def write_json(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(_clean(doc), indent=1))


# --------------------------------------------------------------------------- charts
def charts(cases: list[dict], threads: tuple[int, ...], out: Path) -> list[str]:
    """``ratio_to_copy.png`` and ``time_vs_size.png``; returns the written paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [c for c in cases if c.get("results")]
    if not done:
        return []
    colors = {"layoutjit": "tab:red", "numpy": "tab:blue", "torch": "tab:orange",
              "onednn": "tab:green", "copy": "black"}
    peers = [p for p in PEER_ORDER if any(p in r["contenders"] for c in done for r in c["results"])]
    files = []

    # 1. ratio to copy, per case, per peer
    fig, axes = plt.subplots(len(threads), 1, figsize=(max(8, 0.45 * len(done) + 3),
                                                       3.6 * len(threads)), squeeze=False)
    for ax, t in zip(axes[:, 0], threads):
        width = 0.8 / max(1, len(peers))
        for j, p in enumerate(peers):
            xs, ys = [], []
            for i, c in enumerate(done):
                for r in c["results"]:
                    if r["threads"] == t and p in r["contenders"]:
                        xs.append(i + (j - (len(peers) - 1) / 2) * width)
                        ys.append(r["contenders"][p]["ratio"])
            ax.bar(xs, ys, width=width, color=colors[p], label=p)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("time / copy time")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}: reorder time relative to a copy of the same bytes")
        ax.set_xticks(range(len(done)))
        ax.set_xticklabels([c["name"] for c in done], rotation=70, ha="right", fontsize=7)
        ax.legend(fontsize=8, ncol=len(peers))
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    p1 = out / "ratio_to_copy.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)
    files.append(str(p1))

    # 2. time against size
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
    for ax, t in zip(axes[0], threads):
        for p in ["copy"] + peers:
            pts = []
            for c in done:
                for r in c["results"]:
                    if r["threads"] != t:
                        continue
                    size = c["src_bytes"] + c["dst_bytes"]
                    if p == "copy":
                        pts.append((size, r["copy"]["median_s"]))
                    elif p in r["contenders"]:
                        pts.append((size, r["contenders"][p]["median_s"]))
            if pts and p == "copy":  # one point per size: the median over cases of that size
                by: dict[int, list[float]] = {}
                for x, y in pts:
                    by.setdefault(x, []).append(y)
                pts = [(x, sorted(v)[len(v) // 2]) for x, v in by.items()]
            if pts:
                pts.sort()
                ax.plot([x for x, _ in pts], [y for _, y in pts], "o" if p != "copy" else "-",
                        color=colors[p], label=p, ms=4, alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes moved (src + dst)")
        ax.set_ylabel("median time per call (s)")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}")
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    p2 = out / "time_vs_size.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    files.append(str(p2))
    return files
