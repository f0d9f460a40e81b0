// offline.mjs: the laptop journey of issue 13. With the hub stopped, a note and a task
// are created and edited in the node's UI, which says it is offline with changes
// waiting. The hub starts while the node is still cut off from it, and its UI is opened
// on the notes and tasks pages: neither is there yet. The link heals, and both appear
// in the hub's open pages without a reload, with their edits; the node says online,
// nothing waiting.

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

const t = (name) => `[data-test="${name}"]`;

async function go(page, hash) {
  await page.goto(new URL(`#/${hash}`, page.url()).href);
  await page.waitForSelector(`.page-${hash.split('/')[0]}[data-ready]`, { timeout: 15000 });
}

const topbar = async (page, id) => (await page.locator(`#${id}`).textContent()).trim();

run(async () => {
  const browser = await launch();
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await until(async () => (await topbar(node, 'hub-status')) === 'Online', { timeout: 30000, what: 'node online' });
  await control('stop-hub');
  await until(async () => (await topbar(node, 'hub-status')) === 'Offline', { timeout: 30000, what: 'node offline' });
  assert(await node.locator('.banner').isVisible(), 'the offline banner shows');

  // A note, created and edited offline.
  await go(node, 'notes');
  await node.click(t('note-new'));
  await node.waitForSelector(t('note-body'));
  await node.fill(t('note-title'), 'Packing list');
  await node.click(t('note-body'));
  await node.keyboard.type('- passport\n- charger\n');
  await node.waitForSelector(`${t('note-save-state')}[data-state="saved"]`, { timeout: 15000 });
  await node.keyboard.type('- sunscreen ☀️');
  await node.waitForSelector(`${t('note-save-state')}[data-state="saved"]`, { timeout: 15000 });
  const noteId = await node.locator(`${t('note-item')}.active, ${t('note-item')}[aria-current]`).first().getAttribute('data-id').catch(() => null);
  await shot(node, 'offline-node-note');

  // A task, created and edited offline.
  await go(node, 'tasks');
  await node.fill(t('task-quick-add'), 'Book the train');
  await node.press(t('task-quick-add'), 'Enter');
  await node.locator(t('task-item'), { hasText: 'Book the train' }).locator(t('task-open')).click();
  await node.waitForSelector(t('task-detail'));
  await node.fill(t('task-notes'), 'the 8:15, window seat');
  await node.locator(t('task-notes')).blur();
  await node.waitForSelector(`${t('save-state')}[data-state="saved"]`, { timeout: 15000 });
  await until(async () => /^[1-9]\d* waiting$/.test(await topbar(node, 'pending-changes')), {
    timeout: 10000,
    what: 'the node counts its waiting changes',
  });
  await shot(node, 'offline-node-task');
  log('offline edits made', noteId ?? '');

  // The hub comes back, but the node cannot reach it yet: its UI has neither.
  await control('cut');
  const login = await control('start-hub');
  const hubNotes = await signIn(browser, login, { name: 'hub notes' });
  await go(hubNotes, 'notes');
  const hubTasks = await hubNotes.context().newPage();
  hubTasks.errors = [];
  hubTasks.on('pageerror', (e) => hubTasks.errors.push(e.message));
  await hubTasks.goto(new URL('#/tasks', hubNotes.url()).href);
  await hubTasks.waitForSelector('.page-tasks[data-ready]');
  for (const page of [hubNotes, hubTasks]) await page.evaluate(() => (window.__sameDocument = true));
  assert((await hubNotes.locator(t('note-item'), { hasText: 'Packing list' }).count()) === 0, 'the note is not on the hub yet');
  assert((await hubTasks.locator(t('task-item'), { hasText: 'Book the train' }).count()) === 0, 'the task is not on the hub yet');

  // The link heals: both appear, live.
  await control('heal');
  await hubNotes.locator(t('note-item'), { hasText: 'Packing list' }).waitFor({ timeout: 30000 });
  await hubTasks.locator(t('task-item'), { hasText: 'Book the train' }).waitFor({ timeout: 30000 });
  for (const page of [hubNotes, hubTasks]) {
    assert(await page.evaluate(() => window.__sameDocument === true), 'no reload happened');
  }
  await shot(hubNotes, 'offline-hub-notes-arrived');
  await hubNotes.locator(t('note-item'), { hasText: 'Packing list' }).click();
  await until(async () => (await hubNotes.locator(t('note-body')).inputValue()).includes('sunscreen ☀️'), {
    what: 'the note with every edit',
  });
  assert((await hubNotes.locator(t('note-body')).inputValue()) === '- passport\n- charger\n- sunscreen ☀️', 'the note, exactly');
  await hubTasks.locator(t('task-item'), { hasText: 'Book the train' }).locator(t('task-open')).click();
  await until(async () => (await hubTasks.locator(t('task-notes')).inputValue()) === 'the 8:15, window seat', {
    what: 'the task with its edit',
  });
  await shot(hubTasks, 'offline-hub-task-arrived');

  await until(async () => (await topbar(node, 'hub-status')) === 'Online', { timeout: 30000, what: 'node online again' });
  await until(async () => (await topbar(node, 'pending-changes')) === '0 waiting', { timeout: 30000, what: 'nothing waiting' });
  for (const [name, page] of [['node', node], ['hub', hubNotes], ['hub tasks', hubTasks]]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
