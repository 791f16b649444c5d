// The HTTP API's client: the bearer token (this tab's session storage, or the URL
// fragment's `token=` once, which is then taken out of the address bar), the run-mode
// header every /lens and /holonograph request carries, and the Guide's error envelope.

const TOKEN_KEY = "holonograph.token";
const RUN_MODE = "production";

export class ApiError extends Error {
  constructor(status, envelope) {
    super(envelope.error || `HTTP ${status}`);
    this.status = status;
    this.code = envelope.code || "http_" + status;
    this.details = envelope.details || {};
  }
}

// Every call this page made (path, method, body, status, and rows answered), for the
// page's own tests and for anyone curious in the console: the API is the only source.
export const calls = [];

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// `#/streams?since=7d&token=abc` or `#token=abc`: keep the token, drop it from the URL.
export function takeTokenFromFragment() {
  const hash = location.hash.slice(1);
  const q = hash.indexOf("?");
  let route = q >= 0 ? hash.slice(0, q) : hash;
  let query = q >= 0 ? hash.slice(q + 1) : "";
  if (!route.startsWith("/")) {
    query = route + (query ? "&" + query : "");
    route = "/overview";
  }
  const params = new URLSearchParams(query);
  if (!params.has("token")) return;
  setToken(params.get("token"));
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + "#" + route + (rest ? "?" + rest : ""));
}

function headers(json) {
  const out = { "x-holonograph-run-mode": RUN_MODE, Accept: "application/json" };
  const bearer = token();
  if (bearer) out.Authorization = "Bearer " + bearer;
  if (json) out["Content-Type"] = "application/json";
  return out;
}

// GET `path` with `query` (an object; empty values left out), or POST `body` as JSON.
export async function request(path, { query, body, signal } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
    const text = params.toString();
    if (text) url += "?" + text;
  }
  const method = body === undefined ? "GET" : "POST";
  const init = { method, headers: headers(body !== undefined), signal, credentials: "omit", cache: "no-store" };
  if (body !== undefined) init.body = JSON.stringify(body);
  const entry = { path, url, method, body: body === undefined ? null : body, status: 0 };
  calls.push(entry);
  const response = await fetch(url, init);
  entry.status = response.status;
  const text = await response.text();
  let data;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: text.slice(0, 200) || `HTTP ${response.status}`, code: "not_json" };
  }
  if (!response.ok) throw new ApiError(response.status, data || {});
  entry.finding = response.headers.get("x-holonograph-finding") === "true";
  return data;
}

export const get = (path, query, signal) => request(path, { query, signal });
export const post = (path, body, signal) => request(path, { body, signal });
