// Surface: pass rates and mean scores per hour (per day past three days) beside the
// completeness lower bound (POST /holonograph/report), change points with their labels and evidence and the bracketed
// windows (POST /lens/attribute, not recorded: `persist` false), recorded changes as
// annotations and the latest variance verdict per dimension.

import { get, post } from "./api.js";
import { h, put, count, cursorTable, empty, fixed, metric, table, when } from "./dom.js";
import { timeChart } from "./chart.js";
import { slices } from "./time.js";

async function settle(promise) {
  try {
    return { value: await promise };
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    return { error };
  }
}

function problem(error) {
  return h("div", { class: "alert", role: "alert", dataset: { error: error.code || "page", status: String(error.status || "") } },
    `${error.message}${error.status ? ` (${error.status} ${error.code})` : ""}`);
}

export async function pickSurface({ root, signal, link, page, title }) {
  const status = await get("/holonograph/status", {}, signal);
  const surfaces = status.tenants.flatMap((t) => t.surfaces.map((s) => s.surfaceId));
  put(root, h("h1", {}, title),
    surfaces.length
      ? h("ul", { class: "plain" }, surfaces.map((s) => h("li", {}, h("a", { href: link(page, [s]) }, s))))
      : empty("No surface has events yet."));
}

function effectText(e) {
  return e ? `${fixed(e.delta, 3)} [${fixed(e.ciLow, 3)}, ${fixed(e.ciHigh, 3)}] (${fixed(e.before, 3)} → ${fixed(e.after, 3)})` : "-";
}

function evidence(p, i) {
  const key = `drift/changePoints/${i}`;
  const items = [];
  (p.layerChanges || []).forEach((c, j) => items.push(metric(`${key}/layerChanges/${j}`, `${c.layer}: ${c.column} ${c.fromValue} → ${c.toValue}`)));
  for (const c of p.changeEvents || []) items.push(metric(`${key}/changeEvents/${c.changeId}`, `recorded ${c.kind} ${c.changeId} at ${c.at}${c.timing && c.timing.startsHere ? " (starts here)" : ""}: ${c.description}`));
  if (p.corroboration) items.push(`corroboration: ${(p.corroboration.corroboratingSurfaces || []).length} surface(s)`);
  for (const b of p.brackets || []) items.push(`inside a bracketed window: ${b}`);
  items.push(metric(`${key}/pValue`, `p = ${Number(p.pValue).toPrecision(3)}, statistic ${fixed(p.testStatistic, 2)}`));
  return h("ul", { class: "plain" }, items.map((t) => h("li", {}, t)));
}

function changePointTable(points) {
  if (!points.length) return empty("No change point in this window.");
  return table(["at", "dimension", "label", "confident", "reason", "effect (after − before)", "window", "evidence"],
    points.map((p, i) => [
      metric(`drift/changePoints/${i}/timestamp`, p.timestamp),
      metric(`drift/changePoints/${i}/dimensionId`, p.dimensionId),
      metric(`drift/changePoints/${i}/source`, p.source, "strong"),
      p.confident ? "yes" : "no",
      h("td", { class: "text" }, metric(`drift/changePoints/${i}/reason`, p.reason)),
      metric(`drift/changePoints/${i}/effect`, effectText(p.effect)),
      `${p.window.from} – ${p.window.to}`,
      h("td", { class: "text" }, evidence(p, i)),
    ]));
}

function bracketTable(windows) {
  if (!windows.length) return empty("No bracketed window: nothing to read with care.");
  return table(["from", "to", "reason", "dimension", "detail"], windows.map((w, i) => [
    metric(`drift/brackets/${i}/from`, w.from), metric(`drift/brackets/${i}/to`, w.to),
    metric(`drift/brackets/${i}/reason`, w.reason, "strong"), w.dimensionId || "(surface)",
    h("td", { class: "text" }, w.detail),
  ]));
}

// Hourly up to three days of range, else by day: a day's pass rate is its hours' passes
// over their graded outcomes, its mean score the hours' means weighted by their counts
// (both exact), its completeness lower bound the lowest of its hours' (still a bound).
const HOURLY_UP_TO_MS = 72 * 3600 * 1000;

