"""Which files a snapshot keeps: picks (preset names or globs) matched on package paths.

A file's *package path* is its path below the last `site-packages/` or
`dist-packages/` directory (`vllm/v1/spec_decode/dflash.py`), so one pick works
for an image (`usr/local/lib/python3.12/dist-packages/vllm/...`), a wheel
(`vllm/...`) and an environment alike. Outside any site-packages (an editable
checkout in an image, `/workspace/vllm/vllm/...`) a pick matches the path's
tail, and the package path starts where the match starts.

Globs: `*` and `?` stay within one path component, `**` spans components.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specdoctor.errors import InputError
from specdoctor.recon.presets import PRESETS, expand_preset

_SITE_DIRS = ("site-packages", "dist-packages")


def clean_parts(name: str) -> tuple[str, ...] | None:
    """Split an archive member name into safe components; None when it is unsafe.

    Unsafe: absolute, any `..`, NUL bytes, or nothing left. A legitimate image
    layer or wheel never has these; a hostile one uses them to escape.
    """
    if not name or "\0" in name or name.startswith("/") or "\\" in name:
        return None
    if name.startswith("./"):
        name = name[2:]
    fast = tuple(name.rstrip("/").split("/"))
    if "" not in fast and "." not in fast and ".." not in fast:
        return fast
    parts = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            return None
        parts.append(part)
    return tuple(parts) or None


def split_package(parts: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(root, package parts): root is everything up to the last site-packages dir."""
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _SITE_DIRS:
            return "/".join(parts[: i + 1]), parts[i + 1:]
        # Wheels may carry files under NAME.data/purelib|platlib/.
        if parts[i] in ("purelib", "platlib") and i > 0 and parts[i - 1].endswith(".data"):
            return "/".join(parts[: i + 1]), parts[i + 1:]
    return "", parts


def glob_to_regex(glob: str) -> str:
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "{":
            end = glob.find("}", i)
            if end < 0:
                raise InputError(f"unclosed '{{' in pick {glob!r}", "write alternatives as {a,b}")
            alts = glob[i + 1:end].split(",")
            out.append("(?:" + "|".join(re.escape(a) for a in alts) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Picker:
    """Compiled picks. `match(parts)` -> (root, package path) or None."""

    picks: tuple[str, ...]
    patterns: tuple[str, ...]
    root: str | None = None

    def __post_init__(self) -> None:
        body = "|".join(f"(?:{glob_to_regex(p)})" for p in self.patterns)
        object.__setattr__(self, "_anchored", re.compile(f"(?:{body})\\Z"))
        object.__setattr__(self, "_tail", re.compile(f"(?:^|/)((?:{body}))\\Z"))
        keys = [re.split(r"[*?{\[]", p, maxsplit=1)[0] for p in self.patterns]
        # An empty key (a pattern starting with a wildcard) disables the prefilter.
        # Keys that contain a shorter key add nothing ("vllm/v1/" given "vllm").
        minimal = sorted({k for k in keys if not any(o != k and o in k for o in keys)})
        object.__setattr__(self, "_keys", None if "" in keys else
                           re.compile("|".join(re.escape(k) for k in minimal)))

    def could_match(self, name: str) -> bool:
        """A cheap test before `match`: every pattern's leading literal must occur."""
        keys = self._keys  # type: ignore[attr-defined]
        if keys is not None and keys.search(name) is None:
            return False
        # Every match, site-packages or not, ends with a pattern match on the path's tail.
        return self._tail.search(name.rstrip("/")) is not None  # type: ignore[attr-defined]

    def match(self, parts: tuple[str, ...]) -> tuple[str, str] | None:
        root, pkg = split_package(parts)
        if root:
            if self.root is not None and root != self.root:
                return None
            rel = "/".join(pkg)
            return (root, rel) if rel and self._anchored.match(rel) else None  # type: ignore[attr-defined]
        path = "/".join(parts)
        m = self._tail.search(path)  # type: ignore[attr-defined]
        if m is None:
            return None
        root = path[: m.start(1)].rstrip("/")
        if self.root is not None and root != self.root:
            return None
        return root, m.group(1)

    def top_level_filter(self, names: list[str]) -> set[str] | None:
        """Top-level directory entries worth walking, or None to walk everything.

        A directory source (site-packages holds hundreds of packages) is walked only
        below the entries a pattern's first component can match; when none does, the
        picks may sit deeper (a checkout), so everything is walked.
        """
        firsts = [p.split("/", 1)[0] for p in self.patterns]
        if any("**" in f for f in firsts):
            return None
        regexes = [re.compile(glob_to_regex(f) + "\\Z") for f in firsts]
        keep = {n for n in names if any(r.match(n) for r in regexes)}
        return keep or None


def make_picker(picks: tuple[str, ...] | list[str], root: str | None = None) -> Picker:
    """Expand preset names (`vllm`, `vllm:attention`) and keep globs as given."""
    if not picks:
        raise InputError("nothing to pick", f"pass --pick with a preset ({', '.join(PRESETS)}) "
                         "or a glob such as 'vllm/v1/spec_decode/*.py'")
    patterns: list[str] = []
    for pick in picks:
        expanded = expand_preset(pick)
        if expanded is None:
            if not any(ch in pick for ch in "/*?.{"):
                raise InputError(f"unknown preset {pick!r}",
                                 f"use one of {', '.join(PRESETS)} or a path glob")
            patterns.append(pick.strip("/"))
        else:
            patterns.extend(expanded)
    clean_root = None if root is None else root.strip("/")
    return Picker(tuple(picks), tuple(dict.fromkeys(patterns)), clean_root)
