//! `--status-interval` and `--metrics-addr` on a real capture: lines while
//! the job runs, an endpoint scraped while it runs, and final figures (last
//! line, lingering endpoint) equal to what the trace holds.

mod common;

use std::time::Duration;

use common::*;
use iorepro_format::Op;
use iorepro_tests::http::{free_port, get};

/// The value of `name` (with its labels, as written) in a scrape.
fn sample(scrape: &str, name: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn status_lines_and_scrapes_agree_with_the_trace() {
    if !can_trace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (data, out, lines) = (
        dir.path().join("data"),
        dir.path().join("t"),
        dir.path().join("s"),
    );
    std::fs::create_dir(&data).unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    // Three rounds of 8 MiB written and read back, 0.6 s apart.
    let job = format!(
        "for i in 1 2 3; do dd if=/dev/zero of={0}/f$i bs=64k count=128 status=none; \
         cat {0}/f$i >/dev/null; sleep 0.6; done",
        data.display()
    );
    let mut child = collector()
        .arg("--out")
        .arg(&out)
        .arg("--path-prefix")
        .arg(&data)
        .args(["--status-interval", "500ms", "--status-file"])
        .arg(&lines)
        .args(["--metrics-addr", &addr, "--metrics-linger", "3s"])
        .args(["--", "bash", "-c", &job])
        .spawn()
        .unwrap();
    // A scrape while the job runs...
    std::thread::sleep(Duration::from_millis(1200));
    let running = get(&addr, "/metrics").expect("scrape while capturing");
    assert_eq!(
        sample(&running, "iorepro_collect_finished"),
        Some(0.0),
        "{running}"
    );
    assert!(
        running.contains("iorepro_collect_ring_fill_ratio "),
        "{running}"
    );
    // ...and one after the trace is closed, while the endpoint lingers.
    let mut last_scrape = None;
    while child.try_wait().unwrap().is_none() {
        if let Ok(s) = get(&addr, "/metrics") {
            if sample(&s, "iorepro_collect_finished") == Some(1.0) {
                last_scrape = Some(s);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(child.wait().unwrap().success());
    let (manifest, rows) = read_rows(&out);
    let bytes = |op: Op| -> u64 {
        rows.iter()
            .filter(|r| r.op == op && r.under(&data))
            .map(|r| r.moved())
            .sum()
    };
    assert_eq!((bytes(Op::Write), bytes(Op::Read)), (3 << 23, 3 << 23));
    let text = std::fs::read_to_string(&lines).unwrap();
    let parsed: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(parsed.len() >= 3, "{text}");
    assert!(parsed[..parsed.len() - 1]
        .iter()
        .all(|l| l["done"] == false));
    let last = parsed.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["events"], manifest.events);
    assert_eq!(last["dropped_events"], manifest.dropped_events);
    assert_eq!(last["write_bytes"], bytes(Op::Write));
    assert_eq!(last["read_bytes"], bytes(Op::Read));
    let calls: u64 = rows.iter().filter(|r| r.op == Op::Read).count() as u64;
    assert_eq!(last["ops"]["read"]["count"], calls);
    let scrape = last_scrape.expect("the lingering endpoint served the final figures");
    let scraped = |name: &str| sample(&scrape, name);
    assert_eq!(
        scraped("iorepro_collect_bytes_total{op=\"write\"}"),
        Some(bytes(Op::Write) as f64)
    );
    assert_eq!(
        scraped("iorepro_collect_bytes_total{op=\"read\"}"),
        Some(bytes(Op::Read) as f64)
    );
    assert_eq!(
        scraped("iorepro_collect_events_total"),
        Some(manifest.events as f64)
    );
}