export function granularity(since, until) {
  return new Date(until).getTime() - new Date(since).getTime() <= HOURLY_UP_TO_MS ? "hour" : "day";
}

function lowest(values) {
  const known = values.filter((v) => v !== null && v !== undefined);
  return known.length ? Math.min(...known) : null;
}

export function byDay(points, kind) {
  const days = new Map();
  for (const x of points) {
    const day = x.hour.slice(0, 10) + "T00:00:00Z";
    if (!days.has(day)) days.set(day, []);
    days.get(day).push(x);
  }
  return [...days].map(([day, xs]) => {
    const bound = lowest(xs.map((x) => x.completenessLowerBound));
    if (kind === "pass") {
      const graded = xs.reduce((a, x) => a + x.graded, 0), passes = xs.reduce((a, x) => a + x.passes, 0);
      return { hour: day, graded, passes, passRate: passes / graded, completenessLowerBound: bound };
    }
    const scored = xs.reduce((a, x) => a + x.scored, 0);
    return { hour: day, scored, meanScore: xs.reduce((a, x) => a + x.meanScore * x.scored, 0) / scored, completenessLowerBound: bound };
  });
}

function annotations(dimension, drift, changes) {
  const points = (drift ? drift.changePoints : []).filter((p) => p.dimensionId === dimension);
  const windows = (drift ? drift.bracketedWindows : []).filter((w) => !w.dimensionId || w.dimensionId === dimension);
  return {
    windows: windows.map((w) => ({ from: w.from, to: w.to, label: `${w.reason}: ${w.detail}` })),
    marks: points.map((p) => ({ at: p.timestamp, label: `${p.source}: ${p.reason}` })),
    notes: changes.map((c) => ({ at: c.at, label: `${c.kind} ${c.changeId}: ${c.description}` })),
  };
}

const LEGEND_MARKS = [h("span", { class: "lw" }, "bracketed window"), h("span", { class: "lc" }, "change point"), h("span", { class: "le" }, "recorded change")];

function seriesSection(dimension, hours, drift, changes, since, until) {
  const per = granularity(since, until);
  const shown = per === "hour" ? hours : byDay(hours, "pass");
  const chart = timeChart({
    title: `${dimension}: pass rate and completeness lower bound per ${per}`,
    since, until,
    series: [
      { label: "pass rate", points: shown.map((x) => [x.hour, x.passRate]) },
      { label: "completeness lower bound", points: shown.map((x) => [x.hour, x.completenessLowerBound]) },
    ],
    ...annotations(dimension, drift, changes),
  });
  const rows = shown.map((x) => [
    x.hour,
    metric(`series/${dimension}/${x.hour}/graded`, count(x.graded)),
    metric(`series/${dimension}/${x.hour}/passes`, count(x.passes)),
    metric(`series/${dimension}/${x.hour}/passRate`, fixed(x.passRate, 3)),
    metric(`series/${dimension}/${x.hour}/completenessLowerBound`, fixed(x.completenessLowerBound, 3)),
  ]);
  return h("section", { dataset: { dimension, per } },
    h("h2", {}, `${dimension} (pass/fail)`),
    h("div", { class: "legend" }, h("span", { class: "l0" }, "pass rate"), h("span", { class: "l1" }, "completeness lower bound"), LEGEND_MARKS.map((e) => e.cloneNode(true))),
    chart,
    h("details", {}, h("summary", {}, `values per ${per} (${shown.length})`),
      table([per, "graded", "passes", "pass rate", "completeness lower bound"], rows)),
  );
}

