// Calls to the head's REST API with the session cookie. State-changing calls carry
// X-AG-CSRF, which the head demands of cookie-authenticated POSTs (a page on another
// site cannot add it).

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// The session ended (expired, or the token changed): show the sign-in page, which the
// head serves for any page while signed out.
function signedOut() {
  location.reload();
}

async function request(method, path, { signal } = {}) {
  const headers = {};
  if (method !== "GET") headers["X-AG-CSRF"] = "1";
  const res = await fetch(path, { method, headers, credentials: "same-origin", signal, cache: "no-store" });
  if (res.status === 401) {
    signedOut();
    throw new ApiError(401, "signed out");
  }
  return res;
}

async function errorOf(res) {
  try {
    const body = await res.json();
    return new ApiError(res.status, body.error || "HTTP " + res.status);
  } catch (_) {
    return new ApiError(res.status, "HTTP " + res.status);
  }
}

export async function getJson(path, options) {
  const res = await request("GET", path, options);
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

export async function postJson(path, options) {
  const res = await request("POST", path, options);
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

// One read of a task's log. Returns {bytes (Uint8Array), offset, next, size, complete}.
export async function getLog(jobId, params, options) {
  const query = new URLSearchParams(params).toString();
  const res = await request("GET", "/api/jobs/" + encodeURIComponent(jobId) + "/logs?" + query, options);
  if (!res.ok) throw await errorOf(res);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const header = (name, fallback) => {
    const v = res.headers.get(name);
    return v === null ? fallback : Number(v);
  };
  return {
    bytes,
    offset: header("X-AG-Offset", 0),
    next: header("X-AG-Next-Offset", 0),
    size: header("X-AG-Log-Size", 0),
    complete: res.headers.get("X-AG-Log-Complete") === "1",
  };
}

// Who is signed in ({name, role, groups}), asked once per page load.
let me = null;
export function whoami() {
  if (!me) me = getJson("/api/whoami");
  return me;
}

export async function signOut() {
  await fetch("/api/session", { method: "DELETE", headers: { "X-AG-CSRF": "1" }, credentials: "same-origin" });
  location.replace("/");
}
