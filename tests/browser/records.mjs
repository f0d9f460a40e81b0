// records.mjs: the tasks, contacts, skills and projects pages on a real hub and node.
// On the hub: projects are created, nested, renamed, refused a cycle, archived and
// restored, and the hub's `general` refuses deletion, each refusal shown as words; a
// task gets a subtask, a due date and a recurrence (the list says how it repeats), and
// checking it moves its due date on; deleting a task takes its subtask. With the hub
// stopped, the node's UI adds and edits a task, contacts filtered by tag, and a skill
// whose Markdown previews, whose description shows in the list and which moves to a
// project and back; once the hub is back, its UI shows them, and a task typed on the
// node appears there without a reload. Screenshots of every page,
// light and dark, wide and at a phone's width.

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

/** Runs `act` (a navigation) and waits until the page it leads to shows its data. */
async function settled(page, act) {
  // The page being left stays in place until the next one mounts: mark it first.
  await page.evaluate(() => document.querySelector('main section')?.setAttribute('data-left', ''));
  await act();
  await page.waitForSelector('main section:not([data-left])[data-ready=true]');
}

/** Opens `#/<hash>` (staying put when it is open already) once its data shows. */
async function go(page, hash) {
  if (new URL(page.url()).hash === `#/${hash}`) return page.waitForSelector('main section[data-ready=true]');
  await settled(page, () => page.goto(new URL(`#/${hash}`, page.url()).href));
}

