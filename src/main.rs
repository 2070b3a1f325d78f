use clap::{CommandFactory, FromArgMatches};

use payorch::config::Cli;

// mimalloc: the request path allocates many small short-lived buffers (JSON, SQL binds,
// headers), and glibc's malloc showed as the largest user-space cost in a profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Multi-thread runtime: diesel-async's migration harness blocks on it from a blocking thread.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    payorch::telemetry::init(cli.log_json, cli.log_spans);
    for warning in payorch::secret_files::secrets_on_command_line(&matches) {
        tracing::warn!("{warning}");
    }
    match payorch::commands::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("payorch: {}", err.0);
            std::process::ExitCode::FAILURE
        }
    }
}
