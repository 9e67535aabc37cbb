//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!`
//! embeds the files, and cargo does not see them otherwise.

fn main() {
    println!("cargo::rerun-if-changed=migrations");
}
