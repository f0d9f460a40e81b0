// records/task-detail.js: the task editor at `#/tasks/<id>` (title, notes, status, due
// date and time, recurrence, agent job, project, parent, subtasks, delete), beside the
// list on a wide screen.
//
// Owns: how a recurrence is chosen (a unit and a count, stored as `3d`; hours only for
// an agent job, whose schedule on the hub records/task-job.js shows), keeping a
// task's subtasks in its project when it moves, and saying that deleting it deletes
// them (`DELETE /tasks/<id>` takes them in one go). Must never build markup from
// strings; text fields save through records/editor.js (splices).
//
// data-test: "task-detail" (data-id), "task-gone", "task-title", "task-notes",
// "task-status", "task-due-date", "task-due-time", "task-due-clear",
// "task-repeat-unit", "task-repeat-count", "task-repeat-unit-word", "task-project",
// "task-parent", "task-subtasks", those of records/task-job.js ("task-agent-job",
// "task-job", …), "task-subtask-input", "task-item", "task-open",
// "task-done", "save-state", "delete", "delete-confirm", "error".

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { flatTree } from '../projects.js';
import {
  arrowNav,
  deleteButton,
  errorBox,
  errorText,
  fetchAll,
  followRecord,
  field,
  projectLabel,
  props,
} from './common.js';
import { parseInterval, splitDue } from './dates.js';
import { recordEditor } from './editor.js';
import { saveState } from './split.js';
import { bySteps, doneBox, dueLabel, isOpen, repeatLabel } from './task-common.js';
import { taskJob } from './task-job.js';

/**
 * Per interval unit: the choice's name, and the unit after "every 1" and "every n".
 * Hours are for agent jobs only (a person's chore repeats in days at the least).
 */
const REPEAT_WORDS = {
  h: ['Hourly', 'hour', 'hours'],
  d: ['Daily', 'day', 'days'],
  w: ['Weekly', 'week', 'weeks'],
  m: ['Monthly', 'month', 'months'],
  y: ['Yearly', 'year', 'years'],
};

