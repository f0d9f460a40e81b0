// scope.mjs: a laptop paired for one project ("work") is kept inside it by its UI: a
// new note or task made with no project chosen lands in "work", no editor offers "no
// project", "every project", the top level or a project outside its scope (one it held
// before being scoped), and the project it was paired for cannot be renamed or moved
// from the laptop (the hub would refuse, and the two copies would differ).

import { config, launch, signIn, shot, assert, until, run } from './lib.mjs';

const t = (name) => `[data-test="${name}"]`;

async function go(page, hash) {
  await page.goto(new URL(`#/${hash}`, page.url()).href);
  await page.waitForSelector(`.page-${hash.split('/')[0]}[data-ready]`, { timeout: 15000 });
}

const optionTexts = (page, selector) => page.locator(`${selector} option`).allTextContents();

run(async () => {
  const browser = await launch();
  const node = await signIn(browser, config.node.login, { name: 'node' });
  await node.locator('.tree-label', { hasText: /^All projects$/ }).click();

  await go(node, 'notes');
  await node.click(t('note-new'));
  await node.waitForSelector(t('note-body'));
  const noteProject = await node.locator(t('note-project')).inputValue();
  assert(noteProject === config.work, `a new note lands in the paired project (${noteProject})`);
  const choices = await optionTexts(node, t('note-project'));
  assert(!choices.includes('No project'), `no "No project" on a scoped laptop: ${choices}`);

  await go(node, 'tasks');
  await node.fill(t('task-quick-add'), 'Inside the scope');
  await node.press(t('task-quick-add'), 'Enter');
  await node.locator(t('task-item'), { hasText: 'Inside the scope' }).locator(t('task-open')).click();
  await node.waitForSelector(t('task-detail'));
  const taskChoices = await optionTexts(node, `${t('task-detail')} select[data-test="task-project"]`);
  assert(taskChoices.length > 0 && !taskChoices.includes('No project'), `task projects: ${taskChoices}`);

  await go(node, `projects/${config.work}`);
  await node.waitForSelector(t('project-scope-root'));
  assert((await node.locator(t('project-rename')).count()) === 0, 'the paired project is not renamed here');
  const parents = await optionTexts(node, t('project-new-parent'));
  assert(!parents.includes('Top level'), `no top level on a scoped laptop: ${parents}`);
  // `general`, held from before the laptop was scoped, is out of its reach: not offered.
  assert(!parents.some((p) => p.trim() === 'general'), `general is not a place to create in: ${parents}`);
  const tree = await node.locator('.sidebar .tree-label').allTextContents();
  assert(!tree.includes('general') && tree.includes('work'), `the side bar shows the scope only: ${tree}`);
  await shot(node, 'scope-projects');
  assert(node.errors.length === 0, node.errors.join(' | '));
  await browser.close();
});
