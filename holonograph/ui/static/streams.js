// Streams and quarantine: per-stream delivery (POST /holonograph/completeness): status,
// gaps (missing ordinal ranges); rejected spans by reason with the full text and the
// replay state (POST /holonograph/quarantine); both tables a page at a time from the
// server (`limit`, `offset`; the places in the link: `streamOffset`, `offset`).

import { post } from "./api.js";
import { h, put, count, empty, metric, pagedTable, table, when } from "./dom.js";

const PAGE = 50;

function gaps(s) {
  const ranges = s.missingRanges || [];
  if (!ranges.length) return "-";
  return ranges.map((r) => (r.from === r.to ? String(r.from) : `${r.from}–${r.to}`)).join(", ");
}

function streamRows(streams) {
  return streams.map((s) => [
    h("td", { class: "text" }, s.stream),
    metric(`completeness/streams/${s.stream}/status`, s.status, "strong", { class: s.status.startsWith("closed-complete") || s.status === "live" ? "good" : "warn" }),
    metric(`completeness/streams/${s.stream}/expected`, count(s.expected)),
    metric(`completeness/streams/${s.stream}/delivered`, count(s.delivered)),
    metric(`completeness/streams/${s.stream}/missing`, count(s.missing)),
    metric(`completeness/streams/${s.stream}/gaps`, gaps(s)),
    count(s.duplicates), count(s.quarantined), when(s.lastSeenAt),
  ]);
}

export async function streams({ root, range, signal, query, link, rerender }) {
  const window = { since: range.since, until: range.until };
  const reason = query.get("reason") || null;
  const surface = query.get("surface") || null;
  const offset = Number(query.get("offset") || 0);
  const streamOffset = Number(query.get("streamOffset") || 0);
  const completenessBody = { ...window };
  if (surface) completenessBody.surfaceId = surface;
  // The totals and one page of streams (lossy and dead first): the server pages them.
  const [complete, first] = await Promise.all([
    post("/holonograph/completeness", { ...completenessBody, limit: PAGE, offset: streamOffset }, signal),
    post("/holonograph/quarantine", { ...window, reason, limit: PAGE, offset }, signal),
  ]);
  const place = { offset: offset || null, streamOffset: streamOffset || null };  // both tables' pages
  const here = (changes) => link("streams", [], { surface, reason, ...place, ...changes });
  const totals = complete.totals;
  const key = "completeness/totals";
  const byStatus = Object.entries(totals.byStatus || {});
  put(root, 
    h("h1", {}, "Streams and quarantine"),
    h("p", { class: "note" }, "Streams with events from ", complete.since || "the start", " to ", complete.until || "now", query.get("surface") ? ` on ${query.get("surface")}` : ""),
    h("div", { class: "cards" },
      ["streams", "expected", "delivered", "missing", "missingInRange", "duplicates", "biasedWindows"].map((name) =>
        h("div", { class: "card" }, h("div", { class: "label" }, name.replace(/[A-Z]/g, (c) => " " + c.toLowerCase())), h("div", { class: "value" }, metric(`${key}/${name}`, count(totals[name]))))),
      byStatus.map(([status, n]) => h("div", { class: "card" }, h("div", { class: "label" }, `streams ${status}`), h("div", { class: "value" }, metric(`${key}/byStatus/${status}`, count(n))))),
    ),
  );
  put(root, h("h2", {}, "Streams (", metric("completeness/page/streams", count(complete.page.streams)), ")"));
  if (!complete.page.streams) put(root, empty("No emission stream in this window."));
  else {
    const columns = ["stream", "status", "expected", "delivered", "missing", "gaps (missing ordinals)", "duplicates", "quarantined", "last seen"];
    const paged = pagedTable({ name: "streams", columns, pageSize: PAGE, offset: streamOffset,
      fetchPage: async (at, size) => {
        const page = at === streamOffset ? complete : await post("/holonograph/completeness", { ...completenessBody, limit: size, offset: at }, signal);
        return { rows: streamRows(page.streams), total: page.page.streams };
      },
      onPage: (at) => { place.streamOffset = at || null; history.replaceState(null, "", here({})); },
    });
    await paged.ready;
    put(root, paged.element);
  }
  put(root, 
    h("h2", {}, "Rejected spans"),
    h("p", {}, metric("quarantine/total", count(first.total)), " still rejected", reason ? " with this reason" : "", "; ",
      metric("quarantine/replayed", count(first.replayed)), " replayed since (stored after a fix: holonograph replay --from quarantine)."),
  );
  if (reason) put(root, h("p", {}, "Reason: ", h("code", {}, reason), " · ", h("a", { href: here({ reason: null, offset: null }) }, "every reason")));
  put(root, first.reasons.length
    ? table(["spans", "reason (full text)", "first", "last", ""], first.reasons.map((r, i) => [
      metric(`quarantine/reasons/${i}/spans`, count(r.spans)),
      h("td", { class: "text" }, metric(`quarantine/reasons/${i}/reason`, r.reason)),
      when(r.firstReceivedAt), when(r.lastReceivedAt),
      h("a", { href: here({ reason: r.reason, offset: null }) }, "show spans"),
    ]))
    : empty("No rejected span in this window."));
  if (first.total) {
    const columns = ["received", "reason", "span", "trace / span id", "stream / seq", "source"];
    const rowsOf = (report) => report.spans.map((s) => [
      when(s.receivedAt), h("td", { class: "text" }, s.reason), s.spanName, `${s.traceId || "-"} / ${s.spanId || "-"}`,
      s.emissionStream ? `${s.emissionStream} / ${s.emissionSeq}` : "-", s.source || "-",
    ]);
    const paged = pagedTable({
      name: "quarantine", columns, pageSize: PAGE, offset,
      fetchPage: async (at, size) => {
        const report = at === offset ? first : await post("/holonograph/quarantine", { ...window, reason, limit: size, offset: at }, signal);
        return { rows: rowsOf(report), total: report.total };
      },
      onPage: (at) => { place.offset = at || null; history.replaceState(null, "", here({})); },
    });
    await paged.ready;
    put(root, paged.element);
  }
}
