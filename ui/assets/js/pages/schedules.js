// pages/schedules.js: the Schedules page (the hub's; a node relays it): every schedule
// of the chosen project (all when none is chosen) with when it runs in words, when it
// next runs in local time, how its last run went and whether it is paused; `#/schedules/
// new` the form for a new one; `#/schedules/<id>` one schedule: its facts, Run now,
// Pause or Resume, Change (`…/<id>/edit`), Delete after confirming, and its runs with
// their answers rendered through markdown.js. A task's agent job is listed too, but it
// follows its task: it is changed there, not here.
//
// Owns: `GET /schedules`, `GET /schedules/{id}`, `GET /schedules/{id}/runs`, pause,
// resume, run and delete; read again when a run is notified, when events were missed,
// when a laptop's hub comes back, and every 2 s while a run is under way. Must never
// keep a schedule between visits nor build markup from strings.
//
// data-test: "schedules-new", "schedule-list", "schedule-item" (data-id, data-paused)
// with "schedule-open", "schedule-describe", "schedule-next", "schedule-last",
// "schedule-paused", "schedule-task"; "schedules-empty"; "schedule-detail" (data-id)
// with "schedule-run", "schedule-pause", "schedule-resume", "schedule-edit",
// "schedule-prompt", "schedule-follows-task", "schedule-runs", "runs-more",
// "delete"/"delete-confirm"; "hub-unreachable", "problem"; the form's are listed in
// schedules/form.js, the runs' in schedules/common.js.

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';
import { problem, projectName } from '../admin/common.js';
import { arrowNav, deleteButton, errorText, pageHead } from '../records/common.js';
import { render } from '../markdown.js';
import { nextText, runNow, runPill, runsList } from '../schedules/common.js';
import { scheduleForm } from '../schedules/form.js';

const POLL_MS = 2000;
const RUNS_PAGE = 20;

const MISSED_WORDS = { skip: 'skipped', run_once: 'run once when back', catch_up: 'caught up' };

function waitWords(secs) {
  if (secs % 86400 === 0) return secs === 86400 ? '1 day' : `${secs / 86400} days`;
  if (secs % 3600 === 0) return secs === 3600 ? '1 hour' : `${secs / 3600} hours`;
  return `${Math.round(secs / 60)} minutes`;
}

export default {
  title: 'Schedules',
  async mount(el, ctx) {
    let timer = null;
    let closed = false;
    const poll = (yes, fn) => {
      clearTimeout(timer);
      timer = yes && !closed ? setTimeout(fn, POLL_MS) : null;
    };
    const id = ctx.route.id;
    let reload;
    if (!id) reload = await listView(el, ctx, poll);
    else if (id === 'new') newView(el, ctx);
    else if (ctx.route.rest[1] === 'edit') await editView(el, ctx, id);
    else reload = await detailView(el, ctx, id, poll);
    if (reload) {
      ctx.onEvent('notification', (ev) => {
        if (ev.refs?.schedule) reload();
      });
      ctx.on('resync', () => reload());
      ctx.on('hub', () => reload());
      ctx.on('project', () => reload());
    }
    return () => {
      closed = true;
      clearTimeout(timer);
    };
  },
};

// ---------------------------------------------------------------- list

async function listView(el, ctx, poll) {
  const body = h('div', { class: 'schedule-list-box' });
  const newButton = h(
    'a',
    { class: 'button primary', href: '#/schedules/new', 'data-test': 'schedules-new' },
    'New schedule',
  );
  replace(
    el,
    pageHead(
      'Schedules',
      'The agent at work while you are away: a prompt run on the hub every interval, on a cron, or once.',
      newButton,
    ),
    body,
  );
  let token = 0;
  async function load() {
    const mine = ++token;
    try {
      const page = await api.get('/schedules', { project: ctx.project ?? undefined, limit: 500 });
      // How each one's last run went (one small read each, side by side).
      const last = await Promise.all(
        page.data.map((s) =>
          s.last_run_at
            ? api.get(`/schedules/${encodeURIComponent(s.id)}/runs`, { limit: 1 }).then(
                (r) => r.data[0] ?? null,
                () => null,
              )
            : null,
        ),
      );
      if (mine !== token) return;
      poll(page.data.some((s) => s.running) || last.some((r) => r?.status === 'running'), load);
      replace(body, listOf(ctx, page.data, last));
    } catch (e) {
      if (mine === token && e.status !== 401) replace(body, problem(e, 'the schedules'));
    }
  }
  await load();
  return load;
}

