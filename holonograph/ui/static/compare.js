// Compare: vendors head to head on a surface (POST /holonograph/compare), per group
// with intervals and paired on the same calls.

import { post } from "./api.js";
import { h, put, count, empty, fixed, interval, metric, table } from "./dom.js";
import { intervalBar } from "./chart.js";
import { pickSurface } from "./surface.js";

function groupTable(report) {
  const sid = report.surfaceId;
  const dims = [...new Set(report.groups.flatMap((g) => g.dimensions.map((d) => d.dimensionId)))];
  const rows = [];
  for (const g of report.groups) {
    const key = `compare/${sid}/groups/${g.group}`;
    for (const d of g.dimensions) {
      const name = d.kind === "pass-fail" ? "passRate" : "mean";
      const value = d[name];
      const scale = d.kind === "pass-fail" ? [0, 1] : scoreScale(report, d.dimensionId);
      rows.push([
        h("strong", {}, g.group), metric(`${key}/events`, count(g.events)), d.dimensionId,
        d.kind === "pass-fail" ? "pass rate" : "mean score",
        metric(`${key}/${d.dimensionId}/${name}`, interval(value)),
        intervalBar(value, scale[0], scale[1]),
        metric(`${key}/${d.dimensionId}/missing`, count(d.missing)),
        metric(`${key}/latencyMs/p50`, fixed(g.latencyMs && g.latencyMs.p50, 1)),
        metric(`${key}/costPerEvaluationUsd`, fixed(g.costPerEvaluationUsd, 6)),
      ]);
    }
  }
  return dims.length ? table(["vendor", "events", "dimension", "measure", "estimate [95% interval]", "", "missing", "p50 latency ms", "cost/evaluation USD"], rows) : empty("No graded outcome.");
}

function scoreScale(report, dimensionId) {
  const all = report.groups.flatMap((g) => g.dimensions.filter((d) => d.dimensionId === dimensionId && d.mean).map((d) => d.mean));
  const lo = Math.min(...all.map((v) => v.ciLow)), hi = Math.max(...all.map((v) => v.ciHigh));
  const pad = (hi - lo) * 0.2 || 1;
  return [lo - pad, hi + pad];
}

function pairedTable(report) {
  const sid = report.surfaceId;
  if (!report.paired.length) return empty("No call was answered by two vendors in this window (no paired comparison).");
  return table(["dimension", "primary", "observer", "paired calls", "improved", "regressed", "equal", "observer missing", "difference [95% interval]", "", "p", "adjusted p", ""],
    report.paired.map((p) => {
      const key = `compare/${sid}/paired/${p.dimensionId}/${p.primary}/${p.observer}`;
      const span = Math.max(0.1, Math.abs(p.difference ? p.difference.ciLow : 0), Math.abs(p.difference ? p.difference.ciHigh : 0));
      return [p.dimensionId, p.primary, p.observer,
        metric(`${key}/paired`, count(p.paired)), metric(`${key}/improved`, count(p.improved)),
        metric(`${key}/regressed`, count(p.regressed)), metric(`${key}/equal`, count(p.equal)),
        metric(`${key}/missing/observer`, count(p.missing.observer)),
        metric(`${key}/difference`, interval(p.difference)), intervalBar(p.difference, -span, span),
        metric(`${key}/pValue`, p.pValue === null ? "-" : Number(p.pValue).toPrecision(3)),
        metric(`${key}/adjustedPValue`, p.adjustedPValue === null ? "-" : Number(p.adjustedPValue).toPrecision(3)),
        p.significant ? h("span", { class: "bad" }, "significant") : "",
      ];
    }));
}

export async function compare(ctx) {
  const { root, args, range, signal, link, query } = ctx;
  if (!args.length) return pickSurface({ ...ctx, page: "compare", title: "Compare vendors: pick a surface" });
  const surfaceId = args[0];
  const body = { surfaceId, since: range.since, until: range.until };
  if (query.get("dimension")) body.dimensionId = query.get("dimension");
  const report = await post("/holonograph/compare", body, signal);
  put(root, 
    h("h1", {}, `Compare vendors on ${surfaceId}`),
    h("p", { class: "note" }, "From ", report.since, " to ", report.until, " · ", metric("compare/events", count(report.events)), " events, ",
      metric("compare/multiplexCalls", count(report.multiplexCalls)), " multiplexed calls · usual primary ", report.usualPrimary || "-", " · ",
      h("a", { href: link("surface", [surfaceId]) }, "surface page")),
    (report.notes || []).length ? h("ul", { class: "note" }, report.notes.map((n) => h("li", {}, n))) : null,
    h("h2", {}, "Per vendor"), groupTable(report),
    h("h2", {}, "Paired on the same calls"), pairedTable(report),
  );
}
