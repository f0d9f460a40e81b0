// chat/live.js: the turns running now, per conversation, as this browser learns of them.
//
// Owns: one model per conversation (`project␟conversation`) of its current or last turn:
// the message that started it, the answer's text, its tool calls with their results and
// approvals, and how it ended. Events come from the turn's own server-sent stream and
// from the event WebSocket (every chat event, from any device), deduplicated by `seq`,
// so a broken stream loses nothing the socket still carries and a turn started
// elsewhere shows too. It lives as long as the app (not the page), so leaving the chat
// page mid-turn and coming back shows the whole answer. Starting, stopping and
// answering approvals go through here. Must never touch the DOM: views watch a model
// and draw it (see thread.js); text here is untrusted and stays data.

import * as api from '../api.js';

export const CHAT_EVENTS = [
  'started',
  'text',
  'restart',
  'tool_call',
  'tool_result',
  'approval_requested',
  'approval_resolved',
  'finished',
  'error',
];

/** How many ended turns are kept for views that have not taken them into history. */
const KEEP_ENDED = 20;
/** After Stop, how long to wait for the hub's `finished` before ending the turn here. */
const STOP_GRACE_MS = 5000;

const turns = new Map(); // key -> Turn
const seen = new Map(); // key -> the last hub `seq` taken (kept across turns: late copies of old events stay out)
const watchers = new Map(); // key -> Set<fn(turn)>
const anyWatchers = new Set(); // fn(turn)

export const keyOf = (project, conversation) => `${project}\u241f${conversation}`;

/**
 * A turn: `{project, conversation, running, message, items, reason, error, version}`.
 * `items`: `{kind: 'text', text}` or `{kind: 'tool', name, args, output, isError, done,
 * approval: {id, status} | null}`, each with its own `v`, bumped when it changes.
 * `message` is the user's message (null when this browser joined mid-turn).
 */
function newTurn(project, conversation, message) {
  return {
    project,
    conversation,
    running: true,
    awaitingStart: false,
    message,
    items: [],
    reason: null,
    error: null,
    version: 0,
    endedAt: null,
  };
}

function changed(turn) {
  turn.version += 1;
  for (const fn of [...(watchers.get(keyOf(turn.project, turn.conversation)) ?? [])]) fn(turn);
  for (const fn of [...anyWatchers]) fn(turn);
}

function prune() {
  const ended = [...turns.entries()].filter(([, t]) => !t.running).sort((a, b) => a[1].endedAt - b[1].endedAt);
  while (ended.length > KEEP_ENDED) turns.delete(ended.shift()[0]);
}

function end(turn, { reason = null, error = null } = {}) {
  if (reason && !turn.reason) turn.reason = reason;
  if (error && !turn.error) turn.error = error;
  if (turn.running) {
    turn.running = false;
    turn.endedAt = Date.now();
    prune();
  }
  changed(turn);
}

function lastTool(turn, test) {
  for (let i = turn.items.length - 1; i >= 0; i -= 1) {
    const it = turn.items[i];
    if (it.kind === 'tool' && test(it)) return it;
  }
  return null;
}

/** Takes one chat event, from either source. */
export function ingest(ev) {
  if (!ev || !CHAT_EVENTS.includes(ev.type) || typeof ev.conversation !== 'string' || typeof ev.project !== 'string') {
    return;
  }
  const key = keyOf(ev.project, ev.conversation);
  // The hub's number of the event: a node renumbers what it relays on its socket and
  // keeps the hub's as `hub_seq`, while a relayed turn stream keeps the hub's `seq`.
  const n = typeof ev.hub_seq === 'number' ? ev.hub_seq : ev.seq;
  if (typeof n === 'number') {
    // Both sources carry the same numbered events in order: anything not newer was seen.
    if (n <= (seen.get(key) ?? -1)) return;
    seen.set(key, n);
  }
  let turn = turns.get(key);
  if (ev.type === 'started') {
    if (!turn || !turn.awaitingStart) {
      turn = newTurn(ev.project, ev.conversation, String(ev.message ?? ''));
      turns.set(key, turn);
    }
    turn.awaitingStart = false;
  } else if (!turn || (!turn.running && ev.type !== 'error')) {
    // Joined a turn mid-way (a reload, or a device that started it elsewhere).
    turn = newTurn(ev.project, ev.conversation, null);
    turns.set(key, turn);
  }
  apply(turn, ev);
}

