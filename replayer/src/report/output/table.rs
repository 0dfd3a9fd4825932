//! The report for people: a header, the rendezvous figures, one line per
//! phase, per op kind and per rank (the first 32, then a summary).

use crate::report::request_table::RequestsReport;
use std::fmt::Write as _;

use crate::report::storage::StorageReport;
use crate::report::summary::Report;
use iorepro_format::units::{GIB, MIB};

pub fn render(report: &Report) -> String {
    let mut s = header(report);
    s.push_str(&phases(report));
    s.push_str(&training(&report.training));
    s.push_str(&ops(report));
    if let Some(r) = &report.requests {
        s.push_str(&requests(r));
    }
    s.push_str(&ranks(report));
    s.push_str(&differences_and_errors(report));
    // The answer last, where the eye lands when the replay ends.
    if let Some(v) = &report.verdict {
        s.push_str(&v.render());
    }
    s
}

fn gib(b: u64) -> f64 {
    b as f64 / GIB
}

/// What ran, how long it took and what it moved; the stall, the metadata
/// rate, the preparation and (with `--explain`) how the ranks met.
fn header(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "replay: {} ranks on {} node(s) from {} trace ranks, timing {}, engine {}{}{}",
        report.ranks,
        report.nodes,
        report.trace.ranks,
        report.timing,
        report.engine,
        match report.direct.as_str() {
            "off" => String::new(),
            "reads" => ", O_DIRECT reads".into(),
            _ => ", O_DIRECT".into(),
        },
        if report.evict_reads {
            ", files read evicted at close"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "took {:.3} s (trace {:.3} s): read {:.3} GiB at {:.3} GiB/s, wrote {:.3} GiB at {:.3} GiB/s",
        report.duration_s,
        report.trace.duration_s,
        gib(report.read_bytes),
        report.read_gib_s,
        gib(report.write_bytes),
        report.write_gib_s
    );
    let mut parts = Vec::new();
    if let Some(busy) = report.gpu_busy {
        parts.push(format!(
            "stall {:.3} s on the most delayed rank; GPUs busy {:.1} % of the time",
            report.stall_s,
            busy * 100.0
        ));
    }
    if report.metadata_ops > 0 {
        parts.push(format!(
            "metadata: {} calls at {:.0} per second",
            report.metadata_ops, report.metadata_ops_per_s
        ));
    }
    parts.push(storage(&report.storage));
    let _ = writeln!(s, "{}", parts.join("; "));
    s.push_str(&prepared(report));
    if report.explain {
        s.push_str(&meeting(report));
    }
    s
}

/// What the storage itself served and was sent, as the kernel counts it.
fn storage(st: &StorageReport) -> String {
    let mut s = String::new();
    if let (Some(r), Some(w)) = (st.read_bytes, st.write_bytes) {
        let _ = write!(s, "the storage read {:.3} GiB", gib(r));
        if let Some(p) = st.cache_served_percent {
            let _ = write!(s, " ({p:.1} % of the bytes read came from memory)");
        }
        let _ = write!(s, " and was sent {:.3} GiB (the kernel's count)", gib(w));
    } else {
        s.push_str("the storage's own bytes not counted");
    }
    if let Some(note) = &st.note {
        let _ = write!(s, ": {note}");
    }
    s
}

fn prepared(report: &Report) -> String {
    let mut s = String::new();
    let Some(p) = &report.prepare else {
        return s;
    };
    let _ = write!(
        s,
        "prepared {} file(s) ({:.3} GiB) in {:.2} s, {} already present",
        p.files_created,
        gib(p.bytes_written),
        p.duration_s,
        p.files_present
    );
    if p.dirs_made + p.paths_cleared > 0 {
        let _ = write!(
            s,
            "; {} directories made, {} paths an earlier replay left cleared",
            p.dirs_made, p.paths_cleared
        );
    }
    if !p.requests.is_empty() {
        let kinds: Vec<String> = p.requests.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = write!(s, "; requests: {}", kinds.join(", "));
    }
    let _ = writeln!(s);
    s
}

