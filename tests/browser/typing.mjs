// typing.mjs: two people type into the same paragraph of one note at once, one in the
// hub's UI and one in the node's, first live and then while the node is cut off from
// the hub; every keystroke of both is kept, each caret stays right after its writer's
// last character, emoji (a ZWJ family, a flag) stay whole, and both UIs and both
// servers end with the same text.
//
// Given by ui_typing.rs: `note` (the note's id, already on both), `start` (its text).

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

const EDITOR = '[data-test=note-body]';
const HUB_AT = 'the hub writes here';
const NODE_AT = 'the laptop writes there';

// Each writer's chunks, typed a code point at a time (as page.keyboard.type does) and
// interleaved with the other's. Distinct letters per writer, so each run is findable.
const LIVE = {
  hub: [' red', ' 👩‍👩‍👧', ' and', ' 🇫🇷', ' ok'],
  node: [' BLUE', ' 🇫🇷', ' WITH', ' 👩‍👩‍👧', ' YES'],
};
const CUT = {
  hub: [' while', ' cut 👩‍👩‍👧'],
  node: [' OFFLINE', ' TOO 🇫🇷'],
};

/** The editor's text, caret and save state. */
async function editorState(page) {
  return page.$eval(EDITOR, (el) => ({
    text: el.value,
    caret: el.selectionEnd,
    collapsed: el.selectionStart === el.selectionEnd,
    state: document.querySelector('[data-test=note-save-state]')?.dataset.state,
  }));
}

/** The note as the page's own server holds it. */
async function serverText(page) {
  return page.evaluate(async (id) => (await (await fetch(`/api/v1/notes/${id}`)).json()).content, config.note);
}

async function open(page) {
  await page.goto(new URL(`#/notes/${config.note}`, page.url()).href);
  await page.waitForSelector(`${EDITOR}:not([disabled])`);
  await until(async () => (await editorState(page)).text === config.start, { what: 'the note shows its text' });
}

/** Puts the caret right after `marker` in the editor. */
async function caretAfter(page, marker) {
  await page.$eval(
    EDITOR,
    (el, m) => {
      el.focus();
      const at = el.value.indexOf(m) + m.length;
      el.setSelectionRange(at, at);
    },
    marker,
  );
}

/** Both writers type their i-th chunks at once, with small different delays. */
async function typeTogether(hub, node, chunks) {
  for (let i = 0; i < chunks.hub.length; i++) {
    await Promise.all([
      hub.keyboard.type(chunks.hub[i], { delay: 12 }),
      node.keyboard.type(chunks.node[i], { delay: 17 }),
    ]);
  }
}

/** Waits until both UIs show one text, saved, and both servers hold it. */
async function converged(hub, node, timeout) {
  let last = null;
  try {
    return await until(
      async () => {
        const [h, n] = [await editorState(hub), await editorState(node)];
        const servers = { hub: await serverText(hub), node: await serverText(node) };
        last = { hubUi: h, nodeUi: n, servers };
        if (h.text !== n.text || h.state !== 'saved' || n.state !== 'saved') return null;
        if (servers.hub !== h.text || servers.node !== h.text) return null;
        return { hub: h, node: n };
      },
      { timeout, interval: 100, what: 'both UIs and both servers agree' },
    );
  } catch (e) {
    // Say what still differed: which UI or server, and its save state.
    const status = await node.evaluate(async () => (await fetch('/api/v1/status')).json()).catch(() => null);
    throw new Error(`${e.message}; last seen ${JSON.stringify(last)}; node status ${JSON.stringify(status)}`);
  }
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const count = (text, part) => text.split(part).length - 1;

function check(result, typed, what) {
  const { text } = result.hub;
  log(`${what}: ${JSON.stringify(text)}`);
  for (const [who, run] of Object.entries(typed)) {
    assert(text.includes(run), `${what}: the ${who}'s keystrokes ${JSON.stringify(run)} are all there, in order`);
    const mine = result[who];
    assert(mine.collapsed, `${what}: the ${who}'s caret is a caret`);
    assert(
      text.slice(0, mine.caret).endsWith(run),
      `${what}: the ${who}'s caret (${mine.caret}) is right after its last character`,
    );
  }
  assert(!LONE_SURROGATE.test(text), `${what}: no emoji was split`);
  const all = Object.values(typed).join('');
  for (const emoji of ['👩‍👩‍👧', '🇫🇷']) {
    assert(count(text, emoji) === count(all, emoji), `${what}: every ${emoji} is whole`);
  }
  // Nothing else changed: without both runs the note is as it was.
  assert(
    text.replace(typed.hub, '').replace(typed.node, '') === config.start,
    `${what}: the rest of the note is untouched`,
  );
}

run(async () => {
  const browser = await launch();
  const hub = await signIn(browser, config.hub.login, { name: 'hub' });
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', { what: 'node online' });
  await open(hub);
  await open(node);
  await caretAfter(hub, HUB_AT);
  await caretAfter(node, NODE_AT);

  // Live: both at once, each keystroke on its way as it is typed.
  await typeTogether(hub, node, LIVE);
  const typed = { hub: LIVE.hub.join(''), node: LIVE.node.join('') };
  check(await converged(hub, node, 20000), typed, 'live');
  log('live typing kept');
  await shot(hub, 'typing-hub-live');

  // Cut: each side keeps typing against its own server.
  await control('cut');
  await typeTogether(hub, node, CUT);
  typed.hub += CUT.hub.join('');
  typed.node += CUT.node.join('');
  await until(async () => (await editorState(node)).state === 'saved', { what: 'the node saved locally' });
  await until(async () => (await editorState(hub)).state === 'saved', { what: 'the hub saved' });
  const apart = [await editorState(hub), await editorState(node)];
  log(`cut: hub ${JSON.stringify(apart[0].text)}`);
  log(`cut: node ${JSON.stringify(apart[1].text)}`);
  assert(!apart[0].text.includes(CUT.node.join('')), 'while cut, the hub has not seen the laptop’s words');
  assert(!apart[1].text.includes(CUT.hub.join('')), 'while cut, the laptop has not seen the hub’s words');
  await shot(node, 'typing-node-cut');
  log('typed while cut');

  await control('heal');
  check(await converged(hub, node, 60000), typed, 'after the heal');
  await shot(node, 'typing-node-healed');
  await node.setViewportSize({ width: 390, height: 844 });
  await shot(node, 'typing-node-phone', { fullPage: false });

  for (const [name, page] of [['hub', hub], ['node', node]]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
