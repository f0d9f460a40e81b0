// pages/contacts.js: the Contacts page: everyone, sorted by name, with search and a tag
// filter, quick add by name, and at `#/contacts/<id>` the contact's editor (name,
// email, phone, company, job title, website, address, tags as chips, notes) and delete.
//
// Owns: the contact list's tag filter, drawn from the listed rows (each carries the
// contact's email, phone, company, job title and tags), so the list reads no contact
// whole. Must never build markup from strings.
//
// data-test: "contact-quick-add", "contact-search", "contact-tags" (the filter),
// "contact-tag-filter" (a tag button, data-tag; aria-pressed), "contact-list",
// "contact-item" (data-id), "contact-open", "contact-empty", "contact-detail",
// "contact-gone", "contact-name", "contact-email", "contact-phone", "contact-company",
// "contact-title", "contact-website", "contact-address", "contact-notes",
// "contact-tag" (a chip, data-tag), "contact-tag-remove", "contact-tag-input",
// "save-state", "delete", "delete-confirm", "back", "error".

import * as api from '../api.js';
import { h, replace, debounce } from '../dom.js';
import {
  arrowNav,
  chipEditor,
  deleteButton,
  errorBox,
  errorText,
  fetchAll,
  followRecord,
  field,
  liveReload,
  pageHead,
  props,
  snippet,
} from '../records/common.js';
import { recordEditor } from '../records/editor.js';
import { saveState, splitPage } from '../records/split.js';

const view = { query: '', tag: null };

const count = (n) => (n === 1 ? '1 person' : `${n} people`);

/** Up to two initials from the words that start with a letter ("Ada Lovelace" → "AL"). */
function initials(name) {
  const letters = String(name ?? '')
    .split(/\s+/)
    .map((w) => w.match(/\p{L}/u)?.[0])
    .filter(Boolean);
  if (!letters.length) return '?';
  return (letters[0] + (letters.length > 1 ? letters[letters.length - 1] : '')).toUpperCase();
}

// ---------------------------------------------------------------- list

