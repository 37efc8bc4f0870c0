// The rendering harness: the dashboards' trend panels drawn in a browser by Grafana's published
// panel code, pinned in ../package.json to the compose image's Grafana 13.2.0. Bundled by esbuild
// (a devDependency) into one script that tests/grafana/test_dashboards_drawn_browser.py loads in
// headless Chromium.
//
// Drawn by Grafana's own packages:
// - the frames: the panel's transformations and field config through @grafana/data
//   (`transformDataFrame`, `applyFieldOverrides`), in ../pipeline.cjs, shared with the
//   data-path test;
// - the chart: @grafana/ui's `TimeSeries` (GraphNG + its `preparePlotConfigBuilder`, which builds
//   the uPlot config with `UPlotConfigBuilder`: scales, axes, series, threshold areas), drawn by
//   uPlot; its legend (`PlotLegend`/`VizLegend`); its tooltip plugin (`TooltipPlugin2`) and the
//   tooltip's rows (`getFieldDisplayItems`, `VizTooltipContent`), in the theme `createTheme` makes.
//
// Grafana APP code (not in a published package), written here from its source, our own code:
// - the trend panel, public/app/plugins/panel/trend/TrendPanel.tsx (read at grafana/grafana
//   040d40306a1050f2bed37813dff876829cd52a18): one frame only; the x field `options.xField`
//   found and checked ascending; fields prepared by prepareGraphableFields with that x index;
//   `TimeSeries` with a preparePlotFrame whose x matcher is byName(xField); a TooltipPlugin2 in
//   xAll hover mode for a `multi` tooltip, xOne otherwise; KeyboardPlugin left out;
// - prepareGraphableFields, public/app/plugins/panel/timeseries/utils.ts (read at
//   010eb641344a7c324ee04ea4acd75a877874a4db): only what a numeric-x frame of number and string
//   fields needs (display names cached, x field moved first, nullToValue, non-finite numbers
//   nulled, seriesIndex and display processor per number field); no enum or boolean handling;
// - the tooltip body, public/app/plugins/panel/timeseries/TimeSeriesTooltip.tsx (read at
//   007f27cde52198d9c0a175f44881626f0898a80c): header (x display name and value) and the rows of
//   number fields; no footer (links, actions), never pinned;
// - what the trend panel shows instead of a chart: its checks' warnings (TrendPanel.tsx, above;
//   the x field found as `findFieldIndex`, public/app/features/dimensions/utils.ts, read at
//   0508f8180a816e3439fffcba4795327d3a12ad9a, does: by name, then by display name), and, when
//   prepareGraphableFields finds nothing to draw, no warning: both go to PanelDataErrorView,
//   public/app/features/panel/components/PanelDataErrorView.tsx (read at
//   015faa721ba8105312a5d1706a63a5d99ab6a868 and 4c3264719cd3aa9f45fefea038335cdad5a68d39, the
//   same `getMessageFor`): the warning if any; else, when there is no frame or every frame has
//   length 0, `fieldConfig.defaults.noValue ?? 'No data'`; else the data summary's complaints.
//   Drawn as its message's text (data-testid "data-testid Panel data error message"); no
//   editor buttons.
// Not drawn: the panel chrome (title bar, description tooltip), annotations, data links.
//
// window.rlvitalsDraw(panels, themeName) draws each panel into its own box and returns, per
// panel, what uPlot was given and drew (window.rlvitalsCharts holds the uPlot instances).
import * as g from '@grafana/data';
import * as rx from 'rxjs';
import { createRoot } from 'react-dom/client';
import { flushSync } from 'react-dom';
import {
  TimeSeries,
  TooltipPlugin2,
  TooltipDisplayMode,
  preparePlotFrame,
  getFieldDisplayItems,
  VizTooltipWrapper,
  VizTooltipHeader,
  VizTooltipContent,
} from '@grafana/ui';
import grafanaPipeline from '../pipeline.cjs';
// uPlot's own stylesheet (Grafana's app loads it globally): canvas and overlay positions
import uplotCss from 'uplot/dist/uPlot.min.css';

