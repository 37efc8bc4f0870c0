// The run list: compare the ticked runs; refresh each run's status and last step every 5 s.
(function () {
  "use strict";
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const button = document.getElementById("compare");
  const picks = () => Array.from(document.querySelectorAll("input.pick:checked")).map((c) => c.value);

  document.addEventListener("change", (ev) => {
    if (ev.target.classList && ev.target.classList.contains("pick")) {
      button.disabled = picks().length < 1;
    }
  });
  button.addEventListener("click", () => {
    const q = new URLSearchParams();
    picks().forEach((r) => q.append("run", r));
    q.set("lang", boot.lang);
    window.location.href = "/run?" + q.toString();
  });

  function refresh() {
    fetch("/api/runs", { headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((body) => {
        if (!body) return;
        for (const run of body.runs) {
          const row = Array.from(document.querySelectorAll("tr[data-run]")).find((tr) => tr.dataset.run === run.run);
          if (!row) continue;
          const badge = row.querySelector(".run-status");
          badge.className = "run-status rs-" + run.status;
          badge.dataset.status = run.status;
          badge.textContent = T[run.status] || run.status;
          row.querySelector(".last-step").textContent =
            run.last_step === null ? "–" : Number(run.last_step).toLocaleString("en-US");
        }
      })
      .catch(() => {});
  }
  if (document.querySelector("tr[data-run]")) setInterval(refresh, 5000);
})();
