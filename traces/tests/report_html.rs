//! `report`: one HTML page of the bundled DDP sample whose headline figures
//! are `summary --json`'s, printed as `summary` prints them, with a row per
//! phase, both figures inline, and nothing that runs or is fetched; bad
//! input exits 2 with one line.

mod analysis_util;

use std::path::Path;

use analysis_util::*;
use iorepro_format::units::fmt_bytes;
use iorepro_plot::page::fetches;

fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/torch-ddp-dcp")
}

/// The headline box of `label`, as the page writes it.
fn headline(value: &str, label: &str) -> String {
    format!("<span class=\"value\">{value}</span><span class=\"label\">{label}</span>")
}

#[test]
fn report_holds_the_summary_figures_phases_and_pictures_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    let trace = sample();
    let t = trace.to_str().unwrap();
    let o = trace_cmd()
        .args(["report", t, "-o", page.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("report.html"));
    let html = std::fs::read_to_string(&page).unwrap();

    let s = json(&["summary", t, "--json"]);
    let bytes = |k: &str| fmt_bytes(s[k].as_u64().unwrap() as f64);
    let gib_s = |k: &str| format!("{:.3} GiB/s", s[k].as_f64().unwrap());
    let figures = [
        (s["events"].to_string(), "events"),
        (
            format!("{:.3} s", s["duration_s"].as_f64().unwrap()),
            "duration",
        ),
        (s["ranks"].as_array().unwrap().len().to_string(), "ranks"),
        (bytes("read_bytes"), "read"),
        (bytes("write_bytes"), "written"),
        (gib_s("peak_read_gib_s"), "peak read (1 s)"),
        (gib_s("peak_write_gib_s"), "peak write (1 s)"),
        (s["dropped_events"].to_string(), "dropped events"),
    ];
    assert_eq!(s["events"], 1233, "the sample's NOTE.md");
    for (value, label) in &figures {
        assert!(
            html.contains(&headline(value, label)),
            "headline `{label}` = `{value}` missing"
        );
    }
    // Headline first, then the pictures, then the tables.
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` missing"))
    };
    assert!(at("class=\"headline\"") < at("<svg"));
    assert!(at("<svg") < at("<h2>Phases</h2>"));
    assert_eq!(html.matches("<svg").count(), 2, "timeline and heatmap");

    // A row per phase, in order, as `phases --json` lists them.
    let phases = json(&["phases", t, "--json"]);
    let table = &html[at("<h2>Phases</h2>")..at("<h2>Files by role and mount</h2>")];
    let kinds: Vec<&str> = table
        .split("<tr><td>")
        .skip(1)
        .map(|row| row.split('<').next().unwrap())
        .collect();
    let want: Vec<&str> = phases["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, want);

    // The files by role: every role `files --json` counts, with its files.
    let files = json(&["files", t, "--json"]);
    let roles = &html[at("<h2>Files by role and mount</h2>")..at("<h2>Op mix</h2>")];
    for (role, totals) in files["roles"].as_object().unwrap() {
        if totals["files"].as_u64().unwrap() + totals["directories"].as_u64().unwrap() > 0 {
            assert!(roles.contains(&format!("<tr><td>{role}</td>")), "{role}");
        }
    }
    let ops = &html[at("<h2>Op mix</h2>")..];
    for (op, st) in s["ops"].as_object().unwrap() {
        assert!(
            ops.contains(&format!(
                "<tr><td>{op}</td><td class=\"num\">{}</td>",
                st["count"]
            )),
            "{op}"
        );
    }

    assert!(!html.to_ascii_lowercase().contains("<script"));
    assert_eq!(fetches(&html), Vec::<String>::new(), "nothing is fetched");
}

#[test]
fn report_of_bad_input_exits_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            tmp.path().to_path_buf(),
            tmp.path().join("r.html"),
            "not a trace",
        ),
        (
            sample(),
            tmp.path().join("nodir/r.html"),
            "output directory does not exist",
        ),
    ];
    for (trace, page, says) in cases {
        let o = trace_cmd()
            .args([
                "report",
                trace.to_str().unwrap(),
                "-o",
                page.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("Error: ") && err.contains(says), "{err}");
        assert!(!page.exists());
    }
}
