"""The command line: ``python -m layoutjit`` (or the ``layoutjit`` console script).

Commands::

    layoutjit explain --dims 2x17x5x4 [--sdt f32 --ddt bf16] SRC DST
    layoutjit tags [NAME] [--dims DIMS] [--long] [--abstract] [--grep TEXT]
    layoutjit bench [--smoke | --quick | --full] [--cases TEXT] [-- PERF ARGS...]
    layoutjit cache [--clear] [--path]

User errors (an unknown tag, dims that do not fit a tag, a bad option) print one
line to stderr and exit with status 2; ``--help`` works on every command.

>>> main(["tags", "--grep", "nChw16c"])
activations and data (n, c, spatial dims; t = time): 1 alias
  4 dims (1): nChw16c
0
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import __version__
from .dtypes import BY_NAME
from .errors import LayoutError

__all__ = ["main", "build_parser", "parse_dims", "alias_group"]

DTYPES = tuple(BY_NAME)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``prog: error: ... (see prog --help)``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


def parse_dims(text: str) -> tuple[int, ...]:
    """Parse ``2x17x5x4`` (or ``2,17,5,4``) into a tuple of ints.

    >>> parse_dims("2x17x5x4")
    (2, 17, 5, 4)
    """
    parts = [p for p in re.split(r"[x,\s]+", text.strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of dims like 2x17x5x4 (non-negative integers joined by x)")
    return tuple(int(p) for p in parts)


# ------------------------------------------------------------------ explain
EXPLAIN_DESC = """\
Explain the reorder SRC -> DST: both memory descriptors (padded dims, strides,
inner blocks, size), the loop-nest IR (the common refinement of both layouts'
index digits), the plan (merged and ordered loops, micro-kernel, parallel split)
and the generated Python source that Numba compiles. The kernel is compiled
(or loaded from the disk cache) on the way, so this also checks it builds.

SRC and DST are format tags: oneDNN aliases (nchw, nhwc, nChw16c, OIhw16i16o,
goihw, ...) or abstract tags of the grammar (abcd, acdb, aBcd16b, ABcd8a16b2a);
see 'layoutjit tags'."""

EXPLAIN_EPILOG = """\
examples:
  layoutjit explain --dims 2x17x5x4 nchw nChw16c     C=17 padded to 32 with zeros
  layoutjit explain --dims 2x17x5x4 --sdt f32 --ddt bf16 nchw nChw16c
  layoutjit explain --dims 64x64 ab ba --no-source"""


def _cmd_explain(a: argparse.Namespace) -> int:
    from .desc import MemoryDesc
    from .explain import default_dims, explain
    from .tags import parse_tag

    src_tag, dst_tag = a.src, a.dst
    dims = a.dims
    if dims is None:
        dims = default_dims(parse_tag(src_tag).ndims)
    sdt = a.sdt or a.dt
    ddt = a.ddt or a.dt
    src = MemoryDesc(dims, sdt, src_tag)
    dst = MemoryDesc(dims, ddt, dst_tag)
    text = explain(src, dst)
    if a.no_source:
        text = text.split("\n== generated source", 1)[0] + "\n"
    sys.stdout.write(text)
    return 0


# --------------------------------------------------------------------- tags
TAGS_DESC = """\
Without NAME: list oneDNN's tag aliases, grouped by domain and by number of dims,
with counts. With NAME: describe one tag or alias -- its abstract form, how the
grammar reads it, its padded dims, strides and blocks for some dims, and a
picture of the order in which the elements of a tiny tensor sit in memory.

The grammar (every abstract tag is parsed, none is looked up):
  ABcd8a16b2a
  ^^^^          outer dims, outermost first; upper case = that dim is also blocked
      ^^^^^^^   inner blocks, outermost first: 8 of a, then 16 of b, then 2 of a
                (a dim may be blocked more than once; the product pads it: a -> 16)
