//! The progress bar: ops replayed out of ops planned, drawn on stderr only
//! when it is a terminal (hidden in pipes, logs and CI), and only by the
//! process that prints the report.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Starts a bar that follows `done` up to `total` (counting `unit`: ops,
/// objects); a no-op when `show` is false or stderr is not a terminal.
pub fn start(total: u64, done: Arc<AtomicU64>, show: bool, unit: &str) -> Progress {
    let stop = Arc::new(AtomicBool::new(false));
    if !show || !std::io::stderr().is_terminal() {
        return Progress { stop, handle: None };
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    let s = stop.clone();
    let handle = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            bar.set_position(done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    });
    Progress {
        stop,
        handle: Some(handle),
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
