// Overview: what the collector knows of the token's tenant (GET /holonograph/status)
// and what arrives per minute (GET /holonograph/activity), polled while shown.

import { get } from "./api.js";
import { h, put, card, count, empty, metric, table, when } from "./dom.js";
import { timeChart } from "./chart.js";

const DEFAULT_POLL_SECONDS = 5;

function tenantSection(t, link) {
  const key = `status/${t.tenantId}`;
  const rows = t.surfaces.map((s) => [
    h("a", { href: link("surface", [s.surfaceId]) }, s.surfaceId),
    metric(`${key}/surfaces/${s.surfaceId}/events`, count(s.events)),
    s.dimensions.map((d, i) => [i ? ", " : "", metric(`${key}/surfaces/${s.surfaceId}/dimensions/${d.dimensionId}`, `${d.dimensionId} (${d.outcomes})`)]),
    when(s.firstEventAt),
    when(s.lastEventAt),
    metric(`${key}/surfaces/${s.surfaceId}/lastArrivalAt`, when(s.lastArrivalAt)),
    h("a", { href: link("compare", [s.surfaceId]) }, "compare"),
  ]);
  return h("section", { dataset: { tenant: t.tenantId } },
    h("h2", {}, `Tenant ${t.tenantId}`),
    h("div", { class: "cards" },
      card("events", metric(`${key}/events`, count(t.events))),
      card("surfaces", metric(`${key}/surfaces`, count(t.surfaces.length))),
      card("streams", metric(`${key}/streams`, count(t.streams))),
      card("rejected spans", metric(`${key}/quarantined`, count(t.quarantined))),
      card("last arrival", metric(`${key}/lastArrivalAt`, when(t.lastArrivalAt))),
      card("last rejection", metric(`${key}/lastRejectionAt`, when(t.lastRejectionAt))),
    ),
    rows.length
      ? table(["surface", "events", "dimensions (outcomes)", "first event", "last event", "last arrival", ""], rows)
      : empty("no events yet: point an OTLP exporter at this collector (or run `holonograph demo`)"),
  );
}

function scheduleSection(schedules) {
  if (!schedules.length) return h("p", { class: "note" }, "No scheduled run recorded (serve --schedule FILE runs them).");
  return table(["schedule", "job", "health", "last status", "last fire", "last success", "failed/runs", "last error"],
    schedules.map((s) => [s.schedule, s.job, h("span", { class: s.healthy ? "good" : "bad" }, s.healthy ? "ok" : "UNHEALTHY"),
      s.lastStatus, when(s.lastFireTime), when(s.lastSuccessAt), `${s.failed}/${s.runs}`, h("td", { class: "text" }, s.lastError || "-")]));
}

function activitySection(a) {
  const per = a.perMinute;
  const last = per.length ? per[per.length - 1] : { events: 0, rejections: 0 };
  const previous = per.length > 1 ? per[per.length - 2] : { events: 0, rejections: 0 };
  const top = Math.max(1, ...per.map((m) => Math.max(m.events, m.rejections)));
  const minute = 60 * 1000;
  return h("section", { id: "activity" },
    h("h2", {}, `Arrivals per minute, the last ${per.length} minutes`),
    h("div", { class: "cards" },
      card("events this minute", metric("activity/current/events", count(last.events))),
      card("events last minute", metric("activity/previous/events", count(previous.events))),
      card("rejections last minute", metric("activity/previous/rejections", count(previous.rejections))),
      card(`events, ${per.length} min`, metric("activity/events", count(a.events))),
      card(`rejections, ${per.length} min`, metric("activity/rejections", count(a.rejections))),
    ),
    h("div", { class: "legend" }, h("span", { class: "l0" }, "events received"), h("span", { class: "l1" }, "spans rejected")),
    timeChart({
      title: "events received and spans rejected per minute",
      since: a.since, until: new Date(new Date(a.until).getTime() - minute).toISOString(), yMin: 0, yMax: top, height: 180,
      series: [
        { label: "events per minute", points: per.map((m) => [m.minute, m.events]) },
        { label: "rejections per minute", points: per.map((m) => [m.minute, m.rejections]) },
      ],
    }),
  );
}

export async function overview({ root, query, signal, link }) {
  const minutes = Number(query.get("minutes") || 60);
  const seconds = Number(query.get("poll") || DEFAULT_POLL_SECONDS);
  const body = h("div", {});
  async function draw() {
    const [status, activity] = await Promise.all([
      get("/holonograph/status", {}, signal),
      get("/holonograph/activity", { minutes }, signal),
    ]);
    put(body.replaceChildren() || body, 
      h("p", { class: "note" }, "As of ", metric("status/asOf", when(status.asOf)), seconds > 0 ? ` · live, every ${seconds} s` : ""),
      activitySection(activity),
      status.tenants.length ? status.tenants.map((t) => tenantSection(t, link)) : empty("No tenant has sent anything yet: point an OTLP exporter at this collector."),
      h("h2", {}, "Schedules"),
      scheduleSection(status.schedules),
    );
    body.dataset.polls = String(Number(body.dataset.polls || 0) + 1);
  }
  await draw();
  put(root, h("h1", {}, "Overview"), body);
  if (seconds > 0) {
    const tick = async () => {
      if (signal.aborted) return;
      try { await draw(); } catch (err) { if (signal.aborted) return; body.prepend(h("div", { class: "alert", role: "alert" }, `live update failed: ${err.message}`)); }
      if (!signal.aborted) setTimeout(tick, seconds * 1000);
    };
    setTimeout(tick, seconds * 1000);
  }
}
