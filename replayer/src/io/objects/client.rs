//! A rank's client of the bucket (`iorepro_objects`), counting its
//! requests into the rank's [`RequestStats`], which the rank's live
//! figures share (the lock is the rank's own but for a reader's moment).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use iorepro_objects::{Client, Meter, RequestKind, Settings};

use super::{ObjectTarget, RequestStats};

/// The figures a client's requests go into.
struct Counted(Arc<Mutex<RequestStats>>);

impl Counted {
    fn stats(&self) -> MutexGuard<'_, RequestStats> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Meter for Counted {
    fn request(&self, kind: RequestKind, bytes: u64, took: Duration, ok: bool) {
        (self.stats()).record(kind.name(), bytes, took.as_nanos() as u64, ok);
    }

    fn first_byte(&self, took: Duration) {
        self.stats().first_byte(took.as_nanos() as u64);
    }

    fn retry(&self, throttled: bool) {
        let mut s = self.stats();
        s.retries += 1;
        s.throttles += u64::from(throttled);
    }

    fn throttled(&self) {
        self.stats().throttles += 1;
    }

    fn in_flight(&self, now: u64) {
        let mut s = self.stats();
        s.max_in_flight = s.max_in_flight.max(now);
    }
}

pub struct ObjectClient {
    /// Boxed: large, and held beside a rank's file calls.
    client: Box<Client>,
    stats: Arc<Mutex<RequestStats>>,
}

impl ObjectClient {
    /// A client for `target` counting its requests into `stats`.
    pub fn connect(target: &ObjectTarget, stats: Arc<Mutex<RequestStats>>) -> Result<Self, String> {
        let settings = Settings::from_env();
        let meter = Arc::new(Counted(stats.clone()));
        let client =
            Client::new(&settings, &target.bucket, target.retries, meter).map_err(|e| {
                format!(
                    "--target {} at {}: {e}",
                    target.url(),
                    settings.endpoint_name()
                )
            })?;
        Ok(ObjectClient {
            client: Box::new(client),
            stats,
        })
    }

    /// The request figures, to change.
    pub fn stats(&self) -> MutexGuard<'_, RequestStats> {
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Deref for ObjectClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for ObjectClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}
