"""The data-driven threats to validity, appended to the report template's fixed text.

Each note is marked Unicode text (report.text) built from data values: a CPU-only run,
the design's rounds, start sd and drift, and comparisons left without an interval for want of
starts (:func:`report.findings.design.start_notes`), small samples, prompt-cache settings,
failed requests or services, an incomplete campaign, replicas that disagree, and the
services' transport (:func:`transport_notes`).
"""

from __future__ import annotations

import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.findings import design
from specsweep.report.text import code, em, num
from specsweep.report.text import data as d
from specsweep.stats.paired import MIN_PROMPTS

SMALL_PROMPTS = 10


def _host_notes(data: ReportData) -> list[str]:
    env, svc, hosts = data.environment, data.services, data.hosts
    if not hosts.empty:
        host_gpus = int(hosts["n_gpus"].fillna(0).sum())
    else:  # analysed before host_summary: the gpu.<i>.name facts ('gpus: none' is no GPU)
        host_gpus = int(env["key"].str.match(r"gpu\.\d+\.name$").sum()) if not env.empty else 0
    no_gpus = svc.empty or (svc["gpus"].fillna("") == "").all()
    if no_gpus and not host_gpus:
        return [
            (
                "The services ran without GPUs (CPU only). CPU timings on a shared host are "
                "noisy and speculative decoding behaves differently than on GPUs; treat "
                "these numbers as a functional check, not a performance result."
            )
        ]
    return []


def _cache_notes(data: ReportData) -> list[str]:
    env = data.environment
    keys = env[env["key"].str.contains("cache", case=False)] if not env.empty else env
    if keys.empty:
        return [
            (
                "Prompt/prefix-cache settings were not recorded. Repeated prompts may hit a "
                "server-side cache, which lowers TTFT and favours later repetitions."
            )
        ]
    items = "; ".join(f"{code(k)} = {d(v)}" for k, v in zip(keys["key"], keys["value"]))
    return [
        (
            f"Prompt-cache settings as recorded: {items}. Cached prefixes lower TTFT and "
            "affect all methods alike only if the settings match."
        )
    ]


def _sample_notes(data: ReportData) -> list[str]:
    sp = data.speedup
    notes = []
    col = "n_prompts" if "n_prompts" in sp else "n"
    small = sp[sp[col] < SMALL_PROMPTS] if not sp.empty else sp
    if not small.empty:
        none = int((small[col] < MIN_PROMPTS).sum())
        notes.append(
            f"{len(small)} of {len(sp)} speedup comparisons rest on fewer than "
            f"{SMALL_PROMPTS} prompts: their t intervals, where they have one, are wide"
            + (
                f", and {none} have none at all (too few prompts for any interval to keep its "
                "coverage)."
                if none
                else "."
            )
        )
    notes.append(f"{data.n_warmup} warm-up request(s) were excluded from every metric.")
    return notes


def _failure_notes(data: ReportData) -> list[str]:
    notes = []
    cs, svc = data.config_summary, data.services
    if not cs.empty and (cs["error_rate"].fillna(0) > 0).any():
        bad = cs[cs["error_rate"] > 0]
        notes.append(
            f"{len(bad)} measured window(s) had failed requests (worst error rate "
            f"{num(100 * bad['error_rate'].max(), '.1f')}%); failures are "
            "excluded from speed metrics, which can bias them."
        )
    failed = svc[svc["state"] == "failed"] if not svc.empty else svc
    if not failed.empty:
        notes.append(
            f"{len(failed)} service(s) failed ({_why(failed)}); their configs have no results."
        )
    status = str(data.campaign.get("status", ""))
    if status != "complete":
        notes.append(
            f"The campaign status is {em(status)}, not complete: some planned units may be missing."
        )
    return notes


FAILURE_CAUSES = 3  # distinct errors a note names; the appendix lists every service's


def _why(failed: pd.DataFrame) -> str:
    """The failed services' methods grouped by their `error` (which names the log's cause,
    or "not started: ..."), the most common first."""
    errors = failed["error"].fillna("no error recorded").astype(str)
    groups = failed.groupby(errors)["method"].agg(lambda m: sorted(set(m)))
    order = errors.value_counts().index  # ties keep first-seen order
    parts = [f"{', '.join(d(m) for m in groups[err])}: {d(err)}" for err in order]
    more = len(parts) - FAILURE_CAUSES
    return "; ".join(parts[:FAILURE_CAUSES]) + (
        f"; {more} more in the appendix" if more > 0 else ""
    )


def transport_notes(svc: pd.DataFrame) -> list[str]:
    """A threats sentence for services measured through a tunnel (or not known not to be)."""
    if svc.empty or "transport" not in svc:
        return []
    notes = []
    tunnels = svc[~svc["transport"].isin(["direct", "unknown"])]
    tunnels = tunnels.drop_duplicates(["method", "tp", "transport"])  # a start per round
    if not tunnels.empty:
        names = ", ".join(
            f"{d(r['method'])} TP{d(r['tp'])} ({d(r['transport'])})" for _, r in tunnels.iterrows()
        )
        notes.append(
            f"The receive stamps of {names} were taken after an SSH tunnel: they mark when "
            "the forward wrote the bytes to loopback, so TTFT and inter-token gaps include "
            "the tunnel’s delay and batching."
        )
    unknown = svc[svc["transport"] == "unknown"]
    if not unknown.empty:
        names = ", ".join(sorted({d(m) for m in unknown["method"]}))
        notes.append(
            f"How {names} was reached was not recorded (an older specsweep): if through an "
            "SSH tunnel, its receive stamps were taken after the tunnel."
        )
    return notes


def replica_notes(ra: pd.DataFrame) -> list[str]:
    """When configurations ran as several replicas (view replica_agreement): whether the
    baseline's replicas agree (their decode-speed intervals share a point), naming the
    windows where they do not; a speculative method's replicas ran different workloads, so
    only the baseline is judged."""
    base = ra[ra["is_baseline"].astype(bool)] if not ra.empty else ra
    if base.empty:
        return []
    groups = base.groupby(["run", "config_id", "max_tokens", "concurrency"], sort=True)
    split = [(key, g) for key, g in groups if not g["agree"].astype(bool).all()]
    text = (
        f"The baseline ran as several replicas (service starts on GPUs of their own) in "
        f"{groups.ngroups} window(s); "
    )
    if not split:
        return [
            text + "in each, the replicas’ median decode speeds agree (95% "
            "order-statistic intervals share a point), so pooling them is sound."
        ]
    (run, _, max_tokens, concurrency), g = split[0]
    speeds = "; ".join(
        f"replica {int(r['replica'])} (GPU {d(r['gpus']) or '-'}) "
        f"{num(r['decode_tps_p50'], '.1f')} "
        f"[{num(r['ci_low'], '.1f')}, {num(r['ci_high'], '.1f')}]"
        for _, r in g.iterrows()
    )
    return [
        text + f"in {len(split)} the replicas disagree, e.g. run {int(run)}, max_tokens "
        f"{int(max_tokens)}, concurrency {int(concurrency)}: {speeds} tok/s. Their "
        "pooled figures mix servers that ran at different speeds."
    ]


def validity_notes(data: ReportData) -> list[str]:
    """Data-driven threats to validity (appended to the template's fixed text)."""
    notes = (
        _host_notes(data)
        + design.start_notes(data)
        + _sample_notes(data)
        + _cache_notes(data)
        + _failure_notes(data)
        + replica_notes(data.replica_agreement)
        + transport_notes(data.services)
    )
    return notes
