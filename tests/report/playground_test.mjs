// Browser test of the live playground (`posenc playground`, cli/report/playground.h): opens the
// page in headless Chromium (playwright-core) and checks that
//   - the page is self-contained (no request leaves it) and logs no console or page error;
//   - window.posenc (posenc's C++ compiled to WebAssembly, scalar kernels) returns exactly the
//     CLI's values for the same parameters (the CLI run with POSENC_BACKEND=scalar): every value
//     compared bit for bit against the CLI's JSON, where the CLI prints float32 values as the
//     shortest double that reads back to them. The documented exceptions, where libm's sin,
//     cos and exp differ in the last bit between glibc (the CLI) and musl (the module): the
//     sinusoidal tables (at most 1 float32 ULP, also against the CLI's default SIMD kernel) and
//     the permutation demonstration's float64 differences (at most 4 ULP); both printed;
//   - bad input throws an Error with the CLI's own message;
//   - setting the controls recomputes each panel to the CLI's values, and a bad control value
//     shows posenc's message beside the control while the charts stay drawn;
//   - every control is labelled and reachable by keyboard;
//   - each update (compute + redraw) takes at most 50 ms as the median of 20 (printed);
//   - posenc.wasm is at most 1 MiB; without WebAssembly the page says why.
//
// Usage: node tests/report/playground_test.mjs --posenc build/release/cli/posenc
//                                              --wasm build/wasm/posenc.wasm --out DIR
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const UPDATE_BUDGET_MS = 50;
const WASM_BUDGET_BYTES = 1 << 20;
const PERMUTATION_MAX_ULP = 4;

const args = { posenc: null, wasm: null, out: null, chromium: '/usr/bin/chromium',
               configs: 'examples/configs' };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in args) || i + 1 >= process.argv.length) {
    throw new Error('usage: playground_test.mjs --posenc PATH --wasm PATH --out DIR');
  }
  args[key] = process.argv[i + 1];
}
if (!args.posenc || !args.wasm || !args.out) {
  throw new Error('usage: playground_test.mjs --posenc PATH --wasm PATH --out DIR');
}

const failures = [];
function check(ok, what) {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}
// The page runs the scalar reference kernels; so does the CLI under POSENC_BACKEND=scalar.
const SCALAR = Object.assign({}, process.env, { POSENC_BACKEND: 'scalar' });
function cli(argv, env) {
  return JSON.parse(execFileSync(args.posenc, argv, { encoding: 'utf8', maxBuffer: 1 << 28,
                                                      env: env || SCALAR }));
}
function cliError(argv) {
  const r = spawnSync(args.posenc, argv, { encoding: 'utf8', env: SCALAR });
  return r.stderr.trim().replace(/^posenc: (error|config error|I\/O error): /, '');
}
function float32Ulps(a, b) {
  const f = new Float32Array([a, b]);
  const i = new Int32Array(f.buffer);
  return Math.abs(i[0] - i[1]);
}
// Bit-identical: the same double (the CLI's float32 values read back exactly as doubles).
function sameValues(a, b) {
  const x = Array.from(a).flat(Infinity), y = Array.from(b).flat(Infinity);
  if (x.length !== y.length) return `length ${x.length} != ${y.length}`;
  for (let i = 0; i < x.length; ++i) {
    const u = x[i] === null ? -Infinity : x[i], v = y[i] === null ? -Infinity : y[i];
    if (!Object.is(u, v) && !(u === 0 && v === 0)) return `index ${i}: ${u} != ${v}`;
  }
  return '';
}
function ulps(a, b) {
  const buf = new DataView(new ArrayBuffer(16));
  buf.setFloat64(0, a);
  buf.setFloat64(8, b);
  return Number(buf.getBigInt64(0) - buf.getBigInt64(8));
}

