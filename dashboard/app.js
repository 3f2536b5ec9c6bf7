// The dashboard app: a hash router over four pages and one live connection to the
// head (server-sent events from GET /api/stream) that feeds whichever page is shown.
//
//   #/                cluster overview: nodes, capacity, usage charts, recent jobs
//   #/jobs?state=S&page=N   jobs, newest first, 50 a page
//   #/jobs/ID         one job: spec, attempts, timeline, events, logs
//   #/nodes/ID        one node: usage charts and tasks
//
// Pages load what they show from the REST API once, then apply pushed updates; nothing
// here polls the head on a timer.
import { h, clear } from "./dom.js";
import { getJson, signOut, whoami } from "./api.js";
import * as overview from "./pages/overview.js";
import * as jobs from "./pages/jobs.js";
import * as job from "./pages/job.js";
import * as node from "./pages/node.js";

const view = document.getElementById("view");
const live = document.getElementById("live");
let current = null; // the mounted page: {onJobs?, onNodes?, unmount?}
let lastNodes = null; // latest pushed node list, handed to pages as they mount

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, queryPart] = hash.split("?");
  let parts;
  try {
    parts = pathPart.split("/").filter(Boolean).map(decodeURIComponent);
  } catch (_) {
    parts = ["?"];
  }
  const params = new URLSearchParams(queryPart || "");
  if (current && current.unmount) current.unmount();
  current = null;
  clear(view);
  let page = null;
  let id = null;
  if (parts.length === 0) page = overview;
  else if (parts[0] === "jobs" && parts.length === 1) page = jobs;
  else if (parts[0] === "jobs" && parts.length === 2) [page, id] = [job, parts[1]];
  else if (parts[0] === "nodes" && parts.length === 2) [page, id] = [node, parts[1]];
  for (const a of document.querySelectorAll("[data-nav]")) {
    const section = parts[0] === "jobs" ? "jobs" : "overview";
    a.classList.toggle("active", a.dataset.nav === section);
  }
  if (!page) {
    view.append(h("div", { class: "page" }, h("p", { class: "error" }, "There is no page at #" + hash + ". "),
      h("a", { href: "#/" }, "Back to the cluster")));
    return;
  }
  current = page.mount(view, { id, params, nodes: lastNodes }) || null;
}

function setLive(state, text) {
  live.className = "live " + state;
  live.textContent = text;
}

// One EventSource for the whole app. The browser reconnects it by itself after a
// network error; if the head refused it (signed out), the page reloads into sign-in.
function connect() {
  const source = new EventSource("/api/stream");
  source.addEventListener("hello", () => setLive("on", "live"));
  source.addEventListener("jobs", (event) => {
    const data = JSON.parse(event.data);
    if (current && current.onJobs) current.onJobs(data);
  });
  source.addEventListener("nodes", (event) => {
    lastNodes = JSON.parse(event.data).nodes;
    if (current && current.onNodes) current.onNodes(lastNodes);
  });
  source.addEventListener("error", async () => {
    setLive("off", "reconnecting…");
    if (source.readyState !== EventSource.CLOSED) return;
    source.close();
    try {
      await getJson("/api/healthz");
      await getJson("/api/cluster"); // reloads into sign-in on 401
    } catch (_) { /* head unreachable: try again below */ }
    setTimeout(connect, 3000);
  });
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
// A head without TLS says so on every page: what the browser sends is readable.
getJson("/api/cluster").then((cluster) => {
  if (cluster.tls !== false) return;
  const banner = document.createElement("div");
  banner.id = "insecure-banner";
  banner.className = "insecure-banner";
  banner.textContent = "TLS is off (--insecure): tokens and data travel in clear text between machines.";
  document.body.insertBefore(banner, document.body.firstChild);
}).catch(() => {});
// Who is signed in, and as what: a viewer's pages offer nothing it may not do.
whoami().then((me) => {
  document.getElementById("who").textContent = me.name + " · " + me.role;
}).catch(() => {});
// Which head this is, in the footer (what to quote in a bug report).
getJson("/api/version").then((v) => {
  const footer = document.getElementById("version");
  // Heads sharing a store: this one leads (a standby serves no dashboard), at this epoch.
  const leads = v.store === "postgresql" ? " · head " + v.head + " leads (epoch " + v.epoch + ")" : "";
  footer.textContent = "AetherGrid " + v.version + (v.commit ? " · commit " + v.commit : "") +
    (v.worker_protocol ? " · worker protocol " + v.worker_protocol : "") + leads;
}).catch(() => {});
window.addEventListener("hashchange", route);
route();
connect();
