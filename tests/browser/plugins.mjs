// plugins.mjs: the Plugins page on a real hub running real MCP servers, and on a laptop.
// The page's command-line splitter is checked on quoting cases; the built-in computer
// plugin shows as built in (no Remove) and its home-network setting saves; the add form
// refuses a bad name and shows the hub's refusal of a taken one in words;
// server-everything is added through the form (its command typed as one line and shown
// back word by word), the hub's warning shows the exact command, Enable starts it and
// the card follows it to `running` with its tools counted, without a reload; its tools
// expand and include `everything_echo`; a plugin whose program does not exist is added,
// left disabled, then enabled with its switch and shows `failed` with the error while
// everything stays running; everything is disabled from the keyboard and shows
// `stopped`; while a mute server starts the page reads the list every 2 s, and stops
// once it is left; the broken plugin is
// removed after confirming. On the laptop the page says plugins are managed on the hub
// and calls no plugin route. Screenshots light and dark, wide and at a phone's width.
//
// Config (besides lib.mjs's): `everything`, server-everything's argv (node, its entry
// script, `stdio`).

import { config, launch, signIn, shot, assert, until, log, run } from './lib.mjs';

const SERVER_WAIT = 60000;

/** One argv as a line a person would type: words with spaces or quotes single-quoted. */
const shellLine = (argv) =>
  argv.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');

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

/** Opens the Plugins page afresh (reloading it when it is open) once its data shows. */
async function openPlugins(page) {
  await page.evaluate(() => document.querySelector('main section')?.setAttribute('data-left', ''));
  if (new URL(page.url()).hash === '#/plugins') await page.reload();
  else await page.goto(new URL('#/plugins', page.url()).href);
  await page.waitForSelector('section.page-plugins:not([data-left])[data-ready=true]');
}

const card = (name) => `[data-test=plugin-card][data-plugin="${name}"]`;

/** Waits until plugin `name`'s (single) server shows `state`; its pill's text. */
async function serverState(page, name, state, timeout = SERVER_WAIT) {
  const sel = `${card(name)} [data-test=server][data-state=${state}] [data-test=server-state]`;
  await page.waitForSelector(sel, { timeout });
  return page.textContent(sel);
}

async function splitter(page) {
  const cases = await page.evaluate(async () => {
    const { splitCommandLine } = await import('/assets/js/plugins/add.js');
    return [
      `npx -y  server`,
      `node '/a dir/it.js' "say \\"hi\\"" x\\ y ''`,
      `echo 'it''s'`,
      `node "unclosed`,
      `trailing \\`,
    ].map(splitCommandLine);
  });
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  assert(same(cases[0].argv, ['npx', '-y', 'server']), `spaces separate: ${JSON.stringify(cases[0])}`);
  assert(
    same(cases[1].argv, ['node', '/a dir/it.js', 'say "hi"', 'x y', '']),
    `quotes group: ${JSON.stringify(cases[1])}`,
  );
  assert(same(cases[2].argv, ['echo', 'its']), `adjacent quotes join: ${JSON.stringify(cases[2])}`);
  assert(/not closed/.test(cases[3].error ?? ''), `an open quote is refused: ${JSON.stringify(cases[3])}`);
  assert(/backslash/.test(cases[4].error ?? ''), `a lone backslash is refused: ${JSON.stringify(cases[4])}`);
}

async function computer(page) {
  const builtin = card('computer');
  await page.waitForSelector(`${builtin} [data-test=plugin-builtin]`);
  assert(!(await page.locator(`${builtin} [data-test=plugin-remove]`).count()), 'the built-in plugin offers no Remove');
  // The computer plugin keeps `allow_private_network` in its settings.
  const seeded = await api(page, 'PATCH', '/plugins/computer', { settings: { allow_private_network: false } });
  assert(seeded.status === 200, `settings saved: ${JSON.stringify(seeded)}`);
  await openPlugins(page);
  const box = `${builtin} [data-test=allow-private-network]`;
  assert(!(await page.isChecked(box)), 'the home network starts refused');
  await page.check(box);
  await until(async () => (await api(page, 'GET', '/plugins/computer')).body.settings.allow_private_network === true, {
    what: 'allow_private_network saved',
  });
  await page.uncheck(box);
  await until(async () => (await api(page, 'GET', '/plugins/computer')).body.settings.allow_private_network === false, {
    what: 'allow_private_network saved off',
  });
}

