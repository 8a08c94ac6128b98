"""Quantize a convolution's weights and activations to int8 the way oneDNN wants them.

* Weights: oihw f32 -> OIhw16i16o (and OIhw4i16o4i) s8, one scale per output
  channel (mask 1 << 0: the scale varies along dim 0, "o").
* Activations: nchw f32 -> nChw16c u8 with one scale and one zero point for
  the whole tensor (mask 0).
* Then dequantize both back to f32 and report the error against the
  originals: at most half a quantization step wherever nothing saturates.

oneDNN's formula, in f32: ``dst = saturate(round_half_even(src / dst_scale + dst_zp))``
and back ``src_scale * (q - src_zp)``.

Run:  python examples/int8_quantization.py
"""

from __future__ import annotations

import numpy as np

import layoutjit as lj


def weights(rng: np.random.Generator) -> None:
    oc, ic, kh, kw = 64, 35, 3, 3
    w = (rng.standard_normal((oc, ic, kh, kw)) * rng.uniform(0.01, 0.5, (oc, 1, 1, 1))).astype(np.float32)
    # symmetric per-output-channel scales: the largest |w| of each output channel maps to 127
    scales = (np.abs(w).reshape(oc, -1).max(axis=1) / 127).astype(np.float32)
    src_md = lj.MemoryDesc(w.shape, "f32", "oihw")
    print(f"weights {w.shape}, per-output-channel scales in [{scales.min():.2e}, {scales.max():.2e}]")
    for tag in ("OIhw16i16o", "OIhw4i16o4i"):
        q_md = lj.MemoryDesc(w.shape, "s8", tag)
        quant = lj.compile_reorder(src_md, q_md, scales={"dst": 1 << 0})
        q = quant(w, scales={"dst": scales})
        # dequantize straight back to the plain layout
        deq = lj.compile_reorder(q_md, src_md, scales={"src": 1 << 0})
        back = deq(q, scales={"src": scales}).reshape(w.shape)
        err = np.abs(back - w)
        bound = scales.reshape(oc, 1, 1, 1) / 2
        print(f"  {tag:<12} {q_md.get_size():>6} bytes (I padded {ic} -> {q_md.padded_dims[1]}); "
              f"max |error| {err.max():.2e}, max error / half step {np.max(err / bound):.3f}")
        assert np.all(err <= bound * (1 + 1e-5))


def activations(rng: np.random.Generator) -> None:
    dims = (4, 35, 14, 14)
    x = rng.normal(0.8, 1.0, dims).astype(np.float32)
    lo, hi = np.percentile(x, [0.1, 99.9])  # calibrate on the bulk; the tails saturate
    scale = np.float32((hi - lo) / 255)
    zp = int(np.clip(round(-lo / scale), 0, 255))
    src_md = lj.MemoryDesc(dims, "f32", "nchw")
    q_md = lj.MemoryDesc(dims, "u8", "nChw16c")
    print(f"\nactivations {dims}, range [{x.min():.2f}, {x.max():.2f}]; "
          f"per-tensor scale {scale:.4f}, zero point {zp}")
    quant = lj.compile_reorder(src_md, q_md, scales={"dst": 0}, zero_points={"dst": 0})
    q = quant(x, scales={"dst": [scale]}, zero_points={"dst": [zp]})
    deq = lj.compile_reorder(q_md, src_md, scales={"src": 0}, zero_points={"src": 0})
    back = deq(q, scales={"src": [scale]}, zero_points={"src": [zp]}).reshape(dims)
    qv = lj.from_layout(q, q_md)
    saturated = (qv == 0) | (qv == 255)
    err = np.abs(back - x)
    print(f"  nChw16c u8: {q_md.get_size()} bytes vs {src_md.get_size()} f32; "
          f"{saturated.mean() * 100:.2f}% saturated")
    print(f"  max |error| where not saturated {err[~saturated].max():.4f} (half a step: {scale / 2:.4f}); "
          f"mean |error| {err.mean():.4f}")
    pad = q.reshape(dims[0], 3, 14, 14, 16)[:, 2, :, :, 3:]  # channels 35..47 of the last block
    print(f"  padding channels all zero: {not pad.any()}")
    assert err[~saturated].max() <= scale / 2 * (1 + 1e-3)


def main() -> None:
    rng = np.random.default_rng(0)
    weights(rng)
    activations(rng)


if __name__ == "__main__":
    main()
