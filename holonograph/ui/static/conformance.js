// Conformance, contracts and topology: each surface's live fixtures checked over
// consecutive slices of the window (POST /lens/conformance/check, not recorded:
// `persist` false), beside the checks recorded over the range (GET
// /lens/conformance/results): verdicts over time; and, for an agent picked from those
// the tenant's events name (GET /holonograph/status), its contract's
// versions (GET /holonograph/contract) and its coverage (POST /lens/topology/scan).

import { get, post } from "./api.js";
import { h, put, count, empty, fixed, metric, pagedTable, table } from "./dom.js";
import { settle, problem } from "./surface.js";
import { slices as sliced } from "./time.js";

const SLICES = 6;

const VERDICT_CLASS = { pass: "good", fail: "bad" };

const HISTORY = 50;

// The recorded checks (GET /lens/conformance/results) whose events' window overlaps the
// range, newest first, a server page at a time: each fixture version's verdict as it
// was recorded, over time.
async function historySection(surfaceId, whole, first, signal) {
  const box = h("div", { dataset: { history: surfaceId } }, h("h3", {}, `Recorded checks on ${surfaceId}`));
  if (first.error) return put(box, problem(first.error));
  if (!first.value.total) return put(box, empty("No check recorded over this range (holonograph conformance check, or the check endpoint with persist)."));
  const query = { surfaceId, judgedSince: whole.since, judgedUntil: whole.until, limit: HISTORY };
  const rowsOf = (answer) => answer.results.map((r) => {
    const key = `conformance/${surfaceId}/history/${r.checkId}`;
    return [
      metric(`${key}/checkedAt`, r.checkedAt), `${r.fixtureId} ${r.fixtureVersion === null ? "(inline)" : "v" + r.fixtureVersion}`,
      metric(`${key}/window`, `${r.window.since} to ${r.window.until}`),
      metric(`${key}/verdict`, r.verdict, "strong", { class: VERDICT_CLASS[r.verdict] || "warn" }),
      metric(`${key}/eventsChecked`, count(r.eventsChecked)),
      metric(`${key}/counts/fail`, count(r.counts.fail)), count(r.counts.pass), fixed(r.evaluableShare, 3),
    ];
  });
  const paged = pagedTable({
    name: `history-${surfaceId}`, pageSize: HISTORY,
    columns: ["checked at", "fixture", "events' window", "verdict", "events checked", "fail", "pass", "evaluable"],
    fetchPage: async (at, size) => {
      const answer = at === 0 ? first.value : await get("/lens/conformance/results", { ...query, limit: size, offset: at }, signal);
      return { rows: rowsOf(answer), total: answer.total };
    },
  });
  await paged.ready;
  return put(box, h("p", { class: "note" }, metric(`conformance/${surfaceId}/history/total`, count(first.value.total)),
    " check(s) recorded over this range, newest first; each row one fixture version's verdict on the events of its window."), paged.element);
}

async function fixtureSection(surfaceId, parts, signal) {
  const whole = { since: parts[0].since, until: parts[parts.length - 1].until };
  const [overall, history] = await Promise.all([
    settle(post("/lens/conformance/check", { surfaceId, ...whole, persist: false, limit: 0 }, signal)),
    settle(get("/lens/conformance/results", { surfaceId, judgedSince: whole.since, judgedUntil: whole.until, limit: HISTORY, offset: 0 }, signal)),
  ]);
  const box = h("section", { dataset: { surface: surfaceId } }, h("h2", {}, `Fixtures on ${surfaceId}`));
  if (overall.error) {
    put(box, overall.error.code === "no_live_fixture" ? empty("No live fixture on this surface (holonograph conformance approve).") : problem(overall.error));
    return put(box, await historySection(surfaceId, whole, history, signal));
  }
  const perSlice = await Promise.all(parts.map((p) => settle(post("/lens/conformance/check", { surfaceId, ...p, persist: false, limit: 0 }, signal))));
  const columns = ["fixture", "rule", "whole window", "events checked", "evaluable", "fail", "pass",
    ...parts.map((p) => `${p.since.slice(5, 16).replace("T", " ")}`)];
  const rows = overall.value.map((r) => {
    const key = `conformance/${surfaceId}/${r.fixtureId}`;
    return [
      `${r.fixtureId} v${r.fixtureVersion}`, h("td", { class: "text" }, r.ruleId),
      metric(`${key}/verdict`, r.verdict, "strong", { class: VERDICT_CLASS[r.verdict] || "warn" }),
      metric(`${key}/eventsChecked`, count(r.eventsChecked)),
      metric(`${key}/evaluableShare`, fixed(r.evaluableShare, 3)),
      metric(`${key}/counts/fail`, count(r.counts.fail)), metric(`${key}/counts/pass`, count(r.counts.pass)),
      ...perSlice.map((s, i) => {
        if (s.error) return h("span", { class: "warn", title: s.error.message }, s.error.code);
        const one = s.value.find((x) => x.fixtureId === r.fixtureId);
        return one ? metric(`${key}/slices/${i}`, `${one.verdict} (${one.eventsChecked})`, "span", { class: VERDICT_CLASS[one.verdict] || "warn" }) : "-";
      }),
    ];
  });
  put(box, h("h3", {}, "Live fixtures over the range, checked now (not recorded)"), table(columns, rows),
    h("p", { class: "note" }, `Each column after the totals is one of ${SLICES} equal slices of the window (events checked in brackets).`),
    await historySection(surfaceId, whole, history, signal));
  return box;
}

