// schedules/common.js: what the Schedules page (pages/schedules.js) and a task's agent
// job panel (records/task-job.js) both show of a schedule and its runs.
//
// Owns: saying when a schedule next runs and how its runs went (times in this browser's
// local time), a run's status as a pill, its answer (rendered through markdown.js, or
// its first lines), the link to the run's conversation in the chat page, and the one
// "run now" call. Must never build markup from strings nor keep a schedule between
// draws (callers fetch what they show).
//
// data-test: "run" (data-id, data-status) with "run-status", "run-when", "run-answer",
// "run-error", "run-chat"; "runs-empty".

import * as api from '../api.js';
import { h } from '../dom.js';
import { render } from '../markdown.js';

/** A ms instant in local time: "Tue 3 Mar, 09:00" (with the year when not this one). */
export function localTime(ms) {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  const sameYear = d.getFullYear() === new Date().getFullYear();
  return d.toLocaleString(undefined, {
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    year: sameYear ? undefined : 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
}

/** "in 5 min", "in 3 h", "in 2 days", "5 min ago"… for a ms instant. */
export function relative(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  const a = Math.abs(s);
  const say = a < 60 ? 'under a minute' : a < 3600 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} days`;
  return s >= 0 ? `in ${say}` : `${say} ago`;
}

/** When a schedule runs next, in words: "Tue 3 Mar, 09:00 (in 5 h)", "paused", "never again". */
export function nextText(s) {
  if (s.running) return 'running now';
  if (s.paused) return 'paused';
  if (s.next_due === null || s.next_due === undefined) return 'never again';
  return `${localTime(s.next_due)} (${relative(s.next_due)})`;
}

const STATUS = {
  running: ['warn', 'running'],
  ok: ['ok', 'done'],
  failed: ['danger', 'failed'],
  aborted: ['muted', 'stopped'],
  interrupted: ['danger', 'interrupted'],
};

/** A run's status as a pill. */
export function runPill(run) {
  const [kind, text] = STATUS[run.status] ?? ['', run.status];
  return h('span', { class: ['pill', kind], 'data-test': 'run-status' }, text);
}

const REASONS = { due: 'on time', missed: 'missed, run once', catch_up: 'catching up', manual: 'run now' };

/** The first `n` non-empty lines of `text`, and whether there was more. */
export function firstLines(text, n = 3) {
  const lines = String(text ?? '')
    .split('\n')
    .filter((l) => l.trim());
  return { text: lines.slice(0, n).join('\n'), more: lines.length > n };
}

/** The chat page's address for a run's conversation. */
export function runChatHash(run) {
  return `#/chat/${encodeURIComponent(run.conversation)}?project=${encodeURIComponent(run.project)}`;
}

/**
 * A list of runs, newest first: status, when it started and how long it took, why, the
 * answer (whole, through markdown.js, or its first lines when `brief`) or the error, and
 * a link to its conversation.
 */
export function runsList(runs, { brief = false } = {}) {
  if (!runs.length) return h('p', { class: 'muted', 'data-test': 'runs-empty' }, 'No runs yet.');
  return h(
    'ul',
    { class: 'run-list' },
    runs.map((r) => {
      const took = r.ended_at ? Math.max(1, Math.round((r.ended_at - r.started_at) / 1000)) : null;
      const answer = r.answer ? (brief ? firstLines(r.answer) : { text: r.answer, more: false }) : null;
      return h(
        'li',
        { class: 'run', 'data-test': 'run', dataset: { id: String(r.id), status: r.status } },
        h(
          'div',
          { class: 'run-head' },
          runPill(r),
          h(
            'span',
            { class: 'run-when', 'data-test': 'run-when', title: new Date(r.started_at).toString() },
            localTime(r.started_at),
          ),
          h(
            'span',
            { class: 'muted run-facts' },
            [REASONS[r.reason] ?? r.reason, took ? `${took} s` : null, r.output_tokens ? `${r.output_tokens} tokens out` : null]
              .filter(Boolean)
              .join(' · '),
          ),
          h('a', { class: 'run-chat', href: runChatHash(r), 'data-test': 'run-chat' }, 'Conversation'),
        ),
        answer
          ? h(
              'div',
              { class: ['run-answer', 'md', brief ? 'brief' : null], 'data-test': 'run-answer' },
              render(answer.more ? `${answer.text}\n\n…` : answer.text),
            )
          : null,
        r.error ? h('p', { class: 'run-error', 'data-test': 'run-error' }, r.error) : null,
      );
    }),
  );
}

/** Starts a run of schedule `id` now; answers the run's id. */
export async function runNow(id) {
  const r = await api.post(`/schedules/${encodeURIComponent(id)}/run`);
  return r.run;
}
