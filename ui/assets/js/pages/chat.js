// pages/chat.js: the Chat page: a project's conversations on the left, the open one on
// the right with the composer under it. `#/chat` opens a new conversation;
// `#/chat/<conversation>?project=<id>` opens (and links) one.
//
// Owns: which project the page chats in (the route's `project`, else the chosen one,
// else the server's default: on the hub its `general`, on a node what its hub decides,
// learnt from the first answer), the composer (Enter sends, Shift+Enter breaks the line,
// Stop while a turn runs), waiting approvals (`GET /approvals?waiting=true`, so a reload
// can still answer them), and what the page says when the hub is out of reach (a node
// relays chat to its hub: 503 `hub_unreachable`). The pieces live in `../chat/`.
// `data-test`: `chat-title`, `chats-toggle`, `archive-current`, `restore-current`,
// `chat-offline`, `chat-error`, `composer`, `composer-input`, `send`, `stop`,
// `chat-empty`. Must never render the agent's or a tool's words as markup (blocks.js
// and markdown.js draw them).

import { h, replace, debounce } from '../dom.js';
import * as api from '../api.js';
import { projectPath } from '../projects.js';
import * as live from '../chat/live.js';
import { createThread } from '../chat/thread.js';
import { createList, conversationHash } from '../chat/list.js';

const HOME_KEY = 'hearth.chat.home';

/**
 * The project chats go to when none is chosen: the one the server chose before (learnt
 * from an answer), else a top-level `general`, else the only top-level project (a
 * device scoped to one project sees its root so). Null: let the server choose.
 */
function homeProject(projects) {
  const liveProjects = projects.filter((p) => !p.archived);
  const remembered = localStorage.getItem(HOME_KEY);
  if (remembered && liveProjects.some((p) => p.id === remembered)) return remembered;
  const ids = new Set(projects.map((p) => p.id));
  const roots = liveProjects.filter((p) => !p.parent || !ids.has(p.parent));
  const general = roots.filter((p) => p.name === 'general');
  if (general.length === 1) return general[0].id;
  if (roots.length === 1) return roots[0].id;
  return null;
}

/** A fresh conversation name: short, unguessable enough not to collide. */
function newConversationName() {
  const bytes = crypto.getRandomValues(new Uint8Array(5));
  return `web-${[...bytes].map((b) => b.toString(36).padStart(2, '0')).join('')}`;
}

const wide = () => matchMedia('(min-width: 721px)').matches;

