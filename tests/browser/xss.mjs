// xss.mjs: a note whose title and content hold markup (a `<script>`, an `<img onerror>`,
// a `javascript:` link), written through the API as a peer or a tool would, shows as the
// characters it is in the notes list, the search results, the title, the editor and the
// preview, on the hub and on the node: no script runs, no element comes from the note.
//
// Given by ui_xss.rs: `note` (the note's id, already on both), `title` and `content`.

import { config, launch, signIn, shot, assert, until, log, run } from './lib.mjs';

const SCRIPT = '<script>window.__pwned=1</script>';
const IMG = '<img src=x onerror="window.__pwned=1">';

/** Elements the note could have smuggled into the page's content. */
async function smuggled(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('main img, main script, main iframe, main svg, main object, main embed, main style')].map(
      (el) => el.outerHTML.slice(0, 80),
    ),
  );
}

async function clean(page, where) {
  assert((await page.evaluate(() => window.__pwned)) === undefined, `${where}: no script of the note ran`);
  const found = await smuggled(page);
  assert(found.length === 0, `${where}: no element from the note: ${found.join(' ')}`);
  const links = await page.$$eval('[data-test=note-preview] a', (as) => as.map((a) => a.getAttribute('href')));
  assert(links.every((href) => href === null || /^(https?:|mailto:|#|\/(?!\/))/i.test(href)), `${where}: safe links only: ${links}`);
}

async function visit(page, server) {
  const dialogs = [];
  page.on('dialog', (d) => (dialogs.push(d.message()), d.dismiss()));
  await page.goto(new URL('#/notes', page.url()).href);
  const item = page.locator(`[data-test=note-item][data-id="${config.note}"]`);
  await item.waitFor();
  assert((await item.textContent()).includes(IMG), `${server}: the list shows the title's characters`);
  await clean(page, `${server} list`);

  await page.fill('[data-test=notes-search]', 'pwned');
  await until(async () => (await page.locator('[data-test=note-item] .note-item-snippet').count()) > 0, { what: `${server}: a search hit` });
  await clean(page, `${server} search`);
  await page.fill('[data-test=notes-search]', '');

  await page.goto(new URL(`#/notes/${config.note}`, page.url()).href);
  await page.waitForSelector('[data-test=note-body]:not([disabled])');
  assert((await page.inputValue('[data-test=note-title]')) === config.title, `${server}: the title field holds the title as written`);
  assert((await page.inputValue('[data-test=note-body]')) === config.content, `${server}: the editor holds the text as written`);
  for (const mode of ['split', 'preview']) {
    await page.click(`[data-test=note-mode-${mode}]`);
    const shown = await page.locator('[data-test=note-preview]').innerText();
    for (const text of [SCRIPT, IMG]) assert(shown.includes(text), `${server} ${mode}: the preview shows ${text} as text`);
    await clean(page, `${server} ${mode}`);
  }
  await shot(page, `xss-${server}-preview`);
  await page.click('[data-test=note-mode-split]');
  await shot(page, `xss-${server}-split`);
  assert(dialogs.length === 0, `${server}: no dialog opened: ${dialogs}`);
  assert(page.errors.length === 0, `${server}: page errors: ${page.errors.join(' | ')}`);
  log(`${server}: the note renders as text`);
}

run(async () => {
  const browser = await launch();
  await visit(await signIn(browser, config.hub.login, { name: 'hub' }), 'hub');
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await visit(node, 'node');
  await node.setViewportSize({ width: 390, height: 844 });
  await shot(node, 'xss-node-phone', { fullPage: false });
  await browser.close();
});
