//! Decoding on a second thread: the next batches are decompressed and decoded
//! while the caller aggregates the current one, so a one-pass analysis uses
//! both cores without changing what it sees or in which order.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// Batches decoded ahead of the consumer; two keep both threads busy while
/// holding memory to a few batches.
const AHEAD: usize = 2;

pub struct Prefetch<T> {
    rx: Receiver<T>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Prefetch<T> {
    pub fn new<I>(inner: I) -> Self
    where
        I: Iterator<Item = T> + Send + 'static,
    {
        let (tx, rx) = sync_channel(AHEAD);
        let worker = std::thread::spawn(move || {
            for item in inner {
                if tx.send(item).is_err() {
                    break; // consumer stopped early
                }
            }
        });
        Prefetch {
            rx,
            worker: Some(worker),
        }
    }
}

impl<T> Iterator for Prefetch<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self.rx.recv() {
            Ok(item) => Some(item),
            Err(_) => {
                if let Some(w) = self.worker.take() {
                    if let Err(panic) = w.join() {
                        std::panic::resume_unwind(panic);
                    }
                }
                None
            }
        }
    }
}
