"""Layer `api`: a HyperNode member's `regexMatch.pattern`, compiled with RE2, the engine of Go's regexp.

Volcano matches it with Go's regexp (RE2 syntax, linear time; no lookaround, no backreference), unanchored
(pkg/util/hypernode/member_selector.go). Python's `re` backtracks: `(a+)+$` against a 253-character node name
never ends, and `re` keeps the GIL while it runs, so one HyperNode would freeze the whole process, its Lease
renewal included. `google-re2` (Google's RE2, the library Go's regexp follows) matches in linear time and refuses
what Go refuses, so a selector gives nothing exactly where Volcano's does.
"""

from __future__ import annotations

from typing import Protocol

import re2

MAX_PATTERN = 1024  # characters: the webhook's bound on a regexMatch pattern

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the caller's one log line, not RE2's to stderr


class MemberPattern(Protocol):
    def search(self, text: str) -> object | None: ...


class PatternError(ValueError):
    """The pattern is not compiled: why, in a few words."""


def compile_member_pattern(text: object) -> MemberPattern:
    """The pattern, compiled for unanchored `search`; PatternError if it is not a string of at most 1 KiB or
    RE2 (Go's regexp) refuses it."""
    if type(text) is not str or len(text) > MAX_PATTERN:
        raise PatternError(f"is not a string of at most {MAX_PATTERN} characters")
    try:
        compiled: MemberPattern = re2.compile(text, options=_OPTIONS)
    except (re2.error, TypeError, ValueError) as exc:  # TypeError/ValueError: a lone surrogate cannot be encoded
        raise PatternError(f"does not compile: {exc}") from None
    return compiled
