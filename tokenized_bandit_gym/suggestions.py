"""Close-match suggestions for unknown names ("did you mean ...?"), as Python's own errors give them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the known names closest to ``name`` (at most three), else ``""``.

    Args:
        name: the unknown name (anything but a string gets no suggestion).
        known: the names that exist.

    Returns:
        A clause to append to an error message, empty when nothing is close enough.
    """
    if not isinstance(name, str):
        return ""
    known = sorted(set(known))
    matches = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if not matches:  # a case slip ('EOFUL' for 'eoful') is still a near miss
        lowered = {item.lower(): item for item in known}
        matches = [lowered[item] for item in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    if not matches:
        return ""
    return " (did you mean " + " or ".join(repr(match) for match in matches) + "?)"
