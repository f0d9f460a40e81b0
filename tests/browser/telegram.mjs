// telegram.mjs: the Telegram card of the Settings page (run by
// tests/tests/it/ui_telegram.rs against a fake Bot API on loopback). A token Telegram
// refuses is said plainly and not kept; the right one starts the bot (@name shown); a
// stranger who writes to the bot appears under "Chats that tried" and is allowed into a
// project with one click; its notifications are switched off, then the chat is removed
// after confirming. On the laptop the card points to the hub. Screenshots light and
// dark, wide and at 390 px.
//
// Controls (answered by the Rust test): `stranger` (a chat writes to the bot; returns
// its chat id), `token` (the token the fake accepts).

import { config, launch, signIn, shot, assert, until, log, run, control } from './lib.mjs';

const api = (page, method, path, body) =>
  page.evaluate(
    async ([method, path, body]) => {
      const r = await fetch(`/api/v1${path}`, {
        method,
        headers: body ? { 'content-type': 'application/json' } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: r.status, body: r.status === 204 ? null : await r.json() };
    },
    [method, path, body],
  );

/** The settings page afresh (a `goto` to the hash the page is on would not reload it). */
async function openCard(page) {
  const target = new URL('#/settings', config.hub.url).href;
  if (page.url() === target) await page.reload();
  else await page.goto(target);
  await page.waitForSelector('#telegram [data-test=telegram-state]');
}

const stateText = (page) => page.textContent('#telegram [data-test=telegram-state]');

run(async () => {
  const browser = await launch();
  const page = await signIn(browser, config.hub.login, { name: 'hub' });
  await openCard(page);
  assert((await stateText(page)).includes('No bot yet'), 'a fresh hub has no bot');

  // A token Telegram refuses: said plainly, nothing stored.
  await page.fill('[data-test=telegram-token]', '999:not-the-token');
  await page.click('[data-test=save-telegram-token]');
  const refused = await until(() => page.textContent('.toasts').then((t) => t.includes('token') && t), {
    what: 'the refusal toast',
  });
  log(`refused: ${refused}`);
  assert((await page.inputValue('[data-test=telegram-token]')) === '', 'the field is emptied');
  assert(!(await api(page, 'GET', '/channels/telegram')).body.token_set, 'no token kept');

  // The right token: the bot starts, its name shown.
  const token = await control('token');
  await page.fill('[data-test=telegram-token]', token);
  await page.click('[data-test=save-telegram-token]');
  let last = null;
  await until(async () => {
    await openCard(page);
    last = (await api(page, 'GET', '/channels/telegram')).body;
    return (await stateText(page)).includes('Running');
  }, { what: 'the bot running', timeout: 20000 }).catch((e) => {
    throw new Error(`${e.message}: the hub says ${JSON.stringify(last)}; the page ${page.url()}`);
  });
  const bot = await page.textContent('[data-test=telegram-bot]');
  assert(bot.startsWith('@'), `the bot's name: ${bot}`);
  await shot(page, 'running');

  // A stranger writes: listed under "Chats that tried", allowed from there.
  const chat = String(await control('stranger'));
  await until(async () => {
    await openCard(page);
    return page.$(`[data-test=telegram-refused][data-chat="${chat}"]`);
  }, { what: 'the stranger listed', timeout: 20000 });
  await shot(page, 'refused');
  const row = `[data-test=telegram-refused][data-chat="${chat}"]`;
  await page.selectOption(`${row} [data-test=telegram-refused-project]`, { label: 'general' });
  await page.click(`${row} [data-test=allow-telegram-chat]`);
  const allowed = `[data-test=telegram-chat][data-chat="${chat}"]`;
  await page.waitForSelector(allowed);
  assert(!(await page.$(row)), 'no longer listed as refused');
  const status = (await api(page, 'GET', '/channels/telegram')).body;
  const stored = status.chats.find((c) => String(c.chat) === chat);
  assert(stored && stored.notify === true, `allowed, notifications on: ${JSON.stringify(status.chats)}`);

  // Notifications off for that chat.
  await page.uncheck(`${allowed} [data-test=telegram-chat-notify]`);
  await until(async () => {
    const s = (await api(page, 'GET', '/channels/telegram')).body;
    return s.chats.find((c) => String(c.chat) === chat)?.notify === false;
  }, { what: 'notifications off for the chat' });
  await shot(page, 'allowed');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'allowed-390', { schemes: ['light'] });
  await page.setViewportSize({ width: 1280, height: 800 });

  // Removed after confirming.
  await page.click(`${allowed} [data-test=remove-telegram-chat]`);
  await page.click(`${allowed} [data-test=confirm-remove-telegram-chat]`);
  await until(async () => !(await page.$(allowed)), { what: 'the chat removed' });
  const after = (await api(page, 'GET', '/channels/telegram')).body;
  assert(!after.chats.some((c) => String(c.chat) === chat), 'the hub forgot the chat');
  assert(page.errors.length === 0, `no page errors: ${page.errors}`);

  // The laptop points to the hub.
  if (config.node) {
    const laptop = await signIn(browser, config.node.login, { name: 'node' });
    await laptop.goto(new URL('#/settings', config.node.url).href);
    const text = await laptop.waitForSelector('#telegram [data-test=telegram-elsewhere]').then((p) => p.textContent());
    assert(text.includes('on the hub itself'), `the laptop's card: ${text}`);
    assert(!(await laptop.$('#telegram [data-test=problem]')), 'no error box on the laptop');
  }
  await browser.close();
});
