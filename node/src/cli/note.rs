//! `hearth note add|list|show|edit`.

use std::io::Read;

use anyhow::{bail, Context};
use hearth_sync::{DocumentStore, Filter, Kind, Note, NotePatch, TextEdit};

#[derive(clap::Subcommand)]
pub(crate) enum NoteCommand {
    /// Create a note; prints its id.
    Add {
        /// Title.
        #[arg(long)]
        title: String,
        /// Markdown content (`-` reads standard input).
        #[arg(long, default_value = "")]
        content: String,
        /// Project id.
        #[arg(long)]
        project: Option<String>,
    },
    /// List notes, newest first.
    List {
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
        /// How many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Print a note's content.
    Show {
        /// Id or unique prefix.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Edit a note; prints `saved <n>` once each edit is durable.
    Edit {
        /// Id or unique prefix.
        id: String,
        /// New title.
        #[arg(long)]
        title: Option<String>,
        /// Replace the whole content (`-` reads standard input).
        #[arg(long)]
        content: Option<String>,
        /// Append text (`{n}` becomes the repetition number).
        #[arg(long)]
        append: Option<String>,
        /// Replace the first occurrence of this text …
        #[arg(long, requires = "replace")]
        find: Option<String>,
        /// … with this text.
        #[arg(long, requires = "find")]
        replace: Option<String>,
        /// Apply the edit this many times, each one its own durable commit.
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
}

fn read_arg(value: String) -> anyhow::Result<String> {
    if value == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        Ok(s)
    } else {
        Ok(value.replace("\\n", "\n"))
    }
}

/// `default_project`: where new entries go when `--project` is not given (a scoped
/// device's project).
pub(crate) fn run(
    store: &DocumentStore,
    cmd: NoteCommand,
    default_project: Option<String>,
) -> anyhow::Result<()> {
    match cmd {
        NoteCommand::Add {
            title,
            content,
            project,
        } => {
            let project = project
                .or(default_project)
                .map(|p| super::project::find(store, &p))
                .transpose()?;
            let rec = store.create_blocking(Note {
                project,
                title,
                content: read_arg(content)?,
            })?;
            println!("{}", rec.id);
        }
        NoteCommand::List { json, limit } => {
            let page = store.list_blocking(&Filter {
                limit,
                ..Filter::new(Kind::Note)
            })?;
            for n in page.data {
                if json {
                    println!(
                        "{}",
                        serde_json::json!({ "id": n.id.to_string(), "title": n.title, "updated_at": n.updated_at })
                    );
                } else {
                    println!("{}\t{}", n.id, n.title);
                }
            }
        }
        NoteCommand::Show { id, json } => {
            let id = super::resolve(store, Kind::Note, &id)?;
            let rec = store.get_blocking::<Note>(id)?;
            if json {
                let heads: Vec<String> = store.heads_blocking(id)?.iter().map(super::hex).collect();
                println!(
                    "{}",
                    serde_json::json!({
                        "id": rec.id.to_string(), "title": rec.value.title, "content": rec.value.content,
                        "project": rec.value.project.map(|p| p.to_string()), "deleted": rec.deleted,
                        "updated_at": rec.updated_at, "heads": heads,
                    })
                );
            } else {
                if rec.deleted {
                    eprintln!("(this note was deleted)");
                }
                print!("{}", rec.value.content);
                if !rec.value.content.ends_with('\n') {
                    println!();
                }
            }
        }
        NoteCommand::Edit {
            id,
            title,
            content,
            append,
            find,
            replace,
            repeat,
        } => {
            let id = super::resolve(store, Kind::Note, &id)?;
            let content = content.map(read_arg).transpose()?;
            if title.is_none() && content.is_none() && append.is_none() && find.is_none() {
                bail!("nothing to change: give --title, --content, --append or --find/--replace");
            }
            for n in 1..=repeat {
                let mut patch = NotePatch {
                    title: title.clone().map(TextEdit::Replace),
                    ..NotePatch::default()
                };
                if let Some(c) = &content {
                    patch.content = Some(TextEdit::Replace(c.clone()));
                } else if let Some(a) = &append {
                    patch.content = Some(TextEdit::Append(
                        a.replace("{n}", &n.to_string()).replace("\\n", "\n"),
                    ));
                } else if let (Some(f), Some(r)) = (&find, &replace) {
                    let current = store.get_blocking::<Note>(id)?.value.content;
                    let Some(byte) = current.find(f.as_str()) else {
                        bail!("{f:?} does not occur in the note");
                    };
                    let pos = current[..byte].chars().count();
                    patch.content = Some(TextEdit::Splice {
                        pos,
                        delete: f.chars().count(),
                        insert: r.replace("{n}", &n.to_string()).replace("\\n", "\n"),
                    });
                }
                store.update_blocking(id, patch)?;
                // Printed only after the commit returned: a reported edit is on disk.
                println!("saved {n}");
            }
        }
    }
    Ok(())
}