window.__grafanaSceneContext = window.__grafanaSceneContext || {};
const style = document.createElement('style');
style.textContent = uplotCss;
document.head.append(style);
const pipeline = grafanaPipeline(g, rx);
const THEMES = { dark: g.createTheme(), light: g.createTheme({ colors: { mode: 'light' } }) };
// Hover modes of TooltipPlugin2 (@grafana/ui's TooltipHoverMode, exported only from its internal
// entry): xOne = 0, xAll = 1.
const X_ONE = 0;
const X_ALL = 1;

// --- prepareGraphableFields (app code, see above): the numeric-x path only ----------------------
function prepareGraphableFields(series, theme, xIdx) {
  g.cacheFieldDisplayNames(series);
  if (xIdx > 0) {
    series = [{ ...series[0], fields: [series[0].fields[xIdx], ...series[0].fields.filter((_f, i) => i !== xIdx)] }];
  }
  const frames = [];
  for (const frame of series) {
    const fields = [];
    let hasValue = false;
    g.nullToValue(frame).fields.forEach((field, i) => {
      if (field.type === g.FieldType.number) {
        hasValue = hasValue || i > 0;
        const bad = field.values.some((v) => !(Number.isFinite(v) || v == null));
        fields.push({ ...field, values: bad ? field.values.map((v) => (Number.isFinite(v) ? v : null)) : field.values });
      } else if (field.type === g.FieldType.string || field.type === g.FieldType.time) {
        fields.push({ ...field });
      }
    });
    if (hasValue) frames.push({ ...frame, fields });
  }
  // setClassicPaletteIdxs: every number field but the x one gets its series index and display
  let seriesIndex = 0;
  for (const frame of frames) {
    frame.fields.forEach((field, i) => {
      if (i !== 0 && field.type === g.FieldType.number) {
        field.state = { ...field.state, seriesIndex: seriesIndex++ };
        field.display = g.getDisplayProcessor({ field, theme });
      }
    });
  }
  return frames.length ? frames : null;
}

// --- TimeSeriesTooltip (app code, see above): header and rows -----------------------------------
function TrendTooltip({ series, dataIdxs, seriesIdx, mode, sortOrder }) {
  const xField = series.fields[0];
  const xVal = g.formattedValueToString(xField.display(xField.values[dataIdxs[0]]));
  const items = getFieldDisplayItems(
    series.fields,
    xField,
    dataIdxs,
    seriesIdx,
    mode,
    sortOrder,
    (f) => f.type === g.FieldType.number || f.type === g.FieldType.enum,
    false
  );
  return (
    <VizTooltipWrapper>
      <VizTooltipHeader item={{ label: xField.state?.displayName ?? xField.name, value: xVal }} isPinned={false} />
      <VizTooltipContent items={items} isPinned={false} scrollable={false} />
    </VizTooltipWrapper>
  );
}

// Records the uPlot instance GraphNG creates (a hook added while the chart's children render,
// before UPlotChart mounts and builds uPlot from the config).
function Probe({ config, record }) {
  if (!config.__rlvitalsProbe) {
    config.__rlvitalsProbe = true;
    config.addHook('init', (u) => record(u));
  }
  return null;
}

// --- the trend panel (app code, see above) ------------------------------------------------------
function TrendPanel({ frames, options, width, height, record }) {
  const xName = options.xField;
  const preparePlotFrameTimeless = (fs, dimFields) =>
    preparePlotFrame(fs, { ...dimFields, x: g.fieldMatchers.get(g.FieldMatcherID.byName).get(xName) });
  const tooltip = options.tooltip || { mode: TooltipDisplayMode.Single };
  return (
    <TimeSeries
      frames={frames}
      structureRev={1}
      timeRange={g.getDefaultTimeRange()}
      timeZone="utc"
      width={width}
      height={height}
      legend={options.legend}
      options={options}
      preparePlotFrame={preparePlotFrameTimeless}
      replaceVariables={(v) => v}
    >
      {(uPlotConfig, alignedFrame) => (
        <>
          <Probe config={uPlotConfig} record={(u) => record(u, uPlotConfig, alignedFrame)} />
          {tooltip.mode !== TooltipDisplayMode.None && (
            <TooltipPlugin2
              config={uPlotConfig}
              hoverMode={tooltip.mode === TooltipDisplayMode.Single ? X_ONE : X_ALL}
              render={(u, dataIdxs, seriesIdx) => (
                <TrendTooltip
                  series={alignedFrame}
                  dataIdxs={dataIdxs}
                  seriesIdx={seriesIdx}
                  mode={tooltip.mode}
                  sortOrder={tooltip.sort}
                />
              )}
            />
          )}
        </>
      )}
    </TimeSeries>
  );
}

