// Unit tests of ui/assets/js/textsync.js, the note editor's sync engine (node --test).
//
// The algebra (apply, compose, transform, positions, diffs, line ends) is checked on
// fixed cases and on seeded random ones; the engine is driven against a fake server and
// network (harness.mjs) through chosen and random interleavings of typing, answers,
// events, failures and input-method composition: every keystroke of both writers kept,
// both screens equal to the server, each caret right after its writer's last character.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  apply,
  compose,
  diff,
  diffAtCaret,
  docToView,
  identity,
  spliceOp,
  toSplices,
  toView,
  transform,
  transformIndex,
  viewToDoc,
} from '../../../ui/assets/js/textsync.js';
import { Client, Net, Server, rng } from './harness.mjs';

const ALPHABET = ['a', 'b', ' ', 'é', '\n', '😀', '👩', '\u200d', '🇫', '🇷', '\r\n'];

function randomText(rand, n) {
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
  return s;
}

/** Code-point boundaries of `s` (UTF-16 offsets), 0 and s.length included. */
function boundaries(s) {
  const out = [0];
  let i = 0;
  for (const cp of s) out.push((i += cp.length));
  return out;
}

function randomOp(rand, text) {
  const cuts = boundaries(text);
  const op = [];
  let at = 0;
  while (at < text.length) {
    const next = cuts.find((c) => c > at + Math.floor(rand() * 4)) ?? text.length;
    const r = rand();
    if (r < 0.5) op.push(next - at);
    else if (r < 0.75) op.push(-(next - at));
    else op.push(randomText(rand, 2), next - at);
    at = next;
  }
  if (rand() < 0.5) op.push(randomText(rand, 3));
  // Normalise through compose with the identity (merges runs, inserts before deletes).
  return compose(op.filter((c) => c !== ''), identity(apply(text, op).length));
}

const splitsPair = (text, pos) => pos > 0 && /[\ud800-\udbff]/.test(text[pos - 1]) && /[\udc00-\udfff]/.test(text[pos] ?? '');

test('operations: compose and transform converge on random texts', () => {
  const rand = rng(7);
  for (let n = 0; n < 2000; n++) {
    const s = randomText(rand, Math.floor(rand() * 12));
    const a = randomOp(rand, s);
    const b = randomOp(rand, s);
    const c = randomOp(rand, apply(s, a));
    assert.equal(apply(s, compose(a, c)), apply(apply(s, a), c));
    const [a2, b2] = transform(a, b);
    assert.equal(apply(apply(s, a), b2), apply(apply(s, b), a2), JSON.stringify({ s, a, b }));
    // The API's sequential splices do what the operation does.
    let t = s;
    for (const sp of toSplices(a)) t = t.slice(0, sp.pos) + sp.insert + t.slice(sp.pos + sp.delete);
    assert.equal(t, apply(s, a));
  }
});

test('operations: concurrent inserts at one place keep the first operand first', () => {
  const [a2, b2] = transform(spliceOp(2, 1, 0, 'A'), spliceOp(2, 1, 0, 'B'));
  assert.equal(apply('xBy', a2), 'xABy');
  assert.equal(apply('xAy', b2), 'xABy');
});

test('positions: a remote insert before the caret moves it, at or after it does not', () => {
  const op = spliceOp(10, 3, 0, 'abc');
  assert.equal(transformIndex(2, op), 2);
  assert.equal(transformIndex(3, op), 3, 'an insert at the caret lands after it');
  assert.equal(transformIndex(3, op, { before: true }), 6);
  assert.equal(transformIndex(4, op), 7);
  const del = spliceOp(10, 2, 4, '');
  assert.equal(transformIndex(1, del), 1);
  assert.equal(transformIndex(4, del), 2, 'a deletion around the caret puts it where the text was');
  assert.equal(transformIndex(8, del), 4);
});

test('diff at the caret: repeated text places the change where the writer made it', () => {
  assert.deepEqual(diffAtCaret('ab', 'aab', 1), ['a', 2]);
  assert.deepEqual(diffAtCaret('ab', 'aab', 2), [1, 'a', 1]);
  assert.deepEqual(diffAtCaret('aab', 'ab', 1), [1, -1, 1]);
  assert.deepEqual(diffAtCaret('aab', 'ab', 0), [-1, 2]);
  assert.deepEqual(diffAtCaret('xx', 'xxxx', 4), [2, 'xx']);
});

