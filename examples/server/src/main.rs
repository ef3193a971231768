//! `tidings-server`: see `tidings-server --help` and the crate docs of `tidings_server`.

fn main() -> std::process::ExitCode {
    tidings_server::cli::main()
}