/// How the ranks met, and how far apart they began their checkpoints.
fn meeting(report: &Report) -> String {
    let mut s = String::new();
    let rv = &report.rendezvous;
    if let (Some(wait), Some(release)) = (rv.barrier_wait_s, rv.barrier_release_ms) {
        let _ = write!(
            s,
            "ranks met through {}: {} barriers, waited {:.3} s per rank (max {:.3} s), released \
             {:.3} ms after the last arrival (max {:.3} ms)",
            rv.mechanism, rv.barriers, wait.p50, wait.max, release.p50, release.max
        );
        if rv.mechanism != "threads" {
            let _ = write!(s, "; gathering took {:.3} s", rv.gather_s);
        }
        if let Some(skew) = report.checkpoint_skew_ms {
            let _ = write!(
                s,
                "; saves began {:.3} ms apart (median, max {:.3} ms)",
                skew.p50, skew.max
            );
        }
        let _ = writeln!(s);
    }
    s
}

/// One line per phase of the trace, replayed or not.
fn phases(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{:<4} {:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "#", "phase", "time s", "trace s", "read GiB", "write GiB", "GiB/s", "slowest"
    );
    for (i, p) in report.phases.iter().enumerate() {
        if !p.replayed {
            let _ = writeln!(
                s,
                "{:<4} {:<11} {:>10} {:>10.3} (not replayed)",
                i,
                p.kind.as_str(),
                "-",
                p.trace_duration_s
            );
            continue;
        }
        let _ = writeln!(
            s,
            "{:<4} {:<11} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8}",
            i,
            p.kind.as_str(),
            p.duration_s,
            p.trace_duration_s,
            gib(p.read_bytes),
            gib(p.write_bytes),
            p.gib_s,
            p.slowest_rank.map_or("-".into(), |r| r.to_string())
        );
    }
    s
}

/// One line per op kind: count, rate and latency percentiles.
fn ops(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{:<10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "op",
        "count",
        "failed",
        "IOPS",
        "GiB/s",
        "p50 us",
        "p90 us",
        "p99 us",
        "p99.9 us",
        "max us"
    );
    for (k, o) in &report.ops {
        let l = &o.lat_us;
        let _ = writeln!(
            s,
            "{:<10} {:>10} {:>8} {:>10.0} {:>10.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            k, o.count, o.failed, o.iops, o.gib_s, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    s
}

/// One line per rank (the first 32, then the spread of the rest).
fn ranks(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{:<6} {:>6} {:>5} {:>10} {:>10} {:>10}",
        "rank", "source", "node", "time s", "GiB/s", "stall s"
    );
    const SHOWN: usize = 32;
    for r in report.per_rank.iter().take(SHOWN) {
        let _ = writeln!(
            s,
            "{:<6} {:>6} {:>5} {:>10.3} {:>10.3} {:>10.3}",
            r.rank, r.source_rank, r.node, r.duration_s, r.gib_s, r.stall_s
        );
    }
    if report.per_rank.len() > SHOWN {
        let mut v: Vec<f64> = report.per_rank.iter().map(|r| r.gib_s).collect();
        v.sort_by(f64::total_cmp);
        let _ = writeln!(
            s,
            "... {} more ranks; GiB/s per rank min {:.3} median {:.3} max {:.3}",
            report.per_rank.len() - SHOWN,
            v[0],
            v[v.len() / 2],
            v[v.len() - 1]
        );
    }
    s
}

/// Calls whose outcome was not the traced one, what was left out, what
/// could not be replayed, and the errors.
fn differences_and_errors(report: &Report) -> String {
    let mut s = String::new();
    if report.results_differed > 0 {
        let _ = writeln!(
            s,
            "\n{} call(s) succeeded where the traced one failed, or failed where it succeeded \
             (the differed column of each op in --json)",
            report.results_differed
        );
        for d in &report.result_differences {
            let _ = writeln!(s, "  {d}");
        }
    }
    if !report.copies.is_empty() {
        let _ = writeln!(
            s,
            "\ncopies the kernel made for the job (sendfile, copy_file_range, splice): \
             {} made as the call each was, {} half(s) made as a read or a write",
            report.copies.made, report.copies.split
        );
    }
    // What was left out, in one line (its details open the replay, on
    // stderr); nothing said twice when nothing was.
    s.push('\n');
    if report.left_out.total.calls > 0 {
        if let Some(first) = report.left_out.render().lines().next() {
            let _ = writeln!(s, "{first}");
        }
    }
    if report.tolerated_errors > 0 {
        let _ = writeln!(
            s,
            "\n{} op(s) could not be replayed and were skipped (no descriptor or file to act on)",
            report.tolerated_errors
        );
    }
    for e in &report.errors {
        let _ = writeln!(s, "error: {e}");
    }
    s
}

/// The requests to an object-storage target: one line per kind, time to
/// first byte, retries, and the calls that made none.
fn requests(r: &RequestsReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nrequests to {} (reads {}, multipart from {} B in {} B parts)",
        r.target, r.read, r.multipart_threshold, r.part_size
    );
    let _ = writeln!(
        s,
        "{:<13} {:>9} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "request", "count", "failed", "per s", "GiB/s", "p50 us", "p99 us", "max us"
    );
    for (k, o) in &r.kinds {
        let l = &o.lat_us;
        let _ = writeln!(
            s,
            "{:<13} {:>9} {:>7} {:>9.0} {:>10.3} {:>10.1} {:>10.1} {:>10.1}",
            k, o.count, o.failed, o.per_s, o.gib_s, l.p50, l.p99, l.max
        );
    }
    if let Some(t) = &r.first_byte_us {
        let _ = writeln!(
            s,
            "GET first byte: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            t.p50, t.p99, t.max
        );
    }
    let _ = writeln!(
        s,
        "retries {}, throttled {}, at most {} request(s) in flight per rank{}",
        r.retries,
        r.throttles,
        r.max_in_flight,
        r.concurrency
            .map_or(String::new(), |c| format!(" (--s3-concurrency {c})"))
    );
    if let Some(us) = r.client_cpu_us_per_request {
        let _ = writeln!(s, "the replay's client: {us:.0} us of CPU per request");
    }
    if !r.without_request.is_empty() {
        let calls: Vec<String> = r
            .without_request
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(s, "calls that made no request: {}", calls.join(", "));
    }
    s
}

