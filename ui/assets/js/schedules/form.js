// schedules/form.js: the form that creates or changes a schedule: name, project, when
// (every N units, a cron expression, or once at a local time) with what the hub makes of
// it said live, time zone (the hub's by default), prompt, model, the tools its runs may
// use without asking, the missed-run policy and how long an approval waits.
//
// Owns: turning the fields into the API's body (`spec` as `3d`, `0 9 * * 1-5` or
// `2026-12-01T09:00`), `POST /schedules/preview` while the timing is typed (the hub's
// describe and next due, or its reason for refusing), `GET /projects/{p}/tools` for the
// tool choices, and the create (`POST /schedules`) or change (`PATCH /schedules/{id}`).
// Must never build markup from strings, nor decide whether a spec is valid (the hub
// does, and says why).
//
// data-test: "schedule-form", "sf-name", "sf-project", "sf-kind" (radios: interval,
// cron, once), "sf-every-count", "sf-every-unit", "sf-cron", "sf-once", "sf-describe"
// (class "bad" when refused), "sf-tz", "sf-prompt", "sf-model", "sf-tools" with
// "sf-tool" (data-tool, a checkbox), "sf-missed", "sf-catch-up", "sf-wait",
// "sf-save", "sf-cancel", "sf-error".

import * as api from '../api.js';
import { h, replace, debounce } from '../dom.js';
import { flatTree } from '../projects.js';
import { fetchAll } from '../admin/common.js';
import { errorText } from '../records/common.js';
import { localTime, relative } from './common.js';

const UNITS = [
  ['min', 'minutes'],
  ['h', 'hours'],
  ['d', 'days'],
  ['w', 'weeks'],
  ['m', 'months'],
  ['y', 'years'],
];

const WAITS = [
  [900, '15 minutes'],
  [3600, '1 hour'],
  [8 * 3600, '8 hours'],
  [86400, '1 day'],
  [3 * 86400, '3 days'],
  [7 * 86400, '1 week'],
];

const MISSED = [
  ['run_once', 'Run once when back'],
  ['skip', 'Skip them'],
  ['catch_up', 'Catch up, one after another'],
];

let zones = null;
/** The IANA zones this browser knows, for the time-zone suggestions. */
function zoneList() {
  if (!zones) zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return zones;
}

/** `{count, unit}` of an interval spec (`30min`, `3d`), or null. */
function parseEvery(spec) {
  const m = /^(\d+)(min|h|d|w|m|y)$/.exec(spec ?? '');
  return m ? { count: Number(m[1]), unit: m[2] } : null;
}

/**
 * The form for `schedule` (null: a new one). `onSaved(schedule)` hears of the answer,
 * `onCancel()` of leaving. Answers the form element.
 */
