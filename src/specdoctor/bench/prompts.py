"""Fixed prompt suites: the same text every run, so runs compare.

``code``: openings of Python functions (HumanEval-like; the lab's tokenizer was trained on
Python source). ``essay``: short instructions in prose (MT-Bench-like).
"""

from __future__ import annotations

from specdoctor.errors import InputError

# The most requests one run sends: a day of requests at about one a second. A count past it
# would build its list of prompts before the first request and run out of memory first.
MAX_PROMPTS = 100_000
# The most requests in flight at once (one client thread each).
MAX_CONCURRENCY = 1024

SUITES: dict[str, tuple[str, ...]] = {
    "code": (
        "def parse_args(argv):\n    parser = argparse.ArgumentParser(",
        "class Node:\n    def __init__(self, value, children=None):\n        self.value = value\n",
        "def read_lines(path):\n    with open(path) as fh:\n        for line in fh:\n",
        "import os\nimport sys\n\n\ndef main():\n    if len(sys.argv) < 2:\n",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
        "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__,",
        "def flatten(items):\n    result = []\n    for item in items:\n        if isinstance(item, list):\n",
        "try:\n    import json\nexcept ImportError:\n    json = None\n\n\ndef load(path):\n",
        "def _check_type(value, expected):\n    if not isinstance(value, expected):\n        raise TypeError(",
        "    for key, value in sorted(kwargs.items()):\n        if value is None:\n            continue\n",
        "def copy_tree(src, dst, symlinks=False):\n    names = os.listdir(src)\n    os.makedirs(dst",
        "class Timer:\n    def __enter__(self):\n        self.start = time.monotonic()\n        return self\n",
        "def quote(s):\n    \"\"\"Return a shell-escaped version of the string *s*.\"\"\"\n    if not s:\n",
        "    @property\n    def name(self):\n        \"\"\"The final path component.\"\"\"\n",
        "def merge(left, right):\n    out = []\n    i = j = 0\n    while i < len(left) and j < len(right):\n",
        "if __name__ == '__main__':\n    import doctest\n    doctest.testmod()\n\n\ndef",
    ),
    "essay": (
        "Write a short note explaining why caching makes programs faster.",
        "Describe the steps to debug a program that is slower than expected.",
        "Explain the difference between a list and a tuple to a new programmer.",
        "Summarise the advantages of writing tests before fixing a bug.",
        "Give three tips for reading an unfamiliar code base.",
        "Explain what a race condition is, with a simple example.",
        "Write a paragraph on why logs should be machine readable.",
        "Describe how a hash table handles collisions.",
    ),
}


def suite(name: str) -> tuple[str, ...]:
    try:
        return SUITES[name]
    except KeyError:
        raise InputError(f"unknown prompt suite {name!r}",
                         f"choose one of: {', '.join(sorted(SUITES))}") from None


def check_count(n: int, flag: str = "--num-prompts") -> None:
    """Refuse a prompt count the protocol cannot send, naming the limit."""
    if not 1 <= n <= MAX_PROMPTS:
        raise InputError(f"{flag} {n}: must be from 1 to {MAX_PROMPTS:,}", f"e.g. {flag} 16")


def check_concurrency(c: int, flag: str = "--concurrency") -> None:
    if not 1 <= c <= MAX_CONCURRENCY:
        raise InputError(f"{flag} {c}: must be from 1 to {MAX_CONCURRENCY}", f"e.g. {flag} 8")


def take(name: str, n: int) -> list[str]:
    """The first n prompts of a suite, cycling if n is larger than the suite."""
    prompts = suite(name)
    check_count(n)
    return [prompts[i % len(prompts)] for i in range(n)]
