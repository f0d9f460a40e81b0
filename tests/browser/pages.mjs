// pages.mjs: every page of the UI on the hub and on the node, signed in, with no error
// in the page, and a screenshot of each in light and dark, wide and at a phone's
// width; the node's status follows its hub (online, then offline with the banner when
// the hub stops, then online again), and a signed-out browser is told how to sign in.

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

const PAGES = ['chat', 'notes', 'tasks', 'contacts', 'skills', 'projects', 'settings', 'devices', 'usage', 'audit'];

async function visitAll(page, server) {
  for (const name of PAGES) {
    await page.goto(new URL(`#/${name}`, page.url()).href);
    await page.waitForSelector(`.page-${name}`, { timeout: 10000 });
    // Let the page's first fetches land.
    await page.waitForLoadState('networkidle');
    const failed = await page.locator('main .error').allTextContents();
    assert(!failed.some((t) => t.includes('failed to load')), `${server} ${name}: ${failed.join(' | ')}`);
    await shot(page, `${server}-${name}`);
    log(`${server}: ${name} ok`);
  }
}

run(async () => {
  const browser = await launch();

  const signedOut = await (await browser.newContext()).newPage();
  await signedOut.goto(config.hub.url);
  await signedOut.waitForSelector('.signin');
  const told = await signedOut.locator('.signin').textContent();
  assert(told.includes('hearth-hub open'), `the sign-in page names the command: ${told}`);
  await shot(signedOut, 'signed-out');

  const hub = await signIn(browser, config.hub.login, { name: 'hub' });
  // The event WebSocket connects under the page's policy (connect-src 'self').
  await until(() => hub.evaluate(async () => (await import('/assets/js/api.js')).events.state === 'open'), {
    what: 'the event stream is open',
  });
  await visitAll(hub, 'hub');
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', { what: 'node online' });
  await visitAll(node, 'node');

  const phone = await signIn(browser, await control('node-login'), { name: 'phone', width: 390, height: 844 });
  for (const name of ['notes', 'tasks', 'chat']) {
    await phone.goto(new URL(`#/${name}`, phone.url()).href);
    await phone.waitForSelector(`.page-${name}`);
    await phone.waitForLoadState('networkidle');
    await shot(phone, `phone-${name}`);
  }

  await control('stop-hub');
  await node.goto(new URL('#/notes', node.url()).href);
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Offline', { what: 'node offline' });
  assert(await node.locator('.banner').isVisible(), 'the offline banner shows');
  await shot(node, 'node-offline');
  await control('start-hub');
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', { timeout: 30000, what: 'node online again' });
  await until(async () => !(await node.locator('.banner').isVisible()), { what: 'the banner is gone' });

  for (const [name, page] of [['hub', hub], ['node', node]]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
