//! The workspace's one feature set. Every crate of the workspace (but
//! xtask, which only runs tools, and the `no_std` iorepro-common) depends on
//! this one, which asks for each shared dependency with the union of the
//! features any member asks for. So building one package (`cargo build -p
//! iorepro-collector`) resolves every dependency as the whole workspace's
//! build does, and reuses its artifacts instead of compiling arrow,
//! parquet and their kin again. `cargo hakari generate` and `cargo hakari
//! manage-deps` (cargo-hakari, configured in `.config/hakari.toml`) write
//! it again after a dependency changes; it has no code of its own.
