// One node: state, capacity and allocation, its usage over the last 15 minutes (CPU,
// memory, each GPU) and its tasks.
import { h, replace, badge, labelList, formatBytes, formatNumber, formatTime, formatDuration, runDuration, jobHref, throttle,
  confirmDialog } from "../dom.js";
import { getJson, postJson, whoami } from "../api.js";
import { lineChart, UsageSeries } from "../charts.js";

function pct(v) { return Math.round(v) + "%"; }

export function mount(view, ctx) {
  const nodeId = ctx.id;
  let alive = true;
  let node = null;
  let usage = new UsageSeries();

  const header = h("div", { class: "job-header" });
  const facts = h("div");
  const charts = h("div", { class: "charts" });
  const tasksBody = h("tbody");
  const error = h("p", { class: "error", hidden: true });
  view.append(h("div", { class: "page" },
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Cluster"), " / ", h("span", { class: "mono" }, nodeId)),
    header, error, facts,
    h("section", { class: "panel" }, h("h2", {}, "Usage · last 15 minutes"), charts),
    h("section", { class: "panel" }, h("h2", {}, "Tasks"),
      h("div", { class: "table-wrap" }, h("table", { class: "tasks", id: "node-tasks" },
        h("thead", {}, h("tr", {}, ["Job", "Name", "Attempt", "Rank", "State", "PID", "GPUs", "Started", "Duration", "Exit"].map((t) => h("th", {}, t)))),
        tasksBody)))));

  function chartBox(title, chart) {
    return h("figure", { class: "chart-box" }, h("figcaption", {}, title), chart);
  }

  let isAdmin = false;
  whoami().then((me) => {
    isAdmin = me.role === "admin";
    if (alive && node) renderInfo();
  }).catch(() => {});

  async function setDraining(button, draining) {
    if (draining) {
      const ok = await confirmDialog("Drain node " + (node.hostname || nodeId) + "?",
        "No new tasks are placed on it; the tasks running there finish. Resume it to take tasks again.", "Drain node");
      if (!ok) return;
    }
    button.disabled = true;
    try {
      await postJson("/api/nodes/" + encodeURIComponent(nodeId) + (draining ? "/drain" : "/resume"));
      await load();
    } catch (e) {
      error.textContent = "Could not " + (draining ? "drain" : "resume") + " the node: " + e.message;
      error.hidden = false;
      button.disabled = false;
    }
  }

  function renderInfo() {
    // Offered to admins only, as the head allows.
    let action = null;
    if (isAdmin && (node.draining || node.unhealthy)) {
      action = h("button", { type: "button", id: "resume-node", onclick: (e) => setDraining(e.currentTarget, false) }, "Resume");
    } else if (isAdmin && node.state === "ALIVE") {
      action = h("button", { type: "button", class: "danger", id: "drain-node", onclick: (e) => setDraining(e.currentTarget, true) }, "Drain");
    }
    // Workers on one machine share a host name: the address tells them apart.
    replace(header, h("h1", {}, node.hostname || nodeId, node.address ? h("span", { class: "muted subtitle" }, " · " + node.address) : null,
      " ", badge(node.state), node.draining ? [" ", badge("DRAINING")] : null,
      node.unhealthy ? [" ", badge("UNHEALTHY")] : null),
      h("span", { class: "spacer" }), action);
    const r = node.resources;
    const a = node.allocated;
    replace(facts, h("dl", { class: "fields wide" },
      h("dt", {}, "Node ID"), h("dd", { class: "mono" }, node.node_id),
      node.unhealthy ? [h("dt", {}, "Unhealthy"), h("dd", { id: "node-unhealthy", class: "mono" }, node.unhealthy.reason)] : null,
      h("dt", {}, "Address"), h("dd", { class: "mono" }, node.address),
      h("dt", {}, "Labels"), h("dd", { id: "node-labels" }, labelList(node.labels)),
      h("dt", {}, "Task limits"), h("dd", { id: "node-limits" }, node.limits || "unknown"),
      h("dt", {}, "Containers"), h("dd", { id: "node-engine" }, node.container_engine || "no engine (jobs with an image run elsewhere)"),
      h("dt", {}, "Mounts allowed"), h("dd", { class: "mono" }, (node.allowed_mounts || []).join(", ") || "none"),
      h("dt", {}, "CPUs allocated"), h("dd", {}, formatNumber(a.num_cpus) + " / " + formatNumber(r.num_cpus)),
      h("dt", {}, "Memory allocated"), h("dd", {}, formatBytes(a.memory_bytes) + " / " + formatBytes(r.memory_bytes)),
      h("dt", {}, "GPUs allocated"), h("dd", {}, r.num_gpus ? a.num_gpus + " / " + r.num_gpus + " (ids " + r.gpu_ids.join(", ") + ")" : "no GPUs"),
      h("dt", {}, "Registered"), h("dd", {}, formatTime(node.registered_ms))));
  }

  function renderCharts() {
    const latest = usage.latest();
    const boxes = [
      chartBox("CPU " + (latest ? pct(latest.cpu_percent) : ""), lineChart({ series: usage.cpu(), max: 100, format: pct, width: 420, height: 120, title: "CPU %" })),
      chartBox("Memory " + (latest ? formatBytes(latest.memory_used_bytes) : ""), lineChart({ series: usage.memory(), max: node ? node.resources.memory_bytes : 0, format: formatBytes, width: 420, height: 120, title: "memory used" })),
    ];
    if (node && node.resources.num_gpus > 0) {
      const gpuMem = usage.gpuMemoryTotal();
      boxes.push(chartBox("GPU utilisation", lineChart({ series: usage.gpus("utilization_percent"), max: 100, format: pct, width: 420, height: 120, title: "GPU utilisation %" })));
      boxes.push(chartBox("GPU memory", lineChart({ series: usage.gpus("memory_used_bytes"), max: gpuMem, format: formatBytes, width: 420, height: 120, title: "GPU memory used" })));
    }
    replace(charts, ...boxes);
  }

  function renderTasks(tasks) {
    const rows = tasks.map((t) => h("tr", { dataset: { jobId: t.job_id } },
      h("td", {}, h("a", { class: "mono", href: jobHref(t.job_id) }, t.job_id)),
      h("td", {}, t.job_name || h("span", { class: "muted" }, "—")),
      h("td", { class: "num" }, t.attempt),
      h("td", { class: "num" }, t.task_index),
      h("td", {}, badge(t.state)),
      h("td", { class: "num" }, t.pid || "—"),
      h("td", {}, t.gpu_ids.length ? t.gpu_ids.join(", ") : h("span", { class: "muted" }, "none")),
      h("td", {}, formatTime(t.started_ms)),
      h("td", {}, formatDuration(runDuration(t.started_ms, t.finished_ms))),
      h("td", { class: "num" }, t.exit_code === null ? "" : t.exit_code)));
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 10, class: "muted" }, "No tasks have run here.")));
    replace(tasksBody, ...rows);
  }

  async function load() {
    try {
      const detail = await getJson("/api/nodes/" + encodeURIComponent(nodeId));
      if (!alive) return;
      error.hidden = true;
      node = detail;
      const merged = new UsageSeries(detail.usage);
      for (const u of usage.samples) merged.add(u);
      usage = merged;
      renderInfo();
      renderCharts();
      renderTasks(detail.tasks || []);
    } catch (e) {
      if (!alive) return;
      error.textContent = e.status === 404 ? "No node " + nodeId + " on this head." : "Could not load the node: " + e.message;
      error.hidden = false;
    }
  }
  const reloadTasks = throttle(load, 1000);

  load();
  return {
    onNodes(list) {
      const pushed = list.find((n) => n.node_id === nodeId);
      if (!pushed || !node) return;
      node = { ...node, state: pushed.state, draining: pushed.draining, unhealthy: pushed.unhealthy, labels: pushed.labels, allocated: pushed.allocated,
        resources: pushed.resources };
      usage.add(pushed.sample);
      renderInfo();
      renderCharts();
    },
    onJobs() { reloadTasks(); },
    unmount() { alive = false; },
  };
}
