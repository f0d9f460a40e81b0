// settings/telegram.js: the Telegram card of the Settings page, on the hub: the bot's
// token and switch, its state, the chats allowed to talk to the agent (each bound to a
// project, taking notifications or not) and the chats it refused, one click from being
// allowed.
//
// Owns: `GET/PUT /channels/telegram`, `PUT/DELETE /channels/telegram/chats/{chat}`
// (owner only, never relayed: on a laptop the card says where to set it up). Must never
// show the token (the API answers only whether one is set) nor keep it in a field after
// it is saved.
//
// data-test: "telegram-state", "telegram-token", "save-telegram-token",
// "telegram-enabled", "telegram-bot" (the @name link), "telegram-chat" (data-chat),
// "telegram-chat-project", "telegram-chat-notify", "remove-telegram-chat",
// "confirm-remove-telegram-chat", "telegram-refused" (data-chat),
// "telegram-refused-project", "allow-telegram-chat"; "telegram-elsewhere" (a laptop's
// card).

import * as api from '../api.js';
import { h } from '../dom.js';
import { projectSelect } from '../projects.js';
import { action, confirmButton, reason, section, when } from '../admin/common.js';

const BASE = '/channels/telegram';

/** What the bot is doing, in one line. */
function stateLine(s) {
  if (!s.token_set) return ['No bot yet.', ''];
  if (!s.enabled) return ['Switched off: the bot answers no one.', ''];
  if (s.running) return ['Running: allowed chats can talk to the agent.', 'ok'];
  if (s.error) return [`Not running: ${s.error}`, 'error'];
  return ['Starting…', ''];
}

function howTo() {
  return h(
    'ol',
    { class: 'muted how-to' },
    h('li', null, 'In Telegram, talk to @BotFather, send /newbot and follow its questions.'),
    h('li', null, 'Paste the token it gives you here. The hub checks it with Telegram before keeping it.'),
    h(
      'li',
      null,
      'Send your bot a message from your phone. Your chat appears under “Chats that tried”; allow it into a project.',
    ),
  );
}

function tokenForm(ctx, s, reload) {
  const input = h('input', {
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: s.token_set ? 'Paste a new token to replace it' : '123456:ABC…',
    'aria-label': 'Bot token',
    dataset: { test: 'telegram-token' },
  });
  const save = action(ctx, 'Save token', { type: 'submit', dataset: { test: 'save-telegram-token' } }, async () => {
    const token = input.value.trim();
    if (!token) {
      input.focus();
      return;
    }
    try {
      await api.put(BASE, { token });
    } finally {
      input.value = '';
    }
    ctx.toast('Token saved: the bot is starting', 'ok');
    await reload();
  });
  return h(
    'form',
    {
      class: 'key-row',
      onsubmit: (e) => {
        e.preventDefault();
        save.click();
      },
    },
    h('strong', null, 'Bot token'),
    h('span', { class: ['pill', s.token_set ? 'ok' : ''] }, s.token_set ? 'Token stored' : 'No token'),
    input,
    save,
  );
}

function enabledSwitch(ctx, s, reload) {
  const box = h('input', {
    type: 'checkbox',
    checked: s.enabled,
    disabled: !s.token_set,
    dataset: { test: 'telegram-enabled' },
    onchange: async () => {
      box.disabled = true;
      try {
        await api.put(BASE, { enabled: box.checked });
        await reload();
      } catch (e) {
        box.checked = !box.checked;
        ctx.toast(reason(e), 'error');
      } finally {
        box.disabled = false;
      }
    },
  });
  return h('label', { class: 'check' }, box, ' Bot on');
}

