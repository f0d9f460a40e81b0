//! What Telegram renders: the model's Markdown (CommonMark read by pulldown-cmark) as
//! Telegram's HTML parse mode (`<b>`, `<i>`, `<s>`, `<code>`, `<pre>`, `<a href>`,
//! `<blockquote>`), and a long answer cut into messages of at most 4,096 characters.
//!
//! Everything the model wrote is text here: raw HTML in the Markdown is escaped, never
//! passed through; a link keeps its `href` only for `http`, `https` and `mailto`; tags
//! come from the parser's balanced events, so the output is always well formed. An
//! answer is split on its Markdown (top-level blocks, then lines, then words), each part
//! converted on its own and measured after conversion, so no cut falls inside a tag.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Telegram's limit on one message's text.
pub const MESSAGE_LIMIT: usize = 4096;

/// One message's worth of an answer: its HTML, and its Markdown as the plain text sent
/// if Telegram refuses the HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Telegram HTML.
    pub html: String,
    /// The part's Markdown source, cut to the limit.
    pub plain: String,
}

/// Length as Telegram counts it (UTF-16 code units); the HTML's length is an upper bound
/// of the text shown.
pub fn tg_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `s` cut to at most `limit` UTF-16 units, on a character boundary.
pub fn cut(s: &str, limit: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return &s[..i];
        }
    }
    s
}

/// Escapes text for Telegram's HTML (`&`, `<`, `>`; quotes too, for attributes).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` escaped, cut so the escaped text is at most `limit` UTF-16 units (never
/// inside an entity); whether all of it fit.
pub fn escape_within(text: &str, limit: usize) -> (String, bool) {
    let mut out = String::new();
    let mut units = 0;
    for (i, c) in text.char_indices() {
        let piece = escape(&text[i..i + c.len_utf8()]);
        units += tg_len(&piece);
        if units > limit {
            return (out, false);
        }
        out.push_str(&piece);
    }
    (out, true)
}

/// Whether a link may keep its target: `http`, `https` or `mailto`, with no whitespace
/// or control character anywhere (so no `java\tscript:` trick).
pub fn safe_link(url: &str) -> bool {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    !rest.is_empty()
        && matches!(
            scheme.to_ascii_lowercase().as_str(),
            "http" | "https" | "mailto"
        )
}

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// Writes HTML, putting the line breaks between blocks lazily (so none trail).
struct Writer {
    out: String,
    /// Newlines owed before the next content.
    pending: usize,
    /// Closing tags for open elements, innermost last (`""` for an element with none).
    closers: Vec<&'static str>,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Inside a code block: its text so far.
    code: Option<String>,
    quote_depth: usize,
}

impl Writer {
    fn flush(&mut self) {
        if !self.out.is_empty() {
            for _ in 0..self.pending {
                self.out.push('\n');
            }
        }
        self.pending = 0;
    }

    fn block_break(&mut self, n: usize) {
        self.pending = self.pending.max(n);
    }

    fn text(&mut self, s: &str) {
        if let Some(code) = self.code.as_mut() {
            code.push_str(s);
            return;
        }
        self.flush();
        self.out.push_str(&escape(s));
    }

    fn open(&mut self, open: &str, close: &'static str) {
        self.flush();
        self.out.push_str(open);
        self.closers.push(close);
    }

    fn close(&mut self) {
        if let Some(c) = self.closers.pop() {
            self.out.push_str(c);
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock | Tag::MetadataBlock(_) => {
                self.flush();
                self.closers.push("");
            }
            Tag::Heading { .. } => {
                self.block_break(2);
                self.open("<b>", "</b>");
            }
            Tag::BlockQuote(_) => {
                self.block_break(2);
                // Telegram does not nest quotes: an inner one is part of the outer.
                if self.quote_depth == 0 {
                    self.open("<blockquote>", "</blockquote>");
                } else {
                    self.closers.push("");
                }
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block_break(2);
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .filter(|l| {
                            l.chars()
                                .all(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(c))
                        })
                        .map(str::to_string),
                    CodeBlockKind::Indented => None,
                };
                match lang {
                    Some(l) => self.open(
                        &format!("<pre><code class=\"language-{}\">", escape(&l)),
                        "</code></pre>",
                    ),
                    None => self.open("<pre>", "</pre>"),
                }
                self.code = Some(String::new());
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.block_break(2);
                } else {
                    self.block_break(1);
                }
                self.lists.push(first);
                self.closers.push("");
            }
            Tag::Item => {
                self.block_break(1);
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_string(),
                };
                self.out.push_str(&"  ".repeat(depth));
                self.out.push_str(&marker);
                self.closers.push("");
            }
            Tag::Emphasis => self.open("<i>", "</i>"),
            Tag::Strong => self.open("<b>", "</b>"),
            Tag::Strikethrough => self.open("<s>", "</s>"),
            Tag::Link { dest_url, .. } if safe_link(&dest_url) => {
                self.open(&format!("<a href=\"{}\">", escape(&dest_url)), "</a>")
            }
            // A link to anything else, an image, a table part, a footnote: its text only.
            _ => {
                self.flush();
                self.closers.push("");
            }
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                self.out.push_str(&escape(code.trim_end_matches('\n')));
                self.close();
                self.block_break(2);
            }
            TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::HtmlBlock => {
                self.close();
                self.block_break(2);
            }
            TagEnd::BlockQuote(_) => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.close();
                self.block_break(2);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.close();
                self.block_break(if self.lists.is_empty() { 2 } else { 1 });
            }
            TagEnd::Item => {
                self.close();
                self.block_break(1);
            }
            _ => self.close(),
        }
    }
}

