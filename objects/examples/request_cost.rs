//! The client's CPU per request against a store, by hand: `COUNT` requests
//! of one kind from one thread, after a first one that opens the
//! connection. The endpoint and keys come from the environment as for a
//! replay (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
//!
//! `cargo run --release -p iorepro-objects --example request_cost -- BUCKET KEY COUNT get|head|list`

use std::sync::Arc;
use std::time::Instant;

use iorepro_objects::{Client, Settings, Uncounted};

/// CPU time (user and system) the process has used, in µs.
fn cpu_us() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bucket, key, count, kind] = &args[..] else {
        return Err("usage: request_cost BUCKET KEY COUNT get|head|list".into());
    };
    let count: u64 = count.parse().map_err(|e| format!("COUNT: {e}"))?;
    let mut client = Client::new(&Settings::from_env(), bucket, 0, Arc::new(Uncounted))?;
    let prefix = key.rsplit_once('/').map_or("", |(p, _)| p).to_string();
    let mut one = |i: u64| -> Result<(), String> {
        let r = match kind.as_str() {
            "get" => client.get(key, Some(i * 4096..(i + 1) * 4096)).map(drop),
            "head" => client.head(key).map(drop),
            "list" => client.list(&prefix).map(drop),
            _ => return Err(format!("{kind}: not get, head or list")),
        };
        r.map_err(|e| e.to_string())
    };
    one(0)?;
    let (cpu, wall) = (cpu_us(), Instant::now());
    for i in 0..count {
        one(i % 256)?;
    }
    let (cpu, wall) = (cpu_us() - cpu, wall.elapsed().as_secs_f64() * 1e6);
    println!(
        "{kind}: {count} requests, {:.1} us of CPU a request, {:.1} us apart",
        cpu / count as f64,
        wall / count as f64
    );
    Ok(())
}
