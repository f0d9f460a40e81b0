// pairing.mjs: a pairing request approved on the hub's devices page, and the other
// admin pages on the way. Run by tests/tests/it/ui_pairing.rs, which answers:
// `seed <day>` (usage and audit rows for that UTC day), `pair` (starts a laptop's
// `hearth pair`; answers its code, name and the key fingerprint it printed) and
// `paired` (waits for that command to end paired).
//
// The request must appear without a reload, with the laptop's name and the very
// fingerprint the laptop printed; Approve must complete the laptop's command and move
// the device to the paired list. Screenshots: settings, usage, audit and devices (with
// the request, then paired) on the hub, devices on the node, and the four pages at a
// phone's width, each light and dark.

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

const t = (name) => `[data-test="${name}"]`;

async function open(page, hash, name) {
  await page.goto(new URL(`#/${hash}`, page.url()).href);
  await page.waitForSelector(`.page-${name}[data-ready]`, { timeout: 15000 });
}

run(async () => {
  const browser = await launch();
  const hub = await signIn(browser, config.hub.login, { name: 'hub' });
  await until(() => hub.evaluate(async () => (await import('/assets/js/api.js')).events.state === 'open'), {
    what: 'the event stream is open',
  });
  await control('seed', new Date().toISOString().slice(0, 10));

  // Settings: every provider listed with its key state, never a key.
  await open(hub, 'settings', 'settings');
  assert((await hub.locator(t('provider-row')).count()) === 3, 'three providers');
  assert((await hub.locator(t('provider-key')).first().inputValue()) === '', 'no key in a field');
  await shot(hub, 'hub-settings');
  log('settings ok');

  // Usage: a priced model with its estimate, an unknown one with none.
  await open(hub, 'usage?days=7', 'usage');
  assert((await hub.locator(t('usage-bar')).count()) === 7, 'a bar per day');
  const byModel = hub.locator(t('usage-by-model'));
  const sonnet = await byModel.locator('tbody tr', { hasText: 'claude-sonnet-4-5' }).textContent();
  assert(sonnet.includes('$0.48'), `sonnet's estimate: ${sonnet}`);
  const llama = await byModel.locator('tbody tr', { hasText: 'llama3.1' }).textContent();
  assert(llama.trim().endsWith('—'), `no estimate for an unknown model: ${llama}`);
  const total = await byModel.locator('tfoot').textContent();
  assert(total.includes('160,000') && total.includes('$0.48*'), `totals: ${total}`);
  await shot(hub, 'hub-usage');
  log('usage ok');

  // Audit log: newest first, the failed one marked.
  await open(hub, 'audit', 'audit');
  const tools = await hub.locator(t('audit-tool-name')).allTextContents();
  assert(tools.join(',') === 'tasks_create,notes_delete,notes_create', `newest first: ${tools}`);
  assert((await hub.locator(`${t('audit-row')}.failed`).count()) === 1, 'one failed row');
  await shot(hub, 'hub-audit');
  log('audit ok');

  // Devices: the lab's node is paired; no request yet.
  await open(hub, 'devices', 'devices');
  assert((await hub.locator(t('pending-request')).count()) === 0, 'no request yet');
  await hub.locator(t('device-row'), { hasText: 'test-node' }).waitFor();
  // A reload would clear this mark: the request must arrive live.
  await hub.evaluate(() => (window.__samePage = true));

  const laptop = await control('pair');
  log(`laptop asks: ${laptop.name} ${laptop.fingerprint} ${laptop.code}`);
  const request = hub.locator(t('pending-request'));
  await request.waitFor({ timeout: 15000 });
  assert(await hub.evaluate(() => window.__samePage === true), 'the request appeared without a reload');
  assert((await request.locator(t('pending-name')).textContent()) === laptop.name, 'the laptop’s name');
  const shown = await request.locator(t('pending-fingerprint')).textContent();
  assert(shown === laptop.fingerprint, `the page shows ${shown}, the laptop printed ${laptop.fingerprint}`);
  assert((await request.locator(t('pending-code')).textContent()) === laptop.code, 'the code');
  await shot(hub, 'hub-devices-request');

  await request.locator(t('approve')).click();
  const paired = await control('paired');
  log(`laptop: ${paired}`);
  const row = hub.locator(t('device-row'), { hasText: laptop.fingerprint });
  await row.waitFor({ timeout: 10000 });
  assert((await row.locator(t('device-name')).textContent()) === laptop.name, 'paired under its name');
  await until(async () => (await hub.locator(t('pending-request')).count()) === 0, { what: 'the request is gone' });
  await shot(hub, 'hub-devices-paired');
  log('devices ok');

  // The node shows the same list, relayed from the hub.
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await open(node, 'devices', 'devices');
  await node.locator(t('device-row'), { hasText: laptop.fingerprint }).waitFor();
  // Its own row says which device this is; no other does.
  await node.locator(`${t('device-row')}[data-node="${config.node.id}"] ${t('this-device')}`).waitFor();
  assert((await node.locator(t('this-device')).count()) === 1, 'only its own row is marked');
  await shot(node, 'node-devices');

  const phone = await signIn(browser, await control('hub-login'), { name: 'phone', width: 390, height: 844 });
  for (const [hash, name] of [
    ['settings', 'settings'],
    ['devices', 'devices'],
    ['usage?days=7', 'usage'],
    ['audit', 'audit'],
  ]) {
    await open(phone, hash, name);
    const wide = await phone.evaluate(() => document.documentElement.scrollWidth);
    assert(wide <= 390, `${name} fits a phone's width (${wide} px)`);
    await shot(phone, `phone-${name}`);
  }

  for (const [name, page] of [
    ['hub', hub],
    ['node', node],
    ['phone', phone],
  ]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
