// textsync.js: the note editor's sync engine. Typing becomes character-level splices
// sent against the heads of the version they were computed from; remote changes are
// merged into the text on screen without losing an unsent keystroke or moving the caret
// away from where its writer left it.
//
// Owns: the editor's model of one text field: the server's last answer (text and
// heads), the one request in flight, the edits typed since, and the operations that
// relate them (diff, compose, transform: the ot.js algebra, with positions in UTF-16
// code units, what browsers and the API count, never splitting a surrogate pair), the
// map between the document's text and a textarea's (which shows CR LF as LF), and the
// retry policy (409 refetch and re-apply, 410 gone, network errors with backoff).
// Must never touch the DOM nor the network itself: both come in through `io`, so
// node:test can drive every interleaving (tests/browser/unit/textsync.test.mjs).

// ---------------------------------------------------------------- operations
//
// An operation is an array of components over a text: a positive number retains that
// many code units, a negative number deletes that many, a string inserts itself. Inserts
// come before deletes at the same place (the canonical form transform relies on).

const isRetain = (c) => typeof c === 'number' && c > 0;
const isDelete = (c) => typeof c === 'number' && c < 0;
const isInsert = (c) => typeof c === 'string';

function retain(op, n) {
  if (n <= 0) return;
  if (isRetain(op[op.length - 1])) op[op.length - 1] += n;
  else op.push(n);
}

function insert(op, s) {
  if (!s) return;
  const n = op.length;
  if (isInsert(op[n - 1])) op[n - 1] += s;
  else if (isDelete(op[n - 1])) {
    if (isInsert(op[n - 2])) op[n - 2] += s;
    else {
      op[n] = op[n - 1];
      op[n - 1] = s;
    }
  } else op.push(s);
}

function remove(op, n) {
  if (n <= 0) return;
  if (isDelete(op[op.length - 1])) op[op.length - 1] -= n;
  else op.push(-n);
}

/** The length of the text `op` applies to. */
export function baseLength(op) {
  let n = 0;
  for (const c of op) if (!isInsert(c)) n += Math.abs(c);
  return n;
}

/** The length of the text `op` leaves. */
export function targetLength(op) {
  let n = 0;
  for (const c of op) n += isInsert(c) ? c.length : isRetain(c) ? c : 0;
  return n;
}

/** The operation that changes nothing in a text of `length` code units. */
export function identity(length) {
  return length > 0 ? [length] : [];
}

export function isNoop(op) {
  return op.every(isRetain);
}

/** `text` changed by `op`. */
export function apply(text, op) {
  if (baseLength(op) !== text.length) {
    throw new RangeError(`operation for ${baseLength(op)} code units applied to ${text.length}`);
  }
  const out = [];
  let i = 0;
  for (const c of op) {
    if (isRetain(c)) {
      out.push(text.slice(i, i + c));
      i += c;
    } else if (isInsert(c)) out.push(c);
    else i -= c;
  }
  return out.join('');
}

/** One operation doing `a` then `b`. */
export function compose(a, b) {
  if (targetLength(a) !== baseLength(b)) throw new RangeError('compose: lengths differ');
  const out = [];
  let i1 = 0;
  let i2 = 0;
  let c1 = a[i1++];
  let c2 = b[i2++];
  for (;;) {
    if (c1 === undefined && c2 === undefined) return out;
    if (isDelete(c1)) {
      remove(out, -c1);
      c1 = a[i1++];
      continue;
    }
    if (isInsert(c2)) {
      insert(out, c2);
      c2 = b[i2++];
      continue;
    }
    if (c1 === undefined || c2 === undefined) throw new RangeError('compose: operation too short');
    if (isRetain(c1) && isRetain(c2)) {
      const n = Math.min(c1, c2);
      retain(out, n);
      [c1, i1] = c1 > n ? [c1 - n, i1] : [a[i1], i1 + 1];
      [c2, i2] = c2 > n ? [c2 - n, i2] : [b[i2], i2 + 1];
    } else if (isInsert(c1) && isDelete(c2)) {
      const n = Math.min(c1.length, -c2);
      [c1, i1] = c1.length > n ? [c1.slice(n), i1] : [a[i1], i1 + 1];
      [c2, i2] = -c2 > n ? [c2 + n, i2] : [b[i2], i2 + 1];
    } else if (isInsert(c1) && isRetain(c2)) {
      const n = Math.min(c1.length, c2);
      insert(out, c1.slice(0, n));
      [c1, i1] = c1.length > n ? [c1.slice(n), i1] : [a[i1], i1 + 1];
      [c2, i2] = c2 > n ? [c2 - n, i2] : [b[i2], i2 + 1];
    } else {
      // retain in a, delete in b
      const n = Math.min(c1, -c2);
      remove(out, n);
      [c1, i1] = c1 > n ? [c1 - n, i1] : [a[i1], i1 + 1];
      [c2, i2] = -c2 > n ? [c2 + n, i2] : [b[i2], i2 + 1];
    }
  }
}

