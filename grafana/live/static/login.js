// Sign-in page: send the token once as JSON (never in the address), then open the page asked for.
"use strict";
(function () {
  const form = document.getElementById("login");
  const error = document.getElementById("login-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const token = document.getElementById("token").value.trim();
    let answer;
    try {
      answer = await fetch("/api/login", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ token }),
        credentials: "same-origin",
      });
    } catch (exc) {
      error.textContent = String(exc);
      error.hidden = false;
      return;
    }
    if (answer.ok) {
      // only a path on this server: data-next was checked by the server, checked again here
      const next = form.dataset.next || "/";
      window.location.assign(next.startsWith("/") && !next.startsWith("//") ? next : "/");
      return;
    }
    let message = `HTTP ${answer.status}`;
    try {
      message = (await answer.json()).error || message;
    } catch (_) {
      /* not JSON: keep the status */
    }
    error.textContent = message;
    error.hidden = false;
  });
})();
