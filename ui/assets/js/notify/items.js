// notify/items.js: one notification as a list item: what it is, when, in which project,
// its text, where it points (the run's conversation, the task), and for an approval
// that still waits, Approve and Deny right there.
//
// Owns: the item's markup and its actions (`POST /approvals/{id}`, then marking the
// notification read through the page's `markRead`). Must never render a body as markup
// other than through markdown.js (a run's answer is the model's text).
//
// data-test: "notification" (data-id, data-kind, data-read, data-quiet), "notification-
// title", "notification-body", "mark-read", "approve", "deny", "approval-status"
// (data-status), "open-conversation", "open-task".

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';
import { render } from '../markdown.js';
import { projectName, reason, when } from '../admin/common.js';

/** What each kind is called. */
export const KIND_LABELS = {
  run_finished: 'Run finished',
  run_failed: 'Run failed',
  approval_waiting: 'Approval',
  task_due: 'Task due',
};

const KIND_TONE = { run_finished: 'ok', run_failed: 'danger', approval_waiting: 'warn', task_due: '' };

const STATUS_WORDS = {
  waiting: 'Waiting for you',
  approved: 'Approved',
  denied: 'Denied',
  timed_out: 'Timed out',
  stopped: 'Stopped',
  gone: 'No longer waiting',
};

// Bodies longer than this start folded.
const FOLD_CHARS = 360;

/**
 * The item for notification `n`. `approvals` maps approval id → status (`waiting`,
 * `approved`…; absent: the hub no longer holds it). `markRead(n)` marks it read.
 */
export function notificationItem(ctx, n, { approvals, markRead, focused }) {
  const unread = !n.read_at;
  const approval = n.kind === 'approval_waiting' ? n.refs?.approval : null;
  const li = h('li', {
    class: ['notification', unread ? 'unread' : null, focused ? 'focused' : null],
    tabindex: '-1',
    dataset: {
      test: 'notification',
      id: String(n.id),
      kind: n.kind,
      read: String(!unread),
      quiet: String(!!n.quiet),
    },
  });

  const body = h('div', { class: 'notification-body', dataset: { test: 'notification-body' } });
  if (approval) body.append(h('pre', null, n.body));
  else if (n.kind === 'run_finished') body.append(render(n.body));
  else body.append(h('p', null, n.body));
  const long = n.body.length > FOLD_CHARS;
  if (long) body.classList.add('folded');
  const fold = long
    ? h(
        'button',
        {
          class: 'link',
          type: 'button',
          'aria-expanded': 'false',
          onclick: () => {
            const folded = body.classList.toggle('folded');
            fold.textContent = folded ? 'Show all' : 'Show less';
            fold.setAttribute('aria-expanded', String(!folded));
          },
        },
        'Show all',
      )
    : null;

  const links = [];
  if (n.refs?.conversation && n.project) {
    const hash = `#/chat/${encodeURIComponent(n.refs.conversation)}?project=${encodeURIComponent(n.project)}`;
    links.push(h('a', { href: hash, dataset: { test: 'open-conversation' } }, 'Open the conversation'));
  }
  if (n.refs?.task) {
    links.push(h('a', { href: `#/tasks/${encodeURIComponent(n.refs.task)}`, dataset: { test: 'open-task' } }, 'Open the task'));
  }

  const actions = h('div', { class: 'notification-actions' });
  const decide = async (approve, button) => {
    for (const b of actions.querySelectorAll('button')) b.disabled = true;
    try {
      await api.post(`/approvals/${encodeURIComponent(approval)}`, { approve });
      approvals.set(approval, approve ? 'approved' : 'denied');
      ctx.toast(approve ? 'Approved: the run goes on' : 'Denied', 'ok');
      if (unread) await markRead(n);
      else fill();
    } catch (e) {
      if (e.code === 'already_resolved' || e.status === 404) {
        approvals.set(approval, e.status === 404 ? 'gone' : /: (\w+)$/.exec(e.message)?.[1] ?? 'gone');
        fill();
      } else {
        if (e.status !== 401) ctx.toast(reason(e), 'error');
        for (const b of actions.querySelectorAll('button')) b.disabled = false;
        button.focus();
      }
    }
  };
  const fill = () => {
    const parts = [];
    if (approval) {
      const status = approvals.get(approval) ?? 'gone';
      if (status === 'waiting') {
        const yes = h('button', { class: 'primary', type: 'button', dataset: { test: 'approve' }, onclick: () => decide(true, yes) }, 'Approve');
        const no = h('button', { class: 'danger', type: 'button', dataset: { test: 'deny' }, onclick: () => decide(false, no) }, 'Deny');
        parts.push(yes, no);
      } else {
        parts.push(
          h(
            'span',
            { class: ['pill', status === 'approved' ? 'ok' : 'muted'], dataset: { test: 'approval-status', status } },
            STATUS_WORDS[status] ?? status,
          ),
        );
      }
    }
    parts.push(...links);
    if (unread) {
      parts.push(
        h('span', { class: 'spacer' }),
        h('button', { class: 'link', type: 'button', dataset: { test: 'mark-read' }, onclick: () => markRead(n) }, 'Mark read'),
      );
    }
    replace(actions, parts);
  };
  fill();

  replace(
    li,
    h(
      'div',
      { class: 'notification-head' },
      unread ? h('span', { class: 'unread-dot', title: 'Unread' }) : null,
      h('span', { class: ['pill', 'kind', KIND_TONE[n.kind]] }, KIND_LABELS[n.kind] ?? n.kind),
      h('strong', { class: 'notification-title', dataset: { test: 'notification-title' } }, n.title),
      h('span', { class: 'spacer' }),
      n.quiet ? h('span', { class: 'quiet', title: 'Came during quiet hours: listed, not announced' }, 'quiet') : null,
      h('time', { class: 'meta', datetime: new Date(n.created_at).toISOString(), title: when(n.created_at) }, ago(n.created_at)),
    ),
    h('div', { class: 'meta' }, projectName(ctx.projects, n.project)),
    body,
    fold,
    actions,
  );
  return li;
}