/**
 * `[a2, b2]` with apply(apply(s, a), b2) === apply(apply(s, b), a2), for `a` and `b`
 * made on the same text. Where both insert at one place, `a`'s insert comes first.
 */
export function transform(a, b) {
  if (baseLength(a) !== baseLength(b)) throw new RangeError('transform: lengths differ');
  const a2 = [];
  const b2 = [];
  let i1 = 0;
  let i2 = 0;
  let c1 = a[i1++];
  let c2 = b[i2++];
  for (;;) {
    if (c1 === undefined && c2 === undefined) return [a2, b2];
    if (isInsert(c1)) {
      insert(a2, c1);
      retain(b2, c1.length);
      c1 = a[i1++];
      continue;
    }
    if (isInsert(c2)) {
      retain(a2, c2.length);
      insert(b2, c2);
      c2 = b[i2++];
      continue;
    }
    if (c1 === undefined || c2 === undefined) throw new RangeError('transform: operation too short');
    const n = Math.min(Math.abs(c1), Math.abs(c2));
    if (isRetain(c1) && isRetain(c2)) {
      retain(a2, n);
      retain(b2, n);
    } else if (isDelete(c1) && isRetain(c2)) {
      remove(a2, n);
    } else if (isRetain(c1) && isDelete(c2)) {
      remove(b2, n);
    }
    // Both delete the same code units: neither needs to any more.
    [c1, i1] = Math.abs(c1) > n ? [c1 > 0 ? c1 - n : c1 + n, i1] : [a[i1], i1 + 1];
    [c2, i2] = Math.abs(c2) > n ? [c2 > 0 ? c2 - n : c2 + n, i2] : [b[i2], i2 + 1];
  }
}

/**
 * Where position `index` goes when `op` changes the text. An insert exactly at `index`
 * lands after it (the caret stays where its writer left it) unless `before` is set.
 */
export function transformIndex(index, op, { before = false } = {}) {
  let pos = 0; // in the old text
  let moved = index;
  for (const c of op) {
    if (pos > index) break;
    if (isRetain(c)) pos += c;
    else if (isInsert(c)) {
      if (pos < index || (before && pos === index)) moved += c.length;
    } else {
      moved -= Math.max(0, Math.min(-c, index - pos));
      pos -= c;
    }
  }
  return moved;
}

/** The operation replacing `del` code units at `pos` with `ins` in a text of `length`. */
export function spliceOp(length, pos, del, ins) {
  const op = [];
  retain(op, pos);
  insert(op, ins);
  remove(op, del);
  retain(op, length - pos - del);
  return op;
}

/**
 * `op` as the API's splices (`{pos, delete, insert}`, each against the text the
 * previous ones left), one per changed region.
 */
export function toSplices(op) {
  const out = [];
  let pos = 0;
  let cur = null;
  for (const c of op) {
    if (isRetain(c)) {
      if (cur) (out.push(cur), (pos += cur.insert.length), (cur = null));
      pos += c;
      continue;
    }
    cur ??= { pos, delete: 0, insert: '' };
    if (isInsert(c)) cur.insert += c;
    else cur.delete -= c;
  }
  if (cur) out.push(cur);
  return out;
}

// ---------------------------------------------------------------- diffs

const isHigh = (u) => u >= 0xd800 && u <= 0xdbff;
const isLow = (u) => u >= 0xdc00 && u <= 0xdfff;

/**
 * The one change an input event made: `old` became `now`, with the caret at `caret` in
 * `now`. The caret places the change where the writer made it when the text around it
 * repeats ("aa" + "a" typed in front is an insert at 0, not at 2), which matters once
 * it merges with someone else's edits. Never splits a surrogate pair.
 */
