// The shell: routes (`#/page/arg?since=..&until=..`, so every view is a link), the
// time range (relative like the CLI's `24h`, `7d`, or absolute RFC 3339), the token
// form, keyboard keys, and the pages, each a client of the HTTP API.

import { ApiError, setToken, takeTokenFromFragment, token } from "./api.js";
import { h } from "./dom.js";
import { overview } from "./overview.js";
import { surface } from "./surface.js";
import { compare } from "./compare.js";
import { streams } from "./streams.js";
import { conformance } from "./conformance.js";

const PAGES = { overview, surface, compare, streams, conformance };
const DEFAULT_SINCE = "24h";
const main = document.getElementById("main");
let current = null; // the AbortController of the page shown

export function route() {
  const hash = location.hash.slice(1) || "/overview";
  const q = hash.indexOf("?");
  const path = (q >= 0 ? hash.slice(0, q) : hash).split("/").filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(q >= 0 ? hash.slice(q + 1) : "");
  return { page: path[0] || "overview", args: path.slice(1), query };
}

// A link to `page` (with `args`), keeping the time range and setting `extra`.
export function link(page, args = [], extra = {}) {
  const { query } = route();
  const keep = new URLSearchParams();
  for (const name of ["since", "until"]) if (query.get(name)) keep.set(name, query.get(name));
  for (const [k, v] of Object.entries(extra)) if (v === null || v === undefined || v === "") keep.delete(k); else keep.set(k, v);
  const tail = keep.toString();
  return "#/" + [page, ...args].map(encodeURIComponent).join("/") + (tail ? "?" + tail : "");
}

export function range() {
  const { query } = route();
  return { since: query.get("since") || DEFAULT_SINCE, until: query.get("until") || "now" };
}

function showRange() {
  const { since, until } = range();
  document.getElementById("range-since").value = since;
  document.getElementById("range-until").value = until;
  const preset = document.getElementById("range-preset");
  preset.value = until === "now" && ["1h", "24h", "7d", "30d"].includes(since) ? since : "custom";
}

function setQuery(changes) {
  const { page, args } = route();
  location.hash = link(page, args, changes);
}

function wireRange() {
  const form = document.getElementById("range");
  document.getElementById("range-preset").addEventListener("change", (e) => {
    if (e.target.value !== "custom") setQuery({ since: e.target.value, until: "now" });
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setQuery({ since: document.getElementById("range-since").value.trim(), until: document.getElementById("range-until").value.trim() });
  });
}

function askToken(reason) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  if (reason) form.dataset.reason = reason;
  document.getElementById("token-input").focus();
}

function wireToken() {
  const form = document.getElementById("token-form");
  document.getElementById("token-button").addEventListener("click", () => (form.hidden ? askToken() : (form.hidden = true)));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("token-input");
    setToken(input.value.trim());
    input.value = "";
    form.hidden = true;
    render();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    setToken("");
    form.hidden = true;
    render();
  });
}

const TYPING = new Set(["INPUT", "SELECT", "TEXTAREA"]);

function wireKeys() {
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || TYPING.has(e.target.tagName)) return;
    const nav = document.querySelector(`nav a[data-key="${e.key}"]`);
    if (nav) {
      e.preventDefault();
      location.hash = link(nav.dataset.page, nav.dataset.page === route().page ? route().args : []);
    } else if (e.key === "n" || e.key === "p") {
      const button = main.querySelector(`button[data-key="${e.key}"]:not([disabled])`);
      if (button) { e.preventDefault(); button.click(); }
    } else if (e.key === "r") {
      e.preventDefault();
      render();
    } else if (e.key === "/") {
      e.preventDefault();
      document.getElementById("range-since").focus();
    }
  });
}

function status(text) {
  document.getElementById("status-line").textContent = text;
}

function failure(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) askToken("unauthenticated");
    const hint = err.status === 401 ? " Give a token (the Token button)." : err.status === 403 ? " Use a token with the read scope." : "";
    return h("div", { class: "alert", role: "alert", dataset: { error: err.code, status: String(err.status) } }, `${err.message} (${err.status} ${err.code}).${hint}`);
  }
  return h("div", { class: "alert", role: "alert", dataset: { error: "page" } }, String(err && err.message ? err.message : err));
}

async function render() {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  const { page, args, query } = route();
  const view = PAGES[page];
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  showRange();
  document.body.dataset.state = "loading";
  document.body.dataset.page = page;
  const focused = main.contains(document.activeElement);
  const content = h("div", {});
  try {
    if (!view) throw new Error(`no such page: ${page}`);
    await view({ root: content, args, query, range: range(), signal: controller.signal, link, status, rerender: render });
    if (controller.signal.aborted) return;
    document.body.dataset.state = "ready";
  } catch (err) {
    if (controller.signal.aborted || (err && err.name === "AbortError")) return;
    content.replaceChildren(failure(err));
    document.body.dataset.state = "error";
  }
  main.replaceChildren(content);
  const title = main.querySelector("h1");
  document.title = (title ? title.textContent + " · " : "") + "Holonograph";
  if (focused || document.activeElement === document.body) main.focus({ preventScroll: true });
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  status(`${token() ? "token set" : "no token"} · updated ${new Date().toISOString().slice(0, 19)}Z`);
}

export function signalled(signal) {
  return signal.aborted;
}

takeTokenFromFragment();
wireRange();
wireToken();
wireKeys();
window.addEventListener("hashchange", render);
render();
