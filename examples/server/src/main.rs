//! `tidings-server`: see `tidings-server --help` and the crate docs of `tidings_server`.

#[cfg(unix)]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    tidings_server::cli::main()
}
