// The report page's style sheet and renderer (see assets.h). The script is
// plain ES2020 run after the inlined vega, vega-lite and vega-embed bundles;
// it makes no network request (images are canvas data URLs).
#include "assets.h"

namespace posenc::report {

std::string_view ReportCss() {
  return R"CSS(
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #ffffff; --card: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: var(--bg); }
header { padding: 24px 32px 8px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 26px; }
header p { margin: 0 0 8px; color: var(--muted); }
nav { padding: 8px 32px; border-bottom: 1px solid var(--line); font-size: 14px; display: flex;
      flex-wrap: wrap; gap: 2px 14px; }
nav a { color: var(--accent); text-decoration: none; white-space: nowrap; }
main { padding: 8px 32px 48px; max-width: 1500px; }
section { margin-top: 28px; }
section > h2 { font-size: 21px; margin: 0 0 6px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
section > p { max-width: 980px; margin: 6px 0; }
.blocks { display: flex; flex-wrap: wrap; gap: 18px; margin-top: 12px; align-items: flex-start; }
figure { margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px;
         max-width: 100%; }
figure.wide { flex-basis: 100%; }
figure h3 { margin: 0 0 8px; font-size: 15px; }
figcaption { margin-top: 8px; font-size: 13px; color: var(--muted); max-width: 560px; }
figure.wide figcaption { max-width: 980px; }
ol.notes { margin: 6px 0 0; padding-left: 22px; font-size: 12px; color: var(--muted); max-width: 980px; }
figcaption a { color: var(--accent); }
.chart { min-height: 40px; }
.chart-error { color: #cf222e; font-weight: 600; }
table { border-collapse: collapse; font-size: 13px; background: var(--bg); }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eaeef2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; max-width: 100%; }
footer { padding: 16px 32px; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line); }
)CSS";
}

