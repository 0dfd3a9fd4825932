//! The timeline plot is a well-formed SVG (parsed by Python's XML parser)
//! that shows the phases: a shaded rectangle per phase, a name per
//! checkpoint, names that never overlap, a legend beside the data (never on
//! it) with an entry per phase kind and both series, and axis titles. The
//! PNG decodes at the figure's size; the heatmap and the capture-against-
//! replay figure hold what they promise.

mod analysis_util;

use std::path::Path;

use analysis_util::*;
use iorepro_plot::canvas::text_size;
use iorepro_plot::timeline::LABEL_PT;

const INSPECT_SVG: &str = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
texts = [{"text": "".join(t.itertext()).strip(), "x": float(t.get("x")), "y": float(t.get("y")),
          "anchor": t.get("text-anchor", "start")} for t in root.iter(ns + "text")]
rects = [{k: float(r.get(k, 0)) for k in ("x", "y", "width", "height")} | {"fill": r.get("fill", "")}
         for r in root.iter(ns + "rect")]
print(json.dumps({"tag": root.tag, "width": root.get("width"), "height": root.get("height"),
                  "texts": texts, "rects": rects, "lines": len(list(root.iter(ns + "polyline")))}))
"#;

fn plot(trace: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec!["plot", trace.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = trace_cmd().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn texts(v: &serde_json::Value) -> Vec<(String, f64, f64)> {
    v["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().to_string(),
                t["x"].as_f64().unwrap(),
                t["y"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Phase names (left-anchored) on one line never share pixels.
fn assert_names_apart(v: &serde_json::Value) {
    let names: Vec<(String, f64, f64)> = texts(v)
        .into_iter()
        .filter(|(t, _, _)| ["load", "checkpoint", "idle"].contains(&t.as_str()))
        .collect();
    assert!(!names.is_empty());
    for (i, (a, xa, ya)) in names.iter().enumerate() {
        let wa = text_size(a, LABEL_PT).0 as f64;
        for (b, xb, yb) in names.iter().skip(i + 1) {
            let wb = text_size(b, LABEL_PT).0 as f64;
            if (ya - yb).abs() < 1.0 {
                assert!(
                    xa + wa <= *xb || xb + wb <= *xa,
                    "`{a}` at {xa} and `{b}` at {xb} overlap on line {ya}"
                );
            }
        }
    }
}

#[test]
fn plot_is_valid_svg_with_phases_names_apart_and_legend_beside() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(4, 3, 12, "sequential"));
    let svg = tmp.path().join("timeline.svg");
    plot(&trace, &svg, &[]);
    let phases = json(&["phases", trace.to_str().unwrap(), "--json"]);
    let n_phases = phases["phases"].as_array().unwrap().len();

    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    assert_eq!(v["tag"], "{http://www.w3.org/2000/svg}svg");
    let t = texts(&v);
    let count = |s: &str| t.iter().filter(|(x, _, _)| x == s).count();
    assert_eq!(count("checkpoint"), 3, "one name per checkpoint: {t:?}");
    assert_eq!(count("load"), 1, "{t:?}");
    let legend = [
        "read GiB/s",
        "write GiB/s",
        "checkpoint phase",
        "load phase",
        "read phase",
    ];
    for entry in legend {
        assert_eq!(count(entry), 1, "legend `{entry}`: {t:?}");
    }
    assert!(t
        .iter()
        .any(|(x, _, _)| x.starts_with("time since first event (s)")));
    assert!(t.iter().any(|(x, _, _)| x.starts_with("GiB/s")));
    // Background + one rectangle per phase + legend swatches.
    let rects = v["rects"].as_array().unwrap();
    assert!(rects.len() > n_phases, "{v}");
    assert!(
        v["lines"].as_u64().unwrap() >= 2,
        "read and write series: {v}"
    );
    assert_names_apart(&v);
    // The legend starts right of every shaded phase.
    let data_right = rects
        .iter()
        .filter(|r| r["width"].as_f64().unwrap() < 1100.0)
        .filter(|r| r["height"].as_f64().unwrap() > 100.0)
        .map(|r| r["x"].as_f64().unwrap() + r["width"].as_f64().unwrap())
        .fold(0.0, f64::max);
    for (text, x, _) in t.iter().filter(|(x, _, _)| legend.contains(&x.as_str())) {
        assert!(
            *x > data_right,
            "legend `{text}` at {x} is over the data (right edge {data_right})"
        );
    }
}

#[test]
fn names_of_crowded_phases_never_overlap() {
    // Checkpoints every 2 steps on a short job: far more names than room.
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(2, 20, 2, "sequential"));
    let svg = tmp.path().join("crowded.svg");
    plot(&trace, &svg, &[]);
    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    assert_names_apart(&v);
    // The bundled capture: a checkpoint right before an idle stretch.
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/torch-ddp-dcp");
    let svg = tmp.path().join("sample.svg");
    plot(&sample, &svg, &[]);
    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    assert_names_apart(&v);
    let t = texts(&v);
    assert_eq!(t.iter().filter(|(x, _, _)| x == "checkpoint").count(), 3);
    assert_eq!(t.iter().filter(|(x, _, _)| x == "idle").count(), 2);
}

fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

#[test]
fn png_decodes_at_the_figure_size_and_is_drawn() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(2, 2, 8, "random"));
    let out = tmp.path().join("timeline.png");
    plot(&trace, &out, &[]);
    let (w, h, pixels) = decode_png(&out);
    assert_eq!((w, h), (1200, 460));
    // Shading, series and text: many colours, not a blank canvas.
    let colours: std::collections::HashSet<&[u8]> = pixels.chunks(3).collect();
    assert!(colours.len() > 20, "{} colours", colours.len());
    let heat = tmp.path().join("heat.png");
    plot(&trace, &heat, &["--heatmap"]);
    assert_eq!(decode_png(&heat).0, 1200);
    let bad = tmp.path().join("timeline.jpg");
    let o = trace_cmd()
        .args(["plot", trace.to_str().unwrap(), "-o", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(".svg or a .png"));
}

#[test]
fn heatmap_has_a_row_per_rank_and_cells_where_ranks_did_io() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(4, 2, 8, "sequential"));
    let svg = tmp.path().join("heat.svg");
    plot(&trace, &svg, &["--heatmap"]);
    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    let t = texts(&v);
    for rank in ["0", "1", "2", "3"] {
        // Each rank named once per panel (read, write).
        assert_eq!(
            t.iter().filter(|(x, _, _)| x == rank).count(),
            2,
            "{rank}: {t:?}"
        );
    }
    assert!(t.iter().any(|(x, _, _)| x == "bytes read per rank"));
    assert!(t.iter().any(|(x, _, _)| x == "bytes written per rank"));
    let cells = v["rects"].as_array().unwrap().len();
    assert!(cells > 100, "{cells} rectangles");
}

