// sanitize.mjs: markdown.js in the real browser against hostile Markdown. Whatever a
// peer, a tool or the model writes, the rendered tree holds only the elements and
// attributes the renderer makes itself, links only to http(s), mailto or this origin,
// no script runs, and the hostile characters stay visible as text.

import { config, launch, assert, log, run } from './lib.mjs';

const HOSTILE = [
  '<script>window.__pwned = 1</script>',
  '<img src=x onerror="window.__pwned = 1">',
  '[click](javascript:window.__pwned=1)',
  '[click](JaVaScRiPt:window.__pwned=1)',
  '[click]( javascript:window.__pwned=1)',
  '[data](data:text/html,<script>window.__pwned=1</script>)',
  '[vb](vbscript:msgbox(1))',
  '![x](javascript:window.__pwned=1)',
  '![x](https://tracker.example/pixel.png)',
  '<a href="javascript:window.__pwned=1">a</a>',
  '<svg onload="window.__pwned=1"></svg>',
  '<iframe src="javascript:window.__pwned=1"></iframe>',
  '**<b onmouseover=alert(1)>bold</b>**',
  '`<script>window.__pwned=1</script>`',
  '```html\n<script>window.__pwned=1</script>\n```',
  '> <img src=x onerror=window.__pwned=1>',
  '- [ ] <script>window.__pwned=1</script>',
  '| a | b |\n|---|---|\n| <img src=x onerror=window.__pwned=1> | [x](javascript:1) |',
  '<style>body{display:none}</style>',
  '[x](//evil.example/path)',
  '<https://ok.example/a?b=<c>>',
  'https://ok.example/"onmouseover="window.__pwned=1',
  '\\<script\\>window.__pwned=1\\</script\\>',
  '[a](https://ok.example/ "title" onclick=window.__pwned=1)',
  '<!-- <script>window.__pwned=1</script> -->',
  '&lt;script&gt;window.__pwned=1&lt;/script&gt;',
  '1. <math><mi xlink:href="javascript:window.__pwned=1">x</mi></math>',
  '# <img src=x onerror=window.__pwned=1>',
  '~~<script>window.__pwned=1</script>~~ __<svg/onload=window.__pwned=1>__',
];

const ALLOWED_TAGS = new Set(['P', 'BR', 'STRONG', 'EM', 'DEL', 'CODE', 'PRE', 'A', 'SPAN', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'HR', 'BLOCKQUOTE', 'UL', 'OL', 'LI', 'INPUT', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DIV']);
const ALLOWED_ATTRS = new Set(['href', 'target', 'rel', 'class', 'start', 'type', 'checked', 'disabled', 'aria-label']);

run(async () => {
  const browser = await launch();
  const page = await (await browser.newContext()).newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('dialog', (d) => {
    errors.push(`a dialog opened: ${d.message()}`);
    d.dismiss();
  });
  // Any page of this origin will do: the module is public, like every UI file.
  await page.goto(config.hub.url);
  const results = await page.evaluate(async (inputs) => {
    const { render } = await import('/assets/js/markdown.js');
    return inputs.map((src) => {
      const box = document.createElement('div');
      box.append(render(src));
      document.body.append(box);
      const elements = [...box.querySelectorAll('*')].map((el) => ({
        tag: el.tagName,
        attrs: [...el.attributes].map((a) => [a.name, a.value]),
      }));
      const text = box.textContent;
      box.remove();
      return { src, elements, text };
    });
  }, HOSTILE);
  // Give anything that might have been scheduled a chance to run.
  await page.waitForTimeout(300);
  for (const { src, elements, text } of results) {
    for (const { tag, attrs } of elements) {
      assert(ALLOWED_TAGS.has(tag), `${JSON.stringify(src)} made a <${tag}>`);
      for (const [name, value] of attrs) {
        assert(ALLOWED_ATTRS.has(name), `${JSON.stringify(src)} made ${tag}[${name}=${value}]`);
        if (name === 'href') {
          assert(/^(https?:|mailto:|#|\/(?!\/))/i.test(value), `${JSON.stringify(src)} linked to ${value}`);
        }
      }
    }
    if (src.includes('<script>') && !src.includes('](') && !src.startsWith('\\') && !src.startsWith('&lt;')) {
      assert(text.includes('<script>') || text.includes('script'), `${JSON.stringify(src)} lost its text: ${text}`);
    }
  }
  // And ordinary Markdown still renders as people expect.
  const shapes = await page.evaluate(async () => {
    const { render } = await import('/assets/js/markdown.js');
    const shape = (src) => {
      const box = document.createElement('div');
      box.append(render(src));
      return [...box.querySelectorAll('*')].map((el) => el.tagName.toLowerCase()).join(' ');
    };
    return [
      shape('# Title'),
      shape('**b** *i* ~~s~~ `c`'),
      shape('[l](https://example.org)'),
      shape('- a\n- [x] b'),
      shape('1. one\n2. two'),
      shape('> quote'),
      shape('```\ncode\n```'),
      shape('| a |\n|---|\n| 1 |'),
    ];
  });
  const expected = ['h1', 'p strong em del code', 'p a', 'ul li li input', 'ol li li', 'blockquote p', 'pre code', 'div table thead tr th tbody tr td'];
  shapes.forEach((got, i) => assert(got === expected[i], `markdown shape ${i}: ${got} (expected ${expected[i]})`));

  const pwned = await page.evaluate(() => window.__pwned);
  assert(pwned === undefined, 'no hostile script ran');
  assert(errors.length === 0, errors.join(' | '));
  log(`${HOSTILE.length} hostile inputs rendered as text`);
  await browser.close();
});
