"""The comparison's SQL: every count, sum and quantile is aggregated in ClickHouse over
the deduplicated rows (`FINAL`); Python only sees one row per group x dimension or per
(primary, observer) x dimension.

All queries share `SERIES_FILTER` (tenant, surface, window, run mode, provenance) with
the other jobs, and group by a fixed column fragment chosen by name, never user text:
a substrate column's name binds as a parameter.
"""

from __future__ import annotations

from processors.series.cells import ROLE_TAKEN, SELECTION_FILTER, SERIES_FILTER
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS

LIGHT_SOURCE = "light_source_id"
LENS = "lens_version"
SUBSTRATE = "substrate[{substrate_key:String}]"
GROUP_COLUMNS = {"light-source": LIGHT_SOURCE, "lens": LENS}

_DIMENSION_FILTER = "({dimension:String} = '' OR dimension_id = {dimension:String})"


def dimension_kinds_sql() -> str:
    """Dimensions of the surface in the window, with how many outcomes of each kind."""
    return f"""
        SELECT dimension_id, countIf(passed IS NOT NULL) AS booleans,
               countIf(score IS NOT NULL) AS scores
        FROM {EVALUATION_DIMENSIONS.qualified} FINAL
        WHERE {SERIES_FILTER} AND {_DIMENSION_FILTER}
        GROUP BY dimension_id ORDER BY dimension_id
    """


def group_events_sql(group: str) -> str:
    """Per group: events (of the groups' role, `CompareRequest.group_role`), latency
    quantiles, cost, tokens and its multiplex roles."""
    return f"""
        SELECT {group} AS grp,
               count() AS events,
               quantileExact(0.5)(latency_ms) AS p50,
               quantileExact(0.95)(latency_ms) AS p95,
               count(latency_ms) AS with_latency,
               sum(cost_usd) AS cost,
               count(cost_usd) AS with_cost,
               sum(ifNull(tokens_input, 0)) AS tokens_in,
               sum(ifNull(tokens_output, 0)) AS tokens_out,
               countIf(tokens_input IS NOT NULL OR tokens_output IS NOT NULL) AS with_tokens,
               countIf(correlation_id != '' AND multiplex_role = 'primary') AS as_primary,
               countIf(correlation_id != '' AND multiplex_role = 'observer') AS as_observer
        FROM {EVALUATION_EVENTS.qualified} FINAL
        WHERE {SERIES_FILTER} AND {ROLE_TAKEN}
        GROUP BY grp ORDER BY grp
    """


def primaries_sql(group: str) -> str:
    """The events that answered a call as its primary (multiplex role `primary`, or no
    role: a call one vendor answered), per tenant, contract version they were checked
    against, run mode, served and requested id and group: what decides a fallback
    (`schemas.routing`), a few rows however many calls."""
    return f"""
        SELECT tenant_id, contract_version_id, run_mode, light_source_id,
               light_source_requested, {group} AS grp, count() AS calls
        FROM {EVALUATION_EVENTS.qualified} FINAL
        WHERE {SERIES_FILTER} AND multiplex_role IN ('primary', '')
        GROUP BY tenant_id, contract_version_id, run_mode, light_source_id,
                 light_source_requested, grp
    """


def group_outcomes_sql(group: str) -> str:
    """Per group x dimension: graded counts, passes, the scores' mean and variance (the
    numerically stable one: a sum of squares less n mean^2 cancels to nothing for
    scores like 1e8 +- 0.1)."""
    return f"""
        SELECT {group} AS grp, dimension_id,
               countIf(passed IS NOT NULL) AS graded_pf,
               countIf(passed) AS passes,
               countIf(score IS NOT NULL) AS graded_score,
               avg(score) AS score_mean,
               varSampStable(score) AS score_var
        FROM {EVALUATION_DIMENSIONS.qualified} FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER} AND {_DIMENSION_FILTER}
        GROUP BY grp, dimension_id ORDER BY grp, dimension_id
    """


def _calls_cte(group: str) -> str:
    """`calls`: the multiplex events; `primaries`: one primary per call (the vendor
    that answered, so a fallback is the fallback vendor's); `outcomes`: graded rows."""
    return f"""
        calls AS (
            SELECT tenant_id, correlation_id, event_id, multiplex_role AS role, {group} AS grp
            FROM {EVALUATION_EVENTS.qualified} FINAL
            WHERE {SERIES_FILTER} AND correlation_id != ''
              AND multiplex_role IN ('primary', 'observer')
        ),
        primaries AS (
            SELECT tenant_id, correlation_id, argMin(grp, event_id) AS p_grp,
                   argMin(event_id, event_id) AS p_event
            FROM calls WHERE role = 'primary'
            GROUP BY tenant_id, correlation_id
        ),
        outcomes AS (
            SELECT tenant_id, event_id, dimension_id, passed, score
            FROM {EVALUATION_DIMENSIONS.qualified} FINAL
            WHERE {SERIES_FILTER} AND {_DIMENSION_FILTER}
        )
    """


