// bench-ui.mjs: the browser side of `hearth-bench ui` (tests/src/ui_bench.rs). Prints
// `@@figure <name> <ms>` samples; the bench summarises them. Never asserts timings.
//
// - notes_first_paint / notes_interactive: the node's notes page over a project of N
//   notes, from navigation to the first contentful paint, and to the page marking
//   itself ready (`.page[data-ready]`: its list is shown); empty_*: the same over a
//   project with no notes (the reference).
// - keystroke_cross_device: a key typed in the node's UI until the character is in
//   the hub's UI (a second browser); keystroke_same_node: until it is in a second tab
//   of the node's UI (the reference, no replication).

import { config, launch, signIn, control, until, log, run } from './lib.mjs';

const bench = config.bench;
const RUNS = 10;

function figure(name, ms) {
  console.log(`@@figure ${name} ${ms.toFixed(2)}`);
}

async function loadNotes(context, project) {
  const page = await context.newPage();
  await page.goto(config.node.url);
  await page.evaluate((p) => localStorage.setItem('hearth.project', p), project);
  await page.goto('about:blank');
  await page.goto(new URL('#/notes', config.node.url).href);
  const ready = await page.waitForFunction(
    () => document.querySelector('.page-notes[data-ready]') && performance.now(),
    null,
    { polling: 'raf', timeout: 30000 },
  );
  const interactive = await ready.jsonValue();
  const paint = await page.evaluate(
    () => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
  );
  const items = await page.locator('[data-test=note-item]').count();
  await page.close();
  return { paint, interactive, items };
}

async function watch(page) {
  await page.evaluate(() => {
    const body = document.querySelector('[data-test=note-body]');
    window.__lens = [];
    let last = body.value.length;
    setInterval(() => {
      const len = body.value.length;
      if (len !== last) {
        last = len;
        window.__lens.push([len, performance.timeOrigin + performance.now()]);
      }
    }, 1);
  });
}

async function seenAt(page, len) {
  return until(
    () => page.evaluate((n) => window.__lens.find(([l]) => l >= n)?.[1], len),
    { timeout: 10000, interval: 5, what: `length ${len}` },
  );
}

async function openNote(browser, login, name) {
  const page = await signIn(browser, login, { name });
  await page.goto(new URL(`#/notes/${bench.note}`, page.url()).href);
  await page.waitForSelector('[data-test=note-body]');
  return page;
}

run(async () => {
  const browser = await launch();
  const node = await signIn(browser, config.node.login, { name: 'node' });
  const context = node.context();
  // The first load fills the HTTP cache; people reopen the page far more often.
  await loadNotes(context, bench.full);
  for (let i = 0; i < RUNS; i++) {
    for (const [name, project] of [['notes', bench.full], ['empty', bench.empty]]) {
      const r = await loadNotes(context, project);
      if (name === 'notes' && r.items === 0) throw new Error('the notes page showed no notes');
      figure(`${name}_first_paint`, r.paint);
      figure(`${name}_interactive`, r.interactive);
    }
  }
  log('page loads measured');

  // Login links are single use: the writer's browser gets a fresh one.
  const writer = await openNote(browser, await control('node-login'), 'writer');
  const sameNode = await context.newPage();
  await sameNode.goto(new URL(`#/notes/${bench.note}`, config.node.url).href);
  await sameNode.waitForSelector('[data-test=note-body]');
  const hub = await openNote(browser, config.hub.login, 'hub');
  await watch(sameNode);
  await watch(hub);
  const body = writer.locator('[data-test=note-body]');
  await body.click();
  await writer.keyboard.press('Control+End');
  let len = await body.evaluate((el) => el.value.length);
  for (let i = 0; i < bench.keys; i++) {
    const t0 = await writer.evaluate(() => performance.timeOrigin + performance.now());
    await writer.keyboard.type(String.fromCharCode(97 + (i % 26)));
    len += 1;
    const [remote, local] = await Promise.all([seenAt(hub, len), seenAt(sameNode, len)]);
    figure('keystroke_cross_device', remote - t0);
    figure('keystroke_same_node', local - t0);
    // Let each keystroke stand alone, as a person's do at a thinking pace.
    await new Promise((r) => setTimeout(r, 120));
  }
  log('keystrokes measured');
  await browser.close();
});
