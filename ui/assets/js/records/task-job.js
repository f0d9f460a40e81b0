// records/task-job.js: a task's agent job in its editor: the "Agent job" switch (the
// agent runs the task's name and notes as a prompt on the hub, every interval or once at
// its due) and, for an agent job, its schedule on the hub: the next and last run, "Run
// now", its recent runs with their answers' first lines and links to their conversations.
//
// Owns: `GET /schedules?task=<id>` and `GET /schedules/<id>/runs` for the open task
// (relayed on a node: while the hub is away it says the next run is known when the hub
// is reachable), read again when the task changes, when a run of it is notified, when
// the hub comes back, and every 2 s while the hub has yet to schedule it or a run is
// under way. Must never write the schedule (the hub keeps it equal to the task) nor
// build markup from strings.
//
// data-test: "task-agent-job" (the switch), "task-job" (the panel), "task-job-next",
// "task-job-last", "task-job-describe", "task-job-run", "task-job-open", "task-job-hub"
// (the hub is out of reach), "task-job-waiting", "task-job-needs-when"; the runs' are
// listed in schedules/common.js.

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';
import { errorText } from './common.js';
import { nextText, runNow, runsList } from '../schedules/common.js';

const POLL_MS = 2000;
const RECENT = 3;

export const AGENT_JOB_MEANS =
  'The agent runs this task’s name and notes as a prompt on the hub, every interval (or once at its due date), and its answers show here.';

/**
 * The switch and the panel for the task `editor` edits; `patch(body)` saves a change of
 * the task. Answers `{ toggle, panel, update(record), close() }`.
 */
export function taskJob(ctx, editor, patch) {
  const toggle = h('input', {
    type: 'checkbox',
    role: 'switch',
    'aria-describedby': 'task-agent-job-means',
    'data-test': 'task-agent-job',
    onchange: () => patch({ agent_job: toggle.checked }),
  });
  const toggleWord = h('span', null, 'Off');
  const toggleBox = h(
    'div',
    { class: 'task-job-toggle' },
    h('label', { class: 'switch', 'aria-label': 'Agent job' }, toggle, toggleWord),
    h('small', { class: 'muted rec-hint', id: 'task-agent-job-means' }, AGENT_JOB_MEANS),
  );

  const panel = h('section', { class: 'task-job', 'data-test': 'task-job', hidden: true, 'aria-live': 'polite' });
  let timer = null;
  let token = 0;
  let closed = false;
  let schedule = null;

  const poll = (yes) => {
    clearTimeout(timer);
    timer = yes && !closed ? setTimeout(load, POLL_MS) : null;
  };

  async function load() {
    const t = editor.record;
    const mine = ++token;
    if (!t.agent_job || closed) {
      poll(false);
      return;
    }
    if (!t.interval && !t.due) {
      schedule = null;
      poll(false);
      return draw(
        h(
          'p',
          { class: 'muted', 'data-test': 'task-job-needs-when' },
          'Give it a repeat or a due date: an agent job runs every interval, or once at its due date.',
        ),
      );
    }
    try {
      const page = await api.get('/schedules', { task: t.id, limit: 1 });
      if (mine !== token) return;
      schedule = page.data[0] ?? null;
      if (!schedule || !(t.status === 'incomplete' || t.status === 'recurring')) {
        poll(Boolean(t.status === 'incomplete' || t.status === 'recurring'));
        return draw(
          h(
            'p',
            { class: 'muted', 'data-test': 'task-job-waiting' },
            t.status === 'incomplete' || t.status === 'recurring'
              ? 'The hub schedules it in a moment…'
              : 'It no longer runs: the task is closed.',
          ),
        );
      }
      const runs = await api.get(`/schedules/${encodeURIComponent(schedule.id)}/runs`, { limit: RECENT });
      if (mine !== token) return;
      poll(schedule.running || runs.data.some((r) => r.status === 'running'));
      drawSchedule(schedule, runs.data);
    } catch (e) {
      if (mine !== token || e.status === 401) return;
      poll(false);
      draw(
        e.code === 'hub_unreachable'
          ? h(
              'p',
              { class: 'notice warn', 'data-test': 'task-job-hub' },
              'The next run is known when the hub is reachable.',
            )
          : h('p', { class: 'rec-error', role: 'alert', 'data-test': 'error' }, errorText(e)),
      );
    }
  }

  function draw(...body) {
    replace(panel, h('h2', null, 'Agent job'), body);
  }

  function drawSchedule(s, runs) {
    const run = h(
      'button',
      {
        type: 'button',
        'data-test': 'task-job-run',
        disabled: s.running,
        onclick: async () => {
          run.disabled = true;
          try {
            await runNow(s.id);
            ctx.toast('Running it now; the answer shows here.', 'ok');
          } catch (e) {
            ctx.toast(`Not started: ${errorText(e)}`, 'error');
          }
          load();
        },
      },
      s.running ? 'Running…' : 'Run now',
    );
    draw(
      h(
        'dl',
        { class: 'job-facts' },
        h('dt', null, 'Runs'),
        h('dd', { 'data-test': 'task-job-describe' }, s.describe),
        h('dt', null, 'Next run'),
        h('dd', { 'data-test': 'task-job-next' }, nextText(s)),
        h('dt', null, 'Last run'),
        h('dd', { 'data-test': 'task-job-last' }, s.last_run_at ? ago(s.last_run_at) : 'not yet'),
      ),
      h(
        'div',
        { class: 'row job-actions' },
        run,
        h('a', { href: `#/schedules/${encodeURIComponent(s.id)}`, 'data-test': 'task-job-open' }, 'Its schedule and every run'),
      ),
      runs.length ? h('h3', null, 'Recent runs') : null,
      runsList(runs, { brief: true }),
    );
  }

  // A finished run of this job is notified on the event stream: read it then.
  ctx.onEvent('notification', (ev) => {
    if (schedule && ev.refs?.schedule === schedule.id) load();
  });
  ctx.on('hub', () => load());
  ctx.on('resync', () => load());

  return {
    toggle: toggleBox,
    panel,
    /** Shows the task as it now is. */
    update(t) {
      toggle.checked = Boolean(t.agent_job);
      toggleWord.textContent = t.agent_job ? 'On: the agent does it' : 'Off';
      panel.hidden = !t.agent_job;
      load();
    },
    close() {
      closed = true;
      poll(false);
    },
  };
}
