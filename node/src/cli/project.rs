//! `hearth project add|list`.

use hearth_sync::{DocumentStore, Filter, Kind, Project};

#[derive(clap::Subcommand)]
pub(crate) enum ProjectCommand {
    /// Create a project; prints its id.
    Add {
        /// Name: lowercase letters, digits and hyphens.
        name: String,
        /// Parent project (name or id).
        #[arg(long)]
        parent: Option<String>,
        /// Instructions for the agent in this project.
        #[arg(long, default_value = "")]
        instructions: String,
    },
    /// List projects.
    List,
}

/// Finds a project by id, id prefix or exact name.
pub(crate) fn find(store: &DocumentStore, what: &str) -> anyhow::Result<hearth_sync::DocId> {
    if let Ok(id) = super::resolve(store, Kind::Project, what) {
        return Ok(id);
    }
    let page = store.list_blocking(&Filter {
        limit: 10_000,
        ..Filter::new(Kind::Project)
    })?;
    match page
        .data
        .iter()
        .filter(|p| p.title == what)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [one] => Ok(one.id),
        [] => anyhow::bail!("no project named or with id {what:?}"),
        _ => anyhow::bail!("several projects are named {what:?}: give its id"),
    }
}

pub(crate) fn run(store: &DocumentStore, cmd: ProjectCommand) -> anyhow::Result<()> {
    match cmd {
        ProjectCommand::Add {
            name,
            parent,
            instructions,
        } => {
            let parent = parent.map(|p| find(store, &p)).transpose()?;
            let rec = store.create_blocking(Project {
                name,
                parent,
                instructions,
                archived: false,
            })?;
            println!("{}", rec.id);
        }
        ProjectCommand::List => {
            let page = store.list_blocking(&Filter {
                limit: 10_000,
                ..Filter::new(Kind::Project)
            })?;
            for p in page.data {
                println!(
                    "{}\t{}\t{}",
                    p.id,
                    p.title,
                    p.parent.map(|p| p.to_string()).unwrap_or_default()
                );
            }
        }
    }
    Ok(())
}
