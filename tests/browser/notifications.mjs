// notifications.mjs: notifications in the web UI, on the hub and on a laptop (run by
// tests/tests/it/ui_notifications.rs, which makes each one the hub's own way: a turn in
// a scheduled run's conversation, `schedule-daily-<n>`, whose model asks for a tool that
// needs approval). While a page is open a notification arrives: a toast and the bell's
// count; it is listed newest first on the Notifications page, approved from there (the
// item says so and is read, the bell goes back to 0); a second is marked read, then
// denied. On the laptop (its routes relayed to the hub) the bell and toast follow the
// hub's events and an approval is decided from the laptop. Quiet hours set on the
// settings page (with the hub's time zone) make the next one arrive without a toast,
// listed as quiet; "Mark all read" clears the bell. Screenshots light and dark, wide
// and at 390 px.
//
// Controls (answered by the Rust test): `ask` (arg: the note title the model will
// want to create; starts the turn and returns at once).

import { config, launch, signIn, shot, assert, until, log, run, control } from './lib.mjs';

/** The API answer for `path` on the server `page` is signed in to. */
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

const bellCount = (page) => page.getAttribute('[data-test=bell]', 'data-count');

async function waitCount(page, n, what) {
  await until(async () => (await bellCount(page)) === String(n), { what: `${what}: the bell says ${n}` });
}

/** Records every notification toast shown from now on, in `window.__toasts`. */
async function watchToasts(page) {
  await page.evaluate(() => {
    window.__toasts = [];
    new MutationObserver((records) => {
      for (const r of records) {
        for (const n of r.addedNodes) {
          const t = n.querySelector?.('[data-test=notification-toast]');
          if (t) window.__toasts.push({ id: t.dataset.id, kind: t.dataset.kind, text: t.textContent });
        }
      }
    }).observe(document.body, { childList: true, subtree: true });
  });
}

async function openNotifications(page) {
  await page.evaluate(() => document.querySelector('main section')?.setAttribute('data-left', ''));
  await page.click('[data-test=bell]');
  await page.waitForSelector('section.page-notifications:not([data-left])[data-ready=true]');
}

const item = (title) => `[data-test=notification]:has([data-test=notification-title]:text-is("Approval needed: notes_create")):has(pre:text("${title}"))`;

async function arrives(page) {
  await page.goto(new URL('#/notes', config.hub.url).href);
  await page.waitForSelector('section.page-notes[data-ready=true]');
  await waitCount(page, 0, 'before anything');
  await control('ask', 'Groceries');
  const toast = await page.waitForSelector('[data-test=notification-toast][data-kind=approval_waiting]');
  const said = await toast.textContent();
  assert(/Approval needed: notes_create/.test(said) && /Review/.test(said), `the toast says what waits: ${said}`);
  await waitCount(page, 1, 'a notification arrived');
  await shot(page, 'notifications-toast', { schemes: ['light'] });
}

async function approveFromTheList(page) {
  await openNotifications(page);
  const first = page.locator('[data-test=notification]').first();
  assert((await first.getAttribute('data-read')) === 'false', 'it is unread');
  assert(/Groceries/.test(await first.locator('[data-test=notification-body]').textContent()), 'the body shows the arguments');
  assert(await first.locator('[data-test=open-conversation]').count(), 'it links to the run’s conversation');
  await shot(page, 'notifications-waiting');
  await first.locator('[data-test=approve]').click();
  await page.waitForSelector(`${item('Groceries')}[data-read=true] [data-test=approval-status][data-status=approved]`);
  await waitCount(page, 0, 'deciding read it');
}

async function markReadThenDeny(page) {
  await control('ask', 'Lemons');
  // Listed at once, on top, while the page is open.
  await page.waitForSelector(`${item('Lemons')}[data-read=false]`);
  const titles = await page.$$eval('[data-test=notification] pre', (els) => els.map((e) => e.textContent));
  assert(/Lemons/.test(titles[0]) && /Groceries/.test(titles[1]), `newest first: ${titles}`);
  await waitCount(page, 1, 'the second arrived');
  await page.locator(`${item('Lemons')} [data-test=mark-read]`).click();
  await page.waitForSelector(`${item('Lemons')}[data-read=true]`);
  await waitCount(page, 0, 'marked read');
  // Read, and still waiting: the buttons stay until it is decided.
  await page.locator(`${item('Lemons')} [data-test=deny]`).click();
  await page.waitForSelector(`${item('Lemons')} [data-test=approval-status][data-status=denied]`);
  // Only the unread ones.
  await page.check('[data-test=unread-only]');
  await page.waitForSelector('[data-test=notifications-empty]');
  await page.uncheck('[data-test=unread-only]');
  await page.waitForSelector('[data-test=notification-list]');
}

