// The report's live playground (cli/report/playground.h): every control recomputes its panel
// with window.posenc (posenc's C++ compiled to WebAssembly, web/posenc_api.js) and redraws it
// with the report's own chart code (window.posencCharts, web/report.js). No formula of posenc is
// written again here: this file reads controls, calls posenc, and only sums, picks and labels
// the values it returns (a dot product of two returned rows, an atan2 of a returned cos/sin).
//
// window.posencPlayground (read by tests/report/browser_test.mjs):
//   ready      true once every panel has drawn; unavailable: the reason when it cannot run;
//   panels     {name: {update(), settled(), controls, last (the values drawn), lastError,
//               times: [ms of each update: compute + redraw]}}.
(function () {
  'use strict';
  const root = document.getElementById('playground-root');
  const state = { ready: false, unavailable: null, panels: {} };
  window.posencPlayground = state;
  if (!root) return;
  const presetsEl = document.getElementById('posenc-presets');
  const presets = presetsEl ? JSON.parse(presetsEl.textContent) : {};
  const fmt = (v, digits) =>
      Number(v).toLocaleString('en-US', { maximumSignificantDigits: digits || 4 });

  // "before → after" when a comparable number changed, else the number.
  function change(comparable, before, after, digits) {
    return comparable && fmt(before, digits) !== fmt(after, digits)
               ? `${fmt(before, digits)} → ${fmt(after, digits)}` : fmt(after, digits);
  }

  function h(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of children || []) e.appendChild(c);
    return e;
  }

  // One control: a labelled input or select, with the place for posenc's message beside it.
  function makeControl(panel, c) {
    const id = 'pg-' + panel + '-' + c.name;
    let input;
    if (c.options) {
      input = h('select', { id });
      for (const o of c.options) {
        const [value, label] = Array.isArray(o) ? o : [o, o];
        const opt = h('option', { value, text: label });
        if (String(value) === String(c.value)) opt.selected = true;
        input.appendChild(opt);
      }
    } else if (c.type === 'textarea') {
      input = h('textarea', { id, rows: '8', cols: '60', spellcheck: 'false' });
      input.value = c.value;
    } else {
      input = h('input', { id, type: c.type || 'number' });
      input.value = c.value;
      if (c.step) input.setAttribute('step', c.step);
    }
    const error = h('span', { class: 'pg-error', id: id + '-error', role: 'alert' });
    input.setAttribute('aria-describedby', id + '-error');
    const wrap = h('div', { class: 'pg-control' + (c.type === 'textarea' ? ' pg-wide' : '') },
                   [h('label', { for: id, text: c.label }), input, error]);
    return { name: c.name, input, error, wrap, type: c.type };
  }

  function value(ctl) {
    if (ctl.type === 'text' || ctl.type === 'textarea' || ctl.input.tagName === 'SELECT') {
      const v = ctl.input.value;
      return ctl.type === 'text' || ctl.type === 'textarea' || isNaN(Number(v)) || v === ''
                 ? v : Number(v);
    }
    return ctl.input.value === '' ? NaN : Number(ctl.input.value);
  }

  // A panel: controls, charts and the sentence that states the number that changed. compute(v)
  // returns {figures: [figure JSON as in #posenc-figures], sentence(prev), key, last}.
  function makePanel(spec) {
    const controls = spec.controls.map((c) => makeControl(spec.name, c));
    const charts = spec.charts.map((c) => h('div', { class: 'chart', id: 'pg-chart-' + c }));
    const sentence = h('p', { class: 'pg-sentence', 'aria-live': 'polite' });
    const box = h('div', { class: 'pg-panel', id: 'pg-' + spec.name }, [
      h('h3', { text: spec.title }), h('p', { class: 'pg-intro', text: spec.intro }),
      h('form', { class: 'pg-controls', onsubmit: 'return false' }, controls.map((c) => c.wrap)),
      h('div', { class: 'blocks' }, charts.map((c) => h('figure', {}, [c]))), sentence]);
    root.appendChild(box);
    const panel = { times: [], last: null, key: null, errors: 0 };
    let changed = controls[0];
    let pending = Promise.resolve();
    async function run() {
      const t0 = performance.now();
      const v = {};
      for (const c of controls) v[c.name] = value(c);
      for (const c of controls) c.error.textContent = '';
      let result;
      try {
        result = spec.compute(v, controls, changed);
      } catch (e) {
        // posenc's message beside the control just changed; the charts keep their last state.
        changed.error.textContent = e.message;
        panel.errors += 1;
        panel.lastError = e.message;
        panel.times.push(performance.now() - t0);
        return;
      }
      for (let i = 0; i < result.figures.length; ++i) {
        await window.posencCharts.live(charts[i], result.figures[i]);
      }
      sentence.textContent = result.sentence(panel.key);
      panel.key = result.key;
      panel.last = result.last;
      panel.lastError = null;
      panel.times.push(performance.now() - t0);
    }
    panel.update = () => { pending = pending.then(run); return pending; };
    panel.settled = () => pending;  // resolves once every update asked for so far has drawn
    panel.controls = Object.fromEntries(controls.map((c) => [c.name, c.input]));
    for (const c of controls) {
      const onChange = () => { changed = c; panel.update(); };
      c.input.addEventListener(c.type === 'text' || c.type === 'textarea' ? 'change' : 'input',
                               onChange);
      if (c.input.tagName === 'SELECT') c.input.addEventListener('change', onChange);
    }
    state.panels[spec.name] = panel;
    return panel;
  }

  function heatmap(id, rows, cols, values, titles, diverging) {
    return { id, kind: 'heatmap', rows, cols, x0: 0, y0: 0, x_title: titles[0], y_title: titles[1],
             value_title: titles[2], scheme: diverging ? 'diverging' : 'sequential',
             values: Array.from(values) };
  }
  function lines(id, records, x, y, color, opts) {
    const o = opts || {};
    const enc = {
      x: { field: x, type: 'quantitative', title: o.xTitle || x,
           scale: o.xLog ? { type: 'log' } : {} },
      y: { field: y, type: 'quantitative', title: o.yTitle || y,
           scale: o.yLog ? { type: 'log' } : { zero: false } },
      tooltip: [{ field: x }, { field: y, format: '.5~g' }],
    };
    if (color) {
      enc.color = { field: color, type: 'nominal', title: o.colorTitle || color };
      enc.tooltip.push({ field: color });
    }
    const layer = [{ mark: { type: o.mark || 'line', point: !!o.points }, encoding: enc }];
    if (o.rules) {
      layer.push({ data: { name: 'pg_rules', values: [] },
                   mark: { type: 'rule', strokeDash: [4, 3] },
                   encoding: { x: { field: 'at', type: 'quantitative' },
                               tooltip: [{ field: 'label' }, { field: 'at' }] } });
    }
    return { id, kind: 'chart', rules: o.rules,
             spec: { width: 420, height: 240, data: { values: records }, layer } };
  }

  // ---- 1. Sinusoidal
  function sinusoidal(v) {
    const p = window.posenc;
    const opts = { base: v.base, layout: v.layout };
    const t = p.sinusoidalTable(v.positions, v.dim, opts);
    const inv = p.sinusoidalInvFreq(v.dim, opts).data;
    const [n, d] = t.shape;
    const dots = [];
    for (let k = 0; k < n; ++k) {
      let s = 0;
      for (let c = 0; c < d; ++c) s += t.data[c] * t.data[k * d + c];
      dots.push({ k, dot: s });
    }
    const dims = [];
    for (let c = 0; c < Math.min(6, d); ++c) {
      for (let r = 0; r < n; ++r) {
        dims.push({ position: r, value: t.data[r * d + c], dim: 'dim ' + c });
      }
    }
    let slow = Infinity;
    for (const w of inv) if (w > 0) slow = Math.min(slow, w);
    const wavelength = 2 * Math.PI / slow;
    const k16 = Math.min(16, n - 1);
    const key = { wavelength, dot: dots[k16].dot, k: k16 };
    return {
      figures: [heatmap('pg-sin-table', n, d, t.data, ['dimension', 'position', 'PE'], true),
                lines('pg-sin-dot', dots, 'k', 'dot', null,
                      { xTitle: 'offset k', yTitle: 'PE(0) · PE(k)' }),
                lines('pg-sin-dims', dims, 'position', 'value', 'dim', { colorTitle: 'column' })],
      key,
      last: { table: t, invFreq: inv },
      sentence: (prev) => {
        const w = change(!!prev, prev && prev.wavelength, wavelength);
        const dot = change(prev && prev.k === k16, prev && prev.dot, key.dot);
        return `Slowest column pair's wavelength 2π/ω: ${w} positions; PE(0) · PE(${k16}) = ` +
               `${dot} (PE(0) · PE(0) = ${fmt(dots[0].dot)}).`;
      },
    };
  }

  // ---- 2. RoPE: the controls edit a config.json, and posenc reads it as it reads a model's.
  const ROPE_TYPES = ['default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope'];
  function ropeConfigFromControls(v, text) {
    let cfg;
    try { cfg = JSON.parse(text); } catch (e) { cfg = {}; }
    cfg.head_dim = v.head_dim;
    // GPT-NeoX's names where the config uses them (posenc reads both).
    cfg['rotary_emb_base' in cfg ? 'rotary_emb_base' : 'rope_theta'] = v.rope_theta;
    cfg['rotary_pct' in cfg ? 'rotary_pct' : 'partial_rotary_factor'] = v.partial_rotary_factor;
    // Dynamic NTK rescales once a call runs past the trained length: that length is the config's,
    // the context is the call's (seq_len below). The other types extend the config's own length.
    cfg.max_position_embeddings = v.rope_type === 'dynamic' ? v.original : v.context;
    if (v.rope_type === 'default') {
      delete cfg.rope_scaling;
    } else {
      const rs = Object.assign({}, cfg.rope_scaling || {});
      if (rs.rope_type !== v.rope_type) {
        for (const k of Object.keys(rs)) delete rs[k];  // another type's fields do not carry over
      }
      delete rs.type;
      rs.rope_type = v.rope_type;
      rs.factor = v.factor;
      if (v.rope_type !== 'linear' && v.rope_type !== 'dynamic') {
        rs.original_max_position_embeddings = v.original;
      }
      cfg.rope_scaling = rs;
    }
    return JSON.stringify(cfg, null, 1);
  }
  function setControlsFromConfig(ctl, text) {
    const cfg = JSON.parse(text);
    const heads = cfg.num_attention_heads, hidden = cfg.hidden_size;
    const hd = cfg.head_dim || (heads && hidden ? hidden / heads : 128);
    const rs = cfg.rope_scaling || {};
    ctl.head_dim.input.value = hd;
    ctl.rope_theta.input.value = cfg.rope_theta || cfg.rotary_emb_base || 10000;
    ctl.partial_rotary_factor.input.value = cfg.partial_rotary_factor ||
                                            cfg.rotary_pct || 1;
    ctl.context.input.value = cfg.max_position_embeddings || 4096;
    const type = rs.rope_type || rs.type || 'default';
    ctl.rope_type.input.value = ROPE_TYPES.includes(type) ? type : 'default';
    ctl.factor.input.value = rs.factor || 1;
    ctl.original.input.value = rs.original_max_position_embeddings ||
                               cfg.original_max_position_embeddings ||
                               cfg.max_position_embeddings || 4096;
  }
  function rope(v, controls, changed) {
    const p = window.posenc;
    const ctl = Object.fromEntries(controls.map((c) => [c.name, c]));
    if (changed.name === 'preset' && presets[v.preset]) {
      ctl.config.input.value = presets[v.preset];
      setControlsFromConfig(ctl, presets[v.preset]);
    } else if (changed.name === 'config') {
      try { setControlsFromConfig(ctl, v.config); } catch (e) { /* posenc reports it below */ }
    } else if (changed.name !== 'pair' && changed.name !== 'pairing') {
      ctl.config.input.value = ropeConfigFromControls(v, ctl.config.input.value);
    }
    const text = ctl.config.input.value;
    // The frequencies a call of `context` tokens sees (dynamic NTK and LongRoPE depend on it).
    const context = Number(ctl.context.input.value);
    const r = p.ropeInvFreq(text, { seqLen: context });
    const original = r.originalMaxPositionEmbeddings || r.maxPositionEmbeddings;
    const pairs = r.pairs;
    const waves = [];
    for (const q of pairs) {
      waves.push({ pair: q.index, wavelength: q.wavelength, table: 'scaled (' + r.ropeType + ')' });
      if (q.defaultInvFreq > 0) {
        waves.push({ pair: q.index, wavelength: 2 * Math.PI / q.defaultInvFreq, table: 'default' });
      }
    }
    // Distances 1 .. context, log-spaced (a linear grid would alias the fast pairs).
    const samples = 400;
    const dist = [];
    for (let i = 0; i < samples; ++i) {
      const d = Math.round(Math.exp(i * Math.log(context) / (samples - 1)));
      if (!dist.length || d > dist[dist.length - 1]) dist.push(d);
    }
    const cs = p.ropeCosSin(dist, r.headDim, { rotaryDim: r.rotaryDim, invFreq: r.data,
                                               theta: r.theta > 1 ? r.theta : 10000,
                                               pairing: v.pairing });
    const rd = r.rotaryDim;
    const decay = dist.map((d, i) => {
      let s = 0;
      for (let c = 0; c < rd; ++c) s += cs.cos[i * rd + c];
      return { distance: d, score: s / rd };
    });
    // The pair shown is a view setting: out of range, the control shows the pair drawn.
    const pair = Math.max(0, Math.min(pairs.length - 1, Math.round(v.pair) || 0));
    if (pair !== v.pair) ctl.pair.input.value = pair;
    // The pair's column in HF's cos/sin layout: j (half_split: cat(freqs, freqs)) or 2j
    // (interleaved: each frequency in two adjacent columns).
    const col = v.pairing === 'interleaved' ? 2 * pair : pair;
    const angle = dist.map((d, i) => ({
      position: d, angle: Math.atan2(cs.sin[i * rd + col], cs.cos[i * rd + col]) }));
    const q = pairs[pair];
    const key = { pair, wavelength: q.wavelength };
    const rules = [{ at: original, label: 'original context' }];
    if (context !== original) rules.push({ at: context, label: 'context' });
    return {
      figures: [
        lines('pg-rope-waves', waves, 'pair', 'wavelength', 'table',
              { yLog: true, yTitle: 'wavelength (tokens)', colorTitle: 'frequencies' }),
        lines('pg-rope-decay', decay, 'distance', 'score', null,
              { xTitle: 'relative distance', yTitle: 'q · k / rotary dim (q = k = ones)',
                xLog: true, rules }),
        lines('pg-rope-angle', angle, 'position', 'angle', null,
              { xTitle: 'position', yTitle: `pair ${pair} angle (rad, wrapped)`, xLog: true,
                mark: 'point', rules }),
      ],
      key,
      last: r,
      sentence: (prev) => {
        const w = change(prev && prev.pair === pair, prev && prev.wavelength, q.wavelength);
        const where = q.wavelength > original ? `beyond the original context ${fmt(original, 9)}`
                                              : `within the original context ${fmt(original, 9)}`;
        const region = { kept: 'keeps its frequency', interpolated: 'is interpolated',
                         blended: 'is blended', unrotated: 'is not rotated' }[q.region] || q.region;
        const dims = v.pairing === 'interleaved' ? `dims ${2 * pair} and ${2 * pair + 1}`
                                                 : `dims ${pair} and ${pair + rd / 2}`;
        return `Pair ${pair} (${dims}, ${v.pairing})'s wavelength ${w} tokens, ${where}: ` +
               `${r.ropeType} ${region} (attention factor ${fmt(r.attentionFactor)}).`;
      },
    };
  }

  // ---- 3. ALiBi
  function alibi(v) {
    const p = window.posenc;
    const s = p.alibiSlopes(v.heads, { maxBias: v.max_bias });
    const b = p.alibiBias(v.heads, v.length, { maxBias: v.max_bias, form: v.form });
    const head = Math.max(1, Math.min(v.heads, Math.round(v.head) || 1));
    const L = v.length;
    const slab = b.data.subarray((head - 1) * L * L, head * L * L);
    const slopes = Array.from(s.data, (x, i) => ({ head: i + 1, slope: x }));
    const key = { head, slope: s.data[head - 1] };
    return {
      figures: [lines('pg-alibi-slopes', slopes, 'head', 'slope', null,
                      { yLog: true, points: true }),
                heatmap('pg-alibi-bias', L, L, slab, ['key', 'query', `head ${head} bias`], false)],
      key,
      last: { slopes: s, bias: b },
      sentence: (prev) => {
        const sl = change(prev && prev.head === head, prev && prev.slope, key.slope);
        return `Head ${head}'s slope ${sl}: a key 100 tokens back costs ` +
               `${fmt(-100 * key.slope)} before the softmax.`;
      },
    };
  }

  // ---- 4. T5 buckets
  function t5(v) {
    const p = window.posenc;
    const o = { numBuckets: v.num_buckets, maxDistance: v.max_distance,
                bidirectional: v.direction === 'bidirectional' };
    const reach = Math.min(4096, 2 * v.max_distance);
    const rel = [];
    for (let x = -reach; x <= reach; ++x) rel.push(x);
    const b = p.t5Bucket(rel, o);
    const records = rel.map((x, i) => ({ relative: x, bucket: b.data[i] }));
    const m = p.relativeMatrix(v.length, v.length, { sign: 'key_minus_query' });
    const map = p.t5Bucket(m.data, o);
    // The first distance back (key before query) that lands in its side's last bucket.
    let last = -1, first = null;
    for (let d = 0; d <= reach; ++d) last = Math.max(last, b.data[reach - d]);
    for (let d = 0; d <= reach && first === null; ++d) if (b.data[reach - d] === last) first = d;
    const key = { first, bucket: last };
    return {
      figures: [lines('pg-t5-buckets', records, 'relative', 'bucket', null,
                      { xTitle: 'relative position (key − query)', mark: 'line' }),
                heatmap('pg-t5-map', v.length, v.length, map.data, ['key', 'query', 'bucket'],
                        false)],
      key,
      last: { relative: rel, buckets: b, map },
      sentence: (prev) => {
        const f = change(!!prev, prev && prev.first, first, 9);
        return `Every key ${f} or more tokens back shares bucket ${last}: beyond that distance ` +
               'T5 cannot tell positions apart.';
      },
    };
  }

  // ---- 5. The permutation demonstration
  function permutation(v) {
    const r = window.posenc.permutationDemo(v.first, v.second, { startToken: v.start_token });
    const rows = r.schemes.map((s) => ({ scheme: s.scheme, difference: s.pooledDifference }));
    const none = r.schemes.find((s) => s.scheme === 'none');
    const best = r.schemes.reduce((a, s) => (s.pooledDifference > a.pooledDifference ? s : a));
    return {
      figures: [{ id: 'pg-perm', kind: 'chart', spec: {
        width: 420, height: 240, data: { values: rows }, mark: 'bar',
        encoding: { y: { field: 'scheme', type: 'nominal', sort: null },
                    x: { field: 'difference', type: 'quantitative',
                         title: 'pooled difference of the two sentences' },
                    tooltip: [{ field: 'scheme' }, { field: 'difference', format: '.3~e' }] } } }],
      key: { none: none.pooledDifference, best: best.pooledDifference },
      last: r,
      sentence: () => `Without positions the two sentence vectors differ by ` +
                      `${none.pooledDifference.toExponential(1)} (rounding: attention sees the ` +
                      `same bag of words); with ${best.scheme} by ${fmt(best.pooledDifference)}.`,
    };
  }

  const PANELS = [
    { name: 'sinusoidal', title: 'Sinusoidal table', compute: sinusoidal,
      intro: 'PE(p) = [sin(p ω_i), cos(p ω_i)] with ω_i = base^(−2i/d): the table, how ' +
             'similar two positions k apart are, and the first six columns.',
      charts: ['sin-table', 'sin-dot', 'sin-dims'],
      controls: [{ name: 'positions', label: 'positions', value: 64 },
                 { name: 'dim', label: 'd_model', value: 128 },
                 { name: 'base', label: 'base', value: 10000 },
                 { name: 'layout', label: 'layout', value: 'interleaved',
                   options: ['interleaved', 'split', 'split_t2t'] }] },
    { name: 'rope', title: 'RoPE and context extension', compute: rope,
      intro: 'The controls write a config.json (below, editable) and posenc reads it as it reads ' +
             "a model's: per-pair wavelengths, the decay of q · k with distance (RoFormer's " +
             "figure) and one pair's angle.",
      charts: ['rope-waves', 'rope-decay', 'rope-angle'],
      controls: [{ name: 'preset', label: 'preset', value: '',
                   options: [['', 'custom']].concat(Object.keys(presets).map((k) => [k, k])) },
                 { name: 'head_dim', label: 'head dim', value: 128 },
                 { name: 'rope_theta', label: 'base (rope_theta)', value: 10000 },
                 { name: 'partial_rotary_factor', label: 'partial rotary', value: 1,
                   step: '0.125' },
                 { name: 'pairing', label: 'pairing', value: 'half_split',
                   options: [['half_split', 'half_split (NeoX, Llama)'],
                             ['interleaved', 'interleaved (GPT-J)']] },
                 { name: 'rope_type', label: 'scaling', value: 'default', options: ROPE_TYPES },
                 { name: 'factor', label: 'factor', value: 4 },
                 { name: 'original', label: 'original length', value: 4096 },
                 { name: 'context', label: "context (a call's length)", value: 16384 },
                 { name: 'pair', label: 'pair shown', value: 40 },
                 { name: 'config', label: 'config.json', type: 'textarea',
                   value: '{"head_dim": 128, "rope_theta": 10000, ' +
                          '"max_position_embeddings": 16384}' }] },
    { name: 'alibi', title: 'ALiBi', compute: alibi,
      intro: 'bias = −slope_h · (i − j): one slope per head, a geometric sequence.',
      charts: ['alibi-slopes', 'alibi-bias'],
      controls: [{ name: 'heads', label: 'heads', value: 8 },
                 { name: 'max_bias', label: 'max bias', value: 8 },
                 { name: 'length', label: 'length', value: 32 },
                 { name: 'form', label: 'form', value: 'causal', options: ['causal', 'symmetric'] },
                 { name: 'head', label: 'head shown', value: 1 }] },
    { name: 't5', title: 'T5 relative buckets', compute: t5,
      intro: 'Exact buckets for short distances, logarithmic ones up to max distance, one shared ' +
             'bucket beyond.',
      charts: ['t5-buckets', 't5-map'],
      controls: [{ name: 'num_buckets', label: 'buckets', value: 32 },
                 { name: 'max_distance', label: 'max distance', value: 128 },
                 { name: 'direction', label: 'direction', value: 'bidirectional',
                   options: ['bidirectional', 'causal'] },
                 { name: 'length', label: 'map length', value: 64 }] },
    { name: 'permutation', title: 'Does attention see the order?', compute: permutation,
      intro: 'Type two sentences with the same words in another order: one attention layer per ' +
             'scheme, and how far apart the two mean-pooled outputs are.',
      charts: ['perm'],
      controls: [{ name: 'first', label: 'first sentence', type: 'text', value: 'dog bites man' },
                 { name: 'second', label: 'second sentence', type: 'text',
                   value: 'man bites dog' },
                 { name: 'start_token', label: 'start token', type: 'text', value: '<s>' }] },
  ];

  async function main() {
    try {
      await window.posencReady;
    } catch (e) {
      state.unavailable = String(e.message || e);
      root.appendChild(h('p', { class: 'pg-unavailable', text:
          'The live playground cannot run here: ' + state.unavailable + '. The figures of the ' +
          'other sections are computed at build time and stay.' }));
      return;
    }
    const version = h('p', { class: 'pg-intro',
                             text: `posenc ${window.posenc.version} (WebAssembly) computes every ` +
                                   'value below in this page; change any control.' });
    root.appendChild(version);
    for (const spec of PANELS) await makePanel(spec).update();
    state.ready = true;
  }
  main();
})();