Aliases name abstract tags with domain letters: nchw = abcd, nChw16c = aBcd16b,
OIhw16i16o = ABcd16b16a. 'any' is the placeholder format a Pipeline resolves."""

TAGS_EPILOG = """\
examples:
  layoutjit tags                       every alias, grouped, with counts
  layoutjit tags --grep 16c            aliases containing '16c'
  layoutjit tags --long --grep OIhw    one alias per line with its abstract tag
  layoutjit tags nChw16c               describe one tag (default dims 2x17x5x4)
  layoutjit tags ABcd8a16b2a --dims 3x3x1x1"""

_GROUPS = (
    ("activations and data (n, c, spatial dims; t = time)", "data"),
    ("weights (o, i, spatial dims)", "weights"),
    ("grouped weights (g, o, i, spatial dims)", "grouped"),
    ("RNN weights and states (l, d, g, o, i, ...)", "rnn"),
    ("other", "other"),
)


def alias_group(name: str) -> str:
    """Domain of an alias from its letters: data, weights, grouped, rnn or other.

    >>> alias_group("nChw16c"), alias_group("OIhw16i16o"), alias_group("gOIhw16i16o"), alias_group("ldigo")
    ('data', 'weights', 'grouped', 'rnn')
    """
    m = re.match(r"^[a-zA-Z]+", name)
    letters = set(m.group(0).lower()) if m else set()
    if "l" in letters:
        return "rnn"
    if "o" in letters and "i" in letters:
        return "grouped" if "g" in letters else "weights"
    if letters and letters <= set("ncdhwtx"):
        return "data"
    return "other"


def _wrap(names: Sequence[str], indent: str, width: int = 100) -> list[str]:
    lines: list[str] = []
    cur = indent
    for n in names:
        if len(cur) + len(n) + 1 > width and cur.strip():
            lines.append(cur.rstrip())
            cur = indent
        cur += n + " "
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


def _cmd_tags(a: argparse.Namespace) -> int:
    from .tags import abstract_tags, aliases, parse_tag

    if a.name:
        from .explain import describe_tag

        if a.name == "any":
            print("any: the placeholder format. MemoryDesc(dims, dtype, 'any') has no layout yet;\n"
                  "a Pipeline (or the caller) resolves it to a concrete tag before a kernel is built.")
            return 0
        parse_tag(a.name)  # a clear error for an unknown name before anything else
        print(describe_tag(a.name, a.dims, a.dt))
        return 0
    table = aliases()
    grep = a.grep.lower() if a.grep else None
    names = [n for n in table if grep is None or grep in n.lower() or grep in table[n].lower()]
    order = {n: i for i, n in enumerate(table)}
    n_abs = len(abstract_tags())
    if grep is None:
        print(f"{len(table)} aliases of oneDNN's {n_abs} abstract tags (data/format_tags.json); any tag "
              f"the grammar accepts works too.\n'layoutjit tags NAME' explains one; 'any' is the "
              f"placeholder format.\n")
    shown = 0
    for title, key in _GROUPS:
        group = [n for n in names if alias_group(n) == key]
        if not group:
            continue
        shown += len(group)
        print(f"{title}: {len(group)} alias{'es' if len(group) != 1 else ''}")
        by_nd: dict[int, list[str]] = {}
        for n in group:
            by_nd.setdefault(parse_tag(n).ndims, []).append(n)
        for nd in sorted(by_nd):
            lst = sorted(by_nd[nd], key=lambda n: (bool(parse_tag(n).inner_blks), order[n]))
            head = f"  {nd} dim{'s' if nd != 1 else ''} ({len(lst)}): "
            if a.long:
                print(head.rstrip())
                for n in lst:
                    print(f"    {n:<24} {table[n]}")
            else:
                wrapped = _wrap(lst, " " * len(head))
                print(head + wrapped[0].lstrip())
                for ln in wrapped[1:]:
                    print(ln)
        if grep is None:
            print()
    abstract = [t for t in abstract_tags() if grep is None or grep in t.lower()]
    if a.abstract:
        plain = [t for t in abstract if not parse_tag(t).inner_blks]
        blocked = [t for t in abstract if parse_tag(t).inner_blks]
        print(f"abstract tags: {len(abstract)} ({len(plain)} plain permutations, {len(blocked)} blocked)")
        for title, lst in (("plain", plain), ("blocked", blocked)):
            by_nd2: dict[int, list[str]] = {}
            for t in lst:
                by_nd2.setdefault(parse_tag(t).ndims, []).append(t)
            for nd in sorted(by_nd2):
                head = f"  {title}, {nd} dim{'s' if nd != 1 else ''} ({len(by_nd2[nd])}): "
                wrapped = _wrap(by_nd2[nd], " " * len(head))
                print(head + wrapped[0].lstrip())
                for ln in wrapped[1:]:
                    print(ln)
    elif grep is None:
        counts: dict[int, int] = {}
        for t in abstract:
            nd = parse_tag(t).ndims
            counts[nd] = counts.get(nd, 0) + 1
        print(f"abstract tags: {len(abstract)} (by ndims: "
              + ", ".join(f"{nd}: {c}" for nd, c in sorted(counts.items())) + "); --abstract lists them")
    if grep is not None and not shown and not (a.abstract and abstract):
        print(f"no alias contains {a.grep!r}", file=sys.stderr)
        return 1
    return 0


# -------------------------------------------------------------------- bench
BENCH_DESC = """\
Run the performance comparison harness (perf/ in the repository: layoutjit vs a
plain copy of the same bytes, numpy, PyTorch and oneDNN, at 1 and 2 threads).
Without options: the quick subset (about 2 minutes). The harness is not part of
the installed package; from a checkout this finds it next to layoutjit/. Its
full option list: python -m perf --help (pass options after --)."""

BENCH_EPILOG = """\
examples:
  layoutjit bench                      quick subset, table and summary on stdout
  layoutjit bench --smoke              tiny cases, one repeat (seconds)
  layoutjit bench --cases blocked --threads 1
  layoutjit bench -- --no-charts --repeats 15"""


def _find_perf() -> Any:
    """Import the repository's ``perf.cli`` (next to the layoutjit package), or None."""
    root = Path(__file__).resolve().parent.parent
    if (root / "perf" / "cli.py").is_file() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import importlib

    try:
        perf_cli = importlib.import_module("perf.cli")
    except ImportError:
        return None
    return perf_cli if callable(getattr(perf_cli, "main", None)) else None


