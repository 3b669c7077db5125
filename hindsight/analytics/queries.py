"""The SQL behind ``hindsight tune`` and the views in ``infra/clickhouse/`` (one source for both).

ClickHouse does the aggregation; Python receives histograms and per-memory rows, never raw log rows.
:class:`TuningSql` renders each query for a choice of

- ``signal``: what counts as a *use* of a memory: ``feedback`` (the agent labelled it ``used``) or
  ``access`` (recall returned it, the eviction job's notion);
- ``clock``: ``wall`` (``recalled_at`` / the memory's ``stored_at``) or ``reference`` (the recall's
  ``reference_time`` / the memory's ``created_at``: a replayed history, whose recalls carry the
  simulated "now", uses this one).

:func:`views` renders the same queries with the defaults (``feedback``, ``wall``) as
``CREATE OR REPLACE VIEW`` statements (applied at every start by :func:`hindsight.analytics.schema.migrate`),
so an operator can point Grafana or any SQL client at ``v_floor_curve``, ``v_reuse_gaps``, ... and see
the numbers the tuner fits.

Labels: a recall that received any feedback has all its returned memories labelled: the agent's
label where given (latest wins), else ``unused``. ``used`` and ``outdated`` are relevant to the
query (positives for the similarity floor); ``unused`` and ``wrong`` are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hindsight.analytics.schema import SchemaNames

Signal = Literal["feedback", "access"]
Clock = Literal["wall", "reference"]

DAY_MS = 86_400_000.0
POSITIVE = ("used", "outdated")
NEGATIVE = ("unused", "wrong")
AGE_BUCKETS = (1.0, 7.0, 30.0, 90.0, 365.0)
"""Upper bounds (days) of the age buckets of ``usage_by_age``; the last bucket is open."""


def _days(column: str) -> str:
    return f"(toUnixTimestamp64Milli({column}) / {DAY_MS})"


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


@dataclass(frozen=True)
class TuningSql:
    """Queries over the tables of ``names`` for one ``signal`` and ``clock`` (module doc)."""

    names: SchemaNames
    signal: Signal = "feedback"
    clock: Clock = "wall"
    tenant: str | None = None
    """Restrict every query to one tenant (``None``: all tenants)."""
    source: str | None = None
    """A table holding :meth:`returned` already (the tuner's staging table); ``None``: the subquery."""

    # -- building blocks -------------------------------------------------------------------------

    def _tenant(self, alias: str = "") -> str:
        if self.tenant is None:
            return "1"
        prefix = f"{alias}." if alias else ""
        return f"{prefix}tenant_id = {{tenant:String}}"

    @property
    def recall_ts(self) -> str:
        """Column of a recall row that is its time on this clock."""
        return "reference_time" if self.clock == "reference" else "recalled_at"

    @property
    def memory_ts(self) -> str:
        """Column of an inventory row that is the memory's birth on this clock."""
        return "created_at" if self.clock == "reference" else "stored_at"

    def latest_feedback(self) -> str:
        """One row per labelled (tenant, query, memory): the latest label."""
        t = self.names.table("recall_feedback")
        return (
            "SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label "
            f"FROM {t} WHERE {self._tenant()} GROUP BY tenant_id, query_id, memory_id"
        )

    def returned(self) -> str:
        """Every returned (query, memory) of the log: scores, age, times, ``has_feedback`` (its recall
        received feedback) and ``label`` (the agent's latest label; ``unused`` for a memory its recall's
        feedback left out; empty without feedback). The one scan of ``recall_candidates``: the tuner
        stages it in a temporary table (:attr:`source`) and reads everything else from there."""
        if self.source is not None:
            return f"SELECT * FROM {self.source}"
        c = self.names.table("recall_candidates")
        f = self.names.table("recall_feedback")
        return f"""SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM {c} AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM {f} WHERE {self._tenant()}) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN ({self.latest_feedback()}) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND {self._tenant("c")}"""

    def labelled_candidates(self) -> str:
        """The returned memories of the recalls that received feedback, each with its ``label``."""
        return f"SELECT * FROM ({self.returned()}) WHERE has_feedback"

    def uses(self) -> str:
        """``(tenant_id, user_id, memory_id, memory_type, ts)``: one row per use, ``ts`` in days."""
        where = "label = 'used'" if self.signal == "feedback" else "1"
        return (
            "SELECT tenant_id, user_id, memory_id, memory_type, "
            f"{_days(self.recall_ts)} AS ts FROM ({self.returned()}) WHERE {where}"
        )

    def inventory(self) -> str:
        """``(tenant_id, user_id, memory_id, memory_type, importance, born)``: stored memories."""
        inv = self.names.table("memory_inventory")
        return (
            "SELECT tenant_id, user_id, memory_id, memory_type, importance, "
            f"{_days(self.memory_ts)} AS born FROM {inv} FINAL WHERE {self._tenant()}"
        )

    def observation_end(self) -> str:
        """The last recall time on this clock (days): where every open gap is censored."""
        return (
            f"SELECT max({_days(self.recall_ts)}) FROM {self.names.table('recall_log')} "
            f"WHERE {self._tenant()}"
        )

    # -- what the tuner fetches --------------------------------------------------------------------

    def summary(self) -> str:
        """One row: recalls, candidate rows, returned, recalls with feedback, labels, uses, memories,
        first and last recall (days on this clock)."""
        log = self.names.table("recall_log")
        cand = self.names.table("recall_candidates")
        inv = self.names.table("memory_inventory")
        use = "label = 'used'" if self.signal == "feedback" else "1"
        day = _days(self.recall_ts)
        return f"""SELECT r.recalls, r.first_day, r.last_day,
    (SELECT count() FROM {cand} WHERE {self._tenant()}) AS candidate_rows,
    x.returned, x.recalls_with_feedback, x.positive_labels, x.negative_labels, x.uses,
    (SELECT count() FROM {inv} FINAL WHERE {self._tenant()}) AS memories
FROM (
    SELECT count() AS recalls, min({day}) AS first_day, max({day}) AS last_day
    FROM {log} FINAL WHERE {self._tenant()}
) AS r
CROSS JOIN (
    SELECT count() AS returned, uniqExactIf((tenant_id, query_id), has_feedback) AS recalls_with_feedback,
        countIf(label IN {_in(POSITIVE)}) AS positive_labels,
        countIf(label IN {_in(NEGATIVE)}) AS negative_labels, countIf({use}) AS uses
    FROM ({self.returned()})
) AS x"""

    def similarity_histogram(self, bin_width: float = 0.005) -> str:
        """``(bin, positive, negative)``: labelled returned candidates by similarity bin (lower edge)."""
        return f"""SELECT floor(similarity / {bin_width}) * {bin_width} AS bin,
    countIf(label IN {_in(POSITIVE)}) AS positive, countIf(label IN {_in(NEGATIVE)}) AS negative
FROM ({self.labelled_candidates()})
GROUP BY bin ORDER BY bin"""

    def score_histogram(self, column: str, bin_width: float = 0.01) -> str:
        """``(bin, used, unused)`` of ``column`` (similarity, final_score, ...) over labelled returns."""
        return f"""SELECT floor({column} / {bin_width}) * {bin_width} AS bin,
    countIf(label = 'used') AS used, countIf(label = 'unused') AS unused
FROM ({self.labelled_candidates()})
WHERE {column} IS NOT NULL
GROUP BY bin ORDER BY bin"""

    def usage_by_age(self) -> str:
        """``(memory_type, age_bucket, returned, used)``: how often returned memories were used, by
        their age at recall (bucket = index into :data:`AGE_BUCKETS`, the last one open)."""
        edges = "[" + ", ".join(str(e) for e in AGE_BUCKETS) + "]"
        return f"""SELECT memory_type, arrayFirstIndex(e -> age_days < e, {edges}) AS age_bucket,
    count() AS returned, countIf(label = 'used') AS used
FROM ({self.labelled_candidates()})
GROUP BY memory_type, age_bucket ORDER BY memory_type, age_bucket"""

    def reuse_gaps(self, bin_days: float = 1.0) -> str:
        """``(memory_type, bin, censored, n, gap_sum)``: the gaps between consecutive uses of each
        memory (its birth counts as the first point when known), binned by ``bin_days``; the last gap
        of each memory runs to the observation end and is censored (``censored = 1``)."""
        return f"""WITH ({self.observation_end()}) AS obs_end
SELECT memory_type, toUInt32(floor(gap / {bin_days})) AS bin, censored, count() AS n, sum(gap) AS gap_sum
FROM (
    SELECT memory_type, g.1 AS gap, g.2 AS censored
    FROM (
        SELECT memory_type,
            if(has_birth AND (empty(used_at) OR born <= used_at[1]), arrayPushFront(used_at, born),
               used_at) AS series
        FROM (
            SELECT tenant_id, memory_id, anyIf(memory_type, memory_type != '') AS memory_type,
                countIf(is_birth = 1) > 0 AS has_birth, minIf(ts, is_birth = 1) AS born,
                arraySort(groupArrayIf(ts, is_birth = 0)) AS used_at
            FROM (
                SELECT tenant_id, memory_id, memory_type, ts, 0 AS is_birth FROM ({self.uses()})
                UNION ALL
                SELECT tenant_id, memory_id, memory_type, born AS ts, 1 AS is_birth FROM ({self.inventory()})
            )
            GROUP BY tenant_id, memory_id
        )
        WHERE length(series) > 0
    )
    ARRAY JOIN arrayPushBack(
        arrayMap((a, b) -> (b - a, 0), arrayPopBack(series), arrayPopFront(series)),
        (obs_end - series[length(series)], 1)) AS g
)
WHERE gap >= 0
GROUP BY memory_type, bin, censored ORDER BY memory_type, bin, censored"""

    def replay(self) -> str:
        """Per stored memory: ``(user_key, memory_type, importance, born, uses_before, last_use_before,
        used_after)`` where the last three are arrays with one entry per cut of ``{cuts:Array(Float64)}``
        (days on this clock): uses before the cut, the last of them (0 if none), and whether it was used
        at or after the cut. One pass for every cut; memories born after a cut are masked by the caller."""
        return f"""SELECT concat(i.tenant_id, ':', i.user_id) AS user_key, i.memory_type AS memory_type,
    i.importance AS importance, i.born AS born,
    arrayMap(c -> arrayCount(x -> x < c, u.ts), {{cuts:Array(Float64)}}) AS uses_before,
    arrayMap(c -> arrayFold((m, x) -> if(x < c AND x > m, x, m), u.ts, toFloat64(0)), {{cuts:Array(Float64)}})
        AS last_use_before,
    arrayMap(c -> arrayExists(x -> x >= c, u.ts), {{cuts:Array(Float64)}}) AS used_after
FROM ({self.inventory()}) AS i
LEFT JOIN (
    SELECT tenant_id, memory_id, groupArray(ts) AS ts FROM ({self.uses()}) GROUP BY tenant_id, memory_id
) AS u ON i.tenant_id = u.tenant_id AND i.memory_id = u.memory_id"""

    def importance_histogram(self, bin_width: float = 0.01) -> str:
        """``(bin, stored, used)``: stored memories by importance bin, and how many were ever used."""
        return f"""SELECT floor(i.importance / {bin_width}) * {bin_width} AS bin, count() AS stored,
    countIf(u.n > 0) AS used
FROM ({self.inventory()}) AS i
LEFT JOIN (SELECT tenant_id, memory_id, count() AS n FROM ({self.uses()}) GROUP BY tenant_id, memory_id) AS u
    ON i.tenant_id = u.tenant_id AND i.memory_id = u.memory_id
GROUP BY bin ORDER BY bin"""


def views(names: SchemaNames) -> list[str]:
    """``CREATE OR REPLACE VIEW`` statements of the default queries (module doc)."""
    sql = TuningSql(names)
    floor_curve = f"""SELECT threshold, kept_positive, kept_negative,
    kept_positive / nullIf(total_positive, 0) AS recall,
    kept_positive / nullIf(kept_positive + kept_negative, 0) AS precision
FROM (
    SELECT bin AS threshold,
        sum(positive) OVER above AS kept_positive,
        sum(negative) OVER above AS kept_negative,
        sum(positive) OVER () AS total_positive
    FROM ({sql.similarity_histogram()})
    WINDOW above AS (ORDER BY bin DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
ORDER BY threshold"""
    latency = f"""SELECT toStartOfHour(recalled_at) AS hour, count() AS recalls,
    quantile(0.5)(timings_ms['total']) AS total_p50_ms, quantile(0.95)(timings_ms['total']) AS total_p95_ms,
    quantile(0.95)(timings_ms['embed']) AS embed_p95_ms,
    quantile(0.95)(timings_ms['parse_and_search']) AS search_p95_ms,
    quantile(0.95)(timings_ms['rank']) AS rank_p95_ms, avg(candidates) AS mean_candidates,
    avg(returned) AS mean_returned
FROM {names.table("recall_log")} FINAL
GROUP BY hour ORDER BY hour"""
    bodies = {
        "v_latest_feedback": sql.latest_feedback(),
        "v_returned": sql.returned(),
        "v_labelled_candidates": sql.labelled_candidates(),
        "v_floor_curve": floor_curve,
        "v_reuse_gaps": sql.reuse_gaps(),
        "v_usage_by_age": sql.usage_by_age(),
        "v_score_distribution": sql.score_histogram("similarity"),
        "v_keep_importance": sql.importance_histogram(),
        "v_recall_latency": latency,
    }
    return [f"CREATE OR REPLACE VIEW {names.table(name)} AS\n{body}" for name, body in bodies.items()]
