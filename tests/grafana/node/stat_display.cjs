// A stat panel's values as Grafana computes them: @grafana/data's getFieldDisplayValues over the
// frames, with the panel's reduce options and field config (what the stat panel renders:
// public/app/plugins/panel/stat/StatPanel.tsx asks getFieldDisplayValues for its values).
//
// stdin:  {"panels": [{"key", "frames": [DataFrame DTO], "reduceOptions", "fieldConfig"}]}
// stdout: {"panels": [{"key", "error"?, "values": [{title, numeric, text}]}]}
'use strict';

const g = require('@grafana/data');

globalThis.window = globalThis.window || { __grafanaSceneContext: {} };
globalThis.navigator = globalThis.navigator || { language: 'en-US', languages: ['en-US'] };

function toFrame(dto) {
  const length = dto.fields.length ? dto.fields[0].values.length : 0;
  return {
    name: dto.name,
    refId: dto.refId,
    length,
    fields: dto.fields.map((f) => ({ name: f.name, type: f.type, config: f.config || {}, values: f.values })),
  };
}

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const theme = g.createTheme();
  const panels = [];
  for (const p of input.panels) {
    try {
      const values = g.getFieldDisplayValues({
        data: p.frames.map(toFrame),
        reduceOptions: p.reduceOptions,
        fieldConfig: p.fieldConfig || { defaults: {}, overrides: [] },
        replaceVariables: (v) => v,
        theme,
        timeZone: 'utc',
      });
      panels.push({
        key: p.key,
        values: values.map((v) => ({ title: v.display.title, numeric: v.display.numeric, text: v.display.text })),
      });
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