/** Fills `pane` with task `id`'s editor; resolves with its cleanup once it shows. */
export async function taskDetail(pane, ctx, id) {
  let task;
  try {
    task = await api.get(`/tasks/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(pane, h('div', { class: 'card' }, errorBox(e), h('a', { href: '#/tasks' }, 'Back to the tasks')));
    return () => {};
  }
  const state = saveState();
  const editor = recordEditor({
    path: `/tasks/${encodeURIComponent(id)}`,
    record: task,
    onState: state.show,
    onRecord: draw,
  });

  const title = editor.text(
    'name',
    h('textarea', {
      class: 'task-title-input',
      rows: 1,
      'aria-label': 'Task',
      'data-test': 'task-title',
      placeholder: 'What to do',
    }),
  );
  // A title is one line: Enter leaves the field (saving it) instead of breaking it.
  title.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.isComposing) {
      e.preventDefault();
      title.blur();
    }
  });
  const notes = editor.text(
    'notes',
    h('textarea', { rows: 6, 'aria-label': 'Notes', 'data-test': 'task-notes', placeholder: 'Notes, links, details…' }),
  );

  const check = h('span', { class: 'task-detail-check' });
  const status = h(
    'select',
    {
      'data-test': 'task-status',
      onchange: () =>
        patch({
          status: status.value === 'open' ? (editor.record.interval ? 'recurring' : 'incomplete') : status.value,
        }),
    },
    h('option', { value: 'open' }, 'To do'),
    h('option', { value: 'complete' }, 'Done'),
    h('option', { value: 'cancelled' }, 'Cancelled'),
  );
  editor.scalar('status', status, (s) => (status.value = isOpen(s) ? 'open' : s));

  const dueDate = h('input', {
    type: 'date',
    'aria-label': 'Due date',
    'data-test': 'task-due-date',
    onchange: () => saveDue(),
  });
  const dueTime = h('input', {
    type: 'time',
    'aria-label': 'Due time (optional)',
    'data-test': 'task-due-time',
    onchange: () => saveDue(),
  });
  const dueClear = h(
    'button',
    { class: 'link', 'data-test': 'task-due-clear', onclick: () => patch({ due: null }) },
    'clear',
  );
  const dueNote = h('span', { class: 'task-due-note' });
  editor.scalar('due', dueDate, (due) => {
    const d = splitDue(due);
    dueDate.value = d?.date ?? '';
    if (document.activeElement !== dueTime) dueTime.value = d?.time ?? '';
    dueTime.disabled = !d;
    dueTime.hidden = !d;
    dueClear.hidden = !d;
    replace(dueNote, dueLabel(due, editor.record.status));
  });
  function saveDue() {
    if (!dueDate.value) return patch({ due: null });
    patch({ due: dueTime.value ? `${dueDate.value}T${dueTime.value}` : dueDate.value });
  }

  const repeatCount = h('input', {
    type: 'number',
    min: 1,
    max: 999,
    class: 'repeat-count',
    'aria-label': 'Repeat every how many',
    'data-test': 'task-repeat-count',
    onchange: () => saveRepeat(),
  });
  const repeatUnit = h('select', {
    'aria-label': 'Repeats',
    'data-test': 'task-repeat-unit',
    onchange: () => saveRepeat(),
  });
  let hoursOffered = null;
  /** The unit choices: hours while it is an agent job (or already repeats in hours). */
  function repeatChoices(t) {
    const hours = Boolean(t.agent_job) || parseInterval(t.interval)?.unit === 'h';
    if (hours === hoursOffered) return;
    hoursOffered = hours;
    const value = repeatUnit.value;
    replace(
      repeatUnit,
      h('option', { value: '' }, 'Never'),
      Object.entries(REPEAT_WORDS)
        .filter(([k]) => hours || k !== 'h')
        .map(([k, [name]]) => h('option', { value: k }, name)),
    );
    repeatUnit.value = value;
  }
  repeatChoices(task);
  const repeatText = h('span', { 'data-test': 'task-repeat-unit-word' });
  const repeatEvery = h('span', { class: 'repeat-every' }, 'every', repeatCount, repeatText);
  editor.scalar('interval', repeatUnit, (iv) => {
    repeatChoices(editor.record);
    const p = parseInterval(iv);
    repeatUnit.value = p?.unit ?? '';
    if (document.activeElement !== repeatCount) repeatCount.value = p?.count ?? 1;
    repeatCount.disabled = !p;
    repeatEvery.hidden = !p;
    repeatText.textContent = p ? REPEAT_WORDS[p.unit][p.count === 1 ? 1 : 2] : '';
  });
  function saveRepeat() {
    const s = editor.record.status;
    if (!repeatUnit.value) return patch({ interval: null, status: s === 'recurring' ? 'incomplete' : s });
    const n = Math.max(1, Math.min(999, parseInt(repeatCount.value, 10) || 1));
    patch({ interval: `${n}${repeatUnit.value}`, status: s === 'incomplete' ? 'recurring' : s });
  }

  const project = h('select', { 'data-test': 'task-project', onchange: () => moveProject(project.value || null) });
  editor.scalar('project', project, (p) => {
    replace(
      project,
      ctx.scope ? null : h('option', { value: '' }, 'No project'),
      flatTree(ctx.projects).map(({ project: pr, depth }) =>
        h('option', { value: pr.id }, '\u00a0\u00a0'.repeat(depth) + pr.name),
      ),
      p && !ctx.projects.some((x) => x.id === p) ? h('option', { value: p }, projectLabel(ctx.projects, p)) : null,
    );
    project.value = p ?? '';
  });

  const parent = h('select', { 'data-test': 'task-parent', onchange: () => patch({ parent: parent.value || null }) });
  const parentHint = h('small', { class: 'muted rec-hint' });
  const subBox = h('div', { class: 'task-subtasks', 'data-test': 'task-subtasks' });
  let subtasks = [];

  async function loadRelatives() {
    const t = editor.record;
    try {
      subtasks = (await fetchAll('/tasks', { parent: t.id })).sort(bySteps);
      const sameProject = t.project
        ? await fetchAll('/tasks', { project: t.project })
        : (await fetchAll('/tasks')).filter((x) => !x.project);
      const candidates = sameProject.filter(
        (x) => !x.parent && x.id !== t.id && (isOpen(x.status) || x.id === t.parent),
      );
      candidates.sort((a, b) => a.title.localeCompare(b.title));
      replace(
        parent,
        h('option', { value: '' }, 'None (a task of its own)'),
        candidates.map((c) => h('option', { value: c.id }, c.title)),
      );
      parent.value = t.parent ?? '';
      parent.disabled = subtasks.length > 0;
      parentHint.textContent = subtasks.length ? 'A task with subtasks cannot become a subtask.' : '';
      drawSubtasks();
    } catch (e) {
      replace(subBox, errorBox(e));
    }
  }

  function drawSubtasks() {
    const t = editor.record;
    if (t.parent) {
      replace(subBox);
      return;
    }
    const input = h('input', {
      type: 'text',
      placeholder: 'Add a subtask and press Enter',
      'aria-label': 'New subtask',
      'data-test': 'task-subtask-input',
      enterkeyhint: 'done',
      onkeydown: async (e) => {
        if (e.key !== 'Enter' || e.isComposing) return;
        e.preventDefault();
        const name = input.value.trim();
        if (!name) return;
        try {
          await api.post('/tasks', { name, parent: t.id, project: t.project });
          input.value = '';
          await loadRelatives();
          subBox.querySelector('[data-test=task-subtask-input]')?.focus();
        } catch (err) {
          ctx.toast(`Subtask not added: ${errorText(err)}`, 'error');
        }
      },
    });
    replace(
      subBox,
      h('h2', null, 'Subtasks'),
      subtasks.length
        ? arrowNav(
            h(
              'ul',
              { class: 'list task-list' },
              subtasks.map((s) =>
                h(
                  'li',
                  {
                    class: ['task', 'subtask', s.status === 'complete' ? 'is-done' : null],
                    'data-test': 'task-item',
                    dataset: { id: s.id, status: s.status, parent: s.parent, navRow: '' },
                  },
                  h(
                    'div',
                    { class: 'task-row' },
                    doneBox(s, ctx, loadRelatives),
                    h(
                      'div',
                      { class: 'task-main' },
                      h(
                        'a',
                        { class: 'task-title', href: `#/tasks/${encodeURIComponent(s.id)}`, 'data-test': 'task-open' },
                        s.title,
                      ),
                      s.due || s.status === 'recurring'
                        ? h('div', { class: 'task-meta' }, repeatLabel(s), dueLabel(s.due, s.status))
                        : null,
                    ),
                  ),
                ),
              ),
            ),
            '.task-title',
          )
        : h('p', { class: 'muted' }, 'Break it into steps: add them here.'),
      input,
    );
  }

  async function patch(body) {
    try {
      await editor.set(body);
    } catch {
      // The save state shows why; put the controls back as the task is.
      editor.reread();
    }
  }

  async function moveProject(to) {
    try {
      await editor.set({ project: to, parent: null });
      // Subtasks go where their parent goes.
      for (const s of subtasks) await api.patch(`/tasks/${s.id}`, { project: to });
      loadRelatives();
    } catch {
      editor.reread();
    }
  }

  const job = taskJob(ctx, editor, patch);

  const parentLink = h('p', { class: 'muted task-parent-link' });
  let shownParent;
  function draw(t) {
    repeatChoices(t);
    job.update(t);
    replace(
      check,
      doneBox({ ...t, title: t.name }, ctx, () => editor.refresh()),
    );
    if (t.parent === shownParent) return;
    shownParent = t.parent;
    if (t.parent) {
      api.get(`/tasks/${encodeURIComponent(t.parent)}`).then(
        (p) => replace(parentLink, 'Subtask of ', h('a', { href: `#/tasks/${encodeURIComponent(p.id)}` }, p.name)),
        () => replace(parentLink),
      );
    } else replace(parentLink);
  }

  replace(
    pane,
    h(
      'article',
      { class: 'card task-detail', 'data-test': 'task-detail', dataset: { id } },
      parentLink,
      h('div', { class: 'task-detail-head' }, check, title),
      h('div', { class: 'rec-status-line' }, state),
      props([
        ['Status', status],
        ['Due', h('div', { class: 'row' }, dueDate, dueTime, dueClear), dueNote],
        ['Repeats', h('div', { class: 'row' }, repeatUnit, repeatEvery)],
        ['Agent job', job.toggle],
        ['Project', project],
        ['Subtask of', parent, parentHint],
      ]),
      field('Notes', notes),
      job.panel,
      subBox,
      h(
        'div',
        { class: 'rec-actions' },
        deleteButton({
          what: task.name,
          warning: () =>
            subtasks.length ? `Its ${subtasks.length} subtask${subtasks.length > 1 ? 's' : ''} go too.` : null,
          onDelete: async () => {
            try {
              await api.del(`/tasks/${encodeURIComponent(id)}`);
              ctx.toast('Task deleted.', 'ok');
              ctx.navigate(editor.record.parent ? `tasks/${editor.record.parent}` : 'tasks');
            } catch (e) {
              ctx.toast(`Not deleted: ${errorText(e)}`, 'error');
            }
          },
        }),
      ),
    ),
  );
  draw(task);
  loadRelatives();

  followRecord(ctx, 'task', 'tasks', editor, pane, { refreshed: loadRelatives });
  ctx.on('projects', () => editor.reread());
  return () => {
    job.close();
    return editor.close();
  };
}