test('diffs never split a surrogate pair; ZWJ sequences and flags survive', () => {
  // 😀 and 😃 share their high surrogate: the change must take the whole pair.
  for (const [a, b] of [
    ['x😀y', 'x😃y'],
    ['😀', '😃'],
    ['🇫🇷', '🇫🇮'],
    ['👩‍👩‍👧', '👩‍👩‍👦'],
    ['a👩‍👩‍👧b', 'a👩b'],
  ]) {
    for (const op of [diff(a, b), diffAtCaret(a, b, b.length - 1), diffAtCaret(a, b, 1)]) {
      assert.equal(apply(a, op), b);
      let pos = 0;
      for (const c of op) {
        assert.ok(!splitsPair(a, pos), `${JSON.stringify(op)} splits a pair of ${a}`);
        if (typeof c === 'number') pos += Math.abs(c);
      }
    }
  }
  const rand = rng(11);
  for (let n = 0; n < 1000; n++) {
    const a = randomText(rand, 8);
    const b = randomText(rand, 8);
    assert.equal(apply(a, diff(a, b)), b);
    let t = a;
    for (const sp of toSplices(diff(a, b))) {
      assert.ok(!splitsPair(t, sp.pos) && !splitsPair(t, sp.pos + sp.delete), JSON.stringify({ a, b, sp }));
      t = t.slice(0, sp.pos) + sp.insert + t.slice(sp.pos + sp.delete);
    }
  }
});

test('diff keeps separate changes separate (a caret between them stays put)', () => {
  const a = 'one two three four five';
  const b = 'ONE one two three four five!';
  const op = diff(a, 'one XX two three four five YY');
  assert.equal(transformIndex(a.indexOf('three'), op), 'one XX two '.length);
  assert.equal(apply(a, diff(a, b)), b);
  // Too costly a region is replaced whole, still right.
  const rand = rng(3);
  const big = randomText(rand, 30000);
  const other = randomText(rand, 30000);
  const t0 = Date.now();
  assert.equal(apply(big, diff(big, other)), other);
  assert.ok(Date.now() - t0 < 3000, 'bounded work');
});

test('line ends: CR LF shows as LF and positions map both ways', () => {
  const doc = 'a\r\nb\rc\nd';
  assert.equal(toView(doc), 'a\nb\nc\nd');
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].map((v) => viewToDoc(doc, v)), [0, 1, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual([0, 1, 3, 4, 5, 6, 7, 8].map((d) => docToView(doc, d)), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(docToView(doc, 2), 1, 'inside a CR LF reads as before it');
});

// ---------------------------------------------------------------- the engine

test('each keystroke is a splice, one request in flight, the rest coalesced', async () => {
  const server = new Server('Hello world');
  const net = new Net();
  const alice = new Client(server, net, { caret: 5 });
  alice.type(',');
  assert.equal(net.queue.length, 1, 'sent at once');
  alice.type(' dear');
  assert.equal(net.queue.length, 1, 'one request in flight');
  await net.drain();
  assert.deepEqual(server.patches, [[{ pos: 5, delete: 0, insert: ',' }], [{ pos: 6, delete: 0, insert: ' dear' }]]);
  assert.equal(server.text, 'Hello, dear world');
  assert.equal(alice.view.text, server.text);
  assert.equal(alice.caret, 11);
  assert.equal(alice.states.at(-1), 'saved');
  assert.equal(alice.renders ?? 0, 0, 'own edits never re-render the textarea');
});

test('a remote change while a patch is in flight: nothing lost, the caret follows its writer', async () => {
  const server = new Server('0123456789');
  const net = new Net();
  const alice = new Client(server, net, { caret: 5 });
  const bob = new Client(server, net, { caret: 8 });
  alice.type('A');
  bob.type('B');
  await net.deliver(0); // alice's patch lands: 01234A56789
  await net.deliver(0); // bob's lands too, merged at his place: 01234A567B89
  alice.type('a'); // typed while her answer is on its way
  bob.select(1);
  bob.type('b'); // bob moved before alice's text
  await net.drain();
  assert.equal(server.text, '0b1234Aa567B89');
  for (const c of [alice, bob]) assert.equal(c.view.text, server.text);
  assert.equal(alice.caret, server.text.indexOf('Aa') + 2);
  assert.equal(bob.caret, 2);
});

test('a remote insert exactly at the caret lands after it', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  server.write(spliceOp(3, 3, 0, 'XYZ'));
  await net.drain();
  assert.equal(alice.view.text, 'abcXYZ');
  assert.equal(alice.caret, 3);
  server.write(spliceOp(6, 0, 0, '>'));
  await net.drain();
  assert.equal(alice.caret, 4);
});

test('a selection keeps its text when remote edits land around it', async () => {
  const server = new Server('one two three');
  const net = new Net();
  const alice = new Client(server, net);
  alice.select(4, 7); // "two"
  server.write(spliceOp(13, 4, 0, '[')); // at the selection's start: outside it
  server.write(spliceOp(14, 8, 0, ']')); // at its end: outside it
  await net.drain();
  assert.equal(alice.view.text, 'one [two] three');
  assert.equal(alice.view.text.slice(alice.view.start, alice.view.end), 'two');
});

