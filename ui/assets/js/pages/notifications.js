// pages/notifications.js: the Notifications page: what the hub told the owner (a
// scheduled run's answer, a failed run, an approval that waits, a task that fell due),
// newest first, live.
//
// Owns: listing (`GET /notifications`, 50 at a time, "unread only" as a filter), marking
// read (`POST /notifications/read`, one or all; the bell learns the new count through
// the `notifications-read` signal), and which approvals still wait (`GET /approvals`),
// so an approval notification offers Approve and Deny. New notifications arrive on the
// event stream and are shown at once; a route `?focus=<id>` scrolls to one. Must never
// mark a notification read without the owner saying so (deciding an approval does).
//
// data-test: "notification-list", "unread-only", "mark-all-read", "show-more",
// "notifications-empty"; the items' own in notify/items.js.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { fetchAll, problem, reason } from '../admin/common.js';
import { notificationItem } from '../notify/items.js';

const PAGE = 50;

export default {
  title: 'Notifications',
  async mount(el, ctx) {
    let unreadOnly = false;
    let shown = PAGE;
    let focus = Number(ctx.route.params.get('focus')) || null;
    let approvals = new Map();
    const listEl = h('div', { class: 'notification-area' });

    const markRead = async (which) => {
      try {
        const r = await api.post('/notifications/read', which);
        api.emit('notifications-read', r.unread);
        await load();
      } catch (e) {
        if (e.status !== 401) ctx.toast(reason(e), 'error');
      }
    };
    const markOne = (n) => markRead({ ids: [n.id] });

    const onlyUnread = h('input', {
      type: 'checkbox',
      dataset: { test: 'unread-only' },
      onchange: () => {
        unreadOnly = onlyUnread.checked;
        shown = PAGE;
        load();
      },
    });
    const markAll = h(
      'button',
      { type: 'button', dataset: { test: 'mark-all-read' }, onclick: () => markRead({ all: true }) },
      'Mark all read',
    );

    const loadApprovals = async () => {
      try {
        const list = await fetchAll('/approvals');
        approvals = new Map(list.map((a) => [a.id, a.status]));
      } catch {
        // Without the list, an approval shows as no longer waiting; the list says why.
        approvals = new Map();
      }
    };

    let loads = 0;
    const load = async () => {
      const mine = ++loads;
      try {
        const [page] = await Promise.all([
          api.get('/notifications', { unread: unreadOnly || undefined, limit: shown }),
          loadApprovals(),
        ]);
        if (mine !== loads) return;
        api.emit('notifications-read', page.unread);
        markAll.disabled = page.unread === 0;
        render(page);
      } catch (e) {
        if (mine !== loads || e.status === 401) return;
        markAll.disabled = true;
        replace(listEl, problem(e, 'the notifications'));
      }
    };

    const render = (page) => {
      if (!page.data.length) {
        replace(
          listEl,
          h(
            'p',
            { class: 'empty', dataset: { test: 'notifications-empty' } },
            unreadOnly
              ? 'Nothing unread.'
              : 'No notifications yet. Scheduled runs, approvals they wait for and tasks that fall due show here.',
          ),
        );
        return;
      }
      const items = page.data.map((n) =>
        notificationItem(ctx, n, { approvals, markRead: markOne, focused: n.id === focus }),
      );
      const list = h('ul', { class: 'list notifications', dataset: { test: 'notification-list' }, onkeydown: arrows }, items);
      const more =
        page.total > page.data.length
          ? h(
              'button',
              {
                type: 'button',
                class: 'show-more',
                dataset: { test: 'show-more' },
                onclick: () => {
                  shown += PAGE;
                  load();
                },
              },
              `Show more (${page.total - page.data.length} older)`,
            )
          : null;
      replace(listEl, list, more);
      if (focus) {
        const target = list.querySelector(`[data-id="${focus}"]`);
        target?.scrollIntoView({ block: 'center' });
        target?.focus({ preventScroll: true });
        focus = null;
      }
    };

    // Up and down move between items; Tab reaches each item's buttons.
    const arrows = (e) => {
      if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
      const items = [...e.currentTarget.querySelectorAll(':scope > li')];
      const at = items.findIndex((li) => li.contains(document.activeElement));
      const next = items[at + (e.key === 'ArrowDown' ? 1 : -1)] ?? (at < 0 ? items[0] : null);
      if (next) {
        e.preventDefault();
        next.focus();
      }
    };

    replace(
      el,
      h(
        'div',
        { class: 'notifications-title' },
        h('h1', null, 'Notifications'),
        h('span', { class: 'spacer' }),
        h('label', { class: 'check' }, onlyUnread, 'Unread only'),
        markAll,
      ),
      listEl,
    );

    ctx.onEvent(['notification', 'notifications_read'], () => load());
    ctx.onEvent(['approval_requested', 'approval_resolved'], () => load());
    ctx.on('resync', () => load());
    ctx.on('hub', (online) => online && load());
    ctx.on('projects', () => load());
    await load();
  },
};
