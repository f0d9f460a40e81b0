// schedules.mjs: the Schedules page and a task's agent job, on a real hub with a fake
// model, and on a paired laptop. A schedule is made through the form: a cron expression
// with one field missing is refused live in the hub's words, the right one is said back
// ("at 08:00 on Mon–Fri (UTC)") with its next time, a tool is allowed without asking; it
// is listed with its describe and next run; Run now runs it against the fake model and
// its answer shows rendered (bold stays bold, the list is a list) with a link to its
// conversation, which the chat page opens; it is paused and resumed. A task is made an
// agent job in its editor: it asks for a repeat, the repeat offers hours, and the next
// run shows; Run now shows its answer's first lines. The laptop lists the schedule and
// shows the task's next run (relayed). Finally the schedule is deleted after
// confirming. Screenshots light and dark, wide and at 390 px.
//
// Config (besides lib.mjs's): `task`, the id of a task made on the hub.

import { config, launch, signIn, shot, assert, until, log, run } from './lib.mjs';

const RUN_WAIT = 30000;

async function open(page, hash, ready = 'section.page-schedules') {
  await page.evaluate(() => document.querySelector('main section')?.setAttribute('data-left', ''));
  await page.goto(new URL(`#/${hash}`, page.url()).href);
  await page.waitForSelector(`${ready}:not([data-left])[data-ready=true]`);
}

async function noOverflow(page, what) {
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  assert(overflow <= 0, `nothing overflows at 390 px on ${what}: ${overflow}`);
}

async function create(page) {
  await open(page, 'schedules');
  await page.waitForSelector('[data-test=schedules-empty]');
  await shot(page, 'schedules-empty', { schemes: ['light'] });
  await page.click('[data-test=schedules-new]');
  await page.waitForSelector('[data-test=schedule-form]');
  await page.fill('[data-test=sf-name]', 'Morning briefing');
  await page.check('[data-test=sf-kind][value=cron]');
  await page.fill('[data-test=sf-cron]', '0 8 * *');
  await page.waitForSelector('[data-test=sf-describe].bad');
  const refused = await page.textContent('[data-test=sf-describe]');
  assert(/4 fields/.test(refused), `the hub says what is wrong: ${refused}`);
  await page.fill('[data-test=sf-cron]', '0 8 * * 1-5');
  const said = await until(
    async () => {
      const t = await page.textContent('[data-test=sf-describe]');
      return /at 08:00 on Mon–Fri \(UTC\)/.test(t) && t;
    },
    { what: 'the live describe' },
  );
  assert(/next /.test(said), `the next time is said: ${said}`);
  await page.fill('[data-test=sf-prompt]', 'Brief me: the weather, my calendar, open tasks.');
  await page.waitForSelector('[data-test=sf-tool][data-tool=notes_search]');
  await page.check('[data-test=sf-tool][data-tool=notes_search]');
  await shot(page, 'schedule-form');
  await page.click('[data-test=sf-save]');
  await page.waitForSelector('[data-test=schedule-detail]');
  await page.waitForSelector('section.page-schedules[data-ready=true]');
  const id = await page.getAttribute('[data-test=schedule-detail]', 'data-id');
  log('created', id);
  const facts = await page.textContent('[data-test=schedule-detail]');
  assert(/at 08:00 on Mon–Fri \(UTC\)/.test(facts), `the schedule says when: ${facts}`);
  assert(/notes_search/.test(facts), `the allowed tool is listed: ${facts}`);
  return id;
}

async function runNow(page, id) {
  await page.click('[data-test=schedule-run]');
  const done = `[data-test=schedule-runs] [data-test=run][data-status=ok]`;
  await page.waitForSelector(done, { timeout: RUN_WAIT });
  const bold = await page.textContent(`${done} [data-test=run-answer] strong`);
  assert(bold === 'Good morning.', `the answer is rendered: ${bold}`);
  const items = await page.locator(`${done} [data-test=run-answer] li`).count();
  assert(items === 3, `the answer's list is a list: ${items}`);
  const href = await page.getAttribute(`${done} [data-test=run-chat]`, 'href');
  assert(href.startsWith(`#/chat/schedule-${encodeURIComponent(id)}-`), `the run links its conversation: ${href}`);
  await shot(page, 'schedule-detail');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'schedule-detail-narrow');
  await noOverflow(page, 'the schedule');
  await page.setViewportSize({ width: 1280, height: 800 });

  // The chat page opens the run's conversation by its name.
  await page.click(`${done} [data-test=run-chat]`);
  await page.waitForSelector('section.page-chat[data-ready=true]');
  await until(async () => /Good morning/.test(await page.textContent('main')), { what: 'the run in the chat page' });
}

