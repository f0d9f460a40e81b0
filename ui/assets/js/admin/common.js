// admin/common.js: what the admin pages (settings, devices, usage, audit) share.
//
// Owns: saying plainly why a hub route failed (the hub out of reach from a laptop, a
// device scoped to one project, a device that is not an admin), reading every page of
// a list, number, money and time formats, project names, and an inline "are you sure"
// for destructive buttons. Must never fetch on its own initiative nor keep data: pages
// call it with what they have.
//
// data-test: "hub-unreachable" on the notice shown while a node's hub is away;
// "problem" on any other failure notice.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { projectPath } from '../projects.js';

/** A one-line reason for a failed call, for toasts. */
export function reason(e) {
  switch (e?.code) {
    case 'hub_unreachable':
      return 'The hub is out of reach; try again when it is back.';
    case 'out_of_scope':
      return 'This device is paired for one project only; this belongs to the whole hub.';
    case 'admin_required':
      return 'Only the owner on the hub, or a device marked admin, may change this.';
    case 'owner_only':
      return 'Only the owner, on the hub itself, may change this.';
    case 'unreachable':
      return 'The server does not answer.';
    default:
      return e?.message || String(e);
  }
}

/**
 * A notice explaining why `what` ("the devices", "usage figures") cannot be shown; a
 * relayed route on a node whose hub is away says so briefly (the shell's banner says
 * the rest), and that it returns by itself.
 */
export function problem(e, what) {
  if (e?.code === 'hub_unreachable') {
    return h(
      'div',
      { class: 'notice warn', role: 'status', dataset: { test: 'hub-unreachable' } },
      h('strong', null, 'Waiting for the hub. '),
      'It is out of reach from this laptop; this fills in by itself when it is back.',
    );
  }
  if (e?.code === 'out_of_scope') {
    return h(
      'div',
      { class: 'notice', role: 'status', dataset: { test: 'problem' } },
      h('strong', null, 'Not on this device. '),
      `This laptop is paired for one project only, and ${what} belong to the whole hub. Open them on the hub.`,
    );
  }
  return h('div', { class: 'notice error', role: 'alert', dataset: { test: 'problem' } }, `${cap(what)}: ${reason(e)}`);
}

function cap(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Every row of a paged list (`Page<T>`), 500 at a time. */
export async function fetchAll(path, query = {}) {
  const rows = [];
  for (;;) {
    const page = await api.get(path, { ...query, limit: 500, offset: rows.length });
    rows.push(...page.data);
    if (rows.length >= page.total || page.data.length === 0) return rows;
  }
}

/**
 * A section that loads itself: answers a function that runs `load()` and puts what
 * `render(value)` returns into `el`, or the problem notice (`explain(e)` may give a
 * better one); a later run wins over an earlier one still under way.
 */
export function section(el, what, load, render, explain = () => null) {
  let token = 0;
  const run = async () => {
    const mine = ++token;
    try {
      const value = await load();
      if (mine === token) replace(el, render(value));
    } catch (e) {
      if (mine === token && e.status !== 401) replace(el, explain(e) ?? problem(e, what));
    }
  };
  return run;
}

/** A project's readable name (its path in the tree), or a short id if it is unknown here. */
export function projectName(projects, id) {
  if (!id) return 'Whole hub';
  return projectPath(projects, id) || `project ${id.slice(0, 8)}…`;
}

const numberFormat = new Intl.NumberFormat();
const compactFormat = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

/** 12,345 */
export const num = (n) => numberFormat.format(n);
/** 12.3K */
export const compact = (n) => compactFormat.format(n);

/** Millionths of a dollar as dollars: "$0.42", "<$0.01", "$0.00". */
export function money(micro) {
  if (micro > 0 && micro < 5_000) return '<$0.01';
  return '$' + (micro / 1e6).toFixed(2);
}

/** A full local date and time for a ms timestamp. */
export function when(ms) {
  return new Date(ms).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/**
 * A destructive button that asks once: the first press turns it into "Confirm" and
 * "Cancel" in place; `run()` is called on Confirm. `test` names the first button's
 * data-test, the confirm button is `confirm-<test>`.
 */
export function confirmButton({ label, question, test, run }) {
  const box = h('span', { class: 'confirm' });
  const ask = () => {
    const yes = h(
      'button',
      {
        class: 'danger primary',
        dataset: { test: `confirm-${test}` },
        onclick: async () => {
          yes.disabled = true;
          try {
            await run();
          } finally {
            yes.disabled = false;
          }
        },
      },
      label,
    );
    const no = h('button', { onclick: idle }, 'Cancel');
    replace(box, h('span', { class: 'confirm-question' }, question), yes, no);
    yes.focus();
  };
  const idle = () => {
    const first = h('button', { class: 'danger', dataset: { test }, onclick: ask }, label);
    replace(box, first);
    return first;
  };
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && box.querySelector('.confirm-question')) {
      e.stopPropagation();
      idle().focus();
    }
  });
  idle();
  return box;
}

/**
 * A button that runs `fn` on each click: disabled while it runs, a failure said in a
 * toast (a lapsed sign-in is the shell's to say). `type` is `button` unless `props`
 * says otherwise; a submit button's click does not submit its form, `fn` does the work.
 */
export function action(ctx, label, props, fn) {
  const b = h(
    'button',
    {
      type: 'button',
      ...props,
      onclick: async (e) => {
        e.preventDefault();
        b.disabled = true;
        try {
          await fn();
        } catch (err) {
          if (err.status !== 401) ctx.toast(reason(err), 'error');
        } finally {
          b.disabled = false;
        }
      },
    },
    label,
  );
  return b;
}