async function onTheLaptop(browser, hubPage) {
  const laptop = await signIn(browser, config.node.login, { name: 'node' });
  await laptop.waitForSelector('[data-test=bell]');
  await waitCount(laptop, 0, 'the laptop reads the hub’s count');
  await control('ask', 'From the laptop');
  const toast = await laptop.waitForSelector('[data-test=notification-toast][data-kind=approval_waiting]');
  assert(/notes_create/.test(await toast.textContent()), 'the laptop is told');
  await waitCount(laptop, 1, 'on the laptop');
  await openNotifications(laptop);
  await laptop.locator(`${item('From the laptop')} [data-test=approve]`).click();
  await laptop.waitForSelector(`${item('From the laptop')} [data-test=approval-status][data-status=approved]`);
  await waitCount(laptop, 0, 'approved on the laptop');
  // The hub's page, open meanwhile, learns that the laptop read it.
  await waitCount(hubPage, 0, 'read on the laptop, recounted on the hub');
  await shot(laptop, 'notifications-laptop', { schemes: ['light'] });
  assert(!laptop.errors.length, `no page errors on the laptop: ${laptop.errors}`);
  await laptop.context().close();
}

/** HH:MM in `zone`, `shift` minutes from now. */
const clock = (zone, shift) => {
  const t = new Date(Date.now() + shift * 60000);
  return t.toLocaleTimeString('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
};

async function quietHours(page) {
  const zone = 'Europe/Paris';
  await page.goto(new URL('#/settings', config.hub.url).href);
  await page.waitForSelector('section.page-settings[data-ready=true] [data-test=timezone]');
  await page.fill('[data-test=timezone]', zone);
  const now = await page.textContent('[data-test=zone-now]');
  assert(/It is .* there now/.test(now), `the page says the time there: ${now}`);
  await page.check('[data-test=quiet-on]');
  const [start, end] = [clock(zone, -60), clock(zone, 60)];
  await page.fill('[data-test=quiet-start]', start);
  await page.fill('[data-test=quiet-end]', end);
  await page.click('[data-test=save-time]');
  await until(
    async () => {
      const s = (await api(page, 'GET', '/settings')).body;
      return s.timezone === zone && s.quiet_hours?.start === start && s.quiet_hours?.end === end;
    },
    { what: 'the time zone and quiet hours saved' },
  );
  await noToasts(page);
  await page.locator('#time').scrollIntoViewIfNeeded();
  await shot(page, 'settings-time', { fullPage: false });
  log(`quiet from ${start} to ${end} (${zone})`);

  await waitCount(page, 0, 'nothing unread before the quiet one');
  await watchToasts(page);
  await control('ask', 'Quiet one');
  await waitCount(page, 1, 'a quiet one still counts');
  await page.waitForTimeout(1500);
  const toasts = await page.evaluate(() => window.__toasts);
  assert(toasts.length === 0, `no toast during quiet hours: ${JSON.stringify(toasts)}`);
  await openNotifications(page);
  const quiet = page.locator(item('Quiet one'));
  assert((await quiet.getAttribute('data-quiet')) === 'true', 'listed as quiet');
  assert((await quiet.locator('.quiet').count()) === 1, 'marked quiet in the list');
  await page.click('[data-test=mark-all-read]');
  await waitCount(page, 0, 'all read');
  await page.waitForSelector(`${item('Quiet one')}[data-read=true]`);
  assert(await page.isDisabled('[data-test=mark-all-read]'), 'nothing left to mark');
  await quiet.locator('[data-test=approve]').click();
  await page.waitForSelector(`${item('Quiet one')} [data-test=approval-status][data-status=approved]`);
}

/** Waits until every toast has gone (they would cover the screenshots). */
const noToasts = (page) =>
  page.waitForFunction(() => !document.querySelector('.toasts')?.children.length, null, { timeout: 15000 });

/** Lets a layout change (the side bar's slide) finish before a screenshot. */
const settle = (page) => page.waitForTimeout(400);

async function looks(page) {
  await noToasts(page);
  await shot(page, 'notifications-list');
  // Keyboard: arrows move between items.
  await page.locator('[data-test=notification]').first().focus();
  await page.keyboard.press('ArrowDown');
  const second = await page.evaluate(() => document.activeElement?.dataset.id);
  const ids = await page.$$eval('[data-test=notification]', (els) => els.map((e) => e.dataset.id));
  assert(second === ids[1], `ArrowDown goes to the next one: ${second} of ${ids}`);
  await page.setViewportSize({ width: 390, height: 844 });
  await settle(page);
  await shot(page, 'notifications-narrow');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert(overflow <= 0, `nothing overflows at 390 px: ${overflow}`);
  await page.goto(new URL('#/settings', config.hub.url).href);
  await page.waitForSelector('section.page-settings[data-ready=true] [data-test=timezone]');
  await page.locator('#time').scrollIntoViewIfNeeded();
  await settle(page);
  await shot(page, 'settings-time-narrow', { fullPage: false });
  await page.setViewportSize({ width: 1280, height: 800 });
}

run(async () => {
  const browser = await launch();
  const page = await signIn(browser, config.hub.login, { name: 'hub' });
  await arrives(page);
  await approveFromTheList(page);
  await markReadThenDeny(page);
  await onTheLaptop(browser, page);
  await quietHours(page);
  await looks(page);
  assert(!page.errors.length, `no page errors on the hub: ${page.errors}`);
  await browser.close();
});
