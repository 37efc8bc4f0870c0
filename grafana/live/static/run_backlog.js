// The run page's line about the forwarder to InfluxDB: while rows of the store wait to be sent
// (or the forwarder fails, or drains after the training exited), how many, how long the oldest
// has waited and how fast it sends, from /api/runs' `forwarding`; hidden while nothing waits.
// Polled at the page's refresh (boot.refresh_ms). Kept apart from run.js, which draws charts.
(function () {
  "use strict";
  const line = document.getElementById("run-backlog");
  if (!line) return;
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const number = new Intl.NumberFormat(boot.lang === "zh" ? "zh-CN" : "en-US");

  function draw(f) {
    const waiting = f && (f.backlog > 0 || f.state === "failing" || f.state === "draining");
    line.hidden = !waiting;
    line.dataset.ready = "1";
    if (!waiting) {
      line.textContent = "";
      return;
    }
    const parts = [
      T.backlog
        .replace("{rows}", number.format(f.backlog))
        .replace("{age}", f.oldest_age == null ? "–" : number.format(Math.round(f.oldest_age))),
    ];
    if (f.rate != null) parts.push(T.backlog_rate.replace("{rate}", number.format(Math.round(f.rate))));
    parts.push(T.forwarder_state.replace("{state}", f.state + (f.detail ? ": " + f.detail : "")));
    line.textContent = parts.join("; ");
    line.dataset.state = f.state;
  }

  function poll() {
    fetch("/api/runs", { headers: { Accept: "application/json" }, cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .catch(() => null)
      .then((body) => draw(body ? body.forwarding : null));
  }
  poll();
  setInterval(poll, Math.max(1000, boot.refresh_ms || 5000));
})();
