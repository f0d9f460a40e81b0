// notify/bell.js: the notifications bell in the shell's top bar, and the toasts that
// announce a new notification.
//
// Owns: the unread count (read from `GET /notifications?unread=true&limit=1`, then kept
// by the `notification` events, the page's `notifications-read` signal and the hub's
// `notifications_read` events when another UI marks some), the bell's
// link to the Notifications page, and a toast for each new notification that did not
// come during quiet hours (a quiet one only raises the count). Must never mark anything
// read (only the page does, when the owner says so) nor keep the list itself.
//
// data-test: "bell" (the link, data-count), "bell-count"; "notification-toast"
// (data-id, data-kind) inside the shell's toast.

import * as api from '../api.js';
import { h } from '../dom.js';
import { KIND_LABELS } from './items.js';

// Events replayed after a long disconnection are listed, not announced.
const TOAST_WITHIN_MS = 10 * 60 * 1000;

/** The bell: `{ el, start() }`; `toast` is the shell's. */
export function notificationBell({ toast }) {
  let count = null; // null: not known (e.g. a laptop whose hub is away)
  const badge = h('span', { class: 'bell-count', dataset: { test: 'bell-count' }, hidden: true });
  const el = h(
    'a',
    { class: 'bell', href: '#/notifications', dataset: { test: 'bell' } },
    h('span', { class: 'bell-icon', 'aria-hidden': 'true' }),
    badge,
  );

  const show = () => {
    const n = count ?? 0;
    badge.hidden = n === 0;
    badge.textContent = n > 99 ? '99+' : String(n);
    el.dataset.count = String(n);
    const label = count === null ? 'Notifications' : `Notifications, ${n} unread`;
    el.setAttribute('aria-label', label);
    el.title = label;
  };

  let asking = 0;
  const refresh = async () => {
    const mine = ++asking;
    try {
      const page = await api.get('/notifications', { unread: true, limit: 1 });
      if (mine === asking) count = page.unread;
    } catch {
      // Out of reach or not allowed: the bell stays, without a number.
      if (mine === asking) count = null;
    }
    show();
  };

  const announce = (ev) => {
    if (ev.quiet || Date.now() - (ev.created_at ?? 0) > TOAST_WITHIN_MS) return;
    toast(
      h(
        'span',
        { class: 'notification-toast', dataset: { test: 'notification-toast', id: String(ev.id), kind: ev.kind } },
        h('span', { class: 'toast-kind' }, KIND_LABELS[ev.kind] ?? 'Notification'),
        h('strong', null, ev.title),
        h('a', { href: `#/notifications?focus=${ev.id}` }, ev.kind === 'approval_waiting' ? 'Review' : 'Open'),
      ),
    );
  };

  return {
    el,
    start() {
      show();
      api.onEvent('notification', (ev) => {
        // A count from before the hub answered is refetched; a known one just grows.
        if (count === null) refresh();
        else {
          count += 1;
          show();
        }
        announce(ev);
      });
      api.on('notifications-read', (unread) => {
        count = unread;
        show();
      });
      // Read elsewhere (another tab, a laptop): count again.
      api.onEvent('notifications_read', refresh);
      api.on('resync', refresh);
      api.on('hub', (online) => online && refresh());
      // Another tab or device may have marked some read meanwhile.
      document.addEventListener('visibilitychange', () => document.visibilityState === 'visible' && refresh());
      refresh();
    },
  };
}