/// `markdown` as Telegram HTML (one message's worth or not: see [`parts`]).
pub fn to_html(markdown: &str) -> String {
    let mut w = Writer {
        out: String::new(),
        pending: 0,
        closers: Vec::new(),
        lists: Vec::new(),
        code: None,
        quote_depth: 0,
    };
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => w.start(tag),
            Event::End(tag) => w.end(tag),
            Event::Text(t) => w.text(&t),
            Event::Code(t) => {
                w.flush();
                w.out.push_str("<code>");
                w.out.push_str(&escape(&t));
                w.out.push_str("</code>");
            }
            // The model's HTML is text to show, never markup to obey.
            Event::Html(t) | Event::InlineHtml(t) => w.text(&t),
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                w.text(&t)
            }
            Event::SoftBreak | Event::HardBreak => w.text("\n"),
            Event::Rule => {
                w.block_break(2);
                w.text("———");
                w.block_break(2);
            }
            Event::TaskListMarker(done) => w.text(if done { "☑ " } else { "☐ " }),
        }
    }
    w.out
}

fn part(markdown: &str, limit: usize) -> Part {
    let source = markdown.trim();
    Part {
        html: to_html(source),
        plain: cut(source, limit).to_string(),
    }
}

fn fits(markdown: &str, limit: usize) -> bool {
    tg_len(&to_html(markdown.trim())) <= limit
}

/// The source ranges of `markdown`'s top-level blocks, in order.
fn blocks(markdown: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    start = range.start;
                }
                depth += 1;
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    out.push(&markdown[start..range.end]);
                }
            }
            _ if depth == 0 => out.push(&markdown[range]),
            _ => {}
        }
    }
    out
}

/// Packs `units` (pieces of Markdown, joined by `sep`) into parts that fit `limit`,
/// handing a unit too big on its own to `finer`.
fn pack(
    units: Vec<&str>,
    sep: &str,
    limit: usize,
    out: &mut Vec<Part>,
    finer: &dyn Fn(&str, usize, &mut Vec<Part>),
) {
    let mut current = String::new();
    for unit in units {
        if unit.trim().is_empty() {
            continue;
        }
        let candidate = if current.is_empty() {
            unit.to_string()
        } else {
            format!("{current}{sep}{unit}")
        };
        if fits(&candidate, limit) {
            current = candidate;
            continue;
        }
        if !current.trim().is_empty() {
            out.push(part(&current, limit));
        }
        current.clear();
        if fits(unit, limit) {
            current = unit.to_string();
        } else {
            finer(unit, limit, out);
        }
    }
    if !current.trim().is_empty() {
        out.push(part(&current, limit));
    }
}

