//! Per-node captures of one job joined into one trace, rows in wall-clock `ts`
//! order. Hosts come through as recorded, and the events each capture lost are
//! added up, so the merged trace still says what is missing. Clocks are taken
//! as they are: nodes of a training cluster run NTP/PTP, and shifting one
//! node's rows would hide a real skew rather than fix it.

use std::path::{Path, PathBuf};

use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::manifest::{Anonymized, Manifest, Source};
use iorepro_format::reader::{MergeByTs, TraceReader};
use iorepro_format::writer::{TraceWriter, WriterOptions};

pub fn merge(inputs: &[PathBuf], out: &Path, segment_rows: usize) -> TraceResult<Manifest> {
    if inputs.is_empty() {
        return Err(TraceError::invalid(
            out,
            "merge needs at least one input trace",
        ));
    }
    let readers = inputs
        .iter()
        .map(|p| TraceReader::open(p))
        .collect::<TraceResult<Vec<_>>>()?;
    let first = readers[0].manifest().source;
    let source = if readers.iter().all(|r| r.manifest().source == first) {
        first
    } else {
        Source::Import
    };
    // Anonymized traces merge into one, which names no file of the
    // machine that merged them either.
    let anonymized = Anonymized::of_all(readers.iter().map(|r| r.manifest()));
    let mut opts = WriterOptions::new(source);
    opts.segment_rows = segment_rows.max(1);
    opts.command = anonymized.is_none().then(|| std::env::args().collect());
    let mut w = TraceWriter::create(out, opts)?;
    let streams = readers
        .iter()
        .map(|r| r.batches())
        .collect::<TraceResult<Vec<_>>>()?;
    for batch in MergeByTs::new(streams) {
        w.write_batch(&batch?)?;
    }
    // Per-node mount tables as one: the nodes of a job mount the same
    // storage at the same points, and a mount only one node has is kept.
    let mut mounts: Option<Vec<iorepro_format::mounts::Mount>> = None;
    for r in &readers {
        if let Some(m) = &r.manifest().mounts {
            iorepro_format::mounts::union(mounts.get_or_insert_with(Vec::new), m.clone());
        }
    }
    if let Some(m) = mounts {
        w.set_mounts(m);
    }
    w.set_process_starts(iorepro_format::processes::of_all(readers.iter().map(|r| {
        let m = r.manifest();
        (m.hosts.as_slice(), m.process_starts.as_slice())
    })));
    w.set_dropped_events(readers.iter().map(|r| r.manifest().dropped_events).sum());
    match anonymized {
        Some(a) => w.set_anonymized(a),
        None => w.set_extra(
            "merged_from",
            serde_json::json!(inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()),
        ),
    }
    w.finish()
}
