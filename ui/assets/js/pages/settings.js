// pages/settings.js: the Settings page: provider keys, models, the agent's instructions,
// the hub's time zone and quiet hours, Telegram (settings/telegram.js), one project's
// instructions, tool permissions and
// secrets, and this server's signed-in browsers.
//
// Owns: reading and changing runtime settings (`GET/PATCH /settings`), provider keys
// (`GET /settings/providers`, `PUT /settings/providers/{name}`), a project's instructions
// (`GET/PATCH /projects/{id}`), its tools (`GET /projects/{p}/tools`, `PUT …/tools/{tool}`)
// and secrets (`GET/PUT/DELETE /projects/{p}/secrets/{name}`), and browser sessions
// (`GET /auth/sessions`, `DELETE /auth/sessions/{id}`, `POST /auth/logout`). Must never
// show a stored key or secret (the API answers only its mask) nor keep one in a field
// after it is saved. Each section loads on its own, so a node whose hub is away still
// shows what it serves itself (project instructions, browsers).
//
// data-test: "provider-row" (data-provider), "provider-key", "save-key", "provider-mask";
// "chat-model", "summary-model", "embedding-model", "approval-timeout", "save-models";
// "agent-instructions", "save-instructions"; "timezone", "quiet-on", "quiet-start",
// "quiet-end", "save-time", "zone-now"; "settings-project" (the project select),
// "project-instructions", "save-project-instructions"; "tool-row" (data-tool),
// "tool-permission"; "secret-row" (data-secret), "delete-secret", "confirm-delete-secret",
// "secret-name", "secret-value", "save-secret"; "session-row", "end-session",
// "sign-out".

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';
import { projectSelect } from '../projects.js';
import { action, confirmButton, fetchAll, problem, reason, section, when } from '../admin/common.js';
import { telegramPart } from '../settings/telegram.js';

const MODEL_SUGGESTIONS = [
  'anthropic:claude-sonnet-4-5',
  'anthropic:claude-opus-4-1',
  'anthropic:claude-haiku-4-5',
  'openai:gpt-4o',
  'openai:gpt-4o-mini',
  'ollama:llama3.1',
  'ollama:nomic-embed-text',
];

const PROVIDER_NAMES = { anthropic: 'Anthropic', openai: 'OpenAI', ollama: 'Ollama' };

function field(label, control, hint) {
  return h(
    'label',
    { class: 'field' },
    h('span', null, label),
    control,
    hint ? h('small', { class: 'hint' }, hint) : null,
  );
}

function card(id, title, intro, body) {
  return h(
    'section',
    { class: 'card admin-card', id, 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title),
    intro ? h('p', { class: 'muted intro' }, intro) : null,
    body,
  );
}

// ---------------------------------------------------------------- provider keys

function providers(ctx, el) {
  return section(
    el,
    'provider keys',
    () => fetchAll('/settings/providers'),
    (list) =>
      h(
        'ul',
        { class: 'list providers' },
        list.map((p) => {
          const input = h('input', {
            type: 'password',
            autocomplete: 'off',
            spellcheck: 'false',
            placeholder: p.key ? 'Paste a new key to replace it' : 'Paste a key',
            'aria-label': `${PROVIDER_NAMES[p.name] ?? p.name} key`,
            dataset: { test: 'provider-key' },
          });
          const mask = h(
            'span',
            { class: ['pill', p.key ? 'ok' : ''], dataset: { test: 'provider-mask' } },
            p.key ? `Key stored ${p.key}` : 'No key',
          );
          const save = async () => {
            const key = input.value.trim();
            if (!key) {
              input.focus();
              return;
            }
            const r = await api.put(`/settings/providers/${encodeURIComponent(p.name)}`, { key });
            input.value = '';
            input.placeholder = 'Paste a new key to replace it';
            mask.className = 'pill ok';
            mask.textContent = `Key stored ${r.key}`;
            ctx.toast(`${PROVIDER_NAMES[p.name] ?? p.name} key saved`, 'ok');
          };
          const submit = action(ctx, 'Save', { type: 'submit', dataset: { test: 'save-key' } }, save);
          return h(
            'li',
            { dataset: { test: 'provider-row', provider: p.name } },
            h(
              'form',
              {
                class: 'key-row',
                onsubmit: (e) => {
                  e.preventDefault();
                  submit.click();
                },
              },
              h('strong', { class: 'provider-name' }, PROVIDER_NAMES[p.name] ?? p.name),
              mask,
              input,
              submit,
            ),
          );
        }),
      ),
  );
}

