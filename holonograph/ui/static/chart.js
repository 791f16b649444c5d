// Inline SVG charts: lines over time with shaded windows, change-point markers and
// annotated change events; and a bar of an interval on a 0..1 (or given) scale.

const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

const ms = (t) => new Date(t).getTime();

// series: [{label, points: [[time, value|null], ...]}]; windows: [{from, to, label}];
// marks: [{at, label}] (change points); notes: [{at, label}] (change events).
export function timeChart({ series, since, until, windows = [], marks = [], notes = [], yMin = 0, yMax = 1, title, width = 900, height = 260 }) {
  const pad = { l: 44, r: 12, t: 14, b: 30 };
  const x0 = ms(since), x1 = Math.max(ms(until), x0 + 1);
  const X = (t) => pad.l + ((ms(t) - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (v) => height - pad.b - ((v - yMin) / (yMax - yMin || 1)) * (height - pad.t - pad.b);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": title });
  svg.append(s("title", {}, title));
  for (let i = 0; i <= 4; i++) {
    const v = yMin + ((yMax - yMin) * i) / 4;
    svg.append(s("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: Y(v), y2: Y(v) }));
    svg.append(s("text", { x: 4, y: Y(v) + 4 }, Number(v.toFixed(2)).toString()));
  }
  svg.append(s("line", { class: "axis", x1: pad.l, x2: width - pad.r, y1: Y(yMin), y2: Y(yMin) }));
  for (let i = 0; i <= 4; i++) {
    const t = x0 + ((x1 - x0) * i) / 4;
    const label = new Date(t).toISOString().slice(5, 16).replace("T", " ");
    svg.append(s("text", { x: Math.min(X(t), width - 80), y: height - 10 }, label));
  }
  for (const w of windows) {
    const a = X(w.from), b = X(w.to);
    const rect = s("rect", { class: "window", x: Math.min(a, b), y: pad.t, width: Math.max(2, Math.abs(b - a)), height: height - pad.t - pad.b });
    rect.append(s("title", {}, w.label));
    svg.append(rect);
  }
  const rule = (kind, at, label) => {
    const line = s("line", { class: kind, x1: X(at), x2: X(at), y1: pad.t, y2: height - pad.b });
    line.append(s("title", {}, label));
    svg.append(line);
  };
  for (const n of notes) rule("change", n.at, n.label);
  series.forEach((one, i) => {
    let d = "";
    let pen = false;
    for (const [t, v] of one.points) {
      if (v === null || v === undefined || Number.isNaN(v)) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${X(t).toFixed(1)},${Y(v).toFixed(1)}`;
      pen = true;
    }
    const path = s("path", { class: `series-${i}`, d: d || "M0,0" });
    path.append(s("title", {}, one.label));
    svg.append(path);
  });
  for (const m of marks) rule("changepoint", m.at, m.label);
  return svg;
}

// A small bar: the interval [lo, hi] with its estimate, on [min, max].
export function intervalBar(v, min = 0, max = 1, width = 140) {
  const svg = s("svg", { width, height: 14, viewBox: `0 0 ${width} 14`, role: "img", "aria-label": v ? `${v.estimate} in [${v.ciLow}, ${v.ciHigh}]` : "no interval" });
  svg.append(s("line", { x1: 0, x2: width, y1: 7, y2: 7, stroke: "#d5d9e2" }));
  if (!v) return svg;
  const X = (x) => Math.max(0, Math.min(width, ((x - min) / (max - min || 1)) * width));
  svg.append(s("rect", { x: X(v.ciLow), y: 3, width: Math.max(1, X(v.ciHigh) - X(v.ciLow)), height: 8, fill: "#9dbbe8" }));
  svg.append(s("rect", { x: X(v.estimate) - 1, y: 1, width: 2, height: 12, fill: "#1f5fbf" }));
  return svg;
}
