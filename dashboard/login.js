// The sign-in page: posts the token once; the head answers with an HttpOnly session
// cookie, so no script here or in the app ever holds the token afterwards.
"use strict";

(function () {
  const form = document.getElementById("sign-in");
  const input = document.getElementById("token");
  const error = document.getElementById("error");
  const submit = document.getElementById("submit");

  function showError(text) {
    error.textContent = text;
    error.hidden = false;
  }

  // A sign-in link with a wrong token lands here (a right one was redirected to the
  // app by the head). Say so, and take the token out of the address bar.
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    showError("The token in the sign-in link is wrong. Paste your user token below.");
    history.replaceState(null, "", location.pathname + location.hash);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    submit.disabled = true;
    try {
      const res = await fetch("/api/session", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-AG-CSRF": "1" },
        body: JSON.stringify({ token: input.value.trim() }),
        credentials: "same-origin",
      });
      if (res.ok) {
        // The sign-in page stands in for any page asked for without a session; load
        // that page again (the app lives at /), keeping the #route.
        location.replace((location.pathname === "/login" ? "/" : location.pathname) + location.hash);
        return;
      }
      let message = "Sign-in failed (HTTP " + res.status + ").";
      try {
        const body = await res.json();
        if (res.status === 401) {
          message = "Wrong token. Use the one in the head's data dir (file 'token') or the sign-in link `ag start-head` printed.";
        } else if (body.error) {
          message = body.error;
        }
      } catch (_) { /* not JSON: keep the status line */ }
      showError(message);
      input.select();
    } catch (e) {
      showError("Cannot reach the head: " + e.message);
    } finally {
      submit.disabled = false;
    }
  });
})();