std::string_view ReportScript() {
  return R"JS(
(function () {
  'use strict';
  const state = { figures: [], errors: [], done: false };
  window.posencReport = state;
  const RECT_LIMIT = 128 * 128;   // heatmaps above this are drawn as an image
  const HOVER_BLOCKS = 48;        // hover grid (per side) of image heatmaps
  const embedOptions = {
    mode: 'vega-lite', renderer: 'canvas',
    actions: { export: true, source: false, compiled: false, editor: false },
  };

  function domainOf(f) {
    let lo = Infinity, hi = -Infinity;
    for (const v of f.values) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (f.scheme === 'diverging') {
      const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
      return [-m, m];
    }
    return lo === hi ? [lo - 0.5, hi + 0.5] : [lo, hi];
  }
  function colorScale(f, domain) {
    return f.scheme === 'diverging' ? { scheme: 'redblue', domain, reverse: true }
                                    : { scheme: 'viridis', domain };
  }
  function plotSize(f) {
    const width = 420;
    const height = Math.max(160, Math.min(480, Math.round(width * f.rows / f.cols)));
    return { width, height };
  }
  function positional(f) {
    return {
      x: { field: 'col', type: 'quantitative', title: f.x_title,
           scale: { domain: [f.x0, f.x0 + f.cols], nice: false, zero: false } },
      x2: { field: 'col1' },
      y: { field: 'row', type: 'quantitative', title: f.y_title,
           scale: { domain: [f.y0, f.y0 + f.rows], nice: false, zero: false, reverse: true } },
      y2: { field: 'row1' },
    };
  }
  function rectHeatmap(f, domain) {
    const values = new Array(f.rows * f.cols);
    let i = 0;
    for (let r = 0; r < f.rows; ++r) {
      for (let c = 0; c < f.cols; ++c, ++i) {
        values[i] = { col: f.x0 + c, col1: f.x0 + c + 1, row: f.y0 + r, row1: f.y0 + r + 1,
                      value: f.values[i] };
      }
    }
    const enc = positional(f);
    enc.color = { field: 'value', type: 'quantitative', title: f.value_title,
                  scale: colorScale(f, domain) };
    enc.tooltip = [{ field: 'row', title: f.y_title }, { field: 'col', title: f.x_title },
                   { field: 'value', title: f.value_title, format: '.5~g' }];
    return Object.assign(plotSize(f), { data: { values }, mark: 'rect', encoding: enc });
  }
  function colorLut(f) {
    const s = vega.scheme(f.scheme === 'diverging' ? 'redblue' : 'viridis');
    const interp = typeof s === 'function' ? s : vega.interpolateColors(s);
    const probe = document.createElement('canvas');
    probe.width = 256; probe.height = 1;
    const ctx = probe.getContext('2d');
    for (let i = 0; i < 256; ++i) {
      const t = i / 255;
      ctx.fillStyle = interp(f.scheme === 'diverging' ? 1 - t : t);
      ctx.fillRect(i, 0, 1, 1);
    }
    return ctx.getImageData(0, 0, 256, 1).data;
  }
  function imageUrl(f, domain) {
    const lut = colorLut(f);
    const canvas = document.createElement('canvas');
    canvas.width = f.cols; canvas.height = f.rows;
    const ctx = canvas.getContext('2d');
    const img = ctx.createImageData(f.cols, f.rows);
    const px = img.data, vals = f.values, lo = domain[0], scale = 255 / (domain[1] - domain[0]);
    for (let i = 0, n = vals.length; i < n; ++i) {
      let k = Math.round((vals[i] - lo) * scale);
      k = k < 0 ? 0 : k > 255 ? 255 : k;
      const o = 4 * i, l = 4 * k;
      px[o] = lut[l]; px[o + 1] = lut[l + 1]; px[o + 2] = lut[l + 2]; px[o + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return canvas.toDataURL('image/png');
  }
  function hoverBlocks(f) {
    const br = Math.ceil(f.rows / HOVER_BLOCKS), bc = Math.ceil(f.cols / HOVER_BLOCKS);
    const out = [];
    for (let r0 = 0; r0 < f.rows; r0 += br) {
      const r1 = Math.min(f.rows, r0 + br);
      for (let c0 = 0; c0 < f.cols; c0 += bc) {
        const c1 = Math.min(f.cols, c0 + bc);
        let lo = Infinity, hi = -Infinity, sum = 0;
        for (let r = r0; r < r1; ++r) {
          const base = r * f.cols;
          for (let c = c0; c < c1; ++c) {
            const v = f.values[base + c];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            sum += v;
          }
        }
        out.push({ col: f.x0 + c0, col1: f.x0 + c1, row: f.y0 + r0, row1: f.y0 + r1,
                   rows: (f.y0 + r0) + '\u2013' + (f.y0 + r1 - 1),
                   cols: (f.x0 + c0) + '\u2013' + (f.x0 + c1 - 1),
                   mean: sum / ((r1 - r0) * (c1 - c0)), min: lo, max: hi });
      }
    }
    return out;
  }
  function imageHeatmap(f, domain) {
    const size = plotSize(f);
    const enc = positional(f);
    return Object.assign(size, { layer: [
      { data: { values: [{ col: f.x0, row: f.y0, url: imageUrl(f, domain) }] },
        mark: { type: 'image', width: size.width, height: size.height, align: 'left',
                baseline: 'top', aspect: false },
        encoding: { x: enc.x, y: enc.y, url: { field: 'url', type: 'nominal' } } },
      { data: { values: hoverBlocks(f) },
        mark: { type: 'rect', opacity: 0 },
        encoding: { x: enc.x, x2: enc.x2, y: enc.y, y2: enc.y2,
          color: { field: 'mean', type: 'quantitative', title: f.value_title,
                   scale: colorScale(f, domain) },
          tooltip: [{ field: 'rows', title: f.y_title }, { field: 'cols', title: f.x_title },
                    { field: 'mean', title: 'mean ' + f.value_title, format: '.5~g' },
                    { field: 'min', format: '.5~g' }, { field: 'max', format: '.5~g' }] } },
    ] });
  }
  function countMarks(root) {
    let n = 0;
    (function visit(mark) {
      if (!mark || !mark.items) return;
      for (const item of mark.items) {
        if (mark.marktype === 'group') {
          for (const child of item.items || []) visit(child);
        } else if (mark.role === 'mark') {
          ++n;
        }
      }
    })(root);
    return n;
  }
  async function renderOne(f) {
    const el = document.getElementById('chart-' + f.id);
    const t0 = performance.now();
    try {
      let spec = f.spec, path = 'chart';
      if (f.kind === 'heatmap') {
        const domain = domainOf(f);
        path = f.rows * f.cols <= RECT_LIMIT ? 'rect' : 'image';
        spec = path === 'rect' ? rectHeatmap(f, domain) : imageHeatmap(f, domain);
      }
      const tPrep = performance.now() - t0;
      const result = await vegaEmbed(el, spec, Object.assign({ downloadFileName: f.id }, embedOptions));
      await result.view.runAsync();
      state.figures.push({ id: f.id, kind: f.kind, path, cells: f.kind === 'heatmap' ? f.rows * f.cols : 0,
                           ms: performance.now() - t0, prepMs: tPrep, marks: countMarks(result.view.scenegraph().root),
                           view: result.view });
    } catch (e) {
      state.errors.push(f.id + ': ' + e);
      console.error('posenc report: figure ' + f.id + ' failed: ' + e);
      el.className = 'chart chart-error';
      el.textContent = 'This figure failed to render: ' + e;
    }
  }
  async function main() {
    const data = JSON.parse(document.getElementById('posenc-figures').textContent);
    for (const f of data.figures) await renderOne(f);
    state.done = true;
  }
  main();
})();
)JS";
}

}  // namespace posenc::report