test('deleting across the caret and across a remote insert', async () => {
  const server = new Server('abcdefgh');
  const net = new Net();
  const alice = new Client(server, net, { caret: 4 });
  const bob = new Client(server, net, { caret: 6 });
  bob.type('XY'); // not yet seen by alice
  alice.select(2, 7); // cdefg, across bob's place
  alice.backspace();
  await net.drain();
  // Alice deleted what she saw; bob's concurrent words are kept.
  assert.equal(server.text, 'abXYh');
  for (const c of [alice, bob]) assert.equal(c.view.text, server.text);
  assert.equal(alice.caret, 2);
  assert.equal(bob.caret, 4);
});

test('emoji typed code point by code point beside a remote writer stay whole', async () => {
  const server = new Server('Paris: ');
  const net = new Net();
  const alice = new Client(server, net, { caret: 7 });
  const bob = new Client(server, net, { caret: 0 });
  const family = '👩‍👩‍👧';
  const flag = '🇫🇷';
  for (const [a, b] of [...family].map((cp, i) => [cp, [...flag, ' ', '!', '?'][i] ?? ''])) {
    alice.type(a);
    bob.type(b);
    await net.deliver(Math.floor(net.queue.length / 2));
  }
  await net.drain();
  assert.equal(server.text, `${flag} !?Paris: ${family}`);
  assert.equal(alice.view.text, server.text);
  assert.equal(bob.view.text, server.text);
  assert.equal(alice.caret, server.text.length);
  assert.equal(bob.caret, `${flag} !?`.length);
});

test('CR LF documents: typed positions land in the right place and the CR LFs stay', async () => {
  const server = new Server('one\r\ntwo\r\nthree');
  const net = new Net();
  const alice = new Client(server, net);
  assert.equal(alice.view.text, 'one\ntwo\nthree');
  alice.select(8); // before "three"
  alice.type('2.5\n');
  alice.select(4, 8); // "two\n", across a CR LF
  alice.backspace();
  await net.drain();
  assert.equal(server.text, 'one\r\n2.5\nthree');
  assert.equal(alice.view.text, toView(server.text));
  server.write(spliceOp(server.text.length, 0, 0, 'zero\r\n'));
  await net.drain();
  assert.equal(alice.view.text, 'zero\none\n2.5\nthree');
  assert.equal(alice.caret, 5 + 4);
});

test('409: heads the server does not know are refetched and the edits applied again', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  server.write(spliceOp(3, 0, 0, '>'));
  server.forgotten.add('h0');
  alice.type('d');
  await net.drain();
  assert.equal(server.text, '>abcd');
  assert.equal(alice.view.text, '>abcd');
  assert.equal(alice.caret, 5);
});

test('410: a note deleted elsewhere keeps the text on screen and stops', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  server.deleted = true;
  alice.type('d');
  await net.drain();
  assert.equal(alice.states.at(-1), 'deleted');
  assert.equal(alice.view.text, 'abcd');
  alice.type('e');
  assert.equal(net.queue.length, 0, 'nothing more is sent');
});

for (const lose of ['before', 'after']) {
  test(`a request lost ${lose} the server: retried with backoff, no keystroke lost or doubled`, async () => {
    const server = new Server('abc');
    const net = new Net();
    const alice = new Client(server, net, { caret: 3 });
    const bob = new Client(server, net, { caret: 0 });
    alice.offline = true;
    alice.lose = lose;
    alice.type('d');
    await net.deliver(net.queue.findIndex((i) => i.kind === 'arrive'));
    if (lose === 'after') await net.deliver(net.queue.findIndex((i) => i.kind === 'answer'));
    assert.equal(alice.states.at(-1), 'offline');
    alice.type('e');
    bob.type('>');
    await net.drain(200).catch(() => {}); // alice keeps failing
    assert.equal(alice.states.at(-1), 'offline');
    alice.offline = false;
    await net.drain();
    assert.equal(server.text, '>abcde');
    assert.equal(alice.view.text, server.text);
    assert.equal(alice.caret, 6);
    assert.equal(alice.states.at(-1), 'saved');
  });
}

test('while an input method composes, the textarea is left alone until it ends', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  alice.composing = true;
  alice.type('に');
  server.write(spliceOp(server.text.length, 0, 0, '>'));
  await net.drain();
  assert.equal(alice.view.text, 'abcに', 'not touched while composing');
  alice.type('ほ');
  alice.composing = false;
  alice.engine.resume();
  await net.drain();
  assert.equal(server.text, '>abcにほ');
  assert.equal(alice.view.text, server.text);
  assert.equal(alice.caret, 6);
});

