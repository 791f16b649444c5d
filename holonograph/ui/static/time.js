// Times the way the API reads them: relative to now (`24h`, `7d`, `now-7d`, `now`) or
// RFC 3339 / a date; and a range cut into equal slices (for readings over time).

const UNITS = { m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3 };

export function absolute(text, now) {
  if (text === "now") return new Date(now);
  const m = /^(?:now-)?(\d+)([mhdw])$/.exec(text);
  if (m) return new Date(now - Number(m[1]) * UNITS[m[2]]);
  return new Date(text);
}

export function slices(range, count) {
  const now = Date.now();
  const a = absolute(range.since, now).getTime(), b = absolute(range.until, now).getTime();
  if (!(b > a)) throw new Error(`the range ${range.since} to ${range.until} is empty or unreadable`);
  const step = (b - a) / count;
  return Array.from({ length: count }, (_, i) => ({
    since: new Date(a + i * step).toISOString(), until: new Date(i === count - 1 ? b : a + (i + 1) * step).toISOString(),
  }));
}
