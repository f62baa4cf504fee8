// Browser test of `posenc report` and `posenc plot`: opens the generated pages
// in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// and checks that
//   - every script and style is inline and the page makes no network request
//     (all non-file requests are also aborted, so the page must work offline);
//   - the page logs no console error and throws no page error;
//   - every figure rendered and has drawn marks (scenegraph items of data
//     marks), every figure offers "Save as SVG" / "Save as PNG";
//   - hovering a heatmap shows a tooltip with values;
//   - a 1024 x 1024 heatmap (posenc plot) renders in under 2 s;
//   - the corrected captions state what the data file behind their figure says
//     (checkStatements), section 9 shows the committed run by default and no
//     facet grid has an empty panel;
// and writes full-page screenshots into --out.
//
// Usage: node tests/report/browser_test.mjs --posenc build/release/cli/posenc --out DIR
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const HEATMAP_BUDGET_MS = 2000;

function parseArgs(argv) {
  const args = { posenc: null, out: null, chromium: '/usr/bin/chromium' };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || i + 1 >= argv.length) {
      throw new Error(
          `usage: browser_test.mjs --posenc PATH --out DIR [--chromium PATH]; got ${argv[i]}`);
    }
    args[key] = argv[i + 1];
  }
  if (!args.posenc || !args.out) throw new Error('usage: browser_test.mjs --posenc PATH --out DIR');
  return args;
}

const failures = [];
function check(ok, what) {
  if (ok) {
    console.log(`  ok   ${what}`);
  } else {
    console.log(`  FAIL ${what}`);
    failures.push(what);
  }
}

function run(posenc, args) {
  console.log(`$ posenc ${args.join(' ')}`);
  const out = execFileSync(posenc, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  process.stdout.write(out.split('\n').map((l) => (l ? '    ' + l : l)).join('\n'));
}

async function checkPage(context, file, screenshot, expectHeatmapBudget) {
  const page = await context.newPage();
  const consoleErrors = [];
  const network = [];
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => consoleErrors.push(String(err)));
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith('data:') && !url.startsWith('blob:') && url !== pathToFileURL(file).href) {
      network.push(url);
    }
  });
  console.log(`page ${file}`);
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.posencReport && window.posencReport.done, null,
                             { timeout: 120000 });
  const info = await page.evaluate(() => {
    const r = window.posencReport;
    return {
      errors: r.errors,
      figures: r.figures.map((f) => ({ id: f.id, kind: f.kind, path: f.path, cells: f.cells,
                                       ms: f.ms, prepMs: f.prepMs, marks: f.marks })),
      containers: document.querySelectorAll('.chart[id^="chart-"]').length,  // not the playground's
      externalScripts: [...document.querySelectorAll('script[src]')].map((s) => s.src),
      externalStyles: [...document.querySelectorAll('link[rel=stylesheet]')].map((l) => l.href),
      exportMenus: [...document.querySelectorAll('.chart')].map((el) => {
        const labels = [...el.querySelectorAll('.vega-actions a')].map((a) => a.textContent);
        return labels.some((t) => /SVG/.test(t)) && labels.some((t) => /PNG/.test(t));
      }),
    };
  });
  // The report's live playground (tests/report/playground_test.mjs tests it in depth): where
  // the page carries it, every panel draws.
  if (await page.evaluate(() => !!document.getElementById('playground-root'))) {
    await page.waitForFunction(() => window.posencPlayground &&
                                     (window.posencPlayground.ready ||
                                      window.posencPlayground.unavailable), null,
                               { timeout: 60000 });
    const pg = await page.evaluate(() => ({
      ready: window.posencPlayground.ready, unavailable: window.posencPlayground.unavailable,
      panels: Object.keys(window.posencPlayground.panels).length }));
    check(pg.ready && pg.panels >= 5,
          `the live playground drew its ${pg.panels} panels (${pg.unavailable || 'ready'})`);
  }
  check(consoleErrors.length === 0, `no console errors (${consoleErrors.join(' | ') || 'none'})`);
  check(network.length === 0, `no network requests (${network.join(', ') || 'none'})`);
  check(info.externalScripts.length === 0 && info.externalStyles.length === 0,
        'every script and style is inline');
  check(info.errors.length === 0, `no figure failed (${info.errors.join(' | ') || 'none'})`);
  check(info.figures.length === info.containers && info.containers > 0,
        `${info.figures.length} of ${info.containers} figures rendered`);
  for (const f of info.figures) {
    const where = f.path !== 'chart' ? ', ' + f.path : '';
    check(f.marks > 0, `${f.id}: ${f.marks} marks drawn (${f.kind}${where}, ` +
                           `${f.ms.toFixed(0)} ms, spec built in ${f.prepMs.toFixed(0)} ms)`);
    if (f.kind === 'heatmap' && f.cells <= 1024 * 1024) {
      check(f.ms < HEATMAP_BUDGET_MS,
            `${f.id}: ${f.cells} cells in ${f.ms.toFixed(0)} ms < ${HEATMAP_BUDGET_MS} ms`);
    }
  }
  check(info.exportMenus.every(Boolean), 'every figure offers Save as SVG and Save as PNG');
  if (expectHeatmapBudget) {
    check(info.figures.some((f) => f.kind === 'heatmap' && f.cells >= 1024 * 1024),
          'a 1024 x 1024 heatmap was rendered');
  }
  // Hover the middle of each heatmap's plot area: a tooltip with a value shows.
  for (const f of info.figures.filter((x) => x.kind === 'heatmap')) {
    const canvas = page.locator(`#chart-${f.id} canvas`).first();
    await canvas.scrollIntoViewIfNeeded();
    const box = await canvas.boundingBox();
    const origin = await page.evaluate((id) => {
      const v = window.posencReport.figures.find((x) => x.id === id).view;
      return { x: v.origin()[0], y: v.origin()[1], w: v.width(), h: v.height() };
    }, f.id);
    await page.mouse.move(box.x + origin.x + origin.w * 0.37, box.y + origin.y + origin.h * 0.41);
    await page.waitForTimeout(150);
    const tip = await page.evaluate(() => {
      const el = document.getElementById('vg-tooltip-element');
      return el && el.classList.contains('visible') ? el.textContent : '';
    });
    const shown = tip.replace(/\s+/g, ' ').slice(0, 80);
    check(/\d/.test(tip), `${f.id}: hover shows a tooltip (${shown})`);
    await page.mouse.move(0, 0);
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`  screenshot ${screenshot}`);
  await page.close();
}

