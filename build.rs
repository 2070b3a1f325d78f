//! Builds payorch again when a migration is added: `embed_migrations!` (src/db/migrations.rs)
//! reads the folder as it compiles, and cargo would otherwise see only the files it read.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
