"""The SQL of the completeness jobs (`processors.completeness.job`): one CTE numbering the
gap below every received (stream, seq), and the aggregates built on it. Kept apart so
the job module reads as the steps it runs; parameters are bound (`{name:Type}`),
`{where}`-style placeholders are filled with fixed clauses by the job, never values.
A stream is (tenant, stream): every window, group and join is per tenant.
"""

from __future__ import annotations

from schemas.tables import (
    COMPLETENESS_WINDOWS,
    EMISSION_RECEIPTS,
    EMISSION_RECORDS,
    EVALUATION_EVENTS,
    STREAM_STATUS,
)

RECEIPT_STREAMS = f"SELECT tenant_id, emission_stream FROM {EMISSION_RECEIPTS.qualified} WHERE"

# Per (tenant, surface) holding any: its events, and those that arrived without emission
# ordinals (OpenTelemetry GenAI evaluations, stored with `emission_stream = ''`), whose
# delivery no accounting can measure.
WITHOUT_ORDINALS = f"""
SELECT tenant_id, surface_id, count() AS events,
       countIf(emission_stream = '') AS without_ordinals
FROM {EVALUATION_EVENTS.qualified} FINAL
WHERE {{where}}
GROUP BY tenant_id, surface_id
HAVING without_ordinals > 0
ORDER BY tenant_id, surface_id"""


# One row per received (stream, seq) with the size of the gap just below it.
RECORDS = f"""
records AS (
    SELECT
        tenant_id AS tenant,
        emission_stream AS stream,
        emission_seq AS seq,
        kind = 'sentinel' AS is_sentinel,
        final AS is_final,
        quarantined AS is_quarantined,
        surface_id AS surface,
        event_time AS evt_time,
        first_received_at AS first_rx,
        last_received_at AS last_rx,
        received_count AS receipts,
        sentinel_interval_ms AS interval_ms,
        completeness_offered AS c_offered,
        completeness_delivered AS c_delivered,
        completeness_dropped AS c_dropped,
        completeness_failed AS c_failed,
        completeness_window_start AS c_start,
        completeness_window_end AS c_end,
        toInt64(emission_seq) - lagInFrame(toInt64(emission_seq), 1, toInt64(-1)) OVER (
            PARTITION BY tenant_id, emission_stream ORDER BY emission_seq
            ROWS BETWEEN 1 PRECEDING AND CURRENT ROW
        ) - 1 AS gap_before
    FROM {EMISSION_RECORDS.qualified}
    WHERE {{where}}
)"""


# Client window counters: each distinct reported window counts once, however many
# sentinels repeated it; a sentinel without window bounds is its own window.
STREAMS_SELECT = """
SELECT
    tenant AS tenant_id,
    stream AS emission_stream,
    multiIf(
        final_seen AND missing = 0 AND countIf(is_quarantined) > 0
            AND countIf(is_quarantined) >= count() - countIf(is_sentinel), 'all-quarantined',
        final_seen AND missing = 0, 'closed-complete',
        final_seen, 'closed-lossy',
        toUnixTimestamp64Milli(last_seen_at) + dead_after_ms
            < toUnixTimestamp64Milli({now:DateTime64(3, 'UTC')}), 'dead',
        'open') AS status,
    min(seq) AS first_seq,
    max(seq) AS last_seq,
    if(final_seen, minIf(seq, is_final), NULL) AS final_seq,
    last_seq + 1 AS expected,
    count() AS delivered,
    expected - delivered AS missing,
    sum(receipts - 1) AS duplicates,
    countIf(is_quarantined) AS quarantined,
    countIf(is_sentinel) AS sentinels,
    arraySort(groupArrayIf(
        (toUInt64(seq - gap_before), toUInt64(seq - 1)), gap_before > 0)) AS missing_ranges,
    countIf(is_final) > 0 AS final_seen,
    min(first_rx) AS first_seen_at,
    max(last_rx) AS last_seen_at,
    min(evt_time) AS first_event_time,
    max(evt_time) AS last_event_time,
    argMaxIf(interval_ms, seq, isNotNull(interval_ms)) AS reported_interval_ms,
    toUInt64(ifNull(reported_interval_ms, {default_interval_ms:UInt64})) AS sentinel_interval_ms,
    isNotNull(reported_interval_ms) AS interval_reported,
    toUInt64(sentinel_interval_ms * {dead_after_intervals:Float64}) AS dead_after_ms,
    arraySort(groupUniqArrayIf(surface, surface != '')) AS surfaces,
    groupUniqArrayIf(
        (ifNull(c_start, toDateTime64(0, 9, 'UTC')), ifNull(c_end, toDateTime64(0, 9, 'UTC')),
         if(isNull(c_start) OR isNull(c_end), seq, toUInt64(0)),
         ifNull(c_offered, 0), ifNull(c_delivered, 0), ifNull(c_dropped, 0), ifNull(c_failed, 0)),
        isNotNull(c_offered) OR isNotNull(c_delivered)
            OR isNotNull(c_dropped) OR isNotNull(c_failed)) AS reported,
    toUInt64(length(reported)) AS reported_windows,
    toInt64(arraySum(x -> x.4, reported)) AS reported_offered,
    toInt64(arraySum(x -> x.5, reported)) AS reported_delivered,
    toInt64(arraySum(x -> x.6, reported)) AS reported_dropped,
    toInt64(arraySum(x -> x.7, reported)) AS reported_failed,
    toInt64(missing) - reported_dropped AS lost_after_client,
    reported_dropped > toInt64(missing) AS loss_mismatch,
    {now:DateTime64(3, 'UTC')} AS status_as_of,
    {version:UInt64} AS version,
    now64(3, 'UTC') AS computed_at
FROM records
GROUP BY tenant, stream"""