/// A block too long for one message: a code block by its lines (each part a code block
/// of its own), anything else by lines, then words.
fn split_block(block: &str, limit: usize, out: &mut Vec<Part>) {
    let mut parser = Parser::new_ext(block, options());
    if let Some(Event::Start(Tag::CodeBlock(kind))) = parser.next() {
        let lang = match kind {
            CodeBlockKind::Fenced(info) => info.split_whitespace().next().unwrap_or("").to_string(),
            CodeBlockKind::Indented => String::new(),
        };
        let mut code = String::new();
        for event in parser {
            if let Event::Text(t) = event {
                code.push_str(&t);
            }
        }
        // Re-fenced with a fence longer than any backtick run inside.
        let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        let wrap = |lines: &str| format!("{fence}{lang}\n{lines}\n{fence}");
        let mut current = String::new();
        for line in code.trim_end_matches('\n').split('\n') {
            let candidate = if current.is_empty() {
                line.to_string()
            } else {
                format!("{current}\n{line}")
            };
            if fits(&wrap(&candidate), limit) {
                current = candidate;
                continue;
            }
            if !current.is_empty() {
                out.push(part(&wrap(&current), limit));
            }
            current.clear();
            if fits(&wrap(line), limit) {
                current = line.to_string();
            } else {
                // One line longer than a message: cut it into pieces.
                let mut rest = line;
                while !rest.is_empty() {
                    let piece = fitting_prefix(rest, limit, &|p| wrap(p));
                    out.push(part(&wrap(piece), limit));
                    rest = &rest[piece.len()..];
                }
            }
        }
        if !current.is_empty() {
            out.push(part(&wrap(&current), limit));
        }
        return;
    }
    pack(
        block.split_inclusive('\n').collect(),
        "",
        limit,
        out,
        &|line, limit, out| {
            pack(
                line.split_inclusive(' ').collect(),
                "",
                limit,
                out,
                &split_word,
            )
        },
    );
}

/// The longest prefix of `s` (at least one character) whose `render` fits `limit`.
fn fitting_prefix<'a>(s: &'a str, limit: usize, render: &dyn Fn(&str) -> String) -> &'a str {
    let bounds: Vec<usize> = s.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    // Binary search over character boundaries: rendering only grows with the prefix.
    let (mut lo, mut hi) = (0usize, bounds.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if tg_len(&to_html(&render(&s[..bounds[mid - 1]]))) <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    &s[..bounds[lo.max(1) - 1]]
}

/// A word longer than a message: cut into pieces that fit.
fn split_word(word: &str, limit: usize, out: &mut Vec<Part>) {
    let mut rest = word;
    while !rest.trim().is_empty() {
        let piece = fitting_prefix(rest, limit, &|p| p.to_string());
        out.push(part(piece, limit));
        rest = &rest[piece.len()..];
    }
}

