// The run list keeps itself current: every few seconds (5 s unless ?refresh= says otherwise; also
// on an empty store) it polls /api/runs, adds a row for each new run, refreshes each run's status
// and last step, and drops the rows of runs no longer in the store. A filter box narrows the rows
// by run name, project or tag (substring, or /regex/); the filter is kept in the address
// (?filter=). The ticked runs (of those shown) open overlaid on the run page. Where the server
// allows it (boot.can_edit), each row has rename and delete buttons (`manageCells`).
// Under `rlvitals serve LOGDIR` the line naming the store and the folders followed keeps its log
// counts current too.
(function () {
  "use strict";
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const REFRESH_MS = boot.refresh_ms || 5000;
  // The server renders the table, the filter box and the empty-store message, one side hidden.
  const table = document.querySelector("table.runs");
  const tbody = table.tBodies[0];
  const empty = document.querySelector("p.empty");
  const bar = document.querySelector(".run-filter");
  const input = document.getElementById("filter");
  const filterError = document.getElementById("filter-error");
  const filterCount = document.getElementById("filter-count");
  const button = document.getElementById("compare");

  const rows = () => Array.from(tbody.rows);
  // Only ticked runs the filter shows are compared: a hidden tick is not what the user sees.
  const picks = () =>
    rows()
      .filter((tr) => !tr.hidden)
      .map((tr) => tr.querySelector("input.pick"))
      .filter((c) => c && c.checked)
      .map((c) => c.value);
  const updateButton = () => {
    button.disabled = picks().length < 1;
  };

  document.addEventListener("change", (ev) => {
    if (ev.target.classList && ev.target.classList.contains("pick")) updateButton();
  });
  button.addEventListener("click", () => {
    const q = new URLSearchParams();
    picks().forEach((r) => q.append("run", r));
    q.set("lang", boot.lang);
    window.location.href = "/run?" + q.toString();
  });

  // -- filter ------------------------------------------------------------------------------------

  // "/.../" is a regular expression, tried as written (case-sensitive, anywhere in the text);
  // anything else a case-insensitive substring. Either is tried on the run's name, project and
  // tags (space-separated, as in data-tags).
  // A pattern that does not compile filters nothing and says why next to the box.
  function compile(text) {
    const t = text.trim();
    filterError.hidden = true;
    filterError.textContent = "";
    input.removeAttribute("aria-invalid");
    if (t === "") return null;
    if (t.length >= 2 && t.startsWith("/") && t.endsWith("/")) {
      let re;
      try {
        re = new RegExp(t.slice(1, -1)); // no "g" flag: test() keeps no state between rows
      } catch (e) {
        filterError.textContent = T.filter_bad.replace("{error}", e.message);
        filterError.hidden = false;
        input.setAttribute("aria-invalid", "true");
        return null;
      }
      return (name, project, tags) =>
        re.test(name) || (project !== "" && re.test(project)) || (tags !== "" && re.test(tags));
    }
    const needle = t.toLowerCase();
    return (name, project, tags) =>
      name.toLowerCase().includes(needle) ||
      project.toLowerCase().includes(needle) ||
      tags.toLowerCase().includes(needle);
  }
  let match = compile(input.value);

  function applyFilter() {
    let shown = 0;
    for (const tr of rows()) {
      tr.hidden =
        match !== null && !match(tr.dataset.run, tr.dataset.project || "", tr.dataset.tags || "");
      if (!tr.hidden) shown += 1;
    }
    const total = tbody.rows.length;
    filterCount.textContent =
      match === null
        ? ""
        : shown === 0
          ? T.filter_none
          : T.runs_shown.replace("{n}", shown).replace("{total}", total);
    updateButton();
  }

  // The filter goes into the address (and the other language's link), so a link reopens it.
  function toAddress() {
    const p = new URLSearchParams(window.location.search);
    const f = input.value.trim();
    if (f) p.set("filter", f);
    else p.delete("filter");
    const q = p.toString();
    window.history.replaceState(null, "", window.location.pathname + (q ? "?" + q : ""));
    const other = document.querySelector(".lang-switch");
    if (other) {
      p.set("lang", boot.lang === "en" ? "zh" : "en");
      other.setAttribute("href", window.location.pathname + "?" + p.toString());
    }
  }

  input.addEventListener("input", () => {
    match = compile(input.value);
    applyFilter();
    toAddress();
  });

  // -- rows: the same markup as the server's (grafana/live/pages.py, `_run_row`) -----------------

  const own = (key) => Object.prototype.hasOwnProperty.call(T, key);
  function badge(span, status, reason) {
    span.className = "run-status rs-" + status;
    span.dataset.status = status;
    span.textContent = own(status) ? T[status] : status; // any status string is shown as is
    if (reason) span.title = reason; // e.g. "RuntimeError: boom", "finish() called"
    else span.removeAttribute("title");
  }
  const formatStep = (step) =>
    step === null || step === undefined ? "–" : Math.trunc(Number(step)).toLocaleString("en-US");
  function formatWhen(ts) {
    if (ts === null || ts === undefined) return "–";
    const d = new Date(ts * 1000);
    if (Number.isNaN(d.getTime())) return "–";
    return d.toISOString().slice(0, 19).replace("T", " ") + " UTC"; // as the server's _when()
  }
  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function buildRow(run) {
    const tr = document.createElement("tr");
    tr.dataset.run = run.run;
    tr.dataset.project = run.project || "";
    const pick = document.createElement("input");
    pick.type = "checkbox";
    pick.className = "pick";
    pick.value = run.run;
    pick.setAttribute("aria-label", run.run);
    const link = document.createElement("a");
    link.className = "run-link";
    link.setAttribute("href", "/run?" + new URLSearchParams([["run", run.run], ["lang", boot.lang]]));
    link.textContent = run.run;
    const first = document.createElement("td");
    first.append(pick, " ", link);
    const status = document.createElement("td");
    status.className = "status-cell";
    const span = document.createElement("span");
    badge(span, String(run.status), run.status_reason);
    status.append(span);
    tr.append(
      first,
      cell(run.project || "–"),
      cell(run.framework || "–"),
      status,
      cell(formatStep(run.last_step), "last-step"),
      cell(formatWhen(run.started)),
      ...manageCells(run),
    );
    tr.dataset.tags = tagText(run);
    return tr;
  }

  function sync(runs) {
    const byName = new Map(rows().map((tr) => [tr.dataset.run, tr]));
    const seen = new Set();
    runs.forEach((run, i) => {
      seen.add(run.run);
      let tr = byName.get(run.run);
      if (tr) {
        badge(tr.querySelector(".run-status"), String(run.status), run.status_reason);
        tr.querySelector(".last-step").textContent = formatStep(run.last_step);
        syncTags(tr, run);
      } else {
        tr = buildRow(run);
      }
      // Rows follow the API's order, as the server renders them; only a row out of place moves
      // (moving a row the user is ticking would be needless churn).
      if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
    });
    // Whatever is left over is a run deleted from the store.
    for (const tr of rows()) if (!seen.has(tr.dataset.run)) tr.remove();
    const any = tbody.rows.length > 0;
    table.hidden = !any;
    bar.hidden = !any;
    empty.hidden = any;
    applyFilter(); // new rows honour the filter; a removed ticked row no longer counts
  }

  // -- run management: tags cell, rename / delete (grafana/datasource/api_manage.py) -----------

  const manageError = document.getElementById("manage-error");
  const tagText = (run) => (Array.isArray(run.tags) ? run.tags.join(" ") : "");
  function fillTags(td, tags) {
    td.replaceChildren(
      ...(tags || []).map((t) => {
        const span = document.createElement("span");
        span.className = "tag";
        span.textContent = t;
        return span;
      }),
    );
  }
  // The same cells as the server's `_manage_cells` (grafana/live/pages.py).
  function manageCells(run) {
    const tags = document.createElement("td");
    tags.className = "tags";
    fillTags(tags, run.tags);
    if (!boot.can_edit) return [tags];
    const actions = document.createElement("td");
    actions.className = "actions";
    const button = (cls, label) => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = cls;
      b.textContent = label;
      return b;
    };
    actions.append(button("act-rename", T.rename), " ", button("act-delete", T.delete));
    return [tags, actions];
  }
  function syncTags(tr, run) {
    const text = tagText(run);
    if (tr.dataset.tags === text) return;
    tr.dataset.tags = text;
    const td = tr.querySelector("td.tags");
    if (td) fillTags(td, run.tags);
  }
  function showManageError(message) {
    manageError.textContent = T.change_failed.replace("{error}", message);
    manageError.hidden = false;
  }
  // A JSON body and Content-Type: the server refuses anything else (no cross-site form post).
  function change(method, path, body) {
    manageError.hidden = true;
    return fetch(path, {
      method: method,
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
      cache: "no-store",
    })
      .then((r) => r.json().then((b) => ({ ok: r.ok, body: b })))
      .then(({ ok, body }) => {
        if (!ok) throw new Error((body && body.error) || "refused");
        return refreshNow();
      })
      .catch((e) => showManageError(e.message));
  }
  function refreshNow() {
    return fetch("/api/runs", { headers: { Accept: "application/json" }, cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .then((body) => {
        if (body && Array.isArray(body.runs)) sync(body.runs);
      });
  }
  tbody.addEventListener("click", (ev) => {
    const target = ev.target;
    if (!(target instanceof HTMLButtonElement)) return;
    const tr = target.closest("tr");
    if (!tr) return;
    const run = tr.dataset.run;
    if (target.classList.contains("act-rename")) {
      const to = window.prompt(T.rename_prompt.replace("{run}", run), run);
      if (to !== null && to !== run) change("POST", "/api/run/rename", { run: run, to: to });
    } else if (target.classList.contains("act-delete")) {
      if (window.confirm(T.delete_confirm.replace("{run}", run)))
        change("DELETE", "/api/run", { run: run });
    }
  });

  function poll() {
    fetch("/api/runs", { headers: { Accept: "application/json" }, cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .catch(() => null) // server restarting, network down: try again next time
      .then((body) => {
        try {
          if (body && Array.isArray(body.runs)) sync(body.runs);
        } finally {
          // a timeout chain, not setInterval: a slow answer never overlaps the next request
          window.setTimeout(poll, REFRESH_MS);
        }
      });
  }

  // -- what is read (`rlvitals serve LOGDIR`): each folder's log count, the follower's failure ----

  function showReading(reading) {
    const counts = document.querySelectorAll("#reading .logs-count");
    (reading.following || []).forEach((folder, i) => {
      if (counts[i]) counts[i].textContent = folder.logs === null ? "…" : String(folder.logs);
    });
    const failure = document.getElementById("follow-error");
    const follower = reading.follower || {};
    failure.hidden = follower.state !== "restarting";
    failure.textContent = failure.hidden
      ? ""
      : T.follow_failed.replace("{error}", follower.error).replace("{n}", follower.restarts);
  }

  function pollReading() {
    fetch("/api/health", { headers: { Accept: "application/json" }, cache: "no-store" })
      .then((r) => r.json()) // a failed follower answers 503 with the same body
      .catch(() => null)
      .then((body) => {
        try {
          if (body && body.reading) showReading(body.reading);
        } finally {
          window.setTimeout(pollReading, REFRESH_MS);
        }
      });
  }

  applyFilter(); // a filter given in the address applies at once
  window.setTimeout(poll, REFRESH_MS);
  if (boot.following) window.setTimeout(pollReading, REFRESH_MS);
})();