def multiplex_totals_sql(group: str) -> str:
    """Multiplex calls in the window, and those with no primary event at all."""
    return f"""
        WITH {_calls_cte(group)}
        SELECT uniqExact(tenant_id, correlation_id) AS calls,
               uniqExactIf((tenant_id, correlation_id),
                           (tenant_id, correlation_id) NOT IN
                           (SELECT tenant_id, correlation_id FROM primaries)) AS without_primary
        FROM calls
    """


def usual_primary_sql(group: str) -> str:
    """The group most often primary (ties: the smaller name)."""
    return f"""
        WITH {_calls_cte(group)}
        SELECT p_grp, count() AS n FROM primaries GROUP BY p_grp ORDER BY n DESC, p_grp LIMIT 1
    """


def paired_sql(group: str) -> str:
    """Per dimension x (primary group, observer group): the calls whose primary is that
    group, each paired with that observer group's outcome on the same call. A call
    where the observer has no event, or an event without the dimension, is missing
    for the observer; likewise for the primary. Both the pass/fail and the score
    statistics are returned (score differences as mean and stable variance); the
    caller reads the dimension's kind. The outcome columns are Nullable, so a row the
    LEFT JOIN does not find reads NULL: missing."""
    return f"""
        WITH {_calls_cte(group)},
        pairs AS (
            SELECT DISTINCT p.p_grp AS p_grp, c.grp AS o_grp
            FROM calls AS c
            INNER JOIN primaries AS p
                ON c.tenant_id = p.tenant_id AND c.correlation_id = p.correlation_id
            WHERE c.role = 'observer' AND c.grp != p.p_grp
        ),
        dims AS (SELECT DISTINCT dimension_id FROM outcomes),
        frame AS (
            SELECT p.tenant_id AS tenant_id, p.correlation_id AS correlation_id,
                   p.p_grp AS p_grp, p.p_event AS p_event, pr.o_grp AS o_grp,
                   d.dimension_id AS dimension_id
            FROM primaries AS p
            INNER JOIN pairs AS pr ON pr.p_grp = p.p_grp
            CROSS JOIN dims AS d
        ),
        observed AS (
            SELECT c.tenant_id AS tenant_id, c.correlation_id AS correlation_id,
                   c.grp AS o_grp, o.dimension_id AS dimension_id,
                   any(o.passed) AS passed, any(o.score) AS score
            FROM calls AS c
            INNER JOIN outcomes AS o ON o.tenant_id = c.tenant_id AND o.event_id = c.event_id
            WHERE c.role = 'observer'
            GROUP BY tenant_id, correlation_id, o_grp, dimension_id
        ),
        joined AS (
            SELECT f.dimension_id AS dimension_id, f.p_grp AS p_grp, f.o_grp AS o_grp,
                   po.passed AS pp, po.score AS ps, ob.passed AS op, ob.score AS os
            FROM frame AS f
            LEFT JOIN outcomes AS po
                ON po.tenant_id = f.tenant_id AND po.event_id = f.p_event
               AND po.dimension_id = f.dimension_id
            LEFT JOIN observed AS ob
                ON ob.tenant_id = f.tenant_id AND ob.correlation_id = f.correlation_id
               AND ob.o_grp = f.o_grp AND ob.dimension_id = f.dimension_id
        )
        SELECT dimension_id, p_grp, o_grp,
               count() AS calls,
               countIf(pp IS NOT NULL AND op IS NOT NULL) AS paired_pf,
               countIf(op AND pp) AS both_pf,
               countIf(op AND NOT pp) AS improved_pf,
               countIf(pp AND NOT op) AS regressed_pf,
               countIf(pp IS NULL AND op IS NOT NULL) AS missing_primary_pf,
               countIf(pp IS NOT NULL AND op IS NULL) AS missing_observer_pf,
               countIf(pp IS NULL AND op IS NULL) AS missing_both_pf,
               countIf(ps IS NOT NULL AND os IS NOT NULL) AS paired_score,
               countIf(os > ps) AS improved_score,
               countIf(os < ps) AS regressed_score,
               avgIf(os - ps, ps IS NOT NULL AND os IS NOT NULL) AS diff_mean,
               varSampStableIf(os - ps, ps IS NOT NULL AND os IS NOT NULL) AS diff_var,
               countIf(ps IS NULL AND os IS NOT NULL) AS missing_primary_score,
               countIf(ps IS NOT NULL AND os IS NULL) AS missing_observer_score,
               countIf(ps IS NULL AND os IS NULL) AS missing_both_score
        FROM joined
        GROUP BY dimension_id, p_grp, o_grp
        ORDER BY dimension_id, p_grp, o_grp
    """