// ---------------------------------------------------------------- models and instructions

function runtime(ctx, modelsEl, instructionsEl) {
  let current = null;
  const datalist = h(
    'datalist',
    { id: 'model-suggestions' },
    MODEL_SUGGESTIONS.map((m) => h('option', { value: m })),
  );
  const modelInput = (test, value, placeholder) =>
    h('input', {
      type: 'text',
      list: 'model-suggestions',
      value: value ?? '',
      placeholder,
      spellcheck: 'false',
      dataset: { test },
    });

  const renderModels = (s) => {
    const chat = modelInput('chat-model', s.chat_model, 'provider:model');
    const summary = modelInput('summary-model', s.summary_model, 'same as the chat model');
    const embedding = modelInput('embedding-model', s.embedding_model, 'provider:model');
    const timeout = h('input', {
      type: 'number',
      min: '10',
      step: '10',
      value: String(s.approval_timeout_secs),
      dataset: { test: 'approval-timeout' },
    });
    const save = action(
      ctx,
      'Save models',
      { class: 'primary', type: 'submit', dataset: { test: 'save-models' } },
      async () => {
        const secs = Number(timeout.value);
        if (!Number.isInteger(secs) || secs <= 0) throw new Error('The approval timeout is a whole number of seconds.');
        current = await api.patch('/settings', {
          chat_model: chat.value.trim(),
          summary_model: summary.value.trim() || null,
          embedding_model: embedding.value.trim(),
          approval_timeout_secs: secs,
        });
        ctx.toast('Models saved', 'ok');
      },
    );
    return h(
      'form',
      { class: 'grid-form', onsubmit: (e) => (e.preventDefault(), save.click()) },
      datalist,
      field('Chat model', chat, 'Answers in chat. Written provider:model.'),
      field('Summary model', summary, 'Keeps long conversations short. Empty: the chat model.'),
      field('Embedding model', embedding, 'Finds related notes.'),
      field('Approval timeout (seconds)', timeout, 'How long a risky tool waits for your answer.'),
      h('div', { class: 'row' }, save),
    );
  };

  const renderInstructions = (s) => {
    const text = h('textarea', {
      rows: '7',
      value: s.instructions,
      'aria-label': 'The agent’s instructions',
      dataset: { test: 'agent-instructions' },
    });
    const save = action(
      ctx,
      'Save instructions',
      { class: 'primary', dataset: { test: 'save-instructions' } },
      async () => {
        current = await api.patch('/settings', { instructions: text.value });
        ctx.toast('Instructions saved', 'ok');
      },
    );
    return [text, h('div', { class: 'row' }, save)];
  };

  let loads = 0;
  const load = async () => {
    const mine = ++loads;
    try {
      current = await api.get('/settings');
      if (mine !== loads) return;
      replace(modelsEl, renderModels(current));
      replace(instructionsEl, renderInstructions(current));
    } catch (e) {
      if (mine !== loads || e.status === 401) return;
      replace(modelsEl, problem(e, 'the models'));
      replace(instructionsEl, problem(e, 'the agent’s instructions'));
    }
  };
  return load;
}

// ---------------------------------------------------------------- time and quiet hours

/** Every IANA zone name this browser knows (for suggestions; the hub checks the name). */
function zoneNames() {
  try {
    return Intl.supportedValuesOf('timeZone');
  } catch {
    return [];
  }
}

/** "14:05 on Thu 15 Jan" in `zone`, or null if the browser does not know it. */
function timeIn(zone) {
  try {
    return new Date().toLocaleString(undefined, {
      timeZone: zone,
      hour: '2-digit',
      minute: '2-digit',
      weekday: 'short',
      day: 'numeric',
      month: 'short',
    });
  } catch {
    return null;
  }
}

