// The dashboards' data path as Grafana's frontend runs it, written once for both callers:
// data_path.cjs (Node, @grafana/data's CommonJS build) and render/harness.jsx (the browser
// bundle, its ES build). Each passes its own copy of @grafana/data (`g`) and rxjs (`rx`), so that
// the bundle holds one @grafana/data, shared with @grafana/ui.
//
// What runs where, as in Grafana's frontend:
// - the transformation chain: `transformDataFrame` over `standardTransformersRegistry` (whose items
//   load their transformer lazily in 13.x: `transformation()` returns it), into which
//   Grafana's app registers @grafana/data's standard transformers plus its app-code transformers
//   (public/app/features/transformers/standardTransformers.ts). The only app-code one the
//   dashboards use is `partitionByValues`, written here from its source (below);
// - field config: `applyFieldOverrides` (what PanelQueryRunner/getProcessedDataFrames hand a panel),
//   then each field's colour from its colour mode's calculator, as the panel's series builder asks.
'use strict';

module.exports = function grafanaPipeline(g, rx) {
// --- partitionByValues: Grafana app code, not in @grafana/data -------------------------------
// Behaviour learnt from grafana/grafana public/app/features/transformers/partitionByValues/
// partitionByValues.ts and partition.ts (our own code, not a copy):
// - only the FIRST frame of the input is partitioned (`partitionByValues(data[0], ...)`); any
//   further frames are dropped from the output;
// - rows are grouped by the tuple of the key fields' values, groups in first-seen order;
// - each group becomes a frame with the frame's name and meta; key fields are dropped unless
//   keepFields; with naming.asLabels (the default) the key names and values become labels of every
//   remaining field; otherwise the frame is named after the values;
// - fields renamed by the datasource (config.displayNameFromDS) or the user (config.displayName)
//   are given that name while the display names are computed across the new frames
//   (cacheFieldDisplayNames), then their original names come back and the computed display name
//   is written into config.displayName.
function groupRows(keyValues) {
  const groups = new Map();
  const n = keyValues.length ? keyValues[0].length : 0;
  for (let row = 0; row < n; row++) {
    const key = JSON.stringify(keyValues.map((vals) => vals[row]));
    if (!groups.has(key)) {
      groups.set(key, []);
    }
    groups.get(key).push(row);
  }
  return [...groups.values()];
}

function partitionOne(frame, keyNames, options) {
  const keyFields = frame.fields.filter((f) => keyNames.includes(f.name));
  if (!keyFields.length) {
    return [frame];
  }
  const naming = { asLabels: true, append: false, withNames: false, separator1: '=', separator2: ' ', ...(options.naming || {}) };
  const keyValues = keyFields.map((f) => f.values);
  const names = keyFields.map((f) => f.name);
  return groupRows(keyValues).map((rows) => {
    const first = keyFields.map((f) => f.values[rows[0]]);
    let frameName = frame.name;
    let labels = {};
    if (naming.asLabels) {
      names.forEach((name, i) => {
        labels[name] = String(first[i]);
      });
    } else {
      frameName = names
        .map((name, i) => (naming.withNames ? `${name}${naming.separator1}${first[i]}` : first[i]))
        .join(naming.separator2);
      if (naming.append && frame.name) {
        frameName = `${frame.name} ${frameName}`;
      }
    }
    const kept = options.keepFields ? frame.fields : frame.fields.filter((f) => !names.includes(f.name));
    return {
      name: frameName,
      meta: frame.meta,
      length: rows.length,
      fields: kept.map((f) => ({
        name: f.name,
        type: f.type,
        config: JSON.parse(JSON.stringify(f.config || {})),
        labels: { ...(f.labels || {}), ...labels },
        values: rows.map((r) => f.values[r]),
      })),
    };
  });
}

function partitionByValues(frame, options) {
  const original = {};
  const renamed = {
    ...frame,
    fields: frame.fields.map((f) => {
      const to = (f.config || {}).displayNameFromDS ?? (f.config || {}).displayName;
      if (!to) {
        return f;
      }
      const config = { ...f.config };
      delete config.displayName;
      delete config.displayNameFromDS;
      const state = { ...(f.state || {}) };
      delete state.displayName;
      original[to] = f.name;
      return { ...f, name: to, config, state };
    }),
  };
  const frames = partitionOne(renamed, options.fields || [], options);
  g.cacheFieldDisplayNames(frames);
  for (const fr of frames) {
    for (const field of fr.fields) {
      if (field.name in original) {
        field.name = original[field.name];
        field.config.displayName = field.state.displayName;
      }
    }
  }
  return frames;
}

const partitionByValuesInfo = {
  id: g.DataTransformerID.partitionByValues,
  name: 'Partition by values',
  description: 'rlvitals test port of Grafana app code',
  defaultOptions: { keepFields: false },
  operator: (options) => (source) =>
    source.pipe(rx.map((data) => (data.length ? partitionByValues(data[0], options) : data))),
};

// --- registry as Grafana's app sets it up ----------------------------------------------------
// (joinByField is exported twice, once under its old name seriesToColumns: register it once)
function transformerItems() {
  const byId = new Map();
  for (const t of [...Object.values(g.standardTransformers), partitionByValuesInfo]) {
    if (!byId.has(t.id)) byId.set(t.id, { id: t.id, aliasIds: t.aliasIds, name: t.name, transformation: () => t });
  }
  return [...byId.values()];
}
g.standardTransformersRegistry.setInit(transformerItems);

function toFrame(dto) {
  const length = dto.fields.length ? dto.fields[0].values.length : 0;
  return {
    name: dto.name,
    refId: dto.refId,
    meta: dto.meta,
    length,
    fields: dto.fields.map((f) => ({
      name: f.name,
      type: f.type,
      config: f.config || {},
      labels: f.labels,
      values: f.values,
    })),
  };
}

// Field-config properties as the panel's registry would declare them: a standard option or a
// `custom.` option of the graph field config; values taken as given.
function configRegistry(fieldConfig) {
  const ids = new Set(['color', 'unit', 'displayName', 'custom.lineWidth', 'custom.hideFrom']);
  for (const key of Object.keys(fieldConfig.defaults || {})) {
    if (key !== 'custom') ids.add(key);
  }
  for (const key of Object.keys((fieldConfig.defaults || {}).custom || {})) ids.add('custom.' + key);
  for (const o of fieldConfig.overrides || []) for (const p of o.properties || []) ids.add(p.id);
  const reg = new g.FieldConfigOptionsRegistry();
  for (const id of ids) {
    const isCustom = id.startsWith('custom.');
    // the app registers `displayName` with its own processor and template expansion
    // (public/app/core/components/OptionsUI/registry.tsx getAllStandardFieldConfigs), which
    // clears the cached name and interpolates ${__field...} (field/overrides/processors.ts)
    const display = id === 'displayName';
    // thresholds go through Grafana's own processor (sorted steps, the base at -Infinity)
    const process = display
      ? g.displayNameOverrideProcessor
      : id === 'thresholds'
        ? g.thresholdsOverrideProcessor
        : id === 'noValue'
          ? g.stringOverrideProcessor // as the app registers it (undefined unsets the option)
          : (v) => v;
    reg.register({
      id,
      path: isCustom ? id.slice('custom.'.length) : id,
      name: id,
      isCustom,
      process,
      settings: display ? { expandTemplateVars: true } : undefined,
      shouldApply: () => true,
      override: () => null,
      editor: () => null,
    });
  }
  return reg;
}

// Scenes' field macros in a display name: ${__field.name}, ${__field.labels.X}
// (@grafana/scenes packages/scenes/src/variables/macros/dataMacros.ts, FieldMacro).
function replaceVariables(value, scopedVars) {
  const ctx = scopedVars && scopedVars.__dataContext && scopedVars.__dataContext.value;
  const field = ctx && ctx.field;
  if (!field || typeof value !== 'string') return value;
  return value.replace(/\$\{__field\.(labels\.)?([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, isLabel, key) => {
    if (isLabel) return (field.labels || {})[key] ?? '';
    return key === 'name' ? field.name : whole;
  });
}

// --- threshold areas per scale: what a time series / trend panel draws -------------------------
// From grafana/grafana public/app/core/components/TimeSeries/utils.ts (preparePlotConfigBuilder):
// for each numeric field after the x field, `scaleKey = buildScaleKey(config, field.type)`; when
// `custom.thresholdsStyle` and `thresholds` are set and the mode is not `off`,
// `builder.addThresholds({scaleKey, ...})`; and packages/grafana-ui/src/components/uPlot/config/
// UPlotConfigBuilder.ts `addThresholds` keeps the FIRST options per scale key ("to prevent more
// than one threshold per scale") and draws each on its own scale. buildScaleKey (grafana-ui,
// uPlot/utils.ts): unit / min-max / softMin-softMax / axis placement / distribution / axis label /
// field type, 'na' for what is unset, the unit defaulting to FIXED_UNIT ('__fixed'). Our code,
// written from those files (@grafana/ui is not installed here: it needs React and a DOM).
function scaleKey(field) {
  const c = field.config || {};
  const custom = { drawStyle: 'line', showPoints: 'auto', axisPlacement: 'auto', showValues: false, ...(c.custom || {}) };
  const part = (v) => (v !== undefined && v !== null ? v : 'na');
  const dist = custom.scaleDistribution
    ? custom.scaleDistribution.type === 'log'
      ? `${custom.scaleDistribution.type}${custom.scaleDistribution.log}`
      : custom.scaleDistribution.type
    : 'linear';
  const label = custom.axisLabel ? custom.axisLabel : 'na';
  return [
    c.unit ?? '__fixed',
    `${part(c.min)}-${part(c.max)}`,
    `${part(custom.axisSoftMin)}-${part(custom.axisSoftMax)}`,
    custom.axisPlacement ?? 'auto',
    dist,
    label,
    field.type,
  ].join('/');
}

function thresholdAreas(frame, xName) {
  const areas = new Map();
  for (const field of frame.fields) {
    if (field.name === xName || (field.type !== g.FieldType.number && field.type !== g.FieldType.enum)) continue;
    const c = field.config || {};
    const style = (c.custom || {}).thresholdsStyle;
    if (!style || !c.thresholds) continue;
    const mode = style.mode ?? 'off';
    if (mode === 'off') continue;
    const key = scaleKey(field);
    if (!areas.has(key)) {
      areas.set(key, {
        scaleKey: key,
        field: field.state && field.state.displayName ? field.state.displayName : field.name,
        mode,
        steps: c.thresholds.steps.map((s) => ({ value: s.value === -Infinity ? null : s.value, color: s.color })),
      });
    }
  }
  return [...areas.values()];
}

// A panel's frames as the panel gets them: its transformations, then its field config.
async function processPanel(p, theme) {
  const frames = p.frames.map(toFrame);
  const out = await rx.lastValueFrom(g.transformDataFrame(p.transformations || [], frames, { interpolate: (v) => v }));
  const processed = g.applyFieldOverrides({
    data: out,
    fieldConfig: p.fieldConfig || { defaults: {}, overrides: [] },
    theme,
    replaceVariables,
    fieldConfigRegistry: configRegistry(p.fieldConfig || {}),
  });
  // the trend panel caches display names before anything reads a colour
  // (public/app/plugins/panel/timeseries/utils.ts prepareGraphableFields): by-name colours
  // hash the display name (field/fieldColor.ts)
  g.cacheFieldDisplayNames(processed);
  return processed;
}

// What the data-path test reads of each processed frame.
async function runPanel(p, theme) {
  const processed = await processPanel(p, theme);
  return processed.map((frame) => ({
    name: frame.name ?? null,
    fields: frame.fields.map((field) => {
      const colour = field.type === g.FieldType.number
        ? g.getFieldColorModeForField(field).getCalculator(field, theme)(0, 0)
        : null;
      return {
        name: field.name,
        displayName: g.getFieldDisplayName(field, frame, processed),
        type: field.type,
        labels: field.labels || {},
        color: colour,
        lineWidth: (field.config.custom || {}).lineWidth ?? null,
        hidden: (field.config.custom || {}).hideFrom || null,
        lineStyle: (field.config.custom || {}).lineStyle || null,
        drawStyle: (field.config.custom || {}).drawStyle || null,
        axisPlacement: (field.config.custom || {}).axisPlacement ?? null,
        spanNulls: (field.config.custom || {}).spanNulls ?? null,
        min: field.config.min ?? null,
        max: field.config.max ?? null,
        valueMax: field.type === g.FieldType.number
          ? field.values.reduce((m, v) => (v !== null && v !== undefined && (m === null || v > m) ? v : m), null)
          : null,
        nonNull: field.values.filter((v) => v !== null && v !== undefined).length,
        ascending: field.type === g.FieldType.number ? g.isLikelyAscendingVector(field.values) : null,
        values: p.withValues ? field.values : undefined,
        scaleKey: field.type === g.FieldType.number ? scaleKey(field) : null,
      };
    }),
    thresholdAreas: thresholdAreas(frame, p.xField || 'step'),
  }));
}

  return { processPanel, runPanel, scaleKey, thresholdAreas };
};
