//! Surgical note edits for the agent's `notes_update` tool, as pure functions.
//!
//! Operations (the names users of peer systems know): `replace`, `insert_after`,
//! `insert_before`, `delete`, `append`, `prepend`; heading-scoped `replace_section`,
//! `insert_after_section`, `delete_section` (a section runs from its heading line to the
//! next heading of the same or a higher level; `occurrence` picks among repeated
//! headings, 1-based); line-number `replace_lines`, `insert_at_line`, `delete_lines`
//! (1-based, inclusive). Each operation applies to the text left by the previous one.
//!
//! The result is a list of splices (character positions), so the store records exactly
//! what changed and concurrent edits elsewhere in the note merge cleanly. Nothing here
//! touches the store.

use serde::Deserialize;

/// One edit operation, as the model sends it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum NoteOp {
    /// Replace the first occurrence of `find` (every one with `all`).
    Replace {
        /// Text to find.
        find: String,
        /// Replacement.
        replace: String,
        /// Replace every occurrence.
        #[serde(default)]
        all: bool,
    },
    /// Insert `text` right after the first occurrence of `find`.
    InsertAfter {
        /// Anchor text.
        find: String,
        /// Text to insert.
        text: String,
    },
    /// Insert `text` right before the first occurrence of `find`.
    InsertBefore {
        /// Anchor text.
        find: String,
        /// Text to insert.
        text: String,
    },
    /// Delete the first occurrence of `find`.
    Delete {
        /// Text to delete.
        find: String,
    },
    /// Add `text` at the end.
    Append {
        /// Text.
        text: String,
    },
    /// Add `text` at the start.
    Prepend {
        /// Text.
        text: String,
    },
    /// Replace the body of a section (its heading line stays).
    ReplaceSection {
        /// The heading line, e.g. `## April 2026`.
        heading: String,
        /// Which of several equal headings, 1-based.
        #[serde(default)]
        occurrence: Option<usize>,
        /// New body.
        content: String,
    },
    /// Add `text` at the end of a section.
    InsertAfterSection {
        /// The heading line.
        heading: String,
        /// Which of several equal headings, 1-based.
        #[serde(default)]
        occurrence: Option<usize>,
        /// Text.
        text: String,
    },
    /// Delete a section, heading included.
    DeleteSection {
        /// The heading line.
        heading: String,
        /// Which of several equal headings, 1-based.
        #[serde(default)]
        occurrence: Option<usize>,
    },
    /// Replace lines `start..=end`.
    ReplaceLines {
        /// First line, 1-based.
        start: usize,
        /// Last line, inclusive.
        end: usize,
        /// New text for those lines.
        text: String,
    },
    /// Insert `text` as new lines before line `line` (one past the last line appends).
    InsertAtLine {
        /// Line number, 1-based.
        line: usize,
        /// Text.
        text: String,
    },
    /// Delete lines `start..=end`.
    DeleteLines {
        /// First line, 1-based.
        start: usize,
        /// Last line, inclusive.
        end: usize,
    },
}

/// One splice, in characters, against the text as left by the splices before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splice {
    /// Position.
    pub pos: usize,
    /// Characters deleted.
    pub delete: usize,
    /// Text inserted.
    pub insert: String,
}

/// Why an operation could not apply; the message tells the model how to fix its call.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoteOpError {
    /// Anchor text not found.
    #[error("operation {index}: text {find:?} does not occur in the note")]
    NotFound {
        /// Operation number, 1-based.
        index: usize,
        /// The text.
        find: String,
    },
    /// No such heading.
    #[error("operation {index}: no heading {heading:?} (occurrence {occurrence}) in the note")]
    NoHeading {
        /// Operation number.
        index: usize,
        /// The heading.
        heading: String,
        /// Occurrence asked for.
        occurrence: usize,
    },
    /// Line numbers out of range.
    #[error("operation {index}: lines {start}..{end} are outside the note's {total} lines")]
    Lines {
        /// Operation number.
        index: usize,
        /// First line.
        start: usize,
        /// Last line.
        end: usize,
        /// Lines in the note.
        total: usize,
    },
    /// Empty anchor.
    #[error("operation {index}: `find` must not be empty")]
    EmptyFind {
        /// Operation number.
        index: usize,
    },
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Character offset of byte offset `b` in `s`.
fn char_pos(s: &str, b: usize) -> usize {
    chars(&s[..b])
}