/// `markdown` as messages of at most `limit` characters each (after conversion): whole
/// top-level blocks packed together, a block too long for one message cut on its lines
/// (a code block stays code in every part), a line on its words, a word anywhere.
/// Empty when there is nothing to show.
pub fn parts(markdown: &str, limit: usize) -> Vec<Part> {
    let markdown = markdown.trim();
    if markdown.is_empty() {
        return Vec::new();
    }
    if fits(markdown, limit) {
        return vec![part(markdown, limit)];
    }
    let mut out = Vec::new();
    pack(blocks(markdown), "\n\n", limit, &mut out, &split_block);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html() {
        assert_eq!(
            to_html("**bold** and *it* and ~~gone~~ and `a<b`"),
            "<b>bold</b> and <i>it</i> and <s>gone</s> and <code>a&lt;b</code>"
        );
        assert_eq!(
            to_html("# Title\n\nText & more\n\n> quoted"),
            "<b>Title</b>\n\nText &amp; more\n\n<blockquote>quoted</blockquote>"
        );
        assert_eq!(
            to_html("```rust\nif a < b && c > d {}\n```"),
            "<pre><code class=\"language-rust\">if a &lt; b &amp;&amp; c &gt; d {}</code></pre>"
        );
        assert_eq!(
            to_html("- one\n- two\n  1. sub\n\nafter"),
            "• one\n• two\n  1. sub\n\nafter"
        );
        assert_eq!(
            to_html("[site](https://example.org/a?b=1&c=\"2\") [mail](mailto:x@example.org)"),
            "<a href=\"https://example.org/a?b=1&amp;c=&quot;2&quot;\">site</a> <a href=\"mailto:x@example.org\">mail</a>"
        );
        assert_eq!(to_html("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
    }

    #[test]
    fn hostile_markdown_stays_text() {
        let html = to_html("<script>alert(1)</script>\n\nhi <b onclick=x>there</b>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b onclick"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        for link in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](data:text/html,hi)",
            "[x](vbscript:msgbox)",
            "[x](/relative/path)",
            "<javascript:alert(1)>",
        ] {
            let html = to_html(link);
            assert!(!html.contains("<a"), "{link} -> {html}");
        }
        assert!(!safe_link("java\tscript:alert(1)"));
        assert!(!safe_link("https://ex ample.org"));
        // Unbalanced markup is literal text; the output's tags still balance.
        for input in [
            "**bold",
            "*a **b* c**",
            "`code",
            "```\nunclosed fence <x>",
            "> > > deep",
        ] {
            let html = to_html(input);
            assert!(balanced(&html), "{input:?} -> {html}");
        }
        assert_eq!(to_html("**bold"), "**bold");
        assert_eq!(
            to_html("```\nunclosed fence <x>"),
            "<pre>unclosed fence &lt;x&gt;</pre>"
        );
    }

    /// Whether `html`'s tags open and close in order (what Telegram checks).
    fn balanced(html: &str) -> bool {
        let mut stack = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            let Some(j) = rest[i..].find('>') else {
                return false;
            };
            let tag = &rest[i + 1..i + j];
            rest = &rest[i + j + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                if stack.pop() != Some(name.to_string()) {
                    return false;
                }
            } else {
                stack.push(tag.split_whitespace().next().unwrap_or("").to_string());
            }
        }
        stack.is_empty()
    }

    #[test]
    fn a_short_answer_is_one_part() {
        let p = parts("Hello **you**", MESSAGE_LIMIT);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].html, "Hello <b>you</b>");
        assert_eq!(p[0].plain, "Hello **you**");
        assert!(parts("  \n ", MESSAGE_LIMIT).is_empty());
    }

    #[test]
    fn long_answers_split_on_blocks_and_every_part_fits() {
        let para = |n: usize| format!("Paragraph {n} with **bold** text. {}", "word ".repeat(150));
        let md: Vec<String> = (0..12).map(para).collect();
        let md = md.join("\n\n");
        let p = parts(&md, MESSAGE_LIMIT);
        assert!(p.len() > 1);
        for part in &p {
            assert!(tg_len(&part.html) <= MESSAGE_LIMIT);
            assert!(balanced(&part.html), "{}", part.html);
            // Whole paragraphs: each part starts at a paragraph's start.
            assert!(part.html.starts_with("Paragraph "), "{}", &part.html[..40]);
        }
        let joined: String = p
            .iter()
            .map(|p| p.html.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        assert_eq!(joined, to_html(&md));
    }

    #[test]
    fn a_huge_code_block_stays_code_in_every_part() {
        let code: Vec<String> = (0..600)
            .map(|i| format!("let x{i} = a < b && c;"))
            .collect();
        let md = format!("Here:\n\n```rust\n{}\n```\n\nDone.", code.join("\n"));
        let p = parts(&md, MESSAGE_LIMIT);
        assert!(p.len() > 3, "{}", p.len());
        for part in &p {
            assert!(tg_len(&part.html) <= MESSAGE_LIMIT);
            assert!(balanced(&part.html), "{}", part.html);
        }
        let code_parts = p
            .iter()
            .filter(|p| p.html.starts_with("<pre><code"))
            .count();
        assert!(code_parts >= 2);
        // No line was lost or cut.
        let all: String = p.iter().map(|p| p.html.clone()).collect();
        for i in [0, 299, 599] {
            assert!(
                all.contains(&format!("let x{i} = a &lt; b &amp;&amp; c;")),
                "{i}"
            );
        }
    }

    #[test]
    fn escaping_is_counted_and_a_giant_word_is_cut() {
        // 3,000 `<` become 12,000 characters of `&lt;`: the split measures the HTML.
        let md = "<".repeat(3000);
        let p = parts(&md, MESSAGE_LIMIT);
        assert!(p.len() >= 3);
        for part in &p {
            assert!(tg_len(&part.html) <= MESSAGE_LIMIT);
            // Cut between characters of the source, never inside an entity.
            assert!(part.html.ends_with("&lt;"), "{}", part.html);
        }
        let word = "ü".repeat(10_000);
        let p = parts(&word, MESSAGE_LIMIT);
        assert_eq!(
            p.iter().map(|p| p.html.chars().count()).sum::<usize>(),
            10_000
        );
        assert!(p.iter().all(|p| tg_len(&p.html) <= MESSAGE_LIMIT));
    }

    #[test]
    fn lines_split_where_blocks_are_too_long() {
        let lines: Vec<String> = (0..400)
            .map(|i| format!("- item {i} *with* emphasis"))
            .collect();
        let md = lines.join("\n");
        let p = parts(&md, 1000);
        assert!(p.len() > 5);
        for part in &p {
            assert!(tg_len(&part.html) <= 1000);
            assert!(part.html.starts_with("• item "), "{}", part.html);
            assert!(balanced(&part.html));
        }
    }

    #[test]
    fn cut_respects_utf16_and_char_boundaries() {
        assert_eq!(cut("a😀b", 2), "a");
        assert_eq!(cut("a😀b", 3), "a😀");
        assert_eq!(cut("abc", 10), "abc");
    }
}
