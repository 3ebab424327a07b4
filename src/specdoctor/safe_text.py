"""Names from untrusted inputs (suite case names, archive members, dataset categories, pack and
probe names, run labels, file contents) made safe to print on a terminal.

A name that holds ``ESC [ 2 J`` clears the user's screen when printed raw; other escape
sequences set the window title, move the cursor or hide text. ``visible`` shows every control
character as a visible escape instead (``\\x1b``), so what is printed is what the file holds:
C0 controls (tab kept; newline kept only where a block of lines is printed), DEL, C1 controls
(``\\x80``-``\\x9f``, CSI ``\\x9b`` among them) and the bidirectional overrides that reorder
what a reader sees (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F).
"""

from __future__ import annotations

_BIDI = (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _table(keep_newline: bool) -> dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}
    table.update({c: f"\\u{c:04x}" for c in _BIDI})
    del table[0x09]
    if keep_newline:
        del table[0x0A]
    return table


_ONE_LINE = _table(keep_newline=False)
_LINES = _table(keep_newline=True)


def visible(text: object, keep_newline: bool = False) -> str:
    """``text`` (any object, as ``str``) with its control characters shown as escapes."""
    return str(text).translate(_LINES if keep_newline else _ONE_LINE)


def markup(text: object, keep_newline: bool = False) -> str:
    """``visible`` and then escaped for rich markup: safe inside a ``console.print`` string."""
    from rich.markup import escape

    return escape(visible(text, keep_newline))
