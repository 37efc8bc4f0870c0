// Grafana's panel data path, run with Grafana's own @grafana/data (pinned in package.json to the
// compose image's 13.2.0) on the frames the InfluxQL backend builds from a real InfluxDB response.
//
// stdin:  {"panels": [{"key", "frames": [DataFrame DTO], "transformations": [...], "fieldConfig": {...},
//          "theme"?: "dark" | "light" (Grafana's default: dark)}]}
// stdout: {"panels": [{"key", "error"?, "frames": [{"name", "fields": [{name, displayName, type,
//          labels, color, lineWidth, hidden, nonNull, ascending, scaleKey}],
//          "thresholdAreas": [{scaleKey, field, mode, steps}]}]}]}
//
// The data path itself (transformations, field config, threshold areas per scale) is in
// pipeline.cjs, shared with the rendering harness (render/harness.jsx).
// Loaded as CommonJS: the ESM entry of @grafana/data fails on Node 20 (moment-timezone).
'use strict';

const g = require('@grafana/data');

// transformDataFrame reads `window.__grafanaSceneContext` at run time to know whether the
// dashboard runs in Scenes (Grafana 13's dashboards do; Scenes interpolates transformation options
// itself). Set only after loading: at load time a `window` makes bundled libraries expect a DOM.
globalThis.window = globalThis.window || { __grafanaSceneContext: {} };
// Value formats read the browser's locale (Node 20 has no `navigator`; Node 21+ does).
globalThis.navigator = globalThis.navigator || { language: 'en-US', languages: ['en-US'] };
const { runPanel } = require('./pipeline.cjs')(g, require('rxjs'));

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const themes = { dark: g.createTheme(), light: g.createTheme({ colors: { mode: 'light' } }) };
  const panels = [];
  for (const p of input.panels) {
    const theme = themes[p.theme || 'dark'];
    try {
      panels.push({ key: p.key, frames: await runPanel(p, theme) });
    } catch (e) {
      panels.push({ key: p.key, error: String((e && e.stack) || e) });
    }
  }
  process.stdout.write(JSON.stringify({ panels }));
}

main().catch((e) => {
  process.stderr.write(String((e && e.stack) || e));
  process.exit(1);
});
