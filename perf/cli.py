"""Command line of the comparison harness (``python -m perf``)."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

DESCRIPTION = """\
Compare layoutjit's compiled reorders with a plain copy of the same traffic,
numpy, PyTorch and oneDNN v3 (ctypes), at 1 and 2 threads.

Each case allocates 64-byte-aligned source and destination buffers (numpy
allocations, so large ones get transparent huge pages), fills the source, and
checks every available peer's output against the numpy peer's once (bytes
equal, or within conversion rounding). Then, per thread count, each contender
is timed alternately with the copy baseline in the same loop: after warm-up,
--repeats rounds of [copy, contender] pairs, rotating the contender order.
Rounds in which a CPU probe saw a vCPU missing are replaced, and a phase during
which other processes used CPU is re-run after waiting for quiet (flagged BUSY
if it never was quiet): see perf.timing and perf.runner.

The copy baseline moves (src_bytes + dst_bytes) / 2 bytes: it reads and writes
as many bytes as the reorder has to read (src) and write (dst, padding
included). 1 thread: np.copyto of byte arrays; 2 threads: a Numba prange loop
b[i] = a[i]. GB/s columns count src_bytes + dst_bytes per call.

Ratios are time ratios from the paired medians (below 1 = faster):
"lj/copy" = median(layoutjit) / median(copy samples taken beside it);
"lj/numpy" = (lj/copy) / (numpy/copy), and so on.
"""

EPILOG = """\
examples:
  python -m perf                      quick subset (default, < 2 min)
  python -m perf --full               every case, incl. the 1 GiB one
  python -m perf --cases blocked      only names/groups containing 'blocked'
  python -m perf --cases nchw-nhwc,small --threads 1 --repeats 15
  python -m perf --case 64x96x28x28:nchw:nChw16c:f32:bf16   your own pair
  python -m perf --case-file perf/pairs_outside.txt          52 pairs beyond the list
  python -m perf --case-file perf/pairs_more.txt             36 more (112x112 planes, 5D, s8/u8)
  python -m perf --list               list the cases
  python -m perf --smoke --out /tmp/p tiny sizes, 1 repeat (tests)

