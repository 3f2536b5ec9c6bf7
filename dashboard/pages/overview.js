// Cluster overview: capacity and allocation, jobs by state, every node with its live
// usage charts, and the latest jobs.
import { h, replace, clear, badge, formatBytes, formatNumber, formatTime, formatDuration, runDuration,
  jobHref, nodeHref, JOB_STATES, throttle, labelList } from "../dom.js";
import { getJson } from "../api.js";
import { lineChart, UsageSeries } from "../charts.js";

// Usage history is fetched per node; past this many nodes the table shows current
// numbers only, so that opening the page stays one round of requests.
const MAX_CHARTED_NODES = 50;

function pct(v) { return Math.round(v) + "%"; }

function meter(used, total, format) {
  const frac = total > 0 ? Math.min(1, used / total) : 0;
  const bar = h("span", { class: "meter-fill" });
  bar.style.width = (frac * 100).toFixed(1) + "%";
  return h("div", { class: "meter-cell" },
    h("span", { class: "meter-text" }, format(used) + " / " + format(total)),
    h("span", { class: "meter" }, bar));
}

export function mount(view, ctx) {
  const series = new Map(); // node id -> UsageSeries
  let nodes = [];
  let counts = null;
  let alive = true;

  const cards = h("section", { class: "cards" });
  const nodesBody = h("tbody");
  const nodesNote = h("p", { class: "muted" });
  const recentBody = h("tbody");
  const error = h("p", { class: "error", hidden: true });
  view.append(h("div", { class: "page" },
    h("h1", {}, "Cluster"),
    error,
    cards,
    h("h2", {}, "Nodes"),
    h("div", { class: "table-wrap" }, h("table", { class: "nodes", id: "nodes-table" },
      h("thead", {}, h("tr", {},
        ["Node", "State", "Address", "CPUs", "Memory", "GPUs", "CPU · 15 min", "Memory · 15 min", "GPU util · 15 min"]
          .map((t) => h("th", {}, t)))),
      nodesBody)),
    nodesNote,
    h("h2", {}, "Latest jobs ", h("a", { class: "small", href: "#/jobs" }, "all jobs →")),
    h("div", { class: "table-wrap" }, h("table", { class: "jobs" },
      h("thead", {}, h("tr", {}, ["Job", "Name", "State", "Tasks", "Submitted", "Duration"].map((t) => h("th", {}, t)))),
      recentBody))));

  function card(label, value, sub, href) {
    const body = [h("div", { class: "card-label" }, label), h("div", { class: "card-value" }, value),
      sub ? h("div", { class: "card-sub" }, sub) : null];
    return href ? h("a", { class: "card", href }, body) : h("div", { class: "card" }, body);
  }

  function renderCards() {
    const aliveNodes = nodes.filter((n) => n.state === "ALIVE");
    const sum = (f) => aliveNodes.reduce((a, n) => a + f(n), 0);
    const cpus = sum((n) => n.resources.num_cpus);
    const cpusUsed = sum((n) => n.allocated.num_cpus);
    const gpus = sum((n) => n.resources.num_gpus);
    const gpusUsed = sum((n) => n.allocated.num_gpus);
    const mem = sum((n) => n.resources.memory_bytes);
    const memUsed = sum((n) => n.allocated.memory_bytes);
    const list = [
      card("Nodes alive", aliveNodes.length + " / " + nodes.length, null),
      card("CPUs allocated", formatNumber(cpusUsed) + " / " + formatNumber(cpus), cpus ? pct(100 * cpusUsed / cpus) : null),
      card("GPUs allocated", gpusUsed + " / " + gpus, gpus ? pct(100 * gpusUsed / gpus) : "no GPUs"),
      // The total goes under the value: "0 B / 47.1 GiB" does not fit a card.
      card("Memory allocated", formatBytes(memUsed), "of " + formatBytes(mem) + (mem ? " · " + pct(100 * memUsed / mem) : "")),
    ];
    if (counts) {
      for (const state of JOB_STATES) {
        list.push(card(state.charAt(0) + state.slice(1).toLowerCase(), formatNumber(counts[state] || 0), "jobs",
          "#/jobs?state=" + state));
      }
    }
    replace(cards, ...list);
  }

  function renderNodes() {
    const rows = nodes.map((n, i) => {
      const usage = series.get(n.node_id);
      const latest = usage ? usage.latest() : n.sample;
      const charted = usage && i < MAX_CHARTED_NODES;
      const memTotal = n.resources.memory_bytes;
      const hasGpus = n.resources.num_gpus > 0;
      return h("tr", { dataset: { nodeId: n.node_id } },
        h("td", {}, h("a", { href: nodeHref(n.node_id), class: "mono" }, n.node_id), h("div", { class: "muted small" }, n.hostname),
          Object.keys(n.labels || {}).length ? h("div", {}, labelList(n.labels)) : null),
        h("td", {}, badge(n.state), n.draining ? [" ", badge("DRAINING")] : null,
          n.unhealthy ? [" ", h("span", { title: n.unhealthy.reason }, badge("UNHEALTHY"))] : null),
        h("td", { class: "mono" }, n.address),
        h("td", {}, meter(n.allocated.num_cpus, n.resources.num_cpus, formatNumber)),
        h("td", {}, meter(n.allocated.memory_bytes, memTotal, formatBytes)),
        h("td", {}, hasGpus ? meter(n.allocated.num_gpus, n.resources.num_gpus, formatNumber) : h("span", { class: "muted" }, "none")),
        h("td", { class: "chart-cell" }, charted ? lineChart({ series: usage.cpu(), max: 100, compact: true, width: 150, height: 34, title: "CPU %" }) : null,
          h("div", { class: "small" }, latest ? pct(latest.cpu_percent) : "–")),
        h("td", { class: "chart-cell" }, charted ? lineChart({ series: usage.memory(), max: memTotal, compact: true, width: 150, height: 34, title: "memory used" }) : null,
          h("div", { class: "small" }, latest ? formatBytes(latest.memory_used_bytes) : "–")),
        h("td", { class: "chart-cell" }, hasGpus && charted ? lineChart({ series: usage.gpuMean(), max: 100, compact: true, width: 150, height: 34, title: "GPU utilisation %" }) : null,
          h("div", { class: "small" }, hasGpus && latest && latest.gpus && latest.gpus.length
            ? pct(latest.gpus.reduce((a, g) => a + g.utilization_percent, 0) / latest.gpus.length) : (hasGpus ? "–" : ""))));
    });
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No workers have joined yet. Start one with `ag start-worker --head-node HOST:PORT`.")));
    replace(nodesBody, ...rows);
    nodesNote.textContent = nodes.length > MAX_CHARTED_NODES ? `Charts for the first ${MAX_CHARTED_NODES} nodes; open a node for its own.` : "";
  }

  function renderRecent(list) {
    const now = Date.now();
    const rows = list.map((j) => h("tr", { dataset: { jobId: j.job_id } },
      h("td", {}, h("a", { class: "mono", href: jobHref(j.job_id) }, j.job_id)),
      h("td", {}, j.name || h("span", { class: "muted" }, "—")),
      h("td", {}, badge(j.state)),
      h("td", {}, j.num_workers),
      h("td", {}, formatTime(j.submitted_ms)),
      h("td", {}, formatDuration(runDuration(j.started_ms, j.finished_ms, now)))));
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No jobs yet. Submit one with `ag submit -- COMMAND`.")));
    replace(recentBody, ...rows);
  }

  async function loadRecent() {
    const body = await getJson("/api/jobs?limit=8");
    if (alive) renderRecent(body.jobs);
  }
  const reloadRecent = throttle(() => loadRecent().catch(() => {}), 1000);

  async function load() {
    try {
      const [cluster, nodeList] = await Promise.all([getJson("/api/cluster"), getJson("/api/nodes"), loadRecent()]);
      if (!alive) return;
      counts = cluster.jobs;
      nodes = nodeList.nodes;
      renderCards();
      renderNodes();
      const histories = await Promise.all(nodes.slice(0, MAX_CHARTED_NODES).map((n) =>
        getJson("/api/nodes/" + encodeURIComponent(n.node_id)).catch(() => null)));
      if (!alive) return;
      for (const detail of histories) {
        if (!detail) continue;
        const existing = series.get(detail.node_id);
        const fresh = new UsageSeries(detail.usage);
        if (existing) for (const u of existing.samples) fresh.add(u);
        series.set(detail.node_id, fresh);
      }
      renderNodes();
    } catch (e) {
      if (!alive) return;
      error.textContent = "Could not load the cluster: " + e.message;
      error.hidden = false;
    }
  }

  load();
  return {
    onNodes(list) {
      nodes = list;
      for (const n of list) {
        // A node that joined after the page loaded starts its chart from pushed samples.
        if (!series.has(n.node_id) && series.size < MAX_CHARTED_NODES) series.set(n.node_id, new UsageSeries());
        if (series.has(n.node_id)) series.get(n.node_id).add(n.sample);
      }
      renderCards();
      renderNodes();
    },
    onJobs(update) {
      counts = update.counts;
      renderCards();
      reloadRecent();
    },
    unmount() { alive = false; },
  };
}