function listOf(ctx, schedules, last) {
  if (!schedules.length) {
    return h(
      'div',
      { class: 'card empty-card', 'data-test': 'schedules-empty' },
      h('p', null, 'Nothing is scheduled', ctx.project ? ' in this project.' : '.'),
      h(
        'p',
        { class: 'muted' },
        'A morning briefing every weekday at 08:00, a weekly review on Fridays: make one here, or mark a task an agent job.',
      ),
    );
  }
  return arrowNav(
    h(
      'ul',
      { class: 'list schedule-list', 'data-test': 'schedule-list' },
      schedules.map((s, i) =>
        h(
          'li',
          {
            class: ['schedule-item', s.paused ? 'is-paused' : null],
            'data-test': 'schedule-item',
            dataset: { id: s.id, paused: String(s.paused), navRow: '' },
          },
          h(
            'div',
            { class: 'schedule-line' },
            h(
              'a',
              { class: 'schedule-name', href: `#/schedules/${encodeURIComponent(s.id)}`, 'data-test': 'schedule-open' },
              s.name,
            ),
            s.task ? h('span', { class: 'pill muted', 'data-test': 'schedule-task', title: 'A task’s agent job' }, 'task') : null,
            s.paused ? h('span', { class: 'pill warn', 'data-test': 'schedule-paused' }, 'paused') : null,
            ctx.project ? null : h('span', { class: 'meta schedule-project' }, projectName(ctx.projects, s.project)),
          ),
          h(
            'div',
            { class: 'meta schedule-meta' },
            h('span', { 'data-test': 'schedule-describe' }, s.describe),
            h('span', null, ' · next '),
            h('span', { 'data-test': 'schedule-next' }, nextText(s)),
          ),
          last[i]
            ? h(
                'div',
                { class: 'meta schedule-last', 'data-test': 'schedule-last' },
                'Last run ',
                ago(last[i].started_at),
                ' ',
                runPill(last[i]),
              )
            : null,
        ),
      ),
    ),
    '.schedule-name',
  );
}

// ---------------------------------------------------------------- new and edit

function newView(el, ctx) {
  replace(
    el,
    h('p', { class: 'back-link' }, h('a', { href: '#/schedules' }, '← Schedules')),
    scheduleForm(ctx, null, {
      onSaved: (s) => {
        ctx.toast(`“${s.name}” is scheduled: ${s.describe}.`, 'ok');
        ctx.navigate(`schedules/${encodeURIComponent(s.id)}`);
      },
      onCancel: () => ctx.navigate('schedules'),
    }),
  );
}