/** The API answer for `path` on the server `page` is signed in to (its cookie). */
const api = (page, method, path, body) =>
  page.evaluate(
    async ([method, path, body]) => {
      const r = await fetch(`/api/v1${path}`, {
        method,
        headers: body ? { 'content-type': 'application/json' } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      return r.status === 204 ? null : r.json();
    },
    [method, path, body],
  );

async function projects(hub) {
  await go(hub, 'projects');
  await hub.fill('[data-test=project-new-name]', 'Journey Home');
  await hub.press('[data-test=project-new-name]', 'Enter');
  await hub.waitForSelector('[data-test=project-detail]');
  assert((await hub.textContent('.proj-title')) === 'journey-home', 'a typed name becomes a slug');
  const home = await hub.getAttribute('[data-test=project-detail]', 'data-id');
  await hub.waitForSelector(`.sidebar [data-project="${home}"]`);

  await hub.fill('[data-test=project-sub-name]', 'garden');
  await hub.click('[data-test=project-sub-create]');
  await hub.waitForSelector('[data-test=project-said] >> text=Created garden');
  const garden = (await api(hub, 'GET', '/projects?limit=500')).data.find(
    (p) => p.title === 'garden' && p.parent === home,
  );
  assert(garden, 'the subproject is under its parent');

  await hub.selectOption('[data-test=project-move-parent]', garden.id);
  await hub.click('[data-test=project-move]');
  const cycle = await (await hub.waitForSelector('[data-test=project-detail] [data-test=error]')).textContent();
  assert(/cycle/.test(cycle), `a cycle is refused in words: ${cycle}`);
  await shot(hub, 'records-project-cycle');

  await hub.fill('[data-test=project-rename-input]', 'home');
  await hub.press('[data-test=project-rename-input]', 'Enter');
  await hub.waitForSelector('[data-test=project-said] >> text=Renamed to home');
  await hub.fill('[data-test=project-instructions]', 'Keep it short.');
  await hub.locator('[data-test=project-instructions]').blur();
  await hub.waitForSelector('[data-test=save-state][data-state=saved]');
  assert((await api(hub, 'GET', `/projects/${home}`)).instructions === 'Keep it short.', 'the instructions are saved');

  await go(hub, `projects/${garden.id}`);
  await hub.click('[data-test=project-archive]');
  await hub.waitForSelector(`[data-test=project-archived-item][data-id="${garden.id}"]`);
  assert(
    !(await hub.locator(`.sidebar [data-project="${garden.id}"]`).count()),
    'an archived project leaves the side bar',
  );
  await shot(hub, 'records-projects-archived');
  await hub.click(`[data-test=project-archived-item][data-id="${garden.id}"] [data-test=project-unarchive]`);
  await hub.waitForSelector(`.sidebar [data-project="${garden.id}"]`);

  const general = (await api(hub, 'GET', '/projects?limit=500')).data.find((p) => p.title === 'general');
  await go(hub, `projects/${general.id}`);
  await hub.click('[data-test=delete]');
  await hub.click('[data-test=delete-confirm]');
  const kept = await (await hub.waitForSelector('[data-test=project-detail] [data-test=error]')).textContent();
  assert(/general/.test(kept), `general refuses deletion in words: ${kept}`);
  log('projects ok');
  return { home, garden: garden.id };
}

async function tasks(hub, { home }) {
  await hub.click(`.sidebar [data-project="${home}"]`);
  await go(hub, 'tasks');
  await hub.waitForSelector('[data-test=task-empty]');
  await hub.fill('[data-test=task-quick-add]', 'Water the plants');
  await hub.press('[data-test=task-quick-add]', 'Enter');
  const item = hub.locator('[data-test=task-item]', { hasText: 'Water the plants' });
  await item.waitFor();
  assert(
    (await hub.evaluate(() => document.activeElement.dataset.test)) === 'task-quick-add',
    'quick add keeps the focus',
  );
  const id = await item.getAttribute('data-id');
  assert((await api(hub, 'GET', `/tasks/${id}`)).project === home, 'quick add files the task in the chosen project');

  await item.locator('[data-test=task-add-subtask]').click();
  await item.locator('[data-test=task-subtask-input]').fill('Fill the can');
  await item.locator('[data-test=task-subtask-input]').press('Enter');
  await hub.waitForSelector(`[data-id="${id}"] [data-test=task-item][data-parent="${id}"] >> text=Fill the can`);

  await settled(hub, () => item.locator('[data-test=task-open]').first().click());
  await hub.fill('[data-test=task-due-date]', '2020-01-01');
  await hub.waitForSelector('[data-test=task-list] [data-test=task-due].overdue');
  await hub.selectOption('[data-test=task-repeat-unit]', 'd');
  await hub.fill('[data-test=task-repeat-count]', '3');
  await hub.locator('[data-test=task-repeat-count]').blur();
  await until(async () => (await api(hub, 'GET', `/tasks/${id}`)).interval === '3d', {
    what: 'the recurrence is saved',
  });
  assert((await api(hub, 'GET', `/tasks/${id}`)).status === 'recurring', 'a repeating task is recurring');
  await hub.waitForSelector(`[data-test=task-list] [data-id="${id}"] [data-test=task-repeat]`);
  await shot(hub, 'records-task-detail');

  await hub.locator(`[data-test=task-list] [data-id="${id}"] [data-test=task-done]`).first().check();
  await until(async () => ((await api(hub, 'GET', `/tasks/${id}`)).due ?? '') > new Date().toISOString().slice(0, 10), {
    what: 'checking a recurring task moves its due date past today',
  });
  assert((await api(hub, 'GET', `/tasks/${id}`)).status === 'recurring', 'a recurring task stays open');
  const repeat = await hub
    .locator(`[data-test=task-list] [data-id="${id}"] [data-test=task-repeat]`)
    .first()
    .textContent();
  assert(repeat === '↻ every 3 days', `the list says how a task repeats: ${repeat}`);
  await hub.fill('[data-test=task-search]', 'can');
  await until(async () => (await hub.locator('[data-test=task-list] [data-test=task-item]').count()) === 1, {
    what: 'search finds the subtask',
  });
  await hub.fill('[data-test=task-search]', '');

  // Deleting a task deletes its subtasks with it.
  await hub.fill('[data-test=task-quick-add]', 'Pack for the trip');
  await hub.press('[data-test=task-quick-add]', 'Enter');
  const trip = hub.locator('[data-test=task-item]', { hasText: 'Pack for the trip' });
  await trip.waitFor();
  const tripId = await trip.getAttribute('data-id');
  await trip.locator('[data-test=task-add-subtask]').click();
  await trip.locator('[data-test=task-subtask-input]').fill('Passport');
  await trip.locator('[data-test=task-subtask-input]').press('Enter');
  await hub.waitForSelector(`[data-test=task-item][data-parent="${tripId}"] >> text=Passport`);
  const passport = await hub.getAttribute(`[data-test=task-item][data-parent="${tripId}"]`, 'data-id');
  await settled(hub, () => trip.locator('[data-test=task-open]').first().click());
  await hub.click('[data-test=task-detail] [data-test=delete]');
  await hub.click('[data-test=task-detail] [data-test=delete-confirm]');
  await hub.waitForSelector(`[data-test=task-item][data-id="${tripId}"]`, { state: 'detached' });
  const gone = await hub.evaluate(async (p) => (await fetch(`/api/v1/tasks/${p}`)).status, passport);
  assert(gone === 410, `the subtask went with its task: ${gone}`);
  log('tasks ok');
}

async function offline(node) {
  await control('stop-hub');
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Offline', {
    timeout: 30000,
    what: 'node offline',
  });

  await go(node, 'tasks');
  await node.fill('[data-test=task-quick-add]', 'Written offline');
  await node.press('[data-test=task-quick-add]', 'Enter');
  await node.locator('[data-test=task-item]', { hasText: 'Written offline' }).locator('[data-test=task-open]').click();
  await node.waitForSelector('[data-test=task-detail]');
  await node.fill('[data-test=task-notes]', 'the hub is away');
  await node.locator('[data-test=task-notes]').blur();
  await node.waitForSelector('[data-test=save-state][data-state=saved]');
  await shot(node, 'records-node-offline-task');

  await go(node, 'contacts');
  await node.fill('[data-test=contact-quick-add]', 'Ada Lovelace');
  await node.press('[data-test=contact-quick-add]', 'Enter');
  await node.waitForSelector('[data-test=contact-detail]');
  await node.keyboard.type('ada@example.org');
  await node.keyboard.press('Tab');
  await node.waitForSelector('[data-test=save-state][data-state=saved]');
  await node.fill('[data-test=contact-tag-input]', 'friends');
  await node.keyboard.press('Enter');
  await node.waitForSelector('[data-test=contact-tag][data-tag=friends]');
  await node.waitForSelector('[data-test=contact-tag-filter][data-tag=friends]');
  await shot(node, 'records-node-offline-contact');
  await node.fill('[data-test=contact-quick-add]', 'Charles Babbage');
  await node.press('[data-test=contact-quick-add]', 'Enter');
  await node.waitForSelector('[data-test=contact-item] >> text=Charles Babbage');
  await node.click('[data-test=contact-tag-filter][data-tag=friends]');
  await until(async () => (await node.locator('[data-test=contact-item]').allTextContents()).length === 1, {
    what: 'the tag filter keeps only the tagged contact',
  });
  const tagged = await node.locator('[data-test=contact-item]').textContent();
  assert(/Ada Lovelace/.test(tagged) && /ada@example\.org/.test(tagged), `the filtered row shows the email: ${tagged}`);
  await node.click('[data-test=contact-tag-filter][data-tag=""]');

  await go(node, 'skills');
  await node.waitForSelector('[data-test=skill-empty]');
  await node.fill('[data-test=skill-quick-add]', 'Weekly Review');
  await node.press('[data-test=skill-quick-add]', 'Enter');
  await node.waitForSelector('[data-test=skill-detail]');
  assert((await node.inputValue('[data-test=skill-name]')) === 'weekly-review', 'a skill name becomes a slug');
  await node.fill('[data-test=skill-body]', '## Steps\n\n1. **Look back**\n2. <script>alert(1)</script>');
  await node.waitForSelector('[data-test=skill-preview] h2 >> text=Steps');
  assert((await node.locator('[data-test=skill-preview] script').count()) === 0, 'the preview never makes a script');
  await node.locator('[data-test=skill-body]').blur();
  await node.waitForSelector('[data-test=save-state][data-state=saved]');
  await node.fill('[data-test=skill-description]', 'Look back at the week, then plan the next');
  await node.locator('[data-test=skill-description]').blur();
  await node.waitForSelector('[data-test=skill-list] .skill-desc >> text=Look back at the week');
  const skillId = await node.getAttribute('[data-test=skill-detail]', 'data-id');
  const home = (await api(node, 'GET', '/projects?limit=500')).data.find((p) => p.title === 'home');
  await node.selectOption('[data-test=skill-project]', home.id);
  await until(async () => (await api(node, 'GET', `/skills/${skillId}`)).project === home.id, {
    what: 'the skill moves to a project',
  });
  await node.selectOption('[data-test=skill-project]', '');
  await until(async () => (await api(node, 'GET', `/skills/${skillId}`)).project === null, {
    what: 'the skill is for every project again',
  });
  await shot(node, 'records-node-offline-skill');
  log('offline ok');
}

