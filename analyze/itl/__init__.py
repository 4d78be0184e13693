"""Inter-token latency of every measured request and window, from the chunk lists in one pass.

The chunk lists are most of a results file: a campaign of 1M requests holds about 240M chunk
times. SQL list lambdas cost tens of nanoseconds per element and exact pooled quantiles in SQL
hold every gap of every window at once, so this module streams (request, chunk time, chunk
tokens) out of DuckDB once, a range of rowids at a time, and works on them with numpy. Past
PARALLEL_CHUNKS chunks the ranges are shared by one worker process per core (DuckDB's
conversion to numpy holds the GIL, so threads would not help), each with its own read-only
connection: `compute` therefore runs before analyze opens the file for writing. A smaller file
is scanned on the build's own connection (`in_process`). `write` puts
the result into two TEMP tables that analyze/sql/request_metrics.sql and
latency_conventions.sql join:

request_itl, per measured request with a chunk (key rid = requests.rowid):
    n_chunks          = len(chunk_times_s), counted here so that no other model reads a
                        chunk list (DuckDB reads a whole list for its length)
    itl_chunk_mean_s  = mean gap chunk_times_s[i+1] - chunk_times_s[i]
    itl_chunk_max_s   = the longest such gap (the worst stall the client saw)
    itl_token_mean_s  = mean of gap_i / chunk_tokens[i+1] (a missing list or element, or 0,
                        counts as 1 token)
    (the three gap figures: ok requests of two chunks or more; NULL for the others)

window_itl, per window (campaign_id, engine, tp, method, workload, max_tokens, concurrency),
in milliseconds over the gaps of every ok request pooled (vLLM's and SGLang's ITL):
    itl_ms_*        every gap * 1000
    itl_token_ms_*  every gap / chunk_tokens[i+1] * 1000, for requests whose chunk_tokens has
                    one entry per chunk (entries of 0 tokens are left out)
    each with n, mean, median, std (population, np.std), p90, p95, p99 (np.quantile, linear:
    DuckDB's quantile_cont; selected a rank at a time, `chunks.quantiles`). Exact, not
    sketched: the gaps wait in spill files (past SPILL_BYTES held per process) and each
    window's are read back whole for its statistics, so memory stays near SPILL_BYTES plus the
    largest window's gaps (8 bytes a gap).

Per-request gap quantiles (p50/p99 over one reply's few hundred gaps) are not computed: they
need a sort of every gap and say little that the pooled window quantiles and the per-request
maximum do not.
"""

from specsweep.analyze.itl.chunks import STATS as STATS
from specsweep.analyze.itl.chunks import window_stats as window_stats
from specsweep.analyze.itl.scan import Latencies as Latencies
from specsweep.analyze.itl.scan import campaign_spans as campaign_spans
from specsweep.analyze.itl.scan import compute as compute
from specsweep.analyze.itl.scan import in_process as in_process
from specsweep.analyze.itl.scan import renumbered as renumbered
from specsweep.analyze.itl.scan import write as write
