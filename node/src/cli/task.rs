//! `hearth task add|list|done`.

use hearth_sync::{DocumentStore, Filter, Kind, Task, TaskStatus};

#[derive(clap::Subcommand)]
pub(crate) enum TaskCommand {
    /// Create a task; prints its id.
    Add {
        /// What to do.
        name: String,
        /// Due date, `YYYY-MM-DD[THH:MM]`.
        #[arg(long)]
        due: Option<String>,
        /// Parent task id (makes this a subtask).
        #[arg(long)]
        parent: Option<String>,
        /// Project id.
        #[arg(long)]
        project: Option<String>,
        /// Notes.
        #[arg(long, default_value = "")]
        notes: String,
        /// Repeat every interval (`1d`, `2w`, `1m`, `1y`): a recurring task.
        #[arg(long)]
        interval: Option<String>,
    },
    /// List tasks.
    List {
        /// Only this status: incomplete, complete, cancelled, recurring.
        #[arg(long)]
        status: Option<String>,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Mark a task done: a recurring one moves its due date on by its interval and
    /// stays open (today is this machine's local date).
    Done {
        /// Id or unique prefix.
        id: String,
    },
}

/// `default_project`: where new entries go when `--project` is not given (a scoped
/// device's project).
pub(crate) fn run(
    store: &DocumentStore,
    cmd: TaskCommand,
    default_project: Option<String>,
) -> anyhow::Result<()> {
    match cmd {
        TaskCommand::Add {
            name,
            due,
            parent,
            project,
            notes,
            interval,
        } => {
            let parent = parent
                .map(|p| super::resolve(store, Kind::Task, &p))
                .transpose()?;
            let project = project
                .or(default_project)
                .map(|p| super::project::find(store, &p))
                .transpose()?;
            let rec = store.create_blocking(Task {
                name,
                due,
                parent,
                project,
                notes,
                status: if interval.is_some() {
                    TaskStatus::Recurring
                } else {
                    TaskStatus::Incomplete
                },
                interval,
                ..Task::default()
            })?;
            println!("{}", rec.id);
        }
        TaskCommand::List { status, json } => {
            if let Some(s) = &status {
                s.parse::<TaskStatus>()?;
            }
            let page = store.list_blocking(&Filter {
                status,
                limit: 1000,
                ..Filter::new(Kind::Task)
            })?;
            for t in page.data {
                let status = t.status.unwrap_or_default();
                if json {
                    let heads: Vec<String> =
                        store.heads_blocking(t.id)?.iter().map(super::hex).collect();
                    println!(
                        "{}",
                        serde_json::json!({ "id": t.id.to_string(), "name": t.title, "status": status, "due": t.due, "heads": heads })
                    );
                } else {
                    println!(
                        "{}\t{}\t{}\t{}",
                        t.id,
                        status,
                        t.due.unwrap_or_default(),
                        t.title
                    );
                }
            }
        }
        TaskCommand::Done { id } => {
            let id = super::resolve(store, Kind::Task, &id)?;
            let task = store.get_blocking::<Task>(id)?.value;
            let rec = store.update_blocking(id, task.done_patch(&hearth_ui::local_now()))?;
            match (task.repeats_when_done(), rec.value.due) {
                (true, Some(due)) => println!("done {id}, next due {due}"),
                _ => println!("done {id}"),
            }
        }
    }
    Ok(())
}