async function editView(el, ctx, id) {
  const back = h('p', { class: 'back-link' }, h('a', { href: `#/schedules/${encodeURIComponent(id)}` }, '← Back'));
  let s;
  try {
    s = await api.get(`/schedules/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(el, back, problem(e, 'this schedule'));
    return;
  }
  replace(
    el,
    back,
    scheduleForm(ctx, s, {
      onSaved: (saved) => {
        ctx.toast(`Saved: ${saved.describe}.`, 'ok');
        ctx.navigate(`schedules/${encodeURIComponent(id)}`);
      },
      onCancel: () => ctx.navigate(`schedules/${encodeURIComponent(id)}`),
    }),
  );
}

// ---------------------------------------------------------------- one schedule

async function detailView(el, ctx, id, poll) {
  const path = `/schedules/${encodeURIComponent(id)}`;
  const card = h('article', { class: 'card schedule-detail', 'data-test': 'schedule-detail', dataset: { id } });
  const runsBox = h('section', { class: 'card schedule-runs', 'data-test': 'schedule-runs' });
  replace(el, h('p', { class: 'back-link' }, h('a', { href: '#/schedules' }, '← Schedules')), card, runsBox);
  let shown = RUNS_PAGE;
  let token = 0;

  async function load() {
    const mine = ++token;
    try {
      const [s, runs] = await Promise.all([api.get(path), api.get(`${path}/runs`, { limit: shown })]);
      if (mine !== token) return;
      poll(s.running || runs.data.some((r) => r.status === 'running'), load);
      drawCard(s);
      drawRuns(runs);
    } catch (e) {
      if (mine !== token || e.status === 401) return;
      replace(card, problem(e, 'this schedule'));
      replace(runsBox);
    }
  }

  async function act(what, call, done) {
    try {
      await call();
      if (done) ctx.toast(done, 'ok');
    } catch (e) {
      ctx.toast(`${what}: ${errorText(e)}`, 'error');
    }
    load();
  }

  function drawCard(s) {
    const follows = Boolean(s.task);
    const buttons = [
      h(
        'button',
        {
          type: 'button',
          class: 'primary',
          'data-test': 'schedule-run',
          disabled: s.running,
          onclick: (e) => {
            e.currentTarget.disabled = true;
            act('Not started', () => runNow(s.id), 'Running it now; its answer shows below.');
          },
        },
        s.running ? 'Running…' : 'Run now',
      ),
      s.paused
        ? h('button', { type: 'button', 'data-test': 'schedule-resume', onclick: () => act('Not resumed', () => api.post(`${path}/resume`), 'Resumed.') }, 'Resume')
        : h('button', { type: 'button', 'data-test': 'schedule-pause', onclick: () => act('Not paused', () => api.post(`${path}/pause`), 'Paused: it does not run until resumed.') }, 'Pause'),
      follows ? null : h('a', { class: 'button', href: `#/schedules/${encodeURIComponent(s.id)}/edit`, 'data-test': 'schedule-edit' }, 'Change'),
      follows
        ? null
        : deleteButton({
            what: s.name,
            warning: 'Its runs stay on record.',
            onDelete: async () => {
              try {
                await api.del(path);
                ctx.toast(`“${s.name}” is deleted.`, 'ok');
                ctx.navigate('schedules');
              } catch (e) {
                ctx.toast(`Not deleted: ${errorText(e)}`, 'error');
              }
            },
          }),
    ];
    const facts = [
      ['Runs', s.describe],
      ['Next run', nextText(s)],
      ['Last run', s.last_run_at ? ago(s.last_run_at) : 'not yet'],
      ['Project', projectName(ctx.projects, s.project)],
      ['Time zone', s.tz || 'the hub’s'],
      ['Model', s.model || 'the configured chat model'],
      ['Without asking', s.auto_approve.length ? s.auto_approve.join(', ') : 'no tool: every approval waits for you'],
      ['Missed runs', s.missed === 'catch_up' ? `caught up, at most ${s.catch_up_max}` : MISSED_WORDS[s.missed] ?? s.missed],
      ['Approvals wait', waitWords(s.approval_wait_secs)],
    ];
    replace(
      card,
      h(
        'div',
        { class: 'schedule-head' },
        h('h1', null, s.name),
        s.paused ? h('span', { class: 'pill warn', 'data-test': 'schedule-paused' }, 'paused') : null,
      ),
      follows
        ? h(
            'p',
            { class: 'notice', 'data-test': 'schedule-follows-task' },
            'This is a task’s agent job: it follows ',
            h('a', { href: `#/tasks/${encodeURIComponent(s.task)}` }, 'its task'),
            '. Change its name, notes, repeat or due date there.',
          )
        : null,
      h('div', { class: 'row schedule-actions' }, buttons),
      h(
        'dl',
        { class: 'job-facts' },
        facts.map(([k, v]) => [h('dt', null, k), h('dd', { 'data-test': `schedule-${k.toLowerCase().replace(/\s+/g, '-')}` }, v)]),
      ),
      h('h2', null, 'Prompt'),
      h('div', { class: 'md schedule-prompt', 'data-test': 'schedule-prompt' }, render(s.prompt)),
    );
  }

  function drawRuns(runs) {
    const more =
      runs.total > runs.data.length
        ? h(
            'button',
            {
              type: 'button',
              class: 'link',
              'data-test': 'runs-more',
              onclick: () => {
                shown += RUNS_PAGE;
                load();
              },
            },
            `Show older runs (${runs.total - runs.data.length} more)`,
          )
        : null;
    replace(runsBox, h('h2', null, 'Runs', runs.total ? h('span', { class: 'muted' }, ` · ${runs.total}`) : null), runsList(runs.data), more);
  }

  await load();
  return load;
}
