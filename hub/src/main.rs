//! `hearth-hub`: the hub daemon; see `hearth_hub::cli`.

fn main() -> anyhow::Result<()> {
    hearth_hub::cli::main_with_args(std::env::args_os())
}
