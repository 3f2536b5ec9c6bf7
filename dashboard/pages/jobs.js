// Jobs: newest first (or sorted by a column), 50 a page, filtered by state and by a
// search over id, name, owner, command and labels. Pushed changes update the rows in
// place; a new job (or one leaving the filter) reloads the page, at most twice a second.
import { h, replace, badge, formatTime, formatDuration, runDuration, jobHref, JOB_STATES, TERMINAL_STATES,
  throttle, formatNumber, labelList } from "../dom.js";
import { getJson } from "../api.js";

export const PAGE_SIZE = 50;

function gpus(job) {
  if (!job.num_gpus) return "0";
  return job.num_workers === 1 ? String(job.num_gpus) : job.num_workers + " × " + job.num_gpus;
}

function durationCell(job) {
  return h("td", { class: "duration" }, formatDuration(runDuration(job.started_ms, job.finished_ms)));
}

function row(job) {
  // A job without a name shows its command.
  const name = job.name ? job.name : h("span", { class: "mono muted clip entrypoint", title: job.entrypoint }, job.entrypoint);
  const labels = Object.keys(job.labels || {}).length ? h("div", {}, labelList(job.labels)) : null;
  const queued = job.state === "PENDING" && job.queue_position
    ? h("div", { class: "muted small queue-position" }, "#" + formatNumber(job.queue_position) + " in queue") : null;
  return h("tr", { dataset: { jobId: job.job_id, state: job.state } },
    h("td", {}, h("a", { class: "mono", href: jobHref(job.job_id) }, job.job_id)),
    h("td", { class: "name" }, name, labels, job.message && job.state !== "SUCCEEDED"
      ? h("div", { class: "muted small clip", title: job.message }, job.message) : null),
    h("td", { class: "owner" }, job.owner || h("span", { class: "muted" }, "—"),
      job.queue ? h("div", { class: "muted small job-queue" }, "queue " + job.queue) : null),
    h("td", {}, badge(job.state), queued),
    h("td", { class: "num" }, job.num_workers),
    h("td", { class: "num" }, gpus(job)),
    h("td", {}, formatTime(job.submitted_ms)),
    h("td", {}, formatTime(job.started_ms)),
    h("td", {}, formatTime(job.finished_ms)),
    durationCell(job));
}

// Column title -> the head's sort key (columns without one are not sortable).
const COLUMNS = [["Job", null], ["Name", "name"], ["Owner", "owner"], ["State", "state"], ["Tasks", null],
  ["GPUs", null], ["Submitted", "submitted"], ["Started", null], ["Finished", null], ["Duration", "duration"]];

