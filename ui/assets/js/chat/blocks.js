// chat/blocks.js: the pieces a conversation is drawn with: the user's message, the
// agent's Markdown answer, a tool call with its arguments and result, an approval
// prompt, and notices (stopped, failed).
//
// Owns: how each piece looks and the stable `data-test` names of its parts:
// `message-user`, `message-assistant`, `tool-call` (`data-tool` its name,
// `data-state` running|done|error|waiting), `tool-args`, `tool-output`, `approval`
// (`data-approval` its id, `data-state` waiting|approved|denied|…), `approve`, `deny`,
// `turn-notice`, `copy`. Everything drawn here is untrusted (the model's words, tool
// arguments and results a peer may have written): text goes in as text nodes, Markdown
// only through markdown.js `render()`. Must never fetch or decide anything itself.

import { h, replace } from '../dom.js';
import { render } from '../markdown.js';

/** The user's message: plain text, its line breaks kept. */
export function userMessage(text, at) {
  return h(
    'div',
    { class: 'msg msg-user', 'data-test': 'message-user' },
    h('div', { class: 'bubble', title: at ? new Date(at).toLocaleString() : null }, text),
  );
}

/** The agent's answer as Markdown; `update(source)` redraws it. */
export function assistantText(source, { copy = true } = {}) {
  const body = h('div', { class: 'md' });
  const el = h('div', { class: 'msg msg-assistant', 'data-test': 'message-assistant' }, body);
  let current = '';
  const update = (src) => {
    current = src;
    replace(body, render(src));
  };
  update(source);
  if (copy) el.append(copyButton(() => current));
  return { el, update };
}

function copyButton(text) {
  const button = h(
    'button',
    {
      type: 'button',
      class: 'link copy',
      'data-test': 'copy',
      'aria-label': 'Copy this answer',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text());
          button.textContent = 'Copied';
        } catch {
          button.textContent = 'Copy failed';
        }
        setTimeout(() => (button.textContent = 'Copy'), 1500);
      },
    },
    'Copy',
  );
  return h('div', { class: 'msg-actions' }, button);
}