// A scored dimension: its mean score per hour (or day) on the score's own scale, and
// beside it, on the same time axis, the completeness lower bound of the same hours.
function scoreSeriesSection(dimension, hours, drift, changes, since, until) {
  const per = granularity(since, until);
  const shown = per === "hour" ? hours : byDay(hours, "score");
  const means = shown.map((x) => x.meanScore);
  const lo = Math.min(...means), hi = Math.max(...means);
  const margin = hi > lo ? (hi - lo) * 0.1 : 0.5;
  const marks = annotations(dimension, drift, changes);
  const rows = shown.map((x) => [
    x.hour,
    metric(`scoreSeries/${dimension}/${x.hour}/scored`, count(x.scored)),
    metric(`scoreSeries/${dimension}/${x.hour}/meanScore`, fixed(x.meanScore, 3)),
    metric(`scoreSeries/${dimension}/${x.hour}/completenessLowerBound`, fixed(x.completenessLowerBound, 3)),
  ]);
  return h("section", { dataset: { scoreSeries: dimension, per } },
    h("h2", {}, `${dimension} (score): mean score per ${per}`),
    h("div", { class: "legend" }, h("span", { class: "l0" }, "mean score"), h("span", { class: "l1" }, "completeness lower bound (0 to 1, below)"), LEGEND_MARKS.map((e) => e.cloneNode(true))),
    timeChart({ title: `${dimension}: mean score per ${per}`, since, until, yMin: lo - margin, yMax: hi + margin,
      series: [{ label: "mean score", points: shown.map((x) => [x.hour, x.meanScore]) }], ...marks }),
    timeChart({ title: `${dimension}: completeness lower bound per ${per}`, since, until, height: 120,
      series: [{ label: "", points: [] }, { label: "completeness lower bound", points: shown.map((x) => [x.hour, x.completenessLowerBound]) }], windows: marks.windows }),
    h("details", {}, h("summary", {}, `values per ${per} (${shown.length})`),
      table([per, "scored", "mean score", "completeness lower bound"], rows)),
  );
}

const EVENTS_PAGE = 50;
const SCORE_SLICES = 8;

// Scores over time: each vendor's mean score with its interval in equal slices of the
// range, each slice one POST /holonograph/compare (the comparison's own estimate).
async function scoreSection(surfaceId, window, signal) {
  const parts = slices(window, SCORE_SLICES);
  const answers = await Promise.all(parts.map((p) => settle(post("/holonograph/compare", { surfaceId, ...p }, signal))));
  const out = [];
  const dimensions = new Set();
  for (const a of answers) for (const g of (a.value ? a.value.groups : [])) for (const d of g.dimensions) if (d.kind === "score") dimensions.add(d.dimensionId);
  for (const dimension of dimensions) {
    const vendors = [...new Set(answers.flatMap((a) => (a.value ? a.value.groups.map((g) => g.group) : [])))];
    const mean = (a, vendor) => {
      const g = a.value && a.value.groups.find((x) => x.group === vendor);
      const d = g && g.dimensions.find((x) => x.dimensionId === dimension);
      return d ? d.mean : null;
    };
    const values = answers.flatMap((a) => vendors.map((v) => mean(a, v)).filter(Boolean));
    const lo = Math.min(...values.map((v) => v.ciLow)), hi = Math.max(...values.map((v) => v.ciHigh));
    const rows = vendors.map((v) => [h("strong", {}, v), ...answers.map((a, i) => (a.error ? h("span", { class: "warn", title: a.error.message }, a.error.code)
      : metric(`scores/${dimension}/${v}/${i}`, mean(a, v) ? `${fixed(mean(a, v).estimate, 3)} [${fixed(mean(a, v).ciLow, 3)}, ${fixed(mean(a, v).ciHigh, 3)}]` : "-")))]);
    out.push(h("section", { dataset: { score: dimension } },
      h("h2", {}, `${dimension} (score): mean per vendor over time`),
      h("div", { class: "legend" }, vendors.slice(0, 3).map((v, i) => h("span", { class: `l${i}` }, v))),
      timeChart({
        title: `${dimension}: mean score per vendor in ${SCORE_SLICES} slices of the range`,
        since: parts[0].since, until: parts[parts.length - 1].until,
        yMin: Number.isFinite(lo) ? lo : 0, yMax: Number.isFinite(hi) ? hi : 1,
        series: vendors.slice(0, 3).map((v) => ({ label: v, points: answers.map((a, i) => [parts[i].since, mean(a, v) ? mean(a, v).estimate : null]) })),
      }),
      h("details", {}, h("summary", {}, "each slice's mean and 95% interval"),
        table(["vendor", ...parts.map((p) => p.since.slice(5, 16).replace("T", " "))], rows)),
    ));
  }
  return out;
}

function outcomes(e) {
  return e.dimensions.map((d) => `${d.dimensionId} ${d.passed === null ? (d.score === null ? "ungraded" : fixed(d.score, 2)) : d.passed ? "pass" : "fail"}`).join(", ");
}