function apply(turn, ev) {
  const items = turn.items;
  const last = items[items.length - 1];
  switch (ev.type) {
    case 'started':
      break;
    case 'text':
      if (last?.kind === 'text') {
        last.text += String(ev.text ?? '');
        last.v += 1;
      } else {
        items.push({ kind: 'text', text: String(ev.text ?? ''), v: 0 });
      }
      break;
    case 'restart':
      // The provider retried: the partial answer of this step is void.
      if (last?.kind === 'text') items.pop();
      break;
    case 'tool_call':
      items.push({ kind: 'tool', name: String(ev.name ?? ''), args: ev.args, output: null, isError: false, done: false, approval: null, v: 0 });
      break;
    case 'approval_requested': {
      let tool = lastTool(turn, (t) => t.name === ev.name && !t.done && !t.approval);
      if (!tool) {
        tool = { kind: 'tool', name: String(ev.name ?? ''), args: ev.args, output: null, isError: false, done: false, approval: null, v: 0 };
        items.push(tool);
      }
      tool.approval = { id: String(ev.id), status: 'waiting' };
      tool.v += 1;
      break;
    }
    case 'approval_resolved': {
      const tool = lastTool(turn, (t) => t.approval?.id === ev.id);
      if (tool) {
        tool.approval.status = String(ev.resolution ?? 'stopped');
        tool.v += 1;
      }
      break;
    }
    case 'tool_result': {
      const tool = items.find((t) => t.kind === 'tool' && t.name === ev.name && !t.done);
      if (tool) {
        Object.assign(tool, { output: String(ev.output ?? ''), isError: !!ev.is_error, done: true });
        tool.v += 1;
      } else {
        items.push({ kind: 'tool', name: String(ev.name ?? ''), args: null, output: String(ev.output ?? ''), isError: !!ev.is_error, done: true, approval: null, v: 0 });
      }
      break;
    }
    case 'finished': {
      const reason = String(ev.reason ?? '');
      const failed = reason.startsWith('error:');
      end(turn, { reason, error: failed ? reason.slice(6).trim() : null });
      return;
    }
    case 'error':
      end(turn, { reason: turn.reason ?? 'error', error: String(ev.message ?? 'the turn failed') });
      return;
    default:
      return;
  }
  changed(turn);
}

/** The conversation's current or last turn, if this browser knows one. */
export function turnOf(project, conversation) {
  return turns.get(keyOf(project, conversation)) ?? null;
}

/** Every running turn of `project`. */
export function runningIn(project) {
  return [...turns.values()].filter((t) => t.project === project && t.running);
}

/** Forgets an ended turn once its messages are in the shown history. */
export function forget(project, conversation) {
  const key = keyOf(project, conversation);
  if (turns.get(key) && !turns.get(key).running) turns.delete(key);
}

/** Calls `fn(turn)` on every change of that conversation's turn; returns the unsubscribe. */
export function watch(project, conversation, fn) {
  const key = keyOf(project, conversation);
  if (!watchers.has(key)) watchers.set(key, new Set());
  watchers.get(key).add(fn);
  return () => {
    watchers.get(key)?.delete(fn);
    if (watchers.get(key)?.size === 0) watchers.delete(key);
  };
}

/** Calls `fn(turn)` on every change of any turn; returns the unsubscribe. */
export function watchAll(fn) {
  anyWatchers.add(fn);
  return () => anyWatchers.delete(fn);
}

/**
 * A waiting approval (from `GET /approvals`) the events did not bring (say, after a
 * reload): shown as the conversation's running turn so it can still be answered.
 */