// The trend panel's own checks, before it draws (TrendPanel.tsx): a warning; or no graphable
// field, and no warning (see above).
function findFieldIndex(name, frame, frames) {
  if (!frame || !name?.length) return undefined;
  for (let i = 0; i < frame.fields.length; i++) {
    const field = frame.fields[i];
    if (name === field.name || name === g.getFieldDisplayName(field, frame, frames)) return i;
  }
  return undefined;
}

function trendFrames(series, options, theme) {
  if (series.length > 1) return { warning: 'Only one frame is supported, consider adding a join transformation' };
  const xIdx = findFieldIndex(options.xField, series[0]);
  if (xIdx == null) return { warning: 'Unable to find field: ' + options.xField };
  const x = series[0].fields[xIdx];
  if (x.type === g.FieldType.number && !g.isLikelyAscendingVector(x.values)) return { warning: 'Values must be in ascending order' };
  return { frames: prepareGraphableFields(series, theme, xIdx) };
}

// PanelDataErrorView's `getMessageFor` (see above), for the trend panel (needsNumberField).
function getMessageFor({ series, fieldConfig, message }) {
  if (message) return message;
  if (!series || series.length === 0 || series.every((frame) => frame.length === 0)) {
    return fieldConfig?.defaults?.noValue ?? 'No data';
  }
  if (!g.getPanelDataSummary(series).hasNumberField) return 'Data is missing a number field';
  return 'Cannot visualize data';
}

// What uPlot was configured with and drew, for the test to assert on.
function describe(u, builder, alignedFrame, box) {
  u.__rlvitalsRuns = u.series.slice(1).map((_s, i) => (alignedFrame.fields[i + 1].labels || {}).run ?? null);
  const series = u.series.slice(1).map((s, i) => {
    const field = alignedFrame.fields[i + 1];
    const stroke = typeof s.stroke === 'function' ? s.stroke(u, i + 1) : s.stroke;
    return {
      name: field.name,
      labels: field.labels || {},
      stroke: typeof stroke === 'string' ? stroke : null,
      width: s.width,
      dash: s.dash || null,
      scale: s.scale,
      show: s.show,
      pointsOnly: field.config.custom?.drawStyle === 'points', // what GraphNG draws it as
      spanGaps: s.spanGaps ?? false,
      nonNull: u.data[i + 1].filter((v) => v != null).length,
      // the plot-pixel width between its first and last value: how long a line it can draw
      spanPx: (() => {
        const xs = u.data[0].filter((_x, k) => u.data[i + 1][k] != null);
        return xs.length ? Math.abs(u.valToPos(xs[xs.length - 1], 'x') - u.valToPos(xs[0], 'x')) : 0;
      })(),
      hideFrom: field.config.custom?.hideFrom || {},
    };
  });
  const axes = u.axes.map((a) => ({ scale: a.scale, show: a.show !== false, side: a.side, label: a.label ?? null }));
  const scales = {};
  for (const [key, sc] of Object.entries(u.scales)) scales[key] = { min: sc.min, max: sc.max };
  const thresholds = Object.values(builder.thresholds || {}).map((t) => ({
    scaleKey: t.scaleKey,
    mode: t.config.mode,
    steps: t.thresholds.steps.map((st) => ({ value: st.value === -Infinity ? null : st.value, color: st.color })),
  }));
  // the legend's rows as @grafana/ui's VizLegend drew them: each row's label button and its colour
  const legend = [...box.querySelectorAll('[data-testid="data-testid viz-layout-legend"] button[title]')].map((b) => {
    const row = b.closest('tr') || b.parentElement.parentElement;
    const icon = row.querySelector('[data-testid="series-icon"]');
    if (!icon) {
      return { label: b.title, color: null };
    }
    // SeriesIcon (VizLegend/SeriesIcon.tsx) paints a dashed or dotted line's icon as a
    // background image in the series colour over a transparent background
    const css = getComputedStyle(icon);
    const painted = css.backgroundImage.match(/rgba?\([^)]*\)/);
    const color = css.backgroundColor !== 'rgba(0, 0, 0, 0)' || !painted ? css.backgroundColor : painted[0];
    return { label: b.title, color };
  });
  return {
    series,
    axes,
    scales,
    thresholds,
    legend,
    bbox: { left: u.bbox.left / devicePixelRatio, top: u.bbox.top / devicePixelRatio, width: u.bbox.width / devicePixelRatio, height: u.bbox.height / devicePixelRatio },
    x: [...u.data[0]],
  };
}

