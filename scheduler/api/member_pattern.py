"""Layer `api`: a HyperNode member's `regexMatch.pattern`, compiled only where it is safe to run here.

Volcano matches it with Go's regexp (RE2: linear time; no lookaround, no backreference), unanchored
(pkg/util/hypernode/member_selector.go). Python's `re` backtracks: `(a+)+$` against a 253-character node name
never ends, and `re` keeps the GIL while it runs, so one HyperNode would freeze the whole process, its Lease
renewal included. So a pattern is compiled here only if
- it uses nothing RE2 lacks (lookaround, backreferences, conditionals, atomic groups, possessive repeats): Go
  refuses those, and Volcano's selector then gives nothing, as it does here;
- no repeat (`*`, `+`, `{m,n}` with n > 1) holds another repeat or an alternation (the exponential shapes);
- it has at most MAX_REPEATS repeats (adjacent ones backtrack polynomially, n^k over the name).
Go would take a pattern the last two rules refuse; such a selector gives nothing in volcano-py.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

with warnings.catch_warnings():  # the parser's public name is deprecated, not the parser
    warnings.simplefilter("ignore", DeprecationWarning)
    import sre_constants as C
    import sre_parse

MAX_PATTERN = 1024  # characters: the webhook's bound on a regexMatch pattern
MAX_REPEATS = 3
_NOT_IN_RE2 = frozenset({C.ASSERT, C.ASSERT_NOT, C.GROUPREF, C.GROUPREF_EXISTS, C.ATOMIC_GROUP,
                         C.POSSESSIVE_REPEAT})
_REPEATS = frozenset({C.MAX_REPEAT, C.MIN_REPEAT})


class PatternError(ValueError):
    """The pattern is not compiled: why, in a few words."""


def compile_member_pattern(text: object) -> re.Pattern[str]:
    if type(text) is not str or len(text) > MAX_PATTERN:
        raise PatternError(f"is not a string of at most {MAX_PATTERN} characters")
    try:
        parsed = sre_parse.parse(text)
        compiled = re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"does not compile: {exc}") from None
    repeats = _check(list(parsed.data), inside_repeat=False)
    if repeats > MAX_REPEATS:
        raise PatternError(f"has {repeats} repeats (at most {MAX_REPEATS}: more backtrack too long)")
    return compiled


def _check(items: list[tuple[Any, Any]], *, inside_repeat: bool) -> int:
    """The repeats in `items`; PatternError for what RE2 lacks, or a repeat in a repeat (or an alternation)."""
    repeats = 0
    for op, av in items:
        if op in _NOT_IN_RE2:
            raise PatternError("uses what Go's regexp does not have (lookaround, backreference, atomic group, "
                               "possessive repeat)")
        if op in _REPEATS:
            low, high, body = av
            del low
            many = high > 1
            if many and inside_repeat:
                raise PatternError("repeats a repeat (it could backtrack without end)")
            repeats += many + _check(list(body), inside_repeat=inside_repeat or many)
        elif op is C.BRANCH:
            if inside_repeat:
                raise PatternError("repeats an alternation (it could backtrack without end)")
            repeats += sum(_check(list(branch), inside_repeat=False) for branch in av[1])
        elif op is C.SUBPATTERN:
            repeats += _check(list(av[3]), inside_repeat=inside_repeat)
    return repeats