STREAM_WINDOWS_SELECT = """
SELECT
    tenant AS tenant_id,
    b.1 AS bucket,
    'stream' AS scope,
    '' AS surface_id,
    stream AS emission_stream,
    b.2 AS bucket_start,
    delivered + missing AS offered,
    count() AS delivered,
    toUInt64(sum(gap_before)) AS missing,
    countIf(is_quarantined) AS quarantined,
    sum(receipts - 1) AS duplicates,
    delivered / offered AS completeness_lower_bound,
    missing > 0 AS bias_flag,
    toUInt64(1) AS streams,
    toUInt64(missing > 0) AS lossy_streams,
    sumMapIf(map(surface, toUInt64(1)), surface != '') AS delivered_by_surface,
    sumMapIf(map(surface, toUInt64(1)), surface != '' AND is_quarantined) AS quarantined_by_surface,
    {version:UInt64} AS version,
    now64(3, 'UTC') AS computed_at
FROM records
ARRAY JOIN arrayFilter(x -> has({buckets:Array(String)}, x.1), [
    ('minute', toDateTime(toStartOfMinute(evt_time), 'UTC')),
    ('hour', toDateTime(toStartOfHour(evt_time), 'UTC')),
    ('day', toDateTime(toStartOfDay(evt_time), 'UTC'))]) AS b
GROUP BY tenant_id, bucket, emission_stream, bucket_start"""


# A surface's bucket: its own delivered records against the gaps of every stream
# that ever carried it (a lost event's surface is unknown, so the floor is conservative).
SURFACE_WINDOWS_SELECT = """
SELECT
    w.tenant_id AS tenant_id,
    w.bucket AS bucket,
    'surface' AS scope,
    s_surface AS surface_id,
    '' AS emission_stream,
    w.bucket_start AS bucket_start,
    s_delivered + s_missing AS offered,
    sum(w.delivered_by_surface[s_surface]) AS s_delivered,
    sum(w.missing) AS s_missing,
    sum(w.quarantined_by_surface[s_surface]) AS quarantined,
    sum(w.duplicates) AS duplicates,
    if(offered = 0, 1., s_delivered / offered) AS completeness_lower_bound,
    s_missing > 0 AS bias_flag,
    count() AS streams,
    countIf(w.missing > 0) AS lossy_streams,
    map() AS delivered_by_surface,
    map() AS quarantined_by_surface,
    {{version:UInt64}} AS version,
    now64(3, 'UTC') AS computed_at
FROM {windows} AS w
INNER JOIN {statuses} AS st
    ON w.tenant_id = st.tenant_id AND w.emission_stream = st.emission_stream
ARRAY JOIN st.surfaces AS s_surface
WHERE {surface_where}
GROUP BY tenant_id, bucket, s_surface, bucket_start"""


# A stream row this refresh did not rewrite (its records moved to another bucket)
# is zeroed rather than left stale; `{shard}`: the range of streams a chunk rewrote.
ZERO_STALE = """
INSERT INTO {windows_table} ({columns})
SELECT tenant_id, bucket, scope, surface_id, emission_stream, bucket_start,
    0, 0, 0, 0, 0, 1., false, 0, 0, map(), map(), {{version:UInt64}}, now64(3, 'UTC')
FROM {windows_table} FINAL
WHERE scope = 'stream' AND version < {{version:UInt64}} AND {shard}
    AND has({{buckets:Array(String)}}, toString(bucket))
    AND (tenant_id, emission_stream) IN (
        SELECT tenant_id, emission_stream FROM {status_table}
        WHERE version = {{version:UInt64}})"""


MARK_DEAD_WHERE = f"""
FROM {STREAM_STATUS.qualified} FINAL
WHERE status = 'open' AND toUnixTimestamp64Milli(last_seen_at) + dead_after_ms
    < toUnixTimestamp64Milli({{now:DateTime64(3, 'UTC')}})"""


SHARD_BOUNDS = f"""
SELECT min((tenant_id, emission_stream)) AS lower FROM (
    SELECT tenant_id, emission_stream, n, sum(n) OVER (
        ORDER BY tenant_id, emission_stream
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto
    FROM (SELECT tenant_id, emission_stream, count() AS n
          FROM {EMISSION_RECEIPTS.qualified} GROUP BY tenant_id, emission_stream))
GROUP BY intDiv(upto - n, {{rows_per_shard:UInt64}})
ORDER BY lower"""


# The stream windows per bucket and day (before FINAL: a bound on a chunk's rows), from
# which a full recompute cuts the surface step into chunks of whole days.
SURFACE_CHUNK_DAYS = f"""
SELECT toString(bucket) AS bucket, toStartOfDay(bucket_start) AS day, count() AS n
FROM {COMPLETENESS_WINDOWS.qualified}
WHERE scope = 'stream' AND has({{buckets:Array(String)}}, toString(bucket))
GROUP BY bucket, day
ORDER BY bucket, day"""