export function mount(view, ctx) {
  const stateFilter = (ctx.params.get("state") || "").toUpperCase();
  const search = ctx.params.get("q") || "";
  const sort = ctx.params.get("sort") || "";
  const page = Math.max(1, parseInt(ctx.params.get("page") || "1", 10) || 1);
  let shown = new Map(); // job id -> summary on this page
  let counts = null;
  let total = 0;
  let alive = true;

  const filters = h("div", { class: "filters", role: "group", "aria-label": "Filter by state" });
  const body = h("tbody");
  const pager = h("div", { class: "pager" });
  const error = h("p", { class: "error", hidden: true });
  const searchBox = h("input", { type: "search", id: "job-search", placeholder: "Search id, name, owner, command, label",
    value: search, "aria-label": "Search jobs" });
  // Typing searches after a pause; the search is in the address, so it survives a reload.
  let typing = null;
  searchBox.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { location.hash = href(stateFilter, 1, { q: searchBox.value.trim() }); }, 300);
  });
  const heads = COLUMNS.map(([title, key]) => {
    if (!key) return h("th", {}, title);
    const active = sort === key || sort === "-" + key;
    const next = sort === key ? "-" + key : key;
    const arrow = !active ? "" : sort.startsWith("-") ? " ↓" : " ↑";
    return h("th", { class: "sortable" + (active ? " sorted" : "") },
      h("a", { href: href(stateFilter, 1, { sort: next }), dataset: { sort: key } }, title + arrow));
  });
  view.append(h("div", { class: "page" },
    h("div", { class: "job-header" }, h("h1", {}, "Jobs"), h("span", { class: "spacer" }), searchBox),
    filters,
    error,
    h("div", { class: "table-wrap" }, h("table", { class: "jobs", id: "jobs-table" },
      h("thead", {}, h("tr", {}, heads)),
      body)),
    pager));

  // A new search remounts the page: typing goes on where it was.
  if (ctx.params.has("q")) {
    searchBox.focus();
    searchBox.setSelectionRange(searchBox.value.length, searchBox.value.length);
  }

  // The list's address with `state` and page `p`, keeping the search and sort unless
  // `change` gives new ones.
  function href(state, p, change = {}) {
    const q = new URLSearchParams();
    if (state) q.set("state", state);
    const text = change.q !== undefined ? change.q : search;
    if (text) q.set("q", text);
    const order = change.sort !== undefined ? change.sort : sort;
    if (order) q.set("sort", order);
    if (p > 1) q.set("page", String(p));
    const query = q.toString();
    return "#/jobs" + (query ? "?" + query : "");
  }

  function renderFilters() {
    const all = counts ? Object.values(counts).reduce((a, b) => a + b, 0) : null;
    const item = (state, label, n) => h("a", {
      class: "filter" + (state === stateFilter ? " active" : ""), href: href(state, 1),
      dataset: { state: state || "ALL" },
    }, label, n === null || n === undefined ? null : h("span", { class: "count" }, formatNumber(n)));
    replace(filters, item("", "All", all),
      ...JOB_STATES.map((s) => item(s, s.charAt(0) + s.slice(1).toLowerCase(), counts ? counts[s] : null)));
  }

  function renderPager() {
    const first = total === 0 ? 0 : (page - 1) * PAGE_SIZE + 1;
    const last = Math.min(total, page * PAGE_SIZE);
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    replace(pager,
      h("span", { class: "muted", id: "jobs-range" }, `${formatNumber(first)}–${formatNumber(last)} of ${formatNumber(total)}`),
      page > 1 ? h("a", { class: "button", href: href(stateFilter, page - 1), id: "prev-page" }, "← Newer") : null,
      page < pages ? h("a", { class: "button", href: href(stateFilter, page + 1), id: "next-page" }, "Older →") : null);
  }

  async function load() {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String((page - 1) * PAGE_SIZE) });
    if (stateFilter) q.set("state", stateFilter);
    if (search) q.set("q", search);
    if (sort) q.set("sort", sort);
    try {
      const result = await getJson("/api/jobs?" + q.toString());
      if (!alive) return;
      error.hidden = true;
      total = result.total;
      shown = new Map(result.jobs.map((j) => [j.job_id, j]));
      const rows = result.jobs.map(row);
      if (rows.length === 0) {
        rows.push(h("tr", {}, h("td", { colspan: 10, class: "muted" },
          search ? `No jobs match "${search}".` : stateFilter ? `No ${stateFilter} jobs.`
            : "No jobs yet. Submit one with `ag submit -- COMMAND`.")));
      }
      replace(body, ...rows);
      renderPager();
    } catch (e) {
      if (!alive) return;
      error.textContent = "Could not load jobs: " + e.message;
      error.hidden = false;
    }
  }
  const reload = throttle(load, 500);

  // Running jobs' durations count up between pushes (a display clock, no requests).
  const ticker = setInterval(() => {
    for (const tr of body.querySelectorAll("tr[data-state='RUNNING']")) {
      const job = shown.get(tr.dataset.jobId);
      if (job) tr.lastChild.replaceWith(durationCell(job));
    }
  }, 1000);

  getJson("/api/cluster").then((c) => {
    if (!alive) return;
    counts = counts || c.jobs;
    renderFilters();
  }).catch(() => {});
  renderFilters();
  load();

  return {
    onJobs(update) {
      counts = update.counts;
      renderFilters();
      let reloadNeeded = false;
      // Deleted jobs leave the list.
      for (const id of update.deleted || []) {
        const tr = body.querySelector(`tr[data-job-id="${CSS.escape(id)}"]`);
        if (tr) {
          tr.remove();
          shown.delete(id);
        }
      }
      for (const job of update.jobs) {
        const tr = body.querySelector(`tr[data-job-id="${CSS.escape(job.job_id)}"]`);
        if (tr) {
          if (stateFilter && job.state !== stateFilter) reloadNeeded = true;
          shown.set(job.job_id, job);
          tr.replaceWith(row(job));
        } else if (search || sort) {
          reloadNeeded = true; // whether and where it shows is the head's to say
        } else if (page === 1 && (!stateFilter || job.state === stateFilter)) {
          reloadNeeded = true; // a new job, or one entering the filter
        } else if (!TERMINAL_STATES.has(job.state) || stateFilter) {
          reloadNeeded = true; // counts and page boundaries move
        }
      }
      if (reloadNeeded) reload();
    },
    unmount() {
      alive = false;
      clearInterval(ticker);
      clearTimeout(typing);
    },
  };
}