def _cmd_bench(a: argparse.Namespace) -> int:
    perf_cli = _find_perf()
    if perf_cli is None:
        print("layoutjit bench: the perf harness (perf/ in the layoutjit repository) is not "
              "importable here; clone the repository and run 'python -m perf' from its root "
              "(see README.md, 'Performance')", file=sys.stderr)
        return 1
    argv: list[str] = []
    if a.mode:
        argv.append(f"--{a.mode}")
    if a.cases:
        argv += ["--cases", a.cases]
    if a.threads:
        argv += ["--threads", a.threads]
    if a.out:
        argv += ["--out", a.out]
    if a.list:
        argv.append("--list")
    argv += list(a.perf_args)
    rc = perf_cli.main(argv)
    return int(rc or 0)


# -------------------------------------------------------------------- cache
CACHE_DESC = """\
Show where the disk cache of compiled kernels lives, how many kernels it holds
and how big it is; --clear deletes them (they are rebuilt on demand). The
directory is $LAYOUTJIT_CACHE_DIR, else $XDG_CACHE_HOME/layoutjit, else
~/.cache/layoutjit."""


def _cmd_cache(a: argparse.Namespace) -> int:
    from .cache import clear_disk, default_cache_dir, disk_usage

    d = default_cache_dir()
    if a.path:
        print(d)
        return 0
    if a.clear:
        removed = clear_disk(d)
        print(f"removed {removed} file(s) from {d}")
        return 0
    if os.environ.get("LAYOUTJIT_CACHE_DIR"):
        source = "from LAYOUTJIT_CACHE_DIR"
    elif os.environ.get("XDG_CACHE_HOME"):
        source = "from XDG_CACHE_HOME"
    else:
        source = "default"
    d, n, size = disk_usage(d)
    print(f"cache directory  {d}  ({source}{'' if d.is_dir() else '; does not exist yet'})")
    print(f"kernels          {n}")
    print(f"size             {_human(size)} (generated sources and Numba's machine code)")
    return 0


