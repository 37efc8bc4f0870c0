// The run page's run selector: add another run of the store to the overlay, or take one off,
// without going back to the run list. A change is a new address (the runs are the page's
// `run=` parameters), so the view kept in the address (smoothing, columns, pins...) stays.
(function () {
  "use strict";
  const box = document.getElementById("run-picker");
  if (!box) return;
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const shown = boot.runs;

  function withRuns(runs) {
    const p = new URLSearchParams(window.location.search);
    p.delete("run");
    for (const r of runs) p.append("run", r);
    return window.location.pathname + "?" + p.toString();
  }

  const select = document.createElement("select");
  select.id = "add-run";
  select.setAttribute("aria-label", T.add_run);
  const full = shown.length >= boot.max_compared;
  const first = new Option(full ? T.add_run_full.replace("{n}", String(boot.max_compared)) : T.add_run_pick, "");
  select.append(first);
  select.disabled = true; // until the run list has arrived
  select.addEventListener("change", () => {
    if (select.value) window.location.assign(withRuns([...shown, select.value]));
  });
  const label = document.createElement("label");
  label.append(T.add_run + " ", select);
  box.append(label);

  if (shown.length > 1) {
    for (const run of shown) {
      const off = document.createElement("a");
      off.className = "remove-run";
      off.href = withRuns(shown.filter((r) => r !== run));
      off.textContent = "× " + run;
      off.title = T.remove_run.replace("{run}", run);
      box.append(" ", off);
    }
  }

  fetch("/api/runs", { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status))))
    .then((body) => {
      const others = body.runs.map((r) => r.run).filter((n) => !shown.includes(n));
      for (const name of others) select.append(new Option(name, name));
      select.disabled = full || others.length === 0;
    })
    .catch(() => {
      first.textContent = T.add_run_unavailable;
    });
})();