async function listAndPause(page, id) {
  await open(page, 'schedules');
  const item = `[data-test=schedule-item][data-id="${id}"]`;
  await page.waitForSelector(item);
  const describe = await page.textContent(`${item} [data-test=schedule-describe]`);
  assert(/at 08:00 on Mon–Fri/.test(describe), `listed with its describe: ${describe}`);
  const next = await page.textContent(`${item} [data-test=schedule-next]`);
  assert(/08:00|8:00/.test(next) && /\(in /.test(next), `listed with its next run: ${next}`);
  await page.waitForSelector(`${item} [data-test=schedule-last] .pill.ok`);
  await shot(page, 'schedules-list');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'schedules-list-narrow');
  await noOverflow(page, 'the list');
  await page.setViewportSize({ width: 1280, height: 800 });

  await page.click(`${item} [data-test=schedule-open]`);
  await page.waitForSelector('[data-test=schedule-pause]');
  await page.click('[data-test=schedule-pause]');
  await page.waitForSelector('[data-test=schedule-detail] [data-test=schedule-paused]');
  await page.click('[data-test=schedule-resume]');
  await page.waitForSelector('[data-test=schedule-pause]');
}

async function taskJob(page) {
  await open(page, `tasks/${config.task}`, 'section.page-tasks');
  await page.waitForSelector('[data-test=task-detail]');
  const units = await page.$$eval('[data-test=task-repeat-unit] option', (o) => o.map((x) => x.value));
  assert(!units.includes('h'), `a person's task repeats in days at the least: ${units}`);
  await page.check('[data-test=task-agent-job]');
  await page.waitForSelector('[data-test=task-job-needs-when]');
  await until(
    async () => (await page.$$eval('[data-test=task-repeat-unit] option', (o) => o.map((x) => x.value))).includes('h'),
    { what: 'hours offered to an agent job' },
  );
  await page.selectOption('[data-test=task-repeat-unit]', 'h');
  await page.fill('[data-test=task-repeat-count]', '6');
  await page.press('[data-test=task-repeat-count]', 'Tab');
  const describe = await until(
    async () => {
      const t = await page.textContent('[data-test=task-job-describe]').catch(() => '');
      return t === 'every 6 hours' && t;
    },
    { what: 'the job every 6 hours' },
  );
  const next = await page.textContent('[data-test=task-job-next]');
  assert(/\(in (5|6) h\)/.test(next), `the next run shows: ${describe}, ${next}`);
  await page.click('[data-test=task-job-run]');
  const done = '[data-test=task-job] [data-test=run][data-status=ok]';
  await page.waitForSelector(done, { timeout: RUN_WAIT });
  const brief = await page.textContent(`${done} [data-test=run-answer]`);
  assert(/Weekly review done/.test(brief) && !/fourth line/.test(brief), `its first lines show: ${brief}`);
  await shot(page, 'task-agent-job');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'task-agent-job-narrow');
  await noOverflow(page, 'the task');
  await page.setViewportSize({ width: 1280, height: 800 });
}

async function laptop(browser, id) {
  const page = await signIn(browser, config.node.login, { name: 'node' });
  await open(page, 'schedules');
  await page.waitForSelector(`[data-test=schedule-item][data-id="${id}"]`);
  const task = `task-${config.task}`;
  await page.waitForSelector(`[data-test=schedule-item][data-id="${task}"] [data-test=schedule-task]`);
  await open(page, `tasks/${config.task}`, 'section.page-tasks');
  await page.waitForSelector('[data-test=task-job-next]', { timeout: 20000 });
  const next = await page.textContent('[data-test=task-job-next]');
  assert(/\(in \d h\)/.test(next), `the laptop shows the next run: ${next}`);
  await shot(page, 'task-agent-job-laptop', { schemes: ['dark'] });
  assert(!page.errors.length, `no page errors on the laptop: ${page.errors}`);
}

async function remove(page, id) {
  await open(page, `schedules/${encodeURIComponent(id)}`);
  await page.click('[data-test=schedule-detail] [data-test=delete]');
  await page.click('[data-test=schedule-detail] [data-test=delete-confirm]');
  await page.waitForSelector('section.page-schedules [data-test=schedule-list]');
  await until(async () => !(await page.locator(`[data-test=schedule-item][data-id="${id}"]`).count()), {
    what: 'the schedule gone from the list',
  });
}

run(async () => {
  const browser = await launch();
  const page = await signIn(browser, config.hub.login, { name: 'hub' });
  const id = await create(page);
  await runNow(page, id);
  await listAndPause(page, id);
  await taskJob(page);
  await laptop(browser, id);
  await remove(page, id);
  assert(!page.errors.length, `no page errors on the hub: ${page.errors}`);
  await browser.close();
});