#[test]
fn capture_against_its_replay_shares_one_time_axis() {
    let tmp = tempfile::tempdir().unwrap();
    let a = synth(tmp.path(), "a", &workload(2, 2, 8, "sequential"));
    let b = synth(tmp.path(), "b", &workload(2, 2, 8, "random"));
    let svg = tmp.path().join("against.svg");
    plot(&a, &svg, &["--against", b.to_str().unwrap()]);
    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    let t = texts(&v);
    assert!(t.iter().any(|(x, _, _)| x == "a (capture)"), "{t:?}");
    assert!(t.iter().any(|(x, _, _)| x == "b (replay)"), "{t:?}");
    let axes: Vec<f64> = t
        .iter()
        .filter(|(x, _, _)| x.starts_with("time since first event"))
        .map(|(_, x, _)| *x)
        .collect();
    assert_eq!(axes.len(), 2);
    // The same axis: both panels' time ticks (the numbers on each panel's
    // lowest line of numbers) read the same at the same x positions.
    let h = v["height"].as_str().unwrap().parse::<f64>().unwrap();
    let mid = (h + 40.0) / 2.0;
    let x_ticks = |lo: f64, hi: f64| -> Vec<(String, f64)> {
        let numbers: Vec<&(String, f64, f64)> = t
            .iter()
            .filter(|(s, _, y)| *y > lo && *y < hi && s.parse::<f64>().is_ok())
            .collect();
        let lowest = numbers.iter().map(|n| n.2).fold(0.0, f64::max);
        numbers
            .iter()
            .filter(|n| (n.2 - lowest).abs() < 1.0)
            .map(|n| (n.0.clone(), n.1))
            .collect()
    };
    let top = x_ticks(0.0, mid);
    assert!(top.len() >= 3, "{top:?}");
    assert_eq!(top, x_ticks(mid, h));
    let png = tmp.path().join("against.png");
    plot(&a, &png, &["--against", b.to_str().unwrap()]);
    assert_eq!(decode_png(&png).1, 40 + 2 * 420);
}
