// records/editor.js: the editor behind one open record (a task, contact, skill or
// project): fields that save themselves, and live changes from other devices folded in.
//
// Owns: the record's heads and, per text field, the text those heads hold (its base).
// A text field saves as one splice computed against the heads it was read at
// (`PATCH <path>/text`), so a concurrent edit on another device merges instead of being
// overwritten; other fields save with a plain PATCH. Requests for one record run one
// at a time. When the record comes back (after a save, or refetched on a live event)
// each text field's unsaved typing is replayed onto the new text and the cursor is kept
// where its writer left it. Must never send a whole text as a replacement (that would
// undo other devices' edits) nor change a field the person is typing in.

import * as api from '../api.js';
import { errorText } from './common.js';

/** The single splice turning `a` into `b` (UTF-16 positions, surrogate pairs kept whole). */
export function diff(a, b) {
  let start = 0;
  const max = Math.min(a.length, b.length);
  while (start < max && a.charCodeAt(start) === b.charCodeAt(start)) start++;
  // Never cut between the halves of a surrogate pair.
  if (start > 0 && isHigh(a.charCodeAt(start - 1))) start--;
  let end = 0;
  while (end < max - start && a.charCodeAt(a.length - 1 - end) === b.charCodeAt(b.length - 1 - end)) end++;
  if (end > 0 && isLow(a.charCodeAt(a.length - end))) end--;
  return { pos: start, delete: a.length - start - end, insert: b.slice(start, b.length - end) };
}

const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

function apply(text, s) {
  return text.slice(0, s.pos) + s.insert + text.slice(s.pos + s.delete);
}

/** Moves position `p` of a text across splice `s` made to it. */
function shift(p, s) {
  if (p <= s.pos) return p;
  if (p >= s.pos + s.delete) return p + s.insert.length - s.delete;
  return s.pos + s.insert.length;
}

/** Replays `local` (edits made to `base`) onto `server` (another version of `base`). */
export function rebase(base, local, server) {
  if (local === base) return server;
  if (server === base) return local;
  const mine = diff(base, local);
  const theirs = diff(base, server);
  let pos = mine.pos;
  if (mine.pos >= theirs.pos + theirs.delete) pos = mine.pos + theirs.insert.length - theirs.delete;
  else if (mine.pos + mine.delete > theirs.pos) pos = Math.min(mine.pos, theirs.pos); // overlapping: keep both, mine first
  const del = mine.pos + mine.delete <= theirs.pos || mine.pos >= theirs.pos + theirs.delete ? mine.delete : 0;
  return apply(server, { pos: Math.min(pos, server.length), delete: del, insert: mine.insert });
}

/** Sets a text control's value, keeping its cursor and selection across the change. */
function setText(el, value) {
  if (el.value === value) return;
  if (document.activeElement !== el) {
    el.value = value;
    return;
  }
  const s = diff(el.value, value);
  const [a, b, dir] = [el.selectionStart, el.selectionEnd, el.selectionDirection];
  el.value = value;
  el.setSelectionRange(shift(a, s), shift(b, s), dir);
}

/**
 * An editor for the record at `path` (e.g. `/tasks/<id>`), starting from `record` as
 * read (with `heads`). `onRecord(record)` is called with each newer version;
 * `onState(state, message)` with `saving`, `saved` or `error`.
 */
export function recordEditor({ path, record, onRecord = () => {}, onState = () => {} }) {
  let current = record;
  const texts = new Map(); // field -> { el, base, timer }
  const scalars = new Map(); // field -> { el, read }
  let chain = Promise.resolve();
  let closed = false;

  const queue = (job) => {
    chain = chain.then(job, job);
    return chain;
  };

  function adopt(next) {
    current = next;
    for (const [name, f] of texts) {
      const server = next[name] ?? '';
      setText(f.el, rebase(f.base, f.el.value, server));
      f.base = server;
    }
    for (const [name, f] of scalars) {
      if (document.activeElement !== f.el) f.read(next[name]);
    }
    onRecord(next);
    // Typing that was replayed onto the new version still waits to be saved.
    for (const [name, f] of texts) if (f.el.value !== f.base) schedule(name, 600);
  }

  async function saveText(name) {
    const f = texts.get(name);
    if (!f || closed) return;
    const sent = f.el.value;
    if (sent === f.base) return;
    onState('saving');
    try {
      const next = await api.patch(`${path}/text`, {
        field: name,
        heads: current.heads,
        splices: [diff(f.base, sent)],
      });
      f.base = sent; // the server now holds what was sent, merged with others' edits
      adopt(next);
      onState('saved');
    } catch (e) {
      onState('error', errorText(e));
    }
  }

  function schedule(name, ms = 700) {
    const f = texts.get(name);
    clearTimeout(f.timer);
    f.timer = setTimeout(() => queue(() => saveText(name)), ms);
  }

  return {
    get record() {
      return current;
    },

    /** Binds a text control to text field `name`: typing saves as splices. */
    text(name, el) {
      el.value = current[name] ?? '';
      texts.set(name, { el, base: el.value, timer: null });
      el.addEventListener('input', () => schedule(name));
      el.addEventListener('blur', () => this.flush(name));
      return el;
    },

    /** Registers a control showing field `name`, refreshed by `read(value)` unless focused. */
    scalar(name, el, read) {
      scalars.set(name, { el, read });
      read(current[name]);
      return el;
    },

    /** Shows the record as last read in every plain control (after a refused change). */
    reread() {
      for (const [name, f] of scalars) f.read(current[name]);
    },

    /** Saves now what waits in text field `name` (or in all). */
    flush(name) {
      for (const [n, f] of texts) {
        if (name && n !== name) continue;
        clearTimeout(f.timer);
        if (f.el.value !== f.base) queue(() => saveText(n));
      }
      return chain;
    },

    /** PATCHes `body` (plain fields); resolves with the record, rejects with the error. */
    set(body) {
      let outcome;
      const done = queue(async () => {
        onState('saving');
        try {
          adopt(await api.patch(path, body));
          onState('saved');
          outcome = { ok: true };
        } catch (e) {
          onState('error', errorText(e));
          outcome = { ok: false, e };
        }
      });
      return done.then(() => {
        if (!outcome.ok) throw outcome.e;
        return current;
      });
    },

    /** Reads the record again (a live change) and folds it in; resolves with the error, if any. */
    refresh() {
      let failure = null;
      return queue(async () => {
        if (closed) return;
        try {
          adopt(await api.get(path));
        } catch (e) {
          failure = e;
        }
      }).then(() => failure);
    },

    /** Saves what waits, then stops. */
    close() {
      return this.flush().then(() => {
        closed = true;
      });
    },
  };
}
