"""Performance comparison harness for layoutjit (``python -m perf --help``).

Times layoutjit's compiled reorders against a plain copy of the same traffic
(the bandwidth bound), numpy, PyTorch and oneDNN v3's reorder primitive
(through ctypes), at 1 and 2 threads, with copy and contender samples taken
alternately in the same loop so that bandwidth drift cancels in the ratios.

Modules:

``cases``    the case list (``--quick`` subset, ``--full``, ``--smoke``)
``layout``   strided views over the common refinement of two layouts' digits
             (used by the numpy and torch peers; independent of layoutjit's compiler)
``peers``    copy, layoutjit, numpy, torch and oneDNN contenders
``onednn``   ctypes binding of oneDNN's C API (reorder only)
``timing``   paired alternating timing
``runner``   per case: buffers, cross-peer verification, timing per thread count
``report``   table, summary, JSON, charts
``cli``      the command line

After each phase every contender's CPU use (process CPU time over wall time) is
measured once more, so that a peer whose thread-count setting did not take
(oneDNN on two threads in a one-thread phase, say) shows in the summary.

The copy baseline moves ``(src_bytes + dst_bytes) / 2`` bytes, so it reads and
writes exactly as many bytes as the reorder has to read (the whole source
buffer) and write (the whole destination buffer, zero padding included).
"""
