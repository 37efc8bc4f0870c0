"""The report's page skeleton, stylesheet and script, as Python strings (all inline)."""

from __future__ import annotations

__all__ = ["PAGE", "SCRIPT", "STYLE"]

# Filled with str.format: lang, title, style, script, body (all already escaped or trusted).
PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-lang="{lang}">
{body}
<script>{script}</script>
</body>
</html>
"""

STYLE = """
:root { --fg:#1d2330; --muted:#5b6473; --line:#d9dde5; --bg:#ffffff; --panel:#f7f8fa;
  --ok:#2e7d32; --watch:#b58900; --warning:#d9730d; --critical:#c62828; --nodata:#8a93a3; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 16px 24px 48px; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans", "WenQuanYi Micro Hei",
  "Microsoft YaHei", "PingFang SC", sans-serif; }
body[data-lang="en"] .l-zh, body[data-lang="zh"] .l-en { display: none !important; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid var(--line); }
h4 { margin: 0 0 6px; font-size: 14px; } h5 { margin: 8px 0 2px; font-size: 12px; text-transform: uppercase; color: var(--muted); }
header p { margin: 4px 0; color: var(--muted); }
code { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; background: var(--panel); padding: 0 3px; border-radius: 3px; }
.toggle { float: right; margin-top: -34px; }
.toggle button { border: 1px solid var(--line); background: var(--panel); padding: 4px 10px; cursor: pointer; font: inherit; }
.toggle button.active { background: var(--fg); color: #fff; }
.overview { display: flex; flex-wrap: wrap; gap: 6px 14px; }
.overview a.ov { color: var(--fg); text-decoration: none; white-space: nowrap; }
.status { display: inline-block; min-width: 62px; text-align: center; border-radius: 9px; padding: 0 7px;
  font-size: 11px; font-weight: 600; color: #fff; background: var(--nodata); text-transform: uppercase; }
.st-ok { background: var(--ok); } .st-watch { background: var(--watch); }
.st-warning { background: var(--warning); } .st-critical { background: var(--critical); }
.row { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; margin: 0 0 18px;
  padding-bottom: 14px; border-bottom: 1px dashed var(--line); }
@media (max-width: 900px) { .row { grid-template-columns: 1fr; } }
figure.chart-box { margin: 0; position: relative; }
figcaption { font-weight: 600; margin-bottom: 4px; display: flex; flex-wrap: wrap; gap: 4px 16px; }
.legend-item i { display: inline-block; width: 18px; height: 4px; margin-right: 6px; vertical-align: middle; border-radius: 2px; }
.info { position: relative; cursor: help; border-bottom: 1px dotted var(--muted); }
.info sup { color: var(--muted); }
.tip { display: none; position: absolute; z-index: 20; left: 0; top: 22px; width: min(560px, 80vw);
  background: #fff; border: 1px solid var(--line); box-shadow: 0 6px 24px rgba(0,0,0,.15); padding: 10px 12px;
  font-weight: 400; font-size: 12.5px; }
.tip ul { margin: 2px 0; padding-left: 18px; } .tip p { margin: 2px 0; }
.info:hover .tip, .info:focus .tip, .info:focus-within .tip { display: block; }
svg.chart { width: 100%; height: auto; display: block; font-size: 11px; }
svg .plot { fill: #fff; stroke: var(--line); }
svg .grid { stroke: #eef0f4; stroke-width: 1; }
svg .tick { fill: var(--muted); }
svg .axis-label { fill: var(--fg); font-size: 12px; }
svg .band { fill: #43a047; fill-opacity: .12; }
svg .stage { stroke: #9aa3b2; stroke-dasharray: 4 4; }
svg .stage-label { fill: #7a8394; font-size: 10px; }
svg .event { stroke: #6a4fb3; stroke-width: 1.2; stroke-dasharray: 2 3; }
svg .event-span { fill: #c62828; fill-opacity: .10; }
svg .ev-resume, svg .ev-exception { stroke: #c62828; stroke-dasharray: none; }
svg path.raw, svg path.smooth { fill: none; stroke-linejoin: round; stroke-linecap: round; }
svg .cursor { stroke: #333; stroke-width: .8; }
.readout { min-height: 18px; font-size: 12px; color: var(--muted); }
.readout b { color: var(--fg); }
.cards { display: flex; flex-direction: column; gap: 10px; }
.card { border: 1px solid var(--line); border-left-width: 5px; border-radius: 4px; padding: 8px 10px; background: var(--panel); }
.st-border-ok { border-left-color: var(--ok); } .st-border-watch { border-left-color: var(--watch); }
.st-border-warning { border-left-color: var(--warning); } .st-border-critical { border-left-color: var(--critical); }
.st-border-no_data { border-left-color: var(--nodata); }
.card dl { display: grid; grid-template-columns: auto 1fr; gap: 0 10px; margin: 6px 0; font-size: 12.5px; }
.card dt { color: var(--muted); } .card dd { margin: 0; }
.card .reading { font-size: 12.5px; margin: 6px 0; }
.card ul { margin: 2px 0; padding-left: 18px; font-size: 12.5px; }
.card details { font-size: 12px; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
.config span { display: inline-block; margin: 0 12px 4px 0; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
"""

SCRIPT = """
(function () {
  "use strict";
  function setLang(lang) {
    document.body.setAttribute("data-lang", lang);
    document.documentElement.setAttribute("lang", lang);
    var buttons = document.querySelectorAll("[data-set-lang]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].classList.toggle("active", buttons[i].getAttribute("data-set-lang") === lang);
    }
  }
  var buttons = document.querySelectorAll("[data-set-lang]");
  for (var i = 0; i < buttons.length; i++) {
    buttons[i].addEventListener("click", function (ev) {
      setLang(ev.currentTarget.getAttribute("data-set-lang"));
    });
  }
  if (buttons.length) { setLang(document.body.getAttribute("data-lang") || "en"); }

  function nearest(steps, step) {
    var lo = 0, hi = steps.length - 1;
    if (hi < 0) { return -1; }
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (steps[mid] < step) { lo = mid; } else { hi = mid; }
    }
    return Math.abs(steps[lo] - step) <= Math.abs(steps[hi] - step) ? lo : hi;
  }
  function num(v) {
    if (v === null || v === undefined) { return "\\u2013"; }
    var a = Math.abs(v);
    return (a !== 0 && (a >= 1e5 || a < 1e-3)) ? v.toExponential(2) : String(+v.toPrecision(4));
  }
  var boxes = document.querySelectorAll(".chart-box");
  Array.prototype.forEach.call(boxes, function (box) {
    var svg = box.querySelector("svg.chart");
    var holder = box.querySelector("script.series-data");
    var out = box.querySelector(".readout");
    if (!svg || !holder || !out) { return; }
    var data = JSON.parse(holder.textContent);
    var cursor = svg.querySelector(".cursor");
    var x0 = +svg.getAttribute("data-x0"), x1 = +svg.getAttribute("data-x1");
    var p0 = +svg.getAttribute("data-px0"), p1 = +svg.getAttribute("data-px1");
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var vb = svg.viewBox.baseVal;
      var px = (ev.clientX - r.left) / r.width * vb.width;
      if (px < p0 || px > p1) { return; }
      var step = x0 + (px - p0) / (p1 - p0) * (x1 - x0);
      while (out.firstChild) { out.removeChild(out.firstChild); }
      data.forEach(function (s, k) {
        var i = nearest(s.steps, step);
        if (i < 0) { return; }
        if (k > 0) { out.appendChild(document.createTextNode(" \u00b7 ")); }
        var name = document.createElement("b");
        name.style.color = s.color;
        name.textContent = s.metric;
        out.appendChild(name);
        out.appendChild(document.createTextNode(" @ " + s.steps[i] + ": " + num(s.smooth[i]) +
          " (raw " + num(s.raw[i]) + ")"));
      });
      cursor.setAttribute("x1", px); cursor.setAttribute("x2", px);
      cursor.setAttribute("visibility", "visible");
    });
    svg.addEventListener("mouseleave", function () {
      cursor.setAttribute("visibility", "hidden");
      out.textContent = "";
    });
  });
}());
"""
