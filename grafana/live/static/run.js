// The run page: every field of one or several runs, drawn with uPlot from the JSON API.
// Raw values (thin, light) and TensorBoard's debiased EMA (thick, dark) per run, one colour per
// run; x = step, wall time or time since the run started; drag across a chart to zoom into those
// steps (the series are fetched again for that range, so zooming shows more detail); refreshed
// while any run is live. Charts sit in a grid (1, 2 or 3 columns) of collapsible groups, with a
// "Pinned" group on top; each chart has its diagnosis card folded to a status line per run under
// it, and a PNG button. Colours follow the page's light/dark scheme (theme.js, live.css).
(function () {
  "use strict";
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const T = boot.strings;
  const UNITS = boot.units || {};
  const LANG = boot.lang;
  const RUNS = boot.runs;
  const COLORS = boot.colors;
  const GROUPS = ["pinned", "core", "registered", "bookkeeping", "unregistered"];
  const GROUP_TITLE = {
    pinned: T.group_pinned,
    core: T.group_core,
    registered: T.group_registered,
    bookkeeping: T.group_bookkeeping,
    unregistered: T.group_unregistered,
  };
  const COLUMNS = [1, 2, 3];
  const THEMES = ["auto", "light", "dark"];
  const THEME_KEY = "rlvitals.theme"; // theme.js reads the same key before the page paints
  const CHART_HEIGHT = 220;

  const state = {
    smoothing: 0.6,
    showRaw: true,
    showSmooth: true,
    xmode: "step",
    from: null,
    to: null,
    query: "",
    logY: new Set(), // fields drawn on a log y axis
    columns: 2, // charts side by side
    collapsed: new Set(), // groups folded away
    pinned: [], // fields in the Pinned group, in the order pinned
  };
  // The view is kept in the address (smoothing, x, from, to, q, log, cols, fold, pin), so a link
  // reopens it as it was; `log`, `fold` and `pin` repeat once per field or group
  // (log=policy_kl&log=value_loss, fold=unregistered, pin=policy_kl&pin=value_loss).
  (function fromAddress() {
    const p = new URLSearchParams(window.location.search);
    const num = (k, lo, hi) => {
      const v = p.get(k);
      if (v === null || v === "" || !Number.isFinite(Number(v))) return null;
      return Math.min(hi, Math.max(lo, Number(v)));
    };
    const sm = num("smoothing", 0, 0.999);
    if (sm !== null) state.smoothing = sm;
    if (["step", "wall", "relative"].includes(p.get("x"))) state.xmode = p.get("x");
    const a = num("from", 0, Number.MAX_SAFE_INTEGER);
    const b = num("to", 0, Number.MAX_SAFE_INTEGER);
    if (a !== null && (b === null || a <= b)) state.from = Math.floor(a);
    if (b !== null && (a === null || a <= b)) state.to = Math.ceil(b);
    state.query = (p.get("q") || "").trim().toLowerCase();
    for (const f of p.getAll("log")) if (f) state.logY.add(f);
    const cols = Number(p.get("cols"));
    if (COLUMNS.includes(cols)) state.columns = cols;
    for (const g of p.getAll("fold")) if (GROUPS.includes(g)) state.collapsed.add(g);
    for (const f of p.getAll("pin")) if (f && !state.pinned.includes(f)) state.pinned.push(f);
  })();

  function toAddress() {
    const p = new URLSearchParams(window.location.search);
    const set = (k, v, dflt) => (v === null || v === dflt ? p.delete(k) : p.set(k, String(v)));
    set("smoothing", state.smoothing, 0.6);
    set("x", state.xmode, "step");
    set("from", state.from, null);
    set("to", state.to, null);
    set("q", state.query, "");
    p.delete("log");
    for (const f of Array.from(state.logY).sort()) p.append("log", f);
    set("cols", state.columns, 2);
    p.delete("fold");
    for (const g of GROUPS) if (state.collapsed.has(g)) p.append("fold", g);
    p.delete("pin");
    for (const f of state.pinned) p.append("pin", f);
    const search = "?" + p.toString();
    window.history.replaceState(null, "", window.location.pathname + search);
    const other = document.querySelector(".lang-switch");
    if (other) {
      const o = new URLSearchParams(search);
      o.set("lang", LANG === "en" ? "zh" : "en");
      other.setAttribute("href", window.location.pathname + "?" + o.toString());
    }
  }

  const info = {}; // run -> /api/run answer
  const events = {}; // run -> [{step, kind, text}]
  const fields = new Map(); // field -> {meta, runs: Set}
  const panels = new Map(); // field -> {el, data: {run: series}}
  const charts = new Map(); // field -> uPlot
  let timer = null;
  let ticking = false;

  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, attrs, children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v;
      else if (k === "html") e.innerHTML = v; // only server-rendered, escaped registry HTML
      else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children || []) if (c) e.appendChild(c);
    return e;
  };
  const fmt = (t, vars) => t.replace(/\{(\w+)\}/g, (_, k) => String(vars[k]));
  const colorOf = (run) => COLORS[RUNS.indexOf(run)];

  // A registry unit id as words: "none" is dimensionless and shows nothing; an id without
  // words of its own (a new one in the registry) shows as itself, underscores as spaces.
  function unitLabel(unit) {
    if (!unit || unit === "none") return "";
    const words = UNITS[unit];
    return words !== undefined ? words : unit.replace(/_/g, " ");
  }

  // ---- colour scheme -----------------------------------------------------------------------
  // live.css holds both schemes' colours as CSS variables (the report's, plus --grid and --band);
  // the charts are drawn on a canvas, so they read them when drawn and are drawn again when the
  // scheme changes (the toggle, or the system's setting while on "auto").

  function themeColors() {
    const cs = getComputedStyle(document.documentElement);
    const v = (k, dflt) => cs.getPropertyValue(k).trim() || dflt;
    return { bg: v("--bg", "#fff"), fg: v("--fg", "#1d2330"), muted: v("--muted", "#5b6473"), grid: v("--grid", "#eef0f4"), band: v("--band", "rgba(46, 125, 50, 0.10)") };
  }

  function chosenTheme() {
    let t = null;
    try {
      t = window.localStorage.getItem(THEME_KEY);
    } catch (e) {
      t = null; // storage refused: the page follows the system
    }
    return THEMES.includes(t) ? t : "auto";
  }

  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  function markTheme() {
    const t = chosenTheme();
    document.body.dataset.scheme = t === "auto" ? (systemDark.matches ? "dark" : "light") : t;
  }

  function setTheme(theme) {
    try {
      if (theme === "auto") window.localStorage.removeItem(THEME_KEY);
      else window.localStorage.setItem(THEME_KEY, theme);
    } catch (e) {
      // storage refused: the choice holds for this page only
    }
    if (theme === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    markTheme();
    redrawAll();
  }

  // ---- values as logged ------------------------------------------------------------------
  // The registry's transforms (from /api/fields) turn a framework's logged value into the one
  // stored and shown: negate (-x), scale (x × factor), reciprocal (factor / x). The readout
  // gives the logged value beside the shown one by inverting them. The smoothed line is an EMA
  // of the shown values, which commutes with negate and scale only, so a reciprocal's logged
  // value is given for the raw line alone (and for a bucket mean it is the inverse of the mean).

  function loggedValue(t, v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return null;
    if (t.kind === "negate") return -v;
    if (t.kind === "scale") return t.factor ? v / t.factor : null;
    if (t.kind === "reciprocal") return v !== 0 ? (t.factor === undefined ? 1 : t.factor) / v : null;
    return v;
  }

  function transformNote(t) {
    if (t.kind === "scale") return t.framework + " " + t.key + " × " + t.factor;
    if (t.kind === "reciprocal") return t.framework + " " + (t.factor === undefined ? 1 : t.factor) + " / " + t.key + " (" + T.t_reciprocal + ")";
    return t.framework + " " + t.key + " (" + (T["t_" + t.kind] || t.kind) + ")";
  }

  function showError(message) {
    const box = $("#error");
    box.hidden = false;
    box.textContent = message;
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    if (!r.ok) throw new Error((body && body.error) || r.status + " " + r.statusText);
    return body;
  }
  const q = (obj) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(obj)) if (v !== null && v !== undefined && v !== "") p.set(k, v);
    return p.toString();
  };

  // TensorBoard's debiased EMA (as registry.diagnosis.stats.ema): non-finite points pass through
  // and neither update the average nor count; a constant series is returned unchanged.
  function ema(values, weight) {
    const out = values.slice();
    if (!values.length || weight <= 0) return out;
    const first = values[0];
    if (values.every((v) => v === first)) return out;
    const s = Math.min(Math.max(weight, 0), 0.999);
    let acc = 0;
    let n = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v === null || !Number.isFinite(v)) continue;
      n += 1;
      acc = s * acc + (1 - s) * v;
      out[i] = acc / (1 - Math.pow(s, n));
    }
    return out;
  }

  function duration(sec) {
    const s = Math.round(Math.abs(sec));
    const sign = sec < 0 ? "-" : "";
    if (s < 60) return sign + s + "s";
    if (s < 3600) return sign + Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return sign + Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  }

  // ---- numbers ---------------------------------------------------------------------------
  // One notation for the y axes and the hover readout: plain decimals from 0.001 up to a
  // million (thousands grouped, 12,346), scientific outside it (3e-4, 2.5e-5, 1.23e7); 0 only
  // for a true zero. uPlot's own formatter (fmtNum: Intl.NumberFormat, at most 3 decimals)
  // turns 3e-4 into "0" and 0.0024 into "0.002", so every y value goes through these instead.

  const SCI_BELOW = 1e-3;
  const SCI_FROM = 1e6;
  const GROUPED = new Map(); // decimals -> Intl.NumberFormat
  // "2.50" -> "2.5", "3.0e-4" -> "3e-4", "1.00" -> "1"; integers keep their zeros.
  const trimZeros = (s) => s.replace(/(\.\d*?)0+(?=$|e)/, "$1").replace(/\.(?=$|e)/, "");
  const sci = (v, digits) => trimZeros(v.toExponential(Math.min(20, Math.max(0, digits)))).replace("e+", "e");
  function fixed(v, decimals) {
    const d = Math.min(20, Math.max(0, decimals));
    if (!GROUPED.has(d)) GROUPED.set(d, new Intl.NumberFormat("en-US", { minimumFractionDigits: 0, maximumFractionDigits: d }));
    const s = GROUPED.get(d).format(v);
    return s === "-0" ? "0" : s;
  }
  const exp10 = (v) => Math.floor(Math.log10(Math.abs(v)) + 1e-9);
  const isSci = (a) => a > 0 && (a < SCI_BELOW || a >= SCI_FROM);

  // The readout (legend): three significant digits, integers from 1,000 up (0.0024 -> 0.0024,
  // 0.123456 -> 0.123, 12345.6 -> 12,346, 3e-4 -> 3e-4, 1234567 -> 1.23e6).
  function fmtValue(v) {
    if (v === null || v === undefined) return "–";
    if (!Number.isFinite(v)) return String(v);
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (isSci(a)) return sci(v, 2);
    if (Math.abs(Number(v.toPrecision(3))) >= 1000) return fixed(Math.round(v), 0);
    return trimZeros(v.toPrecision(3));
  }

  // A tick step as mantissa digits and power of ten: 0.02 -> [0, -2], 0.025 -> [1, -2], 5 -> [0, 0].
  function stepDigits(incr) {
    const m = /(?:\.(\d+))?e([+-]\d+)$/.exec(Number(incr.toPrecision(12)).toExponential());
    return [m[1] ? m[1].length : 0, Number(m[2])];
  }

  const distinct = (labels) => new Set(labels.filter((t) => t !== "")).size === labels.filter((t) => t !== "").length;

  // Linear y ticks, as uPlot's axis `values(u, splits, axisIdx, foundSpace, foundIncr)` hook
  // (axesCalc() calls it with the splits after axis.filter, null for a tick left unlabelled):
  // as many digits as the step between ticks needs, so neighbours always differ and a
  // non-zero tick never reads 0; if rounding still makes two equal, one more digit, and so on.
  function linearTicks(splits, incr) {
    const vals = splits.filter((v) => v !== null && v !== undefined);
    if (!vals.length) return splits.map(() => "");
    if (!(incr > 0)) incr = vals.length > 1 ? Math.abs(vals[1] - vals[0]) || Math.abs(vals[0]) || 1 : Math.abs(vals[0]) || 1;
    const scientific = isSci(Math.max(...vals.map(Math.abs)));
    const [mant, step] = stepDigits(incr);
    let out = [];
    for (let more = 0; more < 8; more++) {
      out = splits.map((v) => {
        if (v === null || v === undefined) return "";
        if (Math.abs(v) < incr * 1e-6) return "0";
        if (scientific) return sci(v, exp10(v) - step + mant + more);
        return fixed(v, Math.max(0, mant - step) + more);
      });
      if (distinct(out)) break;
    }
    return out;
  }

  // Log y ticks: each label on its own (1e-4, 2e-4, 0.001, 0.01, 10), the readout's notation.
  function logTicks(splits) {
    let out = [];
    for (let digits = 3; digits < 12; digits++) {
      out = splits.map((v) => {
        if (v === null || v === undefined) return "";
        const p = Number(v.toPrecision(digits));
        return isSci(Math.abs(p)) ? sci(p, digits - 1) : fixed(p, Math.max(0, digits - 1 - exp10(p)));
      });
      if (distinct(out)) break;
    }
    return out;
  }

  // The y range, as uPlot's scale `range(u, dataMin, dataMax, scaleKey)` hook (setScales() calls
  // it with the shown series' extremes, null when there are none). A flat series (a constant
  // learning rate) gets ±10 % around its value, so its ticks sit around it and none is 0;
  // anything else gets uPlot's own padded, snapped range (uPlot.rangeNum, as its default
  // snapNumY). On a log axis uPlot.rangeLog (its default snapLogY), widened by a decade each
  // way when flat.
  function yRange(u, lo, hi, key) {
    if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) return [null, null];
    if (u.scales[key].distr === 3) return uPlot.rangeLog(lo, hi, 10, false);
    if (hi - lo <= Math.max(Math.abs(lo), Math.abs(hi)) * 1e-12) {
      const mid = (lo + hi) / 2;
      if (mid === 0) return [-1, 1];
      const pad = Math.abs(mid) * 0.1;
      return [mid - pad, mid + pad];
    }
    return uPlot.rangeNum(lo, hi, 0.1, true);
  }

  // Tick steps of 1, 2 and 5 × 10^k (uPlot's default list adds 2.5, which needs one digit more).
  // Built as uPlot's genIncrs builds its own (+"2e-5"), so each is the very number uPlot has in
  // its decimals table (fixedDec), which numAxisSplits() rounds the ticks with.
  const Y_INCRS = [];
  for (let e = -30; e <= 30; e++) for (const m of [1, 2, 5]) Y_INCRS.push(Number(m + "e" + e));

  // Room for the widest label (uPlot's axis `size(u, values, axisIdx, cycleNum)` hook; it
  // recomputes the layout until the size settles); at least the 70 px every chart had, so the
  // plots of stacked panels keep one left edge unless a label needs more.
  let measurer = null;
  function ySize(u, values, axisIdx) {
    if (!values || !values.length) return 70;
    if (!measurer) measurer = document.createElement("canvas").getContext("2d");
    const axis = u.axes[axisIdx];
    measurer.font = axis.font[0];
    const widest = Math.max(...values.map((t) => measurer.measureText(t || "").width)) / uPlot.pxRatio;
    return Math.max(70, Math.ceil(widest + axis.ticks.size + axis.gap + 8));
  }

  // ---- page furniture --------------------------------------------------------------------

  function renderChips() {
    const box = $("#run-chips");
    box.textContent = "";
    for (const run of RUNS) {
      const st = info[run] ? info[run].status : "";
      const href = "/report?" + q({ run: run, lang: LANG });
      box.appendChild(
        el("span", { class: "run-chip", "data-run": run, "data-color": colorOf(run) }, [
          el("i", { style: "background:" + colorOf(run) }),
          el("b", { text: run }),
          document.createTextNode(" "),
          el("span", {
            class: "run-status rs-" + st,
            "data-status": st,
            text: T[st] || st,
            title: info[run] ? info[run].status_reason : null, // what set the status
          }),
          document.createTextNode(" "),
          el("span", { class: "hint", text: info[run] && info[run].last_step !== null ? fmt(T.step_n, { n: Number(info[run].last_step).toLocaleString("en-US") }) : "" }),
          document.createTextNode(" "),
          // how many of its logged names the registry knows (/api/run `names`): none says why the cards are empty
          el("span", { class: "hint names-recognised", text: info[run] && info[run].names ? fmt(T.names_recognised, { n: info[run].names.recognised, m: info[run].names.total }) : "" }),
          document.createTextNode(" "),
          el("a", { href: href, text: T.report }),
        ])
      );
    }
  }

  function renderToolbar() {
    const bar = $("#toolbar");
    const xsel = el("select", { id: "x-mode", "aria-label": T.x_axis }, [
      el("option", { value: "step", text: T.x_step }),
      el("option", { value: "wall", text: T.x_wall }),
      el("option", { value: "relative", text: T.x_relative }),
    ]);
    const slider = el("input", { id: "smoothing", type: "range", min: "0", max: "0.999", step: "0.001", value: String(state.smoothing) });
    const sval = el("output", { id: "smoothing-value", text: state.smoothing.toFixed(3) });
    xsel.value = state.xmode;
    const raw = el("input", { id: "show-raw", type: "checkbox", checked: true });
    const smooth = el("input", { id: "show-smooth", type: "checkbox", checked: true });
    const from = el("input", { id: "range-from", type: "number", min: "0", step: "1", placeholder: T.from });
    const to = el("input", { id: "range-to", type: "number", min: "0", step: "1", placeholder: T.to });
    const apply = el("button", { id: "range-apply", type: "button", text: T.apply });
    const reset = el("button", { id: "zoom-reset", type: "button", text: T.reset });
    const search = el("input", { id: "search", type: "search", placeholder: T.search, "aria-label": T.search, value: state.query });
    const cols = el("select", { id: "columns", "aria-label": T.columns }, COLUMNS.map((n) => el("option", { value: String(n), text: String(n) })));
    cols.value = String(state.columns);
    const theme = el("select", { id: "theme", "aria-label": T.theme }, THEMES.map((t) => el("option", { value: t, text: T["theme_" + t] })));
    theme.value = chosenTheme();
    if (state.from !== null) from.value = String(state.from);
    if (state.to !== null) to.value = String(state.to);
    bar.append(
      search,
      el("label", {}, [document.createTextNode(T.smoothing + " "), slider, document.createTextNode(" "), sval]),
      el("label", {}, [raw, document.createTextNode(" " + T.raw)]),
      el("label", {}, [smooth, document.createTextNode(" " + T.smoothed)]),
      el("label", {}, [document.createTextNode(T.x_axis + " "), xsel]),
      el("label", {}, [document.createTextNode(T.columns + " "), cols]),
      el("label", {}, [document.createTextNode(T.theme + " "), theme]),
      el("span", {}, [document.createTextNode(T.range + " "), from, document.createTextNode(" – "), to, document.createTextNode(" "), apply, document.createTextNode(" "), reset]),
      el("span", { id: "shown", class: "hint" }),
      el("span", { class: "hint", text: T.zoom_hint + "; " + fmt(T.points_note, { n: boot.points }) })
    );
    let pending = false;
    slider.addEventListener("input", () => {
      state.smoothing = Number(slider.value);
      sval.textContent = state.smoothing.toFixed(3);
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        redrawAll();
        toAddress();
        document.body.dataset.smoothingDrawn = String(state.smoothing);
      });
    });
    raw.addEventListener("change", () => {
      state.showRaw = raw.checked;
      redrawAll();
    });
    smooth.addEventListener("change", () => {
      state.showSmooth = smooth.checked;
      redrawAll();
    });
    xsel.addEventListener("change", () => {
      state.xmode = xsel.value;
      redrawAll();
      toAddress();
    });
    apply.addEventListener("click", () => {
      const a = from.value === "" ? null : Math.max(0, Math.floor(Number(from.value)));
      const b = to.value === "" ? null : Math.max(0, Math.ceil(Number(to.value)));
      if (a !== null && b !== null && a > b) {
        showError(T.range + ": " + a + " > " + b);
        return;
      }
      setRange(a, b);
    });
    reset.addEventListener("click", () => setRange(null, null));
    cols.addEventListener("change", () => {
      state.columns = Number(cols.value);
      applyColumns();
      toAddress();
    });
    theme.addEventListener("change", () => setTheme(theme.value));
    search.addEventListener("input", () => {
      state.query = search.value.trim().toLowerCase();
      applySearch();
      toAddress();
    });
  }

  function setRange(a, b) {
    state.from = a;
    state.to = b;
    $("#range-from").value = a === null ? "" : String(a);
    $("#range-to").value = b === null ? "" : String(b);
    toAddress();
    loadAllSeries().then(redrawAll);
  }

  // The config table (/api/run `settings`): hyperparameters first (what --config, the logs' own
  // words or the logged values say), then the context the diagnosis reads; a value the import
  // inferred is marked so. One column per run, a row per key any of them has.
  function renderConfig() {
    const rows = new Map(); // key -> {kind, cells: {run: setting}}
    for (const run of RUNS) {
      for (const st of (info[run] && info[run].settings) || []) {
        if (!rows.has(st.key)) rows.set(st.key, { kind: st.kind, order: rows.size, cells: {} });
        rows.get(st.key).cells[run] = st;
      }
    }
    const box = $("#config");
    box.textContent = "";
    if (!rows.size) {
      box.appendChild(el("p", { class: "hint", text: T.no_config }));
      return;
    }
    const head = el("tr", {}, [el("th", { text: T.key })].concat(RUNS.map((r) => el("th", { text: r, style: "color:" + colorOf(r) }))));
    const body = [];
    for (const kind of ["hyperparameter", "context"]) {
      const keys = Array.from(rows.entries()).filter(([, r]) => r.kind === kind);
      if (!keys.length) continue;
      body.push(el("tr", { class: "config-kind", "data-kind": kind }, [el("th", { colspan: String(RUNS.length + 1), text: T["settings_" + kind] })]));
      keys.sort((a, b) => a[1].order - b[1].order);
      for (const [key, r] of keys) {
        const cells = RUNS.map((run) => {
          const st = r.cells[run];
          if (!st) return el("td", { text: "–" });
          const marked = st.source === "inferred" || st.source === "logged";
          const mark = marked ? el("span", { class: "source hint", text: "(" + T["source_" + st.source] + ")" }) : null;
          return el("td", { "data-source": st.source, title: T["source_" + st.source + "_hint"] }, [document.createTextNode(st.value + (marked ? " " : "")), mark]);
        });
        body.push(el("tr", { "data-key": key, "data-kind": kind }, [el("th", {}, [el("code", { text: key })])].concat(cells)));
      }
    }
    box.appendChild(el("table", { class: "config", id: "config-table" }, [el("thead", {}, [head]), el("tbody", {}, body)]));
  }

  // ---- panels ----------------------------------------------------------------------------

  // One section per group: a heading button folds it away (kept in the address as `fold=`),
  // its charts in a grid of `state.columns` columns. The Pinned group exists while a chart is
  // pinned.
  function groupBox(group) {
    let box = $('.group[data-group="' + group + '"]');
    if (!box) {
      const toggle = el("button", { type: "button", class: "group-toggle", "aria-expanded": "true" }, [
        el("span", { class: "fold-mark", "aria-hidden": "true" }),
        el("span", { class: "group-title", text: GROUP_TITLE[group] }),
        el("span", { class: "group-count hint" }),
      ]);
      box = el("section", { class: "group", "data-group": group }, [el("h2", {}, [toggle]), el("div", { class: "group-panels" })]);
      const boxes = $("#panels");
      // Keep pinned, core, registered, bookkeeping, unregistered order whatever arrives first.
      const after = GROUPS.slice(GROUPS.indexOf(group) + 1).map((g) => $('.group[data-group="' + g + '"]')).find(Boolean);
      boxes.insertBefore(box, after || null);
      toggle.addEventListener("click", () => {
        if (state.collapsed.has(group)) state.collapsed.delete(group);
        else state.collapsed.add(group);
        showFolds();
        toAddress();
      });
      showFolds();
    }
    return $(".group-panels", box);
  }

  function showFolds() {
    for (const g of document.querySelectorAll(".group")) {
      const folded = state.collapsed.has(g.dataset.group);
      g.classList.toggle("folded", folded);
      $(".group-panels", g).hidden = folded;
      $(".group-toggle", g).setAttribute("aria-expanded", folded ? "false" : "true");
    }
    fitCharts(); // a group opened: its charts take their cells' width
  }

  function applyColumns() {
    $("#panels").style.setProperty("--cols", String(state.columns));
    $("#panels").dataset.columns = String(state.columns);
    fitCharts();
  }

  // A panel's place: the Pinned group in pinning order, else its own group in the API's order.
  function placePanel(panel) {
    const pinned = state.pinned.includes(panel.meta.field);
    const key = (p) => (state.pinned.includes(p.meta.field) ? state.pinned.indexOf(p.meta.field) : p.order);
    const grid = groupBox(pinned ? "pinned" : panel.meta.group);
    const next = Array.from(grid.children).find((c) => c !== panel.el && key(panels.get(c.dataset.field)) > key(panel));
    grid.insertBefore(panel.el, next || null);
    const pin = $(".pin", panel.el);
    pin.setAttribute("aria-pressed", pinned ? "true" : "false");
    pin.title = pinned ? T.unpin : T.pin;
    pin.textContent = (pinned ? "★ " : "☆ ") + (pinned ? T.pinned_short : T.pin_short);
    const empty = $('.group[data-group="pinned"]');
    if (empty && !$(".panel", empty)) empty.remove();
  }

  function togglePin(panel) {
    const field = panel.meta.field;
    if (state.pinned.includes(field)) state.pinned = state.pinned.filter((f) => f !== field);
    else state.pinned.push(field);
    placePanel(panel);
    applySearch();
    fitCharts();
    toAddress();
  }

  function ensurePanel(meta) {
    if (panels.has(meta.field)) return panels.get(meta.field);
    const title = meta.tooltip
      ? el("span", { class: "info", tabindex: "0" }, [document.createTextNode(meta.title + " "), el("sup", { text: "?" })])
      : el("span", { text: meta.title });
    if (meta.tooltip) title.insertAdjacentHTML("beforeend", meta.tooltip);
    const transforms = (meta.transforms || []).map(transformNote);
    const head = el("div", { class: "head" }, [
      title,
      el("code", { text: meta.field }),
      el("span", { class: "unit", "data-unit": meta.unit || "", text: unitLabel(meta.unit) }),
      transforms.length ? el("span", { class: "note", text: T.transform + ": " + transforms.join("; ") }) : null,
      // a framework's counter or clock: what it is and the framework file that says so
      meta.bookkeeping
        ? el("span", { class: "note bookkeeping", text: meta.bookkeeping.framework + ": " + meta.bookkeeping.meaning, title: meta.bookkeeping.source })
        : null,
    ]);
    const tools = el("div", { class: "tools" }, [
      el("label", { class: "log-y" }, [el("input", { type: "checkbox", class: "log-y-box", checked: state.logY.has(meta.field) }), document.createTextNode(" " + T.log_y)]),
      el("span", { class: "log-note", hidden: true }),
      el("button", { type: "button", class: "pin", "aria-pressed": "false" }),
      // every download of the chart in one menu: the PNG, then each run's CSV and JSON
      el("details", { class: "dl-menu" }, [
        el("summary", { text: T.download }),
        el("div", { class: "dl-list" }, [el("button", { type: "button", class: "png", title: T.png_hint, text: "PNG" }), el("div", { class: "downloads" })]),
      ]),
      el("span", { class: "lines-key hint" }),
      el("span", { class: "event-key" }),
    ]);
    const haystack = [meta.field, meta.title, meta.metric || ""].concat(meta.aliases || []).join(" ").toLowerCase();
    const node = el("article", { class: "panel", "data-field": meta.field, "data-group": meta.group, "data-search": haystack }, [
      el("figure", { class: "chart-box" }, [head, tools, el("div", { class: "chart" }, [el("div", { class: "empty", text: T.loading })])]),
      el("div", { class: "cards" }),
    ]);
    const panel = { el: node, meta: meta, data: {}, order: panels.size };
    panels.set(meta.field, panel);
    placePanel(panel);
    $(".log-y-box", node).addEventListener("change", (e) => {
      if (e.target.checked) state.logY.add(meta.field);
      else state.logY.delete(meta.field);
      draw(panel);
      toAddress();
    });
    $(".pin", node).addEventListener("click", () => togglePin(panel));
    $(".png", node).addEventListener("click", () => {
      downloadPNG(panel);
      $(".dl-menu", node).open = false;
    });
    return panel;
  }

  // The menu's rows: a run (in its colour), its CSV and JSON of the step range shown.
  function downloadLinks(panel) {
    const box = $(".downloads", panel.el);
    box.textContent = "";
    for (const run of RUNS.filter((r) => fields.get(panel.meta.field).runs.has(r))) {
      const links = ["csv", "json"].map((format) => {
        const href = "/api/field_series?" + q({ run: run, field: panel.meta.field, format: format, download: "1", from: state.from, to: state.to, points: boot.max_points });
        return el("a", { class: "dl", href: href, download: "", "data-run": run, "data-format": format, text: format.toUpperCase() });
      });
      box.appendChild(el("div", { class: "dl-run", "data-run": run }, [el("b", { class: "run-name", text: run, style: "color:" + colorOf(run) })].concat(links)));
    }
  }

  function applySearch() {
    const terms = state.query.split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const panel of panels.values()) {
      const hay = panel.el.dataset.search;
      const ok = terms.every((t) => hay.includes(t));
      panel.el.hidden = !ok;
      if (ok) shown += 1;
    }
    for (const g of document.querySelectorAll(".group")) {
      const all = Array.from(g.querySelectorAll(".panel"));
      const visible = all.filter((p) => !p.hidden).length;
      g.hidden = visible === 0;
      $(".group-count", g).textContent = "(" + (visible === all.length ? all.length : visible + "/" + all.length) + ")";
    }
    $("#shown").textContent = fmt(T.shown, { n: shown, total: panels.size }) + (shown === 0 && panels.size ? " — " + T.no_match : "");
  }

  // ---- data ------------------------------------------------------------------------------

  async function loadInfo() {
    for (const run of RUNS) info[run] = await getJSON("/api/run?" + q({ run: run }));
    renderChips();
  }

  async function loadFields() {
    for (const run of RUNS) {
      const body = await getJSON("/api/fields?" + q({ run: run, lang: LANG }));
      for (const meta of body.fields) {
        if (!fields.has(meta.field)) fields.set(meta.field, { meta: meta, runs: new Set(), metas: {} });
        fields.get(meta.field).runs.add(run);
        fields.get(meta.field).metas[run] = meta; // each run's own transforms (its framework's)
      }
    }
    // Panels in the order the API gives (core, registered, bookkeeping, unregistered), first run first.
    for (const { meta } of fields.values()) downloadLinks(ensurePanel(meta));
    applySearch();
  }

  async function pool(tasks, width) {
    let next = 0;
    async function worker() {
      while (next < tasks.length) {
        const i = next++;
        await tasks[i]();
      }
    }
    await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, worker));
  }

  async function loadAllSeries() {
    const tasks = [];
    for (const [field, entry] of fields) {
      const panel = panels.get(field);
      for (const run of entry.runs) {
        tasks.push(async () => {
          panel.data[run] = await getJSON("/api/field_series?" + q({ run: run, field: field, points: boot.points, from: state.from, to: state.to }));
        });
      }
      downloadLinks(panel);
    }
    await pool(tasks, 4);
  }

  // The report's card of each run, folded to one status line under the chart (its status badge
  // and headline: the evidence of the card's status, or the first clause of its reading), the
  // whole card opened on click; compared runs' lines sit side by side, one column per run.
  function foldCard(run, html, wasOpen) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const card = tpl.content.querySelector("article.card");
    const m = card ? /\bst-border-(\S+)/.exec(card.className) : null;
    const status = m ? m[1] : "no_data";
    const badge = card ? card.querySelector(".card-head .status") : null;
    const evidence = card ? Array.from(card.querySelectorAll("details li")).find((li) => li.querySelector(".st-" + status)) : null;
    const reading = card ? card.querySelector(".reading") : null;
    let headline = "";
    if (status !== "ok" && evidence) headline = evidence.textContent.replace(evidence.querySelector(".status").textContent, "").trim();
    else if (reading) {
      // "Policy KL (old vs new) = 0.005 nats at step 399, …; CV …": the first clause, without
      // the title the chart already shows
      headline = reading.textContent.split(/[;；]/)[0].trim();
      const named = card.querySelector(".card-head b");
      const title = named ? named.textContent.trim() : "";
      if (title && headline.startsWith(title + " = ")) headline = headline.slice(title.length + 3);
    }
    const summary = el("summary", { class: "status-line" }, [
      badge ? badge.cloneNode(true) : null,
      RUNS.length > 1 ? el("b", { class: "run-name", text: run, style: "color:" + colorOf(run) }) : null,
      el("span", { class: "headline", text: headline, title: headline }),
    ]);
    const fold = el("details", { class: "card-fold", "data-run": run, "data-status": status }, [summary]);
    if (wasOpen) fold.open = true;
    fold.appendChild(tpl.content);
    return fold;
  }

  async function loadCards() {
    for (const run of RUNS) {
      const body = await getJSON("/api/card_html?" + q({ run: run, lang: LANG }));
      for (const panel of panels.values()) {
        const html = panel.meta.metric && panel.meta.metric === panel.meta.field ? body.cards[panel.meta.field] : null;
        const box = $(".cards", panel.el);
        const old = Array.from(box.children).find((c) => c.dataset.run === run);
        const wasOpen = old ? old.open : false;
        if (!html) {
          if (old) old.remove();
          continue;
        }
        const fold = foldCard(run, html, wasOpen);
        if (old) box.replaceChild(fold, old);
        else {
          // run order, whichever card arrives first
          const after = Array.from(box.children).find((c) => RUNS.indexOf(c.dataset.run) > RUNS.indexOf(run));
          box.insertBefore(fold, after || null);
        }
      }
    }
  }

  // A kind of event logged EVENT_RUN times or more (a health event at every step while a run is
  // non-finite) is one row of the table, with its count and step range; the events themselves
  // fold inside it. The table shows its first EVENTS_SHOWN rows, one line each (the full text on
  // hover), and folds the rest behind a button: a run with many events keeps a short page.
  const EVENT_RUN = 10;
  const EVENTS_SHOWN = 5;

  function stepText(step) {
    return Number(step).toLocaleString("en-US");
  }

  function eventEntries(list) {
    const byKind = new Map();
    for (const ev of list) {
      if (!byKind.has(ev.kind)) byKind.set(ev.kind, []);
      byKind.get(ev.kind).push(ev);
    }
    const out = [];
    for (const [kind, items] of byKind) {
      if (items.length >= EVENT_RUN) out.push({ kind: kind, step: items[0].step, items: items });
      else for (const ev of items) out.push({ kind: kind, step: ev.step, items: [ev] });
    }
    return out.sort((a, b) => a.step - b.step);
  }

  async function loadEvents() {
    for (const run of RUNS) events[run] = (await getJSON("/api/events?" + q({ run: run }))).events;
    const rows = [];
    for (const run of RUNS) {
      const cell = () => el("td", { text: run, style: "color:" + colorOf(run) });
      for (const entry of eventEntries(events[run])) {
        const items = entry.items;
        const first = items[0];
        if (items.length === 1) {
          rows.push(
            el("tr", { "data-run": run, "data-step": String(first.step) }, [
              cell(),
              el("td", { text: stepText(first.step) }),
              el("td", { text: entry.kind }),
              el("td", { class: "what", title: first.text, text: first.text }),
            ])
          );
          continue;
        }
        const lastEv = items[items.length - 1];
        const list = el("ol", { class: "event-list" }, items.map((ev) => el("li", { text: stepText(ev.step) + ": " + ev.text })));
        const label = fmt(T.event_run, { n: items.length.toLocaleString("en-US"), kind: entry.kind }) + " — " + first.text;
        rows.push(
          el("tr", { "data-run": run, "data-step": String(first.step), "data-count": String(items.length) }, [
            cell(),
            el("td", { text: stepText(first.step) + "–" + stepText(lastEv.step) }),
            el("td", { text: entry.kind }),
            el("td", { class: "what" }, [el("details", { class: "event-run" }, [el("summary", { title: label, text: label }), list])]),
          ])
        );
      }
    }
    const box = $("#events");
    box.textContent = "";
    if (!rows.length) {
      box.appendChild(el("p", { class: "hint", text: T.no_events }));
      return;
    }
    const head = el("tr", {}, [T.run, T.x_step, T.kind, T.what].map((t) => el("th", { text: t })));
    const shown = el("tbody", {}, rows.slice(0, EVENTS_SHOWN));
    const table = el("table", { class: "config events", id: "events-table" }, [el("thead", {}, [head]), shown]);
    if (rows.length > EVENTS_SHOWN) {
      const rest = el("tbody", { class: "more-events", hidden: true }, rows.slice(EVENTS_SHOWN));
      const button = el("button", { type: "button", class: "show-events", text: fmt(T.events_more, { n: rows.length - EVENTS_SHOWN }) });
      button.addEventListener("click", () => {
        rest.hidden = !rest.hidden;
        button.textContent = rest.hidden ? fmt(T.events_more, { n: rows.length - EVENTS_SHOWN }) : T.events_fewer;
      });
      table.appendChild(rest);
      box.appendChild(table);
      box.appendChild(button);
      return;
    }
    box.appendChild(table);
  }

  // Where an event sits on the current x axis: its step, or the wall time of the nearest point.
  function eventX(run, s, step) {
    if (state.xmode === "step") return step;
    const xs = xsOf(run, s);
    if (!xs || !s.steps.length) return null;
    let lo = 0;
    let hi = s.steps.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s.steps[mid] < step) lo = mid + 1;
      else hi = mid;
    }
    return xs[lo];
  }

  // Events as dashed vertical lines in the run's colour (as the report's markers). Where they
  // crowd (marks closer than MARK_GAP pixels, MARK_CROWD of them or more: a health event at every
  // step), they are one strip along the top edge of the plot with their count, so the lines and
  // the healthy band under them stay visible; the key beside the chart's tools says which.
  const MARK_GAP = 4;
  const MARK_CROWD = 3;
  const STRIP = 6;

  function eventHook(panel, runs) {
    return (u) => {
      const ctx = u.ctx;
      const [x0, x1] = [u.scales.x.min, u.scales.x.max];
      let lines = 0;
      let strips = 0;
      let shown = 0;
      const keyLines = new Set();
      const keyStrips = [];
      let row = 0; // strips of different kinds (and runs) stack down from the top edge
      ctx.save();
      ctx.lineWidth = 1;
      for (const run of runs) {
        const s = panel.data[run];
        const marks = [];
        for (const ev of events[run] || []) {
          const x = eventX(run, s, ev.step);
          if (x === null || x < x0 || x > x1) continue;
          marks.push({ px: u.valToPos(x, "x", true), ev: ev });
        }
        marks.sort((a, b) => a.px - b.px);
        // clustered kind by kind: a checkpoint among per-step health events stays a line
        const kinds = new Map();
        for (const m of marks) {
          if (!kinds.has(m.ev.kind)) kinds.set(m.ev.kind, []);
          const clusters = kinds.get(m.ev.kind);
          const last = clusters[clusters.length - 1];
          if (last && m.px - last[last.length - 1].px < MARK_GAP * devicePixelRatio) last.push(m);
          else clusters.push([m]);
        }
        ctx.strokeStyle = colorOf(run);
        ctx.fillStyle = colorOf(run);
        for (const [kind, clusters] of kinds) {
          let stripped = false;
          for (const cluster of clusters) {
            shown += cluster.length;
            if (cluster.length < MARK_CROWD) {
              ctx.setLineDash([4, 4]);
              for (const m of cluster) {
                const px = Math.round(m.px) + 0.5;
                ctx.beginPath();
                ctx.moveTo(px, u.bbox.top);
                ctx.lineTo(px, u.bbox.top + u.bbox.height);
                ctx.stroke();
                lines += 1;
                keyLines.add(kind);
              }
              continue;
            }
            const left = Math.round(cluster[0].px);
            const width = Math.max(2, Math.round(cluster[cluster.length - 1].px) - left);
            const strip = STRIP * devicePixelRatio;
            const top = u.bbox.top + row * (strip + 12 * devicePixelRatio);
            ctx.setLineDash([]);
            ctx.globalAlpha = 0.55;
            ctx.fillRect(left, top, width, strip);
            ctx.globalAlpha = 1;
            ctx.font = Math.round(10 * devicePixelRatio) + "px sans-serif";
            ctx.textBaseline = "top";
            ctx.fillText("×" + cluster.length.toLocaleString("en-US"), left, top + strip + 1);
            strips += 1;
            stripped = true;
            keyStrips.push(fmt(T.event_strip, { n: cluster.length.toLocaleString("en-US"), kind: kind }));
          }
          if (stripped) row += 1;
        }
      }
      ctx.restore();
      panel.el.dataset.events = String(shown);
      panel.el.dataset.eventLines = String(lines);
      panel.el.dataset.eventStrips = String(strips);
      const key = $(".event-key", panel.el);
      if (key) {
        const parts = [];
        if (keyLines.size) parts.push(fmt(T.event_lines, { kinds: Array.from(keyLines).join(", ") }));
        const text = parts.concat(keyStrips).join(" · ");
        if (key.textContent !== text) {
          key.textContent = text;
          key.title = text;
        }
      }
    };
  }

  // The registry's healthy band of the first run drawn, shaded under the lines (as on the report):
  // one quad per pair of neighbouring points that both have a band; an open edge runs to the
  // plot's edge.
  function bandHook(panel, run) {
    return (u) => {
      const s = panel.data[run];
      let drawn = 0;
      if (s && s.band_low) {
        const xs = tableOf(run, s);
        const ctx = u.ctx;
        const top = u.bbox.top;
        const bottom = u.bbox.top + u.bbox.height;
        const y = (v, open) => (v === null ? open : Math.min(bottom, Math.max(top, u.valToPos(v, "y", true))));
        ctx.save();
        ctx.fillStyle = themeColors().band;
        ctx.beginPath();
        for (let i = 0; xs && i + 1 < xs[0].length; i++) {
          const lo0 = s.band_low[i], hi0 = s.band_high[i], lo1 = s.band_low[i + 1], hi1 = s.band_high[i + 1];
          if ((lo0 === null && hi0 === null) || (lo1 === null && hi1 === null)) continue;
          const xa = u.valToPos(xs[0][i], "x", true);
          const xb = u.valToPos(xs[0][i + 1], "x", true);
          ctx.moveTo(xa, y(hi0, top));
          ctx.lineTo(xb, y(hi1, top));
          ctx.lineTo(xb, y(lo1, bottom));
          ctx.lineTo(xa, y(lo0, bottom));
          ctx.closePath();
          drawn += 1;
        }
        ctx.fill();
        ctx.restore();
      }
      panel.el.dataset.bands = String(drawn);
    };
  }

  // ---- charts ----------------------------------------------------------------------------

  function xsOf(run, s) {
    if (state.xmode === "step") return s.steps;
    if (s.wall_times.some((w) => w === null)) return null;
    if (state.xmode === "wall") return s.wall_times;
    const started = info[run] && info[run].started;
    const t0 = started !== null && started !== undefined && started <= s.wall_times[0] ? started : s.wall_times[0];
    return s.wall_times.map((w) => w - t0);
  }

  function tableOf(run, s) {
    const xs = xsOf(run, s);
    if (!xs || !xs.length) return null;
    const x = [];
    const y = [];
    let last = -Infinity;
    for (let i = 0; i < xs.length; i++) {
      // Steps logged within the clock's resolution share a wall time: nudge them a microsecond
      // apart so each point keeps its place (uPlot needs increasing x).
      const xi = xs[i] > last ? xs[i] : last + 1e-6;
      last = xi;
      x.push(xi);
      y.push(s.values[i]);
    }
    return [x, y, ema(y, state.smoothing)];
  }

  // Whether the panel is drawn on a log y axis and what that leaves out. Only values above 0
  // have a place on it: with none (a loss that is always negative) the box is disabled and the
  // chart stays linear, with a note if the address asked for log; with some, those at or below
  // 0 (raw, and smoothed where the average dips to them) become gaps and the note counts them.
  function logPlan(panel, tables) {
    let above = 0;
    let atOrBelow = 0;
    for (const t of tables) {
      for (const v of t[1]) {
        if (v === null || !Number.isFinite(v)) continue;
        if (v > 0) above += 1;
        else atOrBelow += 1;
      }
    }
    const wanted = state.logY.has(panel.meta.field);
    const on = wanted && above > 0;
    if (on && atOrBelow) {
      for (const t of tables) for (const k of [1, 2]) t[k] = t[k].map((v) => (v !== null && v <= 0 ? null : v));
    }
    const box = $(".log-y-box", panel.el);
    box.checked = wanted;
    box.disabled = above === 0 && tables.length > 0;
    box.parentNode.title = box.disabled ? T.log_needs_positive : "";
    const note = $(".log-note", panel.el);
    note.textContent = wanted && !on && tables.length ? T.log_needs_positive : on && atOrBelow ? fmt(T.log_left_out, { n: atOrBelow }) : "";
    note.hidden = note.textContent === "";
    panel.el.dataset.scale = on ? "log" : "linear";
    return { on: on };
  }

  function draw(panel) {
    const field = panel.meta.field;
    const box = $(".chart", panel.el);
    if (charts.has(field)) {
      charts.get(field).destroy();
      charts.delete(field);
    }
    box.textContent = "";
    const runs = [];
    const tables = [];
    let points = 0;
    let lastStep = null;
    for (const run of RUNS) {
      const s = panel.data[run];
      if (!s) continue;
      points += s.points;
      if (s.steps.length) lastStep = Math.max(lastStep === null ? -Infinity : lastStep, s.steps[s.steps.length - 1]);
      const t = tableOf(run, s);
      if (t && t[0].length) {
        runs.push(run);
        tables.push(t);
      }
    }
    panel.el.dataset.points = String(points);
    panel.el.dataset.lastStep = lastStep === null ? "" : String(lastStep);
    // the two lines of each run, named once for the chart (the legend has one row per run)
    const key = [state.showSmooth ? fmt(T.line_smoothed, { s: state.smoothing.toFixed(3) }) : null, state.showRaw ? T.line_raw : null].filter(Boolean).join(" · ");
    $(".lines-key", panel.el).textContent = key;
    const log = logPlan(panel, tables);
    if (!tables.length) {
      box.appendChild(el("div", { class: "empty", text: T.no_data }));
      return;
    }
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    const series = [{ label: state.xmode === "step" ? T.x_step : state.xmode === "wall" ? T.x_wall : T.x_relative, value: state.xmode === "relative" ? (u, v) => (v === null ? "–" : duration(v)) : undefined }];
    // The legend's readout: uPlot calls a series' value(u, rawValue, seriesIdx, dataIdx) for each
    // cursor move (dataIdx null when the cursor is off the plot: "--" as uPlot's own default).
    // Where the run's framework logged the field under a transformed name, the logged value
    // follows the shown one: "0.12 (sb3 logged 0.24)".
    const readout = (transforms) => (u, v, sidx, idx) => {
      if (idx === null) return "--";
      const shown = fmtValue(v);
      const logged = transforms.map((t) => ({ t: t, v: loggedValue(t, v) })).filter((x) => x.v !== null);
      if (!logged.length) return shown;
      // one entry per distinct reading (SB3's value_loss and critic_loss aliases say the same)
      const said = Array.from(new Set(logged.map((x) => fmt(T.logged_as, { framework: x.t.framework, v: fmtValue(x.v) }))));
      return shown + " (" + said.join("; ") + ")";
    };
    const metas = fields.get(field).metas;
    // The legend has one row per run, named after it: its smoothed value, then the raw one
    // ("0.31 · raw 0.308 (sb3 logged 0.616)"). Each run's raw series keeps a legend row of its
    // own, hidden while the smoothed lines are shown (legendRows).
    const rawRead = (u, sidx, idx, ts) => readout(ts)(u, u.data[sidx][idx], sidx, idx);
    runs.forEach((run, k) => {
      const c = colorOf(run);
      const ts = (metas[run] && metas[run].transforms) || [];
      const smooth = readout(ts.filter((t) => t.kind !== "reciprocal"));
      const rawIdx = 1 + 2 * k;
      series.push({ label: run + " " + T.raw, stroke: c + "59", width: 1, show: state.showRaw, spanGaps: true, points: { show: false }, value: readout(ts) });
      series.push({
        label: run,
        stroke: c,
        width: 2,
        show: state.showSmooth,
        spanGaps: true,
        points: { show: false },
        value: (u, v, sidx, idx) => (idx === null ? "--" : smooth(u, v, sidx, idx) + " · " + T.raw + " " + rawRead(u, rawIdx, idx, ts)),
      });
    });
    const colors = themeColors();
    const axisLook = { stroke: colors.muted, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid, width: 1 } };
    const stepMode = state.xmode === "step";
    const opts = {
      width: chartWidth(box),
      height: CHART_HEIGHT,
      series: series,
      scales: {
        x: { time: state.xmode === "wall" },
        y: log.on ? { distr: 3, log: 10, range: yRange } : { range: yRange },
      },
      axes: [
        Object.assign({ values: state.xmode === "relative" ? (u, splits) => splits.map(duration) : undefined }, axisLook),
        Object.assign({}, axisLook, {
          size: ySize,
          // uPlot's default log splits (logAxisSplits: 1..9 × each decade) and filter
          // (log10AxisValsFilt) stay; linear ticks step by 1, 2 or 5 × 10^k.
          incrs: log.on ? undefined : Y_INCRS,
          values: log.on ? (u, splits) => logTicks(splits) : (u, splits, i, space, incr) => linearTicks(splits, incr),
        }),
      ],
      cursor: { drag: { x: true, y: false, setScale: !stepMode } },
      legend: { live: true },
      hooks: {
        setSeries: [mirrorRaw],
        drawClear: [bandHook(panel, runs[0])],
        draw: [eventHook(panel, runs)],
        setSelect: [
          (u) => {
            if (!stepMode || u.select.width < 3) return;
            const a = u.posToVal(u.select.left, "x");
            const b = u.posToVal(u.select.left + u.select.width, "x");
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            setRange(Math.max(0, Math.floor(a)), Math.max(0, Math.ceil(b)));
          },
        ],
      },
    };
    const chart = new uPlot(opts, data, box);
    chart.root.dataset.runs = runs.join("\n");
    legendRows(chart);
    charts.set(field, chart);
  }

  // One legend row per run: the smoothed series' row (named after the run, reading both
  // values) while smoothed lines are shown, else the raw series' row; a click on a run's row
  // shows or hides both its lines (uPlot's setSeries hook, after it toggled the smoothed one).
  function legendRows(u) {
    const rows = u.root.querySelectorAll(".u-legend tr.u-series");
    rows.forEach((tr, i) => {
      if (i === 0) return;
      const raw = i % 2 === 1;
      tr.classList.add(raw ? "raw-row" : "run-row");
      tr.hidden = raw === state.showSmooth;
    });
  }

  function mirrorRaw(u, sidx) {
    if (sidx === null || sidx < 2 || sidx % 2 !== 0) return;
    const shown = u.series[sidx].show;
    if (u.series[sidx - 1].show !== (shown && state.showRaw)) u.setSeries(sidx - 1, { show: shown && state.showRaw }, false);
  }

  function redrawAll() {
    for (const panel of panels.values()) draw(panel);
  }

  // ---- PNG -------------------------------------------------------------------------------
  // The chart as drawn (uPlot's canvas: axes, band, lines and event marks, at the screen's pixel
  // ratio), with the panel's title above and the legend's series below, on the page's
  // background; downloaded through an <a download> (the CSP allows data: images).

  function chartImage(panel) {
    const u = charts.get(panel.meta.field);
    if (!u) return null;
    const src = u.ctx.canvas;
    const r = uPlot.pxRatio;
    const colors = themeColors();
    const family = getComputedStyle(document.body).fontFamily;
    const pad = Math.round(8 * r);
    const titleH = Math.round(26 * r);
    const rowH = Math.round(18 * r);
    // the legend's rows: one per run (the smoothed series, named after the run)
    const shown = u.series.map((s, i) => ({ s: s, i: i })).filter((x) => x.i > 0 && x.i % 2 === 0 && x.s.show);
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = 12 * r + "px " + family;
    const items = shown.map((x) => ({ label: x.s.label, color: colorOf(x.s.label), w: Math.ceil(measure.measureText(x.s.label).width) + Math.round(30 * r) }));
    // the legend's items in rows as wide as the chart
    const rows = [[]];
    let used = pad;
    for (const it of items) {
      if (used + it.w > src.width - pad && rows[rows.length - 1].length) {
        rows.push([]);
        used = pad;
      }
      rows[rows.length - 1].push(it);
      used += it.w;
    }
    const out = document.createElement("canvas");
    out.width = src.width;
    out.height = titleH + src.height + rows.length * rowH + pad;
    const ctx = out.getContext("2d");
    ctx.fillStyle = colors.bg;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.fillStyle = colors.fg;
    ctx.textBaseline = "middle";
    ctx.font = "600 " + 14 * r + "px " + family;
    const unit = unitLabel(panel.meta.unit);
    const runs = RUNS.filter((run) => panel.data[run]);
    const title = panel.meta.title + " · " + panel.meta.field + (unit ? " (" + unit + ")" : "") + " · " + runs.join(", ");
    ctx.fillText(title, pad, titleH / 2, out.width - 2 * pad);
    ctx.drawImage(src, 0, titleH);
    ctx.font = 12 * r + "px " + family;
    rows.forEach((row, k) => {
      let x = pad;
      const y = titleH + src.height + k * rowH + rowH / 2;
      for (const it of row) {
        ctx.strokeStyle = it.color;
        ctx.lineWidth = 3 * r;
        ctx.beginPath();
        ctx.moveTo(x, y);
        ctx.lineTo(x + 18 * r, y);
        ctx.stroke();
        ctx.fillStyle = colors.fg;
        ctx.fillText(it.label, x + 24 * r, y);
        x += it.w;
      }
    });
    return out;
  }

  function downloadPNG(panel) {
    const image = chartImage(panel);
    if (!image) return;
    const runs = RUNS.filter((run) => panel.data[run]).join("+");
    const name = (runs + "__" + panel.meta.field).replace(/[^A-Za-z0-9._+-]/g, "_").slice(0, 150) + ".png";
    const a = el("a", { href: image.toDataURL("image/png"), download: name, hidden: true });
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  // ---- live refresh ----------------------------------------------------------------------

  const anyLive = () => RUNS.some((r) => info[r] && info[r].status === "live");

  function liveState() {
    const live = anyLive();
    const p = $("#live-state");
    p.textContent = live ? fmt(T.refreshing, { s: boot.refresh_ms / 1000 }) : T.not_live;
    p.dataset.live = live ? "1" : "0";
    if (!live && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
    if (live && timer === null) timer = setInterval(tick, boot.refresh_ms);
  }

  async function tick() {
    if (ticking) return;
    ticking = true;
    try {
      await loadInfo();
      await loadFields();
      await loadEvents();
      await loadAllSeries();
      redrawAll();
      await loadCards();
      liveState();
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || "0") + 1);
    } catch (e) {
      showError(T.load_error + ": " + e.message);
    } finally {
      ticking = false;
    }
  }

  async function start() {
    markTheme();
    renderToolbar();
    applyColumns();
    try {
      await loadInfo();
      renderConfig();
      await loadFields();
      await loadEvents();
      await loadAllSeries();
      redrawAll();
      await loadCards();
      liveState();
      document.body.dataset.ready = "1";
    } catch (e) {
      showError(T.load_error + ": " + e.message);
    }
  }

  // A chart fills its grid cell; a cell not laid out (its group folded) keeps the last width.
  function chartWidth(box) {
    return Math.max(260, box.clientWidth || 600);
  }

  function fitCharts() {
    for (const [field, chart] of charts) {
      const box = $(".chart", panels.get(field).el);
      if (!box.clientWidth) continue;
      const width = chartWidth(box);
      if (width !== chart.width) chart.setSize({ width: width, height: CHART_HEIGHT });
    }
  }

  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(fitCharts, 150);
  });
  systemDark.addEventListener("change", () => {
    markTheme();
    if (chosenTheme() === "auto") redrawAll();
  });

  // For tests and the curious: the charts and the page state.
  window.rlvitalsDash = { charts: charts, state: state, info: info, chartImage: (field) => chartImage(panels.get(field)) };
  start();
})();
