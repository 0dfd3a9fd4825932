//! The timeline plot is a well-formed SVG (parsed by Python's XML parser) that
//! shows the phases: a shaded rectangle per phase, a label per checkpoint, a
//! legend entry per phase kind and both series, and axis titles.

mod analysis_util;

use analysis_util::*;

const INSPECT_SVG: &str = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
texts = ["".join(t.itertext()).strip() for t in root.iter(ns + "text")]
rects = [r.attrib for r in root.iter(ns + "rect")]
print(json.dumps({"tag": root.tag, "texts": texts, "rects": len(rects),
                  "lines": len(list(root.iter(ns + "polyline")))}))
"#;

#[test]
fn plot_is_valid_svg_with_phases() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(4, 3, 12, "sequential"));
    let svg = tmp.path().join("timeline.svg");
    let out = trace_cmd()
        .args(["plot", trace.to_str().unwrap(), "-o", svg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let phases = json(&["phases", trace.to_str().unwrap(), "--json"]);
    let n_phases = phases["phases"].as_array().unwrap().len();

    let v = python_json(INSPECT_SVG, &[svg.to_str().unwrap()]);
    assert_eq!(v["tag"], "{http://www.w3.org/2000/svg}svg");
    let texts: Vec<&str> = v["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let count = |s: &str| texts.iter().filter(|t| **t == s).count();
    assert_eq!(
        count("checkpoint"),
        3,
        "one label per checkpoint: {texts:?}"
    );
    assert_eq!(count("load"), 1, "{texts:?}");
    for legend in [
        "read GiB/s",
        "write GiB/s",
        "checkpoint phase",
        "load phase",
        "read phase",
    ] {
        assert_eq!(count(legend), 1, "legend `{legend}`: {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("time since first event (s)")),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t.starts_with("GiB/s")), "{texts:?}");
    // Background + one rectangle per phase + legend box and swatches.
    assert!(v["rects"].as_u64().unwrap() as usize > n_phases, "{v}");
    assert!(
        v["lines"].as_u64().unwrap() >= 2,
        "read and write series: {v}"
    );
}