/// Byte offsets where each line starts, plus the text length as a sentinel.
fn line_starts(s: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(s.match_indices('\n').map(|(i, _)| i + 1));
    if v.last() == Some(&s.len()) && !s.is_empty() {
        v.pop();
    }
    v.push(s.len());
    v
}

fn total_lines(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        line_starts(s).len() - 1
    }
}

fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (hashes > 0 && hashes <= 6 && line[hashes..].starts_with(' ')).then_some(hashes)
}

/// The byte ranges (heading line start, body start, section end) of a section.
fn find_section(s: &str, heading: &str, occurrence: usize) -> Option<(usize, usize, usize)> {
    let starts = line_starts(s);
    let lines: Vec<(usize, &str)> = starts
        .windows(2)
        .map(|w| {
            (
                w[0],
                s[w[0]..w[1]].trim_end_matches('\n').trim_end_matches('\r'),
            )
        })
        .collect();
    let want = heading.trim();
    let level = heading_level(want)?;
    let (i, &(at, _)) = lines
        .iter()
        .enumerate()
        .filter(|(_, (_, l))| l.trim() == want)
        .nth(occurrence - 1)?;
    let body = starts[i + 1];
    let end = lines[i + 1..]
        .iter()
        .find(|(_, l)| heading_level(l).is_some_and(|lv| lv <= level))
        .map(|(b, _)| *b)
        .unwrap_or(s.len());
    Some((at, body, end))
}

fn with_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

fn apply(text: &mut String, sp: &Splice) {
    let start = text
        .char_indices()
        .nth(sp.pos)
        .map(|(b, _)| b)
        .unwrap_or(text.len());
    let end = text[start..]
        .char_indices()
        .nth(sp.delete)
        .map(|(b, _)| start + b)
        .unwrap_or(text.len());
    text.replace_range(start..end, &sp.insert);
}

