-- Hindsight ClickHouse schema, database hindsight (generated: hindsight tune sql)

CREATE DATABASE IF NOT EXISTS `hindsight`;

CREATE TABLE IF NOT EXISTS `hindsight`.`schema_migrations` (
    `version` UInt32,
    `name` String,
    `applied_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version;

-- migration 1: access_log

CREATE DATABASE IF NOT EXISTS `hindsight`;

CREATE TABLE IF NOT EXISTS `hindsight`.`access_log` (
    `access_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `memory_id` String,
    `memory_type` LowCardinality(String),
    `query_id` String,
    `query_text` String,
    `rank` UInt16,
    `similarity` Float32,
    `time_weight` Float32,
    `final_score` Float32,
    `accessed_at` DateTime64(3, 'UTC'),
    `session_id` String DEFAULT '',
    `scope` LowCardinality(String) DEFAULT '',
    `ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(accessed_at)
ORDER BY (tenant_id, user_id, accessed_at, access_id)
SETTINGS non_replicated_deduplication_window = 1000, fsync_after_insert = 1;

-- migration 2: access_log TTL

ALTER TABLE `hindsight`.`access_log` MODIFY TTL toDateTime(accessed_at) + toIntervalDay(365) SETTINGS materialize_ttl_after_modify = 0;

-- migration 3: recall_log and recall_candidates

CREATE TABLE IF NOT EXISTS `hindsight`.`recall_log` (
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `query_text` String,
    `intent` LowCardinality(String),
    `entities` Array(String),
    `window_start` Nullable(DateTime64(3, 'UTC')),
    `window_end` Nullable(DateTime64(3, 'UTC')),
    `wants_recent` Bool,
    `top_k` UInt16,
    `similarity_floor` Float32,
    `time_mode` LowCardinality(String),
    `result_order` LowCardinality(String),
    `rerank` Bool,
    `token_budget` UInt32,
    `tokens` UInt32,
    `truncated` Bool,
    `candidates` UInt16,
    `returned` UInt16,
    `timings_ms` Map(LowCardinality(String), Float32),
    `reference_time` DateTime64(3, 'UTC'),
    `recalled_at` DateTime64(3, 'UTC'),
    `ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(recalled_at)
ORDER BY (tenant_id, user_id, recalled_at, query_id)
TTL toDateTime(recalled_at) + toIntervalDay(90)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS `hindsight`.`recall_candidates` (
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `memory_id` String,
    `memory_type` LowCardinality(String),
    `kind` LowCardinality(String),
    `outcome` LowCardinality(String),
    `rank` Nullable(UInt16),
    `similarity` Float32,
    `dense_rank` Nullable(UInt16),
    `lexical_rank` Nullable(UInt16),
    `lexical_score` Nullable(Float32),
    `rerank_score` Nullable(Float32),
    `relevance` Nullable(Float32),
    `time_weight` Nullable(Float32),
    `final_score` Nullable(Float32),
    `in_time_window` Bool,
    `age_days` Float32,
    `since_access_days` Float32,
    `access_count` UInt32,
    `importance` Float32,
    `confidence` Float32,
    `status` LowCardinality(String),
    `version` UInt32,
    `reference_time` DateTime64(3, 'UTC'),
    `recalled_at` DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(recalled_at)
ORDER BY (tenant_id, query_id, memory_id)
TTL toDateTime(recalled_at) + toIntervalDay(90)
SETTINGS non_replicated_deduplication_window = 1000;

-- migration 4: recall_feedback

CREATE TABLE IF NOT EXISTS `hindsight`.`recall_feedback` (
    `feedback_id` String,
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `memory_id` String,
    `label` LowCardinality(String),
    `given_at` DateTime64(3, 'UTC'),
    `ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(given_at)
ORDER BY (tenant_id, query_id, memory_id)
TTL toDateTime(given_at) + toIntervalDay(180)
SETTINGS non_replicated_deduplication_window = 1000;

-- migration 5: memory_inventory

CREATE TABLE IF NOT EXISTS `hindsight`.`memory_inventory` (
    `memory_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `session_id` String,
    `memory_type` LowCardinality(String),
    `kind` LowCardinality(String),
    `source` LowCardinality(String),
    `importance` Float32,
    `confidence` Float32,
    `status` LowCardinality(String),
    `version` UInt32,
    `parent_id` String,
    `created_at` DateTime64(3, 'UTC'),
    `stored_at` DateTime64(3, 'UTC'),
    `seen_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(seen_at)
ORDER BY (tenant_id, user_id, memory_id)
TTL toDateTime(stored_at) + toIntervalDay(730)
SETTINGS non_replicated_deduplication_window = 1000;

-- views (re-created at every start)

CREATE OR REPLACE VIEW `hindsight`.`v_latest_feedback` AS
SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id;

CREATE OR REPLACE VIEW `hindsight`.`v_returned` AS
SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1;

CREATE OR REPLACE VIEW `hindsight`.`v_labelled_candidates` AS
SELECT * FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE has_feedback;

CREATE OR REPLACE VIEW `hindsight`.`v_floor_curve` AS
SELECT threshold, kept_positive, kept_negative,
    kept_positive / nullIf(total_positive, 0) AS recall,
    kept_positive / nullIf(kept_positive + kept_negative, 0) AS precision
FROM (
    SELECT bin AS threshold,
        sum(positive) OVER above AS kept_positive,
        sum(negative) OVER above AS kept_negative,
        sum(positive) OVER () AS total_positive
    FROM (SELECT floor(similarity / 0.005) * 0.005 AS bin,
    countIf(label IN ('used', 'outdated')) AS positive, countIf(label IN ('unused', 'wrong')) AS negative
FROM (SELECT * FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE has_feedback)
GROUP BY bin ORDER BY bin)
    WINDOW above AS (ORDER BY bin DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
ORDER BY threshold;

CREATE OR REPLACE VIEW `hindsight`.`v_reuse_gaps` AS
WITH (SELECT max((toUnixTimestamp64Milli(recalled_at) / 86400000.0)) FROM `hindsight`.`recall_log` WHERE 1) AS obs_end
SELECT memory_type, toUInt32(floor(gap / 1.0)) AS bin, censored, count() AS n, sum(gap) AS gap_sum
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
                SELECT tenant_id, memory_id, memory_type, ts, 0 AS is_birth FROM (SELECT tenant_id, user_id, memory_id, memory_type, (toUnixTimestamp64Milli(recalled_at) / 86400000.0) AS ts FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE label = 'used')
                UNION ALL
                SELECT tenant_id, memory_id, memory_type, born AS ts, 1 AS is_birth FROM (SELECT tenant_id, user_id, memory_id, memory_type, importance, (toUnixTimestamp64Milli(stored_at) / 86400000.0) AS born FROM `hindsight`.`memory_inventory` FINAL WHERE 1)
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
GROUP BY memory_type, bin, censored ORDER BY memory_type, bin, censored;

CREATE OR REPLACE VIEW `hindsight`.`v_usage_by_age` AS
SELECT memory_type, arrayFirstIndex(e -> age_days < e, [1.0, 7.0, 30.0, 90.0, 365.0]) AS age_bucket,
    count() AS returned, countIf(label = 'used') AS used
FROM (SELECT * FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE has_feedback)
GROUP BY memory_type, age_bucket ORDER BY memory_type, age_bucket;

CREATE OR REPLACE VIEW `hindsight`.`v_score_distribution` AS
SELECT floor(similarity / 0.01) * 0.01 AS bin,
    countIf(label = 'used') AS used, countIf(label = 'unused') AS unused
FROM (SELECT * FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE has_feedback)
WHERE similarity IS NOT NULL
GROUP BY bin ORDER BY bin;

CREATE OR REPLACE VIEW `hindsight`.`v_keep_importance` AS
SELECT floor(i.importance / 0.01) * 0.01 AS bin, count() AS stored,
    countIf(u.n > 0) AS used
FROM (SELECT tenant_id, user_id, memory_id, memory_type, importance, (toUnixTimestamp64Milli(stored_at) / 86400000.0) AS born FROM `hindsight`.`memory_inventory` FINAL WHERE 1) AS i
LEFT JOIN (SELECT tenant_id, memory_id, count() AS n FROM (SELECT tenant_id, user_id, memory_id, memory_type, (toUnixTimestamp64Milli(recalled_at) / 86400000.0) AS ts FROM (SELECT c.tenant_id AS tenant_id, c.user_id AS user_id, c.query_id AS query_id,
    c.memory_id AS memory_id, c.memory_type AS memory_type, c.kind AS kind, c.outcome AS outcome,
    c.similarity AS similarity, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, c.importance AS importance,
    c.reference_time AS reference_time, c.recalled_at AS recalled_at,
    q.query_id != '' AS has_feedback,
    multiIf(f.label != '', f.label, q.query_id != '', 'unused', '') AS label
FROM `hindsight`.`recall_candidates` AS c FINAL
LEFT JOIN (SELECT DISTINCT tenant_id, query_id FROM `hindsight`.`recall_feedback` WHERE 1) AS q
    ON c.tenant_id = q.tenant_id AND c.query_id = q.query_id
LEFT JOIN (SELECT tenant_id, query_id, memory_id, argMax(label, given_at) AS label FROM `hindsight`.`recall_feedback` WHERE 1 GROUP BY tenant_id, query_id, memory_id) AS f
    ON c.tenant_id = f.tenant_id AND c.query_id = f.query_id AND c.memory_id = f.memory_id
WHERE c.outcome = 'returned' AND 1) WHERE label = 'used') GROUP BY tenant_id, memory_id) AS u
    ON i.tenant_id = u.tenant_id AND i.memory_id = u.memory_id
GROUP BY bin ORDER BY bin;

CREATE OR REPLACE VIEW `hindsight`.`v_recall_latency` AS
SELECT toStartOfHour(recalled_at) AS hour, count() AS recalls,
    quantile(0.5)(timings_ms['total']) AS total_p50_ms, quantile(0.95)(timings_ms['total']) AS total_p95_ms,
    quantile(0.95)(timings_ms['embed']) AS embed_p95_ms,
    quantile(0.95)(timings_ms['parse_and_search']) AS search_p95_ms,
    quantile(0.95)(timings_ms['rank']) AS rank_p95_ms, avg(candidates) AS mean_candidates,
    avg(returned) AS mean_returned
FROM `hindsight`.`recall_log` FINAL
GROUP BY hour ORDER BY hour;