function timePart(ctx, el) {
  return section(
    el,
    'the time zone and quiet hours',
    () => api.get('/settings'),
    (s) => {
      const names = zoneNames();
      if (s.timezone && !names.includes(s.timezone)) names.unshift(s.timezone);
      const zone = h('input', {
        type: 'text',
        list: 'zone-names',
        value: s.timezone,
        spellcheck: 'false',
        autocomplete: 'off',
        placeholder: 'Europe/Paris',
        dataset: { test: 'timezone' },
      });
      const now = h('small', { class: 'hint', dataset: { test: 'zone-now' }, 'aria-live': 'polite' });
      const sayNow = () => {
        const t = timeIn(zone.value.trim());
        now.textContent = t ? `It is ${t} there now.` : 'Not a zone this browser knows; the hub will say if it does.';
      };
      zone.addEventListener('input', sayNow);
      sayNow();
      const quiet = s.quiet_hours;
      const on = h('input', { type: 'checkbox', checked: !!quiet, dataset: { test: 'quiet-on' } });
      const start = h('input', { type: 'time', value: quiet?.start ?? '22:00', dataset: { test: 'quiet-start' } });
      const end = h('input', { type: 'time', value: quiet?.end ?? '07:00', dataset: { test: 'quiet-end' } });
      const follow = () => {
        start.disabled = !on.checked;
        end.disabled = !on.checked;
      };
      on.addEventListener('change', follow);
      follow();
      const save = action(
        ctx,
        'Save time settings',
        { class: 'primary', type: 'submit', dataset: { test: 'save-time' } },
        async () => {
          const timezone = zone.value.trim();
          if (!timezone) throw new Error('Name a time zone, like Europe/Paris.');
          if (on.checked && (!start.value || !end.value)) throw new Error('Quiet hours need a start and an end.');
          await api.patch('/settings', {
            timezone,
            quiet_hours: on.checked ? { start: start.value.slice(0, 5), end: end.value.slice(0, 5) } : null,
          });
          ctx.toast(on.checked ? `Quiet from ${start.value} to ${end.value} (${timezone})` : `Time zone ${timezone}, no quiet hours`, 'ok');
        },
      );
      return h(
        'form',
        { class: 'grid-form', onsubmit: (e) => (e.preventDefault(), save.click()) },
        h('datalist', { id: 'zone-names' }, names.map((n) => h('option', { value: n }))),
        h(
          'label',
          { class: 'field' },
          h('span', null, 'Time zone'),
          zone,
          h('small', { class: 'hint' }, 'Schedules without their own zone, date-only due dates and quiet hours use it.'),
          now,
        ),
        h(
          'fieldset',
          { class: 'quiet-hours' },
          h('legend', null, h('label', { class: 'check' }, on, 'Quiet hours')),
          h(
            'div',
            { class: 'row' },
            h('label', { class: 'inline' }, h('span', null, 'From'), start),
            h('label', { class: 'inline' }, h('span', null, 'to'), end),
          ),
          h(
            'small',
            { class: 'hint' },
            'Notifications that come meanwhile are listed without a toast, and Telegram delivers them silently. May span midnight.',
          ),
        ),
        h('div', { class: 'row' }, save),
      );
    },
  );
}

// ---------------------------------------------------------------- one project

