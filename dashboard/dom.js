// DOM and formatting helpers. Every string from the head (job names, entrypoints, log
// text, reasons) reaches the page through text nodes or attribute values, never as
// HTML: nothing here parses markup.

// h("a", {href: "#/", class: "x", onclick: fn}, "text", childNode, [more]) -> element
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

// The same for SVG elements (charts, timeline).
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.setAttribute("class", value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// el.replaceChildren(...) that skips null/false children, as h() does.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function badge(state) {
  return h("span", { class: "badge state-" + String(state).toLowerCase() }, state);
}

// {gpu: "a100", zone: "b"} as small "gpu=a100" chips, or a muted "none".
export function labelList(labels) {
  const keys = Object.keys(labels || {}).sort();
  if (keys.length === 0) return h("span", { class: "muted" }, "none");
  return h("span", { class: "labels" }, keys.map((k) => h("span", { class: "label" }, k + "=" + labels[k])));
}

// "#/jobs/ID" with the id encoded, so no id can become another route or a scheme.
export function jobHref(id) { return "#/jobs/" + encodeURIComponent(id); }
export function nodeHref(id) { return "#/nodes/" + encodeURIComponent(id); }

export function formatBytes(n) {
  if (n === null || n === undefined || isNaN(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : 1)) + " " + units[i];
}

export function formatNumber(n) {
  if (n === null || n === undefined) return "–";
  return Number.isInteger(n) ? n.toLocaleString("en-US") : Number(n).toFixed(2).replace(/\.?0+$/, "");
}

function pad(n) { return String(n).padStart(2, "0"); }

// Local wall time; the date only when it is not today.
const zoneFormat = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" });

// The browser's time zone as it names it at `d` ("UTC", "CET", "GMT+2").
function zoneName(d) {
  const part = zoneFormat.formatToParts(d).find((p) => p.type === "timeZoneName");
  return part ? part.value : "";
}

// Local time with its zone: "15:21:39 UTC" today, "2026-11-30 15:21:39 UTC" before.
export function formatTime(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  const now = new Date();
  const time = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " " + zoneName(d);
  if (d.toDateString() === now.toDateString()) return time.trim();
  return (d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + time).trim();
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined || ms < 0 || isNaN(ms)) return "–";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + pad(Math.floor(s % 60)) + "s";
  const hours = Math.floor(m / 60);
  if (hours < 48) return hours + "h " + pad(m % 60) + "m";
  return Math.floor(hours / 24) + "d " + (hours % 24) + "h";
}

// A job's or task's run time: finished - started, or so far while it runs.
export function runDuration(startedMs, finishedMs, now = Date.now()) {
  if (!startedMs) return null;
  return (finishedMs || now) - startedMs;
}

export const JOB_STATES = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"];
export const TERMINAL_STATES = new Set(["SUCCEEDED", "FAILED", "STOPPED"]);

// Calls fn at most once per `ms`, trailing: bursts of pushes cost one reload.
export function throttle(fn, ms) {
  let timer = null;
  let last = 0;
  return function throttled() {
    if (timer) return;
    const wait = Math.max(0, last + ms - Date.now());
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      fn();
    }, wait);
  };
}

// Asks a yes/no question in the page's own <dialog> (never window.confirm).
export function confirmDialog(title, text, okLabel) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}