export function adoptApproval(a) {
  const key = keyOf(a.project, a.conversation);
  let turn = turns.get(key);
  if (turn && turn.items.some((t) => t.approval?.id === a.id)) return;
  if (!turn || !turn.running) {
    turn = newTurn(a.project, a.conversation, null);
    turns.set(key, turn);
  }
  turn.items.push({ kind: 'tool', name: String(a.tool), args: a.args, output: null, isError: false, done: false, approval: { id: a.id, status: 'waiting' }, v: 0 });
  changed(turn);
}

/**
 * Sends `message` to `conversation` of `project` (null: the server picks, see
 * chat.rs) and reads the turn's stream into the model. Resolves once the request is
 * accepted, with the project the server chose; rejects with the ApiError if it is
 * refused before anything streams (nothing is left behind then).
 */
export function send({ project, conversation, message }) {
  // Shown at once; the `started` event then confirms it.
  const provisional = project ? newTurn(project, conversation, message) : null;
  if (provisional) {
    provisional.awaitingStart = true;
    turns.set(keyOf(project, conversation), provisional);
    changed(provisional);
  }
  let settle;
  const accepted = new Promise((resolve, reject) => (settle = { resolve, reject }));
  let opened = false;
  const body = { message, conversation, ...(project ? { project } : {}) };
  api
    .stream('/chat', body, (ev) => {
      if (!opened) {
        opened = true;
        settle.resolve(ev.project ?? project);
      }
      ingest(ev);
    })
    .then(() => {
      if (!opened) settle.resolve(project);
    })
    .catch((e) => {
      if (!opened) {
        if (provisional && turns.get(keyOf(project, conversation)) === provisional) {
          turns.delete(keyOf(project, conversation));
          provisional.running = false;
          changed(provisional);
        }
        settle.reject(e);
        return;
      }
      // The stream broke mid-turn: the event socket carries the rest.
      console.info('chat stream ended early; following the event stream', e);
    });
  return accepted;
}

/** Asks the hub to stop the conversation's turn; ends it here if the hub never says. */
export async function stop(project, conversation) {
  await api.post(`/chat/${encodeURIComponent(conversation)}/abort?project=${encodeURIComponent(project)}`);
  const turn = turnOf(project, conversation);
  if (!turn?.running) return;
  const seen = turn.version;
  setTimeout(() => {
    // Nothing came back: the turn had already ended where this browser could not see.
    if (turn.running && turn.version === seen) end(turn, { reason: 'aborted' });
  }, STOP_GRACE_MS);
}

/**
 * Answers an approval. Resolves with the status it ends in: `approved` or `denied`,
 * or how it was already resolved (409), or `gone` if the hub no longer knows it.
 */
export async function decide({ id, approve, project, conversation }) {
  let status = approve ? 'approved' : 'denied';
  try {
    await api.post(`/approvals/${encodeURIComponent(id)}`, { approve, project, conversation });
  } catch (e) {
    if (e.status === 409) status = /(approved|denied|timed_out|stopped)\s*$/.exec(e.message)?.[1] ?? 'resolved';
    else if (e.status === 404) status = 'gone';
    else throw e;
  }
  const turn = turnOf(project, conversation);
  const tool = turn && lastTool(turn, (t) => t.approval?.id === id);
  if (tool && tool.approval.status === 'waiting') {
    tool.approval.status = status;
    tool.v += 1;
    changed(turn);
  }
  return status;
}

/** Ends a turn this browser can no longer follow (the hub went away, events were lost). */
export function abandon(project, conversation, why) {
  const turn = turnOf(project, conversation);
  if (turn?.running) end(turn, { reason: 'lost', error: why });
}

// The model outlives the page: it follows every chat event while the app runs.
api.onEvent(CHAT_EVENTS, ingest);
// A hub that restarted numbers its events from 1 again: forget the numbers seen.
api.on('resync', () => seen.clear());
api.on('hub', () => seen.clear());
