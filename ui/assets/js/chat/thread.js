// chat/thread.js: one conversation on screen: its stored history (oldest at the top,
// paged backwards with "Load earlier", the reading position kept) and below it the
// turn running now, drawn live from chat/live.js as its events arrive.
//
// Owns: fetching the history (`GET …/conversations/{c}/messages`, newest first),
// pairing each stored tool call with its result, drawing the live turn (re-rendered at
// most once a frame), keeping the view pinned to the bottom while the reader is there,
// and taking a turn into the stored history once it ends (the stored transcript is
// what a reload shows, so the two never differ for long). `data-test`: `thread`,
// `load-earlier`, `history-start`, `live-turn`, `thinking`. Must never build markup
// from strings: blocks.js draws every piece.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import * as live from './live.js';
import { assistantText, thinking, toolCall, turnNotice, userMessage } from './blocks.js';

const PAGE = 30;
const NEAR_BOTTOM_PX = 80;

const textOf = (content) =>
  Array.isArray(content)
    ? content
        .filter((p) => p?.type === 'text')
        .map((p) => String(p.text ?? ''))
        .join('\n')
    : typeof content === 'string'
      ? content
      : '';

/**
 * The view of `conversation` in `project`. `canAct()` says whether the hub can be
 * reached (approvals need it); `onError(e)` is told of failed fetches; `onChange()`
 * when the turn starts or ends.
 */