export function diffAtCaret(old, now, caret = now.length) {
  let suffix = 0;
  const maxSuffix = Math.max(0, Math.min(old.length, now.length, now.length - caret));
  while (suffix < maxSuffix && old.charCodeAt(old.length - 1 - suffix) === now.charCodeAt(now.length - 1 - suffix)) {
    suffix += 1;
  }
  let prefix = 0;
  const maxPrefix = Math.min(old.length, now.length) - suffix;
  while (prefix < maxPrefix && old.charCodeAt(prefix) === now.charCodeAt(prefix)) prefix += 1;
  if (prefix > 0 && isHigh(old.charCodeAt(prefix - 1))) prefix -= 1;
  if (suffix > 0 && isLow(old.charCodeAt(old.length - suffix))) suffix -= 1;
  return spliceOp(old.length, prefix, old.length - suffix - prefix, now.slice(prefix, now.length - suffix));
}

/** Work budget of one Myers diff, in diagonal steps: beyond it a region is replaced whole. */
const DIFF_BUDGET = 4_000_000;

/**
 * The changes that turn `a` into `b`, as an operation: common ends trimmed, then a Myers
 * diff of the code points between (so separate remote edits stay separate and the caret
 * between them stays put); a region too costly to diff is replaced whole.
 */
export function diff(a, b) {
  if (a === b) return identity(a.length);
  const min = Math.min(a.length, b.length);
  let prefix = 0;
  while (prefix < min && a.charCodeAt(prefix) === b.charCodeAt(prefix)) prefix += 1;
  if (prefix > 0 && isHigh(a.charCodeAt(prefix - 1))) prefix -= 1;
  let suffix = 0;
  while (suffix < min - prefix && a.charCodeAt(a.length - 1 - suffix) === b.charCodeAt(b.length - 1 - suffix)) {
    suffix += 1;
  }
  if (suffix > 0 && isLow(a.charCodeAt(a.length - suffix))) suffix -= 1;
  const op = [];
  retain(op, prefix);
  const midA = Array.from(a.slice(prefix, a.length - suffix));
  const midB = Array.from(b.slice(prefix, b.length - suffix));
  const script = myers(midA, midB, Math.max(8, Math.floor(DIFF_BUDGET / (midA.length + midB.length + 1))));
  if (script) {
    for (const [kind, cp] of script) {
      if (kind === '=') retain(op, cp.length);
      else if (kind === '+') insert(op, cp);
      else remove(op, cp.length);
    }
  } else {
    insert(op, midB.join(''));
    remove(op, midA.reduce((n, cp) => n + cp.length, 0));
  }
  retain(op, suffix);
  return op;
}

/** How many code units `op` inserts and deletes. */
export function editSize(op) {
  let n = 0;
  for (const c of op) n += isInsert(c) ? c.length : isDelete(c) ? -c : 0;
  return n;
}

/** Myers' O(ND) diff of two arrays: [['=', x] | ['-', x] | ['+', x]], or null past `maxD`. */
function myers(a, b, maxD) {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const v = new Int32Array(2 * max + 3);
  const off = max + 1;
  const trace = [];
  for (let d = 0; d <= max; d++) {
    if (d > maxD) return null;
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) (x += 1), (y += 1);
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace);
    }
  }
  return null;
}

function backtrack(a, b, trace) {
  const out = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d];
    const at = (k) => v[k + d + 1];
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) out.push(['=', a[(x -= 1)]]), (y -= 1);
    if (d > 0) {
      if (x === prevX) out.push(['+', b[(y -= 1)]]);
      else out.push(['-', a[(x -= 1)]]);
    }
  }
  return out.reverse();
}

// ---------------------------------------------------------------- line ends

/** The text a textarea shows for `text`: CR LF and lone CR read as LF. */
export function toView(text) {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}

/** Position `v` of the view of `doc` as a position in `doc` (before a CR LF, never inside). */
export function viewToDoc(doc, v) {
  if (!doc.includes('\r')) return v;
  let i = 0;
  for (let j = 0; j < v && i < doc.length; j++) i += doc[i] === '\r' && doc[i + 1] === '\n' ? 2 : 1;
  return i;
}

/** Position `d` of `doc` as a position in its view. */
export function docToView(doc, d) {
  if (!doc.includes('\r')) return d;
  let j = 0;
  for (let i = 0; i < d && i < doc.length; j++) {
    const crlf = doc[i] === '\r' && doc[i + 1] === '\n';
    if (crlf && i + 2 > d) break;
    i += crlf ? 2 : 1;
  }
  return j;
}