window.rlvitalsCharts = [];

window.rlvitalsDraw = async function draw(panels, themeName) {
  const theme = THEMES[themeName || 'dark'];
  document.body.style.background = theme.colors.background.primary;
  document.body.style.color = theme.colors.text.primary;
  const out = [];
  for (const p of panels) {
    const box = document.createElement('section');
    box.className = 'rlvitals-chart';
    box.dataset.key = p.key;
    box.style.cssText = `width:${p.width}px;padding:8px;margin:8px;background:${theme.colors.background.primary}`;
    const h = document.createElement('h3');
    h.textContent = p.title;
    h.style.cssText = `margin:0 0 4px;font:500 14px sans-serif;color:${theme.colors.text.primary}`;
    const mount = document.createElement('div');
    box.append(h, mount);
    document.body.append(box);
    try {
      const series = await pipeline.processPanel(p, theme);
      const info = trendFrames(series, p.options, theme);
      if (info.warning || !info.frames) {
        const message = getMessageFor({ series, fieldConfig: p.fieldConfig, message: info.warning });
        out.push({ key: p.key, ...(info.warning ? { warning: info.warning } : {}), message });
        const view = document.createElement('div');
        view.dataset.testid = 'data-testid Panel data error message';
        view.style.cssText = `text-align:center;color:${theme.colors.text.secondary};font-size:${theme.typography.size.lg}`;
        view.textContent = message;
        mount.style.cssText = `height:${p.height}px;display:flex;align-items:center;justify-content:center`;
        mount.append(view);
        continue;
      }
      let created;
      const made = new Promise((resolve) => (created = resolve));
      const root = createRoot(mount);
      flushSync(() =>
        root.render(
          <g.ThemeContext.Provider value={theme}>
            <TrendPanel
              frames={info.frames}
              options={p.options}
              width={p.width}
              height={p.height}
              record={(u, builder, aligned) => created({ u, builder, aligned })}
            />
          </g.ThemeContext.Provider>
        )
      );
      // the layout measures its legend before the chart mounts: wait for uPlot (and its first
      // draw, which happens on creation), never for a fixed time
      const drawn = await Promise.race([
        made,
        new Promise((_r, reject) => setTimeout(() => reject(new Error('uPlot was not created within 60 s')), 60000)),
      ]);
      await new Promise((resolve) => requestAnimationFrame(() => resolve()));
      window.rlvitalsCharts.push(drawn.u);
      out.push({ key: p.key, index: window.rlvitalsCharts.length - 1, ...describe(drawn.u, drawn.builder, drawn.aligned, box) });
    } catch (e) {
      out.push({ key: p.key, error: String((e && e.stack) || e) });
    }
  }
  return out;
};

// --- probes: what the canvas holds (ours, for the tests) ----------------------------------------

// A colour as a canvas stores it when painted over nothing: [r, g, b, a] (0-255).
function stored(colour) {
  const c = document.createElement('canvas');
  c.width = c.height = 1;
  const ctx = c.getContext('2d');
  ctx.fillStyle = colour;
  ctx.fillRect(0, 0, 1, 1);
  return [...ctx.getImageData(0, 0, 1, 1).data];
}

function near(px, i, want, tol) {
  return (
    Math.abs(px[i] - want[0]) <= tol &&
    Math.abs(px[i + 1] - want[1]) <= tol &&
    Math.abs(px[i + 2] - want[2]) <= tol &&
    Math.abs(px[i + 3] - want[3]) <= tol
  );
}

function countColour(u, colour) {
  const { left, top, width, height } = u.bbox;
  const px = u.ctx.getImageData(left, top, width, height).data;
  const want = stored(colour);
  let n = 0;
  for (let i = 0; i < px.length; i += 4) if (near(px, i, want, 6)) n++;
  return n;
}

