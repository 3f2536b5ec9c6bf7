// A task's log, shown without ever loading it whole: it opens on the last CHUNK bytes
// (?tail_bytes=), follows new output with long polls (?offset=END&wait_ms=), loads
// earlier parts on demand, and keeps at most MAX_WINDOW bytes on the page (when
// following pushes the window past that, the oldest part is dropped and can be loaded
// again). Text goes in as text nodes only. A search box shows only the loaded lines
// that contain its text; the links save one rank's whole log, or every rank's.
import { h, throttle } from "./dom.js";
import { getJson, getLog } from "./api.js";
import { formatBytes } from "./dom.js";

const CHUNK = 256 * 1024;
const MAX_WINDOW = 4 * 1024 * 1024;
const FOLLOW_WAIT_MS = 25000;
const FOLLOW_MAX_BYTES = 1024 * 1024;

export class LogView {
  constructor(jobId) {
    this.jobId = jobId;
    this.attempt = 0;
    this.taskIndex = 0;
    this.follow = true;
    this.generation = 0; // bumps on every open(): answers for an older view are dropped
    this.controller = null;
    this.pieces = []; // [{start, end, node}] in order, contiguous
    this.start = 0;
    this.end = 0;
    this.size = 0;
    this.complete = false;
    this.decoder = null;

    this.pre = h("pre", { class: "log", id: "log-text", tabindex: "0" });
    this.status = h("span", { class: "muted small", id: "log-status" });
    this.earlierButton = h("button", { type: "button", id: "log-earlier", onclick: () => this.loadEarlier() }, "Load earlier");
    this.endButton = h("button", { type: "button", id: "log-end", onclick: () => this.jumpToEnd() }, "Jump to end");
    this.followBox = h("input", { type: "checkbox", id: "log-follow", checked: true,
      onchange: () => this.setFollow(this.followBox.checked) });
    this.searchBox = h("input", { type: "search", id: "log-search", placeholder: "Find in log", "aria-label": "Find in log" });
    this.searchBox.addEventListener("input", () => this.showMatches());
    this.matches = h("pre", { class: "log", id: "log-matches", hidden: true });
    this.downloadLink = h("a", { class: "button", id: "log-download", download: "" }, "Download");
    this.downloadAll = h("button", { type: "button", id: "log-download-all", onclick: () => this.saveAllRanks() }, "Download all ranks");
    this.element = h("div", { class: "logview" },
      h("div", { class: "log-controls" }, this.earlierButton, this.endButton,
        h("label", { class: "follow" }, this.followBox, " Follow"), this.searchBox, this.downloadLink, this.downloadAll,
        this.status),
      this.pre, this.matches);
    this.refreshMatches = throttle(() => this.showMatches(), 500);
  }

  // With text in the search box, only the loaded lines that hold it (case-insensitive).
  showMatches() {
    const needle = this.searchBox.value.toLowerCase();
    this.pre.hidden = needle !== "";
    this.matches.hidden = needle === "";
    if (!needle) return this.updateStatus();
    const found = this.pre.textContent.split("\n").filter((line) => line.toLowerCase().includes(needle));
    this.matches.textContent = found.join("\n");
    this.status.textContent = `${found.length} matching ${found.length === 1 ? "line" : "lines"} in the loaded part` +
      (this.start > 0 ? " (load earlier to search further back)" : "");
  }

