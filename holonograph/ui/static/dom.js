// Small DOM helpers: elements from data (text only, never markup from the API), number
// formats, and tables paged by a function that fetches one page (server-side paging).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

// Append `children` (nested arrays flattened; null, undefined and false left out).
export function put(el, ...children) {
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// A value the tests read back (`data-metric`) and compare with the API's JSON.
export const metric = (name, value, tag = "span", attrs = {}) => h(tag, { ...attrs, dataset: { ...(attrs.dataset || {}), metric: name } }, value);

export const fixed = (x, digits) => (x === null || x === undefined ? "-" : Number(x).toFixed(digits));
export const count = (n) => (n === null || n === undefined ? "-" : String(n));
export const when = (t) => (t ? String(t) : "-");
export const interval = (v, digits = 3) =>
  v ? `${fixed(v.estimate, digits)} [${fixed(v.ciLow, digits)}, ${fixed(v.ciHigh, digits)}]` : "-";

export function card(label, value) {
  return h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

export function table(columns, rows, attrs = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label ?? c)));
  const body = rows.map((row) => h("tr", {}, row.map((cell, i) => cellOf(cell, columns[i]))));
  return h("table", attrs, h("thead", {}, head), h("tbody", {}, body));
}

function cellOf(cell, column) {
  const kind = column && column.kind;
  if (cell instanceof Node && cell.tagName === "TD") return cell;
  return h("td", { class: kind || (typeof cell === "number" ? "num" : undefined) }, cell);
}

export const empty = (text) => h("p", { class: "empty" }, text);

// A table whose rows come a page at a time from `fetchPage(offset, limit)`, which
// answers `{rows, total}`: only the page shown is ever requested.
export function pagedTable({ name, columns, fetchPage, pageSize = 50, offset = 0, onPage }) {
  const box = h("div", { class: "paged", dataset: { table: name } });
  let at = offset;
  async function show() {
    const { rows, total } = await fetchPage(at, pageSize);
    const last = Math.min(at + rows.length, total);
    const prev = h("button", { type: "button", dataset: { key: "p" }, disabled: at === 0, onclick: () => go(Math.max(0, at - pageSize)) }, "Previous");
    const next = h("button", { type: "button", dataset: { key: "n" }, disabled: last >= total, onclick: () => go(at + pageSize) }, "Next");
    const info = h("span", { dataset: { pageInfo: name } }, total ? `rows ${at + 1}–${last} of ${total}` : "no rows");
    box.replaceChildren(h("div", { class: "pager" }, prev, info, next), rows.length ? table(columns, rows) : empty("nothing in this selection"));
    box.dataset.offset = String(at);
    box.dataset.rows = String(rows.length);
    box.dataset.total = String(total);
  }
  async function go(to) {
    const key = to >= at ? "n" : "p";
    at = to;
    await show();
    if (onPage) onPage(at);
    const focus = box.querySelector(`button[data-key="${key}"]:not([disabled])`) || box.querySelector("button:not([disabled])");
    if (focus && (box.contains(document.activeElement) || document.activeElement === document.body)) focus.focus();
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  }
  return { element: box, ready: show() };
}

// A table paged by the server's cursor: `fetchPage(cursor)` answers `{rows, next}`
// (`next` null: no further page); Previous goes back through the cursors seen.
export function cursorTable({ name, columns, fetchPage }) {
  const box = h("div", { class: "paged", dataset: { table: name } });
  const cursors = [null];
  async function show() {
    const { rows, next } = await fetchPage(cursors[cursors.length - 1]);
    const page = cursors.length;
    const prev = h("button", { type: "button", dataset: { key: "p" }, disabled: page === 1, onclick: () => go(() => cursors.pop()) }, "Previous");
    const more = h("button", { type: "button", dataset: { key: "n" }, disabled: !next, onclick: () => go(() => cursors.push(next)) }, "Next");
    box.replaceChildren(h("div", { class: "pager" }, prev, h("span", { dataset: { pageInfo: name } }, `page ${page}, ${rows.length} rows`), more),
      rows.length ? table(columns, rows) : empty("nothing in this selection"));
    box.dataset.page = String(page);
    box.dataset.rows = String(rows.length);
  }
  async function go(step) {
    step();
    await show();
    const focus = box.querySelector("button:not([disabled])");
    if (focus && (box.contains(document.activeElement) || document.activeElement === document.body)) focus.focus();
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  }
  return { element: box, ready: show() };
}
