"""Write plans/traces/mooncake-like.jsonl: a seeded trace in Mooncake's layout (the FAST'25
traces' fields: timestamp in ms, input_length, output_length, hash_ids of 512-token blocks),
for replay with real text on a small-context model. The real Mooncake traces are not shipped
here (no network); this one keeps their shape at a size one GPU and SmolLM2's 4096-token window
hold:

- arrivals: Poisson at 2 requests/s (exponential gaps, seed 0), 120 requests (about 60 s);
- input_length: lognormal, median 700 tokens, sigma 0.6, clipped to 200..3000;
- output_length: 128;
- hash_ids: half the requests open with one of 6 shared 2-block prefixes (ids p*1000, p*1000+1:
  as a shared system prompt or document), the rest of the blocks are the request's own ids.

    python tests/bench/make_mooncake_like.py > plans/traces/mooncake-like.jsonl
"""

from __future__ import annotations

import json
import math
import random

BLOCK = 512


def lines(n: int = 120, rate: float = 2.0, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(n):
        t += rng.expovariate(rate)
        length = min(3000, max(200, round(math.exp(rng.gauss(math.log(700), 0.6)))))
        blocks = math.ceil(length / BLOCK)
        own = [100_000 + i * 10 + b for b in range(blocks)]
        if rng.random() < 0.5 and blocks >= 2:
            p = rng.randrange(6)
            own[:2] = [p * 1000, p * 1000 + 1]
        out.append(
            {
                "timestamp": round(t * 1000),
                "input_length": length,
                "output_length": 128,
                "hash_ids": own,
            }  # fmt: skip
        )
    return out


if __name__ == "__main__":
    print("# Mooncake layout, made by tests/bench/make_mooncake_like.py (seed 0)")
    for line in lines():
        print(json.dumps(line))
