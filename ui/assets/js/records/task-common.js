// records/task-common.js: what the task list (pages/tasks.js) and the task editor
// (records/task-detail.js) both draw: the done checkbox, the due date and recurrence
// labels, and the order of subtasks.
//
// Owns: the done checkbox's calls (done is `POST /tasks/{id}/done`, where the API moves a
// recurring task's due date on; undone sets the status back). Must never decide what
// "done" means for a recurring task itself, nor keep a task past the draw it came with.
//
// data-test: "task-done" (the checkbox), "task-due" (class "overdue" when late),
// "task-repeat" (says "agent" for an agent job).

import * as api from '../api.js';
import { h } from '../dom.js';
import { errorText } from './common.js';
import { formatDue, intervalText, isOverdue } from './dates.js';

export const isOpen = (s) => s === 'incomplete' || s === 'recurring';

/** Subtasks keep a calm order: open first, then due date, then name. */
export function bySteps(a, b) {
  return (
    Number(isOpen(b.status)) - Number(isOpen(a.status)) ||
    (a.due ?? '\uffff').localeCompare(b.due ?? '\uffff') ||
    a.title.localeCompare(b.title)
  );
}

/**
 * Marks `task` (a listed row or the task read whole) done or not. "Done" is the API's
 * (`POST /tasks/{id}/done`): a recurring task is never done, its due date moves on by
 * its interval. Answers a message for a toast, or null.
 */
async function setDone(task, done) {
  const path = `/tasks/${encodeURIComponent(task.id)}`;
  if (done) {
    const after = await api.post(`${path}/done`);
    if (after.status === 'recurring') {
      return `“${after.name}” repeats ${intervalText(after.interval)}: next due ${formatDue(after.due)}.`;
    }
    return null;
  }
  await api.patch(path, { status: task.interval ? 'recurring' : 'incomplete' });
  return null;
}

export function doneBox(task, ctx, after) {
  const box = h('input', {
    type: 'checkbox',
    class: 'task-check',
    checked: task.status === 'complete',
    disabled: task.status === 'cancelled',
    'aria-label':
      task.status === 'recurring' ? `Done this time: ${task.title ?? task.name}` : `Done: ${task.title ?? task.name}`,
    title: task.status === 'recurring' ? 'Done this time: moves the due date on' : null,
    'data-test': 'task-done',
    onchange: async () => {
      box.disabled = true;
      box.closest('[data-test=task-item]')?.classList.toggle('is-done', box.checked);
      try {
        const note = await setDone(task, box.checked);
        if (note) ctx.toast(note, 'ok');
      } catch (e) {
        box.checked = !box.checked;
        ctx.toast(`Could not change the task: ${errorText(e)}`, 'error');
      } finally {
        box.disabled = false;
        after?.();
      }
    },
  });
  return box;
}

/** "↻ every 3 days" for a repeating task ("↻ agent · every 6 hours" for an agent job), or null. */
export function repeatLabel(task) {
  if (task.status !== 'recurring') return null;
  const every = [task.agent_job ? 'agent' : null, intervalText(task.interval)].filter(Boolean).join(' · ');
  return h(
    'span',
    { class: 'task-repeat', title: every ? `Repeats ${every}` : 'Repeats', 'data-test': 'task-repeat' },
    every ? `↻ ${every}` : '↻',
  );
}

export function dueLabel(due, status) {
  if (!due) return null;
  const late = isOpen(status) && isOverdue(due);
  return h(
    'span',
    {
      class: ['task-due', late ? 'overdue' : null],
      'data-test': 'task-due',
      title: late ? `Overdue: due ${due}` : `Due ${due}`,
    },
    late ? `overdue · ${formatDue(due)}` : formatDue(due),
  );
}
