// One job: what was asked (spec), what happened (attempts, tasks, timeline, events)
// and what each task printed (LogView). Pushed changes of this job reload it.
import { h, replace, s, badge, formatTime, formatDuration, formatBytes, runDuration, nodeHref, TERMINAL_STATES,
  throttle, confirmDialog } from "../dom.js";
import { getJson, postJson } from "../api.js";
import { LogView } from "../logview.js";
import { lineChart } from "../charts.js";

// The timeline draws one row per task up to this many; bigger gangs are summarised.
const MAX_TIMELINE_TASKS = 64;

function field(label, value) {
  return [h("dt", {}, label), h("dd", {}, value === null || value === undefined || value === "" ? h("span", { class: "muted" }, "—") : value)];
}

function exitText(task) {
  if (task.signal !== null && task.signal !== undefined) return "signal " + task.signal;
  if (task.exit_code !== null && task.exit_code !== undefined) return String(task.exit_code);
  return "";
}

function specSection(job) {
  const spec = job.spec || {};
  const opts = spec.task_options || {};
  const env = spec.runtime_env || {};
  const labels = spec.labels && Object.keys(spec.labels).length ? JSON.stringify(spec.labels) : null;
  return h("section", { class: "panel" },
    h("h2", {}, "Spec"),
    h("dl", { class: "fields" },
      field("Entrypoint", h("pre", { class: "inline-code", id: "job-entrypoint" }, spec.entrypoint)),
      field("Tasks", String(spec.num_workers)),
      field("Per task", `${opts.num_cpus} CPU · ${opts.num_gpus} GPU · ${opts.memory ? formatBytes(opts.memory) : "no memory reservation"}`),
      field("Placement", spec.placement),
      field("Max retries", String(spec.max_retries)),
      field("Timeout", spec.timeout ? spec.timeout + " s" : null),
      field("Labels", labels),
      field("runtime_env", Object.keys(env).length ? h("pre", { class: "inline-code" }, JSON.stringify(env, null, 2)) : null)));
}

function attemptsSection(job) {
  const attempts = [...(job.attempts || [])].reverse();
  if (attempts.length === 0) {
    return h("section", { class: "panel" }, h("h2", {}, "Attempts"),
      h("p", { class: "muted" }, "Not placed yet. " + (job.message || "")));
  }
  return h("section", { class: "panel" }, h("h2", {}, "Attempts"), attempts.map((a) => h("div", { class: "attempt" },
    h("h3", {}, `Attempt ${a.attempt}`, h("span", { class: "muted small" },
      ` · master ${a.master_addr}:${a.master_port} · started ${formatTime(a.started_ms)}` +
      (a.finished_ms ? ` · ended ${formatTime(a.finished_ms)}` : ""))),
    a.failure_reason ? h("p", { class: "reason" }, a.failure_reason) : null,
    h("div", { class: "table-wrap" }, h("table", { class: "tasks" },
      h("thead", {}, h("tr", {}, ["Rank", "Node", "GPUs", "PID", "State", "Exit", "Reason", "Started", "Duration"].map((t) => h("th", {}, t)))),
      h("tbody", {}, a.tasks.map((t) => h("tr", { dataset: { attempt: a.attempt, task: t.task_index } },
        h("td", { class: "num" }, t.task_index),
        h("td", {}, t.node_id ? h("a", { href: nodeHref(t.node_id), class: "mono" }, t.node_address || t.node_id) : "—"),
        h("td", {}, t.gpu_ids && t.gpu_ids.length ? t.gpu_ids.join(", ") : h("span", { class: "muted" }, "none")),
        h("td", { class: "num" }, t.pid || "—"),
        h("td", {}, badge(t.state)),
        h("td", { class: "num" }, exitText(t)),
        h("td", { class: "clip", title: t.reason || "" }, t.reason || ""),
        h("td", {}, formatTime(t.started_ms)),
        h("td", {}, formatDuration(runDuration(t.started_ms, t.finished_ms)))))))))));
}

