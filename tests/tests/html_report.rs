//! The trace report of the bundled DDP sample opened in a real browser
//! (headless Chromium, offline): it renders without a console message, a
//! reader sees the headline figures `summary --json` gives, as `summary`
//! prints them, before the figures and the tables, and a screenshot of it
//! is kept (`target/tmp/html-report/report.png`) to be looked at.

use std::path::Path;
use std::process::Command;

use iorepro_format::units::fmt_bytes;
use iorepro_tests::bins::{bin, run_json, run_ok};
use iorepro_tests::browser;
use iorepro_tests::samples::{sample, TORCH_DDP};
use iorepro_tests::skip::cannot_run;

/// PNG's signature, then the IHDR chunk's width and height.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    (png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR")
        .then(|| (be(&png[16..20]), be(&png[20..24])))
}

#[test]
fn report_renders_in_a_browser_with_the_summary_figures_first() {
    if let Some(why) = browser::missing() {
        cannot_run(why);
        return;
    }
    // Kept after the run, whatever its outcome: the screenshot is for eyes.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let trace = sample(TORCH_DDP);
    let page = dir.join("report.html");
    let shot = dir.join("report.png");
    run_ok(
        Command::new(bin("iorepro-trace"))
            .arg("report")
            .arg(&trace)
            .arg("-o")
            .arg(&page),
    );
    let text = browser::render(&page, &shot).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    eprintln!("screenshot: {}", shot.display());

    let s = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("summary")
            .arg(&trace)
            .arg("--json"),
    );
    let bytes = |k: &str| fmt_bytes(s[k].as_u64().unwrap() as f64);
    let gib_s = |k: &str| format!("{:.3} GiB/s", s[k].as_f64().unwrap());
    let headline = [
        (s["events"].to_string(), "events"),
        (s["dropped_events"].to_string(), "dropped events"),
        (
            format!("{:.3} s", s["duration_s"].as_f64().unwrap()),
            "duration",
        ),
        (s["ranks"].as_array().unwrap().len().to_string(), "ranks"),
        (bytes("read_bytes"), "read"),
        (bytes("write_bytes"), "written"),
        (gib_s("peak_read_gib_s"), "peak read (1 s)"),
        (gib_s("peak_write_gib_s"), "peak write (1 s)"),
    ];
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` is not on the page: {text}"))
    };
    for (value, label) in &headline {
        at(&format!("{value} {label}"));
    }
    let last_figure = at(&format!("{} {}", headline[7].0, headline[7].1));
    // The figures' own text is drawn too (inline SVG, not a missing image).
    assert!(last_figure < at("read vs write bandwidth"));
    assert!(at("read vs write bandwidth") < at("I/O per rank over time"));
    assert!(at("I/O per rank over time") < at("Phases"));
    assert!(at("Phases") < at("Files by role and mount"));
    assert!(at("Files by role and mount") < at("Op mix"));

    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
    assert_eq!(
        png_size(&png),
        Some(browser::WINDOW),
        "{}: a PNG of the window",
        shot.display()
    );
}

#[test]
fn a_page_that_logs_to_the_console_fails_the_check() {
    if let Some(why) = browser::missing() {
        cannot_run(why);
        return;
    }
    let dir = iorepro_tests::bins::scratch("html-report-check");
    let policy = r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'">"#;
    let pages = [
        (
            "uncaught.html",
            "<script>not_defined()</script>",
            "Uncaught",
        ),
        (
            "fetch.html",
            r#"<img src="http://example.invalid/x.png">"#,
            "Content Security Policy",
        ),
    ];
    for (name, body, says) in pages {
        let page = dir.join(name);
        let head = if name == "fetch.html" { policy } else { "" };
        std::fs::write(
            &page,
            format!(
                "<!DOCTYPE html><html><head>{head}</head><body><p>hello</p>{body}</body></html>"
            ),
        )
        .unwrap();
        let err = browser::render(&page, &dir.join(format!("{name}.png")))
            .expect_err(&format!("{name} logs to the console"));
        assert!(err.contains(says), "{name}: {err}");
    }
    let fine = dir.join("fine.html");
    std::fs::write(
        &fine,
        "<!DOCTYPE html><html><body><p>a &amp; b</p></body></html>",
    )
    .unwrap();
    assert_eq!(
        browser::render(&fine, &dir.join("fine.png")).unwrap(),
        "a & b"
    );
}

#[test]
fn a_replays_page_renders_with_the_verdicts_figures_of_its_json() {
    if let Some(why) = browser::missing() {
        cannot_run(why);
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-replay-report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let page = dir.join("replay.html");
    let shot = dir.join("replay.png");
    let r = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(sample(TORCH_DDP))
            .arg("--target")
            .arg(dir.join("target"))
            .args(["--ranks", "4", "--timing", "original", "--json", "--report"])
            .arg(&page),
    );
    let text = browser::render(&page, &shot).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    eprintln!("screenshot: {}", shot.display());
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` is not on the page: {text}"))
    };
    let v = &r["verdict"];
    let f = |x: &serde_json::Value, digits: usize| format!("{:.digits$}", x.as_f64().unwrap());
    // The verdict's block, figure by figure as --json gives them.
    at(&format!(
        "== verdict: {} rank(s) on {} node(s)",
        v["ranks"], v["nodes"]
    ));
    for (i, e) in v["epochs"].as_array().unwrap().iter().enumerate() {
        at(&format!(
            "{} {} s AU {} %",
            i + 1,
            f(&e["duration_s"], 2),
            f(&e["au_percent"], 1)
        ));
    }
    let saves = v["saves"].as_array().unwrap();
    assert_eq!(saves.len(), 3, "{v:#}");
    for (i, s) in saves.iter().enumerate() {
        at(&format!(
            "{}: {} in {} s, {} GiB/s",
            i + 1,
            fmt_bytes(s["bytes"].as_u64().unwrap() as f64),
            f(&s["duration_s"], 2),
            f(&s["gib_s"], 3)
        ));
    }
    at(&format!(
        "reads {} GiB/s for AU >= 90 %",
        f(&v["read_gib_s_for_au"], 3)
    ));
    // The headline first, then the verdict, the pictures and the tables.
    let lowest = v["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["au_percent"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(at(&format!("{lowest:.1} % lowest epoch AU")) < at("== verdict"));
    assert!(at("== verdict") < at("the replay at 4 ranks"));
    assert!(at("the replay at 4 ranks") < at("Epochs"));
    assert!(at("Epochs") < at("Saves"));
    assert!(at("Saves") < at("The trace's files by role and mount"));
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
    assert_eq!(png_size(&png), Some(browser::WINDOW), "{}", shot.display());
}
