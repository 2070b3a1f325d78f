use clap::Parser;

use payorch::config::Cli;

// Multi-thread runtime: diesel-async's migration harness blocks on it from a blocking thread.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    payorch::telemetry::init(cli.log_json);
    match payorch::commands::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("payorch: {}", err.0);
            std::process::ExitCode::FAILURE
        }
    }
}