run(async () => {
  const browser = await launch();
  const hub = await signIn(browser, config.hub.login, { name: 'hub' });
  const made = await projects(hub);
  await tasks(hub, made);

  const node = await signIn(browser, config.node.login, { name: 'node' });
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', {
    timeout: 30000,
    what: 'node online',
  });
  await offline(node);

  const login = await control('start-hub');
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', {
    timeout: 30000,
    what: 'node online again',
  });
  const back = await signIn(browser, login, { name: 'hub again' });
  await go(back, 'tasks');
  await back.click('.sidebar .tree-label >> text=All projects');
  await back.waitForSelector('[data-test=task-item] >> text=Written offline', { timeout: 20000 });
  await go(back, 'contacts');
  await back.waitForSelector('[data-test=contact-item] >> text=Ada Lovelace', { timeout: 20000 });
  await go(back, 'skills');
  await back.waitForSelector('[data-test=skill-item] >> text=weekly-review', { timeout: 20000 });

  // Live: typed on the node, shown by the hub's open page without a reload.
  await go(back, 'tasks');
  await go(node, 'tasks');
  await node.fill('[data-test=task-quick-add]', 'Typed on the laptop');
  await node.press('[data-test=task-quick-add]', 'Enter');
  await back.waitForSelector('[data-test=task-item] >> text=Typed on the laptop', { timeout: 20000 });
  log('live ok');

  for (const page of ['tasks', 'contacts', 'skills', 'projects']) {
    await go(back, page);
    await shot(back, `records-${page}`);
    const first = back
      .locator(`[data-test=${page.replace(/s$/, '')}-item] [data-test=${page.replace(/s$/, '')}-open]`)
      .first();
    await settled(back, () => first.click());
    await shot(back, `records-${page}-open`);
  }
  const phone = await signIn(browser, await control('hub-login'), { name: 'phone', width: 390, height: 844 });
  // A list draws from its listed rows: it reads no task, contact or skill whole.
  const wholeReads = [];
  phone.on('request', (r) => {
    if (/\/api\/v1\/(tasks|contacts|skills)\/[0-9a-f]{32}$/.test(new URL(r.url()).pathname)) wholeReads.push(r.url());
  });
  for (const page of ['tasks', 'contacts', 'skills', 'projects']) {
    await go(phone, page);
    await shot(phone, `records-phone-${page}`);
  }
  assert(wholeReads.length === 0, `the lists read records whole: ${wholeReads.join(' ')}`);
  for (const [name, page] of [
    ['hub', hub],
    ['node', node],
    ['hub again', back],
    ['phone', phone],
  ]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