// ---------------------------------------------------------------- the engine

const sameHeads = (a, b) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

/**
 * One text field of one document kept in sync with the server.
 *
 * `io`: `patch(heads, splices)` and `get()` answer `{content, heads, …}` or throw
 * `{status, code, message}` (status 0: no answer); `read()` answers the view's
 * `{text, start, end, direction}` (or null while no view is attached); `render(text,
 * sel)` shows a new text and selection; `status(state, detail)` with state one of
 * saved, saving, offline, deleted, error; optional: `meta(answer)`
 * with every answer, `composing()` (true while an input method composes: the view is
 * left alone until `resume()`), `timer(fn, ms)` → cancel (defaults to setTimeout), and
 * `idle()` once a detached engine has nothing left to send.
 */
export class TextSync {
  constructor(initial, io) {
    this.io = io;
    this.base = { text: initial.content, heads: initial.heads };
    this.text = initial.content; // the base, the edit in flight and the unsent ones
    this.inflight = null; // operation on base.text, sent
    this.unsent = identity(this.text.length); // operation on base.text + inflight
    this.uncertain = false; // the in-flight patch got no answer: it may have landed
    this.needsBase = false; // the server refused the base: fetch before sending again
    this.busy = false;
    this.stale = false; // a change was announced since the last answer was asked for
    this.state = 'saved';
    this.detail = '';
    this.failures = 0;
    this.cancelTimer = null;
    this.parked = null;
    this.dead = false;
    this.detached = false;
  }

  /** Whether edits are still to reach the server. */
  get pending() {
    return this.inflight !== null || !isNoop(this.unsent);
  }

  /** Takes in what the view shows now (call on every `input` event). */
  input() {
    const view = this.io.read();
    if (!view) return;
    const shown = toView(this.text);
    if (view.text === shown) return;
    let op;
    if (shown === this.text) op = diffAtCaret(this.text, view.text, view.end);
    else {
      const change = diffAtCaret(shown, view.text, view.end);
      const [pos, del, ins] = oneSplice(change);
      const start = viewToDoc(this.text, pos);
      op = spliceOp(this.text.length, start, viewToDoc(this.text, pos + del) - start, ins);
      // A lone CR followed by a typed LF would read as one line end: diff whole instead.
      if (toView(apply(this.text, op)) !== view.text) op = diff(this.text, view.text);
    }
    this.unsent = compose(this.unsent, op);
    this.text = apply(this.text, op);
    this.kick();
  }

  /** Another writer changed the document (an event named it): fetch and merge. */
  remote() {
    if (this.dead) return;
    this.stale = true;
    if (this.cancelTimer) this.wake();
    this.kick();
  }

  /** The input method finished composing: apply what waited for it. */
  resume() {
    const parked = this.parked;
    this.parked = null;
    parked?.();
  }

  /** The view goes away; edits still unsent keep going, then `io.idle()`. */
  detach() {
    this.detached = true;
    this.io = { ...this.io, read: () => null, render() {}, status() {}, meta() {}, composing: () => false };
    this.resume();
    this.kick();
  }

  /** A view comes back (the same note opened again while its edits drain). */
  attach(io) {
    this.detached = false;
    this.io = io;
    io.render(toView(this.text), null);
    this.report(true);
    this.remote();
  }

  /** Stops for good: no more requests, no more timers. */
  stop() {
    this.dead = true;
    this.cancelTimer?.();
    this.cancelTimer = null;
  }

  kick() {
    if (this.busy || this.dead || this.cancelTimer) return this.report();
    if (this.uncertain || this.needsBase) this.refresh();
    else if (!isNoop(this.unsent)) this.send();
    else if (this.stale && !this.detached) this.refresh();
    else if (this.detached) {
      this.stop();
      this.io.idle?.();
    }
    this.report();
  }

  async send() {
    this.busy = true;
    this.stale = false;
    this.inflight = this.unsent;
    this.unsent = identity(this.text.length);
    let answer;
    try {
      answer = await this.io.patch(this.base.heads, toSplices(this.inflight));
    } catch (e) {
      return this.failed(e, true);
    }
    this.settle(answer);
  }