// Attempts and their tasks on one time axis: submission at the left, now (or the end)
// at the right. Each bar runs from start to end (or now), coloured by state.
function timeline(job) {
  const now = Date.now();
  const t0 = job.submitted_ms;
  const t1 = Math.max(t0 + 1, job.finished_ms || now);
  const rows = [];
  for (const a of job.attempts || []) {
    rows.push({ kind: "attempt", label: `attempt ${a.attempt}`, start: a.started_ms, end: a.finished_ms || (TERMINAL_STATES.has(job.state) ? t1 : now),
      state: a.finished_ms ? (a.failure_reason ? "FAILED" : "SUCCEEDED") : "RUNNING", title: a.failure_reason || "" });
    a.tasks.slice(0, MAX_TIMELINE_TASKS).forEach((t) => rows.push({ kind: "task", label: `rank ${t.task_index}`,
      start: t.started_ms, end: t.finished_ms || (t.started_ms ? now : 0), state: t.state,
      title: `attempt ${a.attempt} rank ${t.task_index} on ${t.node_address || "?"}: ${t.state}${t.reason ? " — " + t.reason : ""}` }));
    if (a.tasks.length > MAX_TIMELINE_TASKS) rows.push({ kind: "note", label: `+${a.tasks.length - MAX_TIMELINE_TASKS} more tasks` });
  }
  const labelW = 90;
  const width = 900;
  const rowH = 18;
  const height = rows.length * rowH + 24;
  const x = (t) => labelW + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (width - labelW - 8);
  const svg = s("svg", { class: "timeline", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": "timeline of attempts and tasks" });
  rows.forEach((r, i) => {
    const y = i * rowH + 4;
    svg.append(s("text", { class: "tl-label" + (r.kind === "attempt" ? " strong" : ""), x: 4, y: y + 12 }, r.label));
    if (r.kind === "note" || !r.start) return;
    const bar = s("rect", { class: "tl-bar state-" + String(r.state).toLowerCase() + (r.kind === "attempt" ? " tl-attempt" : ""),
      x: x(r.start), y: y + 2, width: Math.max(2, x(r.end) - x(r.start)), height: rowH - 6, rx: 2 });
    bar.append(s("title", {}, r.title || r.label));
    svg.append(bar);
  });
  const axisY = rows.length * rowH + 18;
  svg.append(s("text", { class: "tl-axis", x: labelW, y: axisY }, "submitted " + formatTime(t0)));
  svg.append(s("text", { class: "tl-axis", x: width - 8, y: axisY, "text-anchor": "end" },
    (job.finished_ms ? "finished " + formatTime(t1) : "now") + " · " + formatDuration(t1 - t0)));
  return h("section", { class: "panel" }, h("h2", {}, "Timeline"),
    rows.length ? svg : h("p", { class: "muted" }, "Nothing has run yet."));
}

function eventsSection(events) {
  return h("section", { class: "panel" }, h("h2", {}, "Events"),
    h("div", { class: "table-wrap" }, h("table", { class: "events", id: "events-table" },
      h("tbody", {}, events.map((e) => h("tr", {}, h("td", { class: "nowrap" }, formatTime(e.time_ms)), h("td", {}, e.message)))))));
}

export function mount(view, ctx) {
  const jobId = ctx.id;
  let alive = true;
  let job = null;
  let logChoice = null; // {attempt, task, latest}: what the log viewer shows
  const logs = new LogView(jobId);

  const header = h("div", { class: "job-header" });
  const summary = h("div");
  const details = h("div");
  const logPicker = h("div", { class: "log-picker" });
  const error = h("p", { class: "error", hidden: true });
  const stacks = h("section", { class: "panel", id: "job-stacks", hidden: true });
  view.append(h("div", { class: "page" },
    h("p", { class: "crumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / ", h("span", { class: "mono" }, jobId)),
    header, error, summary, stacks,
    h("section", { class: "panel" }, h("h2", {}, "Logs"), logPicker, logs.element),
    details));

  async function stopJob(button) {
    const ok = await confirmDialog("Stop job " + jobId + "?",
      "Every task of this job gets SIGTERM, then SIGKILL after the grace period. This cannot be undone.", "Stop job");
    if (!ok) return;
    button.disabled = true;
    try {
      await postJson("/api/jobs/" + encodeURIComponent(jobId) + "/stop");
      reload();
    } catch (e) {
      error.textContent = "Could not stop the job: " + e.message;
      error.hidden = false;
      button.disabled = false;
    }
  }

  // Every rank's Python stacks (what `ag stack` prints), under the summary.
  async function showStacks(button) {
    button.disabled = true;
    replace(stacks, h("h2", {}, "Stacks"), h("p", { class: "muted" }, "Taking every rank's stacks…"));
    stacks.hidden = false;
    try {
      const taken = await postJson("/api/jobs/" + encodeURIComponent(jobId) + "/stacks");
      replace(stacks, h("h2", {}, "Stacks"), ...taken.tasks.map((t) => h("div", { class: "rank-stacks" },
        h("h3", {}, `rank ${t.task_index} · node ${t.node_id}` + (t.error ? " · not taken" : t.python ? "" : " · no Python")),
        h("pre", { class: "log" }, t.error || t.stacks))));
      reload(); // the events have them too
    } catch (e) {
      replace(stacks, h("h2", {}, "Stacks"), h("p", { class: "error" }, "Could not take the stacks: " + e.message));
    } finally {
      button.disabled = false;
    }
  }

  function renderHeader() {
    // Offered only to those the head lets stop it (its owner, their group, admins).
    const mayAct = !TERMINAL_STATES.has(job.state) && job.caller_may_act !== false;
    const stop = !mayAct ? null :
      h("button", { type: "button", class: "danger", id: "stop-job", onclick: (e) => stopJob(e.currentTarget) }, "Stop job");
    const stacksButton = !mayAct || job.state !== "RUNNING" ? null :
      h("button", { type: "button", id: "job-stacks-button", onclick: (e) => showStacks(e.currentTarget) }, "Stacks");
    replace(header,
      h("h1", {}, job.name || jobId, " ", badge(job.state)),
      h("span", { class: "spacer" }),
      stacksButton,
      stop);
  }

  function renderSummary() {
    const queued = job.state === "PENDING" && job.queue_position
      ? h("span", { class: "queue-position", id: "job-queue-position" }, "#" + job.queue_position + " in queue · ") : null;
    const message = job.message || queued ? h("p", { class: "reason", id: "job-message" }, queued, job.message) : null;
    // A failed job: the failing rank's last lines, under its reason.
    const failure = job.failure && job.failure.last_lines ? h("div", { class: "failure", id: "job-failure" },
      h("p", { class: "muted" }, `Last lines of rank ${job.failure.task_index} (attempt ${job.failure.attempt}, ` +
        `node ${job.failure.node_id}):`),
      h("pre", { class: "log tail" }, job.failure.last_lines)) : null;
    replace(summary, message, failure, h("dl", { class: "fields wide" },
      field("Job ID", h("span", { class: "mono" }, job.job_id)),
      field("Owner", h("span", { id: "job-owner" }, job.owner)),
      job.queue ? field("Queue", h("span", { id: "job-queue" }, job.queue + " (priority " + job.priority + ")")) : null,
      field("Submitted", formatTime(job.submitted_ms)),
      field("Started", formatTime(job.started_ms)),
      field("Finished", formatTime(job.finished_ms)),
      field("Duration", formatDuration(runDuration(job.started_ms, job.finished_ms))),
      field("Attempts", String((job.attempts || []).length))));
  }

  function renderLogPicker() {
    const attempts = job.attempts || [];
    const latest = attempts.length ? attempts[attempts.length - 1].attempt : 0;
    // A failed job opens on the rank that failed it.
    if (!logChoice) logChoice = { attempt: latest, task: job.failure ? job.failure.task_index : 0, latest: true };
    if (logChoice.latest && logChoice.attempt !== latest) logChoice = { ...logChoice, attempt: latest };
    const tasks = job.spec ? job.spec.num_workers : 1;
    const attemptSelect = h("select", { id: "log-attempt", "aria-label": "attempt",
      onchange: (e) => {
        const value = Number(e.target.value);
        logChoice = { attempt: value, task: logChoice.task, latest: value === latest };
        logs.open(logChoice.attempt, logChoice.task);
      } }, (attempts.length ? attempts : [{ attempt: 0 }]).map((a) =>
      h("option", { value: a.attempt, selected: a.attempt === logChoice.attempt }, "attempt " + a.attempt)));
    const rankButtons = [];
    for (let i = 0; i < Math.min(tasks, 256); i++) {
      rankButtons.push(h("button", { type: "button", class: "rank" + (i === logChoice.task ? " active" : ""),
        dataset: { rank: i }, onclick: () => {
          logChoice = { ...logChoice, task: i };
          renderLogPicker();
          logs.open(logChoice.attempt, logChoice.task);
        } }, "rank " + i));
    }
    replace(logPicker, attemptSelect, h("span", { class: "ranks" }, rankButtons));
  }

  async function reload() {
    try {
      const [record, events] = await Promise.all([
        getJson("/api/jobs/" + encodeURIComponent(jobId)),
        getJson("/api/jobs/" + encodeURIComponent(jobId) + "/events"),
      ]);
      if (!alive) return;
      error.hidden = true;
      const first = job === null;
      const before = logChoice ? logChoice.attempt : null;
      job = record;
      renderHeader();
      renderSummary();
      renderLogPicker();
      replace(details, timeline(job), attemptsSection(job), eventsSection(events.events), specSection(job));
      // Open the log at first, and again when a new attempt replaces the one shown.
      if (first || before !== logChoice.attempt) logs.open(logChoice.attempt, logChoice.task);
    } catch (e) {
      if (!alive) return;
      error.textContent = e.status === 404 ? "No job " + jobId + " on this head." : "Could not load the job: " + e.message;
      error.hidden = false;
    }
  }
  const reloadSoon = throttle(reload, 300);

  // CPU and memory of all the job's tasks together, from the workers' heartbeats, for
  // the last 15 minutes; asked again every 5 s while the job runs.
  const usagePanel = h("section", { class: "panel", id: "job-usage", hidden: true },
    h("h2", {}, "Usage · last 15 minutes, all tasks"), h("div", { class: "charts" }));
  summary.after(usagePanel);
  const pct = (v) => Math.round(v) + "%";
  async function loadUsage() {
    try {
      const usage = await getJson("/api/jobs/" + encodeURIComponent(jobId) + "/usage");
      if (!alive || usage.samples.length === 0) return;
      const latest = usage.samples[usage.samples.length - 1];
      const box = (title, chart) => h("figure", { class: "chart-box" }, h("figcaption", {}, title), chart);
      replace(usagePanel.lastChild,
        box("CPU " + pct(latest.cpu_percent) + " (100% = one core)", lineChart({
          series: [{ label: "CPU %", points: usage.samples.map((u) => [u.time_ms, u.cpu_percent]) }],
          format: pct, width: 420, height: 120, title: "job CPU %" })),
        box("Memory " + formatBytes(latest.memory_bytes), lineChart({
          series: [{ label: "memory", points: usage.samples.map((u) => [u.time_ms, u.memory_bytes]) }],
          format: formatBytes, width: 420, height: 120, title: "job memory" })),
        latest.gpus > 0 ? box("GPU " + pct(latest.gpu_percent) + " (mean of " + latest.gpus + ")", lineChart({
          series: [{ label: "GPU %", points: usage.samples.map((u) => [u.time_ms, u.gpu_percent]) }],
          max: 100, format: pct, width: 420, height: 120, title: "job GPU utilisation %" })) : null,
        latest.gpus > 0 ? box("GPU memory " + formatBytes(latest.gpu_memory_bytes), lineChart({
          series: [{ label: "GPU memory", points: usage.samples.map((u) => [u.time_ms, u.gpu_memory_bytes]) }],
          format: formatBytes, width: 420, height: 120, title: "job GPU memory" })) : null);
      usagePanel.hidden = false;
    } catch (_) {
      // The charts are extra: the page works without them.
    }
  }
  const usageTimer = setInterval(() => {
    if (job && !TERMINAL_STATES.has(job.state)) loadUsage();
  }, 5000);
  loadUsage();

  // Running tasks' bars and durations grow between pushes (display only).
  const ticker = setInterval(() => {
    if (job && !TERMINAL_STATES.has(job.state)) {
      renderSummary();
      const fresh = timeline(job);
      const old = details.firstChild;
      if (old) old.replaceWith(fresh);
    }
  }, 1000);

  reload();
  return {
    onJobs(update) {
      if (update.jobs.some((j) => j.job_id === jobId)) reloadSoon();
    },
    unmount() {
      alive = false;
      clearInterval(ticker);
      clearInterval(usageTimer);
      logs.close();
    },
  };
}
