"""layoutjit in five minutes: describe layouts, compile a reorder, run it, read what it does.

Run:  python examples/quickstart.py
"""

from __future__ import annotations

import numpy as np

import layoutjit as lj


def main() -> None:
    # 1. Describe the memory: dims are always logical (N, C, H, W); the tag says how they lie
    #    in memory. nChw16c blocks channels by 16, so C = 17 is padded to 32 with zeros.
    dims = [2, 17, 5, 4]
    src_md = lj.MemoryDesc(dims, "f32", "nchw")
    dst_md = lj.MemoryDesc(dims, "f32", "nChw16c")
    print("source     :", src_md, f"({src_md.get_size()} bytes)")
    print("destination:", dst_md, f"({dst_md.get_size()} bytes, padded dims {dst_md.padded_dims})")
    print("element offset of (n=0, c=9, h=0, w=1) in nChw16c:", dst_md.offset_of([0, 9, 0, 1]))

    # 2. Compile (once per pair of layouts; later calls come from the cache) and run.
    k = lj.compile_reorder(src_md, dst_md)
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    y = k(x)                            # allocates a 64-byte aligned destination
    print("\nfirst pixel of the blocked output, channels 0..15 (one block):")
    print(y[:16])
    print("second channel block of the first pixel (channel 16, then 15 zeros):")
    print(y[5 * 4 * 16: 5 * 4 * 16 + 16])
    back = lj.compile_reorder(dst_md, src_md)(y)
    print("round trip exact:", np.array_equal(back.reshape(dims), x))

    # 3. Logical arrays in and out of any layout, and Memory objects (descriptor + buffer).
    small = x % 64  # integers below 256 are exact in bf16
    m = lj.Memory.from_numpy(small, lj.MemoryDesc(dims, "bf16", "nChw8c"))
    print("\nMemory:", m)
    print("to_numpy() gives the values back:", np.array_equal(m.to_numpy().astype(np.float32), small))

    # 4. Elementwise ops on any layout, in place; the zero padding stays zero.
    one_minus = lj.compile_eltwise(dst_md, "linear", alpha=-1.0, beta=1.0)  # 1 - x: f(0) = 1
    one_minus(y, y)
    print("after 1 - x in place, padding still zero:", not y.reshape(2, 2, 5, 4, 16)[:, 1, :, :, 1:].any())

    # 5. What did the compiler do? The plan, and the generated source it compiled.
    print("\n" + "=" * 30 + " the kernel, explained " + "=" * 30)
    explain = getattr(k, "explain", None)
    if explain is not None:
        print(explain())
    else:  # older layoutjit: the raw plan and source
        print(k.plan)
        print(k.source)


if __name__ == "__main__":
    main()
