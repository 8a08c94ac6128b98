"""Long differential fuzz runs: ``python tests/fuzz_long.py --minutes 30``.

Runs the cases of ``tests/test_fuzz.py`` (hypothesis-generated layouts, data
types and attributes against the numpy references, with guard pages and
sentinels around every buffer) in isolated worker processes that share one
fresh cache directory, until the time is up. Half of the workers plan with
tiny parallel/non-temporal thresholds (``LAYOUTJIT_PARALLEL_MIN_BYTES``,
``LAYOUTJIT_NT_MIN_BYTES``, ``LAYOUTJIT_NT_MIN_TRANSPOSE_BYTES``) so those code paths run
on small tensors too.

Prints progress (cases, cases/s, failures) every ``--report`` seconds and, at
the end, every distinct failure with a reproducer: Python code that reruns
the case from the repository root. A worker that crashes (e.g. SIGSEGV on a
guard page) or hangs is reported with the case it was running, and replaced.
Exit status 1 when anything failed.

Options: ``--workers N`` (default: CPU count), ``--cache-dir DIR`` (default: a
temporary directory, removed at the end), ``--out DIR`` (keep the logs),
``--shrink`` (let hypothesis minimize failing cases; slower).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASE_TIMEOUT_S = 180.0


# ------------------------------------------------------------------------ worker side
def worker(out: Path, deadline: float, shrink: bool) -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import warnings

    warnings.simplefilter("ignore")
    from hypothesis import HealthCheck, Phase, given, settings

    import layoutjit as lj
    from test_fuzz import Case, cases, run_case

    pid = os.getpid()
    current = out / f"current-{pid}.py"
    stats = {"cases": 0, "reorder": 0, "attrs": 0, "eltwise": 0, "small_thresholds": 0,
             "unimplemented": 0, "failures": []}
    state: dict = {"failed": None}

    def save() -> None:
        tmp = out / f".stats-{pid}.json"
        tmp.write_text(json.dumps(stats))
        os.replace(tmp, out / f"stats-{pid}.json")

    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    @settings(max_examples=20, deadline=None, database=None, phases=phases,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def batch(case: Case) -> None:
        if time.time() > deadline:
            return
        current.write_text(case.reproducer())
        try:
            kind = run_case(case)
        except lj.Unimplemented:
            stats["unimplemented"] += 1
            return
        except BaseException as e:
            state["failed"] = (case, f"{type(e).__name__}: {e}", traceback.format_exc(limit=6))
            raise
        stats["cases"] += 1
        stats[kind] += 1
        stats["small_thresholds"] += bool(case.small_thresholds)

    last_save = 0.0
    while time.time() < deadline:
        state["failed"] = None
        try:
            batch()
        except BaseException:
            if state["failed"] is not None:
                case, msg, tb = state["failed"]
                stats["cases"] += 1
                stats["failures"].append({"message": msg, "traceback": tb, "reproducer": case.reproducer()})
            else:
                stats["failures"].append({"message": "hypothesis: " + traceback.format_exc(limit=3),
                                          "traceback": "", "reproducer": ""})
            save()
        if time.time() - last_save > 5:
            save()
            last_save = time.time()
    save()
    current.unlink(missing_ok=True)


# ------------------------------------------------------------------------ parent side
def _spawn(i: int, out: Path, deadline: float, cache: Path, shrink: bool) -> subprocess.Popen:
    env = dict(os.environ, LAYOUTJIT_CACHE_DIR=str(cache), PYTHONHASHSEED=str(i))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    if i % 2 == 1:
        env["LAYOUTJIT_PARALLEL_MIN_BYTES"] = "2048"
        env["LAYOUTJIT_NT_MIN_BYTES"] = "4096"
        env["LAYOUTJIT_NT_MIN_TRANSPOSE_BYTES"] = "4096"
    args = [sys.executable, str(Path(__file__).resolve()), "--worker", "--out", str(out),
            "--deadline", repr(deadline)] + (["--shrink"] if shrink else [])
    return subprocess.Popen(args, env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL,
                            stderr=open(out / f"worker-{i}-{time.time():.0f}.log", "w"))


def _collect(out: Path) -> dict:
    total = {"cases": 0, "reorder": 0, "attrs": 0, "eltwise": 0, "small_thresholds": 0,
             "unimplemented": 0, "failures": []}
    for f in out.glob("stats-*.json"):
        try:
            s = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        for k in total:
            total[k] += s.get(k, 0 if k != "failures" else [])
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--out", type=Path)
    p.add_argument("--report", type=float, default=60.0, help="seconds between progress lines")
    p.add_argument("--shrink", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.out, a.deadline, a.shrink)
        return 0

    out = a.out or Path(tempfile.mkdtemp(prefix="lj-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = a.cache_dir or Path(tempfile.mkdtemp(prefix="lj-fuzz-cache-"))
    t0 = time.time()
    deadline = t0 + a.minutes * 60
    crashes: list[dict] = []
    procs = {i: _spawn(i, out, deadline, cache, a.shrink) for i in range(a.workers)}
    spawned = a.workers
    print(f"fuzzing for {a.minutes:g} min with {a.workers} workers; cache {cache}; logs {out}", flush=True)
    next_report = t0 + a.report
    try:
        while procs:
            time.sleep(1.0)
            for i, pr in list(procs.items()):
                rc = pr.poll()
                cur = out / f"current-{pr.pid}.py"
                hung = rc is None and cur.exists() and time.time() - cur.stat().st_mtime > CASE_TIMEOUT_S
                if hung:
                    pr.send_signal(signal.SIGKILL)
                    pr.wait()
                    rc = pr.returncode
                if rc is None:
                    continue
                del procs[i]
                if rc != 0:
                    repro = cur.read_text() if cur.exists() else ""
                    why = f"hang (> {CASE_TIMEOUT_S:.0f} s in one case)" if hung else \
                        (f"crash: signal {-rc}" if rc < 0 else f"exit status {rc}")
                    crashes.append({"message": f"worker {why}", "traceback": "", "reproducer": repro})
                    cur.unlink(missing_ok=True)
                    if time.time() < deadline - 10:
                        procs[spawned] = _spawn(spawned, out, deadline, cache, a.shrink)
                        spawned += 1
            now = time.time()
            if now >= next_report or not procs:
                s = _collect(out)
                el = now - t0
                print(f"[{el / 60:5.1f} min] {s['cases']} cases ({s['cases'] / max(el, 1e-9):.2f}/s): "
                      f"{s['reorder']} reorders, {s['attrs']} with attributes, {s['eltwise']} in-place eltwise, "
                      f"{s['small_thresholds']} with small thresholds; "
                      f"failures {len(s['failures']) + len(crashes)}", flush=True)
                next_report = now + a.report
    except KeyboardInterrupt:
        for pr in procs.values():
            pr.send_signal(signal.SIGINT)
        for pr in procs.values():
            pr.wait()
    s = _collect(out)
    fails = s["failures"] + crashes
    el = time.time() - t0
    print(f"\ndone: {s['cases']} cases in {el / 60:.1f} min ({s['cases'] / max(el, 1e-9):.2f} cases/s), "
          f"{s['unimplemented']} refused as unimplemented, {len(fails)} failure(s)")
    seen = set()
    for f in fails:
        key = f["message"].splitlines()[0][:200] if f["message"] else ""
        if key in seen:
            continue
        seen.add(key)
        print("\n=== FAILURE:", f["message"][:2000])
        if f["traceback"]:
            print(f["traceback"])
        print("--- reproducer (run from the repository root) ---")
        print(f["reproducer"] or "(none)")
    if a.cache_dir is None:
        shutil.rmtree(cache, ignore_errors=True)
    if a.out is None and not fails:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
