// chat.mjs: the chat page against a fake model (run by tests/tests/it/ui_chat.rs, which
// scripts the model's answers in this order): a reply streams in on the hub's UI and
// shows partial text before its end, rendered as Markdown with hostile markup left as
// text; the owner sets `notes_create` to "asks first" for the project on the settings
// page; the model creates a note: the approval is still there after a reload and is
// approved in the page; then it asks to delete an old one (risky: it always asks),
// approved too; the note it made shows on the notes page and the old one is gone. On the node, with the hub stopped, the page says
// chat needs the hub and disables the composer; once the hub is back it chats again.
// Screenshots of the chat page, light and dark, wide and at a phone's width.

import { config, launch, signIn, shot, control, assert, until, log, run } from './lib.mjs';

const t = (name) => `[data-test="${name}"]`;

async function openChat(page) {
  await page.goto(new URL('#/chat', page.url()).href);
  await page.waitForSelector('.page-chat[data-ready]', { timeout: 15000 });
}

async function send(page, text) {
  await page.fill(t('composer-input'), text);
  await page.keyboard.press('Enter');
}

/** Waits for the turn to end: the Send button is back. */
async function turnEnded(page, what) {
  await page.waitForSelector(`${t('send')}:not([hidden])`, { timeout: 30000 });
  log(`turn ended: ${what}`);
}

const lastAnswer = (page) => page.locator(t('message-assistant')).last().textContent();

