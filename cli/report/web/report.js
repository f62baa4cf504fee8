// The report page's renderer (embedded by the build: cli/report/assets.h). Plain ES2020,
// run after the inlined vega, vega-lite and vega-embed bundles; it makes no network request
// (heatmap images are canvas data URLs).
(function () {
  'use strict';
  const state = { figures: [], errors: [], done: false };
  window.posencReport = state;
  const RECT_LIMIT = 128 * 128;   // heatmaps above this are drawn as an image
  const HOVER_BLOCKS = 48;        // hover grid (per side) of image heatmaps
  const LIVE_HOVER_BLOCKS = 24;   // ... of live ones (the playground): a quarter of the marks
  const embedOptions = {
    mode: 'vega-lite', renderer: 'canvas',
    actions: { export: true, source: false, compiled: false, editor: false },
  };

  // Non-finite cells (a masked bias: -inf, or null in JSON) are left out of the domain and
  // drawn in light grey.
  function domainOf(f) {
    let lo = Infinity, hi = -Infinity;
    for (const v of f.values) {
      if (v === null || !isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (lo > hi) { lo = 0; hi = 0; }
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
      if (vals[i] === null || !isFinite(vals[i])) {
        const o = 4 * i;
        px[o] = 234; px[o + 1] = 238; px[o + 2] = 242; px[o + 3] = 255;
        continue;
      }
      let k = Math.round((vals[i] - lo) * scale);
      k = k < 0 ? 0 : k > 255 ? 255 : k;
      const o = 4 * i, l = 4 * k;
      px[o] = lut[l]; px[o + 1] = lut[l + 1]; px[o + 2] = lut[l + 2]; px[o + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return canvas.toDataURL('image/png');
  }
  function hoverBlocks(f, blocks) {
    const side = blocks || HOVER_BLOCKS;
    const br = Math.ceil(f.rows / side), bc = Math.ceil(f.cols / side);
    const out = [];
    for (let r0 = 0; r0 < f.rows; r0 += br) {
      const r1 = Math.min(f.rows, r0 + br);
      for (let c0 = 0; c0 < f.cols; c0 += bc) {
        const c1 = Math.min(f.cols, c0 + bc);
        let lo = Infinity, hi = -Infinity, sum = 0, count = 0;
        for (let r = r0; r < r1; ++r) {
          const base = r * f.cols;
          for (let c = c0; c < c1; ++c) {
            const v = f.values[base + c];
            if (v === null || !isFinite(v)) continue;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            sum += v;
            ++count;
          }
        }
        if (count === 0) continue;  // a block of masked cells only
        out.push({ col: f.x0 + c0, col1: f.x0 + c1, row: f.y0 + r0, row1: f.y0 + r1,
                   rows: (f.y0 + r0) + '\u2013' + (f.y0 + r1 - 1),
                   cols: (f.x0 + c0) + '\u2013' + (f.x0 + c1 - 1),
                   mean: sum / count, min: lo, max: hi });
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
  // Draws figure f (the JSON of one entry of #posenc-figures) into el and
  // returns vega-embed's result. opts.image: draw a heatmap of any size as an
  // image (the playground redraws on every input change).
  async function renderFigure(el, f, opts) {
    const t0 = performance.now();
    let spec = f.spec, path = 'chart';
    if (f.kind === 'heatmap') {
      const domain = domainOf(f);
      path = f.rows * f.cols <= RECT_LIMIT && !(opts && opts.image) ? 'rect' : 'image';
      spec = path === 'rect' ? rectHeatmap(f, domain) : imageHeatmap(f, domain);
    }
    const prepMs = performance.now() - t0;
    const result = await vegaEmbed(el, spec,
                                   Object.assign({ downloadFileName: f.id }, embedOptions));
    await result.view.runAsync();
    result.path = path;
    result.prepMs = prepMs;
    return result;
  }
  // Live charts (the playground): the first draw embeds the view; later draws of a figure with
  // the same structure only replace its named datasets and signals, which costs a fraction of
  // a new embed. A heatmap is drawn as an image plus hover blocks whose axes follow the blocks'
  // extent and whose colour domain is the signals lo and hi.
  const LIVE_SIZE = { width: 420, height: 260 };  // fixed: a new shape only changes the data
  function liveHeatmapSpec(f, domain) {
    const size = Object.assign({}, LIVE_SIZE);
    const color = f.scheme === 'diverging' ? { scheme: 'redblue', reverse: true }
                                           : { scheme: 'viridis' };
    color.domain = [{ expr: 'lo' }, { expr: 'hi' }];
    const axis = (field, title, reverse) => ({ field, type: 'quantitative', title,
                                               scale: { nice: false, zero: false, reverse } });
    return Object.assign(size, {
      params: [{ name: 'lo', value: domain[0] }, { name: 'hi', value: domain[1] }],
      layer: [
        { data: { name: 'pg_image', values: [] },
          mark: { type: 'image', width: size.width, height: size.height, align: 'left',
                  baseline: 'top', aspect: false },
          encoding: { x: axis('col', f.x_title), y: axis('row', f.y_title, true),
                      url: { field: 'url', type: 'nominal' } } },
        { data: { name: 'pg_blocks', values: [] },
          mark: { type: 'rect', opacity: 0 },
          encoding: { x: axis('col', f.x_title), x2: { field: 'col1' },
                      y: axis('row', f.y_title, true), y2: { field: 'row1' },
                      color: { field: 'mean', type: 'quantitative', title: f.value_title,
                               scale: color },
                      tooltip: [{ field: 'rows', title: f.y_title },
                                { field: 'cols', title: f.x_title },
                                { field: 'mean', title: 'mean ' + f.value_title, format: '.5~g' },
                                { field: 'min', format: '.5~g' },
                                { field: 'max', format: '.5~g' }] } },
      ] });
  }
  function liveData(f) {
    if (f.kind !== 'heatmap') return { pg_table: f.spec.data.values, pg_rules: f.rules || [] };
    const domain = domainOf(f);
    return { pg_image: [{ col: f.x0, row: f.y0, url: imageUrl(f, domain) }],
             pg_blocks: hoverBlocks(f, LIVE_HOVER_BLOCKS), domain };
  }
  function liveKey(f) {
    if (f.kind === 'heatmap') {
      return JSON.stringify([f.scheme, f.x_title, f.y_title, f.value_title]);
    }
    const spec = Object.assign({}, f.spec, { data: null });
    return JSON.stringify([spec, f.rules ? 1 : 0]);
  }
  const live = new WeakMap();
  async function drawLive(el, f) {
    const data = liveData(f);
    const key = liveKey(f);
    let entry = live.get(el);
    if (!entry || entry.key !== key) {
      let spec;
      if (f.kind === 'heatmap') {
        spec = liveHeatmapSpec(f, data.domain);
      } else {
        spec = Object.assign({}, f.spec, { data: { name: 'pg_table', values: [] } });
      }
      // resize: the axes' room is measured again on every update (longer labels fit).
      spec.autosize = { type: 'pad', resize: true };
      if (entry) entry.result.finalize();
      const result = await vegaEmbed(el, spec, Object.assign({ downloadFileName: f.id },
                                                              embedOptions));
      entry = { key, result };
      live.set(el, entry);
    }
    const view = entry.result.view;
    for (const [name, values] of Object.entries(data)) {
      if (name === 'domain') {
        view.signal('lo', values[0]).signal('hi', values[1]);
      } else if (f.kind === 'heatmap' || name === 'pg_table' || f.rules) {
        view.data(name, values);
      }
    }
    await view.runAsync();
    return entry.result;
  }
  window.posencCharts = { render: renderFigure, live: drawLive };
  async function renderOne(f) {
    const el = document.getElementById('chart-' + f.id);
    const t0 = performance.now();
    try {
      const result = await renderFigure(el, f);
      state.figures.push({ id: f.id, kind: f.kind, path: result.path,
                           cells: f.kind === 'heatmap' ? f.rows * f.cols : 0,
                           ms: performance.now() - t0, prepMs: result.prepMs,
                           marks: countMarks(result.view.scenegraph().root),
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