/// Turns operations into splices; returns them and the resulting text.
pub fn plan(text: &str, ops: &[NoteOp]) -> Result<(Vec<Splice>, String), NoteOpError> {
    let mut cur = text.to_string();
    let mut out = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let index = n + 1;
        let find_at = |cur: &str, find: &str| -> Result<usize, NoteOpError> {
            if find.is_empty() {
                return Err(NoteOpError::EmptyFind { index });
            }
            cur.find(find).ok_or_else(|| NoteOpError::NotFound {
                index,
                find: find.to_string(),
            })
        };
        let section = |cur: &str, heading: &str, occ: &Option<usize>| {
            let occurrence = occ.unwrap_or(1).max(1);
            find_section(cur, heading, occurrence).ok_or_else(|| NoteOpError::NoHeading {
                index,
                heading: heading.to_string(),
                occurrence,
            })
        };
        let lines = |cur: &str, start: usize, end: usize, allow_past_end: bool| {
            let total = total_lines(cur);
            let limit = if allow_past_end { total + 1 } else { total };
            if start == 0 || end < start || end > limit {
                return Err(NoteOpError::Lines {
                    index,
                    start,
                    end,
                    total,
                });
            }
            let starts = line_starts(cur);
            let b0 = starts.get(start - 1).copied().unwrap_or(cur.len());
            let b1 = starts.get(end).copied().unwrap_or(cur.len());
            Ok((b0, b1))
        };
        let mut splices = Vec::new();
        match op {
            NoteOp::Replace { find, replace, all } => {
                if find.is_empty() {
                    return Err(NoteOpError::EmptyFind { index });
                }
                let hits: Vec<usize> = cur.match_indices(find.as_str()).map(|(b, _)| b).collect();
                if hits.is_empty() {
                    return Err(NoteOpError::NotFound {
                        index,
                        find: find.clone(),
                    });
                }
                let take = if *all { hits.len() } else { 1 };
                // Back to front, so earlier positions stay valid.
                for &b in hits[..take].iter().rev() {
                    splices.push(Splice {
                        pos: char_pos(&cur, b),
                        delete: chars(find),
                        insert: replace.clone(),
                    });
                }
            }
            NoteOp::InsertAfter { find, text } => {
                let b = find_at(&cur, find)? + find.len();
                splices.push(Splice {
                    pos: char_pos(&cur, b),
                    delete: 0,
                    insert: text.clone(),
                });
            }
            NoteOp::InsertBefore { find, text } => {
                let b = find_at(&cur, find)?;
                splices.push(Splice {
                    pos: char_pos(&cur, b),
                    delete: 0,
                    insert: text.clone(),
                });
            }
            NoteOp::Delete { find } => {
                let b = find_at(&cur, find)?;
                splices.push(Splice {
                    pos: char_pos(&cur, b),
                    delete: chars(find),
                    insert: String::new(),
                });
            }
            NoteOp::Append { text } => splices.push(Splice {
                pos: chars(&cur),
                delete: 0,
                insert: text.clone(),
            }),
            NoteOp::Prepend { text } => splices.push(Splice {
                pos: 0,
                delete: 0,
                insert: text.clone(),
            }),
            NoteOp::ReplaceSection {
                heading,
                occurrence,
                content,
            } => {
                let (_, body, end) = section(&cur, heading, occurrence)?;
                splices.push(Splice {
                    pos: char_pos(&cur, body),
                    delete: chars(&cur[body..end]),
                    insert: with_newline(content),
                });
            }
            NoteOp::InsertAfterSection {
                heading,
                occurrence,
                text,
            } => {
                let (_, _, end) = section(&cur, heading, occurrence)?;
                let lead = if end > 0 && !cur[..end].ends_with('\n') {
                    "\n"
                } else {
                    ""
                };
                splices.push(Splice {
                    pos: char_pos(&cur, end),
                    delete: 0,
                    insert: format!("{lead}{}", with_newline(text)),
                });
            }
            NoteOp::DeleteSection {
                heading,
                occurrence,
            } => {
                let (at, _, end) = section(&cur, heading, occurrence)?;
                splices.push(Splice {
                    pos: char_pos(&cur, at),
                    delete: chars(&cur[at..end]),
                    insert: String::new(),
                });
            }
            NoteOp::ReplaceLines { start, end, text } => {
                let (b0, b1) = lines(&cur, *start, *end, false)?;
                let keep_nl = cur[b0..b1].ends_with('\n');
                let insert = if keep_nl {
                    with_newline(text)
                } else {
                    text.clone()
                };
                splices.push(Splice {
                    pos: char_pos(&cur, b0),
                    delete: chars(&cur[b0..b1]),
                    insert,
                });
            }
            NoteOp::InsertAtLine { line, text } => {
                let (b0, _) = lines(&cur, *line, *line, true)?;
                let lead = if b0 == cur.len() && !cur.is_empty() && !cur.ends_with('\n') {
                    "\n"
                } else {
                    ""
                };
                splices.push(Splice {
                    pos: char_pos(&cur, b0),
                    delete: 0,
                    insert: format!("{lead}{}", with_newline(text)),
                });
            }
            NoteOp::DeleteLines { start, end } => {
                let (b0, b1) = lines(&cur, *start, *end, false)?;
                splices.push(Splice {
                    pos: char_pos(&cur, b0),
                    delete: chars(&cur[b0..b1]),
                    insert: String::new(),
                });
            }
        }
        for sp in splices {
            apply(&mut cur, &sp);
            out.push(sp);
        }
    }
    Ok((out, cur))
}

/// A window of a note for `notes_read`: lines `start..=end` (1-based, clamped), the
/// totals, and whether lines were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineWindow {
    /// The selected text.
    pub text: String,
    /// Lines in the note.
    pub total_lines: usize,
    /// Characters in the note.
    pub total_chars: usize,
    /// Whether the window leaves part of the note out.
    pub truncated: bool,
}