test('text the textarea took without an input event is counted before a remote change lands', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  Object.assign(alice.view, { text: 'abcd', start: 4, end: 4 }); // no input event
  server.write(spliceOp(3, 0, 0, '>'));
  await net.drain();
  assert.equal(server.text, '>abcd');
  assert.equal(alice.view.text, '>abcd');
  assert.equal(alice.caret, 5);
});

test('many rapid keystrokes while the network is slow: all kept, few requests', async () => {
  const server = new Server('');
  const net = new Net();
  const alice = new Client(server, net);
  const typed = 'The quick brown 🦊 jumps over the lazy 🐶. '.repeat(25);
  let n = 0;
  for (const cp of typed) {
    alice.type(cp);
    if (++n % 50 === 0) await net.deliver(0);
  }
  await net.drain();
  assert.equal(server.text, typed);
  assert.ok(server.patches.length < 60, `${server.patches.length} requests`);
});

test('a detached editor still sends what was typed, then goes idle', async () => {
  const server = new Server('abc');
  const net = new Net();
  const alice = new Client(server, net, { caret: 3 });
  let idle = false;
  alice.engine.io.idle = () => (idle = true);
  alice.type('d');
  alice.type('e');
  alice.engine.detach();
  await net.drain();
  assert.equal(server.text, 'abcde');
  assert.ok(idle);
});

/**
 * Two writers in one paragraph, every step (a keystroke, a backspace of one's own
 * character, a request reaching the server, an answer or an event reaching a client, a
 * retry timer, a cut or a heal) chosen by a seeded random schedule.
 */
async function twoWriters(seed, { sameSpot, cuts }) {
  const rand = rng(seed);
  const server = new Server('Start of the paragraph, then the rest.\nNext line.', { seed });
  const net = new Net();
  const alice = new Client(server, net, { caret: 5 });
  const bob = new Client(server, net, { caret: sameSpot ? 5 : 22 });
  const writers = [
    { client: alice, keys: [...'abc de👩‍👩‍👧fg😀h'], typed: '' },
    { client: bob, keys: [...'XYZ WV🇫🇷UT🇩🇪S'], typed: '' },
  ];
  for (const w of writers) w.keys = [...w.keys, ...w.keys, ...w.keys];
  for (let step = 0; step < 3000; step++) {
    const r = rand();
    const w = writers[Math.floor(rand() * 2)];
    if (r < 0.4 && w.keys.length) {
      if (w.typed && rand() < 0.1) {
        const last = [...w.typed].at(-1);
        w.typed = w.typed.slice(0, -last.length);
        w.client.backspace();
      } else {
        const key = w.keys.shift();
        w.typed += key;
        w.client.type(key);
      }
    } else if (r < 0.85 && net.queue.length) {
      await net.deliver(Math.floor(rand() * net.queue.length));
    } else if (r < 0.9 && net.timers.length) {
      await net.fireTimers();
    } else if (cuts && r < 0.93) {
      w.client.offline = !w.client.offline;
      w.client.lose = rand() < 0.5 ? 'before' : 'after';
    }
    if (!writers.some((x) => x.keys.length) && !net.queue.length) break;
  }
  for (const w of writers) {
    w.client.offline = false;
    w.client.engine.remote();
  }
  await net.drain();
  for (const w of writers) w.client.engine.remote();
  await net.drain();
  const final = server.text;
  const where = `seed ${seed}: ${JSON.stringify(final)}`;
  for (const w of writers) {
    assert.equal(w.client.view.text, final, where);
    assert.ok(final.includes(w.typed), `${JSON.stringify(w.typed)} kept whole, ${where}`);
    assert.ok(final.slice(0, w.client.caret).endsWith(w.typed), `caret after ${JSON.stringify(w.typed)}, ${where}`);
    assert.equal(w.client.states.at(-1), 'saved', where);
  }
  // Nothing else changed: remove both writers' words and the paragraph is as it was.
  const rest = final.replace(writers[0].typed, '').replace(writers[1].typed, '');
  assert.equal(rest, 'Start of the paragraph, then the rest.\nNext line.', where);
}

test('two writers in one paragraph, random interleavings', async () => {
  for (let seed = 1; seed <= 60; seed++) await twoWriters(seed, { sameSpot: false, cuts: false });
});

test('two writers starting at the same spot, random interleavings', async () => {
  for (let seed = 100; seed <= 160; seed++) await twoWriters(seed, { sameSpot: true, cuts: false });
});

test('two writers with cuts and heals, random interleavings', async () => {
  for (let seed = 200; seed <= 260; seed++) await twoWriters(seed, { sameSpot: seed % 3 === 0, cuts: true });
});