function projectPart(ctx, el) {
  let chosen = ctx.project ?? ctx.projects.find((p) => p.name === 'general')?.id ?? ctx.projects[0]?.id ?? null;
  const instructionsEl = h('div');
  const toolsEl = h('div');
  const secretsEl = h('div');
  let dirty = false;

  const loadInstructions = section(
    instructionsEl,
    'the project’s instructions',
    () => api.get(`/projects/${chosen}`),
    (p) => {
      dirty = false;
      const text = h('textarea', {
        rows: '5',
        value: p.instructions,
        placeholder: 'What the agent should know or do in this project',
        'aria-label': `Instructions for ${p.name}`,
        dataset: { test: 'project-instructions' },
        oninput: () => (dirty = true),
      });
      const save = action(
        ctx,
        'Save project instructions',
        { class: 'primary', dataset: { test: 'save-project-instructions' } },
        async () => {
          await api.patch(`/projects/${chosen}`, { instructions: { replace: text.value } });
          dirty = false;
          ctx.toast('Project instructions saved', 'ok');
        },
      );
      return [text, h('div', { class: 'row' }, save)];
    },
  );

  const loadTools = section(
    toolsEl,
    'tool permissions',
    () => fetchAll(`/projects/${chosen}/tools`),
    (tools) =>
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'tools' },
          h('thead', null, h('tr', null, h('th', null, 'Tool'), h('th', null, 'Permission'))),
          h(
            'tbody',
            null,
            tools.map((t) => toolRow(ctx, () => chosen, t)),
          ),
        ),
      ),
  );

  const loadSecrets = section(
    secretsEl,
    'the project’s secrets',
    () => fetchAll(`/projects/${chosen}/secrets`),
    (secrets) => secretsView(ctx, () => chosen, secrets, loadSecrets),
  );

  const loadAll = async () => {
    if (!chosen) {
      replace(el, h('p', { class: 'empty' }, 'No project yet.'));
      return;
    }
    await Promise.all([loadInstructions(), loadTools(), loadSecrets()]);
  };

  const select = projectSelect(ctx.projects, chosen, {
    label: 'Project',
    dataset: { test: 'settings-project' },
    onchange: () => {
      chosen = select.value;
      loadAll();
    },
  });

  replace(
    el,
    h('label', { class: 'field project-choice' }, h('span', null, 'Project'), select),
    h('h3', null, 'Instructions'),
    h('p', { class: 'muted intro' }, 'Added to the agent’s instructions in this project and the ones below it.'),
    instructionsEl,
    h('h3', null, 'Tools'),
    h(
      'p',
      { class: 'muted intro' },
      'What the agent may use here. A subproject follows its parent unless set itself. A tool that asks first waits for your approval on every call; a risky tool asks unless you allow it here. Tools that write files, run commands or fetch pages always ask once the agent has read words someone else wrote (a note from another device, a web page, a tool’s output).',
    ),
    toolsEl,
    h('h3', null, 'Secrets'),
    h(
      'p',
      { class: 'muted intro' },
      'Values the agent’s tools may use in this project. Once saved, a value is never shown again.',
    ),
    secretsEl,
  );

  return {
    reload: loadAll,
    follow(id) {
      if (!id || id === chosen) return;
      chosen = id;
      select.value = id;
      loadAll();
    },
    documentChanged(ev) {
      if (ev.kind === 'project' && ev.id === chosen && !dirty) loadInstructions();
    },
  };
}

// A tool's permission in a project: allowed (a risky tool's calls still ask), allowed
// outright (not even a risky call asks), asking first each time, or forbidden.
const MODES = { on: 'Allowed', trust: 'Allowed, never asks', ask: 'Asks first', off: 'Forbidden' };
const BODIES = {
  on: { allowed: true, ask: null },
  trust: { allowed: true, ask: false },
  ask: { allowed: true, ask: true },
  off: { allowed: false },
};

// What a tool can do beyond Hearth's documents; these ask after untrusted text.
const EFFECTS = { writes_files: 'writes files', runs_commands: 'runs commands', fetches: 'fetches pages' };

function modeOf(t) {
  if (!t.allowed) return 'off';
  if (t.approval === 'always') return 'ask';
  return t.approval === 'never' && t.risky ? 'trust' : 'on';
}

function toolRow(ctx, project, t) {
  // For a safe tool, "allowed" already never asks.
  const choices = t.risky ? ['on', 'trust', 'ask', 'off'] : ['on', 'ask', 'off'];
  const select = h(
    'select',
    {
      'aria-label': `Permission for ${t.name}`,
      dataset: { test: 'tool-permission' },
      onchange: async () => {
        const mode = select.value;
        const body = BODIES[mode];
        select.disabled = true;
        try {
          await api.put(`/projects/${project()}/tools/${encodeURIComponent(t.name)}`, body);
          t.allowed = body.allowed;
          t.approval = { on: 'if_risky', trust: 'never', ask: 'always', off: null }[mode];
          row.classList.toggle('off', !body.allowed);
          ctx.toast(`${t.name}: ${MODES[mode].toLowerCase()}`, 'ok');
        } catch (e) {
          select.value = modeOf(t);
          if (e.status !== 401) ctx.toast(reason(e), 'error');
        } finally {
          select.disabled = false;
        }
      },
    },
    choices.map((m) => h('option', { value: m, selected: modeOf(t) === m }, MODES[m])),
  );
  const row = h(
    'tr',
    { class: t.allowed ? null : 'off', dataset: { test: 'tool-row', tool: t.name } },
    h(
      'td',
      null,
      h('code', null, t.name),
      t.risky ? h('span', { class: 'pill warn risky' }, 'risky') : null,
      EFFECTS[t.effect] ? h('span', { class: 'pill warn effect' }, EFFECTS[t.effect]) : null,
      t.plugin ? h('span', { class: 'pill plugin' }, t.plugin) : null,
      h('div', { class: 'meta' }, t.description),
    ),
    h('td', null, select),
  );
  return row;
}