/// Per epoch and per checkpoint, as a run of MLPerf Storage's benchmark
/// reports them.
fn training(t: &crate::report::training::Training) -> String {
    let mut s = String::new();
    if t.epochs.is_empty() && t.checkpoints.is_empty() && t.loads.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\n{:<8} {:>9} {:>10} {:>9} {:>7} {:>8} {:>10} {:>9} {:>12} {:>7}",
        "epoch",
        "phases",
        "time s",
        "stall s",
        "AU %",
        "whole %",
        "samples/s",
        "MiB/s",
        "storage MiB",
        "cache %"
    );
    let pct = |a: Option<f64>| a.map_or("-".into(), |a| format!("{a:.1}"));
    for (i, e) in t.epochs.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:<8} {:>9} {:>10.3} {:>9.3} {:>7} {:>8} {:>10.1} {:>9.1} {:>12} {:>7}",
            i + 1,
            format!("{}-{}", e.phases.0, e.phases.1),
            e.duration_s,
            e.stall_s,
            pct(e.au_percent),
            pct(e.au_whole_epoch_percent),
            e.samples_per_s,
            e.read_mib_s,
            e.storage_read_bytes
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / MIB)),
            pct(e.cache_served_percent)
        );
    }
    let mut parts = Vec::new();
    if let (Some(m), Some(sd)) = (t.au_mean_percent, t.au_stdev_percent) {
        parts.push(format!(
            "AU {m:.1} % mean, {sd:.1} stdev (MLPerf Storage's: each rank's first step left out; \
             whole %: the whole epoch)"
        ));
    }
    if let Some(span) = t.span_s {
        parts.push(format!("first epoch to last save {span:.3} s"));
    }
    if !parts.is_empty() {
        let _ = writeln!(s, "{}", parts.join("; "));
    }
    // Each save's figures are the verdict's, printed last.
    for l in &t.loads {
        let _ = writeln!(
            s,
            "checkpoint load (phase {}): {:.3} s, {:.3} GiB/s",
            l.phase, l.duration_s, l.gib_s
        );
    }
    s
}