run(async () => {
  const browser = await launch();
  const hub = await signIn(browser, config.hub.login, { name: 'hub' });
  await openChat(hub);
  await shot(hub, 'chat-new');

  // A streamed reply: it grows while the turn runs.
  await send(hub, 'Plan my week');
  const partial = await until(
    async () => {
      const text = await hub.locator(`${t('live-turn')} ${t('message-assistant')}`).textContent();
      return text.includes('Monday') ? text : null;
    },
    { what: 'the first words of the reply' },
  );
  assert(!partial.includes('Sunday'), `partial text shows before the end: ${partial}`);
  assert(await hub.isVisible(t('stop')), 'Stop shows while the turn runs');
  assert(await hub.isDisabled(t('composer-input')) === false, 'the composer stays editable');
  await turnEnded(hub, 'the plan');
  const plan = await lastAnswer(hub);
  assert(plan.includes('Sunday rest.'), `the whole reply: ${plan}`);
  assert((await hub.locator(`${t('message-assistant')} strong`).first().textContent()) === 'week', 'Markdown is rendered');
  assert(plan.includes('<img src=x onerror="window.__pwned=1">'), 'hostile markup stays text');
  assert((await hub.locator(`${t('thread')} img`).count()) === 0, 'no image element was made');
  assert((await hub.evaluate(() => window.__pwned)) === undefined, 'no script ran');
  const link = new URL(hub.url());
  assert(/^#\/chat\/web-[0-9a-z]+\?project=/.test(link.hash), `the page is linkable: ${link.hash}`);
  await until(async () => (await hub.locator(t('conversation')).first().textContent()).includes('Plan my week'), {
    what: 'the conversation is listed by its first message',
  });

  // The owner wants to be asked before the agent writes notes in this project.
  const conversation = hub.url();
  await hub.locator('.tree-label', { hasText: /^general$/ }).click();
  await hub.goto(new URL('#/settings', hub.url()).href);
  await hub.waitForSelector('.page-settings[data-ready]');
  await hub.locator(`${t('tool-row')}[data-tool="notes_create"] ${t('tool-permission')}`).selectOption('ask');
  await until(
    async () => {
      const tools = await hub.evaluate(async (p) => (await fetch(`/api/v1/projects/${p}/tools?limit=200`)).json(), config.project);
      return tools.data.find((x) => x.name === 'notes_create')?.ask;
    },
    { what: 'notes_create asks first' },
  );
  await hub.goto(conversation);
  await hub.waitForSelector('.page-chat[data-ready]');

  // Tools: creating the note waits for approval, then the risky delete does too.
  await send(hub, 'Save my groceries and drop the old list');
  const waiting = `${t('approval')}[data-state="waiting"]`;
  await hub.waitForSelector(waiting, { timeout: 20000 });
  assert((await hub.locator(`${waiting} pre`).textContent()).includes('Groceries'), 'the approval shows the arguments');
  assert((await hub.locator(`${t('tool-call')}[data-tool="notes_create"]`).count()) <= 1, 'one call of notes_create');
  await shot(hub, 'chat-approval');
  // A reload (or another tab) can still answer it.
  await hub.reload();
  await hub.waitForSelector(`${waiting} ${t('approve')}`, { timeout: 15000 });
  await hub.click(`${waiting} ${t('approve')}`);
  await until(async () => (await hub.locator(`${waiting} pre`).first().textContent().catch(() => '')).includes(config.old_note), {
    timeout: 20000,
    what: 'the delete asks next',
  });
  await hub.click(`${waiting} ${t('approve')}`);
  await turnEnded(hub, 'the tools');
  assert((await lastAnswer(hub)).includes('Saved your groceries'), 'the final reply');

  // The note the agent made, and the one it deleted.
  const made = hub.locator(`${t('tool-call')}[data-tool="notes_create"]`).last();
  await made.locator('summary').click();
  const output = JSON.parse(await made.locator(t('tool-output')).textContent());
  const note = await hub.evaluate(async (id) => (await fetch(`/api/v1/notes/${id}`)).json(), output.id);
  assert(note.title === 'Groceries' && note.content.includes('oat milk'), `the note it made: ${JSON.stringify(note)}`);
  const gone = await hub.evaluate(async (id) => (await fetch(`/api/v1/notes/${id}`)).status, config.old_note);
  assert(gone !== 200, `the approved delete ran (${gone})`);
  const deleted = hub.locator(`${t('tool-call')}[data-tool="notes_delete"]`).last();
  assert((await deleted.getAttribute('data-state')) === 'done', 'the delete is shown done');
  await shot(hub, 'chat');
  // And the notes page has it, and not the old list.
  const chatLink = hub.url();
  await hub.goto(new URL(`#/notes/${output.id}`, hub.url()).href);
  await hub.waitForSelector(`${t('note-item')}[data-id="${output.id}"]`);
  assert((await hub.locator(t('note-title')).inputValue()) === 'Groceries', 'the note it made, open');
  assert((await hub.locator(t('note-body')).inputValue()).includes('oat milk'), 'with its content');
  assert((await hub.locator(`${t('note-item')}[data-id="${config.old_note}"]`).count()) === 0, 'the old list is gone');
  await shot(hub, 'chat-note-made');
  await hub.goto(chatLink);

  const phone = await signIn(browser, await control('hub-login'), { name: 'phone', width: 390, height: 844 });
  await phone.goto(link.href);
  await phone.waitForSelector(`.page-chat[data-ready] ${t('message-user')}`);
  await shot(phone, 'chat-phone', { fullPage: false });
  await phone.click(t('chats-toggle'));
  await phone.waitForSelector(`${t('conversation')}[aria-current="page"]`, { state: 'visible' });
  // The drawer slides in: shoot it once there.
  await phone.evaluate(() =>
    Promise.all(document.getAnimations().filter((a) => a.effect?.getTiming().iterations !== Infinity).map((a) => a.finished)),
  );
  await shot(phone, 'chat-phone-list', { fullPage: false });

  // The node relays chat to its hub: while the hub is away, the page says so.
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await until(async () => (await node.locator('#hub-status').textContent()) === 'Online', { what: 'node online' });
  await openChat(node);
  await until(async () => (await node.locator(t('conversation')).count()) > 0, { what: 'the hub conversation on the node' });
  await control('stop-hub');
  await node.waitForSelector(`${t('chat-offline')}:not([hidden])`, { timeout: 30000 });
  assert(await node.isDisabled(t('composer-input')), 'no chatting while the hub is away');
  await shot(node, 'chat-node-offline');
  await control('start-hub');
  await node.waitForSelector(`${t('chat-offline')}`, { state: 'hidden', timeout: 30000 });
  assert(!(await node.isDisabled(t('composer-input'))), 'the composer is back');
  await send(node, 'Thanks!');
  await turnEnded(node, 'from the node');
  assert((await lastAnswer(node)).includes('You are welcome.'), 'the node chats through its hub again');

  for (const [name, page] of [['hub', hub], ['phone', phone], ['node', node]]) {
    assert(page.errors.length === 0, `${name} page errors: ${page.errors.join(' | ')}`);
  }
  await browser.close();
});