  // Every rank's output of this attempt, merged in the order it arrived, each line
  // "[rank N] ...", saved as one file (read a page at a time from /lines).
  async saveAllRanks() {
    this.downloadAll.disabled = true;
    const parts = [];
    try {
      let cursor = null;
      for (;;) {
        const q = new URLSearchParams({ attempt: String(this.attempt) });
        if (cursor) q.set("from", cursor.join(","));
        const page = await getJson("/api/jobs/" + encodeURIComponent(this.jobId) + "/lines?" + q.toString());
        for (const [rank, , text] of page.lines) parts.push(`[rank ${rank}] ${text}\n`);
        cursor = page.next;
        if (!page.more) break;
      }
      const url = URL.createObjectURL(new Blob(parts, { type: "text/plain" }));
      const a = h("a", { href: url, download: `${this.jobId}-attempt${this.attempt}-all-ranks.log`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      this.showError(e);
    } finally {
      this.downloadAll.disabled = false;
    }
  }

  // Shows `taskIndex` of `attempt` from its end.
  open(attempt, taskIndex) {
    this.attempt = attempt;
    this.taskIndex = taskIndex;
    this.downloadLink.href = "/api/jobs/" + encodeURIComponent(this.jobId) + "/logs?" +
      new URLSearchParams(this.params({ download: "1" })).toString();
    this.downloadLink.textContent = "Download rank " + taskIndex;
    this.reset();
    this.loadTail();
  }

  reset() {
    this.generation++;
    if (this.controller) this.controller.abort();
    this.controller = new AbortController();
    this.pieces = [];
    this.pre.replaceChildren();
    this.start = this.end = this.size = 0;
    this.complete = false;
    this.decoder = new TextDecoder("utf-8");
    this.updateStatus();
  }

  close() {
    this.generation++;
    if (this.controller) this.controller.abort();
  }

  params(extra) {
    return { task_index: String(this.taskIndex), attempt: String(this.attempt), ...extra };
  }

  async loadTail() {
    const gen = this.generation;
    try {
      const part = await getLog(this.jobId, this.params({ tail_bytes: String(CHUNK) }), { signal: this.controller.signal });
      if (gen !== this.generation) return;
      this.start = this.end = part.offset;
      this.appendBytes(part);
      this.scrollToBottom();
      if (this.follow) this.followLoop(gen);
    } catch (e) {
      if (gen === this.generation && e.name !== "AbortError") this.showError(e);
    }
  }

  async followLoop(gen) {
    let failures = 0;
    while (gen === this.generation && this.follow && !this.complete) {
      try {
        const part = await getLog(this.jobId, this.params({
          offset: String(this.end), wait_ms: String(FOLLOW_WAIT_MS), max_bytes: String(FOLLOW_MAX_BYTES),
        }), { signal: this.controller.signal });
        if (gen !== this.generation) return;
        failures = 0;
        const atBottom = this.isAtBottom();
        this.appendBytes(part);
        if (atBottom) this.scrollToBottom();
      } catch (e) {
        if (gen !== this.generation || e.name === "AbortError") return;
        // The head restarting or a network blip: retry with a growing pause.
        failures++;
        this.status.textContent = "connection lost, retrying…";
        await new Promise((r) => setTimeout(r, Math.min(10000, 500 * 2 ** failures)));
      }
    }
  }

  appendBytes(part) {
    this.size = Math.max(part.size, part.next);
    this.complete = part.complete;
    if (part.bytes.length > 0) {
      const text = this.decoder.decode(part.bytes, { stream: !part.complete });
      const node = document.createTextNode(text);
      this.pre.append(node);
      this.pieces.push({ start: this.end, end: part.next, node });
      this.end = part.next;
      this.trimFront();
      if (this.searchBox.value) this.refreshMatches();
    } else {
      this.end = Math.max(this.end, part.next);
    }
    this.updateStatus();
  }

  // Drops the oldest pieces while the window is over MAX_WINDOW.
  trimFront() {
    while (this.pieces.length > 1 && this.end - this.pieces[0].end >= MAX_WINDOW) {
      const dropped = this.pieces.shift();
      dropped.node.remove();
      this.start = this.pieces[0].start;
    }
  }

  async loadEarlier() {
    if (this.start <= 0) return;
    const gen = this.generation;
    const from = Math.max(0, this.start - CHUNK);
    this.earlierButton.disabled = true;
    try {
      const part = await getLog(this.jobId, this.params({ offset: String(from), max_bytes: String(this.start - from) }),
        { signal: this.controller.signal });
      if (gen !== this.generation) return;
      const before = this.pre.scrollHeight;
      const node = document.createTextNode(new TextDecoder("utf-8").decode(part.bytes));
      this.pre.prepend(node);
      this.pieces.unshift({ start: from, end: this.start, node });
      this.start = from;
      // Keep the lines the reader was looking at in place.
      this.pre.scrollTop += this.pre.scrollHeight - before;
      this.updateStatus();
    } catch (e) {
      if (gen === this.generation && e.name !== "AbortError") this.showError(e);
    } finally {
      this.earlierButton.disabled = false;
    }
  }

  // The end of the log: reopens from its tail when the window is far behind it.
  jumpToEnd() {
    if (!this.follow && this.size - this.end > CHUNK) {
      this.open(this.attempt, this.taskIndex);
      return;
    }
    if (!this.follow) {
      this.followBox.checked = true;
      this.setFollow(true);
    }
    this.scrollToBottom();
  }

  setFollow(on) {
    this.follow = on;
    if (on && !this.complete) {
      // Restart the long poll under a fresh generation so a stale one cannot double up.
      const pieces = this.pieces;
      this.generation++;
      if (this.controller) this.controller.abort();
      this.controller = new AbortController();
      this.pieces = pieces;
      this.followLoop(this.generation);
      this.scrollToBottom();
    }
  }

  isAtBottom() { return this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 8; }

  scrollToBottom() { this.pre.scrollTop = this.pre.scrollHeight; }

  updateStatus() {
    this.earlierButton.disabled = this.start <= 0;
    if (this.searchBox.value) return;  // the search's count stands
    const range = this.size === 0 ? "empty so far" :
      `bytes ${formatBytes(this.start)}–${formatBytes(this.end)} of ${formatBytes(this.size)}`;
    this.status.textContent = range + (this.complete ? " · complete" : (this.follow ? " · following" : ""));
    this.pre.classList.toggle("empty", this.pieces.length === 0);
  }

  showError(e) {
    this.status.textContent = "could not load the log: " + e.message;
  }
}
