//! `chaos`: a run of `payorch_chaos`, its report on stdout. Exits 1 when a check fails, 2 when
//! the run could not be made.

use clap::Parser;

#[tokio::main]
async fn main() {
    let args = payorch_chaos::Args::parse();
    match payorch_chaos::run(&args).await {
        Ok(run) => {
            print!("{}", run.report);
            if !run.good {
                std::process::exit(1);
            }
        }
        Err(why) => {
            eprintln!("chaos: {why}");
            std::process::exit(2);
        }
    }
}