export function scheduleForm(ctx, schedule, { onSaved, onCancel }) {
  const s = schedule ?? {};
  const label = (text, control, hint) =>
    h('label', { class: 'field' }, h('span', { class: 'label' }, text), control, hint ? h('small', { class: 'muted rec-hint' }, hint) : null);

  const name = h('input', { type: 'text', required: true, maxlength: 200, value: s.name ?? '', 'data-test': 'sf-name' });
  const project = h(
    'select',
    { 'data-test': 'sf-project', onchange: () => loadTools() },
    flatTree(ctx.projects).map(({ project: p, depth }) => h('option', { value: p.id }, '\u00a0\u00a0'.repeat(depth) + p.name)),
  );
  project.value = s.project ?? ctx.project ?? ctx.projects.find((p) => p.name === 'general')?.id ?? ctx.projects[0]?.id ?? '';

  // When: three ways, one shown at a time.
  const every = parseEvery(s.kind === 'interval' ? s.spec : null) ?? { count: 1, unit: 'd' };
  const count = h('input', {
    type: 'number',
    min: 1,
    max: 100000,
    value: String(every.count),
    class: 'repeat-count',
    'aria-label': 'Every how many',
    'data-test': 'sf-every-count',
  });
  const unit = h(
    'select',
    { 'aria-label': 'Unit', 'data-test': 'sf-every-unit' },
    UNITS.map(([v, t]) => h('option', { value: v }, t)),
  );
  unit.value = every.unit;
  const cron = h('input', {
    type: 'text',
    class: 'mono',
    placeholder: '0 9 * * 1-5',
    value: s.kind === 'cron' ? s.spec : '',
    spellcheck: false,
    autocomplete: 'off',
    'aria-label': 'Cron expression',
    'aria-describedby': 'sf-cron-hint',
    'data-test': 'sf-cron',
  });
  const once = h('input', {
    type: 'datetime-local',
    value: s.kind === 'once' ? onceLocal(s) : '',
    'aria-label': 'Run once at',
    'data-test': 'sf-once',
  });
  const kinds = [
    ['interval', 'Every', h('span', { class: 'row' }, count, unit)],
    [
      'cron',
      'Cron',
      h(
        'span',
        { class: 'sf-cron' },
        cron,
        h('small', { class: 'muted', id: 'sf-cron-hint' }, 'minute hour day-of-month month day-of-week'),
      ),
    ],
    ['once', 'Once at', once],
  ];
  let kind = s.kind ?? 'interval';
  const panes = new Map();
  const kindRadios = kinds.map(([value, text, control]) => {
    const radio = h('input', {
      type: 'radio',
      name: 'sf-kind',
      value,
      checked: value === kind,
      'data-test': 'sf-kind',
      onchange: () => {
        kind = value;
        for (const [k, pane] of panes) pane.hidden = k !== kind;
        preview();
      },
    });
    const pane = h('div', { class: 'sf-when-pane', hidden: value !== kind }, control);
    panes.set(value, pane);
    return h('div', { class: 'sf-kind' }, h('label', { class: 'sf-kind-label' }, radio, h('span', null, text)), pane);
  });
  const describe = h('p', { class: 'sf-describe', 'data-test': 'sf-describe', 'aria-live': 'polite' });

  const zoneListId = 'sf-zones';
  const tz = h('input', {
    type: 'text',
    value: s.tz ?? '',
    list: zoneListId,
    autocomplete: 'off',
    spellcheck: false,
    placeholder: 'The hub’s zone',
    'data-test': 'sf-tz',
  });
  api.get('/settings').then(
    (st) => (tz.placeholder = `The hub’s zone (${st.timezone})`),
    () => {},
  );

  const prompt = h('textarea', { rows: 5, required: true, 'data-test': 'sf-prompt', placeholder: 'What the agent is asked each time' });
  prompt.value = s.prompt ?? '';
  const model = h('input', {
    type: 'text',
    value: s.model ?? '',
    spellcheck: false,
    placeholder: 'The configured chat model',
    'data-test': 'sf-model',
  });

  const chosen = new Set(s.auto_approve ?? []);
  const tools = h('div', { class: 'sf-tools', 'data-test': 'sf-tools' }, h('p', { class: 'muted' }, 'Loading tools…'));
  async function loadTools() {
    const p = project.value;
    if (!p) return replace(tools);
    try {
      const all = await fetchAll(`/projects/${encodeURIComponent(p)}/tools`);
      if (project.value !== p) return;
      const offered = all.filter((t) => t.allowed || chosen.has(t.name));
      replace(
        tools,
        offered.length
          ? offered.map((t) =>
              h(
                'label',
                { class: 'sf-tool', title: t.description },
                h('input', {
                  type: 'checkbox',
                  value: t.name,
                  checked: chosen.has(t.name),
                  'data-test': 'sf-tool',
                  dataset: { tool: t.name },
                  onchange: (e) => (e.target.checked ? chosen.add(t.name) : chosen.delete(t.name)),
                }),
                h('code', null, t.name),
                t.risky ? h('span', { class: 'pill warn' }, 'risky') : null,
              ),
            )
          : h('p', { class: 'muted' }, 'No tools are offered in this project.'),
      );
    } catch (e) {
      replace(tools, h('p', { class: 'rec-error', role: 'alert' }, errorText(e)));
    }
  }

  const missed = h(
    'select',
    { 'data-test': 'sf-missed', onchange: () => (catchUpBox.hidden = missed.value !== 'catch_up') },
    MISSED.map(([v, t]) => h('option', { value: v }, t)),
  );
  missed.value = s.missed ?? 'run_once';
  const catchUp = h('input', {
    type: 'number',
    min: 1,
    max: 100,
    value: String(s.catch_up_max ?? 3),
    class: 'repeat-count',
    'aria-label': 'At most how many runs',
    'data-test': 'sf-catch-up',
  });
  const catchUpBox = h('span', { class: 'row', hidden: missed.value !== 'catch_up' }, 'at most', catchUp, 'runs');
  const wait = h(
    'select',
    { 'data-test': 'sf-wait' },
    WAITS.map(([v, t]) => h('option', { value: String(v) }, t)),
  );
  const waitNow = s.approval_wait_secs ?? 86400;
  if (!WAITS.some(([v]) => v === waitNow)) wait.append(h('option', { value: String(waitNow) }, `${waitNow} s`));
  wait.value = String(waitNow);

  const error = h('p', { class: 'rec-error', role: 'alert', 'data-test': 'sf-error', hidden: true });
  const save = h('button', { type: 'submit', class: 'primary', 'data-test': 'sf-save' }, schedule ? 'Save' : 'Create');

  function spec() {
    if (kind === 'interval') return `${Math.max(1, parseInt(count.value, 10) || 1)}${unit.value}`;
    if (kind === 'cron') return cron.value.trim().replace(/\s+/g, ' ');
    return once.value;
  }

  // What the hub makes of the timing, as it is typed.
  let asked = 0;
  const preview = debounce(async () => {
    const mine = ++asked;
    const sp = spec();
    if (!sp) {
      describe.classList.remove('bad');
      return replace(describe, kind === 'once' ? 'Pick a day and a time.' : 'Type a cron expression.');
    }
    try {
      const p = await api.post('/schedules/preview', { kind, spec: sp, tz: tz.value.trim() });
      if (mine !== asked) return;
      describe.classList.remove('bad');
      replace(
        describe,
        h('strong', null, p.describe),
        p.next_due ? ` · next ${localTime(p.next_due)} (${relative(p.next_due)})` : ' · never falls due',
      );
    } catch (e) {
      if (mine !== asked) return;
      describe.classList.add('bad');
      replace(describe, errorText(e));
    }
  }, 250);
  for (const el of [count, unit, cron, once, tz]) el.addEventListener('input', preview);

  const form = h(
    'form',
    {
      class: 'card schedule-form',
      'data-test': 'schedule-form',
      novalidate: true,
      onsubmit: async (e) => {
        e.preventDefault();
        error.hidden = true;
        const body = {
          name: name.value.trim(),
          project: project.value,
          kind,
          spec: spec(),
          tz: tz.value.trim(),
          prompt: prompt.value,
          model: model.value.trim() || null,
          auto_approve: [...chosen],
          missed: missed.value,
          catch_up_max: Math.max(1, parseInt(catchUp.value, 10) || 3),
          approval_wait_secs: Number(wait.value),
        };
        if (!body.name) return fail('Give it a name.', name);
        if (!body.prompt.trim()) return fail('Say what the agent is asked.', prompt);
        if (!body.spec) return fail(kind === 'once' ? 'Pick when it runs.' : 'Type a cron expression.', kind === 'once' ? once : cron);
        if (!schedule && !body.model) delete body.model;
        save.disabled = true;
        try {
          const saved = schedule
            ? await api.patch(`/schedules/${encodeURIComponent(schedule.id)}`, body)
            : await api.post('/schedules', body);
          onSaved(saved);
        } catch (err) {
          fail(errorText(err));
        } finally {
          save.disabled = false;
        }
      },
    },
    h('h2', null, schedule ? `Change “${schedule.name}”` : 'New schedule'),
    label('Name', name),
    label('Project', project, 'Its runs are conversations of this project, with its tools and instructions.'),
    h(
      'fieldset',
      { class: 'field sf-when' },
      h('legend', { class: 'label' }, 'When'),
      kindRadios,
      describe,
    ),
    label('Time zone', tz, 'For cron, months, years and one-off times. Empty: the hub’s zone, whatever it is then.'),
    h('datalist', { id: zoneListId }, zoneList().map((z) => h('option', { value: z }))),
    label('Prompt', prompt, 'A fresh conversation each run: nothing carries over between runs.'),
    label('Model (optional)', model, 'provider/model, like anthropic/claude-sonnet-4-5.'),
    h(
      'fieldset',
      { class: 'field' },
      h('legend', { class: 'label' }, 'Tools it may use without asking'),
      tools,
      h(
        'small',
        { class: 'muted rec-hint' },
        'Others wait for your approval. After a run reads someone else’s words, writing files, running commands and fetching ask anyway.',
      ),
    ),
    label('Runs missed while the hub was off or asleep', h('span', { class: 'row' }, missed, catchUpBox)),
    label('An approval waits for you', wait),
    error,
    h(
      'div',
      { class: 'row form-actions' },
      save,
      h('button', { type: 'button', 'data-test': 'sf-cancel', onclick: () => onCancel() }, 'Cancel'),
    ),
  );

  function fail(message, focus = null) {
    error.textContent = message;
    error.hidden = false;
    focus?.focus();
  }

  loadTools();
  preview();
  return form;
}

/** A one-off schedule's time for the datetime-local field (its spec as typed, or the instant locally). */
function onceLocal(s) {
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(s.spec)) return s.spec.slice(0, 16);
  const t = s.next_due ?? Date.parse(s.spec);
  if (!Number.isFinite(t)) return '';
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