function chatRow(ctx, c, reload) {
  const put = (body) =>
    api.put(`${BASE}/chats/${encodeURIComponent(c.chat)}`, { project: c.project, label: c.label, notify: c.notify, ...body });
  const project = projectSelect(ctx.projects, c.project, {
    label: `Project of ${c.label || c.chat}`,
    dataset: { test: 'telegram-chat-project' },
    onchange: async () => {
      try {
        await put({ project: project.value });
        ctx.toast('Chat moved to another project', 'ok');
      } catch (e) {
        ctx.toast(reason(e), 'error');
      }
      await reload();
    },
  });
  const notify = h('input', {
    type: 'checkbox',
    checked: c.notify,
    dataset: { test: 'telegram-chat-notify' },
    onchange: async () => {
      try {
        await put({ notify: notify.checked });
      } catch (e) {
        notify.checked = !notify.checked;
        ctx.toast(reason(e), 'error');
      }
    },
  });
  return h(
    'li',
    { class: 'chat-row', dataset: { test: 'telegram-chat', chat: String(c.chat) } },
    h('strong', null, c.label || `Chat ${c.chat}`),
    h('span', { class: 'muted' }, ` ${c.chat}`),
    project,
    h('label', { class: 'check' }, notify, ' Notifications here'),
    confirmButton({
      label: 'Remove',
      question: 'The bot will stop answering this chat.',
      test: 'remove-telegram-chat',
      run: async () => {
        await api.del(`${BASE}/chats/${encodeURIComponent(c.chat)}`);
        ctx.toast('Chat removed', 'ok');
        await reload();
      },
    }),
  );
}

function refusedRow(ctx, r, reload) {
  const project = projectSelect(ctx.projects, ctx.project ?? ctx.projects[0]?.id, {
    label: `Project for ${r.name || r.chat}`,
    dataset: { test: 'telegram-refused-project' },
  });
  return h(
    'li',
    { class: 'chat-row', dataset: { test: 'telegram-refused', chat: String(r.chat) } },
    h('strong', null, r.name || `Chat ${r.chat}`),
    h('span', { class: 'muted' }, ` ${r.chat} · ${when(r.at)}`),
    project,
    action(ctx, 'Allow', { dataset: { test: 'allow-telegram-chat' } }, async () => {
      await api.put(`${BASE}/chats/${encodeURIComponent(r.chat)}`, {
        project: project.value,
        label: r.name || '',
      });
      ctx.toast(`${r.name || r.chat} may talk to the agent now`, 'ok');
      await reload();
    }),
  );
}

/** Fills `el` with the card's body; answers its reload. */
export function telegramPart(ctx, el) {
  if (ctx.server.kind === 'node') {
    el.replaceChildren(
      h(
        'p',
        { class: 'muted', dataset: { test: 'telegram-elsewhere' } },
        'Telegram is set up on the hub itself: open the hub’s Settings page.',
      ),
    );
    return async () => {};
  }
  const reload = section(
    el,
    'Telegram',
    () => api.get(BASE),
    (s) => {
      const [line, tone] = stateLine(s);
      const allowed = new Set(s.chats.map((c) => String(c.chat)));
      const refused = (s.refused ?? []).filter((r) => !allowed.has(String(r.chat)));
      return h(
        'div',
        null,
        h('p', { class: ['notice', tone], role: 'status', dataset: { test: 'telegram-state' } }, line),
        s.bot_username
          ? h(
              'p',
              null,
              'Your bot: ',
              h(
                'a',
                { href: `https://t.me/${encodeURIComponent(s.bot_username)}`, rel: 'noopener', target: '_blank', dataset: { test: 'telegram-bot' } },
                `@${s.bot_username}`,
              ),
            )
          : null,
        s.token_set ? null : howTo(),
        tokenForm(ctx, s, reload),
        enabledSwitch(ctx, s, reload),
        h('h3', null, 'Allowed chats'),
        s.chats.length
          ? h('ul', { class: 'list chats' }, s.chats.map((c) => chatRow(ctx, c, reload)))
          : h('p', { class: 'muted' }, 'None yet: the bot answers no one.'),
        refused.length ? h('h3', null, 'Chats that tried') : null,
        refused.length ? h('ul', { class: 'list chats' }, refused.map((r) => refusedRow(ctx, r, reload))) : null,
      );
    },
  );
  return reload;
}