export function createThread({ project, conversation, canAct, onError, onChange }) {
  const historyTop = h('div', { class: 'history-top' });
  const history = h('div', { class: 'history' });
  const liveEl = h('div', { class: 'live', 'data-test': 'live-turn', 'aria-live': 'off' });
  const inner = h('div', { class: 'thread-inner' }, historyTop, history, liveEl);
  const scroller = h(
    'div',
    { class: 'thread', 'data-test': 'thread', role: 'region', 'aria-label': 'Messages', tabindex: '0' },
    inner,
  );

  const known = new Set(); // stored message ids shown
  const tools = new Map(); // tool_use id -> {update, data}
  const orphanResults = new Map(); // tool_use id -> result part whose call is not loaded yet
  let cursor = 0; // offset of the next older page
  let reachedStart = false;
  let loadingEarlier = false;
  let pagedBack = false;
  let newestUser = null; // text of the newest stored user message with text
  let maxId = -1;
  let disposed = false;

  // ---------------------------------------------------------------- stored messages

  function storedNodes(m) {
    const out = [];
    const parts = Array.isArray(m.content) ? m.content : [{ type: 'text', text: textOf(m.content) }];
    if (m.role === 'user') {
      const text = textOf(parts);
      if (text) out.push(userMessage(text, m.created_at));
      for (const p of parts) {
        if (p?.type !== 'tool_result') continue;
        const call = tools.get(p.id);
        if (call) {
          Object.assign(call.data, { output: String(p.content ?? ''), isError: !!p.is_error, done: true });
          call.update(call.data);
        } else {
          orphanResults.set(p.id, p);
        }
      }
    } else if (m.role === 'assistant') {
      for (const p of parts) {
        if (p?.type === 'text' && String(p.text ?? '').trim()) out.push(assistantText(String(p.text)).el);
        if (p?.type === 'tool_use') {
          const result = orphanResults.get(p.id);
          orphanResults.delete(p.id);
          const data = {
            name: String(p.name ?? ''),
            args: p.input,
            output: result ? String(result.content ?? '') : null,
            isError: !!result?.is_error,
            // A call without a stored result was cut short (stopped): not running now.
            done: true,
            approval: null,
          };
          const view = toolCall(data);
          tools.set(p.id, { update: view.update, data });
          out.push(view.el);
        }
      }
    }
    return out;
  }

  /** Adds stored messages (any order); older ones go on top, newer ones below. */
  function addStored(rows, where) {
    const fresh = rows.filter((m) => !known.has(m.id)).sort((a, b) => a.id - b.id);
    if (!fresh.length) return 0;
    for (const m of fresh) known.add(m.id);
    if (where === 'top') {
      // Calls (older) are drawn before the results (newer) that wait for them, oldest first.
      const nodes = fresh.flatMap(storedNodes);
      history.prepend(...nodes);
    } else {
      history.append(...fresh.flatMap(storedNodes));
    }
    for (const m of fresh) {
      if (m.id > maxId) {
        maxId = m.id;
        if (m.role === 'user' && textOf(m.content)) newestUser = textOf(m.content);
      }
    }
    return fresh.length;
  }

  function drawTop() {
    if (reachedStart) {
      // Said only where the reader paged back to it; a short conversation needs no label.
      replace(historyTop, pagedBack ? h('div', { class: 'history-start muted', 'data-test': 'history-start' }, 'Start of the conversation') : null);
      return;
    }
    const button = h(
      'button',
      { type: 'button', class: 'load-earlier', 'data-test': 'load-earlier', disabled: loadingEarlier, onclick: () => loadEarlier() },
      loadingEarlier ? 'Loading…' : 'Load earlier messages',
    );
    replace(historyTop, button);
    observer.disconnect();
    observer.observe(button);
  }

  const observer = new IntersectionObserver(
    (entries) => {
      if (entries.some((e) => e.isIntersecting) && !loadingEarlier && !reachedStart && known.size) loadEarlier();
    },
    { root: scroller, rootMargin: '200px 0px 0px 0px' },
  );

  async function fetchPage(offset) {
    return api.get(`/projects/${encodeURIComponent(project)}/conversations/${encodeURIComponent(conversation)}/messages`, {
      limit: PAGE,
      offset,
    });
  }

  /** Older messages, keeping what the reader looks at where it is. */
  async function loadEarlier() {
    if (loadingEarlier || reachedStart) return;
    loadingEarlier = true;
    pagedBack = true;
    drawTop();
    try {
      for (;;) {
        const page = await fetchPage(cursor);
        if (disposed) return;
        cursor += page.data.length;
        const before = scroller.scrollHeight;
        const top = scroller.scrollTop;
        const added = addStored(page.data, 'top');
        scroller.scrollTop = top + (scroller.scrollHeight - before);
        if (page.data.length < PAGE || cursor >= page.total) reachedStart = true;
        // A page of only already-shown rows (new messages shifted the offsets): go on.
        if (added || reachedStart) break;
      }
    } catch (e) {
      onError?.(e);
    } finally {
      loadingEarlier = false;
      if (!disposed) drawTop();
    }
  }

  /** Messages newer than the newest shown, until a known one. */
  async function loadNewer() {
    const rows = [];
    for (let offset = 0; ; offset += PAGE) {
      const page = await fetchPage(offset);
      rows.push(...page.data);
      if (page.data.length < PAGE || page.data.some((m) => m.id <= maxId)) break;
    }
    if (disposed) return;
    const atBottom = nearBottom();
    const added = addStored(rows, 'bottom');
    cursor += added;
    if (atBottom) toBottom();
  }

  // ---------------------------------------------------------------- the live turn

  let shown = null; // the turn drawn in liveEl
  let covered = null; // a turn whose user message the stored history already shows
  let drawn = []; // [{item, v, view}]
  let liveHead = null; // the user message node of the live turn
  let liveTail = null; // thinking dots or the notice
  let frame = 0;
  let absorbing = false;
  let wasRunning = false;

  function coverCheck() {
    const turn = live.turnOf(project, conversation);
    if (turn && turn.message !== null && turn.message === newestUser) covered = turn;
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(drawLive);
  }

  function drawLive() {
    frame = 0;
    if (disposed) return;
    const turn = live.turnOf(project, conversation);
    const atBottom = nearBottom();
    if (turn !== shown) {
      if (shown && !shown.running) {
        // That turn ended and another began before it was taken into history.
        absorb(shown);
      }
      shown = turn;
      drawn = [];
      liveHead = null;
      liveTail = null;
      replace(liveEl);
      onChange?.();
    }
    if (!turn) return;
    if (turn.running !== wasRunning) {
      wasRunning = turn.running;
      onChange?.();
    }
    if (turn.message !== null && turn !== covered) {
      if (!liveHead) {
        liveHead = userMessage(turn.message);
        liveEl.prepend(liveHead);
      }
    } else if (liveHead) {
      liveHead.remove();
      liveHead = null;
    }
    // Reconcile the items: same object and version, same node.
    let anchor = liveHead;
    turn.items.forEach((item, i) => {
      let d = drawn[i];
      if (d && d.item !== item) {
        for (const stale of drawn.splice(i)) stale.view.el.remove();
        d = null;
      }
      if (!d) {
        const view =
          item.kind === 'text'
            ? assistantText(item.text, { copy: false })
            : toolCall(item, {
                canDecide: () => canAct(),
                onDecide: (approve) =>
                  live.decide({ id: item.approval.id, approve, project, conversation }),
              });
        d = { item, v: item.v, view };
        drawn[i] = d;
        if (anchor) anchor.after(view.el);
        else liveEl.prepend(view.el);
      } else if (d.v !== item.v) {
        d.v = item.v;
        d.view.update(item.kind === 'text' ? item.text : item);
      }
      anchor = d.view.el;
    });
    for (const stale of drawn.splice(turn.items.length)) stale.view.el.remove();
    liveTail?.remove();
    liveTail = null;
    const lastItem = turn.items[turn.items.length - 1];
    if (turn.running) {
      const waiting = turn.items.some((t) => t.approval?.status === 'waiting');
      if (!waiting && (!lastItem || lastItem.kind === 'tool')) liveTail = thinking();
    } else {
      liveTail = turnNotice(turn);
    }
    if (liveTail) liveEl.append(liveTail);
    liveEl.classList.toggle('running', turn.running);
    if (atBottom) toBottom();
    if (!turn.running && !absorbing) absorb(turn);
  }

  /** Takes an ended turn into the stored history (as a reload would show it). */
  async function absorb(turn) {
    if (turn.running || absorbing) return;
    absorbing = true;
    try {
      await loadNewer();
    } catch (e) {
      absorbing = false;
      onError?.(e);
      return; // The live drawing stays until the history can be read.
    }
    absorbing = false;
    if (disposed) return;
    const notice = turnNotice(turn);
    if (notice) history.append(notice);
    if (shown !== turn) {
      // Another turn is drawn already; it may have ended meanwhile.
      schedule();
      return;
    }
    live.forget(project, conversation);
    shown = null;
    drawn = [];
    liveHead = null;
    liveTail = null;
    replace(liveEl);
    coverCheck();
    const next = live.turnOf(project, conversation);
    if (next) schedule();
    onChange?.();
  }

  // ---------------------------------------------------------------- scrolling

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_BOTTOM_PX;
  }

  function toBottom() {
    scroller.scrollTop = scroller.scrollHeight;
  }

  // ---------------------------------------------------------------- lifetime

  const unwatch = live.watch(project, conversation, schedule);

  /** First load: the newest page. Resolves to false if the conversation has no messages yet. */
  async function load() {
    let exists = true;
    try {
      const page = await fetchPage(0);
      if (disposed) return true;
      addStored(page.data, 'top');
      cursor = page.data.length;
      reachedStart = page.data.length < PAGE || cursor >= page.total;
    } catch (e) {
      if (e.status !== 404) throw e;
      exists = false;
      reachedStart = true;
    }
    drawTop();
    coverCheck();
    // A turn that ended while nobody watched is in the history already.
    const turn = live.turnOf(project, conversation);
    if (turn && !turn.running && exists) live.forget(project, conversation);
    drawLive();
    toBottom();
    return exists || !!live.turnOf(project, conversation);
  }

  /** Reads what was missed (events lost, or the hub came back). */
  async function refresh() {
    await loadNewer();
    coverCheck();
    schedule();
  }

  return {
    el: scroller,
    load,
    refresh,
    toBottom,
    /** Redraws approval buttons (the hub went or came back). */
    redraw() {
      for (const d of drawn) if (d.item.kind === 'tool') d.view.update(d.item);
    },
    get running() {
      return !!live.turnOf(project, conversation)?.running;
    },
    dispose() {
      disposed = true;
      unwatch();
      observer.disconnect();
      if (frame) cancelAnimationFrame(frame);
    },
  };
}