function contractSection(c) {
  return h("div", {},
    h("p", {}, "Version ", metric("contract/versionId", c.versionId, "code"), ", registered ", c.registeredAt,
      c.previousVersionId ? ` (previous: ${c.previousVersionId})` : " (the first)"),
    table(["surface", "dimensions (type)", "cohort tags", "substrate columns"], c.surfaces.map((s) => [
      s.id, s.dimensions.map((d) => `${d.id} (${d.type})`).join(", ") || "-", (s.cohortTags || []).join(", ") || "-",
      (s.substrateColumns || []).map((x) => x.id).join(", ") || "-",
    ])),
  );
}

const FACETS = ["dimensions", "cohortTags", "substrateColumns", "lightSources"];
const names = (part) => part.examples.map((e) => (typeof e === "string" ? e : e.id)).join(", ");

function coverageSection(scan) {
  const cov = scan.coverage;
  return h("div", {},
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "label" }, "declared"), h("div", { class: "value" }, metric("topology/coverage/declared", count(cov.declared)))),
      h("div", { class: "card" }, h("div", { class: "label" }, "observed"), h("div", { class: "value" }, metric("topology/coverage/observed", count(cov.observed)))),
      h("div", { class: "card" }, h("div", { class: "label" }, "coverage"), h("div", { class: "value" }, metric("topology/coverage/ratio", fixed(cov.ratio, 3)))),
      h("div", { class: "card" }, h("div", { class: "label" }, "gaps"), h("div", { class: "value" }, metric("topology/gaps", count(scan.gaps)))),
      h("div", { class: "card" }, h("div", { class: "label" }, "retirement candidates"), h("div", { class: "value" }, metric("topology/retirementCandidates", count(scan.retirementCandidates)))),
    ),
    table(["surface", "events", "coverage", ...FACETS.flatMap((f) => [`${f}: declared, not seen`, `${f}: seen, not declared`])],
      scan.surfaces.map((s) => [
        s.id, metric(`topology/surfaces/${s.id}/events`, count(s.events ? s.events.count : 0)),
        s.coverage ? metric(`topology/surfaces/${s.id}/ratio`, fixed(s.coverage.ratio, 3)) : "-",
        ...FACETS.flatMap((f) => (s[f] ? [h("td", { class: "text" }, `${s[f].declaredNotObserved.count}: ${names(s[f].declaredNotObserved)}`),
          h("td", { class: "text" }, `${s[f].observedNotDeclared.count}: ${names(s[f].observedNotDeclared)}`)] : ["-", "-"])),
      ])),
  );
}

export async function conformance({ root, range, signal, query, link }) {
  const parts = sliced(range, SLICES);
  const status = await get("/holonograph/status", {}, signal);
  const surfaces = status.tenants.flatMap((t) => t.surfaces.map((s) => s.surfaceId));
  put(root, h("h1", {}, "Conformance, contracts and topology"));
  const agent = query.get("agent") || "";
  // The agents whose events the tenant holds (status), to pick from; another name typed.
  const agents = [...new Set(status.tenants.flatMap((t) => t.surfaces.flatMap((s) => s.agents || []).concat(agent ? [agent] : [])))].sort();
  const picker = h("select", { id: "agent-picker", "aria-label": "Known agents" },
    h("option", { value: "" }, agents.length ? "— pick an agent —" : "— no agent seen yet —"),
    agents.map((a) => h("option", { value: a, selected: a === agent }, a)));
  const form = h("form", { class: "pager", "aria-label": "Agent" },
    h("label", {}, "Agent ", picker),
    h("label", {}, " or name one ", h("input", { id: "agent-input", value: agents.includes(agent) ? "" : agent, size: 24, spellcheck: "false" })),
    h("button", { type: "submit" }, "Show contract and coverage"));
  const choose = (name) => { location.hash = link("conformance", [], { agent: name || null }); };
  picker.addEventListener("change", () => choose(picker.value));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    choose(form.querySelector("input").value.trim() || picker.value);
  });
  put(root, form);
  if (agent) {
    const whole = { since: parts[0].since, until: parts[parts.length - 1].until };
    const [contract, scan] = await Promise.all([
      settle(get("/holonograph/contract", { agentId: agent }, signal)),
      settle(post("/lens/topology/scan", { agentId: agent, ...whole }, signal)),
    ]);
    put(root, h("h2", {}, `Contract of ${agent}`), contract.error ? problem(contract.error) : contractSection(contract.value));
    put(root, h("h2", {}, `Coverage of ${agent}`), scan.error ? problem(scan.error) : coverageSection(scan.value));
  } else {
    put(root, h("p", { class: "note" }, "Name an agent to see its registered contract and its topology coverage."));
  }
  if (!surfaces.length) put(root, empty("No surface has events yet: no fixture to check."));
  for (const s of surfaces) put(root, await fixtureSection(s, parts, signal));
}