def _human(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"  # pragma: no cover


# ------------------------------------------------------------------- parser
MAIN_DESC = """\
layoutjit: compiled memory-layout reorders with oneDNN's semantics.
'layoutjit COMMAND --help' describes each command."""

MAIN_EPILOG = """\
examples:
  layoutjit explain --dims 2x17x5x4 nchw nChw16c
  layoutjit tags nChw16c
  layoutjit cache

environment: LAYOUTJIT_CACHE_DIR (kernel cache), LAYOUTJIT_VERBOSE=1 (one line per
compile and run on stderr), NUMBA_NUM_THREADS (threads); see README.md."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``layoutjit`` command (all subcommands)."""
    prog = "layoutjit"
    ap = _Parser(prog=prog, description=MAIN_DESC, epilog=MAIN_EPILOG, formatter_class=_Formatter)
    ap.add_argument("--version", action="version", version=f"layoutjit {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=_Parser)

    def dims_arg(p: argparse.ArgumentParser, default_text: str) -> None:
        p.add_argument("--dims", type=parse_dims, metavar="DIMS",
                       help=f"logical dims, e.g. 2x17x5x4 ({default_text})")

    e = sub.add_parser("explain", help="explain one reorder", description=EXPLAIN_DESC,
                       epilog=EXPLAIN_EPILOG, formatter_class=_Formatter)
    e.add_argument("src", metavar="SRC", help="source format tag or alias (e.g. nchw)")
    e.add_argument("dst", metavar="DST", help="destination format tag or alias (e.g. nChw16c)")
    dims_arg(e, "default: 2x17x5x4 for 4-D tags, similar for others")
    e.add_argument("--dt", default="f32", choices=DTYPES, metavar="DT",
                   help=f"data type of both sides (default f32; one of {', '.join(DTYPES)})")
    e.add_argument("--sdt", choices=DTYPES, metavar="DT", help="source data type (default: --dt)")
    e.add_argument("--ddt", choices=DTYPES, metavar="DT", help="destination data type (default: --dt)")
    e.add_argument("--no-source", action="store_true", help="leave out the generated source")
    e.set_defaults(func=_cmd_explain)

    t = sub.add_parser("tags", help="list tags and aliases, or describe one",
                       description=TAGS_DESC, epilog=TAGS_EPILOG, formatter_class=_Formatter)
    t.add_argument("name", metavar="NAME", nargs="?", help="a tag or alias to describe")
    dims_arg(t, "with NAME; default: 2x17x5x4 for 4-D tags")
    t.add_argument("--dt", default="f32", choices=DTYPES, metavar="DT",
                   help="data type for the sizes (default f32)")
    t.add_argument("--grep", metavar="TEXT", help="only aliases (and abstract tags) containing TEXT")
    t.add_argument("-l", "--long", action="store_true", help="one alias per line with its abstract tag")
    t.add_argument("--abstract", action="store_true", help="also list the abstract tags")
    t.set_defaults(func=_cmd_tags)

    b = sub.add_parser("bench", help="run the perf harness (python -m perf)", description=BENCH_DESC,
                       epilog=BENCH_EPILOG, formatter_class=_Formatter)
    mode = b.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", const="quick", dest="mode",
                      help="the quick subset (default)")
    mode.add_argument("--smoke", action="store_const", const="smoke", dest="mode",
                      help="tiny cases, one repeat: checks the harness runs (seconds)")
    mode.add_argument("--full", action="store_const", const="full", dest="mode",
                      help="every case, including the 1 GiB one")
    b.add_argument("--cases", metavar="TEXT", help="only cases whose name contains TEXT or whose "
                   "group is TEXT (comma-separated alternatives)")
    b.add_argument("--threads", metavar="LIST", help="comma-separated thread counts (default 1,2)")
    b.add_argument("--out", metavar="DIR", help="output directory (default perf/results)")
    b.add_argument("--list", action="store_true", help="list the selected cases and exit")
    b.add_argument("perf_args", nargs="*", metavar="-- PERF ARGS",
                   help="further options for python -m perf, after --")
    b.set_defaults(func=_cmd_bench, mode=None)

    c = sub.add_parser("cache", help="where the kernel cache is, how big; --clear",
                       description=CACHE_DESC, formatter_class=_Formatter)
    cg = c.add_mutually_exclusive_group()
    cg.add_argument("--clear", action="store_true", help="delete every cached kernel")
    cg.add_argument("--path", action="store_true", help="print only the cache directory")
    c.set_defaults(func=_cmd_cache)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for user errors).

    >>> main(["cache", "--path"]) == 0   # doctest: +ELLIPSIS
    /...
    True
    """
    ap = build_parser()
    args = ap.parse_args(list(argv) if argv is not None else None)
    if getattr(args, "func", None) is None:
        ap.error("choose a command: explain, tags, bench or cache")
    prog = f"layoutjit {args.command}"
    try:
        return int(args.func(args))
    except LayoutError as e:
        msg = " ".join(str(e).split())
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `layoutjit tags | head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