function secretsView(ctx, project, secrets, reload) {
  const name = h('input', {
    type: 'text',
    placeholder: 'NAME',
    autocomplete: 'off',
    spellcheck: 'false',
    maxlength: '128',
    'aria-label': 'Secret name',
    dataset: { test: 'secret-name' },
  });
  const value = h('input', {
    type: 'password',
    placeholder: 'Value',
    autocomplete: 'off',
    'aria-label': 'Secret value',
    dataset: { test: 'secret-value' },
  });
  const save = action(ctx, 'Save secret', { type: 'submit', dataset: { test: 'save-secret' } }, async () => {
    const n = name.value.trim();
    if (!n || !value.value) {
      (n ? value : name).focus();
      return;
    }
    await api.put(`/projects/${project()}/secrets/${encodeURIComponent(n)}`, { value: value.value });
    name.value = '';
    value.value = '';
    ctx.toast(`Secret ${n} saved`, 'ok');
    reload();
  });
  return [
    secrets.length
      ? h(
          'ul',
          { class: 'list secrets' },
          secrets.map((s) =>
            h(
              'li',
              { class: 'secret-row', dataset: { test: 'secret-row', secret: s.name } },
              h('code', null, s.name),
              h('span', { class: 'muted mask' }, s.value),
              h('span', { class: 'spacer' }),
              confirmButton({
                label: 'Delete',
                question: `Delete ${s.name}?`,
                test: 'delete-secret',
                run: async () => {
                  try {
                    await api.del(`/projects/${project()}/secrets/${encodeURIComponent(s.name)}`);
                    ctx.toast(`Secret ${s.name} deleted`, 'ok');
                    reload();
                  } catch (e) {
                    if (e.status !== 401) ctx.toast(reason(e), 'error');
                  }
                },
              }),
            ),
          ),
        )
      : h('p', { class: 'empty' }, 'No secrets in this project.'),
    h('form', { class: 'secret-form', onsubmit: (e) => (e.preventDefault(), save.click()) }, name, value, save),
  ];
}

// ---------------------------------------------------------------- browsers

/** "Firefox on Linux" from a user agent, or the agent itself if it says nothing known. */
function browserName(ua) {
  if (!ua) return 'Unknown browser';
  const browser = /Edg\//.test(ua)
    ? 'Edge'
    : /Firefox\//.test(ua)
      ? 'Firefox'
      : /Chrom(e|ium)\//.test(ua)
        ? /HeadlessChrome/.test(ua)
          ? 'Headless Chromium'
          : 'Chrome'
        : /Safari\//.test(ua)
          ? 'Safari'
          : /curl\//.test(ua)
            ? 'curl'
            : null;
  const os = /iPhone|iPad/.test(ua)
    ? 'iOS'
    : /Android/.test(ua)
      ? 'Android'
      : /Mac OS X/.test(ua)
        ? 'macOS'
        : /Windows/.test(ua)
          ? 'Windows'
          : /Linux/.test(ua)
            ? 'Linux'
            : null;
  if (!browser) return ua.slice(0, 60);
  return os ? `${browser} on ${os}` : browser;
}