  async refresh() {
    this.busy = true;
    this.stale = false;
    this.needsBase = false;
    let answer;
    try {
      answer = await this.io.get();
    } catch (e) {
      return this.failed(e, false);
    }
    if (this.uncertain) {
      // Did the unanswered patch land? If so the answer is nearer the text with it.
      this.uncertain = false;
      const landed =
        !sameHeads(answer.heads, this.base.heads) &&
        editSize(diff(apply(this.base.text, this.inflight), answer.content)) <
          editSize(diff(this.base.text, answer.content));
      if (!landed) this.takeBack();
    }
    this.settle(answer);
  }

  /** The in-flight edit did not land: it goes back in front of the unsent ones. */
  takeBack() {
    if (!this.inflight) return;
    this.unsent = compose(this.inflight, this.unsent);
    this.inflight = null;
  }

  /** Takes the server's `answer` as the new base and rebases what is still unsent on it. */
  settle(answer) {
    if (this.dead) return;
    if (this.io.composing?.()) {
      this.parked = () => this.settle(answer);
      return;
    }
    this.input(); // whatever the view shows is counted before the text changes under it
    const sent = this.inflight ? apply(this.base.text, this.inflight) : this.base.text;
    const theirs = diff(sent, answer.content);
    const [mine, theirsHere] = transform(this.unsent, theirs);
    const before = this.text;
    const view = this.io.read();
    this.text = apply(before, theirsHere);
    this.base = { text: answer.content, heads: answer.heads };
    this.inflight = null;
    this.unsent = mine;
    this.busy = false;
    this.failures = 0;
    this.detail = '';
    if (this.text !== before) this.io.render(toView(this.text), view && mapSelection(view, before, this.text, theirsHere));
    this.io.meta?.(answer);
    this.kick();
  }

  failed(e, patching) {
    if (this.dead) return;
    const status = e?.status ?? 0;
    this.busy = false;
    this.detail = e?.message ?? String(e);
    if (status === 404 || status === 410 || status === 401 || status === 403) {
      this.takeBack();
      this.stop();
      this.state = status === 404 || status === 410 ? 'deleted' : 'error';
      this.io.status(this.state, this.detail);
      if (this.detached) this.io.idle?.();
      return;
    }
    if (patching) {
      if (status === 0) this.uncertain = true;
      else this.takeBack();
    }
    this.failures += 1;
    if (status === 409) {
      // Heads this server does not know: fetch the latest, re-apply the edits on it.
      this.needsBase = true;
      if (this.failures === 1) return this.kick();
    } else if (status >= 400 && status < 500 && patching) {
      // A refused patch is a bug of ours: send the same text again as a fresh diff,
      // against the latest version.
      this.unsent = diff(this.base.text, this.text);
      this.needsBase = true;
    }
    this.retryLater(status);
  }

  retryLater(status) {
    const offline = status === 0 || status === 502 || status === 503 || status === 504;
    this.state = offline ? 'offline' : 'error';
    this.io.status(this.state, this.detail);
    const delay = Math.min(250 * 2 ** Math.min(this.failures - 1, 5), 8000);
    const timer = this.io.timer ?? ((fn, ms) => ((t) => () => clearTimeout(t))(setTimeout(fn, ms)));
    this.cancelTimer = timer(() => {
      this.cancelTimer = null;
      this.stale = true;
      this.kick();
    }, delay);
  }

  /** A retry waits: do it now (the server was heard from). */
  wake() {
    this.cancelTimer?.();
    this.cancelTimer = null;
  }

  report(force = false) {
    if (this.dead) return;
    let state;
    if (this.failures > 0) state = this.state; // offline or error, until an answer comes
    else state = this.pending ? 'saving' : 'saved';
    if (state !== this.state || force) {
      this.state = state;
      this.io.status(state, state === 'offline' || state === 'error' ? this.detail : '');
    }
  }
}

/** The one region an operation changes: [pos, deleted, inserted]. */
function oneSplice(op) {
  const [s] = toSplices(op);
  return s ? [s.pos, s.delete, s.insert] : [0, 0, ''];
}

/** The view's selection carried through `op` (which turned `before` into `after`). */
function mapSelection(view, before, after, op) {
  const collapsed = view.start === view.end;
  const start = transformIndex(viewToDoc(before, view.start), op, { before: !collapsed });
  const end = transformIndex(viewToDoc(before, view.end), op);
  return { start: docToView(after, start), end: docToView(after, end), direction: view.direction };
}
