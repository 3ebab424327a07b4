"""Pure helpers on command-line argument lists: find, read, set and drop an option.

Engines take options as ``--name value``, ``--name=value`` or a bare flag, and accept ``_`` for
``-`` in names (vLLM and SGLang both use argparse with both spellings). These helpers treat all
spellings as one option, so an edit replaces the user's own occurrence in place instead of
appending a second, conflicting one.
"""

from __future__ import annotations

from collections.abc import Sequence


def norm(name: str) -> str:
    """``--speculative_config`` → ``--speculative-config``."""
    return "--" + name.lstrip("-").replace("_", "-") if name.startswith("--") else name


def _matches(token: str, names: Sequence[str]) -> tuple[bool, str | None]:
    """Whether ``token`` is one of ``names`` (``--x`` or ``--x=v``); the inline value if any."""
    head, eq, value = token.partition("=")
    if norm(head) in {norm(n) for n in names}:
        return True, value if eq else None
    return False, None


def find(argv: Sequence[str], *names: str) -> tuple[int, int, str | None] | None:
    """The last occurrence of the option: (start, end, value); ``end`` is exclusive.

    A value is the inline ``=v`` or the next token when it does not start with ``--``;
    a bare flag has value ``None``. The last occurrence wins, as with argparse."""
    found = None
    i = 0
    while i < len(argv):
        ok, inline = _matches(argv[i], names)
        if ok:
            if inline is not None:
                found = (i, i + 1, inline)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                found = (i, i + 2, argv[i + 1])
            else:
                found = (i, i + 1, None)
            i = found[1]
            continue
        i += 1
    return found


def get(argv: Sequence[str], *names: str) -> str | None:
    hit = find(argv, *names)
    return None if hit is None else hit[2]


def has(argv: Sequence[str], *names: str) -> bool:
    return find(argv, *names) is not None


def drop(argv: Sequence[str], *names: str) -> tuple[str, ...]:
    """Every occurrence of the option (with its value) removed."""
    out = list(argv)
    while (hit := find(out, *names)) is not None:
        del out[hit[0]:hit[1]]
    return tuple(out)


def drop_prefix(argv: Sequence[str], prefix: str) -> tuple[str, ...]:
    """Options whose normalised name starts with ``prefix`` (e.g. ``--speculative-config.``)
    removed with their values."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        head = argv[i].partition("=")[0]
        if norm(head).startswith(prefix) and head.startswith("--"):
            takes_next = "=" not in argv[i] and i + 1 < len(argv) and not argv[i + 1].startswith("--")
            i += 2 if takes_next else 1
            continue
        out.append(argv[i])
        i += 1
    return tuple(out)


def with_prefix(argv: Sequence[str], prefix: str) -> list[tuple[str, str | None]]:
    """(suffix, value) of every option named ``prefix`` + something, in order."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        head, eq, inline = argv[i].partition("=")
        if head.startswith("--") and norm(head).startswith(prefix):
            suffix = head[len(prefix):] if head.startswith(prefix) else norm(head)[len(prefix):]
            if eq:
                out.append((suffix, inline))
                i += 1
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.append((suffix, argv[i + 1]))
                i += 2
            else:
                out.append((suffix, None))
                i += 1
            continue
        i += 1
    return out


def put(argv: Sequence[str], name: str, value: str | None) -> tuple[str, ...]:
    """The option set to ``value`` (``None``: a bare flag): replaced where the user wrote it
    (keeping their spelling), other occurrences dropped, appended when absent."""
    hit = find(argv, name)
    new = [name] if value is None else [name, value]
    if hit is None:
        return (*argv, *new)
    spelled = argv[hit[0]].partition("=")[0]
    new[0] = spelled
    rest = drop(list(argv[:hit[0]]) + ["\0"] + list(argv[hit[1]:]), name)
    at = rest.index("\0")
    return (*rest[:at], *new, *rest[at + 1:])