/** Arguments as people read them: pretty JSON. */
export function prettyJson(value) {
  if (value === undefined || value === null) return '';
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** Tool output is text, often JSON: shown pretty when it is. */
function prettyOutput(text) {
  const t = String(text ?? '');
  if (/^\s*[[{]/.test(t)) {
    try {
      return JSON.stringify(JSON.parse(t), null, 2);
    } catch {
      // Not JSON after all: as it is.
    }
  }
  return t;
}

/** A short hint of what a call is about: its title, name or query, else its first short string. */
function hint(args) {
  if (!args || typeof args !== 'object') return '';
  const named = ['title', 'name', 'query', 'text', 'id'].map((k) => args[k]);
  const value = [...named, ...Object.values(args)].find((v) => typeof v === 'string' && v.trim());
  if (!value) return '';
  const line = value.trim().split('\n')[0];
  return line.length > 48 ? `${line.slice(0, 47)}…` : line;
}

const STATUS = {
  running: 'running…',
  waiting: 'needs your approval',
  done: 'done',
  error: 'failed',
};

const RESOLUTION = {
  waiting: 'Waiting for your answer',
  approved: 'Approved',
  denied: 'Denied',
  timed_out: 'Not answered in time: not run',
  stopped: 'Stopped before an answer',
  gone: 'No longer waiting',
  resolved: 'Already answered',
};

/**
 * A tool call, collapsible: `{name, args, output, isError, done, approval}`.
 * `onDecide(approve)` answers its approval (a promise). Returns `{el, update(tool)}`.
 */
export function toolCall(tool, { onDecide, canDecide = () => true } = {}) {
  const summaryState = h('span', { class: 'tool-state' });
  const summaryHint = h('span', { class: 'tool-hint' });
  const argsPre = h('pre', { class: 'tool-pre', 'data-test': 'tool-args' });
  const outputPre = h('pre', { class: 'tool-pre', 'data-test': 'tool-output' });
  const outputLabel = h('div', { class: 'tool-label' }, 'Result');
  const details = h(
    'details',
    { class: 'tool', 'data-test': 'tool-call', 'data-tool': tool.name },
    h(
      'summary',
      null,
      h('span', { class: 'ico ico-tool tool-icon', 'aria-hidden': 'true' }),
      h('span', { class: 'tool-name' }, tool.name),
      summaryHint,
      summaryState,
    ),
    h('div', { class: 'tool-body' }, h('div', { class: 'tool-label' }, 'Arguments'), argsPre, outputLabel, outputPre),
  );
  const approvalSlot = h('div', { class: 'approval-slot' });
  const el = h('div', { class: 'tool-wrap' }, details, approvalSlot);
  let approval = null; // {key, card, refresh}

  const update = (t) => {
    const state = t.approval?.status === 'waiting' ? 'waiting' : !t.done ? 'running' : t.isError ? 'error' : 'done';
    details.dataset.state = state;
    details.classList.toggle('error', state === 'error');
    summaryState.textContent = STATUS[state];
    summaryState.className = `tool-state ${state}`;
    summaryHint.textContent = hint(t.args);
    argsPre.textContent = t.args === null || t.args === undefined ? '(not shown)' : prettyJson(t.args);
    const hasOutput = t.output !== null && t.output !== undefined;
    outputLabel.hidden = !hasOutput;
    outputPre.hidden = !hasOutput;
    outputPre.textContent = hasOutput ? prettyOutput(t.output) : '';
    outputPre.classList.toggle('error', !!t.isError);
    if (t.approval) {
      const key = `${t.approval.id}:${t.approval.status}`;
      if (approval?.key !== key) {
        approval = { key, ...approvalCard(t, onDecide, canDecide) };
        replace(approvalSlot, approval.card);
      } else {
        approval.refresh();
      }
    } else if (approval) {
      approval = null;
      replace(approvalSlot);
    }
  };
  update(tool);
  return { el, update };
}

function approvalCard(t, onDecide, canDecide) {
  const { id, status } = t.approval;
  const waiting = status === 'waiting';
  const note = h('span', { class: 'approval-note', role: waiting ? null : 'status' }, RESOLUTION[status] ?? status);
  const card = h(
    'div',
    {
      class: ['approval', waiting ? 'waiting' : `resolved ${status}`],
      role: 'group',
      'aria-label': `Approval for ${t.name}`,
      'data-test': 'approval',
      'data-approval': id,
      'data-state': status,
    },
    waiting
      ? h('div', { class: 'approval-head' }, 'Hearth wants to run ', h('code', null, t.name))
      : h('div', { class: 'approval-head' }, 'Approval to run ', h('code', null, t.name), ': ', note),
    waiting ? h('pre', { class: 'tool-pre' }, prettyJson(t.args)) : null,
  );
  if (!waiting) return { card, refresh: () => {} };
  const error = h('p', { class: 'error', hidden: true });
  const buttons = [];
  let busy = false;
  const refresh = () => {
    for (const b of buttons) b.disabled = busy || !canDecide();
  };
  const answer = async (approve) => {
    busy = true;
    refresh();
    error.hidden = true;
    try {
      await onDecide(approve);
    } catch (e) {
      error.textContent = `Could not answer: ${e.message}`;
      error.hidden = false;
    }
    busy = false;
    refresh();
  };
  buttons.push(
    h('button', { type: 'button', class: 'primary', 'data-test': 'approve', disabled: !canDecide(), onclick: () => answer(true) }, 'Approve'),
    h('button', { type: 'button', class: 'danger', 'data-test': 'deny', disabled: !canDecide(), onclick: () => answer(false) }, 'Deny'),
  );
  card.append(h('div', { class: 'row approval-actions' }, buttons, h('span', { class: 'muted' }, note.textContent)), error);
  return { card, refresh };
}

const REASONS = {
  aborted: 'Stopped.',
  step_limit: 'Stopped: the agent reached its step limit for one message.',
  max_tokens: 'The answer was cut off at the length limit.',
  length: 'The answer was cut off at the length limit.',
  lost: null,
};

/** How a turn ended, if people should be told: an error, a stop, a cut. */
export function turnNotice({ reason, error }) {
  if (error) {
    return h('div', { class: 'turn-notice error', role: 'alert', 'data-test': 'turn-notice' }, h('strong', null, 'The turn failed: '), error);
  }
  const text = REASONS[reason];
  if (!text) return null;
  return h('div', { class: 'turn-notice', 'data-test': 'turn-notice' }, text);
}

/** The dots shown while the agent has not said anything yet. */
export function thinking() {
  return h(
    'div',
    { class: 'thinking', 'aria-label': 'Hearth is working', role: 'status' },
    h('span', null),
    h('span', null),
    h('span', null),
  );
}