export default {
  title: 'Chat',
  async mount(el, ctx) {
    const params = ctx.route.params;
    const project = params.get('project') || ctx.project || homeProject(ctx.projects);
    // No project known (none chosen, no default found): the server picks on the first message.
    const chosenByServer = !project;
    let conversation = ctx.route.id || null;
    let isNew = !conversation;
    if (isNew) conversation = newConversationName();
    let offline = ctx.server.kind === 'node' && !ctx.hubOnline;
    const cleanups = [];

    // ------------------------------------------------------------ layout

    const title = h('h1', { class: 'chat-title', 'data-test': 'chat-title' });
    const where = h('span', { class: 'chat-where muted' });
    const headActions = h('div', { class: 'chat-head-actions' });
    const offlineNote = h('div', { class: 'chat-offline', role: 'status', 'data-test': 'chat-offline', hidden: true });
    const errorNote = h('div', { class: 'chat-error', role: 'alert', 'data-test': 'chat-error', hidden: true });
    // Tells a screen reader when an answer starts and ends (the streaming text is not read out).
    const said = h('div', { class: 'sr-only', role: 'status', 'aria-live': 'polite' });
    const input = h('textarea', {
      class: 'composer-input',
      'data-test': 'composer-input',
      rows: '1',
      placeholder: 'Message Hearth…',
      'aria-label': 'Message',
      maxlength: '100000',
    });
    const sendButton = h('button', { type: 'submit', class: 'primary send', 'data-test': 'send', 'aria-label': 'Send' }, h('span', { class: 'ico ico-send', 'aria-hidden': 'true' }));
    const stopButton = h(
      'button',
      { type: 'button', class: 'stop', 'data-test': 'stop', 'aria-label': 'Stop the answer', hidden: true, onclick: () => stop() },
      h('span', { class: 'ico ico-stop', 'aria-hidden': 'true' }),
    );
    const hint = h('div', { class: 'composer-hint muted' }, 'Enter sends · Shift+Enter adds a line');
    const composer = h(
      'form',
      { class: 'composer', 'data-test': 'composer', onsubmit: (e) => (e.preventDefault(), send()) },
      h('div', { class: 'composer-box' }, input, sendButton, stopButton),
      hint,
    );
    const empty = h(
      'div',
      { class: 'chat-empty', 'data-test': 'chat-empty' },
      h('div', { class: 'chat-empty-mark', 'aria-hidden': 'true' }),
      h('h2', null, 'What can I do for you?'),
      h('p', { class: 'muted' }, 'Ask about your notes and tasks, or have Hearth keep track of something new.'),
    );
    const threadSlot = h('div', { class: 'thread-slot' });
    const mainCol = h(
      'div',
      { class: 'chat-main' },
      h(
        'header',
        { class: 'chat-head' },
        h(
          'button',
          {
            type: 'button',
            class: 'icon chats-toggle',
            'data-test': 'chats-toggle',
            'aria-label': 'Conversations',
            'aria-expanded': 'false',
            onclick: () => toggleList(),
          },
          h('span', { class: 'ico ico-chats', 'aria-hidden': 'true' }),
        ),
        h('div', { class: 'chat-head-text' }, title, where),
        headActions,
      ),
      offlineNote,
      threadSlot,
      errorNote,
      composer,
      said,
    );
    const layout = h('div', { class: 'chat-layout' });
    replace(el, layout);

    function toggleList(open = !layout.classList.contains('show-list')) {
      layout.classList.toggle('show-list', open);
      mainCol.querySelector('.chats-toggle').setAttribute('aria-expanded', String(open));
      if (open) list?.focusCurrent();
    }

    // ------------------------------------------------------------ errors and the hub

    function showError(message) {
      errorNote.hidden = !message;
      replace(errorNote, message ? [message, ' ', h('button', { type: 'button', class: 'link', onclick: () => showError(null) }, 'Dismiss')] : []);
    }

    function failed(e) {
      if (e?.code === 'hub_unreachable' || (e?.status === 0 && ctx.server.kind === 'node')) {
        setOffline(true);
        return;
      }
      if (e?.status === 401) return; // The shell shows the sign-in page.
      showError(e?.message ?? String(e));
    }

    function setOffline(value) {
      offline = value;
      offlineNote.hidden = !value;
      replace(
        offlineNote,
        value
          ? [
              h('strong', null, 'Chat needs the hub, which is out of reach. '),
              'Your notes and tasks keep working on this device; chat comes back as soon as the hub does. ',
              h('button', { type: 'button', class: 'link', onclick: () => reloadAll() }, 'Try again'),
            ]
          : [],
      );
      updateComposer();
      thread?.redraw();
    }

    // ------------------------------------------------------------ no project

    // ------------------------------------------------------------ list and thread

    const list = project
      ? createList({
          project,
          current: isNew ? null : conversation,
          onError: failed,
          onArchived: (name, archived) => {
            ctx.toast(archived ? 'Conversation archived.' : 'Conversation restored.', 'ok');
            if (name === conversation) drawHead();
          },
          onLoad: () => drawHead(),
        })
      : null;
    if (list) layout.append(list.el);
    layout.append(mainCol, h('div', { class: 'convs-scrim', onclick: () => toggleList(false) }));

    const thread = project
      ? createThread({ project, conversation, canAct: () => !offline, onError: failed, onChange: () => changed() })
      : null;

    function drawHead() {
      const row = list?.row(conversation);
      const turn = project ? live.turnOf(project, conversation) : null;
      title.textContent = isNew && !turn ? 'New chat' : (row?.title ?? turn?.message?.split('\n')[0] ?? conversation);
      where.textContent = project ? projectPath(ctx.projects, project) : '';
      if (list?.isArchived(conversation)) where.append(' · archived');
      document.title = `${title.textContent} · Hearth`;
      const archived = list?.isArchived(conversation);
      replace(
        headActions,
        isNew || !list
          ? null
          : archived
            ? h('button', { type: 'button', 'data-test': 'restore-current', onclick: () => list.setArchived(conversation, false).then(drawHead) }, 'Restore')
            : h(
                'button',
                {
                  type: 'button',
                  class: 'icon',
                  'data-test': 'archive-current',
                  'aria-label': 'Archive this conversation',
                  title: 'Archive this conversation',
                  onclick: async () => {
                    await list.setArchived(conversation, true);
                    if (list.isArchived(conversation) || !list.row(conversation)) ctx.navigate(`chat?project=${encodeURIComponent(project)}`);
                  },
                },
                h('span', { class: 'ico ico-archive', 'aria-hidden': 'true' }),
              ),
      );
    }

    function showThread(hasMessages) {
      const want = hasMessages && thread ? thread.el : empty;
      if (threadSlot.firstChild !== want) replace(threadSlot, want);
    }

    let wasRunning = false;
    function changed() {
      const running = !!thread?.running;
      if (running || live.turnOf(project, conversation)) showThread(true);
      if (running !== wasRunning) {
        wasRunning = running;
        said.textContent = running ? 'Hearth is answering.' : 'Hearth has answered.';
        if (!running) list?.reload();
      }
      updateComposer();
      drawHead();
      markList();
    }

    function updateComposer() {
      const running = !!thread?.running;
      stopButton.hidden = !running;
      if (!running) {
        stopButton.disabled = false;
        stopButton.setAttribute('aria-label', 'Stop the answer');
        stopButton.title = 'Stop';
      }
      sendButton.hidden = running;
      sendButton.disabled = offline || !input.value.trim();
      input.disabled = offline;
      input.placeholder = offline ? 'Chat is unavailable while the hub is out of reach' : running ? 'Hearth is answering…' : 'Message Hearth…';
      composer.classList.toggle('running', running);
    }

    // ------------------------------------------------------------ composer

    function autosize() {
      input.style.height = 'auto';
      input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
    }

    input.addEventListener('input', () => {
      autosize();
      updateComposer();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
        e.preventDefault();
        send();
      }
    });

    async function send() {
      const message = input.value;
      if (!message.trim() || offline || thread?.running) return;
      showError(null);
      input.value = '';
      autosize();
      if (isNew && project) {
        // From now on this page is that conversation: the address says so, for reloads and links.
        history.replaceState(null, '', `#/${conversationHash(project, conversation)}`);
        isNew = false;
        list?.setCurrent(conversation);
      }
      showThread(true);
      thread?.toBottom();
      try {
        const accepted = live.send({ project: chosenByServer ? null : project, conversation, message });
        updateComposer(); // Stop shows at once, not a frame later.
        const chosen = await accepted;
        if (chosenByServer && chosen) {
          localStorage.setItem(HOME_KEY, chosen);
          ctx.navigate(conversationHash(chosen, conversation), { replace: true });
        }
      } catch (e) {
        // Refused before it started: the words go back into the composer.
        if (!input.value) input.value = message;
        autosize();
        failed(e);
      }
      updateComposer();
    }

    async function stop() {
      // The hub stops the turn at its next step: say it was heard meanwhile.
      stopButton.disabled = true;
      stopButton.setAttribute('aria-label', 'Stopping…');
      stopButton.title = 'Stopping at the next step…';
      try {
        await live.stop(project, conversation);
      } catch (e) {
        stopButton.disabled = false;
        failed(e);
      }
    }

    // ------------------------------------------------------------ approvals and marks

    let waitingIn = new Set();
    let runningIn = new Set();

    function markList() {
      if (!list) return;
      const now = new Set(live.runningIn(project).map((t) => t.conversation));
      if ([...now].join('\u241f') === [...runningIn].join('\u241f')) return;
      runningIn = now;
      list.mark({ waiting: waitingIn, running: runningIn });
    }

    async function loadApprovals() {
      if (!project) return;
      try {
        const page = await api.get('/approvals', { waiting: true, limit: 100 });
        const mine = page.data.filter((a) => a.project === project);
        for (const a of mine) if (a.conversation === conversation) live.adoptApproval(a);
        waitingIn = new Set(mine.map((a) => a.conversation));
        list?.mark({ waiting: waitingIn, running: runningIn });
      } catch (e) {
        failed(e);
      }
    }
    const approvalsSoon = debounce(loadApprovals, 300);
    const listSoon = debounce(() => list?.reload(), 300);

    ctx.onEvent(['approval_requested', 'approval_resolved'], (ev) => {
      if (ev.project === project) approvalsSoon();
    });
    ctx.onEvent(['started', 'finished', 'error'], (ev) => {
      if (ev.project === project) listSoon();
    });
    cleanups.push(live.watchAll((t) => t.project === project && markList()));

    // ------------------------------------------------------------ lifetime

    async function reloadAll() {
      showError(null);
      if (offline && ctx.server.kind === 'node' && !ctx.hubOnline) return;
      setOffline(false);
      await Promise.all([list?.reload(), thread?.refresh().catch(failed), loadApprovals()]);
    }

    ctx.on('hub', (online) => {
      if (online) reloadAll();
      else {
        setOffline(true);
        live.abandon(project, conversation, 'The hub went out of reach mid-answer; what it stored shows here once it is back.');
      }
    });
    ctx.on('resync', () => reloadAll());
    ctx.on('project', (id) => {
      if (id !== project) ctx.navigate(id ? `chat?project=${encodeURIComponent(id)}` : 'chat');
    });
    addEventListener('resize', onResize);
    cleanups.push(() => removeEventListener('resize', onResize));
    function onResize() {
      if (wide()) toggleList(false);
    }

    drawHead();
    setOffline(offline);
    updateComposer();
    const firstData = [];
    if (isNew || !thread) {
      showThread(false);
    } else {
      showThread(true);
      firstData.push(
        thread
          .load()
          .then((exists) => {
            showThread(exists);
            drawHead();
          })
          .catch(failed),
      );
    }
    if (!offline) firstData.push(list?.reload(), loadApprovals());
    if (wide()) input.focus();

    const cleanup = () => {
      for (const off of cleanups) off();
      thread?.dispose();
    };
    // Resolving tells the shell the page shows its first data.
    await Promise.all(firstData);
    if (!el.isConnected) {
      // Left while loading: the shell had no cleanup to call yet.
      cleanup();
      return null;
    }
    return cleanup;
  },
};
