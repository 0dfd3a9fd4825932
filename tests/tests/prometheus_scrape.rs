//! A real Prometheus server (Debian's `prometheus`) scrapes a running replay
//! through `--metrics-addr`; what it stored, asked through its HTTP API,
//! must equal the replay's own final report, byte for byte.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use iorepro_tests::bins::{bin, scratch, wait_for, workspace_root};
use iorepro_tests::http::{encode, free_port, get};
use iorepro_tests::samples::{sample, TORCH_DDP};

/// The server, stopped when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_prometheus(dir: &Path, target: &str, web: &str) -> Result<Prometheus, String> {
    let exe = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("prometheus is not installed (apt package prometheus; `cargo xtask setup`)")?;
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: iorepro-replay\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("starting {exe}: {e}"))?;
    let server = Prometheus(child);
    if !wait_for(Duration::from_secs(30), || get(web, "/-/ready").is_ok()) {
        return Err("prometheus was not ready within 30 s".into());
    }
    Ok(server)
}

/// The value of an instant PromQL query that yields one number.
fn query(web: &str, promql: &str) -> Option<f64> {
    let body = get(web, &format!("/api/v1/query?query={}", encode(promql))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_a_replay_and_sees_its_final_bytes() {
    let root = scratch("prometheus-scrape");
    let (metrics, web) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let _server = match start_prometheus(&root, &metrics, &web) {
        Ok(s) => s,
        Err(why) => return iorepro_tests::skip::cannot_run(why),
    };
    // Original timing keeps the replay running across several scrapes; the
    // endpoint then lingers so the final figures are scraped too.
    let out = Command::new(bin("iorepro-replay"))
        .arg(sample(TORCH_DDP))
        .arg("--target")
        .arg(root.join("target"))
        .args(["--ranks", "4", "--timing", "original", "--json"])
        .args(["--metrics-addr", &metrics, "--metrics-linger", "4s"])
        .args(["--status-interval", "1s", "--status-file"])
        .arg(root.join("status.jsonl"))
        .output()
        .expect("iorepro-replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let finished = query(&web, "max_over_time(iorepro_replay_finished[5m])");
    assert_eq!(
        finished,
        Some(1.0),
        "Prometheus never saw the final figures"
    );
    let scrapes = query(&web, "count_over_time(iorepro_replay_finished[5m])").unwrap_or(0.0);
    assert!(scrapes >= 3.0, "only {scrapes} scrapes of a running replay");
    for (op, key) in [("read", "read_bytes"), ("write", "write_bytes")] {
        let seen = query(
            &web,
            &format!("max_over_time(iorepro_replay_bytes_total{{op=\"{op}\"}}[5m])"),
        );
        let reported = report[key].as_u64().unwrap();
        assert!(reported > 0);
        assert_eq!(seen, Some(reported as f64), "{key}");
        let calls = query(
            &web,
            &format!("max_over_time(iorepro_replay_ops_total{{op=\"{op}\"}}[5m])"),
        );
        assert_eq!(calls, report["ops"][op]["count"].as_f64(), "{op} calls");
    }
    // The last status line agrees with the report too.
    let lines = std::fs::read_to_string(root.join("status.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["read_bytes"], report["read_bytes"]);
    assert_eq!(last["write_bytes"], report["write_bytes"]);
    // Every query of the shipped Grafana dashboard is one Prometheus accepts.
    let dashboard = workspace_root().join("deploy/grafana/iorepro-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dashboard).unwrap()).unwrap();
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let promql = expr
                .replace("$instance", ".*")
                .replace("$op", ".*")
                .replace("$__rate_interval", "1m");
            let answer = get(&web, &format!("/api/v1/query?query={}", encode(&promql)));
            assert!(answer.is_ok(), "dashboard query `{expr}`: {answer:?}");
            checked += 1;
        }
    }
    assert!(checked >= 10);
    eprintln!(
        "{scrapes} scrapes; Prometheus saw {} B read, {} B written; last line: {last}",
        report["read_bytes"], report["write_bytes"]
    );
}
