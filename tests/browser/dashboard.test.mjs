// The dashboard in a real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a real cluster: a head and two workers that
// tests/integration/test_dashboard.py starts and describes in the environment:
//
//   AG_DASHBOARD_URL   http://127.0.0.1:PORT (the head's dashboard port)
//   AG_TOKEN           the first admin's token
//   AG_BIN, AG_SESSION_DIR   the `ag` binary and the cluster's session (jobs are
//                      submitted through the CLI, as a user would)
//   AG_BROWSER_ARTIFACTS     where screenshots go (one per step, kept after the run)
//   CHROMIUM           the browser (default /usr/bin/chromium)
//
// The steps run in order in one browser: each builds on the sign-in of the one before.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

const run = promisify(execFile);
const BASE = process.env.AG_DASHBOARD_URL;
const TOKEN = process.env.AG_TOKEN;
const AG = process.env.AG_BIN;
const ARTIFACTS = process.env.AG_BROWSER_ARTIFACTS || join(process.cwd(), "build", "browser-artifacts");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const STEP_TIMEOUT_MS = 60000;
const WAIT_MS = 20000; // how long the page may take to show a pushed change

if (!BASE || !TOKEN || !AG || !process.env.AG_SESSION_DIR) {
  throw new Error("run these tests through tests/integration/test_dashboard.py, which starts a cluster and sets " +
    "AG_DASHBOARD_URL, AG_TOKEN, AG_BIN and AG_SESSION_DIR");
}
if (!existsSync(CHROMIUM)) {
  throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium package (scripts/install-deps.sh does)`);
}

async function ag(...args) {
  const { stdout } = await run(AG, args, { env: process.env, timeout: 60000 });
  return stdout;
}

// `ag submit --no-wait ...` -> job id (its last line of output).
async function submit(...args) {
  const out = await ag("submit", "--no-wait", ...args);
  return out.trim().split("\n").pop().trim();
}

describe("dashboard", { concurrency: false }, () => {
  let context;
  let page;
  let profile;
  const dialogs = [];
  const pageErrors = [];
  const cspViolations = [];
  let jobId = null; // the job submitted through the CLI in the live-update step

  async function shot(name) {
    await page.screenshot({ path: join(ARTIFACTS, name + ".png"), fullPage: true });
  }

  // Runs a step and keeps a screenshot of how it ended, pass or fail.
  function step(name, body) {
    test(name, { timeout: STEP_TIMEOUT_MS }, async () => {
      try {
        await body();
      } finally {
        await shot(name.replace(/[^a-z0-9]+/gi, "-").toLowerCase()).catch(() => {});
      }
    });
  }

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    profile = mkdtempSync(join(tmpdir(), "ag-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      timeout: 30000,
    });
    page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on("dialog", async (dialog) => {
      dialogs.push(dialog.type() + ": " + dialog.message());
      await dialog.dismiss();
    });
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
    });
  });

  after(async () => {
    if (context) await context.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  step("wrong token shows the sign-in error", async () => {
    const response = await page.goto(BASE + "/");
    assert.equal(response.status(), 401, "signed out, / answers with the sign-in page");
    await page.fill("#token", "not-the-token");
    await page.click("#submit");
    const error = page.locator("#error");
    await error.waitFor({ state: "visible" });
    assert.match(await error.textContent(), /Wrong token/);
    // Still signed out: the API refuses the browser.
    const status = await page.evaluate(async () => (await fetch("/api/cluster")).status);
    assert.equal(status, 401);
  });

  step("sign in and see both workers", async () => {
    await page.fill("#token", TOKEN);
    await page.click("#submit");
    await page.locator("#nodes-table tbody tr[data-node-id]").nth(1).waitFor();
    const rows = page.locator("#nodes-table tbody tr[data-node-id]");
    assert.equal(await rows.count(), 2);
    const text = await page.locator("#nodes-table").textContent();
    assert.match(text, /127\.0\.0\.2/);
    assert.match(text, /127\.0\.0\.3/);
    assert.equal((await page.locator("#nodes-table .badge.state-alive").count()), 2);
    // The session is a cookie page scripts cannot read.
    assert.equal(await page.evaluate(() => document.cookie), "");
    await page.locator("#live.on").waitFor();
  });

  step("a job submitted with the CLI appears and turns SUCCEEDED without a reload", async () => {
    await page.click("a[data-nav='jobs']");
    await page.locator("#jobs-table").waitFor();
    // A marker that a reload would wipe.
    await page.evaluate(() => { window.__noReload = true; });
    jobId = await submit("-n", "2", "--name", "browser-live", "--",
      "sleep 1; for i in 1 2 3; do echo \"rank $RANK line $i\"; done");
    const row = page.locator(`#jobs-table tr[data-job-id="${jobId}"]`);
    await row.waitFor();
    await page.locator(`#jobs-table tr[data-job-id="${jobId}"] .badge.state-succeeded`).waitFor();
    assert.match(await row.textContent(), /browser-live/);
    assert.equal(await page.evaluate(() => window.__noReload), true, "the page was not reloaded");
  });

  step("the job page shows rank 1's log lines", async () => {
    await page.click(`#jobs-table tr[data-job-id="${jobId}"] a`);
    await page.locator("#log-text").waitFor();
    await page.click("button.rank[data-rank='1']");
    await page.locator("#log-text", { hasText: "rank 1 line 3" }).waitFor();
    const log = await page.locator("#log-text").textContent();
    assert.match(log, /rank 1 line 1\nrank 1 line 2\nrank 1 line 3/);
    assert.doesNotMatch(log, /rank 0/);
    assert.match(await page.locator("#events-table").textContent(), /SUCCEEDED/);
  });

  step("the log viewer finds lines and saves one rank's log or every rank's", async () => {
    await page.goto(BASE + "/#/jobs/" + jobId);
    await page.click("button.rank[data-rank='1']");
    await page.locator("#log-text", { hasText: "rank 1 line 3" }).waitFor();
    await page.fill("#log-search", "LINE 2");
    await page.locator("#log-matches", { hasText: "rank 1 line 2" }).waitFor();
    assert.equal(await page.locator("#log-matches").textContent(), "rank 1 line 2");
    assert.match(await page.locator("#log-status").textContent(), /^1 matching line in the loaded part/);
    await page.fill("#log-search", "");
    await page.locator("#log-text").waitFor({ state: "visible" });
    const saved = async (selector) => {
      const [download] = await Promise.all([page.waitForEvent("download"), page.click(selector)]);
      return { name: download.suggestedFilename(), text: readFileSync(await download.path(), "utf8") };
    };
    const one = await saved("#log-download");
    assert.equal(one.name, `${jobId}-attempt0-rank1.log`);
    assert.equal(one.text, "rank 1 line 1\nrank 1 line 2\nrank 1 line 3\n");
    const all = await saved("#log-download-all");
    assert.equal(all.name, `${jobId}-attempt0-all-ranks.log`);
    const lines = all.text.trim().split("\n").sort();
    assert.deepEqual(lines, ["[rank 0] rank 0 line 1", "[rank 0] rank 0 line 2", "[rank 0] rank 0 line 3",
      "[rank 1] rank 1 line 1", "[rank 1] rank 1 line 2", "[rank 1] rank 1 line 3"]);
    // Times carry their zone.
    await page.goto(BASE + "/#/jobs");
    const row = page.locator(`#jobs-table tr[data-job-id="${jobId}"]`);
    await row.waitFor();
    assert.match(await row.locator("td").nth(6).textContent(), /^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d [A-Z][\w+:-]*$/);
  });

  step("a job printing a script tag shows the text and runs nothing", async () => {
    const before = dialogs.length;
    const id = await submit("--name", "<img src=x onerror=alert(2)>", "--",
      "echo '<script>alert(1)</script>'; echo '<img src=x onerror=alert(3)>'");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("#log-text", { hasText: "<script>alert(1)</script>" }).waitFor();
    const log = await page.locator("#log-text").textContent();
    assert.match(log, /<script>alert\(1\)<\/script>/);
    assert.match(log, /<img src=x onerror=alert\(3\)>/);
    // The name is text in the heading, not an element.
    assert.match(await page.locator("h1").first().textContent(), /<img src=x onerror=alert\(2\)>/);
    assert.equal(await page.locator("#view script, #view img[src='x']").count(), 0);
    // Give any injected handler time to fire.
    await page.waitForTimeout(1000);
    assert.deepEqual(dialogs.slice(before), [], "no alert/confirm/prompt dialog was raised");
  });

  step("stop a running job after confirming", async () => {
    const id = await submit("--name", "to-stop", "--", "sleep 300");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("h1 .badge.state-running").waitFor();
    // Its stacks first: no Python here, so its process tree (once its task runs).
    await page.waitForFunction(async (jid) => {
      const job = await (await fetch("/api/jobs/" + jid)).json();
      return job.attempts.length > 0 && job.attempts[0].tasks.every((t) => t.state === "RUNNING");
    }, id, { polling: 200 });
    await page.click("#job-stacks-button");
    await page.locator("#job-stacks pre", { hasText: "sleep 300" }).waitFor();
    assert.match(await page.locator("#job-stacks h3").first().textContent(), /rank 0 · node \S+ · no Python/);
    await page.click("#stop-job");
    const dialog = page.locator("dialog#confirm");
    await dialog.waitFor({ state: "visible" });
    await page.click("#confirm-ok");
    await page.locator("h1 .badge.state-stopped").waitFor();
    const state = await page.evaluate(async (jid) => (await (await fetch("/api/jobs/" + jid)).json()).state, id);
    assert.equal(state, "STOPPED");
    assert.deepEqual(dialogs, [], "the confirmation is the page's own dialog, not window.confirm");
  });

  step("a failed job shows the failing rank's last lines and opens on its log", async () => {
    const id = await submit("-n", "2", "--name", "fails", "--",
      "if [ \"$RANK\" = 1 ]; then seq 1 80 | sed 's/^/err line /'; exit 3; fi; sleep 60");
    const state = await page.evaluate(async (jid) =>
      (await (await fetch("/api/jobs/" + jid + "/wait?timeout_ms=30000")).json()).state, id);
    assert.equal(state, "FAILED");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("#job-failure").waitFor();
    assert.match(await page.locator("#job-message").textContent(), /task 1 exited with code 3/);
    // The last 50 lines: 31 to 80.
    const tail = await page.locator("#job-failure pre").textContent();
    assert.match(tail, /^err line 31$/m);
    assert.match(tail, /^err line 80$/m);
    assert.doesNotMatch(tail, /^err line 30$/m);
    await page.locator("button.rank.active[data-rank='1']").waitFor();
    await page.locator("#log-text", { hasText: "err line 80" }).waitFor();
  });

  step("a long log opens at its end and loads earlier parts on demand", async () => {
    // About 2 MB of numbered lines: far more than the viewer loads at once.
    const id = await submit("--name", "long-log", "--", "seq 1 300000");
    // Opened after the job ended, the viewer reads only the tail; opened while the job
    // runs it follows (and so loads) everything printed after it opened.
    const state = await page.evaluate(async (jid) =>
      (await (await fetch("/api/jobs/" + jid + "/wait?timeout_ms=30000")).json()).state, id);
    assert.equal(state, "SUCCEEDED");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("#log-status", { hasText: "complete" }).waitFor();
    const firstLine = async () => {
      const text = await page.locator("#log-text").textContent();
      const lines = text.split("\n");
      return Number(lines[1]); // lines[0] may be cut mid-line
    };
    const text = await page.locator("#log-text").textContent();
    assert.ok(text.endsWith("\n300000\n"), "the end of the log is shown");
    assert.ok(text.length < 400 * 1024, `only the tail is loaded, not ${text.length} bytes`);
    const before = await firstLine();
    assert.ok(before > 200000, `the view starts near the end (line ${before})`);
    await page.click("#log-earlier");
    await page.waitForFunction((n) => {
      const lines = document.getElementById("log-text").textContent.split("\n");
      return Number(lines[1]) < n;
    }, before);
    const after = await firstLine();
    assert.ok(after < before && after > 100000, `earlier lines loaded: ${before} -> ${after}`);
    // The joined text is continuous across the two reads.
    const all = (await page.locator("#log-text").textContent()).split("\n").slice(1, -1).map(Number);
    assert.ok(all.every((n, i) => i === 0 || n === all[i - 1] + 1), "no gap or overlap at the seam");
  });

  step("the node page shows usage charts and tasks", async () => {
    await page.goto(BASE + "/#/");
    await page.locator("#nodes-table tbody tr[data-node-id] a").first().click();
    await page.locator("#node-tasks").waitFor();
    await page.locator("svg.chart").first().waitFor();
    assert.ok(await page.locator(".chart-box").count() >= 2);
  });

  step("an admin drains a node from its page and resumes it", async () => {
    await page.goto(BASE + "/#/");
    await page.locator("#nodes-table tbody tr[data-node-id] a").first().click();
    await page.locator("#drain-node").click();
    await page.locator("dialog#confirm").waitFor({ state: "visible" });
    await page.click("#confirm-ok");
    await page.locator("h1 .badge.state-draining").waitFor();
    const nodeId = decodeURIComponent(page.url().split("#/nodes/")[1]);
    const drained = await page.evaluate(async (id) => (await (await fetch("/api/nodes/" + encodeURIComponent(id))).json()).draining, nodeId);
    assert.equal(drained, true);
    assert.match(await page.locator("#node-labels").textContent(), /none/);
    assert.match(await page.locator("#node-limits").textContent(), /^memory, cpu \(cgroup v[12]\)$/);
    assert.match(await page.locator("#node-engine").textContent(), /^(podman|docker) \d/);
    await page.goto(BASE + "/#/");
    await page.locator(`#nodes-table tr[data-node-id="${nodeId}"] .badge.state-draining`).waitFor();
    await page.goto(BASE + "/#/nodes/" + encodeURIComponent(nodeId));
    await page.locator("#resume-node").click();
    await page.locator("#drain-node").waitFor();
    assert.equal(await page.locator("h1 .badge.state-draining").count(), 0);
    const after = await page.evaluate(async (id) => (await (await fetch("/api/nodes/" + encodeURIComponent(id))).json()).draining, nodeId);
    assert.equal(after, false);
  });

  step("the jobs list searches, sorts, and shows a nameless job's command and labels", async () => {
    // Submitted as a script would, with labels (the REST API takes them).
    const id = await page.evaluate(async () => (await (await fetch("/api/jobs", {
      method: "POST", headers: { "Content-Type": "application/json", "X-AG-CSRF": "1" },
      body: JSON.stringify({ entrypoint: "echo needle-7f3", labels: { team: "nlp" } }),
    })).json()).job_id);
    await page.goto(BASE + "/#/jobs");
    await page.locator("#jobs-table").waitFor();
    await page.fill("#job-search", "team=nlp");
    await page.waitForFunction(() => location.hash.includes("q=team%3Dnlp"));
    // The address changes before the page re-renders: wait for the filtered list itself.
    await page.waitForFunction(() => document.querySelectorAll("#jobs-table tbody tr[data-job-id]").length === 1);
    const row = page.locator(`#jobs-table tr[data-job-id="${id}"]`);
    await row.waitFor();
    assert.match(await row.locator(".entrypoint").textContent(), /echo needle-7f3/);
    assert.match(await row.locator(".label").textContent(), /team=nlp/);
    assert.equal(await page.inputValue("#job-search"), "team=nlp", "the search box keeps what was typed");
    // No match says so.
    await page.fill("#job-search", "no-such-job-anywhere");
    await page.locator("#jobs-table", { hasText: 'No jobs match "no-such-job-anywhere"' }).waitFor();
    // Sorting by a column, then the other way.
    await page.goto(BASE + "/#/jobs");
    await page.click("th.sortable a[data-sort='name']");
    await page.waitForFunction(() => location.hash.includes("sort=name"));
    await page.locator("th.sorted a[data-sort='name']", { hasText: "↑" }).waitFor();
    const names = async () => page.locator("#jobs-table tbody td.name").evaluateAll((cells) =>
      cells.map((c) => c.firstChild && c.firstChild.nodeType === 3 ? c.firstChild.textContent : ""));
    await page.locator("#jobs-table tbody tr[data-job-id]").first().waitFor();
    const ascending = (await names()).filter((n) => n);
    assert.ok(new Set(ascending).size >= 3, `several names to sort: ${ascending}`);
    assert.deepEqual(ascending, [...ascending].sort(), "names ascending");
    await page.click("th.sortable a[data-sort='name']");
    await page.waitForFunction(() => location.hash.includes("sort=-name"));
    // The hash changes before the hashchange event re-renders the list: the arrow says it did.
    await page.locator("th.sorted a[data-sort='name']", { hasText: "↓" }).waitFor();
    await page.locator("#jobs-table tbody tr[data-job-id]").first().waitFor();
    const descending = (await names()).filter((n) => n);
    assert.deepEqual(descending, [...descending].sort().reverse(), "names descending");
  });

  step("a pending job shows its place in the queue, and the queue it waits in", async () => {
    // More GPUs than any node has: it waits (queued anyway) until stopped.
    await ag("queue", "create", "browsers", "--priority", "high");
    const id = await submit("--name", "queued", "--queue", "browsers", "--num-gpus", "4", "--allow-unschedulable",
      "--", "true");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("#job-queue-position").waitFor();
    assert.match(await page.locator("#job-queue-position").textContent(), /^#\d+ in queue/);
    assert.equal(await page.locator("#job-queue").textContent(), "browsers (priority 100)");
    await page.goto(BASE + "/#/jobs?state=PENDING");
    await page.locator(`#jobs-table tr[data-job-id="${id}"] .queue-position`).waitFor();
    assert.equal(await page.locator(`#jobs-table tr[data-job-id="${id}"] .job-queue`).textContent(), "queue browsers");
    await ag("stop-job", id);
  });

  step("no card value is cut off, and a narrow screen scrolls nothing sideways", async () => {
    await page.goto(BASE + "/#/");
    await page.locator("#nodes-table tbody tr[data-node-id]").first().waitFor();
    const cut = await page.locator(".card-value").evaluateAll((els) =>
      els.filter((el) => el.scrollWidth > el.clientWidth).map((el) => el.textContent));
    assert.deepEqual(cut, [], "card values shown whole");
    // Node pages are told apart by address even when every worker has the same host name.
    const titles = new Set();
    for (const href of await page.locator("#nodes-table tbody tr[data-node-id] a").evaluateAll((as) => as.map((a) => a.getAttribute("href")))) {
      await page.goto(BASE + "/" + href);
      await page.locator("h1 .subtitle").waitFor();
      titles.add(await page.locator("h1").first().textContent());
    }
    assert.equal(titles.size, 2, "two nodes, two titles");
    await page.setViewportSize({ width: 390, height: 800 });
    try {
      for (const path of ["/#/", "/#/jobs"]) {
        await page.goto(BASE + path);
        await page.locator("#view .page").waitFor();
        const overflow = await page.evaluate(() => {
          const bar = document.querySelector(".topbar");
          return { page: document.documentElement.scrollWidth - window.innerWidth, bar: bar.scrollWidth - bar.clientWidth };
        });
        assert.ok(overflow.page <= 0 && overflow.bar <= 0, `${path} overflows sideways: ${JSON.stringify(overflow)}`);
      }
    } finally {
      await page.setViewportSize({ width: 1400, height: 900 });
    }
  });

  step("a running job's page charts its tasks' CPU and memory", async () => {
    const id = await submit("-n", "2", "--name", "busy", "--",
      "python3 -c \"import time\nt = time.time()\nwhile time.time() - t < 15: pass\"");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("#job-usage svg.chart").first().waitFor();
    assert.equal(await page.locator("#job-usage svg.chart").count(), 2);
    assert.match(await page.locator("#job-usage figcaption").first().textContent(), /^CPU \d+%/);
    await ag("stop-job", id);
  });

  step("the footer names the head's version", async () => {
    await page.locator("#version", { hasText: /^AetherGrid \d+\.\d+/ }).waitFor();
  });

  step("sign out, then the sign-in link signs in and leaves the address bar clean", async () => {
    await page.click("#sign-out");
    await page.locator("#sign-in").waitFor();
    assert.equal(await page.evaluate(async () => (await fetch("/api/cluster")).status), 401);
    await page.goto(BASE + "/?token=" + encodeURIComponent(TOKEN));
    await page.locator("#nodes-table tbody tr[data-node-id]").first().waitFor();
    assert.equal(page.url(), BASE + "/", "the token does not stay in the address bar");
  });

  step("a viewer sees a job's status and owner, but no stop button and no logs", async () => {
    const id = await submit("--name", "admins-job", "--", "printf 'secret-%s\\n' output; sleep 300");
    const viewer = JSON.parse(await ag("-o", "json", "user", "add", "vic", "--role", "viewer")).token;
    await page.click("#sign-out");
    await page.locator("#sign-in").waitFor();
    await page.goto(BASE + "/?token=" + encodeURIComponent(viewer));
    await page.locator("#nodes-table tbody tr[data-node-id]").first().waitFor();
    assert.equal(await page.locator("#who").textContent(), "vic · viewer");
    await page.goto(BASE + "/#/jobs/" + id);
    await page.locator("h1 .badge.state-running").waitFor();
    assert.equal(await page.locator("#job-owner").textContent(), "admin");
    assert.equal(await page.locator("#stop-job").count(), 0, "no stop button for a job the viewer may not stop");
    assert.equal(await page.locator("#job-stacks-button").count(), 0, "no stacks for a job the viewer may not stop");
    await page.getByText("can read its logs").first().waitFor();
    assert.equal(await page.getByText("secret-output").count(), 0);
    const stop = await page.evaluate(async (jid) => (await fetch("/api/jobs/" + jid + "/stop",
      { method: "POST", headers: { "X-AG-CSRF": "1" } })).status, id);
    assert.equal(stop, 403);
    await ag("stop-job", id);
  });

  step("a worker that joins with labels shows them in the node list", async () => {
    // Joins the running head (left running: the test's teardown stops the session).
    const session = JSON.parse(readFileSync(join(process.env.AG_SESSION_DIR, "session.json"), "utf8"));
    await ag("start-worker", "--head-node", session.address, "--node-ip-address", "127.0.0.9", "--num-cpus", "1",
      "--label", "team=nlp", "--label", "gpu=none", "--token", TOKEN,
      "--data-dir", join(process.env.AG_SESSION_DIR, "worker-labels"));
    await page.goto(BASE + "/#/");
    const row = page.locator("#nodes-table tr[data-node-id]", { hasText: "127.0.0.9" });
    await row.locator(".label", { hasText: "team=nlp" }).waitFor();
    assert.deepEqual(await row.locator(".label").allTextContents(), ["gpu=none", "team=nlp"]);
  });

  step("no script errors or CSP violations on any page", async () => {
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(cspViolations, []);
  });
});