// A minimal CSV reader (the report's quoting: "..." with "" for a quote).
function readCsv(file) {
  const rows = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    const cells = [];
    let cell = '', quoted = false;
    for (let i = 0; i < line.length; ++i) {
      const ch = line[i];
      if (quoted && ch === '"' && line[i + 1] === '"') { cell += '"'; ++i; }
      else if (ch === '"') quoted = !quoted;
      else if (ch === ',' && !quoted) { cells.push(cell); cell = ''; }
      else cell += ch;
    }
    cells.push(cell);
    rows.push(cells);
  }
  return rows;
}

// Records of a chart's CSV as objects keyed by the header.
function csvRecords(file) {
  const [header, ...rows] = readCsv(file);
  return rows.map((r) => Object.fromEntries(header.map((h, i) => [h, r[i]])));
}

// Checks the page's text against the data behind each figure: every corrected
// caption states what the data file says.
async function checkStatements(context, file, dataDir) {
  const page = await context.newPage();
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.posencReport && window.posencReport.done, null,
                             { timeout: 120000 });
  const caption = (id) => page.evaluate((fid) => {
    const el = document.querySelector(`#fig-${fid} figcaption`);
    return el ? el.innerText.replace(/\s+/g, ' ') : '';
  }, id);
  const text = (await page.evaluate(() => document.body.innerText)).replace(/\s+/g, ' ');
  const csv = (id) => path.join(dataDir, `${id}.csv`);

  // Sinusoidal: the near-constant dimensions, counted from the table.
  const [head, ...rows] = readCsv(csv('sinusoidal_table'));
  const cols = head.length - 1;
  let flat = 0;
  for (let c = 1; c <= cols; ++c) {
    const v = rows.map((r) => Number(r[c]));
    if (Math.max(...v) - Math.min(...v) < 0.1) ++flat;
  }
  const sinCaption = await caption('sinusoidal_table');
  check(sinCaption.includes(`${flat} of the ${cols} dimensions`) &&
        !sinCaption.includes('right half of the table is almost constant'),
        `sinusoidal_table: caption says ${flat} of ${cols} dimensions are near-constant`);
  // PE(i).PE(j): the caption's range is the data's.
  const sim = readCsv(csv('sinusoidal_similarity')).slice(1)
    .flatMap((r) => r.slice(1).map(Number));
  const [simLo, simHi] = [Math.min(...sim).toFixed(2), Math.max(...sim).toFixed(2)];
  check((await caption('sinusoidal_similarity')).includes(`from ${simLo} to ${simHi}`),
        `sinusoidal_similarity: caption range ${simLo}..${simHi} matches the data`);
  check(!(await caption('sinusoidal_dot')).includes('symmetric in k'),
        'sinusoidal_dot: no claim about k < 0 the plot does not show');

  // T5: the distance from which every farther one shares the last bucket.
  const t5 = csvRecords(csv('t5_buckets'));
  const saturation = (dir, sign) => {
    const b = new Map(t5.filter((r) => r.direction === dir)
      .map((r) => [Number(r.relative), Number(r.bucket)]));
    const last = b.get(sign * 300);
    let n = 300;
    while (n > 1 && b.get(sign * (n - 1)) === last) --n;
    return n;
  };
  const bi = saturation('bidirectional', 1), causal = saturation('causal', -1);
  const t5Caption = await caption('t5_buckets');
  check(t5Caption.includes(
    `every distance from ${bi} on (bidirectional; causal: from ${causal})`) &&
        !t5Caption.includes('everything past max_distance'),
        `t5_buckets: saturation from ${bi} (bidirectional) / ${causal} (causal), as the data`);

  // Shaw: the cells are the clip values and k is one value on the whole page.
  const shaw = csvRecords(csv('shaw_clip'));
  const k = Math.max(...shaw.map((r) => Number(r.clipped)));
  check(shaw.every((r) => Number(r.clipped) ===
                          Math.max(-k, Math.min(k, Number(r.j) - Number(r.i)))),
        `shaw_clip: every cell is clip(j - i, -${k}, ${k})`);
  const ks = [...text.matchAll(/Shaw[^.;]*?\bk = (\d+)/g)].map((m) => Number(m[1]));
  const compare = csvRecords(csv('comparison'));
  const shawRow = csvRecords(csv('comparison_costs')).find((r) => r.method === 'Shaw');
  check(ks.length > 0 && ks.every((v) => v === k) && Object.values(shawRow).join(' ')
    .includes(`k = ${k}`), `Shaw's k is ${k} throughout (page: ${ks.join(', ')})`);

  // RoPE scaling: the legend lists only regions some pair is in; dynamic's lowest ratio.
  const scaling = csvRecords(csv('rope_scaling'));
  const regions = new Set(scaling.map((r) => r.region));
  const legend = await page.evaluate(() => window.posencReport.figures
    .find((x) => x.id === 'rope_scaling').view.scale('color').domain());
  check(legend.length === regions.size && legend.every((r) => regions.has(r)),
        `rope_scaling: legend ${legend.join(', ')} = the regions of the data`);
  const dynamic = scaling.filter((r) => r.scheme.startsWith('dynamic'));
  const lowest = Math.round(1 / Math.min(...dynamic.map((r) => Number(r.ratio))));
  check((await caption('rope_scaling')).includes(`the lowest pair reaches 1/${lowest}`),
        `rope_scaling: dynamic's lowest pair at 1/${lowest}, as the data`);

  // Learned: the comparison row speaks of its own rows; the message is printed once.
  const learned = Object.values(compare.find((r) => r.method === 'learned')).join(' | ');
  const tableRows = Number(((await caption('comparison')).match(/learned table (\d+) rows/) ||
                             [0, 0])[1]);
  const boundedL = Number(Object.keys(compare[0]).find((h) => h.startsWith('bounded'))
    .match(/L = (\d+)/)[1]);
  check(tableRows > 0 && learned.includes(`position ${tableRows}: InvalidArgument`) &&
        (boundedL <= tableRows || learned.includes(`over its ${tableRows} rows`)),
        `comparison: the learned row is measured within its ${tableRows} rows (L = ${boundedL})`);
  const message = text.match(/Lookup says: (.*?\]\S*)/);
  const count = message ? text.split(message[1].slice(0, 40)).length - 1 : 0;
  check(count === 1, `the learned table's error message is on the page once (${count})`);

  // Section 9 is never empty, and the measured column is filled.
  check(text.includes('Results of the committed run') &&
        (await caption('experiment_length')).length > 0,
        'section 9 shows the committed run by default');
  const measured = Object.keys(compare[0]).find((h) => h.startsWith('works past'));
  check(measured && compare.filter((r) => /^\d/.test(r[measured])).length >= 5,
        'comparison: the measured column is filled');

  // The comparison table states the lesson's four requirements, continuous included.
  const requirements = ['bounded', 'continuous', 'unique', 'relative'];
  check(requirements.every((w) => Object.keys(compare[0]).some((h) => h.startsWith(w))),
        'comparison: bounded, continuous, unique and relative columns');

  // Costs: every method timed on one shape, in one unit, through its kernel.
  const costs = csvRecords(csv('comparison_costs'));
  const nsKey = Object.keys(costs[0]).find((h) => h.startsWith('ns per token'));
  const ratioKey = Object.keys(costs[0]).find((h) => h.startsWith('×'));
  check(nsKey && /\[1, \d+, \d+, \d+\]/.test(nsKey) && ratioKey &&
        costs.length === compare.length &&
        costs.every((r) => /^\d+ \(/.test(r[nsKey]) && /^\d+\.\d+×$/.test(r[ratioKey])),
        `comparison_costs: all ${costs.length} methods on one shape, one unit (${nsKey})`);
  // Short cells: the details are numbered notes under each table.
  const cells = await page.evaluate(() => [...document.querySelectorAll(
    '#fig-comparison td, #fig-comparison_costs td')].map((td) => td.textContent));
  const longest = cells.reduce((a, c) => (c.length > a.length ? c : a), '');
  const notes = await page.evaluate(() => [...document.querySelectorAll(
    '#fig-comparison ol.notes li, #fig-comparison_costs ol.notes li')].length);
  const markers = cells.filter((c) => /\[\d+\]$/.test(c)).length;
  check(longest.length <= 60 && notes > 0 && markers === notes,
        `comparison tables: cells <= 60 characters (longest ${longest.length}: "${longest}"), ` +
        `${markers} notes referenced and listed`);

  // No empty panel: the attention maps fill their grid (the facet's columns).
  const schemes = new Set(csvRecords(csv('attention_maps')).map((r) => r.scheme));
  check(schemes.size % 3 === 0 && schemes.has('sinusoidal') && schemes.has('learned'),
        `attention_maps: ${schemes.size} panels (sinusoidal and learned) fill 3 columns`);
  await page.close();
}

async function main() {
  const args = parseArgs(process.argv);
  const out = path.resolve(args.out);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const reportDir = path.join(out, 'report');
  // Without --experiment: the report uses the repository's committed extrapolation run by
  // default, so its figures are rendered and checked too.
  run(args.posenc, ['report', '--quick', '-o', reportDir]);
  const html = path.join(reportDir, 'index.html');
  check(fs.existsSync(html), `${html} written`);
  const plot = path.join(out, 'plot_1024.html');
  run(args.posenc, ['plot', 'sinusoidal', '--positions', '1024', '--dim', '1024', '-o', plot]);

  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posenc-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: args.chromium,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    // Anything that is not the local file is refused: the page must work offline.
    await context.route((url) => url.protocol !== 'file:' && url.protocol !== 'data:',
                        (route) => route.abort());
    await checkPage(context, html, path.join(out, 'report.png'), false);
    await checkStatements(context, html, path.join(reportDir, 'data'));
    await checkPage(context, plot, path.join(out, 'plot_1024.png'), true);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  if (failures.length) {
    console.log(`browser test: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log('browser test: all checks passed');
}

main().catch((e) => {
  console.error(`browser test: ${e.stack || e}`);
  process.exit(1);
});