/// Reads lines `start..=end` of `text` (`None` for the whole note).
pub fn read_lines(text: &str, start: Option<usize>, end: Option<usize>) -> LineWindow {
    let total = total_lines(text);
    let s = start.unwrap_or(1).clamp(1, total.max(1));
    let e = end.unwrap_or(total).clamp(s, total.max(s));
    let starts = line_starts(text);
    let b0 = starts.get(s - 1).copied().unwrap_or(text.len());
    let b1 = starts.get(e).copied().unwrap_or(text.len());
    LineWindow {
        text: text[b0..b1].to_string(),
        total_lines: total,
        total_chars: chars(text),
        truncated: s > 1 || e < total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIARY: &str = "# Diary\n\n## March 2026\nrain\n\n## April 2026\nsun\n### Easter\neggs\n\n## April 2026\nagain\n";

    fn run(text: &str, ops: serde_json::Value) -> Result<String, NoteOpError> {
        let ops: Vec<NoteOp> = serde_json::from_value(ops).expect("ops parse");
        let (splices, out) = plan(text, &ops)?;
        // Replaying the splices on the original gives the same result.
        let mut replay = text.to_string();
        for s in &splices {
            apply(&mut replay, s);
        }
        assert_eq!(replay, out);
        Ok(out)
    }

    #[test]
    fn text_operations() {
        let t = "café au lait, café noir";
        assert_eq!(
            run(
                t,
                serde_json::json!([{"op":"replace","find":"café","replace":"tea"}])
            )
            .expect("ok"),
            "tea au lait, café noir"
        );
        assert_eq!(
            run(
                t,
                serde_json::json!([{"op":"replace","find":"café","replace":"tea","all":true}])
            )
            .expect("ok"),
            "tea au lait, tea noir"
        );
        assert_eq!(
            run(t, serde_json::json!([{"op":"insert_after","find":"lait","text":"!"},{"op":"insert_before","find":"café","text":"« "},{"op":"delete","find":" noir"},{"op":"append","text":"."},{"op":"prepend","text":"> "}])).expect("ok"),
            "> « café au lait!, café."
        );
        assert_eq!(
            run(t, serde_json::json!([{"op":"delete","find":"milk"}])),
            Err(NoteOpError::NotFound {
                index: 1,
                find: "milk".into()
            })
        );
    }

    #[test]
    fn section_operations() {
        let out = run(DIARY, serde_json::json!([{"op":"replace_section","heading":"## April 2026","content":"wind"}])).expect("ok");
        assert_eq!(
            out,
            "# Diary\n\n## March 2026\nrain\n\n## April 2026\nwind\n## April 2026\nagain\n"
        );
        let out = run(DIARY, serde_json::json!([{"op":"insert_after_section","heading":"## April 2026","occurrence":2,"text":"more"}])).expect("ok");
        assert!(out.ends_with("## April 2026\nagain\nmore\n"), "{out}");
        let out = run(
            DIARY,
            serde_json::json!([{"op":"delete_section","heading":"## March 2026"}]),
        )
        .expect("ok");
        assert_eq!(
            out,
            "# Diary\n\n## April 2026\nsun\n### Easter\neggs\n\n## April 2026\nagain\n"
        );
        let out = run(
            DIARY,
            serde_json::json!([{"op":"delete_section","heading":"### Easter"}]),
        )
        .expect("ok");
        assert!(
            !out.contains("eggs") && out.contains("sun\n## April 2026\nagain"),
            "{out}"
        );
        assert!(matches!(
            run(
                DIARY,
                serde_json::json!([{"op":"delete_section","heading":"## April 2026","occurrence":3}])
            ),
            Err(NoteOpError::NoHeading { occurrence: 3, .. })
        ));
    }

    #[test]
    fn line_operations_in_reverse_order() {
        let t = "one\ntwo\nthree\nfour\n";
        let out = run(
            t,
            serde_json::json!([
                {"op":"delete_lines","start":4,"end":4},
                {"op":"replace_lines","start":2,"end":3,"text":"TWO-THREE"},
                {"op":"insert_at_line","line":1,"text":"zero"}
            ]),
        )
        .expect("ok");
        assert_eq!(out, "zero\none\nTWO-THREE\n");
        assert_eq!(
            run(
                "a\nb",
                serde_json::json!([{"op":"insert_at_line","line":3,"text":"c"}])
            )
            .expect("ok"),
            "a\nb\nc\n"
        );
        assert!(matches!(
            run(
                t,
                serde_json::json!([{"op":"delete_lines","start":3,"end":9}])
            ),
            Err(NoteOpError::Lines { total: 4, .. })
        ));
    }

    #[test]
    fn windows_report_totals() {
        let w = read_lines("a\nb\nc\nd", Some(2), Some(3));
        assert_eq!(
            (w.text.as_str(), w.total_lines, w.total_chars, w.truncated),
            ("b\nc\n", 4, 7, true)
        );
        let all = read_lines("a\nb", None, None);
        assert_eq!((all.text.as_str(), all.truncated), ("a\nb", false));
        assert_eq!(read_lines("", None, None).total_lines, 0);
    }
}
