//! What the tests against the RADOS Gateway share: the store with the
//! test bucket, and a replay into it as one of its users.

use std::path::Path;
use std::process::{Command, Output};

use iorepro_tests::rgw::{Keys, RgwStore};
use iorepro_tests::skip::cannot_run;

use super::replay_bin;

/// The bucket every test replays into.
pub const BUCKET: &str = "bench";

/// The store with the test bucket, or `None` (said why) where this machine
/// cannot start one.
pub fn store(name: &str) -> Option<RgwStore> {
    match RgwStore::start(name) {
        Ok(s) => {
            s.create_bucket(BUCKET);
            Some(s)
        }
        Err(e) => {
            cannot_run(e);
            None
        }
    }
}

/// `iorepro-replay TRACE --target TARGET ARGS` against the store, signed
/// with `keys`.
pub fn replay(store: &RgwStore, keys: &Keys, trace: &Path, target: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(replay_bin());
    cmd.arg(trace).arg("--target").arg(target).args(args);
    store
        .env_as(&mut cmd, keys)
        .output()
        .expect("iorepro-replay runs")
}
