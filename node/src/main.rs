//! `hearth`: the node CLI; see `hearth_node::cli`.

fn main() -> anyhow::Result<()> {
    hearth_node::cli::main_with_args(std::env::args_os())
}