// For each run: the chart redrawn with that run's series alone (uPlot's setSeries, as a legend
// click does; `batch` redraws at once), and how many plot pixels then hold the given colour,
// opaque (a line's core), within 6 per channel. Alone, because runs with equal values hide each
// other's lines.
window.rlvitalsCountRunColours = function countRunColours(index, colourByRun) {
  const u = window.rlvitalsCharts[index];
  const runs = u.__rlvitalsRuns;
  const shown = u.series.map((s) => s.show);
  const out = {};
  for (const [run, colour] of Object.entries(colourByRun)) {
    u.batch(() => runs.forEach((r, i) => u.setSeries(i + 1, { show: shown[i + 1] && r === run })));
    out[run] = countColour(u, colour);
  }
  u.batch(() => shown.forEach((show, i) => i > 0 && u.setSeries(i, { show })));
  return out;
};

// For each threshold step drawn as an area: the plot rows its band covers on `scaleKey`, and the
// share of those rows' pixels holding the step's colour (the area shows between the lines).
window.rlvitalsAreaBands = function areaBands(index, scaleKey, steps) {
  const u = window.rlvitalsCharts[index];
  const { left, top, width, height } = u.bbox;
  const px = u.ctx.getImageData(left, top, width, height).data;
  const sc = u.scales[scaleKey];
  return steps.map((step, i) => {
    const lo = Math.max(step.value ?? -Infinity, sc.min);
    const hi = Math.min(i + 1 < steps.length ? steps[i + 1].value : Infinity, sc.max);
    const want = stored(step.color);
    if (!(hi > lo)) return { color: step.color, rows: 0, share: null };
    // canvas y of a value, relative to the plot's top
    const y = (v) => u.valToPos(v, scaleKey, true) - top;
    const y0 = Math.max(0, Math.ceil(Math.min(y(lo), y(hi))) + 2);
    const y1 = Math.min(height, Math.floor(Math.max(y(lo), y(hi))) - 2);
    let n = 0;
    let all = 0;
    for (let row = y0; row < y1; row++) {
      for (let col = 0; col < width; col++) {
        all++;
        if (near(px, (row * width + col) * 4, want, 3)) n++;
      }
    }
    return { color: step.color, rows: Math.max(0, y1 - y0), share: all ? n / all : null };
  });
};

// The pixel at (x value, y value on `scaleKey`), as [r, g, b, a].
window.rlvitalsPixelAt = function pixelAt(index, xValue, yValue, scaleKey) {
  const u = window.rlvitalsCharts[index];
  const x = Math.round(u.valToPos(xValue, 'x', true));
  const y = Math.round(u.valToPos(yValue, scaleKey, true));
  return [...u.ctx.getImageData(x, y, 1, 1).data];
};

window.rlvitalsStored = stored;

// Where, in page pixels, the cursor must go to hover step `xValue` of chart `index`.
window.rlvitalsHoverPoint = function hoverPoint(index, xValue) {
  const u = window.rlvitalsCharts[index];
  const r = u.over.getBoundingClientRect();
  return { x: r.left + u.valToPos(xValue, 'x'), y: r.top + r.height / 2 };
};

// The rows of the tooltip shown over chart `index` (TooltipPlugin2 renders it in the page's
// portal container, positioned at the cursor): its text, then label and value per row.
window.rlvitalsTooltipRows = function tooltipRows(index) {
  const over = window.rlvitalsCharts[index].over.getBoundingClientRect();
  const tip = [...document.querySelectorAll('[data-testid="data-testid viz-tooltip-wrapper"]')].find((t) => {
    const r = t.getBoundingClientRect();
    return r.width > 0 && r.bottom > over.top && r.top < over.bottom;
  });
  if (!tip) return null;
  const rows = [...tip.querySelectorAll('[data-testid="series-icon"]')].map((icon) => {
    const row = icon.parentElement.parentElement;
    const cells = [...row.children].map((c) => c.textContent.trim());
    return { label: cells[1], value: cells[2], icon: icon.getAttribute('style') };
  });
  const head = tip.firstElementChild;
  const header = head ? [...head.querySelectorAll('div')].filter((d) => !d.children.length).map((d) => d.textContent.trim()) : [];
  return { text: tip.textContent, header, rows };
};
