//! A linear scan of HTML's tags, for two guards around the full HTML-to-text converter:
//! an estimate of how deep a page nests (the converter's parser slows down with the
//! square of the depth, so a hostile page of 200,000 unclosed tags would hold a core for
//! minutes) and a plain tag-stripping extractor used instead for such pages, or when the
//! converter runs past its time.
//!
//! It never builds a tree and never recurses: every function here runs in time and
//! memory linear in the input.

/// Elements that never have content.
const VOID: &[&str] = &[
    "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input",
    "keygen", "link", "meta", "param", "source", "track", "wbr",
];
/// Elements whose end tag may be left out, which the next of their kind closes: they
/// do not nest when unclosed.
const OPTIONAL_END: &[&str] = &[
    "body", "caption", "colgroup", "dd", "dt", "head", "html", "li", "optgroup", "option", "p",
    "rb", "rp", "rt", "rtc", "tbody", "td", "tfoot", "th", "thead", "tr",
];
/// Elements whose content is not markup; the extractor drops all but `title`'s.
const RAW_TEXT: &[&str] = &[
    "iframe", "noembed", "noframes", "noscript", "script", "style", "template", "textarea",
    "title", "xmp",
];
/// Elements that start a new line in the extracted text.
const BLOCK: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "title",
    "tr",
    "ul",
];

enum Token<'a> {
    Text(&'a [u8]),
    Open { name: String, self_closing: bool },
    Close { name: String },
}

/// Where `needle` (ASCII, lowercase) next occurs in `hay` from `from`, ignoring case.
fn find_ci(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|at| from + at)
}

/// The end (index after `>`) of a tag starting at `start`, skipping quoted values.
fn tag_end(html: &[u8], start: usize) -> usize {
    let mut quote = None;
    for (i, &b) in html.iter().enumerate().skip(start) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'>') => return i + 1,
            _ => {}
        }
    }
    html.len()
}

/// Calls `on` for each text run and tag, skipping comments, doctypes and the content of
/// raw-text elements (handed over as one text run).
fn scan(html: &[u8], mut on: impl FnMut(Token<'_>)) {
    let mut i = 0;
    while i < html.len() {
        let Some(lt) = html[i..].iter().position(|&b| b == b'<').map(|p| i + p) else {
            on(Token::Text(&html[i..]));
            return;
        };
        if lt > i {
            on(Token::Text(&html[i..lt]));
        }
        let rest = &html[lt + 1..];
        if rest.starts_with(b"!--") {
            i = find_ci(html, lt + 4, b"-->").map_or(html.len(), |at| at + 3);
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name_start = lt + 1 + usize::from(closing);
        let name_len = html[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b':')
            .count();
        let starts_with_letter = html.get(name_start).is_some_and(u8::is_ascii_alphabetic);
        if matches!(rest.first(), Some(b'!' | b'?')) || (closing && !starts_with_letter) {
            i = tag_end(html, lt + 1);
            continue;
        }
        if !starts_with_letter {
            on(Token::Text(&html[lt..lt + 1]));
            i = lt + 1;
            continue;
        }
        let name =
            String::from_utf8_lossy(&html[name_start..name_start + name_len]).to_ascii_lowercase();
        let end = tag_end(html, name_start + name_len);
        if closing {
            on(Token::Close { name });
            i = end;
            continue;
        }
        let self_closing = end >= 2 && html[end - 2] == b'/';
        let raw = RAW_TEXT.contains(&name.as_str()) && !self_closing;
        on(Token::Open {
            name: name.clone(),
            self_closing,
        });
        i = end;
        if raw {
            let close = format!("</{name}");
            let stop = find_ci(html, i, close.as_bytes()).unwrap_or(html.len());
            on(Token::Text(&html[i..stop]));
            on(Token::Close { name });
            i = if stop < html.len() {
                tag_end(html, stop)
            } else {
                stop
            };
        }
    }
}

/// How deep the page's elements nest at most, estimated from its tags: unclosed tags
/// count as open (except those the next of their kind closes), so a page that leaves
/// formatting tags open is judged as deep as the parser will build it.
pub(super) fn nesting_depth(html: &[u8]) -> usize {
    let (mut depth, mut max, mut foreign) = (0usize, 0usize, 0usize);
    scan(html, |token| match token {
        Token::Text(_) => {}
        Token::Open { name, self_closing } => {
            // `/>` closes an element only inside SVG and MathML.
            let closed = self_closing && foreign > 0;
            if name == "svg" || name == "math" {
                foreign += usize::from(!closed);
            }
            let n = name.as_str();
            if !closed && !VOID.contains(&n) && !OPTIONAL_END.contains(&n) {
                depth += 1;
                max = max.max(depth);
            }
        }
        Token::Close { name } => {
            if name == "svg" || name == "math" {
                foreign = foreign.saturating_sub(1);
            }
            let n = name.as_str();
            if !VOID.contains(&n) && !OPTIONAL_END.contains(&n) {
                depth = depth.saturating_sub(1);
            }
        }
    });
    max
}

/// Decodes the common character references in a text run.
fn decode_entities(text: &str, out: &mut String) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&semi| semi <= 10).and_then(|semi| {
            let entity = &rest[1..semi];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => entity
                    .strip_prefix("#x")
                    .or_else(|| entity.strip_prefix("#X"))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, semi + 1))
        });
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[used..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
}