async function main() {
  const wasmBytes = fs.statSync(args.wasm).size;
  console.log(`posenc.wasm: ${wasmBytes} bytes (${(wasmBytes / 1024).toFixed(0)} KiB)`);
  check(wasmBytes <= WASM_BUDGET_BYTES, `posenc.wasm ${wasmBytes} bytes <= 1 MiB`);

  fs.mkdirSync(args.out, { recursive: true });
  const dir = path.join(args.out, 'playground');
  execFileSync(args.posenc, ['playground', '-o', dir], { stdio: 'inherit' });
  const file = path.join(dir, 'index.html');
  console.log(`page: ${fs.statSync(file).size} bytes`);

  const browser = await chromium.launch({ executablePath: args.chromium });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.route(/^(?!file:|data:|blob:)/, (route) => route.abort());
  const page = await context.newPage();
  const errors = [], network = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith('data:') && !url.startsWith('blob:') && url !== pathToFileURL(file).href) {
      network.push(url);
    }
  });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.posencPlayground &&
                                   (window.posencPlayground.ready ||
                                    window.posencPlayground.unavailable), null, { timeout: 60000 });
  const status = await page.evaluate(() => ({ ready: window.posencPlayground.ready,
                                              unavailable: window.posencPlayground.unavailable,
                                              version: window.posenc && window.posenc.version }));
  check(status.ready, `playground ready (${status.unavailable || 'posenc ' + status.version})`);
  const cliVersion = execFileSync(args.posenc, ['--version'], { encoding: 'utf8' }).trim();
  check(cliVersion.includes(status.version),
        `window.posenc.version ${status.version} is the CLI's`);

  // ---- Fidelity of window.posenc against the CLI's JSON.
  console.log('fidelity: window.posenc against the CLI (bit for bit)');
  const call = (fn, ...a) => page.evaluate(([fn, a]) => {
    try {
      const r = window.posenc[fn](...a);
      const plain = (x) => (ArrayBuffer.isView(x) ? Array.from(x) : x);
      return { r: Object.fromEntries(Object.entries(r).map(([k, v]) => [k, plain(v)])) };
    } catch (e) { return { error: e.message }; }
  }, [fn, a]);
  for (const [n, d, base, layout, offset] of [[64, 128, 10000, 'interleaved', 0],
                                              [33, 77, 500, 'split', 1000003],
                                              [17, 96, 10000, 'split_t2t', 16777000]]) {
    const js = await call('sinusoidalTable', n, d, { base, layout, offset });
    const c = cli(['table', 'sinusoidal', '--positions', n, '--dim', d, '--base', base,
                   '--layout', layout, '--offset', offset, '--format', 'json'].map(String));
    // The one documented exception: the scalar kernel calls libm's sin and cos in float64, and
    // glibc (the CLI) and musl (the module) differ in the last bit of a few large angles; after
    // the rounding to float32 that is at most 1 ULP, rarely.
    const scalar = c.data.flat();
    // The CLI's default backend runs the SIMD kernel (its own polynomials, angle addition over
    // runs of rows), also within 1 ULP of the scalar reference.
    const simd = cli(['table', 'sinusoidal', '--positions', n, '--dim', d, '--base', base,
                      '--layout', layout, '--offset', offset, '--format', 'json'].map(String),
                     Object.assign({}, process.env, { POSENC_BACKEND: '' })).data.flat();
    for (const [what, ref] of [['scalar', scalar], ['default (SIMD)', simd]]) {
      let worst = 0, count = 0;
      ref.forEach((v, i) => {
        const u = float32Ulps(v, js.r.data[i]);
        worst = Math.max(worst, u);
        count += u > 0;
      });
      check(!js.error && ref.length === js.r.data.length && worst <= 1,
            `sinusoidalTable(${n}, ${d}, base ${base}, ${layout}, offset ${offset}) against the ` +
            `CLI's ${what} kernel: ${count} of ${ref.length} values differ, by at most ${worst} ` +
            'float32 ULP');
    }
  }
  const configs = fs.readdirSync(args.configs).filter((f) => f.endsWith('.json')).sort();
  for (const name of configs) {
    const text = fs.readFileSync(path.join(args.configs, name), 'utf8');
    let c;
    try { c = cli(['inspect', path.join(args.configs, name), '--json']); } catch (e) { continue; }
    if (c.position_encoding !== 'rope') continue;
    const js = await call('ropeInvFreq', text, { seqLen: 0 });
    const diff = js.error ||
                 sameValues(js.r.data, c.inv_freq) ||
                 sameValues([js.r.attentionFactor], [c.attention_factor]) ||
                 sameValues(js.r.pairs.map((p) => p.wavelength),
                            c.pairs.map((p) => p.wavelength)) ||
                 (js.r.ropeType === c.rope_type ? '' : `rope type ${js.r.ropeType}`);
    check(!diff, `ropeInvFreq(${name}): ${c.rope_type}, ${c.inv_freq.length} pairs ${diff}`);
  }
  {
    const ids = [0, 1, 7, 4095, 65537, 16777215];
    const js = await call('ropeCosSin', ids, 80, { theta: 500000, rotaryDim: 64,
                                                   pairing: 'interleaved' });
    const c = cli(['table', 'rope', '--position-ids', ids.join(','), '--dim', '80', '--theta',
                   '500000', '--rotary-dim', '64', '--pairing', 'interleaved']);
    const diff = js.error || sameValues(js.r.cos, c.cos) || sameValues(js.r.sin, c.sin);
    check(!diff, `ropeCosSin(positions up to 2^24 - 1, dim 80, rotary 64, interleaved) ${diff}`);
  }
  for (const [heads, maxBias, length, form] of [[8, 8, 16, 'causal'], [12, 8, 9, 'symmetric'],
                                               [5, 4, 7, 'causal']]) {
    const slopes = await call('alibiSlopes', heads, { maxBias });
    const bias = await call('alibiBias', heads, length, { maxBias, form });
    const c = cli(['alibi', '--heads', heads, '--max-bias', maxBias, '--length', length,
                   '--' + form, '--json'].map(String));
    const diff = slopes.error || bias.error || sameValues(slopes.r.data, c.slopes) ||
                 sameValues(bias.r.data, c.bias);
    check(!diff, `alibiSlopes / alibiBias(${heads} heads, max bias ${maxBias}, ${form}) ${diff}`);
  }
  for (const [nb, md, causal] of [[32, 128, false], [48, 300, true], [6, 20, false]]) {
    const rel = [];
    for (let x = -700; x <= 700; ++x) rel.push(x);
    const js = await call('t5Bucket', rel, { numBuckets: nb, maxDistance: md,
                                             bidirectional: !causal });
    const c = cli(['buckets', 't5', '--num-buckets', String(nb), '--max-distance', String(md),
                   '--relative', '-700:700', '--json'].concat(causal ? ['--causal'] : []));
    const diff = js.error || sameValues(js.r.data, c.bucket);
    const dir = causal ? 'causal' : 'bidirectional';
    check(!diff, `t5Bucket(${nb} buckets, max distance ${md}, ${dir}) ${diff}`);
  }
  {
    const js = await call('relativeMatrix', 9, 9);
    const c = cli(['relative', '--length', '9', '--json']);
    const diff = js.error || sameValues(js.r.data, c.relative);
    check(!diff, `relativeMatrix(9, 9) ${diff}`);
  }
  {
    const js = await call('permutationDemo', 'the cat sat on the mat', 'the mat sat on the cat');
    const c = cli(['demo', 'permutation', '--first', 'the cat sat on the mat', '--second',
                   'the mat sat on the cat', '--json']);
    let worst = 0, worstScheme = '';
    let order = true;
    for (const s of js.r.schemes) {
      const ref = c.schemes[s.scheme];
      order = order && ref.order_aware === s.orderAware;
      if (!ref.order_aware) continue;  // rounding noise (about 1e-16) on both sides
      const u = Math.abs(ulps(s.pooledDifference, ref.pooled_difference));
      if (u > worst) { worst = u; worstScheme = s.scheme; }
    }
    console.log(`    permutation demo: largest difference ${worst} ULP (${worstScheme || '-'})`);
    check(order && worst <= PERMUTATION_MAX_ULP,
          `permutationDemo: every scheme's verdict as the CLI's, pooled differences within ` +
          `${PERMUTATION_MAX_ULP} ULP (largest ${worst})`);
  }
  {
    // Tokens 0 and 1 swapped: without a scheme the outputs swap too; ALiBi tells them apart.
    const perm = await page.evaluate(() => {
      const rows = (r) => ({ shape: [3, 1, 4], data: r.flat() });
      const qr = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]];
      const vr = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]];
      const swap = (r) => [r[1], r[0], r[2]];
      const gap = (o) => {
        const a = window.posenc.attention(rows(qr), rows(qr), rows(vr), o).data;
        const b = window.posenc.attention(rows(swap(qr)), rows(swap(qr)), rows(swap(vr)), o).data;
        const back = [...b.slice(4, 8), ...b.slice(0, 4), ...b.slice(8, 12)];
        return Math.max(...Array.from(a, (x, i) => Math.abs(x - back[i])));
      };
      return { none: gap({ mask: 'bidirectional' }),
               alibi: gap({ scheme: 'alibi', mask: 'bidirectional',
                            args: { slopes: { shape: [1], data: [0.5] } } }) };
    });
    check(perm.none < 1e-12 && perm.alibi > 1e-3,
          `attention: scheme none is permutation-equivariant (${perm.none}), ALiBi is not ` +
          `(${perm.alibi.toFixed(4)})`);
  }
  for (const [fn, a, argv] of [
    ['sinusoidalTable', [4, 0], ['table', 'sinusoidal', '--positions', '4', '--dim', '0']],
    ['sinusoidalTable', [4, 8, { base: 1 }],
     ['table', 'sinusoidal', '--positions', '4', '--dim', '8', '--base', '1']],
    ['t5Bucket', [[1, 2], { numBuckets: 1 }],
     ['buckets', 't5', '--num-buckets', '1', '--relative', '1,2']],
  ]) {
    const js = await call(fn, ...a);
    const msg = cliError(argv);
    check(js.error === msg, `${fn}(${JSON.stringify(a)}) throws the CLI's message "${msg}"` +
                            (js.error === msg ? '' : ` (got "${js.error}")`));
  }

  // Input only the page can give: non-integers, sizes past the page's limits, wrong shapes.
  for (const [fn, a, want] of [
    ['sinusoidalTable', [65536, 4096], 'num_positions * dim: got 268435456, expected at most 2^22'],
    ['sinusoidalTable', [2.5, 8], 'num_positions: got 2.5, expected an integer'],
    ['ropeCosSin', [[0, 1.5], 8], 'positions: got 1.5, expected an integer'],
    ['alibiBias', [64, 1024], 'num_heads * length^2: got 67108864, expected at most 2^22'],
    ['attention', [{ shape: [2, 1, 4], data: [1, 2] }, { shape: [2, 1, 4], data: [] },
                   { shape: [2, 1, 4], data: [] }], 'q: got 2, expected seq * heads * dim values'],
    ['ropeInvFreq', ['{"head_dim": 64, "rope_scaling": {"rope_type": "yarn"}}'], ''],
  ]) {
    const js = await call(fn, ...a);
    check(typeof js.error === 'string' && js.error.startsWith(want),
          `${fn}(${JSON.stringify(a).slice(0, 60)}) throws "${js.error}"`);
  }

  // ---- The controls.
  console.log('controls');
  const setControl = (panel, name, value) => page.evaluate(async ([panel, name, value]) => {
    const p = window.posencPlayground.panels[panel];
    const input = p.controls[name];
    input.value = value;
    input.dispatchEvent(new Event(input.tagName === 'SELECT' || input.type === 'text' ||
                                  input.tagName === 'TEXTAREA' ? 'change' : 'input'));
    await p.settled();
    const plain = (x) => (ArrayBuffer.isView(x) ? Array.from(x) : x);
    const last = p.last;
    const error = document.getElementById(input.id + '-error').textContent;
    const canvases = document.querySelectorAll('#pg-' + panel + ' canvas').length;
    return { error, canvases, last: last && JSON.parse(JSON.stringify(last, (k, v) => plain(v))) };
  }, [panel, name, value]);
  await setControl('sinusoidal', 'layout', 'split');
  await setControl('sinusoidal', 'base', '500');
  let r = await setControl('sinusoidal', 'dim', '96');
  let c = cli(['table', 'sinusoidal', '--positions', '64', '--dim', '96', '--base', '500',
               '--layout', 'split', '--format', 'json']);
  let diff = sameValues(r.last.table.data, c.data);
  check(!diff, `sinusoidal panel (d_model 96, base 500, split) draws the CLI's table ${diff}`);
  r = await setControl('sinusoidal', 'dim', '0');
  check(r.error === cliError(['table', 'sinusoidal', '--positions', '64', '--dim', '0']) &&
            r.canvases >= 3,
        `d_model 0: posenc's message beside the control ("${r.error}"), ${r.canvases} charts kept`);
  await setControl('sinusoidal', 'dim', '128');
  r = await setControl('rope', 'preset', 'qwen2.5-7b-instruct-yarn');
  c = cli(['inspect', path.join(args.configs, 'qwen2.5-7b-instruct-yarn.json'), '--json']);
  diff = sameValues(r.last.data, c.inv_freq);
  check(!diff && r.last.ropeType === 'yarn',
        `RoPE preset qwen2.5 YaRN: the CLI's frequencies ${diff}`);
  r = await setControl('rope', 'factor', '8');
  const edited = JSON.parse(await page.evaluate(() =>
      window.posencPlayground.panels.rope.controls.config.value));
  check(edited.rope_scaling.factor === 8, 'the factor control edits the config.json');
  const tmp = path.join(args.out, 'edited-config.json');
  fs.writeFileSync(tmp, JSON.stringify(edited));
  c = cli(['inspect', tmp, '--json']);
  diff = sameValues(r.last.data, c.inv_freq) ||
         sameValues([r.last.attentionFactor], [c.attention_factor]);
  check(!diff, `RoPE factor 8: the CLI's frequencies and attention factor for that config ${diff}`);
  // Dynamic NTK: the config keeps the trained length, the call runs at the context.
  await setControl('rope', 'rope_type', 'dynamic');
  await setControl('rope', 'original', '4096');
  r = await setControl('rope', 'context', '16384');
  const dynamic = JSON.parse(await page.evaluate(() =>
      window.posencPlayground.panels.rope.controls.config.value));
  fs.writeFileSync(tmp, JSON.stringify(dynamic));
  c = cli(['inspect', tmp, '--seq-len', '16384', '--json']);
  diff = sameValues(r.last.data, c.inv_freq) ||
         (dynamic.max_position_embeddings === 4096 ? '' : 'max_position_embeddings');
  check(!diff && c.effective_theta > c.theta,
        `dynamic NTK at 16,384 of 4,096 trained: the CLI's rescaled frequencies (base ` +
        `${c.theta} -> ${Math.round(c.effective_theta)}) ${diff}`);
  r = await setControl('rope', 'config', '{"head_dim": 64, "rope_theta": 1}');
  check(r.error.length > 0 && r.canvases >= 3,
        `an invalid config.json shows posenc's message ("${r.error}") and keeps the charts`);
  r = await setControl('rope', 'preset', 'gpt-neox-20b');
  r = await setControl('rope', 'rope_theta', '20000');
  const neox = JSON.parse(await page.evaluate(() =>
      window.posencPlayground.panels.rope.controls.config.value));
  fs.writeFileSync(tmp, JSON.stringify(neox));
  c = cli(['inspect', tmp, '--json']);
  diff = sameValues(r.last.data, c.inv_freq) || (r.last.rotaryDim === c.rotary_dim ? '' : 'rotary');
  check(!diff && neox.rotary_emb_base === 20000,
        `GPT-NeoX preset (partial rotary ${c.rotary_dim} of ${c.head_dim}), base 20000 edits ` +
        `rotary_emb_base: the CLI's frequencies ${diff}`);
  await setControl('rope', 'preset', 'llama-3.1-8b');
  r = await setControl('rope', 'pairing', 'interleaved');
  const sentence = await page.evaluate(() =>
      document.querySelector('#pg-rope .pg-sentence').textContent);
  check(!r.error && /dims \d+ and \d+, interleaved/.test(sentence),
        `RoPE pairing interleaved: "${sentence}"`);
  r = await setControl('alibi', 'heads', '12');
  c = cli(['alibi', '--heads', '12', '--length', '32', '--json']);
  diff = sameValues(r.last.slopes.data, c.slopes) || sameValues(r.last.bias.data, c.bias);
  check(!diff, `ALiBi panel (12 heads): the CLI's slopes and bias ${diff}`);
  await setControl('t5', 'max_distance', '300');
  r = await setControl('t5', 'num_buckets', '48');
  c = cli(['buckets', 't5', '--num-buckets', '48', '--max-distance', '300', '--relative',
           '-600:600', '--json']);
  diff = sameValues(r.last.buckets.data, c.bucket);
  check(!diff, `T5 panel (48 buckets, max distance 300): the CLI's buckets ${diff}`);
  r = await setControl('permutation', 'second', 'bites dog man');
  c = cli(['demo', 'permutation', '--second', 'bites dog man', '--json']);
  check(r.last.schemes.every((s) => s.orderAware === c.schemes[s.scheme].order_aware),
        'permutation panel: the CLI\'s verdict for each scheme');

  const a11y = await page.evaluate(() => {
    const controls = [...document.querySelectorAll('#playground-root input, #playground-root ' +
                                                   'select, #playground-root textarea')];
    const unlabelled = controls.filter((c) => !document.querySelector(`label[for="${c.id}"]`));
    const unreachable = controls.filter((c) => c.tabIndex < 0 || c.disabled);
    return { n: controls.length, unlabelled: unlabelled.map((c) => c.id),
             unreachable: unreachable.map((c) => c.id) };
  });
  check(a11y.n >= 20 && !a11y.unlabelled.length && !a11y.unreachable.length,
        `${a11y.n} controls, each with a label and in the tab order`);
  await page.focus('#pg-alibi-heads');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('4');
  await page.evaluate(() => window.posencPlayground.panels.alibi.settled());
  const keyed = await page.evaluate(() =>
      window.posencPlayground.panels.alibi.last.slopes.shape[0]);
  check(keyed === 4, 'typing into a focused control recomputes its panel');

  // ---- Speed: 20 updates per panel, alternating two values of one control.
  console.log(`speed: compute + redraw per update, median of 20 (budget ${UPDATE_BUDGET_MS} ms)`);
  const moves = { sinusoidal: ['dim', '128', '130'], rope: ['factor', '4', '8'],
                  alibi: ['heads', '8', '12'], t5: ['num_buckets', '32', '48'],
                  permutation: ['first', 'dog bites man', 'man bites dog'] };
  for (const [panel, [name, a, b]] of Object.entries(moves)) {
    const times = [];
    for (let i = 0; i < 20; ++i) {
      await setControl(panel, name, i % 2 ? a : b);
      times.push(await page.evaluate((p) => window.posencPlayground.panels[p].times.at(-1), panel));
    }
    times.sort((x, y) => x - y);
    const median = (times[9] + times[10]) / 2;
    check(median <= UPDATE_BUDGET_MS,
          `${panel}: median ${median.toFixed(1)} ms, max ${times[19].toFixed(1)} ms`);
  }
  await page.screenshot({ path: path.join(args.out, 'playground.png'), fullPage: true });
  check(errors.length === 0, `no console or page error${errors.length ? ': ' + errors[0] : ''}`);
  check(network.length === 0, `no network request${network.length ? ': ' + network[0] : ''}`);

  // ---- Without WebAssembly: the page says why.
  const noWasm = await context.newPage();
  await noWasm.addInitScript(() => { delete globalThis.WebAssembly; });
  await noWasm.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await noWasm.waitForFunction(() => window.posencPlayground &&
                                     window.posencPlayground.unavailable, null, { timeout: 20000 });
  const line = await noWasm.evaluate(() => document.querySelector('.pg-unavailable').textContent);
  check(/WebAssembly/.test(line), `without WebAssembly the page says so: "${line}"`);
  await browser.close();

  if (failures.length) {
    console.log(`playground test: ${failures.length} failure(s)`);
    process.exit(1);
  }
  console.log('playground test: all checks passed');
}

main().catch((e) => { console.error(e); process.exit(1); });
