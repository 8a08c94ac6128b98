"""A Pipeline: record steps once, let layoutjit pick layouts and fuse, then run it many times.

The pipeline takes an nchw f32 activation, moves it to the blocked layout this
CPU prefers ("any"), applies relu and a per-channel bias, and quantizes to u8.
Everything fuses into one kernel; a second pipeline with the same steps gets
its kernel from the cache; every run reuses the buffers allocated at build
time.

Run:  python examples/pipeline.py
"""

from __future__ import annotations

import time

import numpy as np

import layoutjit as lj


def record(src_md: lj.MemoryDesc, bias: np.ndarray, *, fuse: bool = True) -> lj.Pipeline:
    bias_md = lj.MemoryDesc((1, src_md.dims[1], 1, 1), "f32", "nchw")  # broadcasts over n, h, w
    p = lj.Pipeline(src_md, fuse=fuse)
    p.reorder("any")                      # resolved now: nChw16c with AVX-512, nChw8c with AVX2
    p.eltwise("relu")
    p.binary("add", bias_md, bias, name="bias")
    p.quantize("u8", scale=0.05, zero_point=10, name="q")
    return p


def main() -> None:
    dims = (8, 64, 28, 28)
    src_md = lj.MemoryDesc(dims, "f32", "nchw")
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, dims).astype(np.float32)
    bias = rng.normal(0, 0.5, dims[1]).astype(np.float32)

    p = record(src_md, bias)
    t0 = time.perf_counter()
    p.build()
    print(f"build #1: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    print(p.explain())

    t0 = time.perf_counter()
    p2 = record(src_md, bias).build()
    print(f"\nbuild #2 (same steps): {(time.perf_counter() - t0) * 1e3:.2f} ms; "
          f"kernels shared with #1: {all(a is b for a, b in zip(p.kernels, p2.kernels))}; "
          f"kernel origin: {p2.stats()[0]['origin']}")

    runs = 200
    y = p.run(x)
    t0 = time.perf_counter()
    for _ in range(runs):
        y2 = p.run(x)
    dt = (time.perf_counter() - t0) / runs
    assert y2 is y  # the same output buffer every run
    print(f"\n{runs + 1} runs, {dt * 1e3:.3f} ms per run (wall, Python call included)")
    print(p.format_stats())

    # check against numpy: relu, + bias, / scale, + zero point, round half to even, saturate
    acc = np.maximum(x, 0) + bias.reshape(1, -1, 1, 1)
    want = np.clip(np.rint(acc / np.float32(0.05) + 10), 0, 255).astype(np.uint8)
    got = lj.from_layout(y, p.output_md)
    print(f"\noutput {p.output_md}: equals the numpy formula: {np.array_equal(got, want)}")

    # the same steps without fusion: one kernel per step, an intermediate buffer each
    u = record(src_md, bias, fuse=False).build()
    for _ in range(runs):
        yu = u.run(x)
    print(f"\nunfused: {len(u.kernels)} kernels (results equal: "
          f"{np.array_equal(lj.from_layout(yu, u.output_md), got)})")
    print(u.format_stats())


if __name__ == "__main__":
    main()