/** Fills the add form for a stdio server and submits it. */
async function add(page, name, line) {
  if (!(await page.locator('[data-test=add-form]').count())) await page.click('[data-test=add-plugin]');
  await page.fill('[data-test=add-name]', name);
  await page.fill('[data-test=add-command]', line);
  await page.click('[data-test=add-submit]');
}

async function everything(page) {
  const argv = config.everything;
  assert(Array.isArray(argv) && argv.length >= 2, 'the test gives server-everything argv');

  // A bad name is refused by the form itself, before the hub is asked.
  await page.click('[data-test=add-plugin]');
  await page.waitForSelector('[data-test=add-form]');
  assert(
    (await page.evaluate(() => document.activeElement?.dataset.test)) === 'add-name',
    'the form opens with its name field focused',
  );
  await page.fill('[data-test=add-name]', 'Every Thing');
  await page.fill('[data-test=add-command]', 'node x.js');
  await page.click('[data-test=add-submit]');
  const refused = await (await page.waitForSelector('[data-test=add-error]:not([hidden])')).textContent();
  assert(/a-z/.test(refused), `a bad name is explained: ${refused}`);

  await page.fill('[data-test=add-name]', 'everything');
  await page.fill('[data-test=add-command]', shellLine(argv));
  const shown = await page.$$eval('[data-test=add-argv] [data-test=argv-item]', (els) => els.map((e) => e.textContent));
  assert(JSON.stringify(shown) === JSON.stringify(argv), `the parsed command is shown back: ${JSON.stringify(shown)}`);
  assert(await page.isChecked('[data-test=add-sandbox]'), 'the sandbox is on by default');
  await shot(page, 'plugins-add-form');
  await page.click('[data-test=add-submit]');

  const warning = await page.waitForSelector('[data-test=plugin-warning]');
  const said = await warning.textContent();
  assert(/hub.s user/.test(said), `the warning says whose rights it runs with: ${said}`);
  const command = await page.textContent('[data-test=warning-command]');
  assert(command.includes(argv[1]), `the warning shows the exact command: ${command}`);
  // Added, not running: nothing runs before the owner says so.
  await page.waitForSelector(`${card('everything')}[data-enabled=false]`);
  await serverState(page, 'everything', 'stopped', 5000);
  await shot(page, 'plugins-warning');

  await page.click('[data-test=warning-enable]');
  await page.waitForSelector('[data-test=plugin-warning]', { state: 'detached' });
  // The card follows the server without a reload (the page reads the list every 2 s
  // while it starts).
  const running = await serverState(page, 'everything', 'running');
  const tools = Number(/(\d+) tools?/.exec(running)?.[1] ?? 0);
  assert(tools > 0, `running with its tools counted: ${running}`);
  assert(await page.isChecked(`${card('everything')} [data-test=plugin-enabled]`), 'its switch shows it enabled');
  log(`server-everything running with ${tools} tools`);

  await page.click(`${card('everything')} [data-test=plugin-tools-toggle]`);
  const echo = await page.waitForSelector(`${card('everything')} [data-test=tool][data-tool=everything_echo]`);
  assert(/echo/i.test(await echo.textContent()), 'everything_echo shows its description');
  const listed = await page.locator(`${card('everything')} [data-test=tool]`).count();
  assert(listed === tools, `every tool is listed: ${listed} of ${tools}`);
  await shot(page, 'plugins-running-tools');

  // The hub refuses a taken name; the form says why in words.
  await add(page, 'everything', 'node x.js');
  const taken = await (await page.waitForSelector('[data-test=add-error]:not([hidden])')).textContent();
  assert(/exists already/.test(taken), `a taken name is refused in words: ${taken}`);
  await page.click('[data-test=add-cancel]');
  await page.waitForSelector('[data-test=add-form]', { state: 'detached' });
}

async function broken(page) {
  await add(page, 'broken', '/nonexistent/hearth-no-such-program --flag');
  await page.waitForSelector('[data-test=plugin-warning]');
  await page.click('[data-test=warning-leave]');
  await page.waitForSelector('[data-test=plugin-warning]', { state: 'detached' });
  await page.waitForSelector(`${card('broken')}[data-enabled=false]`);

  await page.click(`${card('broken')} label.switch`);
  await serverState(page, 'broken', 'failed');
  const error = await page.textContent(`${card('broken')} [data-test=server-error]`);
  assert(/no-such-program|No such file|not found/i.test(error), `the failure says why: ${error}`);
  await serverState(page, 'everything', 'running', 1000);
  await shot(page, 'plugins-failed');
}