function sessions(ctx, el) {
  const reload = section(
    el,
    'signed-in browsers',
    () => fetchAll('/auth/sessions'),
    (list) => {
      list.sort((a, b) => Number(b.current) - Number(a.current) || b.last_used - a.last_used);
      if (!list.length) {
        return h(
          'p',
          { class: 'empty' },
          'No browser is signed in with a session (this page was opened with the owner token).',
        );
      }
      return h(
        'ul',
        { class: 'list sessions' },
        list.map((s) =>
          h(
            'li',
            { class: 'session-row', dataset: { test: 'session-row' } },
            h(
              'div',
              { class: 'session-what' },
              h('strong', { title: s.user_agent }, browserName(s.user_agent)),
              s.current ? h('span', { class: 'pill ok' }, 'this browser') : null,
              h('div', { class: 'meta' }, `signed in ${when(s.created_at)} · last used ${ago(s.last_used)}`),
            ),
            s.current
              ? action(ctx, 'Sign out', { dataset: { test: 'sign-out' } }, async () => {
                  await api.post('/auth/logout', {});
                  location.reload();
                })
              : action(ctx, 'Sign out', { class: 'danger', dataset: { test: 'end-session' } }, async () => {
                  await api.del(`/auth/sessions/${encodeURIComponent(s.id)}`);
                  ctx.toast('That browser is signed out', 'ok');
                  reload();
                }),
          ),
        ),
      );
    },
  );
  return reload;
}

// ---------------------------------------------------------------- page

export default {
  title: 'Settings',
  async mount(el, ctx) {
    const keysEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const modelsEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const instructionsEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const timeEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const telegramEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const projectEl = h('div');
    const sessionsEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const onNode = ctx.server.kind === 'node';

    replace(
      el,
      h('h1', null, 'Settings'),
      h(
        'nav',
        { class: 'admin-toc', 'aria-label': 'Sections' },
        h('a', { href: '#keys' }, 'Keys'),
        h('a', { href: '#models' }, 'Models'),
        h('a', { href: '#instructions' }, 'Instructions'),
        h('a', { href: '#time' }, 'Time'),
        h('a', { href: '#telegram' }, 'Telegram'),
        h('a', { href: '#project' }, 'Project'),
        h('a', { href: '#browsers' }, 'Browsers'),
      ),
      card(
        'keys',
        'Provider keys',
        'Keys are stored encrypted on the hub. Once saved, a key is never shown again, only that one is stored.',
        keysEl,
      ),
      card('models', 'Models', null, modelsEl),
      card(
        'instructions',
        'The agent’s instructions',
        'What the agent is told in every conversation, before each project’s own instructions.',
        instructionsEl,
      ),
      card(
        'time',
        'Time zone and quiet hours',
        'The hub’s clock, and when its notifications stay quiet.',
        timeEl,
      ),
      card(
        'telegram',
        'Telegram',
        'Talk to the agent from your phone, and hear from it there: approvals, scheduled results, reminders.',
        telegramEl,
      ),
      card('project', 'Per project', 'Instructions, tools and secrets of one project.', projectEl),
      card(
        'browsers',
        'Signed-in browsers',
        onNode
          ? 'Browsers signed in to this laptop’s page (the hub keeps its own list).'
          : 'Browsers signed in to the hub’s page.',
        sessionsEl,
      ),
    );
    // The table of contents scrolls without touching the router's hash.
    el.querySelector('.admin-toc').addEventListener('click', (e) => {
      const a = e.target.closest('a');
      if (!a) return;
      e.preventDefault();
      const target = el.querySelector(a.getAttribute('href'));
      target?.scrollIntoView({ behavior: 'smooth', block: 'start' });
      target?.querySelector('h2')?.setAttribute('tabindex', '-1');
      target?.querySelector('h2')?.focus({ preventScroll: true });
    });

    const reloadKeys = providers(ctx, keysEl);
    const reloadRuntime = runtime(ctx, modelsEl, instructionsEl);
    const reloadTime = timePart(ctx, timeEl);
    const reloadTelegram = telegramPart(ctx, telegramEl);
    const project = projectPart(ctx, projectEl);
    const reloadSessions = sessions(ctx, sessionsEl);

    const reloadHub = () =>
      Promise.all([reloadKeys(), reloadRuntime(), reloadTime(), reloadTelegram(), project.reload()]);
    ctx.on('hub', (online) => online && reloadHub());
    ctx.on('resync', () => {
      reloadHub();
      reloadSessions();
    });
    ctx.on('project', (id) => project.follow(id));
    ctx.onEvent('document', (ev) => project.documentChanged(ev));
    await Promise.all([reloadHub(), reloadSessions()]);
  },
};
