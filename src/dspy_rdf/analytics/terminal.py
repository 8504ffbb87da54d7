"""Text as a terminal may be shown it: what a trace holds is displayed, never acted on by the terminal."""

from __future__ import annotations

import re

__all__ = ["terminal_text"]

_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` with the characters a terminal acts on (escape sequences, a bell, bidirectional overrides) written as
    escapes (``\\x1b``, ``\\u202e``): a tool name holding an escape sequence is shown as text. Line feeds, carriage
    returns (progress bars) and tabs stay.

    >>> terminal_text("add\\x1b[2J\\x07 ok")
    'add\\\\x1b[2J\\\\x07 ok'
    """
    if _CONTROLS.search(text) is None:
        return text
    return _CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}" if ord(found.group()) < 0x100 else f"\\u{ord(found.group()):04x}", text)