// The surface's events, latest received first, a server page (GET /lens/events) at a time.
function eventsTable(surfaceId, window, signal) {
  return cursorTable({
    name: "events",
    columns: ["event", "time", "received", "light source", "role", "outcomes", "correlation id", "stream / seq"],
    fetchPage: async (cursor) => {
      const page = await get("/lens/events", { surfaceId, ...window, limit: EVENTS_PAGE, cursor }, signal);
      return {
        next: page.nextCursor,
        rows: page.events.map((e) => [metric(`events/${e.eventId}`, e.eventId), e.timestamp, e.firstReceivedAt, e.lightSourceId,
          e.multiplexRole || "-", h("td", { class: "text" }, outcomes(e)), e.correlationId || "-",
          e.emission ? `${e.emission.stream} / ${e.emission.seq}` : "-"]),
      };
    },
  });
}

export async function surface(ctx) {
  const { root, args, range, signal, link } = ctx;
  if (!args.length) return pickSurface({ ...ctx, page: "surface", title: "Surfaces" });
  const surfaceId = args[0];
  const window = { since: range.since, until: range.until };
  const [report, drift] = await Promise.all([
    settle(post("/holonograph/report", { ...window, surfaceId }, signal)),
    settle(post("/lens/attribute", { ...window, surfaceId, persist: false }, signal)),
  ]);
  if (report.error && drift.error && report.error.status === drift.error.status) throw report.error;
  const section = report.value ? report.value.surfaces.find((s) => s.surfaceId === surfaceId) : null;
  const since = report.value ? report.value.since : drift.value ? drift.value.since : range.since;
  const until = report.value ? report.value.until : drift.value ? drift.value.until : range.until;
  const changes = section ? section.changes : [];
  put(root, 
    h("h1", {}, `Surface ${surfaceId}`),
    h("p", { class: "note" }, "From ", metric("surface/since", since), " to ", metric("surface/until", until), " · ",
      h("a", { href: link("compare", [surfaceId]) }, "compare vendors"), " · ", h("a", { href: link("streams", [], { surface: surfaceId }) }, "streams")),
  );
  if (report.error) put(root, problem(report.error));
  if (section) {
    put(root, h("h2", {}, "Latest variance verdict"),
      section.verdicts.length
        ? table(["dimension", "verdict", "evaluated at"], section.verdicts.map((v) => [v.dimensionId,
          metric(`verdicts/${v.dimensionId}`, v.verdict, "strong", { class: v.verdict === "viable" ? "good" : "warn" }), v.createdAt]))
        : empty("No variance reading evaluated in this window (holonograph variance evaluate)."));
    const dimensions = Object.keys(section.series);
    if (!dimensions.length) put(root, empty("No graded pass/fail outcome on this surface in this window."));
    for (const d of dimensions) put(root, seriesSection(d, section.series[d], drift.value, changes, since, until));
    for (const d of Object.keys(section.scores || {})) put(root, scoreSeriesSection(d, section.scores[d], drift.value, changes, since, until));
    put(root, await scoreSection(surfaceId, window, signal));
  } else if (report.value) {
    put(root, empty("No event of this surface in this window."));
  }
  put(root, h("h2", {}, "Change points"));
  if (drift.error) put(root, problem(drift.error));
  else {
    put(root, h("p", { class: "note" }, metric("drift/eventCount", count(drift.value.eventCount)), " events read; ",
      (drift.value.notes || []).join(" ")), changePointTable(drift.value.changePoints),
      h("h2", {}, "Bracketed windows"), bracketTable(drift.value.bracketedWindows));
  }
  const events = eventsTable(surfaceId, window, signal);
  await events.ready;
  put(root, h("h2", {}, "Events, latest received first"), events.element);
  put(root, h("h2", {}, "Recorded changes"),
    changes.length
      ? table(["at", "kind", "change", "description", "by"], changes.map((c) => [metric(`changes/${c.changeId}/at`, c.at), metric(`changes/${c.changeId}/kind`, c.kind), c.changeId, h("td", { class: "text" }, c.description), c.actor || "-"]))
      : empty("No recorded change of this surface in this window."));
}

export { settle, problem };