/// Plain text from HTML by stripping its tags: scripts, styles and other raw-text
/// elements dropped (a title kept), block elements on lines of their own, whitespace
/// collapsed.
pub(super) fn strip_tags(html: &[u8]) -> String {
    let mut raw = String::new();
    let mut skipping: Option<String> = None;
    scan(html, |token| match token {
        Token::Text(text) => {
            if skipping.is_none() {
                decode_entities(&String::from_utf8_lossy(text), &mut raw);
            }
        }
        Token::Open { name, .. } => {
            if BLOCK.contains(&name.as_str()) {
                raw.push('\n');
            } else if name == "td" || name == "th" {
                raw.push('\t');
            }
            if RAW_TEXT.contains(&name.as_str()) && name != "title" {
                skipping = Some(name);
            }
        }
        Token::Close { name } => {
            if skipping.as_deref() == Some(name.as_str()) {
                skipping = None;
            } else if BLOCK.contains(&name.as_str()) {
                raw.push('\n');
            }
        }
    });
    let mut text = String::with_capacity(raw.len());
    let mut blank_lines = 0;
    for line in raw.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank_lines += 1;
            if blank_lines == 1 && !text.is_empty() {
                text.push('\n');
            }
            continue;
        }
        blank_lines = 0;
        text.push_str(&line);
        text.push('\n');
    }
    if text.ends_with("\n\n") {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_nesting_depth() {
        assert_eq!(nesting_depth(b"<html><body><p>a<p>b<p>c</body></html>"), 0);
        assert_eq!(nesting_depth(b"<div><div><span>x</span></div></div>"), 3);
        assert_eq!(nesting_depth(b"<ul><li>a<li>b<br><img src='x>y'></ul>"), 1);
        // Formatting tags left open nest as the parser builds them.
        assert_eq!(nesting_depth("<b id=1>t".repeat(1000).as_bytes()), 1000);
        // `/>` closes only inside SVG; elsewhere it is ignored, as the parser does.
        assert_eq!(nesting_depth(b"<svg><path/><path/></svg>"), 1);
        assert_eq!(nesting_depth("<div/>".repeat(50).as_bytes()), 50);
        // Tags inside scripts and comments do not count.
        assert_eq!(
            nesting_depth(b"<script>if (a<b) { '<div><div>' }</script><!-- <div> -->"),
            1
        );
    }

    #[test]
    fn strips_tags_to_readable_text() {
        let html = b"<!doctype html><html><head><title>Page &amp; title</title>\
            <style>p { color: red }</style><script>var s = '</p>'; evil()</script></head>\
            <body><h1>Hello</h1><p>World &lt;3 &#65;&#x42;&nbsp;C</p>\
            <table><tr><td>a</td><td>b</td></tr></table><!-- hidden --></body></html>";
        let text = strip_tags(html);
        assert_eq!(text, "Page & title\n\nHello\n\nWorld <3 AB C\n\na b\n");
        assert_eq!(strip_tags(b"a < b & c"), "a < b & c\n");
        assert_eq!(strip_tags(b"unterminated <script>evil()"), "unterminated\n");
    }
}
