"""vLLM V1 metrics lines for tests, formatted as vllm/v1/spec_decode/metrics.py formats them,
with varied counts, and the odd shapes real logs hold (cut short, CRLF, forks, early V1)."""

import random
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
RECORDED = sorted(FIXTURES.glob("lab-*/server.log"))
STARTUP = ("(EngineCore pid=1) INFO 11-29 08:28:48 [core.py:133] Initializing a V1 LLM engine "
           "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig(method='{m}', "
           "model=None, num_spec_tokens=3), tokenizer='m'")


def v1_line(rng: random.Random, k: int, variable: bool) -> str:
    """A metrics line formatted as vllm/v1/spec_decode/metrics.py formats it, varied counts."""
    d = rng.choice([rng.randint(1, 6), rng.randint(1, 60), rng.randint(1000, 2500)])
    per_pos, prev = [], d
    for _ in range(k):
        prev = rng.randint(0, prev)
        per_pos.append(prev)
    if rng.random() < 0.05:
        per_pos = [0] * k
    drafted = rng.randint(d, d * k) if variable else d * k
    if rng.random() < 0.03:
        d = drafted = 0
        per_pos = [0] * k
    acc = sum(per_pos)
    rates = ", ".join(f"{a / d:.3f}" if d else "nan" for a in per_pos)
    return (f"(APIServer pid=7) INFO 11-29 08:{rng.randint(0, 59):02d}:00 [metrics.py:120] "
            "SpecDecoding metrics: Mean acceptance length: %s, Accepted throughput: %.2f tokens/s, "
            "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
            "Per-position acceptance rate: %s, Avg Draft acceptance rate: %s%%"
            % ("%.2f" % (1 + acc / d) if d else "nan", rng.random() * 50, rng.random() * 90, acc,
               drafted, rates, "%.1f" % (100 * acc / drafted) if drafted else "nan"))


def odd(rng: random.Random, line: str) -> str:
    """The line as logs sometimes hold it: cut short, CRLF, forked, early V1, doubled..."""
    r = rng.random()
    if r < 0.04:
        return line[: rng.randint(20, len(line) - 1)]
    if r < 0.08:
        return line + rng.choice(["\r", "  ", " \r"])
    if r < 0.10:
        return line.replace(" tokens, Per", " tokens, Rejected: 3 tokens, Per")
    if r < 0.12:
        return ("INFO 05-01 10:00:00 SpecDecoding metrics: Draft acceptance rate: 36.8%, "
                "Accepted: 21 tokens, Drafted: 57 tokens")
    if r < 0.13:
        return "SpecDecoding metrics: junk, x, y, z " + line
    if r < 0.14:
        return line.replace("Accepted throughput: ", "Accepted throughput: 1,")
    if r < 0.15:
        return "x" * 130 + line
    return line


def write_log(path: Path, seed: int, n: int, method: str | None, flip_at: int | None = None,
              repeat: float = 0.5) -> Path:
    rng = random.Random(seed)
    lines = [STARTUP.format(m=method)] if method else []
    seen: list[str] = []
    for i in range(n):
        lines.append("INFO noise GET /v1/models 200")
        if seen and rng.random() < repeat:
            lines.append(rng.choice(seen))
            continue
        variable = method == "ngram" or (flip_at is not None and i >= flip_at)
        line = odd(rng, v1_line(rng, 3 if variable else 4, variable))
        seen.append(line)
        lines.append(line)
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path
