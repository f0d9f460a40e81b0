// harness.mjs: a fake server, network and textarea for the unit tests of textsync.js.
//
// The server keeps every version and merges a text patch made against an old version
// the way the store does (a fork at that version, merged as a sequence CRDT), so two
// engines can be driven through
// any interleaving of keystrokes, requests, answers, events and failures, each step
// chosen by the test or by a seeded random schedule. Never a real socket or timer.

import { TextSync, toSplices, toView } from '../../../ui/assets/js/textsync.js';

export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const isLow = (u) => u >= 0xdc00 && u <= 0xdfff;

export class ApiError extends Error {
  constructor(status, code, message = code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * A document server with versions `h0`, `h1`, …, merging like the store's CRDT does: the
 * text is a replicated growable array of code points, each inserted after the one to
 * its left when it was typed (its anchor) with a Lamport stamp; a patch against an old
 * version is applied to that version (a fork) and merged, so concurrent inserts after
 * one anchor are ordered by stamp and actor (`seed` picks the actors) and a writer's run
 * of characters is never split by another's.
 */
export class Server {
  constructor(text, { seed = 1 } = {}) {
    this.rand = rng(seed);
    this.elements = []; // {key, counter, actor, anchor, ch, added, deletedAt}
    this.version = 0;
    this.deleted = false;
    this.forgotten = new Set();
    this.listeners = [];
    this.patches = [];
    this.splice(0, [{ pos: 0, delete: 0, insert: text }]);
    this.version = 0;
    for (const e of this.elements) e.added = 0;
  }

  /** The elements in document order, tombstones included. */
  ordered() {
    const children = new Map();
    for (const e of this.elements) {
      if (!children.has(e.anchor)) children.set(e.anchor, []);
      children.get(e.anchor).push(e);
    }
    for (const list of children.values()) list.sort((a, b) => b.counter - a.counter || b.actor - a.actor);
    const out = [];
    const stack = [...(children.get(null) ?? [])].reverse();
    while (stack.length) {
      const e = stack.pop();
      out.push(e);
      stack.push(...[...(children.get(e.key) ?? [])].reverse());
    }
    return out;
  }

  visibleAt(v) {
    return this.ordered().filter((e) => e.added <= v && !(e.deletedAt <= v));
  }

  textAt(v) {
    return this.visibleAt(v)
      .map((e) => e.ch)
      .join('');
  }

  get text() {
    return this.textAt(this.version);
  }

  state() {
    if (this.deleted) throw new ApiError(410, 'gone');
    return { content: this.text, heads: [`h${this.version}`], title: 'T', updated_at: this.version };
  }

  /** A write by someone else (a peer, a tool): `op` on the current text. */
  write(op) {
    this.patch([`h${this.version}`], toSplices(op));
  }

  patch(heads, splices) {
    if (this.deleted) throw new ApiError(410, 'gone');
    const v = heads.length === 1 && /^h\d+$/.test(heads[0]) ? Number(heads[0].slice(1)) : -1;
    if (v < 0 || v > this.version || this.forgotten.has(heads[0])) throw new ApiError(409, 'conflict');
    this.patches.push(splices);
    if (this.splice(v, splices)) for (const fn of this.listeners) fn();
    return this.state();
  }

  /** Applies `splices` to version `v` as a fork and merges it; whether anything changed. */
  splice(v, splices) {
    const list = this.visibleAt(v);
    const known = this.elements.filter((e) => e.added <= v);
    let counter = Math.max(0, ...known.map((e) => e.counter));
    const actor = Math.floor(this.rand() * 1e9);
    const next = this.version + 1;
    let changed = false;
    for (const sp of splices) {
      const text = list.map((e) => e.ch).join('');
      const end = sp.pos + sp.delete;
      if (end > text.length || isLow(text.charCodeAt(sp.pos)) || isLow(text.charCodeAt(end))) {
        throw new ApiError(400, 'invalid', `splice ${JSON.stringify(sp)} does not fit`);
      }
      let at = 0;
      let unit = 0;
      while (unit < sp.pos) unit += list[at++].ch.length;
      let gone = 0;
      let n = 0;
      while (gone < sp.delete) gone += list[at + n++].ch.length;
      for (const e of list.splice(at, n)) e.deletedAt = Math.min(e.deletedAt ?? Infinity, next);
      let anchor = at > 0 ? list[at - 1].key : null;
      const fresh = [];
      for (const ch of sp.insert) {
        counter += 1;
        const e = { key: `${counter}@${actor}`, counter, actor, anchor, ch, added: next };
        fresh.push(e);
        anchor = e.key;
      }
      list.splice(at, 0, ...fresh);
      this.elements.push(...fresh);
      changed ||= n > 0 || fresh.length > 0;
    }
    if (changed) this.version = next;
    return changed;
  }
}

/**
 * Requests and events as queued deliveries: a request reaches the server when its
 * `arrive` is delivered and its answer the client when its `answer` is. A client that is
 * `offline` loses a request before the server (`lose: 'before'`) or its answer after.
 */
export class Net {
  constructor() {
    this.queue = [];
    this.timers = [];
  }

  request(client, run) {
    return new Promise((resolve, reject) => {
      this.queue.push({
        kind: 'arrive',
        client,
        deliver: () => {
          if (client.offline && client.lose === 'before') return reject(new ApiError(0, 'unreachable'));
          let result;
          let error;
          try {
            result = run();
          } catch (e) {
            error = e;
          }
          this.queue.push({
            kind: 'answer',
            client,
            deliver: () => {
              if (client.offline) reject(new ApiError(0, 'unreachable'));
              else if (error) reject(error);
              else resolve(structuredClone(result));
            },
          });
        },
      });
    });
  }

  event(client) {
    this.queue.push({ kind: 'event', client, deliver: () => client.engine.remote() });
  }

  timer(fn, ms) {
    const t = { fn, ms };
    this.timers.push(t);
    return () => {
      this.timers = this.timers.filter((x) => x !== t);
    };
  }

  /** Delivers queue item `i`, then lets the engines' continuations run. */
  async deliver(i = 0) {
    const [item] = this.queue.splice(i, 1);
    item.deliver();
    await settle();
  }

  async fireTimers() {
    const due = this.timers;
    this.timers = [];
    for (const t of due) t.fn();
    await settle();
  }

  /** Delivers everything, timers included, until nothing moves. */
  async drain(limit = 100000) {
    for (let n = 0; n < limit; n++) {
      if (this.queue.length) await this.deliver(0);
      else if (this.timers.length) await this.fireTimers();
      else return;
    }
    throw new Error('the network never went quiet');
  }
}

export const settle = () => new Promise((r) => setImmediate(r));

/** A textarea (value, selection) with an engine behind it. */
export class Client {
  constructor(server, net, { caret = 0, events = true } = {}) {
    this.server = server;
    this.net = net;
    this.offline = false;
    this.lose = 'before';
    this.states = [];
    this.composing = false;
    const first = server.state();
    this.view = { text: toView(first.content), start: caret, end: caret, direction: 'none' };
    this.engine = new TextSync(first, {
      patch: (heads, splices) => net.request(this, () => server.patch(heads, splices)),
      get: () => net.request(this, () => server.state()),
      read: () => ({ ...this.view }),
      render: (text, sel) => {
        this.view.text = text;
        this.renders = (this.renders ?? 0) + 1;
        if (sel) Object.assign(this.view, sel);
        else this.view.start = this.view.end = text.length;
      },
      status: (state) => this.states.push(state),
      composing: () => this.composing,
      timer: (fn, ms) => net.timer(fn, ms),
    });
    if (events) server.listeners.push(() => net.event(this));
  }

  get caret() {
    return this.view.end;
  }

  /** Types `text` one code point at a time, as page.keyboard.type does. */
  type(text) {
    for (const cp of text) this.replaceSelection(cp);
  }

  replaceSelection(insert) {
    const { text, start, end } = this.view;
    this.view.text = text.slice(0, start) + insert + text.slice(end);
    this.view.start = this.view.end = start + insert.length;
    this.engine.input();
  }

  select(start, end = start) {
    Object.assign(this.view, { start, end });
  }

  /** Deletes the selection, or the code point before the caret. */
  backspace() {
    const { text, start, end } = this.view;
    if (start !== end) return this.replaceSelection('');
    if (start === 0) return;
    const cut = start >= 2 && isLow(text.charCodeAt(start - 1)) ? 2 : 1;
    this.select(start - cut, start);
    this.replaceSelection('');
  }
}
