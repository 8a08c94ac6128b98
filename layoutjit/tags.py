"""oneDNN format tags: a grammar, plus the table of domain aliases.

A tag is parsed, never looked up in a table of strides::

    ABcd8a16b2a
    ^^^^          outer dims, outermost first; upper case = also blocked
        ^^^^^^^   inner blocks, outermost first: 8 of a, then 16 of b, then 2 of a

Aliases (``nchw``, ``nChw16c``, ``OIhw16i16o``, ...) are data
(``data/format_tags.json``, oneDNN's own alias table) that map a domain name to
its abstract tag; the abstract tag is then parsed like any other.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

from .errors import LayoutError

MAX_NDIMS = 12
_LETTERS = "abcdefghijkl"
_TAG_RE = re.compile(r"^([a-lA-L]+)((?:[0-9]+[a-l])*)$")
_BLOCK_RE = re.compile(r"([0-9]+)([a-l])")


@dataclass(frozen=True)
class ParsedTag:
    """The blocking structure a tag stands for (oneDNN's ``fill_blocked`` inputs).

    ``perm`` lists logical dims from the outermost to the innermost outer dim;
    ``inner_blks``/``inner_idxs`` list inner blocks from outermost to innermost.
    """

    name: str  # as given (alias or abstract)
    abstract: str  # abstract form, e.g. "aBcd16b"
    ndims: int
    perm: tuple[int, ...]
    inner_blks: tuple[int, ...]
    inner_idxs: tuple[int, ...]

    @property
    def blocks(self) -> tuple[int, ...]:
        """Per logical dim, the product of its inner blocks (1 when unblocked)."""
        b = [1] * self.ndims
        for blk, idx in zip(self.inner_blks, self.inner_idxs):
            b[idx] *= blk
        return tuple(b)


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[str, ...], dict[str, str]]:
    text = resources.files("layoutjit").joinpath("data/format_tags.json").read_text()
    data = json.loads(text)
    return tuple(data["abstract"]), dict(data["aliases"])


def aliases() -> dict[str, str]:
    """Every oneDNN domain alias mapped to its abstract tag (a copy)."""
    return dict(_table()[1])


def abstract_tags() -> tuple[str, ...]:
    """Every abstract tag of oneDNN's ``dnnl_format_tag_t`` (besides undef/any)."""
    return _table()[0]


@cache
def preferred_names() -> dict[str, str]:
    """Abstract tag -> the first alias oneDNN lists for it (used in reprs)."""
    out: dict[str, str] = {}
    for alias, abstract in _table()[1].items():
        out.setdefault(abstract, alias)
    return out


def display_name(abstract: str) -> str:
    """The friendliest name of an abstract tag: its first alias, else itself."""
    return preferred_names().get(abstract, abstract)


@lru_cache(maxsize=4096)
def parse_tag(tag: str) -> ParsedTag:
    """Parse a tag or alias into its blocking structure.

    >>> t = parse_tag("ABcd8a16b2a")
    >>> t.perm, t.inner_blks, t.inner_idxs
    ((0, 1, 2, 3), (8, 16, 2), (0, 1, 0))
    >>> parse_tag("nChw16c").abstract
    'aBcd16b'
    """
    if not isinstance(tag, str):
        raise LayoutError(f"tag: expected a string, got {type(tag).__name__}")
    abstract = _table()[1].get(tag, tag)
    m = _TAG_RE.match(abstract)
    if not m:
        raise LayoutError(
            f"tag {tag!r}: not a format tag (letters a..l for dims, upper case for "
            f"blocked dims, then <N><letter> inner blocks, e.g. 'aBcd16b') nor a known alias"
        )
    outer, suffix = m.group(1), m.group(2)
    ndims = len(outer)
    if ndims > MAX_NDIMS:
        raise LayoutError(f"tag {tag!r}: {ndims} dims, at most {MAX_NDIMS}")
    letters = outer.lower()
    if sorted(letters) != list(_LETTERS[:ndims]):
        raise LayoutError(
            f"tag {tag!r}: the outer letters must name each of the dims "
            f"{_LETTERS[:ndims]!r} exactly once"
        )
    perm = tuple(_LETTERS.index(c) for c in letters)
    inner_blks: list[int] = []
    inner_idxs: list[int] = []
    for size_s, letter in _BLOCK_RE.findall(suffix):
        d = _LETTERS.index(letter)
        if d >= ndims:
            raise LayoutError(f"tag {tag!r}: block letter {letter!r} names no dim")
        size = int(size_s)
        if size <= 0:
            raise LayoutError(f"tag {tag!r}: block of {letter!r} must be positive")
        inner_blks.append(size)
        inner_idxs.append(d)
    blocked = set(inner_idxs)
    for c in outer:
        d = _LETTERS.index(c.lower())
        if c.isupper() and d not in blocked:
            raise LayoutError(f"tag {tag!r}: {c!r} is upper case but dim {c.lower()!r} has no block")
        if c.islower() and d in blocked:
            raise LayoutError(f"tag {tag!r}: dim {c!r} has a block, so write it as {c.upper()!r}")
    return ParsedTag(tag, abstract, ndims, perm, tuple(inner_blks), tuple(inner_idxs))


def abstract_from_blocking(perm: tuple[int, ...], inner_blks: tuple[int, ...],
                           inner_idxs: tuple[int, ...]) -> str:
    """Write the abstract tag for a blocking structure (inverse of parse_tag)."""
    blocked = set(inner_idxs)
    outer = "".join(_LETTERS[d].upper() if d in blocked else _LETTERS[d] for d in perm)
    return outer + "".join(f"{b}{_LETTERS[i]}" for b, i in zip(inner_blks, inner_idxs))
