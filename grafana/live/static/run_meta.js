// The run page's tags and notes (one run's page: the #run-meta section under the header).
// They are read from /api/runs; where the server allows changes (boot.can_edit) the notes are an
// editable text saved with a button, and tags are added by typing one and pressing Enter and
// removed with their ×, through grafana/datasource/api_manage.py. Kept apart from run.js, which
// draws the charts.
(function () {
  "use strict";
  const box = document.getElementById("run-meta");
  if (!box) return; // several runs overlaid: no one run's notes to show
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const run = boot.runs[0];
  const edit = Boolean(boot.can_edit);

  const el = (tag, props, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    node.append(...children);
    return node;
  };
  const tagRow = el("p", { className: "run-tags" });
  const notes = el("textarea", {
    id: "run-notes",
    rows: 3,
    cols: 80,
    placeholder: T.notes_hint,
    readOnly: !edit,
  });
  const state = el("span", { className: "hint", id: "notes-state" });
  const error = el("p", { className: "filter-error", role: "alert", hidden: true });
  box.append(
    tagRow,
    el("label", { htmlFor: "run-notes" }, T.notes),
    el("br"),
    notes,
    el("br"),
    error,
  );
  if (edit) {
    const save = el("button", { type: "button", id: "save-notes", textContent: T.save_notes });
    save.addEventListener("click", () =>
      send("/api/run/notes", { run: run, notes: notes.value }).then((body) => {
        if (body) state.textContent = T.saved;
      }),
    );
    notes.addEventListener("input", () => (state.textContent = ""));
    box.append(save, " ", state);
  }

  function drawTags(tags) {
    const chips = tags.map((t) => {
      const chip = el("span", { className: "tag" }, t);
      if (edit) {
        const x = el("button", { type: "button", className: "tag-remove", textContent: "×" });
        x.setAttribute("aria-label", T.remove_tag.replace("{tag}", t));
        x.addEventListener("click", () => changeTags({ remove: [t] }));
        chip.append(" ", x);
      }
      return chip;
    });
    tagRow.replaceChildren(el("strong", {}, T.tags + ": "), ...chips);
    if (!tags.length) tagRow.append(el("span", { className: "hint" }, T.no_tags));
    if (edit) {
      const input = el("input", {
        type: "text",
        id: "tag-input",
        placeholder: T.tag_hint,
        autocomplete: "off",
      });
      input.setAttribute("aria-label", T.add_tag);
      input.addEventListener("keydown", (ev) => {
        if (ev.key !== "Enter") return;
        const tag = input.value.trim();
        if (tag) changeTags({ add: [tag] });
      });
      tagRow.append(" ", input);
    }
  }

  function changeTags(change) {
    send("/api/run/tags", Object.assign({ run: run }, change)).then((body) => {
      if (body) drawTags(body.tags || []);
    });
  }

  // A JSON body and Content-Type: the server refuses anything else. Resolves to the answer's
  // body, or null after showing why it was refused.
  function send(path, body) {
    error.hidden = true;
    return fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
      cache: "no-store",
    })
      .then((r) => r.json().then((b) => ({ ok: r.ok, body: b })))
      .then(({ ok, body }) => {
        if (!ok) throw new Error((body && body.error) || "refused");
        return body;
      })
      .catch((e) => {
        error.textContent = T.change_failed.replace("{error}", e.message);
        error.hidden = false;
        return null;
      });
  }

  fetch("/api/runs", { headers: { Accept: "application/json" }, cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null)
    .then((body) => {
      const found = body && Array.isArray(body.runs) ? body.runs.find((r) => r.run === run) : null;
      notes.value = (found && found.notes) || "";
      drawTags((found && found.tags) || []);
      box.dataset.ready = "1";
    });
})();