function listPane(pane, ctx, openId) {
  const listBox = h('div');
  const tagBox = h('div', {
    class: 'tag-filter',
    role: 'group',
    'aria-label': 'Filter by tag',
    'data-test': 'contact-tags',
  });
  const quickErr = h('p', { class: 'rec-error', role: 'alert', hidden: true });
  const quick = h('input', {
    type: 'text',
    class: 'quick-add',
    placeholder: 'Add a contact: type a name and press Enter',
    'aria-label': 'New contact’s name',
    'data-test': 'contact-quick-add',
    enterkeyhint: 'done',
    autocomplete: 'off',
    onkeydown: async (e) => {
      if (e.key !== 'Enter' || e.isComposing) return;
      e.preventDefault();
      const name = quick.value.trim();
      if (!name) return;
      quick.disabled = true;
      try {
        const c = await api.post('/contacts', { name, tags: view.tag ? [view.tag] : [] });
        quick.value = '';
        ctx.navigate(`contacts/${c.id}?new=1`);
      } catch (err) {
        quickErr.hidden = false;
        quickErr.textContent = `Not added: ${errorText(err)}`;
        quick.disabled = false;
        quick.focus();
      }
    },
  });
  const search = h('input', {
    type: 'search',
    placeholder: 'Search names, emails, notes…',
    'aria-label': 'Search contacts',
    'data-test': 'contact-search',
    value: view.query,
    oninput: debounce(() => {
      view.query = search.value.trim();
      load();
    }, 200),
  });
  replace(
    pane,
    pageHead('Contacts', 'People, shared by every project'),
    quick,
    quickErr,
    h('div', { class: 'toolbar' }, search),
    tagBox,
    listBox,
  );

  let token = 0;
  async function load() {
    const mine = ++token;
    let rows;
    let hits = null;
    try {
      rows = await fetchAll('/contacts');
      if (view.query)
        hits = new Map(
          (await api.get('/search', { q: view.query, kind: 'contact', limit: 200 })).map((x) => [x.id, x]),
        );
    } catch (e) {
      if (mine === token) replace(listBox, errorBox(e));
      return;
    }
    if (mine !== token) return;
    const people = rows.map((r) => ({ ...r, name: r.title, tags: r.tags ?? [] }));
    drawTags(people);
    let shown = people;
    if (view.tag) shown = shown.filter((c) => c.tags.includes(view.tag));
    if (hits) shown = shown.filter((c) => hits.has(c.id));
    shown.sort((a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: 'base' }));
    const focused = document.activeElement?.closest?.('[data-test=contact-item]')?.dataset.id;
    if (!shown.length) {
      const text = !people.length
        ? 'No contacts yet. Type a name above and press Enter to add the first.'
        : view.query
          ? `Nobody matches “${view.query}”${view.tag ? ` with the tag ${view.tag}` : ''}.`
          : `Nobody has the tag ${view.tag}.`;
      replace(listBox, h('p', { class: 'empty', 'data-test': 'contact-empty' }, text));
      return;
    }
    replace(
      listBox,
      h(
        'p',
        { class: 'muted rec-count' },
        shown.length === people.length ? count(people.length) : `${shown.length} of ${count(people.length)}`,
      ),
      arrowNav(
        h(
          'ul',
          { class: 'list contact-list', 'data-test': 'contact-list' },
          shown.map((c) => row(c, hits?.get(c.id)?.snippet)),
        ),
        '.contact-name',
      ),
    );
    if (focused) listBox.querySelector(`[data-id="${CSS.escape(focused)}"] .contact-name`)?.focus();
  }

  function row(c, hit) {
    const meta = [c.email, c.phone, [c.job_title, c.company].filter(Boolean).join(', ')].filter(Boolean).join(' · ');
    return h(
      'li',
      { class: c.id === openId ? 'active' : null, 'data-test': 'contact-item', dataset: { id: c.id, navRow: '' } },
      h(
        'div',
        { class: 'contact-row' },
        h('span', { class: 'avatar', 'aria-hidden': 'true' }, initials(c.name)),
        h(
          'div',
          { class: 'contact-main' },
          h(
            'a',
            { class: 'contact-name', href: `#/contacts/${encodeURIComponent(c.id)}`, 'data-test': 'contact-open' },
            c.name,
          ),
          meta ? h('div', { class: 'contact-meta' }, meta) : null,
          hit ? h('div', { class: 'contact-meta' }, snippet(hit)) : null,
          c.tags.length
            ? h(
                'div',
                { class: 'contact-tags' },
                c.tags.map((t) => h('span', { class: 'tag' }, t)),
              )
            : null,
        ),
      ),
    );
  }

  function drawTags(people) {
    const all = [...new Set(people.flatMap((c) => c.tags))].sort((a, b) => a.localeCompare(b));
    if (view.tag && !all.includes(view.tag)) view.tag = null;
    tagBox.hidden = all.length === 0;
    replace(
      tagBox,
      h(
        'button',
        {
          'aria-pressed': String(!view.tag),
          'data-test': 'contact-tag-filter',
          dataset: { tag: '' },
          onclick: () => setTag(null),
        },
        'Everyone',
      ),
      all.map((t) =>
        h(
          'button',
          {
            'aria-pressed': String(view.tag === t),
            'data-test': 'contact-tag-filter',
            dataset: { tag: t },
            onclick: () => setTag(view.tag === t ? null : t),
          },
          t,
        ),
      ),
    );
  }

  function setTag(t) {
    view.tag = t;
    load().then(() => tagBox.querySelector(`[data-tag="${CSS.escape(t ?? '')}"]`)?.focus());
  }

  liveReload(ctx, ['contact'], load);
  return load();
}

// ---------------------------------------------------------------- detail

