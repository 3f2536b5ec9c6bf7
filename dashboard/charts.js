// Small time-series charts drawn as SVG: the last 15 minutes of a node's usage.
import { s } from "./dom.js";

export const WINDOW_MS = 15 * 60 * 1000;

const COLORS = ["#2f7dd1", "#d1782f", "#3a9a5b", "#a04cc2", "#c23a4c", "#7a8b1f", "#1f8b88", "#8b5a1f"];

export function color(i) { return COLORS[i % COLORS.length]; }

// lineChart({series: [{label, points: [[time_ms, value], ...]}], max, format, width,
//            height, now, compact}) -> <svg>
// `max` fixes the y scale (100 for percentages, total bytes for memory); without it the
// scale follows the data. `compact` drops the axis labels (table cells).
export function lineChart({ series, max, format = String, width = 320, height = 80, now = Date.now(), compact = false, title = "" }) {
  const pad = compact ? { l: 1, r: 1, t: 2, b: 2 } : { l: 4, r: 4, t: 14, b: 14 };
  const w = width - pad.l - pad.r;
  const hgt = height - pad.t - pad.b;
  const start = now - WINDOW_MS;
  let top = max;
  if (!top) {
    top = 0;
    for (const one of series) for (const [, v] of one.points) top = Math.max(top, v);
    top = top || 1;
  }
  const x = (t) => pad.l + Math.max(0, Math.min(1, (t - start) / WINDOW_MS)) * w;
  const y = (v) => pad.t + hgt - Math.max(0, Math.min(1, v / top)) * hgt;

  const svg = s("svg", {
    class: "chart" + (compact ? " compact" : ""), viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", "aria-label": title,
  });
  if (title) svg.append(s("title", {}, title));
  svg.append(s("rect", { class: "chart-bg", x: pad.l, y: pad.t, width: w, height: hgt }));
  for (const frac of [0.5]) {
    svg.append(s("line", { class: "chart-grid", x1: pad.l, x2: pad.l + w, y1: pad.t + hgt * frac, y2: pad.t + hgt * frac }));
  }
  series.forEach((one, i) => {
    const pts = one.points.filter(([t]) => t >= start);
    if (pts.length === 0) return;
    const line = pts.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
    const area = `${x(pts[0][0]).toFixed(1)},${pad.t + hgt} ${line} ${x(pts[pts.length - 1][0]).toFixed(1)},${pad.t + hgt}`;
    const c = one.color || color(i);
    svg.append(s("polygon", { class: "chart-area", points: area, fill: c }));
    svg.append(s("polyline", { class: "chart-line", points: line, stroke: c }));
  });
  if (!compact) {
    svg.append(s("text", { class: "chart-label", x: pad.l, y: 10 }, "max " + format(top)));
    const last = series.map((one) => one.points[one.points.length - 1]).filter(Boolean);
    if (last.length === 1) {
      svg.append(s("text", { class: "chart-label", x: width - pad.r, y: 10, "text-anchor": "end" }, "now " + format(last[0][1])));
    }
    svg.append(s("text", { class: "chart-label", x: pad.l, y: height - 2 }, "−15 min"));
    svg.append(s("text", { class: "chart-label", x: width - pad.r, y: height - 2, "text-anchor": "end" }, "now"));
  }
  return svg;
}

// Usage history of one node, kept in step with pushed samples: the REST history at
// load, then each pushed latest sample appended once.
export class UsageSeries {
  constructor(samples = []) {
    this.samples = [];
    for (const sample of samples) this.add(sample);
  }

  add(sample) {
    if (!sample) return false;
    const last = this.samples[this.samples.length - 1];
    if (last && sample.time_ms <= last.time_ms) return false;
    this.samples.push(sample);
    const oldest = sample.time_ms - WINDOW_MS;
    while (this.samples.length && this.samples[0].time_ms < oldest) this.samples.shift();
    return true;
  }

  cpu() { return [{ label: "CPU %", points: this.samples.map((u) => [u.time_ms, u.cpu_percent]) }]; }

  memory() { return [{ label: "memory used", points: this.samples.map((u) => [u.time_ms, u.memory_used_bytes]) }]; }

  // One series per GPU index, for `field` ("utilization_percent" or "memory_used_bytes").
  gpus(field) {
    const byIndex = new Map();
    for (const u of this.samples) {
      for (const g of u.gpus || []) {
        if (!byIndex.has(g.index)) byIndex.set(g.index, { label: "GPU " + g.index, points: [] });
        byIndex.get(g.index).points.push([u.time_ms, g[field]]);
      }
    }
    return [...byIndex.values()];
  }

  // Mean utilisation across GPUs, for a one-line chart in a table.
  gpuMean() {
    const points = [];
    for (const u of this.samples) {
      if (!u.gpus || u.gpus.length === 0) continue;
      points.push([u.time_ms, u.gpus.reduce((a, g) => a + g.utilization_percent, 0) / u.gpus.length]);
    }
    return [{ label: "GPU %", points }];
  }

  gpuMemoryTotal() {
    const last = this.samples[this.samples.length - 1];
    return last && last.gpus ? Math.max(0, ...last.gpus.map((g) => g.memory_total_bytes)) : 0;
  }

  latest() { return this.samples[this.samples.length - 1] || null; }
}