outputs in --out: results.json (everything, incl. machine info and raw
times), table.txt, ratio_to_copy.png, time_vs_size.png
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m perf", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", const="quick", dest="mode",
                      help="the quick subset (default)")
    mode.add_argument("--full", action="store_const", const="full", dest="mode",
                      help="every case, including the 1 GiB one")
    mode.add_argument("--smoke", action="store_const", const="smoke", dest="mode",
                      help="tiny cases, 1 repeat, 1 warm-up call, no batching, no waiting "
                           "for quiet (for tests)")
    ap.add_argument("--cases", metavar="SUBSTRING",
                    help="keep cases whose name contains SUBSTRING or whose group equals it "
                         "(comma-separated alternatives; case-insensitive)")
    ap.add_argument("--case", action="append", default=[], metavar="DIMS:SRC:DST[:SDT[:DDT]]",
                    help="time this pair instead of the listed cases (repeatable), e.g. "
                         "8x256x56x56:nhwc:nChw16c:f32:bf16")
    ap.add_argument("--case-file", metavar="FILE",
                    help="time the pairs listed in FILE, one DIMS:SRC:DST[:SDT[:DDT]] per line "
                         "('#' starts a comment), e.g. perf/pairs_outside.txt")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="paired rounds per thread count (default 15; --smoke: 1)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed calls of everything before timing (default 2; --smoke: 1)")
    ap.add_argument("--warmup-ms", type=float, default=None,
                    help="keep warming up (after --warmup calls) until this long has passed "
                         "(default 100; --smoke: 0)")
    ap.add_argument("--min-sample-ms", type=float, default=None,
                    help="batch calls so a sample lasts at least this long (default 2; --smoke: 0)")
    ap.add_argument("--peers", default="layoutjit,numpy,torch,onednn",
                    help="contenders to run (default: layoutjit,numpy,torch,onednn)")
    ap.add_argument("--out", default=None,
                    help="output directory (default perf/results/ next to this package)")
    ap.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    ap.add_argument("--no-verify", action="store_true", help="skip the cross-peer output check")
    ap.add_argument("--retries", type=int, default=None,
                    help="re-runs of a timing phase during which other processes used CPU "
                         "(default 2; --smoke: 0)")
    ap.add_argument("--max-wait", type=float, default=None,
                    help="total seconds the run may spend waiting for other processes to "
                         "go quiet and re-running phases they disturbed (default 60; --smoke: 0)")
    ap.add_argument("--cold-cache", action="store_true",
                    help="point LAYOUTJIT_CACHE_DIR at a new empty directory, so the reported "
                         "layoutjit compile times are cold compiles, not disk-cache loads")
    ap.add_argument("--no-probe", action="store_true",
                    help="keep rounds in which the CPU probe saw a busy/absent vCPU "
                         "(by default they are dropped and replaced, see perf.timing)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print peer details (oneDNN impl names, numpy boxes, compile times)")
    a = ap.parse_args(argv)
    a.mode = a.mode or "quick"
    smoke = a.mode == "smoke"
    if a.repeats is None:
        a.repeats = 1 if smoke else 15
    if a.warmup is None:
        a.warmup = 1 if smoke else 2
    if a.max_wait is None:
        a.max_wait = 0.0 if smoke else 60.0
    if a.retries is None:
        a.retries = 0 if smoke else 2
    if a.min_sample_ms is None:
        a.min_sample_ms = 0.0 if smoke else 2.0
    if a.warmup_ms is None:
        a.warmup_ms = 0.0 if smoke else 100.0
    try:
        a.threads = tuple(int(x) for x in a.threads.split(",") if x.strip())
    except ValueError:
        ap.error(f"--threads: {a.threads!r} is not a comma-separated list of integers")
    if not a.threads or min(a.threads) < 1:
        ap.error("--threads needs positive integers")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from .cases import case_bytes, parse_spec, select

    specs = list(a.case)
    if a.case_file:
        try:
            text = Path(a.case_file).read_text()
        except OSError as e:
            print(f"--case-file: {e}", file=sys.stderr)
            return 2
        specs += [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]
    if specs:
        try:
            cases = [parse_spec(s) for s in specs]
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
    else:
        cases = select(mode=a.mode, substring=a.cases)
    if a.list:
        for c in cases:
            try:
                sb, db = case_bytes(c)
                sz = f"{(sb + db) / 1e6:10.3f} MB"
            except Exception as e:
                sz = f"error: {e}"
            flags = ("quick " if c.quick else "") + ("huge" if c.huge else "")
            print(f"{c.name:46s} {c.group:10s} {sz}  {flags}")
        what = "--case" if specs else a.mode + (", filter " + a.cases if a.cases else "")
        print(f"{len(cases)} cases ({what})")
        return 0
    if not cases:
        print(f"no case matches {a.cases!r}", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    out = Path(a.out) if a.out else Path(__file__).resolve().parent / "results"
    out.mkdir(parents=True, exist_ok=True)

    cold_dir = None
    if a.cold_cache:
        import os
        import tempfile

        cold_dir = tempfile.mkdtemp(prefix="layoutjit-perf-cache-")
        os.environ["LAYOUTJIT_CACHE_DIR"] = cold_dir
    # oneDNN must be loaded before torch (one libgomp for everybody): make_peers does that.
    from .peers import PEER_ORDER, CopyPeer, make_peers

    names = tuple(n.strip() for n in a.peers.split(",") if n.strip())
    unknown = [n for n in names if n not in PEER_ORDER]
    if unknown:
        print(f"unknown peer(s) {unknown}; choose from {list(PEER_ORDER)}", file=sys.stderr)
        return 2
    peers = make_peers(names)
    copy = CopyPeer()
    copy_compile_s = copy.warm_compile()

    import numba

    maxthr = numba.config.NUMBA_NUM_THREADS
    threads = tuple(t for t in a.threads if t <= maxthr)
    notes = []
    if len(threads) < len(a.threads):
        notes.append(f"thread counts above NUMBA_NUM_THREADS={maxthr} skipped: "
                     f"{[t for t in a.threads if t > maxthr]}")
    if not threads:
        print(notes[-1], file=sys.stderr)
        return 2
    if a.repeats < 7 and a.mode != "smoke":
        notes.append(f"--repeats {a.repeats} < 7: medians are not robust")

    from .report import (
        charts,
        derive,
        machine_info,
        software_info,
        summarize,
        summary_text,
        table,
        write_json,
    )
    from .runner import Settings, run_case

    print(f"perf: {len(cases)} cases ({'--case' if specs else a.mode}), threads {threads}, "
          f"{a.repeats} paired rounds")
    for n, p in peers.items():
        print(f"  {n:10s} {'yes' if p.available else 'NO '}  {p.version}  {p.note}")
    for n in notes:
        print("  note:", n)

    from .timing import LoadMonitor

    monitor = LoadMonitor()
    quiet = monitor.wait_quiet(min(a.max_wait, 10.0), 0.25, window_s=0.3 if a.max_wait else 0.05)
    budget = {"waited_s": quiet["waited_s"]}
    if not quiet["quiet"]:
        notes.append(f"machine busy at start: other processes used "
                     f"{quiet['others_cpu'] or 0:.2f} CPUs (steal {quiet['steal_cpu'] or 0:.2f})")
    probe = None
    if not a.no_probe:
        from .timing import CpuProbe

        probe = CpuProbe()
        for t in threads:
            numba.set_num_threads(t)
            probe.calibrate()
    st = Settings(threads=threads, repeats=a.repeats, warmup=a.warmup, warmup_s=a.warmup_ms / 1e3,
                  min_sample_s=a.min_sample_ms / 1e3, verify=not a.no_verify, verbose=a.verbose,
                  retries=a.retries, wait_budget_s=a.max_wait)
    results = []
    for c in cases:
        r = run_case(c, peers, copy, st, probe=probe, monitor=monitor, budget=budget)
        derive(r)
        if a.verbose:
            _verbose(r)
        if "error" in r:
            print(f"  {c.name}: {r['error']}")
        results.append(r)

    peer_desc = {n: p.describe() for n, p in peers.items()}
    summary = summarize(results, threads, peer_desc)
    tab = table(results, peer_desc)
    summ = summary_text(summary, peer_desc)
    print()
    print(tab)
    print()
    print(summ)
    files = []
    if not a.no_charts:
        try:
            files = charts(results, threads, out)
        except Exception as e:
            notes.append(f"charts failed: {type(e).__name__}: {e}")
    elapsed = time.perf_counter() - t_start
    doc = {
        "harness": "layoutjit perf", "schema": 1, "started": started, "elapsed_s": elapsed,
        "argv": sys.argv[1:] if argv is None else list(argv), "mode": a.mode,
        "settings": {"threads": list(threads), "repeats": a.repeats, "warmup": a.warmup,
                     "warmup_s": a.warmup_ms / 1e3,
                     "min_sample_s": a.min_sample_ms / 1e3, "verify": not a.no_verify,
                     "cpu_probe": None if probe is None else {
                         "iters": probe.iters, "ref_s": {str(k): v for k, v in probe.ref.items()}},
                     "case_filter": a.cases},
        "definitions": {
            "copy_bytes": "(src_bytes + dst_bytes) / 2; the copy reads and writes that many",
            "gbps": "(src_bytes + dst_bytes) / median time (copy: 2 * copy_bytes / time)",
            "ratio": "median(contender) / median(copy samples paired with it), same threads",
            "layoutjit/<peer>": "(layoutjit/copy) / (<peer>/copy)",
            "large": "copy_bytes >= 32 MiB",
            "cpu_threads": "process CPU time / wall time over >= 30 ms of calls of one "
                           "contender after its timing (a check that it ran on the phase's "
                           "threads; summary.over_threads lists any above threads + 0.5)"},
        "machine": machine_info(), "software": software_info(),
        "copy_baseline": {"compile_s": copy_compile_s, "note": copy.note},
        "load_at_start": quiet, "waited_s": budget.get("waited_s", 0.0),
        "peers": peer_desc, "notes": notes, "cases": results, "summary": summary,
        "charts": files,
    }
    write_json(out / "results.json", doc)
    (out / "table.txt").write_text(tab + "\n\n" + summ + "\n")
    for n in notes:
        print("note:", n)
    print(f"\nwrote {out / 'results.json'}, {out / 'table.txt'}"
          + (", " + ", ".join(Path(f).name for f in files) if files else ""))
    print(f"elapsed {elapsed:.1f} s")
    if cold_dir:
        import shutil

        shutil.rmtree(cold_dir, ignore_errors=True)
    return 1 if summary["verification_failures"] else 0


def _verbose(r: dict) -> None:
    for n, per_t in r.get("info", {}).items():
        for t, info in per_t.items():
            keep = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in info.items()}
            print(f"    {n} t={t}: {keep}")
    for n, e in r.get("peer_errors", {}).items():
        print(f"    {n} ERROR: {e}")
    for n, v in r.get("verify", {}).items():
        print(f"    verify {n}: {v}")
