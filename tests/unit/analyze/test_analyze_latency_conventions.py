"""latency_conventions (08) on hand-built rows: vLLM/SGLang-style TTFT, TPOT, pooled per-chunk
ITL and per-token ITL; every expected value is worked out in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.analyze_rows import one, req

VIEW = "SELECT * FROM latency_conventions"


def test_per_chunk_and_per_token_itl(analyzed) -> None:
    # request a: chunks at 0.1, 0.4, 0.6 s carrying 1, 3, 2 tokens -> gaps 0.3, 0.2 s,
    #   per token 0.3/3 = 0.1, 0.2/2 = 0.1
    # request b: chunks at 0.2, 0.3 s carrying 1, 1 tokens -> gap 0.1 s, per token 0.1
    # request c: chunk_tokens unknown -> its gap 0.5 s pools into itl_ms only
    rows = [
        req(ttft_s=0.1, e2e_s=0.6, output_tokens=6, chunk_times_s=[0.1, 0.4, 0.6],
            chunk_tokens=[1, 3, 2]),
        req(ttft_s=0.2, e2e_s=0.3, output_tokens=2, chunk_times_s=[0.2, 0.3],
            chunk_tokens=[1, 1]),
        req(ttft_s=0.1, e2e_s=0.6, output_tokens=2, chunk_times_s=[0.1, 0.6]),
    ]  # fmt: skip
    row = one(analyzed(rows), VIEW)
    gaps = [300.0, 200.0, 100.0, 500.0]  # pooled over requests, not a mean of means
    assert row["n_itl"] == 4 and row["itl_ms_mean"] == pytest.approx(np.mean(gaps))
    assert row["itl_ms_median"] == pytest.approx(np.median(gaps))  # 250
    assert row["itl_ms_p99"] == pytest.approx(np.percentile(gaps, 99))
    assert row["itl_ms_std"] == pytest.approx(np.std(gaps))
    assert row["n_itl_token"] == 3 and row["itl_token_ms_mean"] == pytest.approx(100.0)


def test_tpot_only_over_requests_with_more_than_one_token(analyzed) -> None:
    # tpot = (e2e - ttft) / (n - 1): (2.5 - 0.5) / 8 = 0.25 s, (1.5 - 0.5) / 4 = 0.25 s;
    # the 1-token request counts for ttft and e2el but not tpot; the failed one for nothing
    rows = [
        req(ttft_s=0.5, e2e_s=2.5, output_tokens=9),
        req(ttft_s=0.5, e2e_s=1.5, output_tokens=5),
        req(ttft_s=0.2, e2e_s=0.2, output_tokens=1),
        req(ok=False, ttft_s=None, e2e_s=None, output_tokens=None, error_kind="http"),
    ]
    row = one(analyzed(rows), VIEW)
    assert (row["n"], row["n_ok"], row["n_tpot"]) == (4, 3, 2)
    assert row["tpot_ms_mean"] == pytest.approx(250.0) and row["tpot_ms_std"] == 0
    ttfts = [500.0, 500.0, 200.0]
    assert row["ttft_ms_mean"] == pytest.approx(400.0)
    assert row["ttft_ms_p99"] == pytest.approx(np.percentile(ttfts, 99))  # linear: 500
    assert row["ttft_ms_p90"] == pytest.approx(np.percentile(ttfts, 90))
    assert row["e2el_ms_median"] == pytest.approx(1500.0)


def test_warmup_excluded_and_no_chunks_gives_null(analyzed) -> None:
    rows = [req(ttft_s=0.5), req(ttft_s=9.0, is_warmup=True)]
    row = one(analyzed(rows), VIEW)
    assert row["n"] == 1 and row["ttft_ms_mean"] == pytest.approx(500.0)
    # no chunk_times_s: no gaps, so NULL (the tools would print 0.00)
    assert row["n_itl"] == 0 and row["itl_ms_mean"] is None and row["itl_token_ms_mean"] is None