async function disable(page) {
  // From the keyboard: the switch is a real checkbox.
  await page.focus(`${card('everything')} [data-test=plugin-enabled]`);
  await page.keyboard.press('Space');
  assert((await serverState(page, 'everything', 'stopped', 15000)) === 'stopped', 'the pill says stopped');
  await page.waitForSelector(`${card('everything')}[data-enabled=false]`);
  const tools = (await api(page, 'GET', '/plugins/everything/tools')).body.data;
  assert(tools.length && tools.every((t) => !t.live), 'its tools are no longer offered, only remembered');
}

/**
 * A server that never answers its handshake stays `starting` (the hub gives it 20 s):
 * the page reads the list every 2 s meanwhile, and not once after it is left.
 */
async function pollsWhileStarting(page) {
  const mute = [config.everything[0], '-e', 'setInterval(() => {}, 1e9)'];
  const made = await api(page, 'POST', '/plugins', {
    name: 'mute',
    enabled: true,
    servers: [{ name: 'main', transport: 'stdio', command: mute[0], args: mute.slice(1) }],
  });
  assert(made.status === 201, `the mute plugin is added: ${JSON.stringify(made)}`);
  let reads = 0;
  const seen = (req) => {
    if (new URL(req.url()).pathname.startsWith('/api/v1/plugins')) reads += 1;
  };
  await openPlugins(page);
  await page.waitForSelector(`${card('mute')} [data-test=server][data-state=starting]`);
  await shot(page, 'plugins-starting', { schemes: ['light'] });
  page.on('request', seen);
  await page.waitForTimeout(4500);
  assert(reads >= 2, `the list is read every 2 s while a server starts: ${reads} reads in 4.5 s`);
  await page.goto(new URL('#/notes', page.url()).href);
  await page.waitForSelector('section.page-notes');
  await page.waitForTimeout(500); // a read under way when the page was left may end
  reads = 0;
  await page.waitForTimeout(4500);
  page.off('request', seen);
  assert(reads === 0, `the plugin list was read ${reads} times after the page was left`);
  assert((await api(page, 'DELETE', '/plugins/mute')).status === 204, 'the mute plugin is removed');
  await openPlugins(page);
}

async function remove(page) {
  await page.click(`${card('broken')} [data-test=plugin-remove]`);
  await shot(page, 'plugins-remove-confirm', { schemes: ['light'] });
  await page.click(`${card('broken')} [data-test=confirm-plugin-remove]`);
  await page.waitForSelector(card('broken'), { state: 'detached' });
  const gone = await api(page, 'GET', '/plugins/broken');
  assert(gone.status === 404, `the hub has no broken plugin: ${gone.status}`);
}

async function laptop(browser) {
  const page = await signIn(browser, config.node.login, { name: 'node' });
  const calls = [];
  page.on('request', (req) => {
    if (new URL(req.url()).pathname.startsWith('/api/v1/plugins')) calls.push(req.url());
  });
  await openPlugins(page);
  const notice = await page.textContent('[data-test=plugins-on-hub]');
  assert(/run on the hub/.test(notice) && /hearth-hub plugins/.test(notice), `the laptop says where: ${notice}`);
  assert(!(await page.locator('[data-test=add-plugin]').count()), 'the laptop offers no form');
  assert(calls.length === 0, `the laptop called no plugin route: ${calls}`);
  await shot(page, 'plugins-laptop');
  assert(!page.errors.length, `no page errors on the laptop: ${page.errors}`);
}

run(async () => {
  const browser = await launch();
  const page = await signIn(browser, config.hub.login, { name: 'hub' });
  await openPlugins(page);
  await splitter(page);
  await computer(page);
  await everything(page);
  await broken(page);
  await disable(page);
  await pollsWhileStarting(page);
  await shot(page, 'plugins-list');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'plugins-list-narrow');
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  assert(overflow <= 0, `nothing overflows at 390 px: ${overflow}`);
  await page.click('[data-test=add-plugin]');
  await page.fill('[data-test=add-command]', `npx -y "@scope/a server" --root '/home/me/my files'`);
  await shot(page, 'plugins-add-form-narrow');
  await page.click('[data-test=add-cancel]');
  await page.setViewportSize({ width: 1280, height: 800 });
  await remove(page);
  assert(!page.errors.length, `no page errors on the hub: ${page.errors}`);
  await laptop(browser);
  await browser.close();
});