async function detailPane(pane, ctx, id) {
  let contact;
  try {
    contact = await api.get(`/contacts/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(pane, h('div', { class: 'card' }, errorBox(e), h('a', { href: '#/contacts' }, 'Back to the contacts')));
    return () => {};
  }
  const state = saveState();
  const avatar = h('span', { class: 'avatar', 'aria-hidden': 'true' });
  const links = h('p', { class: 'contact-links' });
  const editor = recordEditor({
    path: `/contacts/${encodeURIComponent(id)}`,
    record: contact,
    onState: state.show,
    onRecord: (c) => {
      drawLinks(c);
      if (document.activeElement?.closest('.chips') !== tags) tags.set(c.tags);
    },
  });

  /** A one-line field saved when it changes; empty clears it (`null`), except the name. */
  function line(name, type, label, { required = false, placeholder = '', cls = null } = {}) {
    const input = h('input', {
      type,
      class: cls,
      'aria-label': label,
      placeholder,
      autocomplete: 'off',
      'data-test': `contact-${name}`,
      onchange: async () => {
        const v = input.value.trim();
        try {
          await editor.set({ [name]: v ? v : required ? v : null });
        } catch {
          // The save state says why; the field keeps what was typed so it can be fixed.
        }
      },
      onkeydown: (e) => {
        if (e.key === 'Enter') input.blur();
      },
    });
    editor.scalar(name, input, (v) => (input.value = v ?? ''));
    return input;
  }

  const nameInput = line('name', 'text', 'Name', { required: true, cls: 'contact-name-input' });
  const email = line('email', 'email', 'Email', { placeholder: 'name@example.org' });
  const phone = line('phone', 'tel', 'Phone', { placeholder: 'with the country code, like +44 20 7946 0000' });
  const company = line('company', 'text', 'Company');
  const jobTitle = line('title', 'text', 'Job title');
  const website = line('website', 'url', 'Website', { placeholder: 'https://…' });
  const address = line('address', 'text', 'Address');
  const tags = chipEditor({
    tags: contact.tags,
    label: 'Add a tag (Enter)',
    testPrefix: 'contact-tag',
    onChange: (next) => editor.set({ tags: next }),
  });
  const notes = editor.text(
    'notes',
    h('textarea', {
      rows: 6,
      'aria-label': 'Notes',
      'data-test': 'contact-notes',
      placeholder: 'How you met, birthdays, what matters to them…',
    }),
  );

  function drawLinks(c) {
    avatar.textContent = initials(c.name);
    const web = c.website && !/^https?:/i.test(c.website) ? `https://${c.website}` : c.website;
    replace(
      links,
      c.email ? h('a', { href: `mailto:${c.email}` }, `✉ Write to ${c.email}`) : null,
      c.phone ? h('a', { href: `tel:${c.phone.replace(/[^\d+]/g, '')}` }, `☎ Call ${c.phone}`) : null,
      web ? h('a', { href: web, target: '_blank', rel: 'noopener noreferrer nofollow' }, `↗ ${c.website}`) : null,
    );
  }
  drawLinks(contact);

  const metadata = Object.entries(contact.metadata ?? {});
  replace(
    pane,
    h(
      'article',
      { class: 'card contact-detail', 'data-test': 'contact-detail', dataset: { id } },
      h('div', { class: 'contact-detail-head' }, avatar, nameInput),
      h('div', { class: 'rec-status-line' }, state),
      links,
      props([
        ['Email', email],
        ['Phone', phone],
        ['Company', company],
        ['Job title', jobTitle],
        ['Website', website],
        ['Address', address],
        ['Tags', tags],
        metadata.length
          ? [
              'Other',
              h(
                'dl',
                { class: 'contact-metadata' },
                metadata.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
              ),
            ]
          : null,
      ]),
      field('Notes', notes),
      h(
        'div',
        { class: 'rec-actions' },
        deleteButton({
          what: contact.name,
          onDelete: async () => {
            try {
              await api.del(`/contacts/${encodeURIComponent(id)}`);
              ctx.toast('Contact deleted.', 'ok');
              ctx.navigate('contacts');
            } catch (e) {
              ctx.toast(`Not deleted: ${errorText(e)}`, 'error');
            }
          },
        }),
      ),
    ),
  );
  if (ctx.route.params.get('new')) email.focus();

  followRecord(ctx, 'contact', 'contacts', editor, pane);
  return () => editor.close();
}

export default splitPage('Contacts', 'contacts', listPane, detailPane);
